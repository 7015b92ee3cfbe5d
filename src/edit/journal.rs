//! All-or-nothing commits of multi-file edits, surviving a crash.
//!
//! A multi-file edit becomes a list of [`Step`]s. Before any temp file exists,
//! a journal naming every temp file is written (phase `preparing`); once all
//! temps are written and fsynced the journal turns `committing`; then the steps
//! run in order and the journal is deleted. The running process holds an
//! exclusive lock on its journal. [`recover`], run when nib starts, takes every
//! journal whose lock is free (its process died): a `preparing` journal is
//! rolled back (its temps removed, nothing was in place yet), a `committing`
//! one is completed (every temp still present is renamed into place, every
//! pending trash or removal done). Either way each edit ends whole or not at all.
//!
//! A single-file edit needs no journal: one rename is atomic already.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fs::{self, FsError, Prepared, Stat};

/// One thing a commit does.
#[derive(Clone, Debug)]
pub enum Step {
    /// Put new content at a path (replacing or creating).
    Place {
        /// The target path.
        target: PathBuf,
        /// The new bytes.
        bytes: Vec<u8>,
        /// Mode and owner to give it (else those of the file it replaces).
        like: Option<Stat>,
    },
    /// Move a file to the trash.
    Trash(PathBuf),
    /// Remove a file (the source of a move, once its copy is in place).
    Remove(PathBuf),
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

fn write_record(path: &Path, record: &Record) -> Result<(), FsError> {
    let json =
        serde_json::to_vec_pretty(record).map_err(|e| FsError::Io(std::io::Error::other(e)))?;
    fs::write_atomic(path, &json).map(|_| ())
}

fn failpoint_pause(failpoint: Option<&str>) {
    if let Some(marker) = failpoint.and_then(|f| f.strip_prefix("edit-between-files:")) {
        let _ = fs::write_atomic(Path::new(marker), b"paused\n");
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

/// Runs the steps all-or-nothing. `failpoint` is the test-only
/// [`crate::config::NIB_FAILPOINT`] value.
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
    if steps.len() == 1 {
        return match steps.into_iter().next() {
            Some(Step::Place {
                target,
                bytes,
                like,
            }) => {
                let p = fs::prepare(&target, &bytes, like.as_ref(), &id)
                    .map_err(|e| fail(format!("{}: {e}", target.display())))?;
                fs::commit(&p).map_err(|e| {
                    fs::discard(&p);
                    fail(format!("{}: {e}", target.display()))
                })
            }
            Some(Step::Trash(p)) => {
                fs::trash(&p).map_err(|e| fail(format!("{}: {e}", p.display())))
            }
            Some(Step::Remove(p)) => {
                fs::remove_file(&p).map_err(|e| fail(format!("{}: {e}", p.display())))
            }
            None => Ok(()),
        };
    }

    let dir = journal_dir(state_dir);
    fs::create_dir_all(&dir)
        .map_err(|e| fail(format!("the journal folder {}: {e}", dir.display())))?;
    let path = dir.join(format!("{id}.json"));
    let lock_path = dir.join(format!("{id}.lock"));
    let _lock = fs::try_lock(&lock_path)
        .map_err(|e| fail(format!("locking the journal: {e}")))?
        .ok_or_else(|| fail("the journal is locked by another process".into()))?;

    let mut ops = Vec::with_capacity(steps.len());
    for s in &steps {
        ops.push(match s {
            Step::Place { target, .. } => JournalOp::Place {
                tmp: fs::temp_path(target, &id)
                    .map_err(|e| fail(format!("{}: {e}", target.display())))?,
                target: target.clone(),
            },
            Step::Trash(t) => JournalOp::Trash { target: t.clone() },
            Step::Remove(t) => JournalOp::Remove { target: t.clone() },
        });
    }
    let mut record = Record {
        phase: Phase::Preparing,
        ops,
    };
    write_record(&path, &record).map_err(|e| fail(format!("writing the journal: {e}")))?;

    let mut prepared: Vec<Prepared> = Vec::new();
    for s in &steps {
        if let Step::Place {
            target,
            bytes,
            like,
        } = s
        {
            match fs::prepare(target, bytes, like.as_ref(), &id) {
                Ok(p) => prepared.push(p),
                Err(e) => {
                    prepared.iter().for_each(fs::discard);
                    let _ = fs::remove_file(&path);
                    let _ = fs::remove_file(&lock_path);
                    return Err(fail(format!("{}: {e}", target.display())));
                }
            }
        }
    }
    // Symlinked targets are written where they point: record the real places.
    let mut placed = prepared.iter();
    for op in &mut record.ops {
        if let JournalOp::Place { tmp, target } = op
            && let Some(p) = placed.next()
        {
            *tmp = p.tmp.clone();
            *target = p.target.clone();
        }
    }
    record.phase = Phase::Committing;
    if let Err(e) = write_record(&path, &record) {
        prepared.iter().for_each(fs::discard);
        let _ = fs::remove_file(&path);
        let _ = fs::remove_file(&lock_path);
        return Err(fail(format!("writing the journal: {e}")));
    }

    for (done, op) in record.ops.iter().enumerate() {
        if done == 1 {
            failpoint_pause(failpoint);
        }
        if let Err(e) = run_op(op) {
            return Err(CommitError {
                message: format!(
                    "{e}; {done} of {} steps were done, the rest stay in the journal {} and are completed at nib's next start",
                    record.ops.len(),
                    path.display()
                ),
                partial: done > 0,
            });
        }
    }
    let _ = fs::remove_file(&path);
    let _ = fs::remove_file(&lock_path);
    Ok(())
}

/// Runs one journal op; idempotent, so recovery can run it again.
fn run_op(op: &JournalOp) -> Result<(), FsError> {
    match op {
        JournalOp::Place { tmp, target } => {
            if fs::exists(tmp) {
                fs::commit(&Prepared {
                    tmp: tmp.clone(),
                    target: target.clone(),
                    replaces: true,
                })?;
            }
            Ok(())
        }
        JournalOp::Trash { target } => {
            if fs::exists(target) {
                fs::trash(target)?;
            }
            Ok(())
        }
        JournalOp::Remove { target } => {
            if fs::exists(target) {
                fs::remove_file(target)?;
            }
            Ok(())
        }
    }
}

/// Completes or rolls back every journal left by a process that died.
/// Returns one line per journal handled, for the log.
pub fn recover(state_dir: &Path) -> Vec<String> {
    let dir = journal_dir(state_dir);
    let Ok(entries) = fs::list_dir(&dir) else {
        return Vec::new();
    };
    let mut report = Vec::new();
    for e in entries {
        let Some(id) = e.name.strip_suffix(".json") else {
            continue;
        };
        let lock_path = dir.join(format!("{id}.lock"));
        let Ok(Some(_lock)) = fs::try_lock(&lock_path) else {
            continue; // its process is alive
        };
        let record: Option<Record> = fs::read_small(&e.path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let Some(record) = record else {
            report.push(format!(
                "unreadable journal {} left in place",
                e.path.display()
            ));
            continue;
        };
        match record.phase {
            Phase::Preparing => {
                for op in &record.ops {
                    if let JournalOp::Place { tmp, .. } = op {
                        let _ = fs::remove_file(tmp);
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
        let _ = fs::remove_file(&e.path);
        let _ = fs::remove_file(&lock_path);
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
        let pa = fs::prepare(&a, b"new a", None, "t1").unwrap();
        let pb = fs::prepare(&b, b"new b", None, "t1").unwrap();
        // As if the process died after placing a and before placing b.
        fs::commit(&pa).unwrap();
        let dir = journal_dir(state.path());
        std::fs::create_dir_all(&dir).unwrap();
        let rec = Record {
            phase: Phase::Committing,
            ops: vec![
                JournalOp::Place {
                    tmp: pa.tmp.clone(),
                    target: a.clone(),
                },
                JournalOp::Place {
                    tmp: pb.tmp.clone(),
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

        let pc = fs::prepare(&a, b"newer a", None, "t2").unwrap();
        let rec = Record {
            phase: Phase::Preparing,
            ops: vec![JournalOp::Place {
                tmp: pc.tmp.clone(),
                target: a.clone(),
            }],
        };
        write_record(&dir.join("t2.json"), &rec).unwrap();
        recover(state.path());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new a");
        assert!(!pc.tmp.exists());
    }

    #[test]
    fn a_locked_journal_is_left_to_its_process() {
        let state = tempfile::tempdir().unwrap();
        let dir = journal_dir(state.path());
        std::fs::create_dir_all(&dir).unwrap();
        write_record(
            &dir.join("live.json"),
            &Record {
                phase: Phase::Committing,
                ops: vec![],
            },
        )
        .unwrap();
        let _held = fs::try_lock(&dir.join("live.lock")).unwrap().unwrap();
        assert!(recover(state.path()).is_empty());
        assert!(dir.join("live.json").exists());
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
                    target: a.clone(),
                    bytes: b"A".to_vec(),
                    like: None,
                },
                Step::Place {
                    target: b.clone(),
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
