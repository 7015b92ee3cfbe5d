//! Why a program's network failed, said in the answer: under the sandbox a
//! program that cannot reach a host prints only its own error ("Could not
//! resolve host"), which reads like an outage. When a call's output shows a
//! failed name lookup or connection, and the proxy named no refusal of its
//! own, the answer ends with one line saying what the sandbox allows and
//! which setting of the user's would allow more.

use nib_settings::Config;

/// What programs' own messages say when a name lookup or a connection
/// failed (curl, git, python, node, pip, npm, cargo, Go), lowercased. Each
/// counts only where it starts a word: python's `FileNotFoundError` holds
/// node's `ENOTFOUND` inside a word and says nothing of the network.
const FAILURE_MARKS: &[&str] = &[
    "could not resolve host",
    "could not resolve proxy",
    "temporary failure in name resolution",
    "name or service not known",
    "no address associated with hostname",
    "nodename nor servname",
    "getaddrinfo",
    "eai_again",
    "enotfound",
    "network is unreachable",
    "failed to connect",
    "connection refused",
    "couldn't connect to server",
    "failed to resolve",
    "dns error",
    "no such host",
];

/// The line for a call whose `output` shows a failed lookup or connection
/// under the sandbox's network mode, or `None` (no sandbox, every host
/// open, the proxy already named its refusals, or nothing failed).
pub fn note(config: &Config, output: &str, proxy_named_refusals: bool) -> Option<String> {
    if !config.sandbox || config.sandbox_network || proxy_named_refusals {
        return None;
    }
    let lower = output.to_ascii_lowercase();
    if !FAILURE_MARKS.iter().any(|m| starts_a_word(&lower, m)) {
        return None;
    }
    let through_proxy = crate::netproxy::current().is_some();
    Some(match &config.network_hosts {
        None if through_proxy => "[network: no host is listed: programs reach a host only through nib's proxy (the HTTPS_PROXY and HTTP_PROXY variables), which puts it to the user first; a program that ignores them, or resolves names itself, fails; the user can allow hosts with NIB_SANDBOX_NETWORK=HOST,… in nib's environment]".to_string(),
        None if config.confirm_network => "[network: off in the sandbox — programs reach no host, and this client cannot be asked to allow one; the user can allow hosts with NIB_SANDBOX_NETWORK=HOST,… in nib's environment (or every host with NIB_SANDBOX_NETWORK=1)]".to_string(),
        None => "[network: off in the sandbox — programs reach no host, so a name lookup or connection fails; the user can allow hosts with NIB_SANDBOX_NETWORK=HOST,… in nib's environment (or every host with NIB_SANDBOX_NETWORK=1)]".to_string(),
        Some(hosts) => format!(
            "[network: programs reach only {} and only through nib's proxy (the HTTPS_PROXY and HTTP_PROXY variables): a program that ignores them, or resolves names itself, fails; nibash_status lists what was reached and refused]",
            nib_text::path_text::escape_control(hosts)
        ),
    })
}

/// Whether `mark` occurs in `text` where no letter, digit or `_` comes just
/// before it.
fn starts_a_word(text: &str, mark: &str) -> bool {
    text.match_indices(mark).any(|(at, _)| {
        !text.as_bytes()[..at]
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_lookups_are_explained_only_where_the_sandbox_holds_the_network() {
        let mut c = Config::from_env().expect("config");
        c.sandbox = true;
        c.sandbox_network = false;
        c.network_hosts = None;
        c.confirm_network = false;
        let curl = "curl: (6) Could not resolve host: example.org\n";
        assert!(note(&c, curl, false).is_some_and(|n| n.contains("NIB_SANDBOX_NETWORK=HOST")));
        c.confirm_network = true;
        assert!(note(&c, curl, false).is_some_and(
            |n| n.contains("cannot be asked") && n.contains("NIB_SANDBOX_NETWORK=HOST")
        ));
        c.confirm_network = false;
        assert!(note(&c, "all fine\n", false).is_none());
        let traceback = "FileNotFoundError: [Errno 2] No such file or directory: '/x'\n";
        assert!(note(&c, traceback, false).is_none(), "no network in it");
        let npm = "npm error code ENOTFOUND\n";
        assert!(note(&c, npm, false).is_some());
        assert!(note(&c, curl, true).is_none(), "the proxy already said why");
        c.network_hosts = Some("crates.example".into());
        assert!(
            note(&c, "fatal: unable to access: Failed to connect", false)
                .is_some_and(|n| n.contains("crates.example"))
        );
        c.sandbox_network = true;
        assert!(note(&c, curl, false).is_none(), "every host is open");
        c.sandbox_network = false;
        c.sandbox = false;
        assert!(note(&c, curl, false).is_none(), "unconfined");
    }
}
