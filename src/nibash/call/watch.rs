//! What a running call or job plants for the person is taken out while it
//! runs, not only when it ends: the person may start their agent client
//! or run `git status` in the project during a job that runs for minutes.
//! The same holds for every other confined program the broker starts that
//! may write the roots and outlives a moment: a provider's process
//! ([`watch_service`]) is looked at for as long as it runs, and each of
//! its calls ends with a sweep of its own ([`Service::sweep_now`]).
//!
//! One thread per process looks at every running call of a sandbox scope
//! every [`planted::JOB_SWEEP_EVERY`]: the client and editor files
//! (`nib_files::fs::planted`) at each look, the git dirs
//! (`nib_files::fs::git_guard`) at most every [`GIT_SPACING`] times the
//! last git sweep's length (a walk of the roots' folders), so a large tree
//! costs at most a tenth of a core. What is taken is said in the call's
//! output (a service's, in the answer of its next call, and in nib's log).
//! A call registers with [`watch`]; it is dropped once it ended (the
//! end-of-call sweep covers the rest).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use nib_files::fs::{Scope, git_guard, planted};

use crate::nibash::jobs::Entry;

/// The git sweep runs at most once per this many times its own length.
const GIT_SPACING: u32 = 10;

/// The git sweep's shortest spacing.
const GIT_EVERY_AT_LEAST: Duration = Duration::from_millis(500);

/// What is looked at: a nibash call (or job), or a service.
enum Target {
    Call(Weak<Entry>),
    Service(Weak<Service>),
}

struct Watched {
    target: Target,
    scope: Scope,
    held: Vec<PathBuf>,
}

/// A running target: where its lines go, and how old it is.
enum Live {
    Call(Arc<Entry>),
    Service(Arc<Service>),
}

impl Live {
    fn age(&self) -> Duration {
        match self {
            Live::Call(e) => e.age(),
            Live::Service(s) => s.started.elapsed(),
        }
    }

    fn tell(&self, lines: Vec<String>) {
        match self {
            Live::Call(entry) => {
                let mut s = entry.state();
                for line in lines {
                    s.output.extend_from_slice(line.as_bytes());
                    s.output.push(b'\n');
                }
            }
            Live::Service(service) => service.keep(lines),
        }
    }
}

static WATCHED: Mutex<Vec<Watched>> = Mutex::new(Vec::new());
static STARTED: std::sync::Once = std::sync::Once::new();

/// Looks at what the call of `entry` plants while it runs (sandbox scopes
/// only; `held` are the paths its programs could not change).
pub(super) fn watch(entry: &Arc<Entry>, scope: &Scope, held: &[PathBuf]) {
    add(Target::Call(Arc::downgrade(entry)), scope, held);
}

fn add(target: Target, scope: &Scope, held: &[PathBuf]) {
    if !matches!(scope, Scope::Sandbox(_)) {
        return;
    }
    WATCHED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Watched {
            target,
            scope: scope.clone(),
            held: held.to_vec(),
        });
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("nib-planted".into())
            .spawn(run);
    });
}

/// A confined program that runs beside the calls and may write the roots
/// (a provider's process): looked at while the caller holds it, from its
/// start. Dropping the last [`Arc`] ends the looking.
pub struct Service {
    /// Who it is, for the log.
    name: String,
    started: Instant,
    started_at: SystemTime,
    scope: Scope,
    held: Vec<PathBuf>,
    /// What the looks took since the last [`Service::sweep_now`].
    taken: Mutex<Vec<String>>,
}

impl Service {
    fn keep(&self, lines: Vec<String>) {
        for line in &lines {
            tracing::warn!("{}: {line}", self.name);
        }
        self.taken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(lines);
    }

    /// Sweeps now, as after a nibash call: what the service made since it
    /// started in client files and git dirs is taken out. Returns those
    /// lines and the ones the looks took since the last time (to be said
    /// in the answer of the service's call). Walks the roots: call it off
    /// the async threads.
    pub fn sweep_now(&self) -> Vec<String> {
        let mut lines = git_guard::sweep(&self.scope, &self.held, self.started_at);
        lines.extend(planted::sweep(&self.scope, &self.held, self.started_at));
        for line in &lines {
            tracing::warn!("{}: {line}", self.name);
        }
        let mut taken = std::mem::take(&mut *self.taken.lock().unwrap_or_else(|p| p.into_inner()));
        taken.extend(lines);
        taken
    }
}

/// Looks at what the service `name`, confined with `held` read-only and
/// started now, plants in the roots of `scope` for as long as the returned
/// [`Service`] is held (sandbox scopes only: otherwise nothing is looked
/// at, and [`Service::sweep_now`] takes nothing). The roots are walked
/// first when no sweep has walked them, so what is there now is known as
/// the person's.
pub fn watch_service(name: &str, scope: &Scope, held: &[PathBuf]) -> Arc<Service> {
    git_guard::before_call(scope);
    let service = Arc::new(Service {
        name: name.to_string(),
        started: Instant::now(),
        started_at: SystemTime::now(),
        scope: scope.clone(),
        held: held.to_vec(),
        taken: Mutex::new(Vec::new()),
    });
    add(Target::Service(Arc::downgrade(&service)), scope, held);
    service
}

fn running() -> Vec<(Live, Scope, Vec<PathBuf>)> {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    w.retain(|x| match &x.target {
        Target::Call(e) => e.upgrade().is_some_and(|e| !e.state().ended()),
        Target::Service(s) => s.strong_count() > 0,
    });
    w.iter()
        .filter_map(|x| {
            let live = match &x.target {
                Target::Call(e) => Live::Call(e.upgrade()?),
                Target::Service(s) => Live::Service(s.upgrade()?),
            };
            Some((live, x.scope.clone(), x.held.clone()))
        })
        .collect()
}

fn run() {
    let mut git_last = Instant::now();
    let mut git_took = Duration::ZERO;
    loop {
        std::thread::sleep(planted::JOB_SWEEP_EVERY);
        // Calls younger than one look are left to their own end's sweep.
        let running: Vec<_> = running()
            .into_iter()
            .filter(|(l, _, _)| l.age() >= planted::JOB_SWEEP_EVERY)
            .collect();
        if running.is_empty() {
            continue;
        }
        let git_due = git_last.elapsed() >= (git_took * GIT_SPACING).max(GIT_EVERY_AT_LEAST);
        for (live, scope, held) in &running {
            let since = SystemTime::now() - live.age();
            let mut lines = planted::sweep(scope, held, since);
            if git_due {
                let start = Instant::now();
                lines.extend(git_guard::sweep(scope, held, since));
                git_took = start.elapsed();
                git_last = Instant::now();
            }
            if !lines.is_empty() {
                live.tell(lines);
            }
        }
    }
}
