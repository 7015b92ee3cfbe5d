//! The secrets rooms' unit tests: declarations, placeholders, the filled
//! header, encoded echoes and the scrubber, as one would meet them.

use super::echoes::b64;
use super::placeholder::{alphabet_of, random_bytes};
use super::*;
use base64::Engine;

const REAL: &str = "ghp_R3alT0kenValue0123456789abcdefABCD";

fn parsed(spec: &str) -> Secrets {
    Secrets::parse(
        spec,
        |v| match v {
            "GH_TOKEN" => Some(REAL.to_string()),
            "SHORT" => Some("abc".into()),
            "SPACED" => Some("has a space in it".into()),
            _ => None,
        },
        |h| h != "evil.example",
    )
}

#[test]
fn entries_are_read_with_their_wire_forms_and_bad_ones_refused_with_a_reason() {
    let s = parsed(
        "GH_TOKEN@github.com,api.github.com; GH_TOKEN@git.example=basic:x-access-token;\
         GH_TOKEN@registry.example=header:X-Api-Key; GH_TOKEN@evil.example; MISSING@a.example;\
         SHORT@a.example; SPACED@a.example; bad entry; GH_TOKEN@*.example; GH_TOKEN@a.example=cookie",
    );
    let got: Vec<(&str, Vec<&str>, &Wire)> = s
        .accepted
        .iter()
        .map(|s| {
            (
                s.var.as_str(),
                s.hosts.iter().map(String::as_str).collect(),
                &s.wire,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "GH_TOKEN",
                vec!["github.com", "api.github.com"],
                &Wire::Bearer
            ),
            (
                "GH_TOKEN",
                vec!["git.example"],
                &Wire::Basic {
                    user: "x-access-token".into()
                }
            ),
            (
                "GH_TOKEN",
                vec!["registry.example"],
                &Wire::Header {
                    name: "X-Api-Key".into()
                }
            ),
        ]
    );
    let refused: Vec<&str> = s.refused.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        refused,
        vec![
            "GH_TOKEN@evil.example",
            "MISSING@a.example",
            "SHORT@a.example",
            "SPACED@a.example",
            "bad entry",
            "GH_TOKEN@*.example",
            "GH_TOKEN@a.example=cookie"
        ]
    );
    assert!(
        s.refused[0].1.contains("NIB_SANDBOX_NETWORK"),
        "{:?}",
        s.refused
    );
    // Every declared variable has one placeholder, refused ones too.
    let vars: Vec<&str> = s.placeholders.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(vars, vec!["GH_TOKEN", "MISSING", "SHORT", "SPACED"]);
    assert!(
        s.accepted
            .iter()
            .all(|a| a.placeholder == s.placeholders[0].1)
    );
    // Descriptions name variables and hosts, never the value.
    let text = s.describe().join("\n");
    assert!(
        text.contains("GH_TOKEN → github.com, api.github.com"),
        "{text}"
    );
    assert!(!text.contains(REAL) && !format!("{s:?}").contains(REAL));
}

#[test]
fn a_placeholder_is_the_vendor_prefix_and_random_characters_of_the_alphabet() {
    for (real, prefix) in [
        (REAL, "ghp_"),
        ("github_pat_11ABCDEFG0123456789_abcdefXYZ", "github_pat_"),
        ("glpat-AbCdEf0123456789xyz", "glpat-"),
        ("sk-ant-api03-abcDEF123-_x", "sk-ant-api03-"),
        ("xoxb-1234-5678-abcdef", "xoxb-"),
        ("deadbeef00112233", ""),
        ("12345678", ""),
        ("AKIA/abc+def/ghi=", ""),
    ] {
        let p = placeholder_for(real);
        assert_eq!(p.len(), real.len(), "{real} {p}");
        assert!(p.starts_with(prefix), "{real} {p}");
        let alphabet = alphabet_of(&real[prefix.len()..]);
        for (a, b) in real.chars().zip(p.chars()).skip(prefix.len()) {
            if a == '/' {
                assert_eq!(b, '/', "{real} {p}");
            } else {
                assert_ne!(a, b, "{real} {p}: a real character at its place");
                assert!(alphabet.contains(&(b as u8)), "{real} {p}: {b:?}");
            }
        }
    }
    // A hex token's placeholder is hex; digits stay digits.
    assert!(
        placeholder_for("deadbeef00112233")
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
    );
    assert!(
        placeholder_for("12345678")
            .bytes()
            .all(|b| b.is_ascii_digit())
    );
    assert_ne!(placeholder_for(REAL), placeholder_for(REAL));
}

/// Over 200 random base64url tokens (with and without a vendor prefix),
/// the placeholder past the prefix never repeats four of the token's
/// characters at the same place (the old placeholder kept everything
/// up to the last `-` or `_` of the first 16).
#[test]
fn no_placeholder_shows_a_run_of_the_tokens_own_characters() {
    const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for i in 0..200 {
        let body: String = random_bytes(40)
            .iter()
            .map(|b| char::from(B64URL[usize::from(*b) % B64URL.len()]))
            .collect();
        let prefix = ["", "ghp_", "glpat-", "sk-ant-api03-"][i % 4];
        let real = format!("{prefix}{body}");
        let p = placeholder_for(&real);
        assert!(p.starts_with(prefix), "{real} {p}");
        let same: Vec<bool> = real
            .bytes()
            .zip(p.bytes())
            .skip(prefix.len())
            .map(|(a, b)| a == b)
            .collect();
        assert!(
            !same.windows(4).any(|w| w.iter().all(|s| *s)),
            "{real} -> {p}: four of the secret's characters in place"
        );
    }
}

#[test]
fn only_the_declared_header_is_filled_and_a_stray_placeholder_is_noticed() {
    let s = parsed("GH_TOKEN@h.example; GH_TOKEN@b.example=basic:bot");
    let (bearer, basic) = (&s.accepted[0], &s.accepted[1]);
    let ph = &bearer.placeholder;
    let head = format!(
        "POST /x?t={ph} HTTP/1.1\r\nHost: h.example\r\nauthorization: Bearer {ph}\r\nX-Other: {ph}"
    );
    let (out, stray) = fill_request_head(&head, &[bearer]);
    assert_eq!(
        out,
        format!(
            "POST /x?t={ph} HTTP/1.1\r\nHost: h.example\r\nauthorization: Bearer {REAL}\r\nX-Other: {ph}"
        )
    );
    assert!(stray);
    let (out, stray) = fill_request_head(
        &format!("GET / HTTP/1.1\r\nAuthorization: token {ph}"),
        &[bearer],
    );
    assert_eq!(
        out,
        format!("GET / HTTP/1.1\r\nAuthorization: token {REAL}")
    );
    assert!(!stray);
    // Basic: only the declared user's pair.
    let pair = |u: &str, v: &str| b64(&format!("{u}:{v}"));
    let (out, _) = fill_request_head(
        &format!("GET / HTTP/1.1\r\nAuthorization: Basic {}", pair("bot", ph)),
        &[basic],
    );
    assert_eq!(
        out,
        format!(
            "GET / HTTP/1.1\r\nAuthorization: Basic {}",
            pair("bot", REAL)
        )
    );
    let other = format!("GET / HTTP/1.1\r\nAuthorization: Basic {}", pair("eve", ph));
    assert_eq!(fill_request_head(&other, &[basic]).0, other);
    // No secret for the host: nothing changes.
    let plain = format!("GET / HTTP/1.1\r\nAuthorization: Bearer {ph}");
    assert_eq!(fill_request_head(&plain, &[]).0, plain);
    assert!(s.holds_placeholder(plain.as_bytes()));
    assert!(!s.holds_placeholder(b"GET / HTTP/1.1"));
}

/// Undoes JSON's `\uXXXX` and `\/` and percent-encoding (the test's
/// own decoders, to read what the program would).
fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let hex = |a: usize, n: usize| {
            s.get(a..a + n)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        };
        if s[i..].starts_with(b"\\u00")
            && let Some(b) = hex(i + 4, 2)
        {
            out.push(b);
            i += 6;
        } else if s[i..].starts_with(b"\\/") {
            out.push(b'/');
            i += 2;
        } else if s[i] == b'%'
            && let Some(b) = hex(i + 1, 2)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

fn scrubbed(pairs: &[(Vec<u8>, Vec<u8>)], text: &[u8], cut: usize) -> Vec<u8> {
    let mut scrub = Scrubber::new(pairs.to_vec());
    let mut out = Vec::new();
    for piece in text.chunks(cut) {
        out.extend(scrub.push(piece));
    }
    out.extend(scrub.finish());
    out
}

/// A server echoing the token JSON-escaped, percent-encoded or in
/// base64 (at any offset, either alphabet) gives the program the
/// placeholder in the same encoding, never the token.
#[test]
fn encoded_echoes_come_back_as_the_placeholder_in_the_same_encoding() {
    let real = "ghp_R3al/T0ken+Value0123456789abcd?fABCD";
    // Fresh placeholders: each run of the checks below meets others.
    for _ in 0..20 {
        encoded_echoes_of(real, &placeholder_for(real));
    }
}

fn encoded_echoes_of(real: &str, ph: &str) {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    let pairs = encoded_echoes(real.as_bytes(), ph.as_bytes());
    let framed = |v: &str| format!("{{\"said\":\"Bearer {v}\"}}");
    let json_u: String = real.bytes().map(|b| format!("\\u{:04X}", b)).collect();
    let json_some: String = real
        .bytes()
        .map(|b| match b {
            b'/' => "\\/".to_string(),
            b'+' | b'?' => format!("\\u{:04x}", b),
            b => char::from(b).to_string(),
        })
        .collect();
    let pct_all: String = real.bytes().map(|b| format!("%{b:02x}")).collect();
    let pct_some: String = real
        .bytes()
        .map(|b| match b {
            b'/' | b'+' | b'?' => format!("%{b:02X}"),
            b => char::from(b).to_string(),
        })
        .collect();
    for (text, want) in [
        (framed(&json_u), framed(ph)),
        (framed(&json_some), framed(ph)),
        (framed(&real.replace('/', "\\/")), framed(ph)),
        (format!("q={pct_all}&x"), format!("q={ph}&x")),
        (format!("q={pct_some}&x"), format!("q={ph}&x")),
    ] {
        for cut in [1, 5, 1000] {
            let out = scrubbed(&pairs, text.as_bytes(), cut);
            assert_eq!(out.len(), text.len(), "{text}");
            assert_eq!(String::from_utf8(unescape(&out)).unwrap(), want, "{text}");
        }
    }
    // base64 of the header line, the Basic pair, the bare value: each
    // starts the value at another of the three offsets.
    for lead in ["Bearer ", "bot:", "", "ab"] {
        let plain = format!("{lead}{real}\n");
        for encoded in [STANDARD.encode(&plain), URL_SAFE_NO_PAD.encode(&plain)] {
            let out = scrubbed(&pairs, encoded.as_bytes(), 7);
            assert_eq!(out.len(), encoded.len());
            let decoded = STANDARD
                .decode(&out)
                .or_else(|_| URL_SAFE_NO_PAD.decode(&out))
                .unwrap();
            let decoded = String::from_utf8_lossy(&decoded).into_owned();
            assert!(!decoded.contains(&real[4..]), "{lead:?}: {decoded}");
            // All but the bits shared with a neighbour are the
            // placeholder's.
            assert!(
                decoded.contains(&ph[1..ph.len() - 1]),
                "{lead:?}: {decoded} (placeholder {ph})"
            );
        }
    }
}

#[test]
fn the_scrubber_replaces_values_cut_across_pieces() {
    let text = format!("echo {REAL} and {REAL}{REAL}.");
    let s = parsed("GH_TOKEN@h.example");
    let ph = s.accepted[0].placeholder.clone();
    let want = format!("echo {ph} and {ph}{ph}.");
    for cut in [1, 3, 7, 20, 1000] {
        let mut scrub = Scrubber::new(s.accepted[0].echoes());
        let mut out = Vec::new();
        for piece in text.as_bytes().chunks(cut) {
            out.extend(scrub.push(piece));
        }
        out.extend(scrub.finish());
        assert_eq!(String::from_utf8(out).unwrap(), want, "cut {cut}");
    }
    // A piece that ends in nothing a value (or an encoding of one)
    // could begin with passes whole, at once (a stream of events); one
    // that ends in the start of one is held back only that far.
    let mut scrub = Scrubber::new(s.accepted[0].echoes());
    assert_eq!(scrub.push(b"data: hello\n\n"), b"data: hello\n\n");
    let cut = format!("data: {}", &REAL[..10]);
    assert_eq!(scrub.push(cut.as_bytes()), b"data: ");
    assert_eq!(
        String::from_utf8(scrub.push(format!("{}\n\n", &REAL[10..]).as_bytes())).unwrap(),
        format!("{ph}\n\n")
    );
}
