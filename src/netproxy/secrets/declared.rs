//! The user's declarations (`NIB_SANDBOX_SECRETS`): each entry read into a
//! [`Secret`] (its variable, hosts and wire form) with the session's
//! placeholder, or refused with the reason. Making the placeholder is
//! `placeholder`'s, a value's encoded forms `echoes`'; using a secret on a
//! request is `fill`'s.

use std::path::Path;

use super::echoes::{b64, encoded_echoes};
use super::placeholder::placeholder_for;

/// The variable holding the declarations.
pub const NIB_SANDBOX_SECRETS: &str = "NIB_SANDBOX_SECRETS";

/// A real value shorter than this is refused: its placeholder would be
/// too easy to meet by chance, and scrubbing responses of it would cut
/// ordinary text.
pub(super) const SHORTEST: usize = 8;

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
    pub(super) real: String,
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
pub(super) fn refusal(
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
pub(super) fn read_entry(entry: &str) -> Result<(String, Vec<String>, Wire), String> {
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
pub(super) fn is_exact_host(h: &str) -> bool {
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
