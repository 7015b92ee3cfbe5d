//! The one rewrite towards a declared host: a request head's declared
//! header, placeholder → real value (Basic pairs decoded and encoded
//! again). Which host and secret is the proxy's and `declared`'s; the
//! response side is `scrub`'s.

use base64::Engine;

use super::declared::{Secret, Wire};
use super::echoes::b64;

/// A request head's lines rewritten for `host`: the declared header of each
/// secret going there carries the real value where it carried the
/// placeholder; nothing else changes. Also says whether a placeholder was
/// left elsewhere in the head (the URL, another header).
pub fn fill_request_head(head: &str, host_secrets: &[&Secret]) -> (String, bool) {
    let mut out = String::with_capacity(head.len() + 64);
    let mut stray = false;
    for (i, line) in head.split("\r\n").enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        let filled = (i > 0)
            .then(|| line.split_once(':'))
            .flatten()
            .and_then(|(name, value)| {
                host_secrets
                    .iter()
                    .find_map(|s| fill_header(s, name.trim(), value.trim()))
                    .map(|v| format!("{}: {v}", name.trim()))
            });
        match filled {
            Some(f) => out.push_str(&f),
            None => {
                stray |= host_secrets
                    .iter()
                    .any(|s| line.contains(s.placeholder.as_str()));
                out.push_str(line);
            }
        }
    }
    (out, stray)
}

/// The header value with the real value in place of the placeholder, when
/// `name: value` is `secret`'s declared header carrying its placeholder.
pub(super) fn fill_header(secret: &Secret, name: &str, value: &str) -> Option<String> {
    match &secret.wire {
        Wire::Bearer if name.eq_ignore_ascii_case("authorization") => {
            let (scheme, token) = value.split_once(' ')?;
            let known =
                scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token");
            (known && token.trim() == secret.placeholder)
                .then(|| format!("{scheme} {}", secret.real))
        }
        Wire::Basic { user } if name.eq_ignore_ascii_case("authorization") => {
            let (scheme, _) = value.split_once(' ')?;
            (basic_pair(value)? == format!("{user}:{}", secret.placeholder))
                .then(|| format!("{scheme} {}", b64(&format!("{user}:{}", secret.real))))
        }
        Wire::Header { name: declared } if name.eq_ignore_ascii_case(declared) => {
            (value == secret.placeholder).then(|| secret.real.clone())
        }
        _ => None,
    }
}

/// The `USER:PASSWORD` pair an `Authorization` (or `Proxy-Authorization`)
/// value of the Basic scheme carries, decoded.
pub fn basic_pair(value: &str) -> Option<String> {
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    String::from_utf8(decoded).ok()
}
