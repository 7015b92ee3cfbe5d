//! What a broker killed outright (SIGKILL) leaves behind, and removing it
//! later: folders named `PREFIX<pid>…` (a confined process's private `/tmp`, a pids
//! cgroup, the proxy's socket folder) whose broker no longer runs.
//!
//! Which folders exist and how each is removed is the caller's; this module
//! decides which ones are left over: this user's, named for a process that
//! is gone, untouched for a while.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// Applies `remove` to each folder under `base` named `PREFIX<pid>` or
/// `PREFIX<pid>-…` that is this user's, whose process `pid` no longer
/// runs, and that nothing changed for `min_age`. Returns how many `remove`
/// took away.
pub fn sweep(
    base: &Path,
    prefix: &str,
    min_age: Duration,
    remove: impl Fn(&Path) -> io::Result<()>,
) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    // SAFETY: getuid has no preconditions and cannot fail.
    let me = unsafe { libc::getuid() };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<libc::pid_t>().ok())
            .filter(|&p| p > 0)
        else {
            continue;
        };
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= min_age);
        if !meta.is_dir() || meta.uid() != me || !old || runs(pid) {
            continue;
        }
        if remove(&entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether process `pid` exists (in this PID namespace).
fn runs(pid: libc::pid_t) -> bool {
    // SAFETY: kill with signal 0 sends nothing; it only checks the process.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn only_old_folders_of_gone_processes_go() {
        let base = tempfile::tempdir().unwrap();
        let at = |name: &str| base.path().join(name);
        // Above the largest pid Linux gives: that broker cannot run.
        std::fs::create_dir(at("nib-x-999999999-0")).unwrap();
        std::fs::write(at("nib-x-999999999-0/left.txt"), "x").unwrap();
        std::fs::create_dir(at("nib-x-999999997")).unwrap();
        std::fs::create_dir(at(&format!("nib-x-{}-0", std::process::id()))).unwrap();
        std::fs::write(at("nib-x-999999998-0"), "a file").unwrap();
        std::fs::create_dir(at("nib-y-999999999")).unwrap();
        std::fs::create_dir(at("nib-x-probe-1")).unwrap();
        let rm = |p: &Path| std::fs::remove_dir_all(p);
        assert_eq!(
            sweep(base.path(), "nib-x-", Duration::from_secs(3600), rm),
            0
        );
        assert_eq!(sweep(base.path(), "nib-x-", Duration::ZERO, rm), 2);
        assert!(!at("nib-x-999999999-0").exists() && !at("nib-x-999999997").exists());
        for kept in [
            format!("nib-x-{}-0", std::process::id()),
            "nib-x-999999998-0".into(),
            "nib-y-999999999".into(),
            "nib-x-probe-1".into(),
        ] {
            assert!(at(&kept).exists(), "{kept} went");
        }
    }
}
