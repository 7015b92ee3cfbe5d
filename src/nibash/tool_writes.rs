//! What nib's own edit and write tools wrote, by any agent: a nibash call's
//! report of changed files (`changes`) leaves out a file whose content is
//! what a tool wrote while the call ran, since over HTTP that is another
//! agent's edit, not the call's change.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nib_files::context::Ctx;
use nib_text::hashline::Tag;

/// The tools' writes, each with the tag of what was written, numbered in
/// order, and the edit and write calls still running.
#[derive(Default)]
pub struct ToolWrites {
    state: Mutex<State>,
    /// Signalled when a running call ends.
    ended: Condvar,
}

#[derive(Default)]
struct State {
    /// The number the next write gets.
    next: u64,
    /// The newest writes: (number, canonical path, tag).
    kept: VecDeque<(u64, PathBuf, Tag)>,
    /// The next running call's number, and the calls running, each with
    /// the files it may write (canonical; `None`: it did not say).
    next_call: u64,
    running: BTreeMap<u64, Option<Vec<PathBuf>>>,
}

/// Tool writes kept; a call that ran past this many others' writes may list
/// some of the oldest as its own (as before they were kept at all).
const TOOL_WRITES_KEPT: usize = 4096;

/// An edit or write call running; ended (and its writes noted) by
/// [`Running::end`], or on drop with nothing noted.
pub struct Running<'a> {
    writes: &'a ToolWrites,
    id: u64,
}

impl Running<'_> {
    /// Notes what the call wrote (`written`: as shown to its agent, and the
    /// new tag; the shown paths resolved by its workspace) and ends it.
    pub fn end(self, ctx: &Ctx, written: &[(String, String)]) {
        let mut noted = Vec::new();
        for (shown, tag) in written {
            let Some(tag) = Tag::parse(tag) else {
                continue;
            };
            noted.push((canonical_target(&ctx.workspace.resolve(shown)), tag));
        }
        let mut s = self.writes.lock();
        for (path, tag) in noted {
            if s.kept.len() == TOOL_WRITES_KEPT {
                s.kept.pop_front();
            }
            let n = s.next;
            s.kept.push_back((n, path, tag));
            s.next += 1;
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.writes.lock().running.remove(&self.id);
        self.writes.ended.notify_all();
    }
}

impl ToolWrites {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An edit or write call starts that may write `targets` (canonical,
    /// [`targets`]; `None`: it did not say, so it may write any file).
    pub fn begin(&self, targets: Option<Vec<PathBuf>>) -> Running<'_> {
        let mut s = self.lock();
        let id = s.next_call;
        s.next_call += 1;
        s.running.insert(id, targets);
        Running { writes: self, id }
    }

    /// The number the next write gets: a call's mark at its start.
    pub fn mark(&self) -> u64 {
        self.lock().next
    }

    /// Whether a tool wrote exactly this content (`tag`) to `canonical`
    /// since `mark`.
    pub fn wrote_since(&self, mark: u64, canonical: &Path, tag: Tag) -> bool {
        self.lock()
            .kept
            .iter()
            .rev()
            .take_while(|(n, _, _)| *n >= mark)
            .any(|(_, p, t)| *t == tag && p == canonical)
    }

    /// Waits, at most `limit`, for the edit and write calls running now
    /// that may write `canonical` to end: one may have put it in place and
    /// not yet been noted. Calls writing other files are not waited for.
    /// Whether any such call was running.
    pub fn settle(&self, canonical: &Path, limit: Duration) -> bool {
        let mut s = self.lock();
        let Some(&last) = s.running.keys().next_back() else {
            return false;
        };
        let writing = |s: &State| {
            s.running.range(..=last).any(|(_, targets)| {
                targets
                    .as_ref()
                    .is_none_or(|t| t.iter().any(|p| p == canonical))
            })
        };
        if !writing(&s) {
            return false;
        }
        let deadline = Instant::now() + limit;
        while writing(&s) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = match self.ended.wait_timeout(s, left) {
                Ok((s, _)) => s,
                Err(p) => p.into_inner().0,
            };
        }
        true
    }
}

/// The files a request names (as written in it), resolved by the call's
/// workspace, for [`ToolWrites::begin`].
pub fn targets(ctx: &Ctx, shown: &[String]) -> Vec<PathBuf> {
    shown
        .iter()
        .map(|s| canonical_target(&ctx.workspace.resolve(s)))
        .collect()
}

/// The canonical path of a file a tool writes or wrote: its folder's,
/// joined with its name, when the file is not there (yet, or any more).
fn canonical_target(path: &Path) -> PathBuf {
    if let Ok(c) = nib_files::fs::canonical(path) {
        return c;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            nib_files::fs::canonical(parent).map_or_else(|_| path.to_path_buf(), |p| p.join(name))
        }
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_waits_for_the_calls_writing_that_file_and_no_longer() {
        let dir = tempfile::tempdir().unwrap();
        let here = canonical_target(&dir.path().join("a.txt"));
        let other = canonical_target(&dir.path().join("b.txt"));
        let writes = std::sync::Arc::new(ToolWrites::default());
        assert!(
            !writes.settle(&here, Duration::from_secs(5)),
            "none running"
        );
        // A call writing another file is not waited for.
        let elsewhere = writes.begin(Some(vec![other.clone()]));
        let started = Instant::now();
        assert!(!writes.settle(&here, Duration::from_secs(5)));
        assert!(started.elapsed() < Duration::from_secs(1));
        drop(elsewhere);
        // One writing this file is, until it ends.
        let w = std::sync::Arc::clone(&writes);
        let target = here.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let running = w.begin(Some(vec![target]));
            let _ = tx.send(());
            std::thread::sleep(Duration::from_millis(200));
            drop(running);
        });
        let _ = rx.recv();
        let started = Instant::now();
        assert!(writes.settle(&here, Duration::from_secs(5)));
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < Duration::from_secs(4), "{waited:?}");
        let _ = t.join();
        // One that did not say what it writes is waited for, up to the limit.
        let _stuck = writes.begin(None);
        let started = Instant::now();
        assert!(writes.settle(&other, Duration::from_millis(100)));
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn a_new_file_is_named_by_its_folders_canonical_path() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        assert_eq!(
            canonical_target(&dir.path().join("link").join("new.txt")),
            real.join("new.txt")
        );
    }
}
