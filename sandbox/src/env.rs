//! The scrubbed environment every worker gets (layer 1): pagers off, no
//! terminal prompts, and no sockets to agents or session buses. A pure
//! function; `spawn.rs` applies it.

use std::ffi::{OsStr, OsString};

/// Variables that lead to agents, buses or terminals outside the worker.
const REMOVED: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "XDG_SESSION_ID",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "KRB5CCNAME",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "WINDOWID",
    "DOCKER_HOST",
    "PULSE_SERVER",
];

/// Variables every worker gets.
const SET: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("TERM", "dumb"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// The worker's environment from the broker's: agent and bus sockets removed,
/// pagers and prompts off.
pub fn scrub<K: AsRef<OsStr>, V: AsRef<OsStr>>(
    vars: impl IntoIterator<Item = (K, V)>,
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = vars
        .into_iter()
        .map(|(k, v)| (k.as_ref().to_os_string(), v.as_ref().to_os_string()))
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            !REMOVED.contains(&k.as_ref())
                && !SET.iter().any(|(s, _)| *s == k)
                && !k.starts_with("NIB_")
        })
        .collect();
    out.extend(
        SET.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    out.sort();
    out
}

/// The variables that send programs' HTTP, HTTPS and other TCP clients
/// (curl, git, cargo, npm, pip) through nib's proxy at `127.0.0.1:port`.
pub fn proxy_vars(port: u16) -> Vec<(OsString, OsString)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut out = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        out.push((OsString::from(name), OsString::from(&url)));
        out.push((
            OsString::from(name.to_ascii_lowercase()),
            OsString::from(&url),
        ));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        out.push((OsString::from(name), OsString::from("localhost,127.0.0.1")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_variables_name_the_port_in_both_cases() {
        let v = proxy_vars(3128);
        assert_eq!(v.len(), 8);
        assert!(v.contains(&("https_proxy".into(), "http://127.0.0.1:3128".into())));
        assert!(v.contains(&("NO_PROXY".into(), "localhost,127.0.0.1".into())));
    }

    #[test]
    fn sockets_go_and_pagers_are_set() {
        let env = scrub([
            ("PATH", "/bin"),
            ("SSH_AUTH_SOCK", "/tmp/agent"),
            ("PAGER", "less"),
            ("DBUS_SESSION_BUS_ADDRESS", "x"),
            ("NIB_SANDBOX", "1"),
        ]);
        let keys: Vec<String> = env
            .iter()
            .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
            .collect();
        assert_eq!(
            keys,
            vec![
                "GIT_PAGER=cat",
                "GIT_TERMINAL_PROMPT=0",
                "PAGER=cat",
                "PATH=/bin",
                "TERM=dumb"
            ]
        );
    }
}
