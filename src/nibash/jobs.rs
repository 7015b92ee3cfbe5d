//! The calls still running and the jobs that carry over between calls.
//!
//! Every nibash call gets an entry (and a number) when it starts, so
//! `nibash_status` can show it; a call that ends within its timeout leaves
//! the table, one that is still running (timeout, `background: true`, or
//! `cmd &`) stays as job `%N` until its end has been reported. One thread
//! (the call's, then the job's) feeds an entry; others read it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Output kept in memory per call; beyond it the rest is counted, not kept.
pub const OUTPUT_KEPT: usize = 16 << 20;

/// How a call or job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ending {
    /// Exit status (128+N for signal N).
    pub code: i32,
    /// It was killed by `kill` or a cancellation.
    pub killed: bool,
}

/// The changing part of an entry.
#[derive(Debug, Default)]
pub struct State {
    /// Everything it printed (stdout and stderr, interleaved), up to [`OUTPUT_KEPT`].
    pub output: Vec<u8>,
    /// Bytes printed past [`OUTPUT_KEPT`].
    pub dropped: usize,
    /// Bytes of output already shown to the agent.
    pub shown: usize,
    /// The output pipe reached its end.
    pub eof: bool,
    /// The worker's end mark came through the pipe: the call's output is read.
    pub marked: bool,
    /// The command line's own status, from the worker.
    pub done: Option<i32>,
    /// The command line finished but jobs it started with `&` still run.
    pub background: bool,
    /// A failure the status hides, for the closing line.
    pub hidden: Option<String>,
    /// The worker process's end.
    pub exit: Option<Ending>,
    /// The call returned while this kept running: it is a job.
    pub is_job: bool,
    /// The job's end was reported to the agent.
    pub reported: bool,
    /// Killed on request.
    pub killed: bool,
    /// Stopped for printing too much.
    pub flooded: bool,
}

impl State {
    /// The call's answer can be given: the command line is done (the
    /// worker said so and its end mark came through the pipe) and every
    /// process that held the pipe has closed it (process substitutions
    /// finishing late) — or it left background jobs — or the worker ended.
    pub fn call_finished(&self) -> bool {
        (self.command_done() && (self.eof || self.background)) || (self.exit.is_some() && self.eof)
    }

    /// The command line is done: `Done` from the worker and its end mark.
    pub fn command_done(&self) -> bool {
        self.done.is_some() && self.marked
    }

    /// Nothing more will happen: the worker ended and its output is read.
    pub fn ended(&self) -> bool {
        self.exit.is_some() && self.eof
    }

    /// The status to report.
    pub fn code(&self) -> Option<i32> {
        if self.killed {
            return self.exit.as_ref().map(|e| e.code);
        }
        match (&self.exit, self.done) {
            (_, Some(c)) if !self.background => Some(c),
            (Some(e), _) => Some(e.code),
            (None, c) => c,
        }
    }

    /// Appends output under the cap.
    pub fn append(&mut self, bytes: &[u8]) {
        let room = OUTPUT_KEPT.saturating_sub(self.output.len());
        let take = room.min(bytes.len());
        self.output.extend_from_slice(&bytes[..take]);
        self.dropped += bytes.len() - take;
    }
}

/// One call or job.
pub struct Entry {
    /// Its number (`%N` once it is a job).
    pub id: u32,
    /// The agent whose call it is ([`Owner`]): only that agent lists it,
    /// reads its output, waits for it or stops it.
    pub owner: Owner,
    /// The command line.
    pub command: String,
    /// The description the agent gave, if any.
    pub description: Option<String>,
    /// When it started.
    pub started: Instant,
    state: Mutex<State>,
    changed: Condvar,
    killer: Mutex<Option<nib_sandbox::Killer>>,
    table_changes: Arc<Changes>,
}

/// A count of the table's changes (an entry added, gone, or changed) that
/// a watcher can wait on: the status file is rewritten at once, not at its
/// next look a second later.
#[derive(Debug, Default)]
pub struct Changes {
    count: Mutex<u64>,
    changed: Condvar,
    /// The count the status file last showed (`None`: nothing publishes).
    published: Mutex<Option<u64>>,
    published_changed: Condvar,
}

impl Changes {
    /// Counts a change and wakes the watchers.
    pub fn touch(&self) {
        *self.count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.changed.notify_all();
    }

    /// The count now.
    pub fn count(&self) -> u64 {
        *self.count.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The publisher showed the table as it was at count `at`.
    pub fn mark_published(&self, at: u64) {
        let mut p = self.published.lock().unwrap_or_else(|p| p.into_inner());
        *p = Some(p.map_or(at, |old| old.max(at)));
        self.published_changed.notify_all();
    }

    /// Waits (at most `timeout`) until a publisher has shown every change
    /// made so far; returns at once when nothing publishes.
    pub fn await_published(&self, timeout: Duration) {
        let want = self.count();
        let p = self.published.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .published_changed
            .wait_timeout_while(p, timeout, |p| p.is_some_and(|at| at < want))
            .unwrap_or_else(|p| p.into_inner());
    }

    /// Waits until the count differs from `seen` or `timeout` passes;
    /// returns the count.
    pub fn wait_after(&self, seen: u64, timeout: Duration) -> u64 {
        let count = self.count.lock().unwrap_or_else(|p| p.into_inner());
        let (count, _) = self
            .changed
            .wait_timeout_while(count, timeout, |c| *c == seen)
            .unwrap_or_else(|p| p.into_inner());
        *count
    }
}

impl Entry {
    /// Locks its state.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes its state and wakes whoever waits on it.
    pub fn update(&self, f: impl FnOnce(&mut State)) {
        let mut s = self.state();
        f(&mut s);
        self.changed.notify_all();
        drop(s);
        self.table_changes.touch();
    }

    /// Tells the table's watchers it changed (after a change made through
    /// [`Entry::state`]).
    pub fn touch(&self) {
        self.table_changes.touch();
    }

    /// Waits until `pred` holds or `timeout` passes; returns whether it holds.
    pub fn wait_for(&self, timeout: Option<Duration>, pred: impl Fn(&State) -> bool) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.state();
        loop {
            if pred(&s) {
                return true;
            }
            match deadline {
                None => {
                    s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
                }
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    s = self
                        .changed
                        .wait_timeout(s, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
    }

    /// Gives it the handle that ends its process tree.
    pub fn set_killer(&self, k: nib_sandbox::Killer) {
        *self.killer.lock().unwrap_or_else(|p| p.into_inner()) = Some(k);
    }

    /// Ends its whole process tree, if it still runs.
    pub fn kill(&self) -> bool {
        let mut s = self.state();
        if s.exit.is_some() {
            return false;
        }
        s.killed = true;
        // The waiting thread records the exit (under this lock) after the
        // worker ended but before it reaps it, so the pid is still the
        // worker's here.
        if let Some(k) = self.killer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            k.kill();
        }
        true
    }

    /// Records that the worker ended (called before it is reaped).
    pub fn record_exit(&self, code: i32) {
        self.update(|s| {
            s.exit = Some(Ending {
                code,
                killed: s.killed,
            });
        });
    }

    /// Marks the worker as ended before it is reaped, so no kill can reach
    /// its pid afterwards.
    pub fn forget_killer(&self) {
        let _s = self.state();
        self.killer.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// How long it has run.
    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The agent a call belongs to: empty for the stdio client (one agent),
/// the token's NAME for an HTTP agent. Numbers are shared by all agents;
/// what an agent can reach is only its own.
pub type Owner = Arc<str>;

/// How many jobs whose end was reported stay for `wait %N`.
pub const REPORTED_KEPT: usize = 32;

/// The table of calls and jobs.
#[derive(Default)]
pub struct Jobs {
    next: AtomicU32,
    table: Mutex<BTreeMap<u32, Arc<Entry>>>,
    /// Every change of the table and its entries, for the status file.
    pub changes: Arc<Changes>,
}

impl Jobs {
    fn table(&self) -> MutexGuard<'_, BTreeMap<u32, Arc<Entry>>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new call of `owner`'s.
    pub fn start(&self, owner: &Owner, command: &str, description: Option<String>) -> Arc<Entry> {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Arc::new(Entry {
            id,
            owner: Arc::clone(owner),
            command: command.to_string(),
            description,
            started: Instant::now(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            killer: Mutex::new(None),
            table_changes: Arc::clone(&self.changes),
        });
        self.table().insert(id, Arc::clone(&entry));
        self.changes.touch();
        entry
    }

    /// `owner`'s entry with this number (another agent's is not there for it).
    pub fn get(&self, owner: &str, id: u32) -> Option<Arc<Entry>> {
        self.table()
            .get(&id)
            .filter(|e| &*e.owner == owner)
            .cloned()
    }

    /// Every entry, oldest first, but jobs whose end was already reported
    /// (kept only so that `wait %N` still gives their status, as bash's
    /// `wait` does for a job that ended).
    pub fn all(&self) -> Vec<Arc<Entry>> {
        self.table()
            .values()
            .filter(|e| {
                let s = e.state();
                !(s.ended() && s.reported)
            })
            .cloned()
            .collect()
    }

    /// [`Jobs::all`] of one agent's.
    pub fn all_of(&self, owner: &str) -> Vec<Arc<Entry>> {
        self.all()
            .into_iter()
            .filter(|e| &*e.owner == owner)
            .collect()
    }

    /// `owner`'s jobs (entries whose call returned while they ran), oldest first.
    pub fn jobs(&self, owner: &str) -> Vec<Arc<Entry>> {
        self.all_of(owner)
            .into_iter()
            .filter(|e| e.state().is_job)
            .collect()
    }

    /// Forgets an entry.
    pub fn remove(&self, id: u32) {
        self.table().remove(&id);
        self.changes.touch();
    }

    /// Lines for `owner`'s jobs that ended since they were last reported. A
    /// reported job leaves the listings but stays for `wait %N` (its status,
    /// and its unread output), the last [`REPORTED_KEPT`] of them.
    pub fn take_finished_report(&self, owner: &str) -> String {
        let mut out = String::new();
        for e in self.jobs(owner) {
            let mut s = e.state();
            if s.ended() && !s.reported {
                s.reported = true;
                let unread = s.output.len().saturating_sub(s.shown);
                out.push_str(&format!(
                    "[job %{} {}: {}{}]\n",
                    e.id,
                    ending_words(&s),
                    e.command,
                    if unread > 0 {
                        format!(
                            "; {unread} bytes of output unread, wait %{} shows them",
                            e.id
                        )
                    } else {
                        String::new()
                    }
                ));
            }
        }
        let mut table = self.table();
        let reported: Vec<u32> = table
            .iter()
            .filter(|(_, e)| {
                let s = e.state();
                s.ended() && s.reported
            })
            .map(|(id, _)| *id)
            .collect();
        for id in reported
            .iter()
            .take(reported.len().saturating_sub(REPORTED_KEPT))
        {
            table.remove(id);
        }
        drop(table);
        if !out.is_empty() {
            self.changes.touch();
        }
        out
    }
}

/// "exited 0", "killed", "exited 2".
pub fn ending_words(s: &State) -> String {
    if s.killed {
        return "was killed".into();
    }
    match s.code() {
        Some(c) => format!("exited {c}"),
        None => "is running".into(),
    }
}
