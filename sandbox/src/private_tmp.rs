//! The private `/tmp` of a worker confined without bubblewrap (bubblewrap
//! gives each worker a fresh tmpfs instead): a folder of its own under the
//! system's temporary folder, created `0700`, removed when the worker ends.
//!
//! A broker killed outright (SIGKILL) cannot remove its workers' folders;
//! the next broker removes those whose broker no longer runs. Naming and
//! finding them is this module's; when a folder is made and removed is the
//! worker's (`spawn.rs`).

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Every private folder's name starts so, then the broker's pid.
const PREFIX: &str = "nib-worker-";

/// A folder left this long by a broker that no longer runs is removed.
pub const STALE_AFTER: Duration = Duration::from_secs(600);

/// Makes a new private folder under `base`: `nib-worker-PID-N-NANOS`,
/// `0700` from the start. A name already taken (a broker of the same pid
/// that was killed left it) is passed over.
pub fn create(base: &Path) -> io::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last = None;
    for _ in 0..8 {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!(
            "{PREFIX}{}-{}-{nanos:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free name for a private /tmp")))
}

/// Removes the private folders under `base` that are this user's, whose
/// broker (the pid in the name) no longer runs, and that nothing changed
/// for `min_age`. Returns how many went.
pub fn sweep_stale(base: &Path, min_age: Duration) -> usize {
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
            .and_then(|n| n.strip_prefix(PREFIX))
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
        if std::fs::remove_dir_all(entry.path()).is_ok() {
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
    fn names_are_new_and_stale_folders_of_gone_brokers_are_swept() {
        let base = tempfile::tempdir().unwrap();
        // Each folder new, and this user's alone from the start.
        let a = create(base.path()).unwrap();
        let b = create(base.path()).unwrap();
        assert_ne!(a, b);
        let mode = std::fs::metadata(&a).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Above the largest pid Linux gives: that broker cannot run.
        let gone = base.path().join(format!("{PREFIX}999999999-0"));
        std::fs::create_dir(&gone).unwrap();
        std::fs::write(gone.join("left.txt"), "x").unwrap();
        let not_a_folder = base.path().join(format!("{PREFIX}999999998-0"));
        std::fs::write(&not_a_folder, "x").unwrap();
        let other = base.path().join("nib-other-999999999");
        std::fs::create_dir(&other).unwrap();
        // Too young: kept.
        assert_eq!(sweep_stale(base.path(), Duration::from_secs(3600)), 0);
        assert!(gone.exists());
        assert_eq!(sweep_stale(base.path(), Duration::ZERO), 1);
        assert!(!gone.exists(), "a gone broker's folder stays");
        assert!(a.exists() && b.exists(), "this broker's folders went");
        assert!(not_a_folder.exists() && other.exists());
    }
}
