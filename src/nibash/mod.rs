//! nibash, the shell tool, on the broker's side: everything of it that runs
//! in the broker process. It starts a confined worker per call, feeds it the
//! call, answers what it asks over the channel, and turns its output into
//! the tool's answer; it keeps the calls and jobs between calls. What runs
//! inside the sandbox (the bash interpreter, nib's own commands, the
//! builtins that ask the broker) is the `nib-shell` crate; the two meet only
//! in its `channel`, and the compiler holds that the worker imports nothing
//! of the broker.
//!
//! - [`call`]: one call: spawn, serve the channel, wait until the command
//!   line is done or its timeout turns it into a job.
//! - [`warm`]: the worker started ahead of the next call.
//! - [`threads`]: the helper threads of calls, kept between calls.
//! - [`changes`]: the files a call changed, listed after it with new tags;
//!   [`tool_writes`]: what nib's edit and write tools wrote meanwhile (any
//!   agent's), which is not the call's change.
//! - [`jobs`]: the calls still running and the jobs that carry over between
//!   calls, with their output.
//! - [`watch`]: inotify on the roots' folders, so finding changed files
//!   costs nothing per call.
//! - [`cut`], [`decide`], [`summary`]: long output — which rows stay, the
//!   model's choice of rows, summaries, and the log of the whole.
//! - [`command_rules`], [`exec_judge`]: nib.json command rules before a call runs,
//!   and what the worker and the sandbox enforce while it runs.
//! - [`withheld`]: the closing lines naming what the sandbox hid.
//! - [`skim`]: reading long files (logs, reports) for what a question asks.
//!
//! The tool arguments and the answer's wording live in `tools::nibash`.

pub mod call;
pub mod changes;
pub mod command_rules;
pub mod cut;
pub mod decide;
pub mod exec_judge;
pub mod jobs;
pub mod network_why;
pub mod runners;
pub mod skim;
pub mod summary;
pub mod threads;
pub mod tool_writes;
pub mod warm;
pub mod watch;
pub mod withheld;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// (agent, tool) → (calls, characters returned).
pub type Usage = BTreeMap<(String, String), (u64, u64)>;

/// What announces a job's end to the client: job number, text.
pub type Announcer = Box<dyn Fn(u32, String) + Send + Sync>;

/// A watcher and the roots it watches (`None`: they cannot be watched).
type WatcherFor = (Vec<PathBuf>, Option<std::sync::Arc<watch::Watcher>>);

/// What the broker keeps between nibash calls: jobs and named directories.
#[derive(Default)]
pub struct Nibash {
    /// Running calls and jobs.
    pub jobs: jobs::Jobs,
    /// Tells the client at once that a job ended (its channel), when it has one.
    pub announcer: Mutex<Option<Announcer>>,
    /// Calls and characters returned, by agent and tool (nibash_status).
    pub usage: Mutex<Usage>,
    /// The worker started ahead of the next call.
    pub warm: std::sync::Arc<warm::Warm>,
    /// The watcher of the roots it was made for (`None` inside: none possible).
    watcher: Mutex<Option<WatcherFor>>,
    /// A walk for changed files stopped at its limit once: do not walk again.
    pub walk_too_big: std::sync::atomic::AtomicBool,
    /// The agents that turned summaries off (`nibash_control {"summaries":
    /// false}`), by [`jobs::Owner`]: an HTTP agent's switch is its own.
    summaries_off: Mutex<std::collections::HashSet<jobs::Owner>>,
    /// The agents ([`jobs::Owner`]) a call has named the sandbox's private
    /// /tmp to: once each for the zygote's, which later calls share.
    tmp_named: Mutex<std::collections::HashSet<jobs::Owner>>,
    /// The providers' lines for nibash_status (set by the server, which runs them).
    pub provider_status: Mutex<Option<StatusFn>>,
    /// What nib's edit and write tools wrote, so a call's report names only
    /// its own changes.
    pub tool_writes: tool_writes::ToolWrites,
}

/// Lines a part of the broker adds to nibash_status.
pub type StatusFn = Box<dyn Fn() -> String + Send + Sync>;

impl Nibash {
    /// Whether `owner` left summaries on (they are unless it turned them off).
    pub fn summaries_on(&self, owner: &str) -> bool {
        !self
            .summaries_off
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(owner)
    }

    /// Whether a call of `owner`'s has named the zygote's private /tmp.
    pub fn tmp_named(&self, owner: &str) -> bool {
        self.tmp_named
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(owner)
    }

    /// A call of `owner`'s named the zygote's private /tmp.
    pub fn note_tmp_named(&self, owner: &jobs::Owner) {
        self.tmp_named
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(std::sync::Arc::clone(owner));
    }

    /// Turns summaries on or off for `owner`'s calls.
    pub fn set_summaries(&self, owner: &jobs::Owner, on: bool) {
        let mut off = self.summaries_off.lock().unwrap_or_else(|p| p.into_inner());
        if on {
            off.remove(owner);
        } else {
            off.insert(std::sync::Arc::clone(owner));
        }
    }

    /// The watcher for these roots (made on first use, remade when the roots
    /// change), or `None` when the roots cannot be watched.
    pub fn watcher(&self, roots: &[PathBuf]) -> Option<std::sync::Arc<watch::Watcher>> {
        let mut slot = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        match &*slot {
            Some((r, w)) if r.as_slice() == roots => w.clone(),
            _ => {
                let w = watch::Watcher::new(roots).map(std::sync::Arc::new);
                *slot = Some((roots.to_vec(), w.clone()));
                w
            }
        }
    }

    /// Announces that job `id` ended (nothing without an announcer). Only
    /// the stdio client's jobs are announced: the client kept for
    /// notifications is that one, never another agent's.
    pub fn announce(&self, owner: &str, id: u32, text: String) {
        if !owner.is_empty() {
            return;
        }
        if let Some(a) = self
            .announcer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            a(id, text);
        }
    }

    /// Counts one answer of `tool` to `agent`, `chars` characters long.
    pub fn count(&self, agent: &str, tool: &str, chars: usize) {
        let mut u = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        let e = u.entry((agent.to_string(), tool.to_string())).or_default();
        e.0 += 1;
        e.1 += chars as u64;
    }
}
