//! `nib undo`: nib's own changes to files, kept so they can be put back.
//!
//! Each edit or write that lands is recorded per project under the state
//! folder's `undo/`: the files it touched, each with the bytes it held
//! before (or that it did not exist) and a hash of what nib wrote (or that
//! nib removed it), and the confinement of the session that made it.
//! Undoing a change puts each file back only where it still holds exactly
//! what nib wrote, and says which files changed since and were left alone.
//! The tags nib's writes gave are remembered as undone, so an edit against
//! one of them is refused rather than rebased: the agent reads the file
//! again for its current tag.
//!
//! A person runs `nib undo` (and the Claude Code mod runs `--diff` for each
//! edit row) from an environment that may lack the session's `NIB_SANDBOX`,
//! after the agent's programs had time to swap files and folders for
//! symlinks. So undo works under the stricter of the recorded confinement
//! and its own, reads through the same confined, non-blocking, bounded path
//! as the tools, and writes through [`fs::write_atomic`], which refuses a
//! place that needs a person's approval wherever its real folder leads.
//!
//! The record is not the user's file: blobs and the log are written
//! without fsync or rename (the log is appended to, one line per event),
//! so recording adds no durable work to the call's path. A crash may lose
//! an undo record, never a byte of a user's file.
//!
//! What the edit and write tools touch is theirs to describe
//! ([`FileChange`]); files are read and written through [`crate::fs`].

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fs::{self, Scope};
use nib_text::hashline::Tag;

/// Changes kept per project (older ones are dropped with their bytes).
const KEPT: usize = 30;
/// A change whose files held more than this before is not kept.
const MAX_BYTES: usize = 64 << 20;
/// Undone tags kept per project.
const UNDONE_KEPT: usize = 256;
/// The log is rewritten without what it no longer keeps once it has this
/// many lines.
const COMPACT_AT: usize = 4 * KEPT + 64;
/// The largest log read (a bigger one is someone else's, not nib's).
const LOG_LIMIT: u64 = 8 << 20;

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

/// The confinement a change was made under, kept with it so that undoing
/// it is never looser, whatever environment `nib undo` starts from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// `NIB_SANDBOX=1`: everything beneath the roots.
    #[serde(default)]
    pub sandbox: bool,
    /// `NIB_CONFIRM_OUTSIDE_ROOTS=1`: writes outside the roots need approval.
    #[serde(default)]
    pub confirm: bool,
    /// The roots (canonical).
    #[serde(default)]
    pub roots: Vec<PathBuf>,
}

impl Confinement {
    /// What a call's scope confines.
    pub fn of(scope: &Scope) -> Confinement {
        match scope {
            Scope::Open => Confinement::default(),
            Scope::Confirm(roots) => Confinement {
                sandbox: false,
                confirm: true,
                roots: roots.iter().map(|r| r.path.clone()).collect(),
            },
            Scope::Sandbox(roots) => Confinement {
                sandbox: true,
                confirm: false,
                roots: roots.iter().map(|r| r.path.clone()).collect(),
            },
        }
    }

    /// The stricter of two: the sandbox wins over confirming, which wins
    /// over nothing; the recorded roots (`self`'s) are used when it has any.
    fn stricter(&self, other: &Confinement) -> Confinement {
        Confinement {
            sandbox: self.sandbox || other.sandbox,
            confirm: self.confirm || other.confirm,
            roots: if self.roots.is_empty() {
                other.roots.clone()
            } else {
                self.roots.clone()
            },
        }
    }

    /// The scope to read and write under, with the roots opened now.
    fn scope(&self) -> Result<Scope, String> {
        if !self.sandbox && !self.confirm {
            return Ok(Scope::Open);
        }
        let roots: Vec<fs::Root> = self
            .roots
            .iter()
            .filter_map(|r| fs::Root::open(r).ok())
            .collect();
        if roots.is_empty() {
            return Err(
                "none of the change's roots can be opened, so nothing can be confined to them"
                    .into(),
            );
        }
        let roots: std::sync::Arc<[fs::Root]> = roots.into();
        Ok(if self.sandbox {
            Scope::Sandbox(roots)
        } else {
            Scope::Confirm(roots)
        })
    }
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
    /// The session's confinement (absent in records of older versions).
    #[serde(default)]
    confinement: Confinement,
}

/// One line of the log.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Event {
    /// A change landed.
    Change(ChangeRecord),
    /// A change was put back (or given up): it is no longer listed.
    Reverted(String),
    /// A tag nib wrote at a canonical path was undone.
    Undone(PathBuf, String),
}

#[derive(Debug, Default)]
struct Log {
    changes: Vec<ChangeRecord>,
    /// Canonical path → tags nib wrote there that were undone since.
    undone: Vec<(PathBuf, String)>,
    /// Lines read (to know when to compact).
    lines: usize,
}

fn folder(state_dir: &Path, project: &Path) -> PathBuf {
    let key = xxhash_rust::xxh3::xxh3_64(project.as_os_str().as_encoded_bytes());
    state_dir.join("undo").join(format!("{key:016x}"))
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("log.jsonl")
}

fn load(dir: &Path) -> Log {
    let mut log = Log::default();
    let Ok(file) = fs::read_file(&Scope::Open, &log_path(dir), LOG_LIMIT) else {
        return log;
    };
    for line in file.bytes.split(|b| *b == b'\n') {
        if line.is_empty() {
            continue;
        }
        log.lines += 1;
        // A line cut short by a crash is skipped.
        match serde_json::from_slice::<Event>(line) {
            Ok(Event::Change(c)) => log.changes.push(c),
            Ok(Event::Reverted(id)) => log.changes.retain(|c| c.id != id),
            Ok(Event::Undone(p, t)) => log.undone.push((p, t)),
            Err(_) => {}
        }
    }
    let extra = log.changes.len().saturating_sub(KEPT);
    log.changes.drain(..extra);
    let extra = log.undone.len().saturating_sub(UNDONE_KEPT);
    log.undone.drain(..extra);
    log
}

/// Appends events to the log in one write (no fsync: see the module doc).
fn append(dir: &Path, events: &[Event]) -> Result<(), String> {
    let mut bytes = Vec::new();
    for e in events {
        serde_json::to_writer(&mut bytes, e).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
    }
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path(dir))
        .and_then(|mut f| f.write_all(&bytes))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Rewrites a long log with only what it keeps, and drops the bytes of the
/// changes it no longer keeps (one writer at a time; best effort).
fn compact(dir: &Path) {
    let Ok(Some(_lock)) = fs::try_lock(&dir.join("log.lock")) else {
        return;
    };
    let log = load(dir);
    if log.lines < COMPACT_AT {
        return;
    }
    let mut bytes = Vec::new();
    for c in &log.changes {
        let _ = serde_json::to_writer(&mut bytes, &Event::Change(c.clone()));
        bytes.push(b'\n');
    }
    for (p, t) in &log.undone {
        let _ = serde_json::to_writer(&mut bytes, &Event::Undone(p.clone(), t.clone()));
        bytes.push(b'\n');
    }
    let tmp = dir.join(format!("log.{}.tmp", fs::unique_id()));
    if std::fs::write(&tmp, &bytes).is_err() || std::fs::rename(&tmp, log_path(dir)).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return;
    }
    // Blobs no kept change names are gone with their changes.
    let kept: std::collections::HashSet<&str> = log
        .changes
        .iter()
        .flat_map(|c| c.files.iter().filter_map(|f| f.before.as_deref()))
        .collect();
    if let Ok(entries) = std::fs::read_dir(dir.join("blobs")) {
        for e in entries.flatten() {
            let name = e.file_name();
            if !kept.contains(name.to_string_lossy().as_ref()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Records a change that landed (best effort: a change that cannot be
/// recorded is simply not undoable), with the scope it was made under.
pub fn record(state_dir: &Path, project: &Path, scope: &Scope, tool: &str, files: Vec<FileChange>) {
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
                let written = fs::create_dir_all(&blobs).is_ok()
                    && std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(blobs.join(&name))
                        .and_then(|mut b| b.write_all(bytes))
                        .is_ok();
                if !written {
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
    let change = ChangeRecord {
        id,
        when: now_secs(),
        tool: tool.to_string(),
        files: records,
        confinement: Confinement::of(scope),
    };
    if append(&dir, &[Event::Change(change)]).is_ok()
        && std::fs::metadata(log_path(&dir)).is_ok_and(|m| m.len() > 64 * 1024)
    {
        compact(&dir);
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Rows of diff shown to a person for one change at most.
const DIFF_ROWS: usize = 200;

/// The bytes a file of a change holds now, read as the tools read: under
/// `scope`, without blocking (a FIFO or device is refused), at most a
/// text file's size. `None`: nothing there; `Err`: something that is not a
/// readable file (it is not what nib wrote).
fn now_bytes(scope: &Scope, path: &Path) -> Result<Option<Vec<u8>>, ()> {
    match fs::read_file(scope, path, crate::context::TEXT_LIMIT) {
        Ok(f) => Ok(Some(f.bytes)),
        Err(fs::FsError::NotFound) if !fs::exists(scope, path) => Ok(None),
        Err(_) => Err(()),
    }
}

/// Whether a file still holds what nib left there.
fn still_nibs(record: &FileRecord, now: &Result<Option<Vec<u8>>, ()>) -> bool {
    match (now, record.after_hash) {
        (Ok(Some(bytes)), Some(h)) => xxhash_rust::xxh3::xxh3_64(bytes) == h,
        (Ok(None), None) => true,
        _ => false,
    }
}

/// A change's earlier bytes of one file (from nib's own state folder, bounded).
fn blob(dir: &Path, name: &str) -> Result<Vec<u8>, String> {
    fs::read_file(
        &Scope::Open,
        &dir.join("blobs").join(name),
        MAX_BYTES as u64,
    )
    .map(|f| f.bytes)
    .map_err(|e| e.to_string())
}

/// The newest change, when it is `tool`'s (any tool's with `None`) and at
/// most `within` old, as a unified diff per file (paths relative to the
/// project) — for the person watching, not the agent. Files that changed
/// since nib wrote them (or that are no longer a readable file where the
/// change's confinement, or `floor`, can see) are left out.
pub fn latest_diff(
    state_dir: &Path,
    project: &Path,
    floor: &Confinement,
    tool: Option<&str>,
    within: std::time::Duration,
) -> Option<String> {
    let dir = folder(state_dir, project);
    let log = load(&dir);
    let change = log
        .changes
        .last()
        .filter(|c| tool.is_none_or(|t| c.tool == t))?;
    if now_secs().saturating_sub(change.when) > within.as_secs() {
        return None;
    }
    let scope = change.confinement.stricter(floor).scope().ok()?;
    let mut out = String::new();
    for f in &change.files {
        let now = now_bytes(&scope, &f.path);
        if !still_nibs(f, &now) {
            continue;
        }
        let before = match &f.before {
            Some(name) => blob(&dir, name).ok()?,
            None => Vec::new(),
        };
        let after = now.ok().flatten().unwrap_or_default();
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

/// How many changes of nib's are recorded for `project` (`nib undo` says
/// plainly that there is nothing to undo when none is).
pub fn count(state_dir: &Path, project: &Path) -> usize {
    load(&folder(state_dir, project)).changes.len()
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
            nib_text::readable::age(Some(when), now),
            files.join(", ")
        ));
    }
    out.push_str("nib undo N puts change N back (1, the newest, without N)\n");
    out
}

/// Puts change `n` back (1: the newest), file by file: only a file that
/// still holds what nib wrote; the others are named and left as they are.
/// Works under the stricter of the change's recorded confinement and
/// `floor` (the environment `nib undo` runs in). Returns what to print and
/// whether every file was put back.
pub fn revert(
    state_dir: &Path,
    project: &Path,
    floor: &Confinement,
    n: usize,
    shown: impl Fn(&Path) -> String,
) -> (String, bool) {
    let dir = folder(state_dir, project);
    let log = load(&dir);
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
    let change = &log.changes[count - n];
    let scope = match change.confinement.stricter(floor).scope() {
        Ok(s) => s,
        Err(e) => return (format!("nib undo: {e}; nothing was changed\n"), false),
    };
    let mut out = String::new();
    let mut all = true;
    let mut events = Vec::new();
    for f in &change.files {
        let name = shown(&f.path);
        if !still_nibs(f, &now_bytes(&scope, &f.path)) {
            all = false;
            out.push_str(&format!(
                "{name}: changed since nib wrote it; left as it is\n"
            ));
            continue;
        }
        let result = match &f.before {
            Some(name) => match blob(&dir, name) {
                Ok(bytes) => fs::write_atomic(&scope, &f.path, &bytes)
                    .map(|_| "put back as it was".to_string())
                    .map_err(|e| match e {
                        fs::FsError::NeedsApproval(why) => format!(
                            "{why}; its earlier bytes stay in {} for you to copy by hand",
                            dir.join("blobs").join(name).display()
                        ),
                        other => other.to_string(),
                    }),
                Err(e) => Err(format!("its earlier bytes are gone ({e})")),
            },
            None => fs::trash_entry(&scope, &f.path, false)
                .map(|()| "nib had made it; moved to the trash".to_string())
                .map_err(|e| e.to_string()),
        };
        match result {
            Ok(line) => {
                out.push_str(&format!("{name}: {line}\n"));
                if let (Some(tag), Ok(c)) = (&f.after_tag, fs::canonical(&f.path)) {
                    events.push(Event::Undone(c, tag.clone()));
                }
            }
            Err(e) => {
                all = false;
                out.push_str(&format!("{name}: not put back: {e}; left as it is\n"));
            }
        }
    }
    events.push(Event::Reverted(change.id.clone()));
    if let Err(e) = append(&dir, &events) {
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
            &Scope::Open,
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
        let floor = Confinement::default();
        let (out, all) = revert(state.path(), p, &floor, 1, shown);
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
        let (out, _) = revert(state.path(), p, &floor, 1, shown);
        assert!(out.contains("no change of nib's to undo"), "{out}");
    }
}
