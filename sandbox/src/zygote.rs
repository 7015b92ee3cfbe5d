//! The zygote: one confined process per sandbox configuration that forks a
//! worker for each call, so a call pays a fork of a small process instead
//! of a sandbox start (a fork of the broker, bubblewrap, two execs, the
//! relocation of a large binary).
//!
//! The zygote is started like any worker ([`Sandbox::spawn_zygote`]), so it
//! holds every layer the policy asks for, and everything it forks inherits
//! them: the namespaces, the mounts, Landlock, seccomp, the rlimits. It runs
//! nothing of a call itself: it waits on its control socket, and for each
//! request forks a *call init*, which forks the worker. The worker runs the
//! caller's function with the call's channel at fd 3 and the call's output
//! pipe as stdout and stderr. The call init is the subreaper of the call's
//! tree: when the worker ends it kills every process the call left (a
//! `setsid`, double-forked one too), then reports the worker's status on
//! the call's status pipe and ends. A call init killed from outside (the
//! broker's kill, or a program of the session) leaves its orphans to the
//! zygote, a subreaper too, which kills every child that is not a call init.
//!
//! The broker holds, for each call, a pidfd of its call init (to kill it),
//! the status pipe (its end says the call ended, and how), the output pipe
//! and the channel. The calls of one zygote share its PID namespace and its
//! private `/tmp`; each is a fresh process of a zygote that never ran
//! anything, so none holds anything of an earlier call.
//!
//! The broker side is [`Zygote`] and [`Forked`]; the side inside the sandbox
//! is [`serve`].

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use crate::limits::TreeCgroups;
use crate::spawn::{Confined, Killer, Sandbox, SandboxError};
use crate::{Limits, env};

/// How many times a call's process cap a zygote's own tree may hold: the
/// proxy bridge's threads serve every call of the session, and each call
/// init and worker is forked there before it moves to its call's cgroups.
const ZYGOTE_PIDS: u64 = 4;

/// How many emptied cgroups a zygote keeps for its next calls (a turn's
/// parallel calls): making and removing a cgroup costs more than the rest
/// of a short call's start.
const SPARE_CGROUPS: usize = 4;

/// The fds a fork's answer carries: the call's channel (broker's end), the
/// output pipe's read end, the status pipe's read end, the call init's pidfd.
const ANSWER_FDS: usize = 4;

/// How long a fork request waits at most for the zygote's answer (a fork
/// of a small process: milliseconds, on a loaded machine a few hundred). A
/// zygote that does not answer in time (stopped, say) is let go: every
/// later request to it fails at once, and the broker starts another.
pub const FORK_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

// ---- the broker's side ----------------------------------------------------

/// A running zygote: the worker it is, and the socket its forks are asked on.
#[derive(Debug)]
pub struct Zygote {
    worker: Mutex<Confined>,
    control: Mutex<UnixStream>,
    /// A request went unanswered within [`FORK_BOUND`], or the socket
    /// failed: the stream may hold a late answer, so nothing more is asked.
    broken: std::sync::atomic::AtomicBool,
    /// Whether its programs go through nib's proxy (each fork then gets a
    /// token of its own).
    proxied: bool,
    /// The caps each call's own cgroups get.
    limits: Limits,
    /// Cgroups of calls that ended, emptied, for the next calls (only ones
    /// no killer of an ended call can still reach).
    spare: Mutex<Vec<TreeCgroups>>,
    /// What the zygote itself prints (a line when it cannot go on); held so
    /// a write never fails, not read.
    _output: std::io::PipeReader,
}

/// A worker forked by a [`Zygote`] for one call.
#[derive(Debug)]
pub struct Forked {
    /// The zygote stays while a call it forked runs (letting it go ends its
    /// namespace, and every call in it).
    zygote: Arc<Zygote>,
    pidfd: Arc<OwnedFd>,
    /// The call's own pids and memory cgroups, where the machine allows.
    cgroup: Option<Arc<TreeCgroups>>,
    status: Option<std::fs::File>,
    ended: Option<ExitStatus>,
    proxy_token: Option<String>,
}

impl Sandbox {
    /// Starts `program` as a zygote under this sandbox's policy: `program`
    /// must call [`serve`] (with the control socket at fd 3).
    pub fn spawn_zygote(&self, program: &[OsString], cwd: &Path) -> Result<Zygote, SandboxError> {
        let (ours, theirs) = UnixStream::pair().map_err(SandboxError::Spawn)?;
        ours.set_read_timeout(Some(FORK_BOUND))
            .and_then(|()| ours.set_write_timeout(Some(FORK_BOUND)))
            .map_err(SandboxError::Spawn)?;
        let (worker, output) = self.spawn_merged(program, cwd, &[], Some(theirs.into()))?;
        let proxied = worker.proxy_token().is_some();
        let limits = self.policy().limits.clone();
        if let Some(c) = worker.cgroups() {
            c.widen_pids(limits.processes.saturating_mul(ZYGOTE_PIDS));
        }
        Ok(Zygote {
            worker: Mutex::new(worker),
            control: Mutex::new(ours),
            broken: std::sync::atomic::AtomicBool::new(false),
            proxied,
            limits,
            spare: Mutex::new(Vec::new()),
            _output: output,
        })
    }
}

impl Zygote {
    /// Forks a worker for one call: the worker, its output pipe, and the
    /// broker's end of its channel. An error means the zygote is gone, did
    /// not answer within [`FORK_BOUND`] (it is then [`Zygote::ended`] for
    /// good) or could not fork; start a worker another way.
    pub fn fork(self: &Arc<Self>) -> std::io::Result<(Forked, std::io::PipeReader, UnixStream)> {
        use std::sync::atomic::Ordering;
        let token = self.proxied.then(env::proxy_token);
        let ask = token.as_deref().unwrap_or("").as_bytes();
        let len = u16::try_from(ask.len()).map_err(std::io::Error::other)?;
        let mut msg = len.to_le_bytes().to_vec();
        msg.extend_from_slice(ask);
        let let_go = || {
            std::io::Error::other(format!(
                "the zygote did not answer a fork request within {} s (stopped or gone); it is let go and the call starts a worker another way",
                FORK_BOUND.as_secs()
            ))
        };
        // A request waiting for the lock waits at most for one bounded
        // request before it.
        let control = self.control.lock().unwrap_or_else(|p| p.into_inner());
        if self.broken.load(Ordering::SeqCst) {
            return Err(let_go());
        }
        let answer = (&*control)
            .write_all(&msg)
            .and_then(|()| recv_fds(control.as_fd()));
        let (data, fds) = match answer {
            Ok(a) => a,
            Err(e) => {
                self.broken.store(true, Ordering::SeqCst);
                return Err(match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => let_go(),
                    _ => e,
                });
            }
        };
        drop(control);
        let pid = i32::from_le_bytes(data);
        let mut fds = fds.into_iter();
        let (Some(chan), Some(out), Some(status), Some(pidfd)) =
            (fds.next(), fds.next(), fds.next(), fds.next())
        else {
            return Err(if pid < 0 {
                std::io::Error::from_raw_os_error(-pid)
            } else {
                std::io::Error::other("the zygote answered without the call's fds")
            });
        };
        let mut forked = Forked {
            zygote: Arc::clone(self),
            pidfd: Arc::new(pidfd),
            cgroup: None,
            status: Some(std::fs::File::from(status)),
            ended: None,
            proxy_token: token,
        };
        // The call's processes count in cgroups of its own, as a started
        // worker's do: the call init, and the worker if it is forked yet
        // (what either forks later is born there). An earlier call's
        // emptied cgroups serve when there are some.
        let cgroup = self
            .spare_cgroups()
            .or_else(|| TreeCgroups::create(&self.limits));
        if let (Some(cgroup), Some(init)) = (cgroup, forked.id()) {
            cgroup.join(init);
            for child in children_of(init) {
                cgroup.join(child);
            }
            forked.cgroup = Some(Arc::new(cgroup));
        }
        Ok((
            forked,
            std::io::PipeReader::from(out),
            UnixStream::from(chan),
        ))
    }

    /// Emptied cgroups of an ended call, if there are some. Each was
    /// killed through when its call ended; one that still lists a process
    /// (the call init not yet reaped, a child born while the kill went
    /// round) is killed through again and left for a later call.
    fn spare_cgroups(&self) -> Option<TreeCgroups> {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        let at = spare.iter().position(|c| {
            let empty = c.is_empty();
            if !empty {
                c.kill_members_once();
            }
            empty
        })?;
        Some(spare.swap_remove(at))
    }

    /// Whether the zygote has ended, or was let go for not answering.
    pub fn ended(&self) -> bool {
        self.broken.load(std::sync::atomic::Ordering::SeqCst)
            || self
                .worker
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .try_wait()
                .is_some()
    }

    /// The zygote's process id (outside its namespace).
    pub fn id(&self) -> u32 {
        self.worker.lock().unwrap_or_else(|p| p.into_inner()).id()
    }
}

impl Forked {
    /// A handle that ends the call's tree from another thread: the call
    /// init is killed, its orphans go to the zygote, which kills them.
    pub fn killer(&self) -> Killer {
        Killer::of_pidfd(Arc::clone(&self.pidfd), self.cgroup.clone())
    }

    /// The name this call's programs give nib's proxy (see
    /// [`Confined::proxy_token`]).
    pub fn proxy_token(&self) -> Option<&str> {
        self.proxy_token.as_deref()
    }

    /// The call init's process id outside its namespace, while it runs.
    pub fn id(&self) -> Option<u32> {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", self.pidfd.as_raw_fd()))
            .ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix("Pid:"))
            .and_then(|p| p.trim().parse::<i64>().ok())
            .and_then(|p| u32::try_from(p).ok())
    }

    /// Blocks until the call has ended (its tree is gone).
    pub fn wait_exited(&mut self) {
        if self.ended.is_some() {
            return;
        }
        let Some(mut pipe) = self.status.take() else {
            return;
        };
        let mut raw = Vec::new();
        let _ = pipe.read_to_end(&mut raw);
        self.ended = Some(status_of(&raw));
        // The call init ended what the call left; whatever is still in its
        // cgroups is killed now (not waited for: see `spare_cgroups`).
        if let Some(c) = &self.cgroup {
            c.kill_members_once();
        }
    }

    /// Blocks until the call has ended; its status.
    pub fn wait_blocking(&mut self) -> Option<ExitStatus> {
        self.wait_exited();
        self.ended
    }

    /// The call's status, if it has ended; `None` while it runs.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.ended.is_none() {
            let readable = self.status.as_ref().is_some_and(|p| {
                let mut fd = libc::pollfd {
                    fd: p.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: poll on one pollfd that lives across the call.
                unsafe { libc::poll(&mut fd, 1, 0) > 0 }
            });
            if readable {
                self.wait_exited();
            }
        }
        self.ended
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        if self.ended.is_none() {
            self.killer().kill();
        }
        // The call's cgroups serve a next call when the call ended and no
        // killer holds them any more (one kept could end the next call's
        // processes); else they are removed.
        let Some(cgroup) = self.cgroup.take().and_then(|c| Arc::try_unwrap(c).ok()) else {
            return;
        };
        if self.ended.is_some() {
            let mut spare = self.zygote.spare.lock().unwrap_or_else(|p| p.into_inner());
            if spare.len() < SPARE_CGROUPS {
                spare.push(cgroup);
            }
        }
    }
}

/// The children of process `pid` (this process's namespace).
fn children_of(pid: u32) -> Vec<u32> {
    if let Ok(list) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        return list
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
    }
    let Ok(parent) = libc::pid_t::try_from(pid) else {
        return Vec::new();
    };
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
                .filter(|p| parent_of(*p) == Some(parent))
                .filter_map(|p| u32::try_from(p).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The status a call init wrote (a raw wait status), or killed when it
/// wrote none (it was killed itself).
fn status_of(raw: &[u8]) -> ExitStatus {
    match <[u8; 4]>::try_from(raw) {
        Ok(b) => ExitStatus::from_raw(i32::from_le_bytes(b)),
        Err(_) => ExitStatus::from_raw(libc::SIGKILL),
    }
}

/// Receives the zygote's answer: four bytes and up to [`ANSWER_FDS`] fds.
fn recv_fds(socket: std::os::fd::BorrowedFd<'_>) -> std::io::Result<([u8; 4], Vec<OwnedFd>)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(ANSWER_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut data = [0u8; 4];
    let got = loop {
        match recvmsg(
            socket,
            &mut [std::io::IoSliceMut::new(&mut data)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC | RecvFlags::WAITALL,
        ) {
            Ok(m) => break m,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    if got.bytes < data.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the zygote is gone",
        ));
    }
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(got) = msg {
            fds.extend(got);
        }
    }
    Ok((data, fds))
}

// ---- inside the sandbox -----------------------------------------------------

/// Runs the zygote: takes the control socket from fd 3, then forks a call
/// init and a worker for each request until the broker closes the socket.
/// `run` is what the worker runs (it finds the call's channel at fd 3).
/// Must be called while the process is single-threaded.
pub fn serve(run: fn() -> !) -> ! {
    // SAFETY: fcntl and close take plain integers; the sandbox hands the
    // control socket to this process as fd 3 and nothing else owns it.
    let fd = unsafe { libc::fcntl(3, libc::F_DUPFD_CLOEXEC, 64) };
    if fd < 0 {
        quit("no control socket");
    }
    // SAFETY: as above; fd 3 is not used after this.
    unsafe { libc::close(3) };
    // SAFETY: `fd` was just made by fcntl and nothing else owns it.
    let control = unsafe { OwnedFd::from_raw_fd(fd) };
    become_subreaper();
    // Confined (no_new_privs is set under every confining layer): the
    // zygote, and the call inits it forks, are not dumpable, so a process
    // without CAP_SYS_PTRACE (every program under bubblewrap) can neither
    // ptrace them nor take their fds (pidfd_getfd: the control socket, a
    // call's channel) nor read their memory; each call's worker enters a
    // Landlock domain of its own ([`enter_call_domain`]), which holds for
    // root too.
    // SAFETY: prctl with constant arguments.
    let confined = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } == 1;
    if confined {
        // SAFETY: prctl with constant arguments.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    }
    // SIGCHLD is read from a signalfd (blocked here, unblocked in each fork).
    // SAFETY: sigset_t is plain data initialised by sigemptyset/sigaddset;
    // sigprocmask and signalfd take pointers to locals alive for the calls.
    let (old_mask, sigfd) = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old);
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            quit("no signalfd");
        }
        (old, OwnedFd::from_raw_fd(fd))
    };
    let mut inits: Vec<libc::pid_t> = Vec::new();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: control.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sigfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll on an array of two pollfds that lives across the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            quit("poll failed");
        }
        if fds[1].revents != 0 {
            let mut info = [0u8; 128];
            // SAFETY: read into a local buffer of its length.
            while unsafe { libc::read(sigfd.as_raw_fd(), info.as_mut_ptr().cast(), info.len()) } > 0
            {
            }
            reap(&mut inits);
        }
        if fds[0].revents != 0 {
            let token = match read_request(&control) {
                Some(t) => t,
                // The broker let the zygote go: end, and the namespace with it.
                None => std::process::exit(0),
            };
            let answer = fork_call(&control, &sigfd, &old_mask, &token, confined, run);
            let (pid, fds) = match answer {
                Ok((pid, fds)) => {
                    inits.push(pid);
                    (pid, fds)
                }
                Err(e) => (-e, Vec::new()),
            };
            if send_answer(&control, pid, &fds).is_err() {
                std::process::exit(0);
            }
        }
    }
}

fn quit(why: &str) -> ! {
    let _ = std::io::stderr().write_all(format!("nib zygote: {why}\n").as_bytes());
    std::process::exit(125)
}

fn become_subreaper() {
    // SAFETY: prctl with constant arguments.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// A request: a u16 length and the call's proxy token (empty: none).
/// `None` when the broker closed the socket.
fn read_request(control: &OwnedFd) -> Option<String> {
    let mut file = std::fs::File::from(control.try_clone().ok()?);
    let mut len = [0u8; 2];
    file.read_exact(&mut len).ok()?;
    let mut token = vec![0u8; usize::from(u16::from_le_bytes(len))];
    file.read_exact(&mut token).ok()?;
    String::from_utf8(token).ok()
}

fn send_answer(control: &OwnedFd, pid: libc::pid_t, fds: &[OwnedFd]) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(ANSWER_FDS))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    if !borrowed.is_empty() && !cmsg.push(SendAncillaryMessage::ScmRights(&borrowed)) {
        return Err(std::io::Error::other("too many fds"));
    }
    let data = pid.to_le_bytes();
    loop {
        match sendmsg(
            control,
            &[std::io::IoSlice::new(&data)],
            &mut cmsg,
            SendFlags::NOSIGNAL,
        ) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// A close-on-exec pipe (read end, write end).
fn pipe() -> Result<(OwnedFd, OwnedFd), i32> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-element array on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(errno());
    }
    // SAFETY: the kernel just made both fds; nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Forks a call init (which forks the worker); the call init's pid and the
/// broker's fds, or the error number.
fn fork_call(
    control: &OwnedFd,
    sigfd: &OwnedFd,
    old_mask: &libc::sigset_t,
    token: &str,
    confined: bool,
    run: fn() -> !,
) -> Result<(libc::pid_t, Vec<OwnedFd>), i32> {
    let (ours, theirs) = UnixStream::pair().map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    let (out_r, out_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    // SAFETY: getpid takes nothing.
    let zygote = unsafe { libc::getpid() };
    // SAFETY: fork; this process is single-threaded, so the child may go on
    // as an ordinary program.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(errno());
    }
    if pid == 0 {
        // The call init: nothing of the zygote's but what the call needs.
        drop(ours);
        drop(out_r);
        drop(status_r);
        // SAFETY: closing fds this process holds and no longer uses; the
        // mask is the one the zygote started with.
        unsafe {
            libc::close(control.as_raw_fd());
            libc::close(sigfd.as_raw_fd());
            libc::sigprocmask(libc::SIG_SETMASK, old_mask, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != zygote {
                libc::_exit(1);
            }
        }
        become_subreaper();
        call_init(theirs.into(), out_w, status_w, token, confined, run)
    }
    drop(theirs);
    drop(out_w);
    drop(status_w);
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let Ok(pidfd) = RawFd::try_from(pidfd) else {
        return Err(errno());
    };
    if pidfd < 0 {
        let e = errno();
        // SAFETY: kill and waitpid on our own child; without a pidfd the
        // broker could not end it.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        return Err(e);
    }
    // SAFETY: the kernel just returned this fd; nothing else owns it.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok((pid, vec![ours.into(), out_r, status_r, pidfd]))
}

/// The call init: forks the worker, waits for it, ends what the call left,
/// writes the worker's raw status on the status pipe, and ends.
fn call_init(
    chan: OwnedFd,
    out: OwnedFd,
    status: OwnedFd,
    token: &str,
    confined: bool,
    run: fn() -> !,
) -> ! {
    // SAFETY: getpid takes nothing.
    let init = unsafe { libc::getpid() };
    // SAFETY: fork; this process is single-threaded (forked from the
    // single-threaded zygote).
    let worker = unsafe { libc::fork() };
    if worker == 0 {
        drop(status);
        // SAFETY: dup2 and prctl take plain integers; fds 1, 2 and 3 become
        // the call's output and channel (the originals are close-on-exec).
        // A call init already gone left no one to end this worker: it ends.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != init {
                libc::_exit(125);
            }
            if libc::dup2(chan.as_raw_fd(), 3) < 0
                || libc::dup2(out.as_raw_fd(), 1) < 0
                || libc::dup2(out.as_raw_fd(), 2) < 0
            {
                libc::_exit(125);
            }
        }
        drop(chan);
        drop(out);
        if confined && !enter_call_domain() {
            let _ = std::io::stderr().write_all(
                b"nib zygote: the call's own Landlock domain could not be made; nothing ran\n",
            );
            // SAFETY: _exit ends this forked process.
            unsafe { libc::_exit(125) }
        }
        if confined && !drop_reading_caps() {
            let _ = std::io::stderr().write_all(
                b"nib zygote: the call could not give up CAP_SYS_ADMIN and CAP_PERFMON (they would let its programs read other calls' environments); nothing ran\n",
            );
            // SAFETY: _exit ends this forked process.
            unsafe { libc::_exit(125) }
        }
        if !token.is_empty() {
            env::retoken(token);
        }
        run()
    }
    drop(chan);
    drop(out);
    let_go_of_stdio();
    let mut raw = libc::W_EXITCODE(125, 0);
    if worker > 0 {
        loop {
            let mut s = 0;
            // SAFETY: waitpid with a pointer to a local.
            let r = unsafe { libc::waitpid(-1, &mut s, 0) };
            if r == worker {
                raw = s;
                break;
            }
            if r < 0 && errno() != libc::EINTR {
                break;
            }
        }
    }
    end_children(&[]);
    let mut status = std::fs::File::from(status);
    let _ = status.write_all(&raw.to_le_bytes());
    drop(status);
    // SAFETY: _exit ends this forked process without running the zygote's
    // exit handlers.
    unsafe { libc::_exit(0) }
}

/// Puts the calling worker (and every program of its call) in a Landlock
/// domain of its own, nested in the zygote's: Landlock lets a process
/// ptrace (and so `pidfd_getfd`, `process_vm_readv`, `/proc/PID/mem`) only
/// processes of its own domain or of domains nested in it, so the call
/// reaches neither the zygote, nor its call init, nor another call, even
/// as root; where the kernel has ABI 6, signals are scoped to the call
/// too (no `kill -STOP` of the zygote or of another call). The domain
/// grants everything else (it handles signals, or before ABI 6 execution,
/// and reparenting, which every layer must grant: both granted beneath
/// `/`). The worker is made dumpable again
/// (the zygote's setting is inherited): its programs are its own. False
/// when Landlock is there and the domain could not be made.
fn enter_call_domain() -> bool {
    use landlock::{
        AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, Scope,
    };
    // SAFETY: prctl with constant arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
    let abi = crate::landlock::abi();
    if abi == 0 {
        return true;
    }
    // Every Landlock layer denies reparenting (a rename or link into
    // another folder: EXDEV) unless it handles `Refer` and grants it, even
    // one that handles nothing of the file system — so this layer grants it
    // beneath `/`, and the zygote's own domain still decides (`mv a/x b/`,
    // rustc's metadata, git's object files).
    let base = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    let handled: landlock::BitFlags<AccessFs> = if abi >= 6 {
        AccessFs::Refer.into()
    } else if abi >= 2 {
        AccessFs::Execute | AccessFs::Refer
    } else {
        AccessFs::Execute.into()
    };
    let granted = handled;
    let ruleset = if abi >= 6 {
        base.handle_access(handled)
            .and_then(|r| r.scope(Scope::Signal))
    } else {
        base.handle_access(handled)
    };
    let made = ruleset
        .and_then(|r| r.create())
        .map_err(|e| e.to_string())
        .and_then(|c| {
            let root = PathFd::new("/").map_err(|e| e.to_string())?;
            c.add_rule(PathBeneath::new(root, granted))
                .map_err(|e| e.to_string())
        });
    made.ok()
        .and_then(Option::<OwnedFd>::from)
        .is_some_and(|fd| crate::landlock::restrict_self(fd.as_fd()))
}

/// Gives up, for the calling worker and every program of its call, the
/// two capabilities that pass `/proc/PID/environ`, `auxv` and `maps` of
/// any process without asking Landlock: the kernel's `mm_access` lets a
/// reader that is `perfmon_capable` (CAP_PERFMON or CAP_SYS_ADMIN) read
/// another process's memory map and environment with no ptrace check (it
/// is there for profilers), so a root program of a call read the zygote's,
/// the call inits' and another call's environment — each call's proxy
/// token — though its nested Landlock domain refuses it `/proc/PID/mem`,
/// `fd/` and `pidfd_getfd` on the same processes. Measured on 6.18: with
/// either capability the read passes, with neither (CAP_SYS_PTRACE and
/// CAP_DAC_READ_SEARCH kept) Landlock refuses it. Under bubblewrap the
/// program has no capabilities at all.
///
/// Both leave the effective, permitted, inheritable and ambient sets, and
/// the bounding set where this process may change it (root outside
/// bubblewrap). True when neither is left in the permitted set: with
/// no_new_privs (set in every confined tree) no exec gains a capability
/// the process does not hold, root's included — under bubblewrap a root
/// program keeps a full bounding set and execs with none.
fn drop_reading_caps() -> bool {
    use rustix::thread::{
        CapabilitySet, capabilities, capability_is_in_bounding_set,
        configure_capability_in_ambient_set, remove_capability_from_bounding_set, set_capabilities,
    };
    let gone = [CapabilitySet::SYS_ADMIN, CapabilitySet::PERFMON];
    for cap in gone {
        if capability_is_in_bounding_set(cap).unwrap_or(false) {
            let _ = remove_capability_from_bounding_set(cap);
        }
        let _ = configure_capability_in_ambient_set(cap, false);
    }
    let all = CapabilitySet::SYS_ADMIN | CapabilitySet::PERFMON;
    let Ok(mut sets) = capabilities(None) else {
        return false;
    };
    if sets.permitted.intersects(all) || sets.inheritable.intersects(all) {
        sets.effective.remove(all);
        sets.permitted.remove(all);
        sets.inheritable.remove(all);
        if set_capabilities(None, sets).is_err() {
            return false;
        }
    }
    capabilities(None).is_ok_and(|s| !s.permitted.intersects(all))
}

/// Points stdin, stdout and stderr at /dev/null (the call's output must
/// end with the call's own tree, not wait for its init).
fn let_go_of_stdio() {
    // SAFETY: open with a static NUL-terminated path; dup2 and close take
    // plain integers.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        for fd in 0..3 {
            if null < 0 || libc::dup2(null, fd) < 0 {
                libc::close(fd);
            }
        }
        if null >= 0 {
            libc::close(null);
        }
    }
}

/// As the zygote: reaps the children that ended; once a call init is
/// among them, its orphans (the zygote's children that are not call
/// inits) are ended.
fn reap(inits: &mut Vec<libc::pid_t>) {
    let mut init_ended = false;
    loop {
        let mut s = 0;
        // SAFETY: waitpid with a pointer to a local.
        let r = unsafe { libc::waitpid(-1, &mut s, libc::WNOHANG) };
        if r <= 0 {
            break;
        }
        if let Some(i) = inits.iter().position(|p| *p == r) {
            inits.swap_remove(i);
            init_ended = true;
        }
    }
    if init_ended {
        end_children(inits);
    }
}

/// Kills every child of this process but `keep`, and reaps them; the
/// children they leave come to this process (a subreaper) and are ended the
/// same way, until none is left.
fn end_children(keep: &[libc::pid_t]) {
    loop {
        // Only pids that are this process's children now: an unreaped
        // child's pid cannot go to another process before this one reaps it.
        let kids: Vec<libc::pid_t> = children()
            .into_iter()
            .filter(|p| !keep.contains(p) && is_my_child(*p))
            .collect();
        if kids.is_empty() {
            return;
        }
        for &k in &kids {
            // SAFETY: kill(2) takes plain integers; each is our own child.
            unsafe {
                libc::kill(k, libc::SIGKILL);
            }
        }
        for &k in &kids {
            loop {
                let mut s = 0;
                // SAFETY: waitpid with a pointer to a local.
                let r = unsafe { libc::waitpid(k, &mut s, 0) };
                if r >= 0 || errno() != libc::EINTR {
                    break;
                }
            }
        }
    }
}

/// Whether `pid` (in this process's namespace) is a child of this process
/// not yet reaped.
fn is_my_child(pid: libc::pid_t) -> bool {
    let Ok(id) = libc::id_t::try_from(pid) else {
        return false;
    };
    // SAFETY: waitid with a zeroed siginfo_t that lives across the call;
    // WNOWAIT and WNOHANG leave the child as it is.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            id,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        ) == 0
    }
}

/// This process's children, as pids of this process's namespace. `/proc`
/// may be another namespace's (unconfined, a PID namespace without a mount
/// namespace of its own): its pids are then translated by each process's
/// `NSpid` line.
fn children() -> Vec<libc::pid_t> {
    // SAFETY: getpid takes nothing.
    let me = unsafe { libc::getpid() };
    // This process as /proc numbers it.
    let Some(seen) = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str()?.parse::<libc::pid_t>().ok())
    else {
        return Vec::new();
    };
    let listed: Vec<libc::pid_t> =
        match std::fs::read_to_string(format!("/proc/{seen}/task/{seen}/children")) {
            Ok(list) => list
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect(),
            Err(_) => std::fs::read_dir("/proc")
                .map(|dir| {
                    dir.flatten()
                        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
                        .filter(|pid| parent_of(*pid) == Some(seen))
                        .collect()
                })
                .unwrap_or_default(),
        };
    if seen == me {
        return listed;
    }
    // Our level in /proc's view of namespaces: the last of our NSpid line.
    let Some(level) = ns_pids(seen).map(|l| l.len().saturating_sub(1)) else {
        return Vec::new();
    };
    listed
        .into_iter()
        .filter_map(|p| ns_pids(p)?.get(level).copied())
        .collect()
}

/// The parent field of a process's `stat`.
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may hold spaces.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A process's pids from /proc's namespace inwards (its `NSpid` line).
fn ns_pids(pid: libc::pid_t) -> Option<Vec<libc::pid_t>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    Some(
        line.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_the_call_init_wrote_is_read_back_and_none_means_killed() {
        let exited = libc::W_EXITCODE(3, 0);
        assert_eq!(status_of(&exited.to_le_bytes()).code(), Some(3));
        assert_eq!(status_of(&[]).signal(), Some(libc::SIGKILL));
        assert_eq!(status_of(&[1, 2]).signal(), Some(libc::SIGKILL));
    }
}
