//! What nib's own edit and write tools wrote, by any agent: a nibash call's
//! report of changed files (`changes`) leaves out a file whose content is
//! what a tool wrote while the call ran, since over HTTP that is another
//! agent's edit, not the call's change. A tool tells what it is about to put
//! in place before the file is there ([`Running`] is the file tools'
//! [`Placing`]), so a report never waits for another agent's call to end.
//! Only the newest write a tool made to a file explains it: a program that
//! puts back what a tool wrote before that has changed the file.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nib_files::context::Placing;
use nib_text::hashline::Tag;

/// The tools' writes, each with the tag of what was written, numbered in
/// order, and what the edit and write calls still running are putting in
/// place.
#[derive(Default)]
pub struct ToolWrites {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The number the next write gets.
    next: u64,
    /// The newest writes: (number, canonical path, tag, when kept).
    kept: VecDeque<(u64, PathBuf, Tag, Instant)>,
    /// The next running call's number, and the calls running, each with
    /// what it is putting in place (canonical path, tag).
    next_call: u64,
    running: BTreeMap<u64, Vec<(PathBuf, Tag)>>,
}

/// Tool writes kept; a call that ran past this many others' writes may list
/// some of the oldest as its own (as before they were kept at all).
const TOOL_WRITES_KEPT: usize = 4096;

/// A call's mark takes in the writes kept this long before it starts: the
/// roots' watcher may hand their changes to a call that started just after.
const JUST_BEFORE: Duration = Duration::from_millis(100);

/// An edit or write call running: told what it puts in place before it is
/// there; on drop, that is kept as written if the call [`succeeded`], and
/// forgotten if not (a failed write explains nothing).
///
/// [`succeeded`]: Running::succeeded
pub struct Running<'a> {
    writes: &'a ToolWrites,
    id: u64,
    ok: bool,
}

impl Running<'_> {
    /// The call wrote what it said it would.
    pub fn succeeded(&mut self) {
        self.ok = true;
    }
}

impl Placing for Running<'_> {
    fn about_to_place(&self, path: &Path, bytes: &[u8]) {
        let placed = (canonical_target(path), Tag::of(bytes));
        if let Some(p) = self.writes.lock().running.get_mut(&self.id) {
            p.push(placed);
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut s = self.writes.lock();
        let now = Instant::now();
        let placed = s.running.remove(&self.id).unwrap_or_default();
        if !self.ok {
            return;
        }
        for (path, tag) in placed {
            if s.kept.len() == TOOL_WRITES_KEPT {
                s.kept.pop_front();
            }
            let n = s.next;
            s.kept.push_back((n, path, tag, now));
            s.next += 1;
        }
    }
}

impl ToolWrites {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An edit or write call starts.
    pub fn begin(&self) -> Running<'_> {
        let mut s = self.lock();
        let id = s.next_call;
        s.next_call += 1;
        s.running.insert(id, Vec::new());
        Running {
            writes: self,
            id,
            ok: false,
        }
    }

    /// A call's mark at its start: the number of the first write kept
    /// [`JUST_BEFORE`] ago or since (the next write's when none was).
    pub fn mark(&self) -> u64 {
        let s = self.lock();
        let Some(since) = Instant::now().checked_sub(JUST_BEFORE) else {
            return 0;
        };
        s.kept
            .iter()
            .rev()
            .take_while(|(_, _, _, at)| *at >= since)
            .last()
            .map_or(s.next, |(n, ..)| *n)
    }

    /// Forgets the tools' kept writes to `canonical`: a program changed it
    /// since, so none of them says what it holds.
    pub fn forget(&self, canonical: &Path) {
        self.lock().kept.retain(|(_, p, ..)| p != canonical);
    }

    /// The number the next write to be kept gets: taken before a file is
    /// read, for [`ToolWrites::wrote_since`].
    pub fn now(&self) -> u64 {
        self.lock().next
    }

    /// Whether this content (`tag`) of `canonical`, read when the writes
    /// kept numbered below `read_at`, is a tool's: the newest of those
    /// since `mark` put it there, or a call running then or since was
    /// putting it there (still running, or kept from `read_at` on).
    pub fn wrote_since(&self, mark: u64, read_at: u64, canonical: &Path, tag: Tag) -> bool {
        let s = self.lock();
        let is = |p: &PathBuf, t: &Tag| *t == tag && p == canonical;
        s.running.values().flatten().any(|(p, t)| is(p, t))
            || s.kept
                .iter()
                .rev()
                .take_while(|(n, ..)| *n >= read_at)
                .any(|(_, p, t, _)| is(p, t))
            || s.kept
                .iter()
                .rev()
                .skip_while(|(n, ..)| *n >= read_at)
                .take_while(|(n, ..)| *n >= mark)
                .find(|(_, p, ..)| p == canonical)
                .is_some_and(|(_, _, t, _)| *t == tag)
    }
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
    fn a_write_is_known_from_its_announcement_until_it_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("a.txt");
        let canonical = canonical_target(&here);
        let (old, new) = (Tag::of(b"old\n"), Tag::of(b"new\n"));
        let writes = ToolWrites::default();
        let mark = writes.mark();
        let running = writes.begin();
        assert!(
            !writes.wrote_since(mark, writes.now(), &canonical, new),
            "nothing said yet"
        );
        running.about_to_place(&here, b"new\n");
        // Being put in place: known before the call ends, and only that content.
        assert!(writes.wrote_since(mark, writes.now(), &canonical, new));
        assert!(!writes.wrote_since(mark, writes.now(), &canonical, old));
        assert!(!writes.wrote_since(
            mark,
            writes.now(),
            &canonical_target(&dir.path().join("b.txt")),
            new
        ));
        let mut running = running;
        running.succeeded();
        drop(running);
        // Ended: kept as written since the mark, and in the mark of a call
        // starting just after, not in one starting later.
        assert!(writes.wrote_since(mark, writes.now(), &canonical, new));
        assert!(writes.wrote_since(writes.mark(), writes.now(), &canonical, new));
        std::thread::sleep(JUST_BEFORE + Duration::from_millis(20));
        assert!(!writes.wrote_since(writes.mark(), writes.now(), &canonical, new));
    }

    #[test]
    fn only_the_newest_write_of_a_call_that_succeeded_explains_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("a.txt");
        let canonical = canonical_target(&here);
        let writes = ToolWrites::default();
        let mark = writes.mark();
        let write = |bytes: &[u8], ok: bool| {
            let mut running = writes.begin();
            running.about_to_place(&here, bytes);
            if ok {
                running.succeeded();
            }
        };
        write(b"b\n", true);
        write(b"c\n", true);
        write(b"d\n", false);
        // The file holds what the newest write put there: the tool's.
        assert!(writes.wrote_since(mark, writes.now(), &canonical, Tag::of(b"c\n")));
        // Back to an older write's content: a program's change.
        assert!(!writes.wrote_since(mark, writes.now(), &canonical, Tag::of(b"b\n")));
        // A write that failed explains nothing.
        assert!(!writes.wrote_since(mark, writes.now(), &canonical, Tag::of(b"d\n")));
        // A write kept after the file was read is newer than what was read.
        let read_at = writes.now();
        write(b"e\n", true);
        assert!(writes.wrote_since(mark, read_at, &canonical, Tag::of(b"c\n")));
        assert!(writes.wrote_since(mark, read_at, &canonical, Tag::of(b"e\n")));
        assert!(!writes.wrote_since(mark, writes.now(), &canonical, Tag::of(b"c\n")));
        // A program changed it since (a report listed it): no write explains it.
        writes.forget(&canonical);
        assert!(!writes.wrote_since(mark, writes.now(), &canonical, Tag::of(b"e\n")));
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
