//! What a running call or job plants for the person is taken out while it
//! runs, not only when it ends: the person may start their agent client
//! or run `git status` in the project during a job that runs for minutes.
//!
//! One thread per process looks at every running call of a sandbox scope
//! every [`planted::JOB_SWEEP_EVERY`]: the client and editor files
//! (`nib_files::fs::planted`) at each look, the git dirs
//! (`nib_files::fs::git_guard`) at most every [`GIT_SPACING`] times the
//! last git sweep's length (a walk of the roots' folders), so a large tree
//! costs at most a tenth of a core. What is taken is said in the call's
//! output. A call registers with [`watch`]; it is dropped once it ended
//! (the end-of-call sweep covers the rest).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use nib_files::fs::{Scope, git_guard, planted};

use crate::nibash::broker::jobs::Entry;

/// The git sweep runs at most once per this many times its own length.
const GIT_SPACING: u32 = 10;

/// The git sweep's shortest spacing.
const GIT_EVERY_AT_LEAST: Duration = Duration::from_millis(500);

struct Watched {
    entry: Weak<Entry>,
    scope: Scope,
    held: Vec<PathBuf>,
}

static WATCHED: Mutex<Vec<Watched>> = Mutex::new(Vec::new());
static STARTED: std::sync::Once = std::sync::Once::new();

/// Looks at what the call of `entry` plants while it runs (sandbox scopes
/// only; `held` are the paths its programs could not change).
pub(super) fn watch(entry: &Arc<Entry>, scope: &Scope, held: &[PathBuf]) {
    if !matches!(scope, Scope::Sandbox(_)) {
        return;
    }
    WATCHED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Watched {
            entry: Arc::downgrade(entry),
            scope: scope.clone(),
            held: held.to_vec(),
        });
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("nib-planted".into())
            .spawn(run);
    });
}

fn run() {
    let mut git_last = Instant::now();
    let mut git_took = Duration::ZERO;
    loop {
        std::thread::sleep(planted::JOB_SWEEP_EVERY);
        let running: Vec<(Arc<Entry>, Scope, Vec<PathBuf>)> = {
            let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
            w.retain(|x| x.entry.upgrade().is_some_and(|e| !e.state().ended()));
            w.iter()
                .filter_map(|x| Some((x.entry.upgrade()?, x.scope.clone(), x.held.clone())))
                .collect()
        };
        // Calls younger than one look are left to their own end's sweep.
        let running: Vec<_> = running
            .into_iter()
            .filter(|(e, _, _)| e.age() >= planted::JOB_SWEEP_EVERY)
            .collect();
        if running.is_empty() {
            continue;
        }
        let git_due = git_last.elapsed() >= (git_took * GIT_SPACING).max(GIT_EVERY_AT_LEAST);
        for (entry, scope, held) in &running {
            let since = SystemTime::now() - entry.age();
            let mut lines = planted::sweep(scope, held, since);
            if git_due {
                let start = Instant::now();
                lines.extend(git_guard::sweep(scope, held, since));
                git_took = start.elapsed();
                git_last = Instant::now();
            }
            if lines.is_empty() {
                continue;
            }
            let mut s = entry.state();
            for line in lines {
                s.output.extend_from_slice(line.as_bytes());
                s.output.push(b'\n');
            }
        }
    }
}
