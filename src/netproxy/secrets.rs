//! Brokered secrets (`NIB_SANDBOX_SECRETS`): credentials sandboxed programs
//! use on the wire without ever holding them. This module owns the user's
//! declarations, the per-session placeholders programs see instead of the
//! real values, and the pure rewriting the proxy applies: the declared
//! header of a request to a declared host (placeholder → real value), and
//! response bytes (real value → placeholder). The TLS side is [`super::tls`]'s,
//! the request-by-request relay [`super::terminate`]'s.
//!
//! Only the user declares a secret (an environment variable of nib's):
//! nothing of a project's is read here.

use std::path::Path;

use base64::Engine;

/// The variable holding the declarations.
pub const NIB_SANDBOX_SECRETS: &str = "NIB_SANDBOX_SECRETS";

/// A real value shorter than this is refused: its placeholder would be
/// too easy to meet by chance, and scrubbing responses of it would cut
/// ordinary text.
const SHORTEST: usize = 8;

/// Where a secret goes on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wire {
    /// `Authorization: Bearer VALUE` (or `token VALUE`, as forges take).
    Bearer,
    /// `Authorization: Basic base64(USER:VALUE)`.
    Basic {
        /// The user name paired with the value.
        user: String,
    },
    /// `NAME: VALUE`.
    Header {
        /// The header's name.
        name: String,
    },
}

impl Wire {
    fn describe(&self) -> String {
        match self {
            Wire::Bearer => "Authorization: Bearer".into(),
            Wire::Basic { user } => format!("Authorization: Basic (user {user})"),
            Wire::Header { name } => format!("header {name}"),
        }
    }
}

/// One declared secret.
pub struct Secret {
    /// The variable programs see (holding the placeholder).
    pub var: String,
    /// The hosts it may go to, lowercase, exact.
    pub hosts: Vec<String>,
    /// The header it goes in.
    pub wire: Wire,
    /// The value programs see.
    pub placeholder: String,
    /// The value the host gets.
    real: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the real value, not even in a debug print.
        f.debug_struct("Secret")
            .field("var", &self.var)
            .field("hosts", &self.hosts)
            .field("wire", &self.wire)
            .finish_non_exhaustive()
    }
}

impl Secret {
    /// Whether it may go to `host`.
    pub fn goes_to(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// The header line carrying the placeholder as this secret's wire form
    /// says (what nib has git send).
    pub fn placeholder_header(&self) -> String {
        match &self.wire {
            Wire::Bearer => format!("Authorization: Bearer {}", self.placeholder),
            Wire::Basic { user } => format!(
                "Authorization: Basic {}",
                b64(&format!("{user}:{}", self.placeholder))
            ),
            Wire::Header { name } => format!("{name}: {}", self.placeholder),
        }
    }

    /// `(real, placeholder)` byte pairs a response is scrubbed of: the
    /// value itself and its encodings ([`encoded_echoes`]) and, for Basic,
    /// the encoded pair a server may echo.
    pub fn echoes(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = encoded_echoes(self.real.as_bytes(), self.placeholder.as_bytes());
        if let Wire::Basic { user } = &self.wire {
            out.push((
                b64(&format!("{user}:{}", self.real)).into_bytes(),
                b64(&format!("{user}:{}", self.placeholder)).into_bytes(),
            ));
        }
        out
    }
}

/// How one character of a value is written in an encoded echo.
#[derive(Clone, Copy)]
enum Form {
    Literal,
    /// `%2F`, upper- or lowercase hex.
    Percent(bool),
    /// `\u002f`, upper- or lowercase hex.
    Unicode(bool),
    /// JSON's `\/`.
    Slash,
}

fn write_form(out: &mut Vec<u8>, b: u8, form: Form) {
    let hex = |upper: bool| {
        if upper {
            format!("{b:02X}")
        } else {
            format!("{b:02x}")
        }
    };
    match form {
        Form::Literal => out.push(b),
        Form::Percent(upper) => out.extend(format!("%{}", hex(upper)).bytes()),
        Form::Unicode(upper) => out.extend(format!("\\u00{}", hex(upper)).bytes()),
        Form::Slash if b == b'/' => out.extend(b"\\/"),
        Form::Slash => out.push(b),
    }
}

/// `real` and `placeholder` (of equal lengths) each written with the form
/// `form` gives for the real character at each place, so the two
/// encodings have equal lengths too.
fn written(real: &[u8], placeholder: &[u8], form: impl Fn(u8) -> Form) -> (Vec<u8>, Vec<u8>) {
    let (mut r, mut p) = (Vec::new(), Vec::new());
    for (&a, &b) in real.iter().zip(placeholder) {
        let f = form(a);
        // A `\/` stays `\/` only where both hold `/` (a placeholder keeps
        // the value's `/` and has no other).
        let f = match f {
            Form::Slash if b != b'/' => Form::Literal,
            f => f,
        };
        write_form(&mut r, a, f);
        write_form(&mut p, b, f);
    }
    (r, p)
}

/// The `(real, placeholder)` pairs of `real` as a server may echo it: as
/// it is; JSON-escaped (`\/`, every character or every one outside
/// `A-Za-z0-9-._~` as `\uXXXX`, `/` either way); percent-encoded (the reserved characters or all of
/// them, either case of hex); and base64 (standard and URL alphabets, at
/// each of the three places a value may start in an encoded run — the
/// characters that hold only the value's bits). Each placeholder form has
/// its real form's length, so a body keeps its length.
pub fn encoded_echoes(real: &[u8], placeholder: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = vec![(real.to_vec(), placeholder.to_vec())];
    if real.len() != placeholder.len() {
        return out;
    }
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || b"-._~".contains(&b);
    for upper in [true, false] {
        out.push(written(real, placeholder, |_| Form::Unicode(upper)));
        for slash in [Form::Slash, Form::Unicode(upper)] {
            out.push(written(real, placeholder, |b| match b {
                b'/' => slash,
                b if unreserved(b) => Form::Literal,
                _ => Form::Unicode(upper),
            }));
        }
        out.push(written(real, placeholder, |_| Form::Percent(upper)));
        out.push(written(real, placeholder, |b| {
            if unreserved(b) {
                Form::Literal
            } else {
                Form::Percent(upper)
            }
        }));
    }
    out.push(written(real, placeholder, |_| Form::Slash));
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        for k in 0..3usize {
            let encode = |v: &[u8]| {
                let mut led = vec![0u8; k];
                led.extend_from_slice(v);
                engine.encode(led).into_bytes()
            };
            let (r, p) = (encode(real), encode(placeholder));
            // Character j holds bits 6j..6j+6 of the run: only the value's
            // when they lie within bytes k..k+len.
            let inner: Vec<usize> = (0..r.len())
                .filter(|j| 6 * j >= 8 * k && 6 * j + 6 <= 8 * (k + real.len()))
                .collect();
            if let (Some(&first), Some(&last)) = (inner.first(), inner.last()) {
                out.push((r[first..=last].to_vec(), p[first..=last].to_vec()));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|(r, _)| seen.insert(r.clone()));
    out
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The session's declarations: those in force and those refused (whose
/// variables programs still see only as placeholders).
#[derive(Debug, Default)]
pub struct Secrets {
    /// In force.
    pub accepted: Vec<Secret>,
    /// `(entry as written, why)`.
    pub refused: Vec<(String, String)>,
    /// `(source, placeholder)` for every declared source, refused ones too:
    /// a variable (or file, `file:/PATH`) the user declared secret never
    /// reaches a program.
    pub placeholders: Vec<(String, String)>,
}

impl Secrets {
    /// Reads `spec` (`VAR@HOST[,HOST…][=basic:USER|=header:NAME|=bearer]`
    /// entries separated by `;`, `file:/PATH` in place of VAR for a file
    /// holding the value), taking values from `value_of` (given VAR or
    /// `file:/PATH`, trimmed); a host must pass `allowed` (the network
    /// allowlist) or the entry is refused.
    pub fn parse(
        spec: &str,
        value_of: impl Fn(&str) -> Option<String>,
        allowed: impl Fn(&str) -> bool,
    ) -> Secrets {
        let mut out = Secrets::default();
        for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let (var, hosts, wire) = match read_entry(entry) {
                Ok(read) => read,
                Err(why) => {
                    out.refused.push((entry.to_string(), why));
                    continue;
                }
            };
            let real = value_of(&var)
                .map(|v| v.trim().to_string())
                .unwrap_or_default();
            // One placeholder per variable, whatever becomes of the entry.
            let placeholder = match out.placeholders.iter().find(|(v, _)| *v == var) {
                Some((_, p)) => p.clone(),
                None => {
                    let p = placeholder_for(if real.is_empty() {
                        "placeholder"
                    } else {
                        &real
                    });
                    out.placeholders.push((var.clone(), p.clone()));
                    p
                }
            };
            match refusal(&var, &real, &hosts, &allowed) {
                Some(why) => out.refused.push((entry.to_string(), why)),
                None => out.accepted.push(Secret {
                    var,
                    hosts,
                    wire,
                    placeholder,
                    real,
                }),
            }
        }
        out
    }

    /// Moves the secrets `why` finds a reason against to the refused ones.
    pub fn refuse_if(&mut self, why: impl Fn(&Secret) -> Option<String>) {
        let accepted = std::mem::take(&mut self.accepted);
        for secret in accepted {
            match why(&secret) {
                Some(reason) => self
                    .refused
                    .push((format!("{}@{}", secret.var, secret.hosts.join(",")), reason)),
                None => self.accepted.push(secret),
            }
        }
    }

    /// The secrets that may go to `host`.
    pub fn for_host(&self, host: &str) -> Vec<&Secret> {
        self.accepted.iter().filter(|s| s.goes_to(host)).collect()
    }

    /// Whether `text` holds any placeholder (a request that carries one
    /// to a host it was not declared for).
    pub fn holds_placeholder(&self, text: &[u8]) -> bool {
        self.placeholders
            .iter()
            .any(|(_, p)| memchr::memmem::find(text, p.as_bytes()).is_some())
    }

    /// The declarations, one line each, by name and host, never by value
    /// (for `nib doctor` and nibash_status).
    pub fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .accepted
            .iter()
            .map(|s| format!("{} → {} ({})", s.var, s.hosts.join(", "), s.wire.describe()))
            .collect();
        out.extend(
            self.refused
                .iter()
                .map(|(entry, why)| format!("refused {entry}: {why}")),
        );
        out
    }
}

/// Why an entry whose syntax was read cannot be in force, if it cannot.
fn refusal(
    var: &str,
    real: &str,
    hosts: &[String],
    allowed: &impl Fn(&str) -> bool,
) -> Option<String> {
    if real.is_empty() {
        return Some(match file_of(var) {
            Some(path) => format!("{} cannot be read by nib, or is empty", path.display()),
            None => format!("{var} is not set in nib's environment"),
        });
    }
    if real.chars().count() < SHORTEST {
        return Some(format!(
            "{var}'s value is shorter than {SHORTEST} characters, too short to tell from other text"
        ));
    }
    if !real.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Some(format!(
            "{var}'s value holds spaces or characters a header cannot carry"
        ));
    }
    hosts.iter().find(|h| !allowed(h)).map(|h| {
        format!("{h} is not in NIB_SANDBOX_NETWORK (a brokered secret goes only to hosts the network allowlist holds)")
    })
}

/// The file a source names (`file:/PATH`), when it names one.
pub fn file_of(source: &str) -> Option<&Path> {
    source.strip_prefix("file:").map(Path::new)
}

/// `VAR@HOST[,HOST…][=WIRE]` (or `file:/PATH@…`) read, or why not.
fn read_entry(entry: &str) -> Result<(String, Vec<String>, Wire), String> {
    let (left, wire) = match entry.split_once('=') {
        Some((l, w)) => (l, Some(w.trim())),
        None => (entry, None),
    };
    let (var, hosts) = left.rsplit_once('@').ok_or(
        "an entry is VAR@HOST[,HOST…] or file:/PATH@HOST[,HOST…], with an optional =basic:USER or =header:NAME",
    )?;
    let var = var.trim();
    match var.strip_prefix("file:") {
        Some(path) if !Path::new(path).is_absolute() => {
            return Err(format!("{path:?} is not an absolute path"));
        }
        Some(_) => {}
        None if var.is_empty()
            || var.starts_with(|c: char| c.is_ascii_digit())
            || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            return Err(format!("{var:?} is not a variable name"));
        }
        None => {}
    }
    let hosts: Vec<String> = hosts
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.is_empty() {
        return Err("no host named after @".into());
    }
    if let Some(h) = hosts.iter().find(|h| !is_exact_host(h)) {
        return Err(format!(
            "{h:?} is not an exact host name or address (no wildcards, ports or paths)"
        ));
    }
    let wire = match wire {
        None | Some("bearer") => Wire::Bearer,
        Some(w) => match w.split_once(':') {
            Some(("basic", user)) if !user.is_empty() && !user.contains([':', ';']) => {
                Wire::Basic {
                    user: user.to_string(),
                }
            }
            Some(("header", name))
                if !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
            {
                Wire::Header {
                    name: name.to_string(),
                }
            }
            _ => {
                return Err(format!(
                    "{w:?} is not a wire form: bearer, basic:USER or header:NAME"
                ));
            }
        },
    };
    Ok((var.to_string(), hosts, wire))
}

/// A host name (letters, digits, `-`, `.`) or an IP address.
fn is_exact_host(h: &str) -> bool {
    h.parse::<std::net::IpAddr>().is_ok()
        || (!h.is_empty()
            && h.len() <= 253
            && h.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            }))
}

/// Token prefixes of known vendors, longest first where one starts
/// another: a placeholder keeps the one its real value starts with, so a
/// program (and a vendor's client library) still sees what kind of token
/// it holds. Nothing past the prefix is ever kept.
const VENDOR_PREFIXES: &[&str] = &[
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
fn vendor_prefix(real: &str) -> &'static str {
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
fn alphabet_of(rest: &str) -> Vec<u8> {
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
fn random_bytes(n: usize) -> Vec<u8> {
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
fn fill_header(secret: &Secret, name: &str, value: &str) -> Option<String> {
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

/// Replaces each real value with its placeholder (the same length) in a
/// stream of bytes cut anywhere: it holds back the last bytes of each piece
/// that could start a value the next piece ends.
pub struct Scrubber {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    held: Vec<u8>,
}

impl Scrubber {
    /// A scrubber of these `(real, placeholder)` pairs (equal lengths).
    pub fn new(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Scrubber {
        let pairs = pairs
            .into_iter()
            .filter(|(r, p)| !r.is_empty() && r.len() == p.len())
            .collect();
        Scrubber {
            pairs,
            held: Vec::new(),
        }
    }

    /// Whether it has nothing to replace.
    pub fn is_idle(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `piece` scrubbed, less what is held back for the next piece.
    pub fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        if self.pairs.is_empty() {
            return piece.to_vec();
        }
        self.held.extend_from_slice(piece);
        self.replace_all();
        // Held back: the longest end that could begin a value the next
        // piece ends (a stream of events passes at once otherwise).
        let keep = self
            .pairs
            .iter()
            .filter_map(|(real, _)| {
                (1..real.len().min(self.held.len() + 1))
                    .rev()
                    .find(|&k| self.held.ends_with(&real[..k]))
            })
            .max()
            .unwrap_or(0);
        let rest = self.held.split_off(self.held.len() - keep);
        std::mem::replace(&mut self.held, rest)
    }

    /// What is still held, scrubbed (at the end of the stream).
    pub fn finish(&mut self) -> Vec<u8> {
        self.replace_all();
        std::mem::take(&mut self.held)
    }

    fn replace_all(&mut self) {
        for (real, placeholder) in &self.pairs {
            let mut from = 0;
            while let Some(at) = memchr::memmem::find(&self.held[from..], real) {
                let at = from + at;
                self.held[at..at + real.len()].copy_from_slice(placeholder);
                from = at + real.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
