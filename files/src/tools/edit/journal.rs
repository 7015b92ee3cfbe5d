//! All-or-nothing commits of multi-file edits, surviving a crash.
//!
//! A multi-file edit becomes a list of [`Step`]s. Before any temp file exists,
//! a journal naming every temp file is written (phase `preparing`); once all
//! temps are written and fsynced the journal turns `committing`; then the steps
//! run in order and the journal is deleted. The running process holds a
//! POSIX record lock on its journal's lock file ([`lock_record`]): unlike a
//! `flock`, such a lock belongs to the process, not to the open file, so a
//! child forked from the server (a worker between its fork and its exec)
//! never holds it, and it is gone the moment the server dies, whatever its
//! children still hold. [`recover`], run when nib starts before it serves,
//! takes every journal whose lock is free (its process died): a `preparing` journal is
//! rolled back (its temps removed, nothing was in place yet), a `committing`
//! one is completed (every temp still present is renamed into place, every
//! pending trash or removal done). Either way each edit ends whole or not at all.
//!
//! A single-file edit needs no journal: one rename is atomic already.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fs::{self, FsError, Prepared, Stat, WriteTarget};

/// One thing a commit does, on a destination already resolved (and, where
/// needed, approved) by [`crate::fs::write_target`].
#[derive(Clone, Debug)]
pub enum Step {
    /// Put new content at a target (replacing or creating).
    Place {
        /// Where.
        target: WriteTarget,
        /// The new bytes.
        bytes: Vec<u8>,
        /// Mode and owner to give it (else those of the file it replaces).
        like: Option<Stat>,
    },
    /// Move a file to the trash.
    Trash(WriteTarget),
    /// Remove a file (the source of a move, once its copy is in place).
    Remove(WriteTarget),
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Phase {
    Preparing,
    Committing,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum JournalOp {
    Place { tmp: PathBuf, target: PathBuf },
    Trash { target: PathBuf },
    Remove { target: PathBuf },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    phase: Phase,
    ops: Vec<JournalOp>,
}

/// A commit that failed; `partial` is true when some steps took effect and
/// the journal will complete the rest at the next start.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CommitError {
    /// What failed.
    pub message: String,
    /// Some changes are already in place.
    pub partial: bool,
}

fn journal_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("journal")
}

/// Takes a POSIX record lock (`fcntl` `F_SETLK`, not an open file
/// description's lock) on the whole of `path`, made if missing. `None` when
/// another *process* holds it. The lock is the calling process's: no
/// forked child inherits it, and closing any descriptor of this file in
/// this process lets it go (nothing here opens a journal's lock file twice).
fn lock_record(path: &Path) -> Result<Option<std::fs::File>, FsError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    match rustix::fs::fcntl_lock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(f)),
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::ACCESS) => Ok(None),
        Err(e) => Err(std::io::Error::from(e).into()),
    }
}

fn write_record(path: &Path, record: &Record) -> Result<(), FsError> {
    let json =
        serde_json::to_vec_pretty(record).map_err(|e| FsError::Io(std::io::Error::other(e)))?;
    fs::write_atomic(&fs::Scope::Open, path, &json).map(|_| ())
}

fn failpoint_pause(failpoint: Option<&str>) {
    if let Some(marker) = failpoint.and_then(|f| f.strip_prefix("edit-between-files:")) {
        let _ = fs::write_atomic(&fs::Scope::Open, Path::new(marker), b"paused\n");
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

fn remove_quietly(path: &Path) {
    let _ = fs::recover_remove(path);
}

/// What a prepared step does when it runs.
enum Ready {
    Place(Prepared),
    Trash(WriteTarget),
    Remove(WriteTarget),
}

fn run_ready(r: &Ready) -> Result<(), FsError> {
    match r {
        Ready::Place(p) => fs::commit(p),
        Ready::Trash(t) => fs::trash(t),
        Ready::Remove(t) => fs::remove(t),
    }
}

fn discard_all(ready: &[Ready]) {
    for r in ready {
        if let Ready::Place(p) = r {
            fs::discard(p);
        }
    }
}

/// Runs the steps all-or-nothing. `failpoint` is the test-only
/// [`nib_settings::NIB_FAILPOINT`] value.
pub fn commit_all(
    state_dir: &Path,
    steps: Vec<Step>,
    failpoint: Option<&str>,
) -> Result<(), CommitError> {
    let id = fs::unique_id();
    let fail = |message: String| CommitError {
        message,
        partial: false,
    };
    let single = steps.len() == 1;
    let dir = journal_dir(state_dir);
    let path = dir.join(format!("{id}.json"));
    let lock_path = dir.join(format!("{id}.lock"));
    let mut _lock = None;
    let mut record = Record {
        phase: Phase::Preparing,
        ops: Vec::new(),
    };
    if !single {
        fs::create_dir_all(&dir)
            .map_err(|e| fail(format!("the journal folder {}: {e}", dir.display())))?;
        _lock = Some(
            lock_record(&lock_path)
                .map_err(|e| fail(format!("locking the journal: {e}")))?
                .ok_or_else(|| fail("the journal is locked by another process".into()))?,
        );
        for s in &steps {
            record.ops.push(match s {
                Step::Place { target, .. } => JournalOp::Place {
                    tmp: fs::temp_path(target, &id),
                    target: target.path.clone(),
                },
                Step::Trash(t) => JournalOp::Trash {
                    target: t.path.clone(),
                },
                Step::Remove(t) => JournalOp::Remove {
                    target: t.path.clone(),
                },
            });
        }
        write_record(&path, &record).map_err(|e| fail(format!("writing the journal: {e}")))?;
    }
    let cleanup = || {
        if !single {
            remove_quietly(&path);
            remove_quietly(&lock_path);
        }
    };

    let mut ready = Vec::with_capacity(steps.len());
    for s in steps {
        ready.push(match s {
            Step::Place {
                target,
                bytes,
                like,
            } => match fs::prepare(&target, &bytes, like.as_ref(), &id) {
                Ok(p) => Ready::Place(p),
                Err(e) => {
                    discard_all(&ready);
                    cleanup();
                    return Err(fail(format!("{}: {e}", target.path.display())));
                }
            },
            Step::Trash(t) => Ready::Trash(t),
            Step::Remove(t) => Ready::Remove(t),
        });
    }
    if !single {
        record.phase = Phase::Committing;
        if let Err(e) = write_record(&path, &record) {
            discard_all(&ready);
            cleanup();
            return Err(fail(format!("writing the journal: {e}")));
        }
    }
    for (done, r) in ready.iter().enumerate() {
        if done == 1 {
            failpoint_pause(failpoint);
        }
        if let Err(e) = run_ready(r) {
            if done == 0 {
                discard_all(&ready);
                cleanup();
                return Err(fail(e.to_string()));
            }
            return Err(CommitError {
                message: format!(
                    "{e}; {done} of {} steps were done, the rest stay in the journal {} and are completed at nib's next start",
                    ready.len(),
                    path.display()
                ),
                partial: true,
            });
        }
    }
    cleanup();
    Ok(())
}

/// Runs one journal op by path; idempotent, so recovery can run it again.
fn run_op(op: &JournalOp) -> Result<(), FsError> {
    match op {
        JournalOp::Place { tmp, target } => fs::recover_place(tmp, target),
        JournalOp::Trash { target } => fs::recover_trash(target),
        JournalOp::Remove { target } => fs::recover_remove(target),
    }
}

/// The edit a file of the journal folder belongs to: `ID.json`, `ID.lock`,
/// or a temp file of the journal's own atomic write (`.ID.json.nib-*.tmp`).
fn edit_id(name: &str) -> Option<&str> {
    if let Some(id) = name.strip_suffix(".json") {
        return Some(id);
    }
    if let Some(id) = name.strip_suffix(".lock") {
        return Some(id);
    }
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    rest.split_once(".json.nib-").map(|(id, _)| id)
}

/// Completes or rolls back every journal left by a process that died, and
/// removes what such a process left of its journal (a lock file, a
/// half-written journal). A journal whose lock a live process holds is that
/// process's. Returns one line per journal handled, for the log.
pub fn recover(state_dir: &Path) -> Vec<String> {
    let dir = journal_dir(state_dir);
    let Ok(entries) = fs::list_dir(&fs::Scope::Open, &dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .iter()
        .filter_map(|e| edit_id(&e.name).map(str::to_owned))
        .collect();
    ids.sort();
    ids.dedup();
    let mut report = Vec::new();
    for id in ids {
        let lock_path = dir.join(format!("{id}.lock"));
        let Ok(Some(_lock)) = lock_record(&lock_path) else {
            continue; // its process is alive
        };
        let path = dir.join(format!("{id}.json"));
        let leftovers = || {
            for e in &entries {
                if e.name.starts_with('.') && edit_id(&e.name) == Some(id.as_str()) {
                    remove_quietly(&e.path);
                }
            }
        };
        if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            // No journal (its process died before writing it, or another
            // recovery finished it): no temp file of the edit exists.
            leftovers();
            remove_quietly(&lock_path);
            continue;
        }
        let record = fs::read_small(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Record>(&b).ok());
        let Some(record) = record else {
            report.push(format!(
                "unreadable journal {} left in place",
                path.display()
            ));
            continue;
        };
        match record.phase {
            Phase::Preparing => {
                for op in &record.ops {
                    if let JournalOp::Place { tmp, .. } = op {
                        remove_quietly(tmp);
                    }
                }
                report.push(format!("rolled back an edit that had not started ({id})"));
            }
            Phase::Committing => {
                let failures: Vec<String> = record
                    .ops
                    .iter()
                    .filter_map(|op| run_op(op).err().map(|e| e.to_string()))
                    .collect();
                if !failures.is_empty() {
                    report.push(format!(
                        "could not complete edit {id}: {}",
                        failures.join("; ")
                    ));
                    continue;
                }
                report.push(format!("completed an interrupted edit ({id})"));
            }
        }
        leftovers();
        remove_quietly(&path);
        remove_quietly(&lock_path);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committing_journal_is_completed_and_a_preparing_one_rolled_back() {
        let state = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let a = work.path().join("a");
        let b = work.path().join("b");
        std::fs::write(&a, "old a").unwrap();
        std::fs::write(&b, "old b").unwrap();
        let open = fs::Scope::Open;
        let pa = fs::prepare(&fs::write_target(&open, &a).unwrap(), b"new a", None, "t1").unwrap();
        let pb = fs::prepare(&fs::write_target(&open, &b).unwrap(), b"new b", None, "t1").unwrap();
        // As if the process died after placing a and before placing b.
        fs::commit(&pa).unwrap();
        let dir = journal_dir(state.path());
        std::fs::create_dir_all(&dir).unwrap();
        let rec = Record {
            phase: Phase::Committing,
            ops: vec![
                JournalOp::Place {
                    tmp: pa.tmp_path.clone(),
                    target: a.clone(),
                },
                JournalOp::Place {
                    tmp: pb.tmp_path.clone(),
                    target: b.clone(),
                },
            ],
        };
        write_record(&dir.join("t1.json"), &rec).unwrap();
        let report = recover(state.path());
        assert_eq!(report.len(), 1, "{report:?}");
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new a");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "new b");
        assert!(!dir.join("t1.json").exists());

        let pc = fs::prepare(
            &fs::write_target(&open, &a).unwrap(),
            b"newer a",
            None,
            "t2",
        )
        .unwrap();
        let rec = Record {
            phase: Phase::Preparing,
            ops: vec![JournalOp::Place {
                tmp: pc.tmp_path.clone(),
                target: a.clone(),
            }],
        };
        write_record(&dir.join("t2.json"), &rec).unwrap();
        recover(state.path());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new a");
        assert!(!pc.tmp_path.exists());
    }

    /// Forks a process that takes the lock at `lock` as [`lock_record`]
    /// does. With `then_fork`, that process forks a child, which keeps the
    /// lock file's descriptor and waits, and ends: what a server killed
    /// while one of its children was between its fork and its exec leaves.
    /// Returns the pid of the process that waits, once it is ready.
    #[allow(unsafe_code)]
    fn hold_lock(lock: &Path, then_fork: bool) -> libc::pid_t {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(lock.as_os_str().as_bytes()).unwrap();
        let mut pipe = [0; 2];
        // SAFETY: pipe fills the two-element array.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        // SAFETY: the child makes system calls only (open, fcntl, fork,
        // write, pause, _exit) on data made before the fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CREAT, 0o600);
                let mut l: libc::flock = std::mem::zeroed();
                l.l_type = libc::F_WRLCK as libc::c_short;
                l.l_whence = libc::SEEK_SET as libc::c_short;
                if fd < 0 || libc::fcntl(fd, libc::F_SETLK, &l) != 0 {
                    libc::_exit(1);
                }
                if then_fork && libc::fork() != 0 {
                    libc::_exit(0);
                }
                let mut me = libc::getpid();
                libc::write(pipe[1], (&raw mut me).cast(), 4);
                loop {
                    libc::pause();
                }
            }
        }
        let mut waiter: libc::pid_t = 0;
        // SAFETY: read into a local of 4 bytes; close our pipe's write end
        // first so a child that died gives EOF.
        unsafe {
            libc::close(pipe[1]);
            assert_eq!(libc::read(pipe[0], (&raw mut waiter).cast(), 4), 4);
            libc::close(pipe[0]);
        }
        if then_fork {
            let mut status = 0;
            // SAFETY: waitpid on our own child with a pointer to a local.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
        waiter
    }

    #[allow(unsafe_code)]
    fn end(pid: libc::pid_t) {
        // SAFETY: kill and waitpid take plain integers and a local.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }

    fn committing_journal(dir: &Path, id: &str) {
        std::fs::create_dir_all(dir).unwrap();
        write_record(
            &dir.join(format!("{id}.json")),
            &Record {
                phase: Phase::Committing,
                ops: vec![],
            },
        )
        .unwrap();
    }

    #[test]
    fn a_locked_journal_is_left_to_its_process() {
        let state = tempfile::tempdir().unwrap();
        let dir = journal_dir(state.path());
        committing_journal(&dir, "live");
        let holder = hold_lock(&dir.join("live.lock"), false);
        let report = recover(state.path());
        end(holder);
        assert!(report.is_empty(), "{report:?}");
        assert!(dir.join("live.json").exists());
        // Once its process is gone, the journal is recovered.
        assert_eq!(recover(state.path()).len(), 1);
        assert!(!dir.join("live.json").exists());
    }

    /// The lock of a dead process is free even while a child it forked
    /// still holds the lock file open (a `flock` would still be held).
    #[test]
    fn a_journal_whose_process_died_is_recovered_while_its_child_holds_the_file() {
        let state = tempfile::tempdir().unwrap();
        let dir = journal_dir(state.path());
        committing_journal(&dir, "dead");
        let child = hold_lock(&dir.join("dead.lock"), true);
        let report = recover(state.path());
        end(child);
        assert_eq!(report.len(), 1, "{report:?}");
        assert!(!dir.join("dead.json").exists());
        assert!(!dir.join("dead.lock").exists());
    }

    #[test]
    fn what_a_dead_process_left_of_its_journal_is_removed() {
        let state = tempfile::tempdir().unwrap();
        let dir = journal_dir(state.path());
        std::fs::create_dir_all(&dir).unwrap();
        // Killed after locking, and while writing its first journal.
        std::fs::write(dir.join("a.lock"), "").unwrap();
        std::fs::write(dir.join("b.lock"), "").unwrap();
        std::fs::write(dir.join(".b.json.nib-1-2-3.tmp"), "{").unwrap();
        assert!(recover(state.path()).is_empty());
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn commit_all_places_every_file() {
        let state = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let a = work.path().join("a");
        let b = work.path().join("sub/b");
        std::fs::write(&a, "old").unwrap();
        commit_all(
            state.path(),
            vec![
                Step::Place {
                    target: fs::write_target(&fs::Scope::Open, &a).unwrap(),
                    bytes: b"A".to_vec(),
                    like: None,
                },
                Step::Place {
                    target: fs::write_target(&fs::Scope::Open, &b).unwrap(),
                    bytes: b"B".to_vec(),
                    like: None,
                },
            ],
            None,
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "A");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "B");
        let left: Vec<_> = std::fs::read_dir(journal_dir(state.path()))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "journal cleaned up");
    }
}
