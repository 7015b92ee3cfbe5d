//! The scrubbed environment every confined process gets (layer 1): pagers off, no
//! terminal prompts, no sockets to agents or session buses, none of nib's
//! own keys; and, when the policy confines, no secret-looking variables
//! ([`is_secret_name`]) unless the user passes them by name. Pure
//! functions; `spawn.rs` applies them.

use std::ffi::{OsStr, OsString};

/// Variables that lead to agents, buses or terminals outside the confined process.
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
    // nib's own key for its model calls (NIB_DECIDER_KEY and the other
    // NIB_ variables go by their prefix).
    "OPENROUTER_API_KEY",
];

/// Name parts (split at `_`) that mark a variable as a secret.
const SECRET_PARTS: &[&str] = &[
    "KEY",
    "KEYS",
    "APIKEY",
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "PASS",
    "PASSPHRASE",
    "PWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "AUTH",
    "COOKIE",
    "DSN",
    "PRIVATE",
];

/// Endings of one name part that mark it too (`ACCESSTOKEN`, `APIKEY`,
/// `CLIENTSECRET`, `DBPASSWORD`).
const SECRET_ENDINGS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD"];

/// Whether a variable's name looks like it holds a secret: one of its
/// `_`-separated parts (case aside) is a word such as KEY, TOKEN, SECRET,
/// PASSWORD, PASSWD, PASS, PWD, CREDENTIAL(S), AUTH, COOKIE, DSN or
/// PRIVATE, or ends in KEY, TOKEN, SECRET or PASSWORD. `PWD` and
/// `OLDPWD` themselves (the shell's folders) are not secrets.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper == "PWD" || upper == "OLDPWD" {
        return false;
    }
    upper.split('_').any(|part| {
        SECRET_PARTS.contains(&part)
            || SECRET_ENDINGS
                .iter()
                .any(|e| part.len() > e.len() && part.ends_with(e) && !part.ends_with("MONKEY"))
    })
}

/// Takes the secret-looking variables out of `vars`, except those named in
/// `pass` (NIB_SANDBOX_ENV); returns the names withheld, sorted.
pub fn withhold_secrets(vars: &mut Vec<(OsString, OsString)>, pass: &[String]) -> Vec<String> {
    let mut withheld = Vec::new();
    vars.retain(|(k, _)| {
        let name = k.to_string_lossy();
        let secret = is_secret_name(&name) && !pass.iter().any(|p| *p == name);
        if secret {
            withheld.push(name.into_owned());
        }
        !secret
    });
    withheld.sort();
    withheld
}

/// Sets `set` in `vars`, each replacing any variable of its name.
pub fn set(vars: &mut Vec<(OsString, OsString)>, set: &[(String, String)]) {
    vars.retain(|(k, _)| !set.iter().any(|(name, _)| OsStr::new(name) == k));
    vars.extend(
        set.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
}

/// Variables every confined process gets.
const SET: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("TERM", "dumb"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// The confined process's environment from the broker's: agent and bus sockets removed,
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

/// The user name programs give nib's proxy; the password is the confined process's token.
pub const PROXY_USER: &str = "nib";

/// A new confined process's proxy token: 128 random bits in hex (from the kernel).
pub fn proxy_token() -> String {
    let mut bytes = [0u8; 16];
    if rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).is_err() {
        // Without the kernel's randomness, a token unique to this process
        // and moment still tells confined processes apart (it is a name, not a key).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = (now ^ u128::from(std::process::id()) << 64).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The variables that send programs' HTTP, HTTPS and other TCP clients
/// (curl, git, cargo, npm, pip) through nib's proxy at `127.0.0.1:port`,
/// naming their confined process by `token` as the proxy user's password (clients
/// send it as `Proxy-Authorization`; the proxy names a call's own refusals
/// and counts its connections by it).
pub fn proxy_vars(port: u16, token: &str) -> Vec<(OsString, OsString)> {
    let url = format!("http://{PROXY_USER}:{token}@127.0.0.1:{port}");
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
    // git waits for a proxy's challenge before sending credentials unless
    // told to send them at once; the proxy never challenges.
    out.push(("GIT_HTTP_PROXY_AUTHMETHOD".into(), "basic".into()));
    out
}

/// `value` (a proxy URL of [`proxy_vars`]) naming `token` instead of the
/// token it names; `None` when it names none.
fn with_token(value: &str, token: &str) -> Option<String> {
    let user = format!("//{PROXY_USER}:");
    let start = value.find(&user)? + user.len();
    let end = start + value[start..].find('@')?;
    Some(format!("{}{token}{}", &value[..start], &value[end..]))
}

/// Makes the proxy variables of this process name `token` (a confined process forked
/// by a zygote names its own call, not the zygote's). Only in a
/// single-threaded process.
pub(crate) fn retoken(token: &str) {
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        for name in [name.to_string(), name.to_ascii_lowercase()] {
            let Some(new) = std::env::var(&name)
                .ok()
                .and_then(|v| with_token(&v, token))
            else {
                continue;
            };
            // SAFETY: the caller is single-threaded (a process just forked
            // from the single-threaded zygote), so nothing reads the
            // environment meanwhile.
            unsafe { std::env::set_var(&name, new) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_variables_name_the_port_in_both_cases() {
        let v = proxy_vars(3128, "t0k3n");
        assert_eq!(v.len(), 9);
        assert!(v.contains(&(
            "https_proxy".into(),
            "http://nib:t0k3n@127.0.0.1:3128".into()
        )));
        let (a, b) = (proxy_token(), proxy_token());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(v.contains(&("NO_PROXY".into(), "localhost,127.0.0.1".into())));
    }

    #[test]
    fn secret_looking_names_are_withheld_and_ordinary_ones_kept() {
        for secret in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "ANTHROPIC_API_KEY",
            "OPENAI_APIKEY",
            "NPM_TOKEN",
            "DB_PASSWORD",
            "PGPASSWORD",
            "MYSQL_PWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SENTRY_DSN",
            "HF_TOKEN",
            "gh_token",
            "CLIENTSECRET",
            "DOCKER_AUTH_CONFIG",
            "SSH_PRIVATE_KEY",
        ] {
            assert!(is_secret_name(secret), "{secret}");
        }
        for plain in [
            "PATH",
            "HOME",
            "PWD",
            "OLDPWD",
            "GIT_AUTHOR_NAME",
            "TOKENIZERS_PARALLELISM",
            "KEYBOARD_LAYOUT",
            "CARGO_HOME",
            "LANG",
            "PASSAGE",
            "TERM",
            "RUST_BACKTRACE",
            "XDG_SESSION_TYPE",
            "SSL_CERT_FILE",
        ] {
            assert!(!is_secret_name(plain), "{plain}");
        }
        let mut vars: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), "/bin".into()),
            ("GITHUB_TOKEN".into(), "t".into()),
            ("NPM_TOKEN".into(), "n".into()),
        ];
        let withheld = withhold_secrets(&mut vars, &["NPM_TOKEN".into()]);
        assert_eq!(withheld, vec!["GITHUB_TOKEN".to_string()]);
        assert_eq!(
            vars,
            vec![
                (OsString::from("PATH"), OsString::from("/bin")),
                ("NPM_TOKEN".into(), "n".into())
            ]
        );
    }

    #[test]
    fn sockets_go_and_pagers_are_set() {
        let env = scrub([
            ("PATH", "/bin"),
            ("SSH_AUTH_SOCK", "/tmp/agent"),
            ("PAGER", "less"),
            ("DBUS_SESSION_BUS_ADDRESS", "x"),
            ("NIB_SANDBOX", "1"),
            ("NIB_DECIDER_KEY", "k"),
            ("OPENROUTER_API_KEY", "k"),
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

    #[test]
    fn a_proxy_url_is_given_another_token_and_other_values_are_left() {
        let url = "http://nib:0123abcd@127.0.0.1:4242";
        assert_eq!(
            with_token(url, "ffff").as_deref(),
            Some("http://nib:ffff@127.0.0.1:4242")
        );
        assert_eq!(with_token("localhost,127.0.0.1", "ffff"), None);
        assert_eq!(with_token("http://127.0.0.1:4242", "ffff"), None);
    }
}
