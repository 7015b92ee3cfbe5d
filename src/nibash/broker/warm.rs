//! Warm workers: a confined worker started ahead of the next call, so a call
//! pays only the hand-off of its request, not the worker's start (a new
//! session, namespaces, Landlock, seccomp, bubblewrap).
//!
//! One warm worker is kept per sandbox configuration — the policy (roots,
//! network, protected paths, layers) and the project directory — and a call
//! takes it only when its configuration is the same; otherwise a fresh one
//! starts and the warm one is replaced. A worker is never reused: it runs one
//! call and ends. Calls with command rules start their own (the exec judge
//! and the masked files are the call's). A warm worker waits on its channel
//! for the request and does nothing else; it dies with the broker like any
//! worker, and is killed when replaced. Starting workers belongs to
//! `nib-sandbox`; this module only keeps one ready.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::nibash::channel::Channel;

/// How long a refill waits at most for the answer to be written.
const ANSWER_BOUND: Duration = Duration::from_millis(20);

/// A started worker, its merged output, and the broker's end of its channel.
pub type Started = (nib_sandbox::Worker, std::io::PipeReader, Channel);

/// The worker kept ready, and what it was started for.
#[derive(Default)]
pub struct Warm {
    slot: Mutex<Option<(String, Started)>>,
}

/// What a worker is started for: two calls with the same key can use the
/// same kind of worker. Under bubblewrap a hidden path is covered only if
/// it existed when the worker's mounts were made, so the hidden paths that
/// exist now are part of the key: a credential file made after a warm
/// worker started sends the next call to a fresh worker that covers it.
/// (With Landlock alone the grants are an allow-list: a file made later is
/// not granted.)
pub fn key(policy: &nib_sandbox::Policy, cwd: &Path) -> String {
    let hidden = if policy.confine && policy.use_bwrap {
        policy
            .reads
            .hidden_inside(&policy.writable, &policy.read_only)
    } else {
        Vec::new()
    };
    format!(
        "{}\u{0}{}\u{0}{}",
        serde_json::to_string(policy).unwrap_or_default(),
        cwd.display(),
        serde_json::to_string(&hidden).unwrap_or_default(),
    )
}

/// Starts a worker that waits for its request on the returned channel.
pub fn start(policy: nib_sandbox::Policy, cwd: &Path) -> Result<Started, String> {
    start_with(sandbox(policy)?, cwd)
}

/// A sandbox for nibash workers under `policy`: the small worker entry
/// beside nib applies the layers, then runs `nib` [`crate::nibash::channel::NIBASH_ARG`].
pub fn sandbox(mut policy: nib_sandbox::Policy) -> Result<nib_sandbox::Sandbox, String> {
    let exe = own_binary()?;
    // nib itself must be visible inside bubblewrap too (its private /tmp
    // would hide a binary kept there).
    policy.read_only.push(exe.clone());
    Ok(nib_sandbox::Sandbox::new(
        &nib_sandbox::entry_beside(&exe),
        policy,
    ))
}

/// Starts a worker of `sandbox` (which may carry an exec judge).
pub fn start_with(sandbox: nib_sandbox::Sandbox, cwd: &Path) -> Result<Started, String> {
    let exe = own_binary()?;
    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("no channel: {e}"))?;
    let chan = Channel::new(ours).map_err(|e| format!("no channel: {e}"))?;
    let argv = vec![
        exe.into_os_string(),
        crate::nibash::channel::NIBASH_ARG.into(),
    ];
    let (worker, pipe) = sandbox
        .spawn_merged(&argv, cwd, &[], Some(theirs.into()))
        .map_err(|e| e.to_string())?;
    Ok((worker, pipe, chan))
}

fn own_binary() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find nib's own binary: {e}"))
}

impl Warm {
    /// The warm worker, if it was started for `key` and is still waiting.
    pub fn take(&self, key: &str) -> Option<Started> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        match slot.take() {
            Some((k, mut started)) if k == key => {
                // One that died while waiting (killed, refused) is no use.
                if started.0.try_wait().is_some() {
                    return None;
                }
                Some(started)
            }
            // Another configuration: drop it (its process is killed).
            _ => None,
        }
    }

    /// Starts the next warm worker for `key` on a thread of its own, once
    /// the answer being sent is out: on a 2-core machine the start (a fork
    /// of the broker, an exec) delayed the answer by up to a millisecond.
    pub fn refill(self: &Arc<Self>, key: String, policy: nib_sandbox::Policy, cwd: PathBuf) {
        let warm = Arc::clone(self);
        let written = crate::stdio::lines_written();
        let _ = std::thread::Builder::new()
            .name("nib-warm".into())
            .spawn(move || {
                crate::stdio::wait_for_line_after(written, ANSWER_BOUND);
                if let Ok(started) = start(policy, &cwd) {
                    let old = warm
                        .slot
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .replace((key, started));
                    drop(old);
                }
            });
    }
}
