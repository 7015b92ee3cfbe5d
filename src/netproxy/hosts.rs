//! Which hosts programs may reach: `NIB_SANDBOX_NETWORK=HOSTS` (comma
//! separated, `*.example.org` for the subdomains of a domain), minus
//! nib.json's `{"network": {"deny": [...]}}` (a project narrows the list,
//! never widens it). Deny wins over allow, for names and for the addresses
//! names resolve to. An
//! IP address is allowed only when listed as itself; a loopback or private
//! address only when the user listed that address, or the name that led to
//! it, exactly (not through a wildcard). Pure: [`super::address`] says what
//! an address is, [`super::proxy`] asks.

use std::net::IpAddr;

/// One entry of a list.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    /// `example.org`: that name only.
    Exact(String),
    /// `*.example.org`: names below it (not the domain itself).
    Below(String),
    /// An IP address.
    Address(IpAddr),
}

impl Pattern {
    fn parse(entry: &str) -> Option<Pattern> {
        let e = entry.trim().trim_end_matches('.').to_ascii_lowercase();
        if e.is_empty() {
            return None;
        }
        let bare = e.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Pattern::Address(ip));
        }
        match e.strip_prefix("*.") {
            Some(domain) if valid_name(domain) => Some(Pattern::Below(domain.to_string())),
            None if valid_name(&e) => Some(Pattern::Exact(e)),
            _ => None,
        }
    }

    fn matches_name(&self, host: &str) -> bool {
        match self {
            Pattern::Exact(n) => n == host,
            Pattern::Below(d) => {
                host.len() > d.len() + 1
                    && host.ends_with(d.as_str())
                    && host.as_bytes()[host.len() - d.len() - 1] == b'.'
            }
            Pattern::Address(_) => false,
        }
    }
}

/// Letters, digits, `-`, `_` and dots, at most 253 bytes.
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        && !n.starts_with('.')
        && !n.contains("..")
}

/// Why a host was refused, for the call's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// On the deny list.
    Denied,
    /// Not on the allow list.
    NotAllowed,
    /// An address given directly that is not listed.
    UnlistedAddress,
    /// The name led to an address nib never lets programs reach
    /// (link-local, cloud metadata).
    Forbidden(IpAddr),
    /// The name led to a loopback or private address the user did not list.
    Private(IpAddr),
    /// Not a host name nib accepts.
    BadName,
    /// Not on the list, and the user did not allow it when asked.
    Declined,
    /// The request carried a brokered secret's placeholder to a host the
    /// secret is not declared for (NIB_SANDBOX_SECRETS).
    Placeholder,
    /// A host with a brokered secret whose TLS did not verify against the
    /// system's roots (the secret was held back).
    Unverified,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Denied => write!(f, "on the deny list"),
            Refusal::NotAllowed => write!(f, "not in NIB_SANDBOX_NETWORK"),
            Refusal::UnlistedAddress => write!(f, "an address not listed in NIB_SANDBOX_NETWORK"),
            Refusal::Forbidden(ip) => {
                write!(f, "it resolves to {ip}, a link-local or metadata address")
            }
            Refusal::Private(ip) => write!(
                f,
                "it resolves to {ip}, a loopback or private address not listed"
            ),
            Refusal::BadName => write!(f, "not a host name"),
            Refusal::Declined => write!(
                f,
                "not in NIB_SANDBOX_NETWORK, and the user did not allow it"
            ),
            Refusal::Placeholder => write!(
                f,
                "the request carried a brokered secret's placeholder, which NIB_SANDBOX_SECRETS does not declare for this host"
            ),
            Refusal::Unverified => write!(
                f,
                "its TLS certificate did not verify against the system's roots (or SSL_CERT_FILE of nib's environment); the brokered secret was not sent"
            ),
        }
    }
}

/// The allow and deny lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostRules {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    /// `NIB_SANDBOX_NETWORK=1`: every public host.
    all: bool,
}

impl HostRules {
    /// From `NIB_SANDBOX_NETWORK`'s value and nib.json's deny list; entries
    /// nib cannot read are returned so the caller can say so.
    pub fn new(env: Option<&str>, deny: &[String]) -> (HostRules, Vec<String>) {
        let mut rules = HostRules::default();
        let mut unread = Vec::new();
        let mut add = |list: &mut Vec<Pattern>, entry: &str| match Pattern::parse(entry) {
            Some(p) => list.push(p),
            None => unread.push(entry.to_string()),
        };
        match env.map(str::trim) {
            Some("1") => rules.all = true,
            Some(v) => {
                for e in v.split(',').filter(|e| !e.trim().is_empty()) {
                    add(&mut rules.allow, e);
                }
            }
            None => {}
        }
        for e in deny {
            add(&mut rules.deny, e);
        }
        (rules, unread)
    }

    /// Whether anything at all may be reached.
    pub fn any(&self) -> bool {
        self.all || !self.allow.is_empty()
    }

    /// The allow list as written, for nibash_status.
    pub fn describe(&self) -> String {
        let show = |p: &Pattern| match p {
            Pattern::Exact(n) => n.clone(),
            Pattern::Below(d) => format!("*.{d}"),
            Pattern::Address(a) => a.to_string(),
        };
        let mut s = if self.all {
            "every public host".to_string()
        } else {
            self.allow.iter().map(show).collect::<Vec<_>>().join(", ")
        };
        if !self.deny.is_empty() {
            s.push_str(&format!(
                "; denied: {}",
                self.deny.iter().map(show).collect::<Vec<_>>().join(", ")
            ));
        }
        s
    }

    /// Whether `host` (a name or an address literal) may be asked for at
    /// all, before it is resolved.
    pub fn check_host(&self, host: &str) -> Result<(), Refusal> {
        let h = host.trim_end_matches('.').to_ascii_lowercase();
        let bare = h.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            if self.deny.contains(&Pattern::Address(ip)) {
                return Err(Refusal::Denied);
            }
            return if self.allow.contains(&Pattern::Address(ip)) {
                Ok(())
            } else {
                Err(Refusal::UnlistedAddress)
            };
        }
        if !valid_name(&h) {
            return Err(Refusal::BadName);
        }
        if self.deny.iter().any(|p| p.matches_name(&h)) {
            return Err(Refusal::Denied);
        }
        if self.all || self.allow.iter().any(|p| p.matches_name(&h)) {
            Ok(())
        } else {
            Err(Refusal::NotAllowed)
        }
    }

    /// Whether `host`, resolved to `ip`, may be connected to: never when
    /// the deny list names `ip`.
    pub fn check_address(&self, host: &str, ip: IpAddr) -> Result<(), Refusal> {
        if self.deny.contains(&Pattern::Address(ip)) {
            return Err(Refusal::Denied);
        }
        let h = host.trim_end_matches('.').to_ascii_lowercase();
        let listed = self.allow.contains(&Pattern::Address(ip))
            || self.allow.contains(&Pattern::Exact(h.clone()))
            || h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                == Ok(ip);
        match super::address::kind(ip) {
            super::address::Kind::Forbidden => Err(Refusal::Forbidden(ip)),
            super::address::Kind::Private if !listed => Err(Refusal::Private(ip)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(env: &str, deny: &[&str]) -> HostRules {
        let deny: Vec<String> = deny.iter().map(|s| s.to_string()).collect();
        HostRules::new(Some(env), &deny).0
    }

    #[test]
    fn names_wildcards_and_deny() {
        let r = rules(
            "crates.example, *.pkg.example, 10.0.0.7",
            &["bad.pkg.example"],
        );
        assert_eq!(r.check_host("crates.example"), Ok(()));
        assert_eq!(r.check_host("CRATES.example."), Ok(()));
        assert_eq!(r.check_host("dl.pkg.example"), Ok(()));
        assert_eq!(r.check_host("pkg.example"), Err(Refusal::NotAllowed));
        assert_eq!(r.check_host("evilpkg.example"), Err(Refusal::NotAllowed));
        assert_eq!(r.check_host("bad.pkg.example"), Err(Refusal::Denied));
        assert_eq!(r.check_host("10.0.0.7"), Ok(()));
        assert_eq!(r.check_host("10.0.0.8"), Err(Refusal::UnlistedAddress));
        assert_eq!(r.check_host("a b"), Err(Refusal::BadName));
    }

    #[test]
    fn a_denied_address_holds_for_every_name_that_leads_to_it() {
        let r = rules("intranet.example, *.pkg.example", &["10.1.2.3"]);
        let denied: IpAddr = "10.1.2.3".parse().unwrap();
        let other: IpAddr = "10.1.2.4".parse().unwrap();
        assert_eq!(r.check_host("intranet.example"), Ok(()));
        assert_eq!(
            r.check_address("intranet.example", denied),
            Err(Refusal::Denied)
        );
        assert_eq!(r.check_address("intranet.example", other), Ok(()));
        assert_eq!(
            r.check_address("dl.pkg.example", "93.184.216.34".parse().unwrap()),
            Ok(())
        );
    }

    #[test]
    fn private_addresses_need_an_exact_listing_and_metadata_never_passes() {
        let r = rules("*.corp.example, intranet.example", &[]);
        let private: IpAddr = "10.1.2.3".parse().unwrap();
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        assert_eq!(r.check_address("www.corp.example", public), Ok(()));
        assert_eq!(
            r.check_address("www.corp.example", private),
            Err(Refusal::Private(private))
        );
        assert_eq!(r.check_address("intranet.example", private), Ok(()));
        assert_eq!(
            r.check_address("intranet.example", metadata),
            Err(Refusal::Forbidden(metadata))
        );
        let all = rules("1", &[]);
        assert!(all.any());
        assert_eq!(all.check_host("anything.example"), Ok(()));
        assert_eq!(
            all.check_address("anything.example", "127.0.0.1".parse().unwrap()),
            Err(Refusal::Private("127.0.0.1".parse().unwrap()))
        );
    }
}
