//! The broker side: start a confined process under a policy, read its output under the
//! cap, and end its whole tree when the call ends, times out or overflows.
//!
//! Confined processes are forked from one long-lived thread, so the parent-death signal
//! each confined process sets means "the broker died", not "a pool thread retired".

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::exec_filter::SUPERVISOR_FD;
use crate::exec_guard::{ConnectRule, ExecJudge, ExecLog, supervise};
use crate::launch::{self, Launch, Namespace};
use crate::limits::TreeCgroups;
use crate::{Policy, bwrap, entry, env, lifetime, private_tmp};

/// Why a confined process could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The process could not be started.
    #[error("could not start the confined process: {0}")]
    Spawn(std::io::Error),
    /// The policy confines, and this machine has no layer to confine with.
    #[error("{0}")]
    Refused(String),
}

/// What a confined process did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Its standard output (up to the cap).
    pub stdout: Vec<u8>,
    /// Its standard error (up to the cap).
    pub stderr: Vec<u8>,
    /// The output passed the cap and the tree was killed.
    pub truncated: bool,
    /// The timeout passed and the tree was killed.
    pub timed_out: bool,
}

/// Starts confined processes under one policy.
#[derive(Clone, Debug)]
pub struct Sandbox {
    entry: PathBuf,
    policy: Policy,
    judge: Option<Arc<dyn ExecJudge>>,
}

/// A running confined process tree: whatever the sandbox started (nibash's
/// worker, a provider, git for read's `path@REV`, a summarizer), with its
/// pipes, its cgroup and its private /tmp.
#[derive(Debug)]
pub struct Confined {
    child: Child,
    cgroup: Option<Arc<TreeCgroups>>,
    private_tmp: Option<PathBuf>,
    output_cap: u64,
    exec_log: Option<ExecLog>,
    /// What bubblewrap itself printed, where the program's output went
    /// elsewhere ([`Confined::start_messages`]).
    bwrap_messages: Option<std::io::PipeReader>,
    /// The name its tree gives the proxy ([`Confined::proxy_token`]).
    proxy_token: Option<String>,
}

/// Where a confined process's standard streams go.
enum Streams {
    /// stdin empty; stdout and stderr read by [`Confined::wait`].
    Captured,
    /// stdin empty; stdout and stderr into one pipe the caller reads.
    Merged(std::io::PipeWriter),
    /// All three are pipes the caller holds ([`Sandbox::spawn_service`]).
    Service,
}

/// The pipes of a service started by [`Sandbox::spawn_service`].
#[derive(Debug)]
pub struct ServicePipes {
    /// The program's standard input.
    pub stdin: std::process::ChildStdin,
    /// The program's standard output.
    pub stdout: std::process::ChildStdout,
    /// The program's standard error.
    pub stderr: std::process::ChildStderr,
}

/// A command, whether to start it as the init of a new PID namespace, and
/// where to send the child.
type SpawnJob = (Command, bool, mpsc::Sender<std::io::Result<Child>>);

/// The one thread confined processes are forked from.
fn spawner() -> &'static Mutex<mpsc::Sender<SpawnJob>> {
    static TX: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    TX.get_or_init(|| Mutex::new(start_spawner()))
}

/// Starts a spawner thread. Its PID namespace for children is switched
/// per job ([`lifetime::NamespaceSwitch`]); when switching back fails the
/// thread ends after answering, and the next job starts a new one from the
/// caller's thread (whose namespace for children was never touched).
fn start_spawner() -> mpsc::Sender<SpawnJob> {
    let (tx, rx) = mpsc::channel::<SpawnJob>();
    std::thread::Builder::new()
        .name("nib-spawner".into())
        .spawn(move || {
            let switch = lifetime::NamespaceSwitch::open();
            for (mut cmd, new_namespace, reply) in rx {
                let entered = new_namespace && switch.as_ref().is_some_and(|s| s.enter_new());
                let child = cmd.spawn();
                let back = !entered || switch.as_ref().is_some_and(|s| s.restore());
                let _ = reply.send(child);
                if !back {
                    return;
                }
            }
        })
        .ok();
    tx
}

/// Forks `cmd` on the spawner thread; with `new_namespace`, as the init of
/// a new PID namespace where this process may make one (the confined process knows
/// it is by being PID 1).
fn spawn_on_spawner(cmd: Command, new_namespace: bool) -> std::io::Result<Child> {
    let gone = || std::io::Error::other("the spawner thread is gone");
    let (tx, rx) = mpsc::channel();
    let mut sender = spawner().lock().map_err(|_| gone())?;
    if let Err(mpsc::SendError(j)) = sender.send((cmd, new_namespace, tx)) {
        // The thread ended (its namespace could not be switched back):
        // start another and hand it the job.
        *sender = start_spawner();
        sender.send(j).map_err(|_| gone())?;
    }
    drop(sender);
    rx.recv().map_err(|_| gone())?
}

impl Sandbox {
    /// A sandbox that runs confined processes through `entry` (a binary whose `main`
    /// calls [`entry::entry_main`] when its first argument is [`entry::ENTRY_ARG`]).
    /// The entry is readable to the confined process in every mode (bubblewrap binds
    /// it, Landlock grants it).
    pub fn new(entry: &Path, mut policy: Policy) -> Sandbox {
        if !policy.read_only.iter().any(|p| p == entry) {
            policy.read_only.push(entry.to_path_buf());
        }
        bwrap::note_roots(&policy.writable);
        Sandbox {
            entry: entry.to_path_buf(),
            policy,
            judge: None,
        }
    }

    /// Every exec of the confined processes' trees is decided by `judge` (in every
    /// mode): the confined process sets no_new_privs and installs the exec filter, a
    /// supervisor thread answers each exec, refusals fail with `EACCES` and
    /// are kept in the confined process's [`Confined::exec_log`].
    pub fn with_exec_judge(mut self, judge: Arc<dyn ExecJudge>) -> Sandbox {
        self.policy.supervise_exec = true;
        self.judge = Some(judge);
        self
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether bubblewrap wraps this sandbox's confined processes.
    pub fn uses_bwrap(&self) -> bool {
        matches!(
            self.mode(),
            Ok(Some(crate::layers::Mode::Bubblewrap { .. }))
        )
    }

    /// The layers this sandbox's confined processes run under (`None`: unconfined),
    /// or why they are refused (`layers.rs` chooses, fail closed).
    pub fn mode(&self) -> Result<Option<crate::layers::Mode>, String> {
        if !self.policy.confine {
            return Ok(None);
        }
        crate::layers::choose(crate::layers::Wanted {
            use_bwrap: self.policy.use_bwrap,
            roots: &self.policy.writable,
        })
        .map(Some)
    }

    /// Starts `program args…` in `cwd` with extra environment variables.
    pub fn spawn(
        &self,
        program: &[OsString],
        cwd: &Path,
        extra_env: &[(OsString, OsString)],
    ) -> Result<Confined, SandboxError> {
        self.spawn_with_channel(program, cwd, extra_env, None)
    }

    /// Like [`Sandbox::spawn`], with `channel` handed to the program as fd 3
    /// (the only fd besides 0–2 that survives).
    pub fn spawn_with_channel(
        &self,
        program: &[OsString],
        cwd: &Path,
        extra_env: &[(OsString, OsString)],
        channel: Option<std::os::fd::OwnedFd>,
    ) -> Result<Confined, SandboxError> {
        self.start(program, cwd, extra_env, channel, Streams::Captured)
    }

    /// Like [`Sandbox::spawn_with_channel`], with stdout and stderr sent to
    /// one pipe (in the order the program wrote them), whose read end is
    /// returned for the caller to read as the program runs. Poll the confined process
    /// with [`Confined::try_wait`]; [`Confined::wait`] then finds no pipes to read.
    /// Under bubblewrap only the program's tree holds the pipe (the pipe's
    /// end comes when the program's tree is done, not when bubblewrap is);
    /// what bubblewrap itself prints is in [`Confined::start_messages`].
    pub fn spawn_merged(
        &self,
        program: &[OsString],
        cwd: &Path,
        extra_env: &[(OsString, OsString)],
        channel: Option<std::os::fd::OwnedFd>,
    ) -> Result<(Confined, std::io::PipeReader), SandboxError> {
        let (reader, writer) = std::io::pipe().map_err(SandboxError::Spawn)?;
        let confined = self.start(program, cwd, extra_env, channel, Streams::Merged(writer))?;
        Ok((confined, reader))
    }

    /// Starts a long-running service (an MCP server on stdio, say): stdin,
    /// stdout and stderr are pipes handed to the caller, who talks to the
    /// program and reads its errors; nothing else about the confined process changes
    /// (the layers, the tree ending with it or with the broker). The output
    /// cap does not apply: the caller reads the pipes and bounds them.
    pub fn spawn_service(
        &self,
        program: &[OsString],
        cwd: &Path,
        extra_env: &[(OsString, OsString)],
    ) -> Result<(Confined, ServicePipes), SandboxError> {
        let mut confined = self.start(program, cwd, extra_env, None, Streams::Service)?;
        let pipes = match (
            confined.child.stdin.take(),
            confined.child.stdout.take(),
            confined.child.stderr.take(),
        ) {
            (Some(stdin), Some(stdout), Some(stderr)) => ServicePipes {
                stdin,
                stdout,
                stderr,
            },
            _ => {
                return Err(SandboxError::Spawn(std::io::Error::other(
                    "the service's pipes were not made",
                )));
            }
        };
        Ok((confined, pipes))
    }

    fn start(
        &self,
        program: &[OsString],
        cwd: &Path,
        extra_env: &[(OsString, OsString)],
        channel: Option<std::os::fd::OwnedFd>,
        streams: Streams,
    ) -> Result<Confined, SandboxError> {
        if program.is_empty() {
            return Err(SandboxError::Refused("no program to run".into()));
        }

        let mode = self.mode().map_err(SandboxError::Refused)?;
        if self.policy.confine {
            entry::trusted_entry(&self.entry, &self.policy.writable)
                .map_err(SandboxError::Refused)?;
        }
        if self.judge.is_some()
            && let Some(why) = crate::layers::exec_rules_refusal()
        {
            return Err(SandboxError::Refused(why));
        }
        let bwrap_path = match &mode {
            Some(crate::layers::Mode::Bubblewrap { bwrap, .. }) => Some(bwrap.clone()),
            _ => None,
        };
        let bwrap = bwrap_path.is_some();
        let private_tmp = if self.policy.confine && !bwrap {
            // Once per broker, in the background: the folders of brokers
            // killed before they could remove them.
            static SWEEP: std::sync::Once = std::sync::Once::new();
            SWEEP.call_once(|| {
                std::thread::spawn(|| {
                    private_tmp::sweep_stale(&std::env::temp_dir(), private_tmp::STALE_AFTER)
                });
            });
            Some(private_tmp::create(&std::env::temp_dir()).map_err(SandboxError::Spawn)?)
        } else {
            None
        };
        let (vars, proxy_token) = self.program_env(extra_env);
        // Outside bubblewrap the forked child takes the steps to the
        // program itself (no entry binary: the program is the one exec of
        // the start); inside, bubblewrap runs the confining entry, which takes
        // the same steps.
        // Under bubblewrap a merged output goes to the entry at OUTPUT_FD,
        // and bubblewrap's own stdout and stderr to a pipe of their own.
        let hand_over = bwrap && matches!(streams, Streams::Merged(_));
        let (mut cmd, launch) = self.command_for(
            program,
            vars,
            private_tmp.as_ref(),
            bwrap_path.as_deref(),
            hand_over,
        )?;
        cmd.current_dir(cwd).stdin(Stdio::null());
        let (output, bwrap_messages) = wire_streams(&mut cmd, streams, hand_over)?;
        let cgroup = TreeCgroups::create(&self.policy.limits).map(Arc::new);
        let procs: Vec<std::ffi::CString> = cgroup
            .iter()
            .flat_map(|c| c.procs_files())
            .filter_map(|f| std::ffi::CString::new(f.into_os_string().into_encoded_bytes()).ok())
            .collect();
        let channel_fd = channel.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        let output_fd = output.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        // The supervisor socket: the confined process sends its exec listener on it.
        // Pathname unix sockets are checked there too where Landlock
        // cannot refuse them: the roots and the private /tmp only.
        let connects = (!bwrap && launch::connects_supervised(&self.policy, false)).then(|| {
            let mut allowed: Vec<PathBuf> = self.policy.writable.clone();
            allowed.extend(private_tmp.iter().cloned());
            Arc::new(ConnectRule::new(&allowed))
        });
        let (supervisor, supervisor_child) = if self.judge.is_some() || connects.is_some() {
            let (ours, theirs) =
                std::os::unix::net::UnixStream::pair().map_err(SandboxError::Spawn)?;
            (Some(ours), Some(theirs))
        } else {
            (None, None)
        };
        let supervisor_fd = supervisor_child
            .as_ref()
            .map(std::os::fd::AsRawFd::as_raw_fd);
        child_steps(
            &mut cmd,
            procs,
            [channel_fd, supervisor_fd, output_fd],
            launch,
        );
        // The supervisor listens before the start: the program's own exec
        // is the first it decides, and the start returns only after it.
        let exec_log = match supervisor {
            Some(socket) => {
                let log = ExecLog::default();
                supervise(socket.into(), self.judge.clone(), connects, log.clone());
                self.judge.is_some().then_some(log)
            }
            None => None,
        };
        // Outside bubblewrap the confined process is the init of its own PID
        // namespace where this process may make one (bubblewrap makes its
        // own); elsewhere it makes one itself or goes without.
        let child = spawn_on_spawner(cmd, !bwrap);
        // The child's ends: the supervisor sees the socket close when the
        // child ends without handing it a listener.
        drop(channel);
        drop(supervisor_child);
        drop(output);
        let child = child.map_err(SandboxError::Spawn)?;
        Ok(Confined {
            child,
            cgroup,
            private_tmp,
            output_cap: self.policy.limits.output_bytes,
            exec_log,
            bwrap_messages,
            proxy_token,
        })
    }

    /// The program's environment: nib's scrubbed, secrets withheld and the
    /// brokered placeholders set when confined, the proxy's variables (with
    /// the confined process's token) when programs reach the network through it, then
    /// the caller's. Returns the token too.
    fn program_env(
        &self,
        extra_env: &[(OsString, OsString)],
    ) -> (Vec<(OsString, OsString)>, Option<String>) {
        let mut vars: Vec<(OsString, OsString)> = env::scrub(std::env::vars_os());
        if self.policy.confine {
            env::withhold_secrets(&mut vars, &self.policy.pass_env);
            env::set(&mut vars, &self.policy.set_env);
        }
        let proxy = self
            .policy
            .proxy
            .as_ref()
            .filter(|_| self.policy.confine && !self.policy.network);
        let proxy_token = proxy.map(|_| env::proxy_token());
        if let (Some(r), Some(token)) = (proxy, &proxy_token) {
            vars.extend(env::proxy_vars(r.port, token));
        }
        vars.extend(extra_env.iter().cloned());
        (vars, proxy_token)
    }

    /// The command std spawns: bubblewrap running the confining entry (which
    /// takes the steps inside), or the program itself, whose forked child
    /// takes the steps of the prepared [`Launch`] before its one exec.
    fn command_for(
        &self,
        program: &[OsString],
        mut vars: Vec<(OsString, OsString)>,
        private_tmp: Option<&PathBuf>,
        bwrap: Option<&Path>,
        hand_over: bool,
    ) -> Result<(Command, Option<Launch>), SandboxError> {
        if let Some(bwrap) = bwrap {
            // Programs' temporary folder is bubblewrap's private `/tmp`: a
            // TMPDIR nib inherited names a folder of the host that is not
            // there inside (tools then fail, or rename across mounts).
            vars.retain(|(k, _)| k != "TMPDIR");
            vars.push(("TMPDIR".into(), "/tmp".into()));
            let policy_json = serde_json::to_string(&self.policy)
                .map_err(|e| SandboxError::Refused(e.to_string()))?;
            let mut inner: Vec<OsString> =
                vec![entry::ENTRY_ARG.into(), policy_json.into(), OsString::new()];
            if hand_over {
                inner.push(entry::OUTPUT_ARG.into());
            }
            inner.push("--".into());
            inner.extend(program.iter().cloned());
            let stand_ins = bwrap::StandIns::get().map_err(|e| {
                SandboxError::Spawn(std::io::Error::other(format!(
                    "cannot make the stand-ins for hidden paths: {e}"
                )))
            })?;
            let argv = bwrap::bwrap_argv(&self.policy, &self.entry, &inner, stand_ins);
            // The trusted bubblewrap `layers.rs` found, never a PATH search.
            let mut c = Command::new(bwrap);
            c.args(&argv[1..]).env_clear().envs(vars);
            Ok((c, None))
        } else {
            if let Some(t) = private_tmp {
                vars.push(("TMPDIR".into(), t.clone().into_os_string()));
            }
            let launch = Launch::prepare(
                &self.policy,
                Namespace::Own,
                private_tmp,
                program,
                &launch::merge_env(vars),
                Some(&self.entry),
            )
            .map_err(SandboxError::Refused)?;
            // std never execs this: the child execs in `Launch::run`.
            let mut c = Command::new(&program[0]);
            c.env_clear();
            Ok((c, Some(launch)))
        }
    }
}

/// Points the command's stdout and stderr where `streams` says. Under
/// bubblewrap a merged output is handed over (`hand_over`): returned to go
/// to the entry at `OUTPUT_FD`, and bubblewrap's own messages to a pipe of
/// their own, whose reader is returned too.
fn wire_streams(
    cmd: &mut Command,
    streams: Streams,
    hand_over: bool,
) -> Result<(Option<std::io::PipeWriter>, Option<std::io::PipeReader>), SandboxError> {
    let mut output: Option<std::io::PipeWriter> = None;
    let mut bwrap_messages = None;
    match streams {
        Streams::Merged(w) if hand_over => {
            let (reader, writer) = bwrap_message_pipe().map_err(SandboxError::Spawn)?;
            let second = writer.try_clone().map_err(SandboxError::Spawn)?;
            cmd.stdout(writer).stderr(second);
            output = Some(w);
            bwrap_messages = Some(reader);
        }
        Streams::Merged(w) => {
            let second = w.try_clone().map_err(SandboxError::Spawn)?;
            cmd.stdout(w).stderr(second);
        }
        Streams::Captured => {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        Streams::Service => {
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        }
    }
    Ok((output, bwrap_messages))
}

/// The steps the forked child takes before its exec: its own session, death
/// with the broker, joining the call's cgroups (`procs`), the fds it keeps
/// (`fds`: the channel, the supervisor socket, the output) moved into place
/// and every other closed on exec, then the prepared launch when nib takes
/// the steps itself.
fn child_steps(
    cmd: &mut Command,
    procs: Vec<std::ffi::CString>,
    fds: [Option<std::os::fd::RawFd>; 3],
    launch: Option<Launch>,
) {
    let broker = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    // SAFETY: the closure runs in the child between fork and exec and
    // calls only async-signal-safe functions (setsid, prctl, open, read,
    // write, close, fcntl, dup2, syscall; `Launch::run` makes system calls
    // only, and `_exit`) on data allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            // A broker that died before the line above sent no signal:
            // this child would go on holding every fd of the broker until
            // its exec, parented to init (issue 58). It ends instead.
            if parent_gone(broker) {
                libc::_exit(125);
            }
            for path in &procs {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            // Only fds 0–2 survive the exec, and the channel as fd 3, the
            // supervisor socket as fd SUPERVISOR_FD and the output as
            // OUTPUT_FD when given. Each is first moved above all three
            // (so none overwrites another), then everything from 3 up is
            // marked close-on-exec, then they are put in place (dup2
            // clears the mark on its target).
            let mut moved = [-1; 3];
            for (slot, fd) in fds.into_iter().enumerate() {
                if let Some(fd) = fd {
                    moved[slot] = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 16);
                    if moved[slot] < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            for (slot, target) in [3, SUPERVISOR_FD, entry::OUTPUT_FD].into_iter().enumerate() {
                if moved[slot] >= 0 && libc::dup2(moved[slot], target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(launch) = &launch {
                // Returns only when a step failed.
                let failure = launch.run();
                failure.report(launch.program());
                libc::_exit(failure.status());
            }
            Ok(())
        });
    }
}

/// Whether this process's parent is no longer `broker`, as `/proc/self/stat`
/// tells (`getppid` says 0 in a child started as a PID namespace's init).
/// False when that cannot be read. System calls only, no allocation: safe
/// in a forked child.
fn parent_gone(broker: libc::pid_t) -> bool {
    let mut buf = [0u8; 512];
    // SAFETY: open with a static NUL-terminated path; read into a local
    // buffer of its length; close of the fd just opened.
    let n = unsafe {
        let fd = libc::open(
            c"/proc/self/stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    let Ok(n) = usize::try_from(n) else {
        return false;
    };
    let stat = &buf[..n.min(buf.len())];
    // "pid (comm) state ppid …": the name may hold spaces and parentheses.
    let Some(close) = stat.iter().rposition(|b| *b == b')') else {
        return false;
    };
    let mut fields = stat[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    let ppid = fields.nth(1).and_then(|f| {
        f.iter().try_fold(0i32, |acc, d| {
            d.is_ascii_digit()
                .then(|| acc.checked_mul(10)?.checked_add(i32::from(d - b'0')))
                .flatten()
        })
    });
    ppid.is_some_and(|p| p != broker)
}

/// What the sandbox can apply on this machine, for `nib doctor` and nibash_status.
pub fn probe() -> crate::Layers {
    crate::Layers {
        bwrap: bwrap::bwrap_usable(),
        landlock_abi: crate::layers::trial().landlock.clone().unwrap_or(0),
        seccomp: crate::layers::trial().seccomp.is_ok(),
        pid_namespace: lifetime::pid_namespace_available(),
        pids_cgroup: crate::limits::pids_cgroup_available(),
        memory_cgroup: crate::limits::memory_cgroup_available(),
    }
}

fn reader(
    mut pipe: impl Read + Send + 'static,
    total: Arc<AtomicU64>,
    cap: u64,
    over: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let before = total.fetch_add(n as u64, Ordering::Relaxed);
                    if before >= cap {
                        over.store(true, Ordering::Relaxed);
                        continue;
                    }
                    let room = (cap - before).min(n as u64) as usize;
                    out.extend_from_slice(&buf[..room]);
                    if room < n {
                        over.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
        out
    })
}

/// The pipe for bubblewrap's own messages: neither end blocks, so
/// bubblewrap never waits on a reader (what does not fit, 64 KiB, is lost).
fn bwrap_message_pipe() -> std::io::Result<(std::io::PipeReader, std::io::PipeWriter)> {
    use std::os::fd::AsFd;
    let (reader, writer) = std::io::pipe()?;
    for fd in [reader.as_fd(), writer.as_fd()] {
        let flags = rustix::fs::fcntl_getfl(fd)?;
        rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK)?;
    }
    Ok((reader, writer))
}

impl Confined {
    /// What bubblewrap itself printed (a failure to set the sandbox up),
    /// when the program's output was handed over apart from it
    /// ([`Sandbox::spawn_merged`] under bubblewrap); empty otherwise. What
    /// is there now: read it once the confined process has ended.
    pub fn start_messages(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(pipe) = &mut self.bwrap_messages {
            let mut buf = [0u8; 4096];
            while out.len() < 64 * 1024 {
                match pipe.read(&mut buf) {
                    Ok(n) if n > 0 => out.extend_from_slice(&buf[..n]),
                    _ => break,
                }
            }
        }
        out
    }

    /// The name this confined process's programs give nib's proxy (in the proxy
    /// variables' address, sent as `Proxy-Authorization`), so the proxy can
    /// tell whose connection is whose; `None` without a proxy route.
    pub fn proxy_token(&self) -> Option<&str> {
        self.proxy_token.as_deref()
    }

    /// The execs its tree was refused (when the sandbox has an exec judge).
    pub fn exec_log(&self) -> Option<ExecLog> {
        self.exec_log.clone()
    }

    /// The cgroups of the confined process's tree, where the machine allows them.
    pub(crate) fn cgroups(&self) -> Option<&Arc<TreeCgroups>> {
        self.cgroup.as_ref()
    }

    /// The confined process id (outside its namespace).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// A handle that ends this confined process's whole tree from another thread
    /// while one waits for it ([`Confined::wait_blocking`]).
    pub fn killer(&self) -> Killer {
        Killer {
            pid: self.child.id(),
            cgroup: self.cgroup.clone(),
            pidfd: None,
        }
    }

    /// Blocks until the confined process has ended, without reaping it: its pid stays
    /// its own (a [`Killer`] cannot hit another process) until
    /// [`Confined::wait_blocking`] reaps it.
    pub fn wait_exited(&self) {
        let pid: libc::id_t = self.child.id();
        loop {
            // SAFETY: waitid on our own child with a zeroed siginfo_t that
            // lives across the call; WNOWAIT leaves the child unreaped.
            let r = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT)
            };
            if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return;
            }
        }
    }

    /// Blocks until the confined process ends and reaps it; then kills what it left behind.
    pub fn wait_blocking(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.wait().ok();
        if let Some(c) = &self.cgroup {
            c.kill_all();
        }
        if let Some(t) = self.private_tmp.take() {
            let _ = std::fs::remove_dir_all(t);
        }
        status
    }

    /// The confined process's exit status, if it has ended (its leftovers are then
    /// killed); `None` while it runs.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        match self.child.try_wait() {
            Ok(Some(s)) => {
                if let Some(c) = &self.cgroup {
                    c.kill_all();
                }
                Some(s)
            }
            Ok(None) => None,
            // The child cannot be waited for (already reaped): treat it as
            // ended by a signal so callers stop polling.
            Err(_) => {
                use std::os::unix::process::ExitStatusExt;
                Some(std::process::ExitStatus::from_raw(libc::SIGKILL))
            }
        }
    }

    /// Ends the whole tree: the confined process (its namespace follows) and every
    /// process in its cgroup.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        if let Some(c) = &self.cgroup {
            c.kill_all();
        }
    }

    /// Waits for the confined process, reading its output under the cap; kills the
    /// tree at the timeout or the cap. Leftover processes are killed when it ends.
    pub fn wait(mut self, timeout: Option<Duration>) -> Output {
        let total = Arc::new(AtomicU64::new(0));
        let over = Arc::new(AtomicBool::new(false));
        let out_thread = self
            .child
            .stdout
            .take()
            .map(|p| reader(p, total.clone(), self.output_cap, over.clone()));
        let err_thread = self
            .child
            .stderr
            .take()
            .map(|p| reader(p, total.clone(), self.output_cap, over.clone()));
        let started = Instant::now();
        let mut output = Output::default();
        let mut nap = Duration::from_micros(50);
        let exit_fd = pidfd_open(self.child.id());
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) => {}
                Err(_) => break None,
            }
            if over.load(Ordering::Relaxed) {
                output.truncated = true;
                self.kill();
            } else if timeout.is_some_and(|t| started.elapsed() > t) {
                output.timed_out = true;
                self.kill();
            }
            match &exit_fd {
                // Woken the moment the confined process ends; the cap and the timeout
                // are checked every 5 ms meanwhile.
                Some(fd) => wait_readable(fd, 5),
                // Without pidfds: short naps first, most programs end within
                // a few milliseconds.
                None => {
                    std::thread::sleep(nap);
                    nap = (nap * 2).min(Duration::from_millis(5));
                }
            }
        };

        // Whatever the program left behind ends with it.
        if let Some(c) = &self.cgroup {
            c.kill_all();
        }
        if let Some(s) = status {
            use std::os::unix::process::ExitStatusExt;
            output.code = s.code();
            output.signal = s.signal();
        }
        output.stdout = out_thread.and_then(|t| t.join().ok()).unwrap_or_default();
        output.stderr = err_thread.and_then(|t| t.join().ok()).unwrap_or_default();
        if over.load(Ordering::Relaxed) {
            output.truncated = true;
        }
        if let Some(t) = self.private_tmp.take() {
            let _ = std::fs::remove_dir_all(t);
        }
        output
    }
}

/// A pidfd for our child `pid` (readable once it has ended), where the
/// kernel has them (Linux 5.3+).
fn pidfd_open(pid: u32) -> Option<std::os::fd::OwnedFd> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just returned this fd to us; nothing else owns it.
    Some(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// Waits up to `ms` milliseconds for `fd` to become readable.
fn wait_readable(fd: &std::os::fd::OwnedFd, ms: i32) {
    let mut pfd = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(fd),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one pollfd that lives across the call.
    unsafe {
        libc::poll(&mut pfd, 1, ms);
    }
}

/// Ends a confined process's tree from another thread (see [`Confined::killer`]).
#[derive(Clone, Debug)]
pub struct Killer {
    pid: u32,
    cgroup: Option<Arc<TreeCgroups>>,
    /// For a confined process forked by a zygote: its call init, by pidfd (its pid is
    /// another namespace's, and a pidfd never names another process).
    pidfd: Option<Arc<std::os::fd::OwnedFd>>,
}

impl Killer {
    /// Ends the call whose call init `pidfd` refers to ([`crate::zygote`]),
    /// and every process in the call's cgroups.
    pub(crate) fn of_pidfd(
        pidfd: Arc<std::os::fd::OwnedFd>,
        cgroup: Option<Arc<TreeCgroups>>,
    ) -> Killer {
        Killer {
            pid: 0,
            cgroup,
            pidfd: Some(pidfd),
        }
    }

    /// Kills the confined process (its PID namespace, and so its tree, ends with it)
    /// and every process in its cgroup. Call it only before the waiting
    /// thread has reaped the confined process (the caller records when it has): a
    /// reaped pid may already belong to another process.
    pub fn kill(&self) {
        if let Some(fd) = &self.pidfd {
            // SAFETY: pidfd_send_signal takes an fd we own, a signal number
            // and a null info pointer.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    std::os::fd::AsRawFd::as_raw_fd(&**fd),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            }
            if let Some(c) = &self.cgroup {
                c.kill_all();
            }
            return;
        }
        if let Ok(pid) = i32::try_from(self.pid) {
            // SAFETY: kill(2) takes plain integers; signalling our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        if let Some(c) = &self.cgroup {
            c.kill_all();
        }
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
            let _ = self.child.wait();
        }
        if let Some(t) = self.private_tmp.take() {
            let _ = std::fs::remove_dir_all(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parent `/proc/self/stat` names is this process's parent, and
    /// no other: a child started by a broker already gone ends before its
    /// exec.
    #[test]
    fn parent_gone_reads_the_parent_from_proc() {
        // SAFETY: getppid takes nothing.
        let parent = unsafe { libc::getppid() };
        assert!(!parent_gone(parent));
        assert!(parent_gone(parent + 1));
    }
}
