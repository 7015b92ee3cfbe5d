//! The private `/tmp` of a confined process confined without bubblewrap (bubblewrap
//! gives each confined process a fresh tmpfs instead): a folder of its own under the
//! system's temporary folder, created `0700`, removed when the confined process ends.
//!
//! A process that exits while a confined process's waiter still holds it (a one-call
//! `nib sh` whose answer is out, a server whose client closed stdin) removes
//! the folders it made as it exits: an `atexit` handler, set with the first.
//! A broker killed outright (SIGKILL) cannot remove its confined processes' folders;
//! the next broker removes those whose broker no longer runs
//! ([`crate::leftovers`]). Naming them is this module's; when a folder is
//! made and removed is the confined process's (`spawn.rs`).

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Every private folder's name starts so, then the broker's pid.
const PREFIX: &str = "nib-confined-";

/// A folder left this long by a broker that no longer runs is removed.
pub const STALE_AFTER: Duration = Duration::from_secs(600);

/// Makes a new private folder under `base`: `nib-confined-PID-N-NANOS`,
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
            Ok(()) => {
                remove_own_at_exit(base);
                return Ok(dir);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free name for a private /tmp")))
}

/// The folders under which this process made private folders.
static BASES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Has this process's folders under `base` removed when it exits.
fn remove_own_at_exit(base: &Path) {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    let mut bases = BASES.lock().unwrap_or_else(|p| p.into_inner());
    if !bases.iter().any(|b| b == base) {
        bases.push(base.to_path_buf());
    }
    drop(bases);
    AT_EXIT.call_once(|| {
        // SAFETY: atexit only stores the pointer; `remove_own` is an
        // `extern "C" fn()` that does not unwind (it ignores every error and
        // takes a poisoned lock as it is) and does not call exit.
        unsafe {
            libc::atexit(remove_own);
        }
    });
}

/// Removes this process's own private folders (named with its pid, so a
/// forked child that exits removes none of its parent's), whatever they
/// still hold: the confined processes they served end with this process.
extern "C" fn remove_own() {
    let mine = format!("{PREFIX}{}-", std::process::id());
    let bases = BASES.lock().unwrap_or_else(|p| p.into_inner());
    for base in bases.iter() {
        let Ok(entries) = std::fs::read_dir(base) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&mine) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Removes the private folders under `base` that brokers killed before
/// they could remove them left (see [`crate::leftovers`]).
pub fn sweep_stale(base: &Path, min_age: Duration) -> usize {
    crate::leftovers::sweep(base, PREFIX, min_age, |p| std::fs::remove_dir_all(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn each_folder_is_new_private_and_swept_only_once_its_broker_is_gone() {
        let base = tempfile::tempdir().unwrap();
        let a = create(base.path()).unwrap();
        let b = create(base.path()).unwrap();
        assert_ne!(a, b);
        assert_eq!(std::fs::metadata(&a).unwrap().mode() & 0o777, 0o700);
        // Above the largest pid Linux gives: that broker cannot run.
        let gone = base.path().join(format!("{PREFIX}999999999-0-0"));
        std::fs::create_dir(&gone).unwrap();
        assert_eq!(sweep_stale(base.path(), Duration::ZERO), 1);
        assert!(!gone.exists() && a.exists() && b.exists());
    }
}
