//! Warm workers: confined workers made ahead of the calls, so a call pays
//! only the hand-off of its request, not a sandbox's start (a fork of the
//! broker, namespaces, Landlock, seccomp, bubblewrap, two execs).
//!
//! For each sandbox configuration — the policy (roots, network, protected
//! paths, layers, the hidden paths that exist) and the project directory —
//! one zygote is started (`nib_sandbox::Zygote`): a confined `nib` that
//! forks a fresh worker for each call. The pool keeps forked workers ready
//! as demand asks: as many as calls ran at once lately (a turn's parallel
//! calls come as a burst: after the first burst of K, K are ready), at most
//! [`most_ready`], and lets extras go once no burst needed them for [`IDLE`]; a
//! call that finds none ready has one forked on its path (a fork, not a
//! start). The zygote and the first worker are started when the session
//! starts, so the first call finds one. A call takes a worker only when its
//! configuration is the same; otherwise the zygote and the pool are let go
//! and made anew for the new one. A worker is never reused: it runs one call
//! and ends. Calls with command rules start their own (the exec judge and
//! the masked files are the call's). Starting and forking workers belongs to
//! `nib-sandbox`; this module only keeps them ready.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nib_shell::channel::Channel;

/// How long a refill waits at most for the answer to be written.
const ANSWER_BOUND: Duration = Duration::from_millis(20);
/// Calls that start within this of each other are one burst.
const BURST: Duration = Duration::from_millis(250);
/// How long a start waits at most for the calls running to end.
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// A started worker, its merged output, and the broker's end of its channel.
pub type Started = (Process, std::io::PipeReader, Channel);

/// A call's worker: started for the call alone, or forked by the zygote.
pub enum Process {
    /// Started for the call (command rules, a one-call `nib sh`, or no
    /// zygote to fork from).
    Own(nib_sandbox::Confined),
    /// Forked by the session's zygote.
    Forked(nib_sandbox::Forked),
}

impl Process {
    /// A handle that ends the call's whole tree from another thread.
    pub fn killer(&self) -> nib_sandbox::Killer {
        match self {
            Process::Own(w) => w.killer(),
            Process::Forked(f) => f.killer(),
        }
    }

    /// The name the call's programs give nib's proxy.
    pub fn proxy_token(&self) -> Option<&str> {
        match self {
            Process::Own(w) => w.proxy_token(),
            Process::Forked(f) => f.proxy_token(),
        }
    }

    /// The execs the call was refused (with an exec judge only).
    pub fn exec_log(&self) -> Option<nib_sandbox::ExecLog> {
        match self {
            Process::Own(w) => w.exec_log(),
            Process::Forked(_) => None,
        }
    }

    /// Blocks until the worker has ended.
    pub fn wait_exited(&mut self) {
        match self {
            Process::Own(w) => w.wait_exited(),
            Process::Forked(f) => f.wait_exited(),
        }
    }

    /// Blocks until the worker has ended; its status.
    pub fn wait_blocking(&mut self) -> Option<std::process::ExitStatus> {
        match self {
            Process::Own(w) => w.wait_blocking(),
            Process::Forked(f) => f.wait_blocking(),
        }
    }

    /// What bubblewrap printed when it could not set the sandbox up.
    pub fn start_messages(&mut self) -> Vec<u8> {
        match self {
            Process::Own(w) => w.start_messages(),
            Process::Forked(_) => Vec::new(),
        }
    }

    /// The status, once it has ended.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        match self {
            Process::Own(w) => w.try_wait(),
            Process::Forked(f) => f.try_wait(),
        }
    }

    /// Memory in KiB, shared pages shared out (a forked worker: its call
    /// init and worker).
    fn memory_kib(&self) -> Option<u64> {
        match self {
            Process::Own(w) => memory_kib(w.id()),
            Process::Forked(f) => {
                let init = f.id()?;
                let kids = std::fs::read_to_string(format!("/proc/{init}/task/{init}/children"))
                    .unwrap_or_default();
                let kids: u64 = kids
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .filter_map(memory_kib)
                    .sum();
                Some(memory_kib(init)? + kids)
            }
        }
    }
}

/// The most workers kept ready. Each is about 8 MiB resident but nearly all
/// of it is the zygote's pages, shared: about 0.4 MiB of memory its own
/// (PSS, call init and worker). Sixteen keep a paced 32-agent HTTP load's
/// nibash p99 within 10x one call's p50, where four did not
/// (docs/performance.md, "The warm pool's size").
pub const MOST: usize = 16;

/// The most workers kept ready under the broker's open-file limit now: each
/// holds 7 of the broker's descriptors (its output pipe, its channel, a
/// pidfd, its two cgroups' `cgroup.procs`), and the pool keeps to about a
/// ninth of the limit, so the proxy's and the HTTP front's shares and the
/// tools keep theirs: 4 under a limit of 256, [`MOST`] from 1024.
pub fn most_ready() -> usize {
    (nib_sandbox::open_files_quarter() / 16).clamp(1, MOST)
}

/// How long a burst's demand is remembered: extras beyond the demand of
/// the last `IDLE` are let go.
const IDLE: Duration = Duration::from_secs(30);

/// The workers kept ready, and the demand they follow.
#[derive(Default)]
pub struct Warm {
    pool: Mutex<Pool>,
    /// Held while a zygote starts: one zygote per configuration, though the
    /// session's start and a first call may both ask for it.
    starting_zygote: Mutex<()>,
}

#[derive(Default)]
struct Pool {
    /// What the zygote and the ready workers were started for.
    key: String,
    /// The zygote for `key`, once started.
    zygote: Option<Arc<nib_sandbox::Zygote>>,
    ready: Vec<Started>,
    /// Workers being started now (for `key`).
    starting: usize,
    /// Calls running now.
    running: usize,
    /// When the calls of the last [`BURST`] started (a turn's calls arrive
    /// together; a short one may end before the last of them starts).
    starts: std::collections::VecDeque<std::time::Instant>,
    /// The most calls that ran at once, and when that was last reached
    /// (demand older than [`IDLE`] no longer counts).
    peak: usize,
    peak_at: Option<std::time::Instant>,
    /// A trimmer thread is running.
    trimming: bool,
}

impl Pool {
    /// Makes the pool serve `key`: workers and a zygote started for
    /// another configuration are let go.
    fn serve(&mut self, key: &str) {
        if self.key != key {
            self.key = key.to_string();
            self.ready.clear();
            self.zygote = None;
            self.starting = 0;
        }
    }

    /// How many ready workers the demand asks for now.
    fn wanted(&self) -> usize {
        let recent = self.peak_at.is_some_and(|t| t.elapsed() < IDLE);
        let peak = if recent { self.peak } else { 1 };
        peak.clamp(1, most_ready())
    }
}

/// A call counted as running until dropped.
pub struct Running(Arc<Warm>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut p = self.0.lock();
        p.running = p.running.saturating_sub(1);
    }
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

/// Starts the zygote for workers under `policy` in `cwd`.
fn start_zygote(policy: nib_sandbox::Policy, cwd: &Path) -> Result<nib_sandbox::Zygote, String> {
    let exe = own_binary()?;
    let argv = vec![
        exe.into_os_string(),
        nib_shell::channel::NIBASH_ARG.into(),
        nib_shell::channel::ZYGOTE_ARG.into(),
    ];
    sandbox(policy)?
        .spawn_zygote(&argv, cwd)
        .map_err(|e| e.to_string())
}

/// Forks a worker from `zygote`; it waits for its request on the channel.
fn fork_from(zygote: &Arc<nib_sandbox::Zygote>) -> Result<Started, String> {
    let (forked, pipe, stream) = zygote.fork().map_err(|e| format!("no worker: {e}"))?;
    let chan = Channel::new(stream).map_err(|e| format!("no channel: {e}"))?;
    Ok((Process::Forked(forked), pipe, chan))
}

/// A sandbox for nibash workers under `policy`: the small confining entry
/// beside nib applies the layers, then runs `nib` [`nib_shell::channel::NIBASH_ARG`].
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
    let argv = vec![exe.into_os_string(), nib_shell::channel::NIBASH_ARG.into()];
    let (worker, pipe) = sandbox
        .spawn_merged(&argv, cwd, &[], Some(theirs.into()))
        .map_err(|e| e.to_string())?;
    Ok((Process::Own(worker), pipe, chan))
}

fn own_binary() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find nib's own binary: {e}"))
}

impl Warm {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a call as running (the demand the pool follows) until the
    /// returned guard is dropped.
    pub fn running(self: &Arc<Self>) -> Running {
        let mut p = self.lock();
        p.running += 1;
        let now = std::time::Instant::now();
        while p
            .starts
            .front()
            .is_some_and(|t| now.duration_since(*t) > BURST)
        {
            p.starts.pop_front();
        }
        p.starts.push_back(now);
        // The demand: calls running at once, or arriving together.
        let demand = p.running.max(p.starts.len());
        let recent = p.peak_at.is_some_and(|t| t.elapsed() < IDLE);
        if !recent || demand >= p.peak {
            p.peak = if recent { p.peak.max(demand) } else { demand };
            p.peak_at = Some(now);
        }
        Running(Arc::clone(self))
    }

    /// A worker for `key`: a ready one still waiting, else one forked now
    /// from the zygote when one was started for `key`; `None` when there is
    /// none (start one). Workers and a zygote started for another
    /// configuration are let go.
    pub fn take(&self, key: &str) -> Option<Started> {
        let mut p = self.lock();
        if p.key != key {
            let old = std::mem::take(&mut p.ready);
            let zygote = p.zygote.take();
            drop(p);
            drop(old);
            drop(zygote);
            return None;
        }
        while let Some(mut started) = p.ready.pop() {
            // One that died while waiting (killed, refused) is no use.
            if started.0.try_wait().is_none() {
                return Some(started);
            }
        }
        let zygote = p.zygote.clone()?;
        drop(p);
        match fork_from(&zygote) {
            Ok(s) => Some(s),
            Err(_) => {
                // The zygote is gone (killed from inside, say): the next
                // refill starts another.
                let mut p = self.lock();
                if p.zygote.as_ref().is_some_and(|z| Arc::ptr_eq(z, &zygote)) {
                    p.zygote = None;
                }
                None
            }
        }
    }

    /// A worker for `key` as [`Warm::take`] gives one, else forked from a
    /// zygote started now for `key` (so every call of a session runs in
    /// its zygote, the first too: its /tmp is the one later calls see);
    /// `None` when no zygote can be started.
    pub fn take_or_start(
        &self,
        key: &str,
        policy: &nib_sandbox::Policy,
        cwd: &Path,
    ) -> Option<Started> {
        if let Some(s) = self.take(key) {
            return Some(s);
        }
        self.lock().serve(key);
        let zygote = self.zygote_for(key, policy, cwd)?;
        fork_from(&zygote).ok()
    }

    /// The zygote for `key`, started now when there is none (or it ended);
    /// `None` when it cannot be started or another configuration took over.
    fn zygote_for(
        &self,
        key: &str,
        policy: &nib_sandbox::Policy,
        cwd: &Path,
    ) -> Option<Arc<nib_sandbox::Zygote>> {
        let _one = self
            .starting_zygote
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        {
            let p = self.lock();
            if p.key != key {
                return None;
            }
            if let Some(z) = p.zygote.as_ref().filter(|z| !z.ended()) {
                return Some(Arc::clone(z));
            }
        }
        let zygote = Arc::new(start_zygote(policy.clone(), cwd).ok()?);
        let mut p = self.lock();
        if p.key != key {
            return None;
        }
        p.zygote = Some(Arc::clone(&zygote));
        Some(zygote)
    }

    /// The ready workers and the memory they and the zygote hold in KiB
    /// (for nibash_status).
    pub fn report(&self) -> (usize, u64) {
        let p = self.lock();
        let zygote = p.zygote.as_ref().and_then(|z| memory_kib(z.id()));
        let kib = p
            .ready
            .iter()
            .filter_map(|(w, _, _)| w.memory_kib())
            .sum::<u64>()
            + zygote.unwrap_or(0);
        (p.ready.len(), kib)
    }

    /// Starts workers for `key` on a thread of its own until the pool holds
    /// what the demand asks for, once the answer being sent is out (on a
    /// 2-core machine a start — a fork of the broker, an exec — delayed the
    /// answer by up to a millisecond); lets extras go.
    pub fn refill(self: &Arc<Self>, key: String, policy: nib_sandbox::Policy, cwd: PathBuf) {
        let to_start = {
            let mut p = self.lock();
            p.serve(&key);
            let wanted = p.wanted();
            let extra = p.ready.len().saturating_sub(wanted);
            let gone: Vec<Started> = p.ready.drain(..extra).collect();
            drop(gone);
            let n = wanted.saturating_sub(p.ready.len() + p.starting);
            p.starting += n;
            n
        };
        self.trim_later();
        if to_start == 0 {
            return;
        }
        let warm = Arc::clone(self);
        let written = crate::stdio::lines_written();
        // On a call's helper thread (kept between calls, see `threads`).
        super::threads::run(move || {
            crate::stdio::wait_for_line_after(written, ANSWER_BOUND);
            for _ in 0..to_start {
                // A start takes a core: not while a call of the burst
                // is still running (bounded, so the pool still fills).
                warm.wait_idle(IDLE_WAIT);
                let started = match warm.zygote_for(&key, &policy, &cwd) {
                    Some(z) => fork_from(&z),
                    None => Err("no zygote".to_string()),
                };
                let mut p = warm.lock();
                if p.key != key {
                    // Another configuration took over meanwhile.
                    return;
                }
                p.starting = p.starting.saturating_sub(1);
                match started {
                    Ok(s) => p.ready.push(s),
                    Err(_) => {
                        p.starting = 0;
                        return;
                    }
                }
            }
        });
    }

    /// Waits until no call is running, at most `bound`.
    fn wait_idle(&self, bound: Duration) {
        let until = std::time::Instant::now() + bound;
        while self.lock().running > 0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Lets ready workers beyond the demand go once no burst needed them
    /// for [`IDLE`] (a thread that sleeps while there are extras).
    fn trim_later(self: &Arc<Self>) {
        {
            let mut p = self.lock();
            if p.trimming || p.wanted() <= 1 {
                return;
            }
            p.trimming = true;
        }
        let warm = Arc::clone(self);
        let _ = std::thread::Builder::new()
            .name("nib-warm-trim".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(IDLE / 6);
                    let mut p = warm.lock();
                    let wanted = p.wanted();
                    let extra = p.ready.len().saturating_sub(wanted);
                    let gone: Vec<Started> = p.ready.drain(..extra).collect();
                    if wanted <= 1 {
                        p.trimming = false;
                        drop(p);
                        drop(gone);
                        return;
                    }
                    drop(p);
                    drop(gone);
                }
            });
    }
}

/// A process's proportional memory (PSS) in KiB: each page it shares with
/// N processes counts 1/N, so the zygote's pages, shared by every worker
/// forked from it, are counted once over all of them. Where the kernel has
/// no `smaps_rollup` (gVisor may not), its resident memory.
fn memory_kib(pid: u32) -> Option<u64> {
    let field = |file: &str, key: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/{pid}/{file}"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    field("smaps_rollup", "Pss:").or_else(|| field("status", "VmRSS:"))
}
