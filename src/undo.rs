//! `nib undo`: nib's own changes to files, kept so they can be put back.
//!
//! Each edit or write that lands is recorded per project under the state
//! folder's `undo/`: the files it touched, each with the bytes it held
//! before (or that it did not exist) and a hash of what nib wrote (or that
//! nib removed it). Undoing a change puts each file back only where it
//! still holds exactly what nib wrote, and says which files changed since
//! and were left alone. The tags nib's writes gave are remembered as undone,
//! so an edit against one of them is refused rather than rebased: the
//! agent reads the file again for its current tag.
//!
//! What the edit and write tools touch is theirs to describe
//! ([`FileChange`]); files are read and written through [`crate::fs`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fs::{self, Scope};
use crate::hashline::Tag;

/// Changes kept per project (older ones are dropped with their bytes).
const KEPT: usize = 30;
/// A change whose files held more than this before is not kept.
const MAX_BYTES: usize = 64 << 20;
/// Undone tags kept per project.
const UNDONE_KEPT: usize = 256;

/// One file of a change, as its tool describes it.
#[derive(Debug)]
pub struct FileChange {
    /// The file, absolute.
    pub path: PathBuf,
    /// Its bytes before (`None`: it did not exist).
    pub before: Option<Vec<u8>>,
    /// What nib left there (`None`: nib removed it).
    pub after: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileRecord {
    path: PathBuf,
    /// The blob holding the bytes before, if the file existed.
    before: Option<String>,
    /// xxh3 of what nib wrote, if the file is there after.
    after_hash: Option<u64>,
    /// The tag of what nib wrote.
    after_tag: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ChangeRecord {
    id: String,
    /// Seconds since the epoch.
    when: u64,
    tool: String,
    files: Vec<FileRecord>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Log {
    changes: Vec<ChangeRecord>,
    /// Canonical path → tags nib wrote there that were undone since.
    #[serde(default)]
    undone: Vec<(PathBuf, String)>,
}

fn folder(state_dir: &Path, project: &Path) -> PathBuf {
    let key = xxhash_rust::xxh3::xxh3_64(project.as_os_str().as_encoded_bytes());
    state_dir.join("undo").join(format!("{key:016x}"))
}

fn load(dir: &Path) -> Log {
    std::fs::read(dir.join("log.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn save(dir: &Path, log: &Log) -> Result<(), String> {
    let bytes = serde_json::to_vec(log).map_err(|e| e.to_string())?;
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    fs::write_atomic(&Scope::Open, &dir.join("log.json"), &bytes)
        .map(|_| ())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Records a change that landed (best effort: a change that cannot be
/// recorded is simply not undoable).
pub fn record(state_dir: &Path, project: &Path, tool: &str, files: Vec<FileChange>) {
    let total: usize = files
        .iter()
        .map(|f| f.before.as_ref().map_or(0, Vec::len))
        .sum();
    if files.is_empty() || total > MAX_BYTES {
        return;
    }
    let dir = folder(state_dir, project);
    let id = fs::unique_id();
    let mut records = Vec::new();
    for (n, f) in files.into_iter().enumerate() {
        let before = match &f.before {
            Some(bytes) => {
                let name = format!("{id}-{n}");
                let blobs = dir.join("blobs");
                if fs::create_dir_all(&blobs).is_err()
                    || fs::write_atomic(&Scope::Open, &blobs.join(&name), bytes).is_err()
                {
                    return;
                }
                Some(name)
            }
            None => None,
        };
        records.push(FileRecord {
            path: f.path,
            before,
            after_hash: f.after.as_deref().map(xxhash_rust::xxh3::xxh3_64),
            after_tag: f.after.as_deref().map(|b| Tag::of(b).to_string()),
        });
    }
    let mut log = load(&dir);
    log.changes.push(ChangeRecord {
        id,
        when: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        tool: tool.to_string(),
        files: records,
    });
    while log.changes.len() > KEPT {
        let old = log.changes.remove(0);
        forget_blobs(&dir, &old);
    }
    let _ = save(&dir, &log);
}

fn forget_blobs(dir: &Path, change: &ChangeRecord) {
    for f in &change.files {
        if let Some(b) = &f.before {
            let _ = std::fs::remove_file(dir.join("blobs").join(b));
        }
    }
}

/// Rows of diff shown to a person for one change at most.
const DIFF_ROWS: usize = 200;

/// The newest change, when it is `tool`'s (any tool's with `None`) and at
/// most `within` old, as a unified diff per file (paths relative to the project) — for the person
/// watching, not the agent. Files that changed since nib wrote them are
/// left out.
pub fn latest_diff(
    state_dir: &Path,
    project: &Path,
    tool: Option<&str>,
    within: std::time::Duration,
) -> Option<String> {
    let dir = folder(state_dir, project);
    let log = load(&dir);
    let change = log
        .changes
        .last()
        .filter(|c| tool.is_none_or(|t| c.tool == t))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if now.saturating_sub(change.when) > within.as_secs() {
        return None;
    }
    let mut out = String::new();
    for f in &change.files {
        let before = match &f.before {
            Some(blob) => std::fs::read(dir.join("blobs").join(blob)).ok()?,
            None => Vec::new(),
        };
        let after = std::fs::read(&f.path).unwrap_or_default();
        let same = match f.after_hash {
            Some(h) => xxhash_rust::xxh3::xxh3_64(&after) == h,
            None => !f.path.exists(),
        };
        if !same {
            continue;
        }
        let name = f
            .path
            .strip_prefix(project)
            .unwrap_or(&f.path)
            .display()
            .to_string();
        let (a, b) = (
            String::from_utf8_lossy(&before),
            String::from_utf8_lossy(&after),
        );
        out.push_str(
            &similar::TextDiff::from_lines(a.as_ref(), b.as_ref())
                .unified_diff()
                .context_radius(2)
                .header(&format!("a/{name}"), &format!("b/{name}"))
                .to_string(),
        );
    }
    let rows: Vec<&str> = out.lines().collect();
    if rows.is_empty() {
        return None;
    }
    let mut shown: String = rows
        .iter()
        .take(DIFF_ROWS)
        .map(|r| format!("{r}\n"))
        .collect();
    if rows.len() > DIFF_ROWS {
        shown.push_str(&format!(
            "[… {} more rows; nib undo puts the change back]\n",
            rows.len() - DIFF_ROWS
        ));
    }
    Some(shown)
}

/// Whether `tag` is what nib wrote at `canonical` in a change since undone.
pub fn was_undone(state_dir: &Path, project: &Path, canonical: &Path, tag: &str) -> bool {
    load(&folder(state_dir, project))
        .undone
        .iter()
        .any(|(p, t)| p == canonical && t == tag)
}

/// The recorded changes, newest first, one line each, numbered as
/// `nib undo N` takes them.
pub fn list(state_dir: &Path, project: &Path, shown: impl Fn(&Path) -> String) -> String {
    let log = load(&folder(state_dir, project));
    if log.changes.is_empty() {
        return "nib undo: no change of nib's to undo in this project\n".into();
    }
    let now = std::time::SystemTime::now();
    let mut out = String::new();
    for (i, c) in log.changes.iter().rev().enumerate() {
        let files: Vec<String> = c.files.iter().map(|f| shown(&f.path)).collect();
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(c.when);
        out.push_str(&format!(
            "{}: {} {}: {}\n",
            i + 1,
            c.tool,
            crate::human::age(Some(when), now),
            files.join(", ")
        ));
    }
    out.push_str("nib undo N puts change N back (1, the newest, without N)\n");
    out
}

/// Puts change `n` back (1: the newest), file by file: only a file that
/// still holds what nib wrote; the others are named and left as they are.
/// Returns what to print and whether every file was put back.
pub fn revert(
    state_dir: &Path,
    project: &Path,
    scope: &Scope,
    n: usize,
    shown: impl Fn(&Path) -> String,
) -> (String, bool) {
    let dir = folder(state_dir, project);
    let mut log = load(&dir);
    let count = log.changes.len();
    if n == 0 || n > count {
        let msg = if count == 0 {
            "nib undo: no change of nib's to undo in this project; nothing was changed\n".into()
        } else {
            format!(
                "nib undo: there are {count} changes (1 is the newest); nothing was changed\nhint: nib undo --list shows them\n"
            )
        };
        return (msg, false);
    }
    let change = log.changes.remove(count - n);
    let mut out = String::new();
    let mut all = true;
    let mut undone = Vec::new();
    for f in &change.files {
        let name = shown(&f.path);
        let now = fs::read_file(scope, &f.path, crate::context::TEXT_LIMIT).ok();
        let unchanged = match (&now, f.after_hash) {
            (Some(bytes), Some(h)) => xxhash_rust::xxh3::xxh3_64(&bytes.bytes) == h,
            (None, None) => !fs::exists(scope, &f.path),
            _ => false,
        };
        if !unchanged {
            all = false;
            out.push_str(&format!(
                "{name}: changed since nib wrote it; left as it is\n"
            ));
            continue;
        }
        let result = match &f.before {
            Some(blob) => match std::fs::read(dir.join("blobs").join(blob)) {
                Ok(bytes) => fs::write_atomic(scope, &f.path, &bytes)
                    .map(|_| format!("{name}: put back as it was"))
                    .map_err(|e| e.to_string()),
                Err(e) => Err(format!("its earlier bytes are gone ({e})")),
            },
            None => fs::trash_entry(scope, &f.path, false)
                .map(|()| format!("{name}: nib had made it; moved to the trash"))
                .map_err(|e| e.to_string()),
        };
        match result {
            Ok(line) => {
                out.push_str(&line);
                out.push('\n');
                if let (Some(tag), Ok(c)) = (&f.after_tag, fs::canonical(&f.path)) {
                    undone.push((c, tag.clone()));
                }
            }
            Err(e) => {
                all = false;
                out.push_str(&format!("{name}: not put back: {e}\n"));
            }
        }
    }
    forget_blobs(&dir, &change);
    log.undone.extend(undone);
    let extra = log.undone.len().saturating_sub(UNDONE_KEPT);
    log.undone.drain(..extra);
    if let Err(e) = save(&dir, &log) {
        out.push_str(&format!("nib undo: the record could not be updated: {e}\n"));
    }
    (out, all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_change_is_put_back_only_where_the_file_still_holds_what_nib_wrote() {
        let state = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let p = project.path();
        let (a, b) = (p.join("a.txt"), p.join("b.txt"));
        std::fs::write(&a, "a after\n").unwrap();
        std::fs::write(&b, "b after, then changed by someone\n").unwrap();
        record(
            state.path(),
            p,
            "edit",
            vec![
                FileChange {
                    path: a.clone(),
                    before: Some(b"a before\n".to_vec()),
                    after: Some(b"a after\n".to_vec()),
                },
                FileChange {
                    path: b.clone(),
                    before: Some(b"b before\n".to_vec()),
                    after: Some(b"b after\n".to_vec()),
                },
            ],
        );
        let shown = |q: &Path| q.file_name().unwrap().to_string_lossy().into_owned();
        assert!(list(state.path(), p, shown).starts_with("1: edit "));
        let (out, all) = revert(state.path(), p, &Scope::Open, 1, shown);
        assert!(!all, "{out}");
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "a before\n");
        assert_eq!(
            std::fs::read_to_string(&b).unwrap(),
            "b after, then changed by someone\n"
        );
        assert!(out.contains("b.txt: changed since nib wrote it"), "{out}");
        assert!(was_undone(
            state.path(),
            p,
            &fs::canonical(&a).unwrap(),
            &Tag::of(b"a after\n").to_string()
        ));
        let (out, _) = revert(state.path(), p, &Scope::Open, 1, shown);
        assert!(out.contains("no change of nib's to undo"), "{out}");
    }
}
