//! Layer 2, outer: the bubblewrap command line. The argv is a pure function
//! (tested as a whole value); [`bwrap_usable`] checks once that bwrap runs here.
//! Landlock and seccomp, applied inside it, live in `landlock.rs` and
//! `seccomp.rs`; the process-tree rules in `lifetime.rs`.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::Policy;

/// Set inside bubblewrap so the worker knows bwrap already made its namespaces.
pub const IN_BWRAP: &str = "NIB_WORKER_IN_BWRAP";

/// The bubblewrap argv that runs `inner` (the worker entry and its args):
/// the system read-only, `/tmp` and `/run` private (before the binds, so roots
/// under `/tmp` stay visible), the roots writable, extra folders and the
/// protected paths read-only, the entry binary visible, own PID, IPC and UTS
/// namespaces, no network unless allowed, a new session, death with the
/// parent, and no capabilities (even when started by root).
pub fn bwrap_argv(policy: &Policy, entry: &Path, inner: &[OsString]) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&std::ffi::OsStr]| a.extend(items.iter().map(|s| s.to_os_string()));
    push(&[
        "bwrap".as_ref(),
        "--ro-bind".as_ref(),
        "/".as_ref(),
        "/".as_ref(),
    ]);
    push(&[
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--proc".as_ref(),
        "/proc".as_ref(),
    ]);
    push(&[
        "--tmpfs".as_ref(),
        "/tmp".as_ref(),
        "--tmpfs".as_ref(),
        "/run".as_ref(),
    ]);
    for w in &policy.writable {
        push(&["--bind".as_ref(), w.as_os_str(), w.as_os_str()]);
    }
    // The proxy's socket, for the bridge in the network namespace.
    if let Some(r) = policy.proxy.as_ref().filter(|_| !policy.network) {
        push(&[
            "--bind".as_ref(),
            r.socket.as_os_str(),
            r.socket.as_os_str(),
        ]);
    }
    for r in &policy.read_only {
        push(&["--ro-bind-try".as_ref(), r.as_os_str(), r.as_os_str()]);
    }
    for p in &policy.protected {
        push(&["--ro-bind-try".as_ref(), p.as_os_str(), p.as_os_str()]);
    }
    for m in &policy.masked {
        if m.exists() {
            push(&["--ro-bind".as_ref(), "/dev/null".as_ref(), m.as_os_str()]);
        }
    }
    push(&["--ro-bind".as_ref(), entry.as_os_str(), entry.as_os_str()]);
    push(&[
        "--unshare-pid".as_ref(),
        "--unshare-ipc".as_ref(),
        "--unshare-uts".as_ref(),
    ]);
    if !policy.network {
        push(&["--unshare-net".as_ref()]);
    }
    push(&["--new-session".as_ref(), "--die-with-parent".as_ref()]);
    push(&["--cap-drop".as_ref(), "ALL".as_ref()]);
    push(&["--setenv".as_ref(), IN_BWRAP.as_ref(), "1".as_ref()]);
    push(&["--".as_ref(), entry.as_os_str()]);
    a.extend(inner.iter().cloned());
    a
}

/// Whether bubblewrap is installed and can make its namespaces here (checked once).
pub fn bwrap_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| {
        Command::new("bwrap")
            .args([
                "--ro-bind",
                "/",
                "/",
                "--unshare-pid",
                "--unshare-net",
                "--new-session",
                "--die-with-parent",
                "--cap-drop",
                "ALL",
                "--",
                "true",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn argv_is_whole_and_ordered() {
        let policy = Policy {
            confine: true,
            writable: vec![PathBuf::from("/tmp/proj")],
            read_only: vec![PathBuf::from("/opt/sdk")],
            protected: vec![PathBuf::from("/tmp/proj/.git/hooks")],
            network: false,
            ..Policy::default()
        };
        let argv: Vec<String> = bwrap_argv(
            &policy,
            Path::new("/usr/bin/nib"),
            &["__w".into(), "x".into()],
        )
        .into_iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
        let want = "bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /run \
            --bind /tmp/proj /tmp/proj --ro-bind-try /opt/sdk /opt/sdk \
            --ro-bind-try /tmp/proj/.git/hooks /tmp/proj/.git/hooks --ro-bind /usr/bin/nib /usr/bin/nib \
            --unshare-pid --unshare-ipc --unshare-uts --unshare-net --new-session --die-with-parent \
            --cap-drop ALL --setenv NIB_WORKER_IN_BWRAP 1 -- /usr/bin/nib __w x";
        assert_eq!(
            argv.join(" "),
            want.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        let open = Policy {
            network: true,
            ..policy
        };
        let argv = bwrap_argv(&open, Path::new("/n"), &[]);
        assert!(!argv.iter().any(|a| a == "--unshare-net"));
    }
}
