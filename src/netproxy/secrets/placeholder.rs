//! A placeholder for a real value: a known vendor's prefix, then random
//! characters of the token's own alphabet, none at its place the same as
//! the real one's. Which secret gets it is `declared`'s.

/// Token prefixes of known vendors, longest first where one starts
/// another: a placeholder keeps the one its real value starts with, so a
/// program (and a vendor's client library) still sees what kind of token
/// it holds. Nothing past the prefix is ever kept.
pub(super) const VENDOR_PREFIXES: &[&str] = &[
    "github_pat_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "glpat-",
    "gldt-",
    "glrt-",
    "glptt-",
    "sk-ant-api03-",
    "sk-ant-admin01-",
    "sk-proj-",
    "sk-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxe-",
    "xapp-",
    "npm_",
    "pypi-",
    "hf_",
    "dop_v1_",
    "shpat_",
    "glc_",
    "SG.",
];

/// The vendor prefix `real` starts with, if any.
pub(super) fn vendor_prefix(real: &str) -> &'static str {
    VENDOR_PREFIXES
        .iter()
        .find(|p| real.len() > p.len() && real.starts_with(**p))
        .copied()
        .unwrap_or_default()
}

/// The characters a placeholder draws from for `rest` (a token past its
/// prefix): the narrowest of digits, hex, lowercase or uppercase with
/// digits, and letters with digits that holds it, with the punctuation it
/// holds added (`-`, `_`, `+`, `=`, `.`), never `/` (kept in place
/// instead) nor `>`, `?` or `~`: with those left out, a placeholder's
/// base64 has no character the standard and URL alphabets write
/// differently, so it replaces an echo validly in either.
pub(super) fn alphabet_of(rest: &str) -> Vec<u8> {
    const DIGITS: &[u8] = b"0123456789";
    let all = |f: fn(&u8) -> bool| {
        rest.bytes()
            .filter(u8::is_ascii_alphanumeric)
            .all(|b| f(&b))
    };
    let mut out: Vec<u8> = if all(u8::is_ascii_digit) {
        DIGITS.to_vec()
    } else if all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)) {
        b"0123456789abcdef".to_vec()
    } else if all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b)) {
        b"0123456789ABCDEF".to_vec()
    } else if all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()) {
        (b'a'..=b'z').chain(DIGITS.iter().copied()).collect()
    } else if all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) {
        (b'A'..=b'Z').chain(DIGITS.iter().copied()).collect()
    } else {
        (b'a'..=b'z')
            .chain(b'A'..=b'Z')
            .chain(DIGITS.iter().copied())
            .collect()
    };
    for b in rest.bytes() {
        if !b.is_ascii_alphanumeric() && !b"/>?~".contains(&b) && !out.contains(&b) {
            out.push(b);
        }
    }
    out
}

/// A placeholder for `real`: its vendor prefix ([`VENDOR_PREFIXES`]) when
/// it has one, then random characters of its alphabet ([`alphabet_of`]),
/// as many as it has, each differing from the real character at its
/// place — so no character of the secret past the prefix shows. A `/` is
/// kept where the value has one (JSON may write it `\/`, and the scrub
/// replaces an echo by one of the same length), and put nowhere else.
pub fn placeholder_for(real: &str) -> String {
    let prefix = vendor_prefix(real);
    let rest = &real[prefix.len()..];
    let alphabet = alphabet_of(rest);
    let mut out = String::with_capacity(real.len());
    out.push_str(prefix);
    let mut random = Vec::new();
    for c in rest.chars() {
        if c == '/' {
            out.push('/');
            continue;
        }
        let choices: Vec<u8> = alphabet
            .iter()
            .copied()
            .filter(|b| u32::from(*b) != u32::from(c))
            .collect();
        // Uniform: bytes past the last whole multiple are drawn again.
        let n = choices.len().max(1);
        let fair = 256 - 256 % n;
        let pick = loop {
            if random.is_empty() {
                random = random_bytes(64);
            }
            let b = usize::from(random.pop().unwrap_or_default());
            if b < fair {
                break b % n;
            }
        };
        out.push(choices.get(pick).map_or('x', |b| char::from(*b)));
    }
    out
}

/// `n` bytes from the kernel's randomness.
pub(super) fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        // 32 hex digits of randomness per token.
        let token = nib_sandbox::proxy_token();
        out.extend(
            token
                .as_bytes()
                .chunks(2)
                .filter_map(|p| std::str::from_utf8(p).ok())
                .filter_map(|p| u8::from_str_radix(p, 16).ok()),
        );
    }
    out.truncate(n);
    out
}
