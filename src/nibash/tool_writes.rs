//! What nib's own edit and write tools wrote, by any agent: a nibash call's
//! report of changed files (`changes`) leaves out a file whose content is
//! what a tool wrote while the call ran, since over HTTP that is another
//! agent's edit, not the call's change.

use std::collections::{BTreeSet, VecDeque};
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
    /// The next running call's number, and the calls running.
    next_call: u64,
    running: BTreeSet<u64>,
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
            let path = ctx.workspace.resolve(shown);
            noted.push((nib_files::fs::canonical(&path).unwrap_or(path), tag));
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

    /// An edit or write call starts.
    pub fn begin(&self) -> Running<'_> {
        let mut s = self.lock();
        let id = s.next_call;
        s.next_call += 1;
        s.running.insert(id);
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

    /// Waits, at most `limit`, for the edit and write calls running now to
    /// end: one may have put its file in place and not yet been noted.
    /// Whether any was running.
    pub fn settle(&self, limit: Duration) -> bool {
        let mut s = self.lock();
        let Some(&last) = s.running.last() else {
            return false;
        };
        let deadline = Instant::now() + limit;
        while s.running.first().is_some_and(|first| *first <= last) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_waits_for_the_calls_running_then_and_no_longer() {
        let writes = std::sync::Arc::new(ToolWrites::default());
        assert!(!writes.settle(Duration::from_secs(5)), "none running");
        let w = std::sync::Arc::clone(&writes);
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let running = w.begin();
            let _ = tx.send(());
            std::thread::sleep(Duration::from_millis(200));
            drop(running);
        });
        let _ = rx.recv();
        let started = Instant::now();
        assert!(writes.settle(Duration::from_secs(5)));
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < Duration::from_secs(4), "{waited:?}");
        let _ = t.join();
        // One that never ends is waited for only up to the limit.
        let _stuck = writes.begin();
        let started = Instant::now();
        assert!(writes.settle(Duration::from_millis(100)));
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
