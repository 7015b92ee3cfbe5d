//! The steps from a fresh process to its program: the PID namespace's
//! reaper, the parent-death signal, the rlimits, no_new_privs, Landlock,
//! seccomp, the exec filter, and the exec itself.
//!
//! Everything the steps need is prepared first ([`Launch::prepare`]: the
//! Landlock ruleset is created, the filters are built, the program's
//! candidate paths, arguments and environment are laid out as C strings), so
//! that running them ([`Launch::run`]) makes system calls only: no
//! allocation, no lock. That lets the broker's forked child run them itself
//! (outside bubblewrap it needs no entry binary, and the program is the one
//! exec of the start); inside bubblewrap the confining entry runs the same
//! steps. Which layers the policy asks for is decided by the caller.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use seccompiler::BpfProgram;

use crate::exec_filter::{self, SUPERVISOR_FD};
use crate::{Limits, Policy, landlock, lifetime, seccomp};

/// Exit status when the program could not be confined or started.
pub const REFUSED: i32 = 125;
/// Exit status when the program was not found or could not be run.
pub const CANNOT_RUN: i32 = 127;

/// A step that failed, with the error number it failed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A fork for the PID namespace's reaper.
    Fork(i32),
    /// Setting the resource limits.
    Limits(i32),
    /// Setting no_new_privs.
    NoNewPrivs(i32),
    /// The policy confines, outside bubblewrap, and Landlock is not there.
    NoLayer,
    /// The policy confines and the seccomp filter could not be installed.
    NoSeccomp,
    /// Putting the Landlock rules in force.
    Landlock(i32),
    /// Installing the exec filter (seccomp user notification).
    ExecFilter(i32),
    /// Handing the exec filter's listener to the broker.
    HandOver(i32),
    /// Running the program (every candidate path failed).
    Exec(i32),
}

impl Failure {
    /// The exit status the process ends with.
    pub fn status(self) -> i32 {
        match self {
            Failure::Exec(_) => CANNOT_RUN,
            _ => REFUSED,
        }
    }

    /// What failed, for a person; `program` names the program.
    fn what(self) -> &'static str {
        match self {
            Failure::Fork(_) => "fork failed",
            Failure::Limits(_) => "resource limits could not be set",
            Failure::NoNewPrivs(_) => "no_new_privs could not be set",
            Failure::Landlock(_) => {
                "the Landlock rules could not be put in force; refusing to run the program"
            }
            Failure::NoLayer => {
                "NIB_SANDBOX=1 without bubblewrap, and Landlock is not in force here (nothing would hold files); refusing to run the program. hint: nib doctor says which layers hold and what would fix it"
            }
            Failure::NoSeccomp => {
                "NIB_SANDBOX=1, and the seccomp filter could not be installed; refusing to run the program. hint: nib doctor says which layers hold and what would fix it"
            }
            Failure::ExecFilter(_) | Failure::HandOver(_) => {
                "program rules are in force, but nib cannot check programs as they start; refusing to run anything"
            }
            Failure::Exec(_) => "cannot run",
        }
    }

    fn errno(self) -> Option<i32> {
        match self {
            Failure::Fork(e)
            | Failure::Limits(e)
            | Failure::NoNewPrivs(e)
            | Failure::Landlock(e)
            | Failure::ExecFilter(e)
            | Failure::HandOver(e)
            | Failure::Exec(e) => Some(e),
            Failure::NoLayer | Failure::NoSeccomp => None,
        }
    }

    /// Writes `nib sandbox: WHAT[ PROGRAM]: ERROR` to stderr without
    /// allocating (a forked child may not).
    pub fn report(self, program: &[u8]) {
        let mut line = Line::default();
        line.push(b"nib sandbox: ");
        line.push(self.what().as_bytes());
        if let Failure::Exec(_) = self {
            line.push(b" ");
            line.push(program);
        }
        if let Some(e) = self.errno() {
            line.push(b": ");
            line.push(errno_text(e).as_bytes());
            if errno_text(e) == "error" {
                line.push(b" ");
                line.push_number(e);
            }
        }
        line.push(b"\n");
        // SAFETY: write(2) of a buffer on this stack frame, with its length.
        unsafe {
            libc::write(2, line.buf.as_ptr().cast(), line.len);
        }
    }
}

/// A message built on the stack (truncated at its size).
struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Default for Line {
    fn default() -> Line {
        Line {
            buf: [0; 512],
            len: 0,
        }
    }
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        let room = self.buf.len() - self.len;
        let n = bytes.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn push_number(&mut self, n: i32) {
        let mut digits = [0u8; 12];
        let mut i = digits.len();
        let mut v = n.unsigned_abs();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

/// The usual words for the errors a start meets (strerror may allocate).
fn errno_text(e: i32) -> &'static str {
    match e {
        libc::ENOENT => "No such file or directory",
        libc::EACCES => "Permission denied",
        libc::EPERM => "Operation not permitted",
        libc::ENOEXEC => "Exec format error",
        libc::E2BIG => "Argument list too long",
        libc::ENOMEM => "Cannot allocate memory",
        libc::EAGAIN => "Resource temporarily unavailable",
        libc::EINVAL => "Invalid argument",
        libc::ENOSYS => "Function not implemented",
        libc::ENOTDIR => "Not a directory",
        libc::ELOOP => "Too many levels of symbolic links",
        libc::ENAMETOOLONG => "File name too long",
        _ => "error",
    }
}

/// NUL-terminated strings and the NULL-terminated array of their
/// addresses that execve takes. The addresses are kept as integers so the
/// value may cross into the closure a fork runs; they point into `strings`,
/// whose heap buffers never move while this value lives.
#[derive(Debug)]
struct CArray {
    strings: Vec<CString>,
    addresses: Vec<usize>,
}

impl CArray {
    fn new(strings: Vec<CString>) -> CArray {
        let mut addresses: Vec<usize> = strings.iter().map(|s| s.as_ptr() as usize).collect();
        addresses.push(0);
        CArray { strings, addresses }
    }

    fn as_ptr(&self) -> *const *const libc::c_char {
        self.addresses.as_ptr().cast()
    }
}

fn c_string(s: &OsStr) -> Result<CString, String> {
    CString::new(s.as_bytes()).map_err(|_| format!("{:?} holds a NUL byte", s.to_string_lossy()))
}

/// Where the process stands when it runs the steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespace {
    /// Inside bubblewrap, whose init holds the PID namespace.
    Bubblewrap,
    /// Anywhere else: PID 1 of a namespace the broker made, or in the
    /// broker's (the steps then make one where they may).
    Own,
}

/// The argument that marks a confining entry.
pub const ENTRY_ARG: &str = "__nib-confine";

/// Everything the steps need, prepared.
#[derive(Debug)]
pub struct Launch {
    namespace: Namespace,
    limits: Limits,
    confine: bool,
    landlock: Option<OwnedFd>,
    seccomp: Vec<BpfProgram>,
    exec_filter: Option<Vec<libc::sock_filter>>,
    /// A PID namespace's init forked from the broker holds a copy of the
    /// broker's memory; it execs this small reaper (the confining entry with
    /// [`REAP_ARG`]) once the program's process is forked, so the copy is
    /// dropped while the program starts, not when the call ends.
    reaper: Option<(CString, CArray, CArray)>,
    /// The paths execve tries in turn (the PATH search, done here).
    candidates: Vec<CString>,
    /// Outside bubblewrap: the pinned folders (git dirs), bound over
    /// themselves in the tree's own mount namespace so they cannot be
    /// renamed or removed, then the protected paths (files that make code
    /// run), bound read-only over themselves.
    pinned: Vec<CString>,
    protected: Vec<CString>,
    /// For each candidate, `/bin/sh CANDIDATE ARGS…` (addresses, as in
    /// [`CArray`]): what execvp runs when a file has no executable format
    /// (a script without `#!`).
    shell_argvs: Vec<Vec<usize>>,
    shell: CString,
    argv: CArray,
    envp: CArray,
}

impl Launch {
    /// Prepares the steps for `program` under `policy` with environment
    /// `env` (already complete: the private temp folder's TMPDIR included).
    ///
    /// `reaper` is the confining entry an init forked from the broker execs
    /// to reap ([`REAP_ARG`]); `None` where the init is small already.
    pub fn prepare(
        policy: &Policy,
        namespace: Namespace,
        private_tmp: Option<&PathBuf>,
        program: &[OsString],
        env: &[(OsString, OsString)],
        reaper: Option<&Path>,
    ) -> Result<Launch, String> {
        let Some(name) = program.first() else {
            return Err("no program to run".into());
        };
        let in_bwrap = namespace == Namespace::Bubblewrap;
        // The proxy: programs get TCP only where it is held to the proxy's
        // port (bubblewrap's empty network namespace, or Landlock's port
        // rule from ABI 4); without either they get no network at all.
        let proxy = policy
            .proxy
            .as_ref()
            .filter(|_| policy.confine && !policy.network);
        let sockets = if policy.network {
            seccomp::Sockets::All
        } else if proxy.is_some() && (in_bwrap || landlock::abi() >= 4) {
            seccomp::Sockets::UnixAndTcp
        } else {
            seccomp::Sockets::Unix
        };
        let (landlock, seccomp) = if policy.confine {
            (
                landlock::ruleset(policy, private_tmp, in_bwrap)
                    .map_err(|e| format!("cannot build the Landlock rules: {e}"))?
                    .map(above_handed_fds)
                    .transpose()
                    .map_err(|e| format!("cannot keep the Landlock rules: {e}"))?,
                seccomp::programs(sockets).unwrap_or_default(),
            )
        } else {
            (None, Vec::new())
        };
        let connects = connects_supervised(policy, in_bwrap);
        let exec_filter = if policy.supervise_exec || connects {
            Some(exec_filter::notify_program(
                policy.supervise_exec,
                connects,
            )?)
        } else {
            None
        };
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone());
        let candidates = candidates(name, path.as_deref())
            .iter()
            .map(|p| c_string(p.as_os_str()))
            .collect::<Result<Vec<_>, _>>()?;
        let argv = program
            .iter()
            .map(|a| c_string(a))
            .collect::<Result<Vec<_>, _>>()?;
        let envp = env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.clone();
                kv.push("=");
                kv.push(v);
                c_string(&kv)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let reaper = match reaper {
            Some(entry) => {
                let path = c_string(entry.as_os_str())?;
                let argv = [
                    entry.as_os_str(),
                    OsStr::new(ENTRY_ARG),
                    OsStr::new(REAP_ARG),
                ]
                .iter()
                .map(|a| c_string(a))
                .collect::<Result<Vec<_>, _>>()?;
                Some((path, CArray::new(argv), CArray::new(Vec::new())))
            }
            None => None,
        };
        let (pinned, protected) = if policy.confine && !in_bwrap {
            let c_strings = |paths: &[PathBuf]| {
                paths
                    .iter()
                    .map(|p| c_string(p.as_os_str()))
                    .collect::<Result<Vec<_>, _>>()
            };
            (c_strings(&policy.pinned)?, c_strings(&policy.protected)?)
        } else {
            (Vec::new(), Vec::new())
        };
        let shell = c_string(OsStr::new("/bin/sh"))?;
        let shell_argvs = candidates
            .iter()
            .map(|c| {
                let mut a = vec![shell.as_ptr() as usize, c.as_ptr() as usize];
                a.extend(argv.iter().skip(1).map(|s| s.as_ptr() as usize));
                a.push(0);
                a
            })
            .collect();
        Ok(Launch {
            namespace,
            reaper,
            shell_argvs,
            shell,
            limits: policy.limits.clone(),
            confine: policy.confine,
            landlock,
            seccomp,
            exec_filter,
            candidates,
            pinned,
            protected,
            argv: CArray::new(argv),
            envp: CArray::new(envp),
        })
    }

    /// The program's name as given, for messages.
    pub fn program(&self) -> &[u8] {
        self.argv
            .strings
            .first()
            .map(|s| s.as_bytes())
            .unwrap_or_default()
    }

    /// Runs the steps and execs the program; returns only when a step
    /// failed. System calls only (safe between fork and exec in a
    /// multi-threaded parent). The process must be single-threaded.
    pub fn run(&self) -> Failure {
        let mut own_pid_namespace = false;
        if self.namespace == Namespace::Own {
            // SAFETY: getpid takes nothing.
            let pid = unsafe { libc::getpid() };
            if pid == 1 {
                // The broker started us as the init of a new PID
                // namespace: reap, and run the program as PID 2.
                if let Err(f) = fork_and_pass_on(true, self.reaper.as_ref()) {
                    return f;
                }
                own_pid_namespace = true;
            // SAFETY: unshare takes only flags; it affects our future
            // children. Where it is not permitted, the tree goes without a
            // namespace (the pids cgroup and the parent-death signal
            // still bound it).
            } else if unsafe { libc::unshare(libc::CLONE_NEWPID) } == 0 {
                // The child is PID 1 there; this process waits for it and
                // passes its status on.
                if let Err(f) = fork_and_pass_on(false, None) {
                    return f;
                }
                lifetime::die_with_parent();
                if let Err(f) = fork_and_pass_on(true, self.reaper.as_ref()) {
                    return f;
                }
                own_pid_namespace = true;
            }
        }
        if self.confine && own_pid_namespace && fresh_proc() {
            hold_in_place(&self.pinned, false);
            hold_in_place(&self.protected, true);
            if let Some(ruleset) = &self.landlock {
                // The ruleset granted the host's /proc; the fresh one is
                // another file system and needs its own rule.
                landlock::grant_read_raw(ruleset.as_fd(), c"/proc");
            }
        }
        lifetime::die_with_parent();
        if let Err(e) = crate::limits::apply_rlimits_raw(&self.limits) {
            return Failure::Limits(e);
        }
        let mut no_new_privs = false;
        if self.confine {
            if let Err(e) = lifetime::no_new_privs() {
                return Failure::NoNewPrivs(e);
            }
            no_new_privs = true;
            // Rules built are rules in force: a failure here stops the start
            // rather than leaving the program with seccomp alone.
            let landlock_on = match self.landlock.as_ref() {
                Some(fd) if !landlock::restrict_self(fd.as_fd()) => {
                    return Failure::Landlock(last_errno());
                }
                Some(_) => true,
                None => false,
            };
            let seccomp_on = seccomp::install(&self.seccomp);
            // Fail closed: seccomp always, and Landlock wherever
            // bubblewrap is not the outer wall. Fewer layers than that
            // hold nothing of the files (seccomp alone) and run nothing.
            if !seccomp_on {
                return Failure::NoSeccomp;
            }
            if self.namespace != Namespace::Bubblewrap && !landlock_on {
                return Failure::NoLayer;
            }
        }
        if let Some(program) = &self.exec_filter {
            // The exec-time layer: in every mode, and last, so the filter
            // sees the program's own exec too. It needs no_new_privs.
            if !no_new_privs && let Err(e) = lifetime::no_new_privs() {
                return Failure::NoNewPrivs(e);
            }
            let listener = match exec_filter::install(program) {
                Ok(fd) => fd,
                Err(e) => return Failure::ExecFilter(e),
            };
            // SAFETY: the broker put the supervisor socket at SUPERVISOR_FD
            // for this process and nothing else here owns that fd.
            let socket = unsafe { OwnedFd::from_raw_fd(SUPERVISOR_FD) };
            if let Err(e) = exec_filter::send_fd(socket.as_fd(), listener.as_fd()) {
                return Failure::HandOver(e.raw_os_error().unwrap_or(libc::EIO));
            }
            drop(listener);
            drop(socket);
        }
        // The PATH search as execvp does it: the first candidate that runs;
        // a permission error is remembered over a missing file.
        let mut error = libc::ENOENT;
        let mut denied = false;
        for (i, path) in self.candidates.iter().enumerate() {
            // SAFETY: execve with a NUL-terminated path and NULL-terminated
            // arrays of NUL-terminated strings, all owned by `self` and alive
            // for the call; it returns only on failure.
            unsafe {
                libc::execve(path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
            }
            let mut e = last_errno();
            if e == libc::ENOEXEC
                && let Some(shell_argv) = self.shell_argvs.get(i)
            {
                // SAFETY: as above; the array's addresses point into
                // `self.shell`, `self.candidates` and `self.argv`'s strings.
                unsafe {
                    libc::execve(
                        self.shell.as_ptr(),
                        shell_argv.as_ptr().cast(),
                        self.envp.as_ptr(),
                    );
                }
                e = last_errno();
            }
            match e {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG => {}
                _ => {
                    error = e;
                    break;
                }
            }
        }
        if denied && error == libc::ENOENT {
            error = libc::EACCES;
        }
        Failure::Exec(error)
    }
}

/// Outside bubblewrap, under a confining policy, in the tree's own PID
/// namespace: a mount namespace of its own with a fresh `/proc`, so the
/// tree sees its own processes only (the host's `/proc/PID/environ` of the
/// user's other processes is otherwise readable: Landlock does not hold
/// it). Where the mount namespace cannot be made (no privilege), the
/// host's `/proc` stays — a residual SECURITY.md names. System calls only.
fn fresh_proc() -> bool {
    // SAFETY: unshare and mount take flags and NUL-terminated literals;
    // they affect this process's own mount namespace only.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return false;
        }
        let root = c"/";
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return false;
        }
        let proc_ = c"proc";
        let at = c"/proc";
        libc::mount(
            proc_.as_ptr(),
            at.as_ptr(),
            proc_.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) == 0
    }
}

/// In the tree's own mount namespace ([`fresh_proc`]), binds each of
/// `paths` read-only over itself, as bubblewrap's `--ro-bind-try` does:
/// writing there fails, and so do removing or renaming it (a mount point).
/// Landlock grants the roots by folder, so it cannot hold a file inside
/// one by itself. A path that is gone is skipped. System calls only.
/// Binds each path over itself (a mount point cannot be renamed, replaced
/// or removed), and read-only when `read_only`.
fn hold_in_place(paths: &[CString], read_only: bool) {
    for p in paths {
        // SAFETY: mount with NUL-terminated paths owned by the caller and
        // null or literal arguments; it changes this process's own mount
        // namespace only (made private by `fresh_proc`).
        unsafe {
            if libc::mount(
                p.as_ptr(),
                p.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
            {
                continue;
            }
            if read_only {
                libc::mount(
                    std::ptr::null(),
                    p.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                    std::ptr::null(),
                );
            }
        }
    }
}

/// The fds the start puts in place (the channel at 3, the supervisor
/// socket at 4, the output at 5) must not land on the ruleset's: it is
/// moved above them, where the start's `dup2`s cannot overwrite it (a
/// ruleset at fd 4 was replaced by the supervisor socket, and Landlock
/// silently not applied).
fn above_handed_fds(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    const FIRST_FREE: RawFd = 10;
    if fd.as_raw_fd() >= FIRST_FREE {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, FIRST_FREE)?)
}

/// Whether each `connect` of the tree goes to the broker's supervisor,
/// which refuses pathname unix sockets outside the roots and the private
/// `/tmp`: under a confining policy outside bubblewrap (whose view holds
/// no other sockets) where Landlock cannot refuse them itself (before ABI 9).
pub fn connects_supervised(policy: &Policy, in_bwrap: bool) -> bool {
    policy.confine && !in_bwrap && landlock::abi() < 9
}

/// The paths execvp would try for `name` with `path` as PATH (glibc's
/// default when unset); a name with a slash is the only candidate.
fn candidates(name: &OsStr, path: Option<&OsStr>) -> Vec<PathBuf> {
    if name.as_bytes().contains(&b'/') || name.is_empty() {
        return vec![PathBuf::from(name)];
    }
    let path = path.unwrap_or(OsStr::new("/bin:/usr/bin"));
    path.as_bytes()
        .split(|b| *b == b':')
        .map(|dir| {
            // An empty entry is the current folder.
            let dir = if dir.is_empty() { b"." as &[u8] } else { dir };
            Path::new(OsStr::from_bytes(dir)).join(name)
        })
        .collect()
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The argument (after the entry argument) that makes the entry a PID
/// namespace's reaper for the program's process, PID 2 ([`reap`]).
pub const REAP_ARG: &str = "--reap";

/// The program's process in a namespace whose init is the entry: the init's
/// first child.
const PROGRAM_PID: libc::pid_t = 2;

/// Forks; returns in the child. The parent waits for the child and ends
/// with its status. It first points its stdio at /dev/null and closes every
/// fd above 2 (the program's fds are its own, and a broker waiting for a
/// pipe's end must not wait for this process). With `init` the parent is a
/// PID namespace's init: it then execs `reaper` when given (and the child
/// is PID 2), else reaps every process of the namespace itself until the
/// child's ends.
fn fork_and_pass_on(init: bool, reaper: Option<&(CString, CArray, CArray)>) -> Result<(), Failure> {
    // SAFETY: fork; the child goes on with system calls only (see `run`).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Failure::Fork(last_errno()));
    }
    if pid == 0 {
        return Ok(());
    }
    let_go_of_fds();
    if init {
        if let Some((path, argv, envp)) = reaper.filter(|_| pid == PROGRAM_PID) {
            // SAFETY: execve with a NUL-terminated path and NULL-terminated
            // arrays of NUL-terminated strings alive for the call; on
            // failure this process reaps in place below.
            unsafe {
                libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
            }
        }
        reap(pid)
    }
    end_with(pid, pid)
}

/// Points stdin, stdout and stderr at /dev/null and closes every fd above
/// 2: for a process that only waits from here on.
fn let_go_of_fds() {
    // SAFETY: open with a static NUL-terminated path; dup2, close and
    // close_range take plain integers; the caller uses no fd from here on.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        for fd in 0..3 {
            if null < 0 || libc::dup2(null, fd) < 0 {
                libc::close(fd);
            }
        }
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    }
}

/// As a PID namespace's init: reaps every process of the namespace until
/// `program` ends, then ends with its status (the kernel then ends what
/// is left in the namespace).
pub fn reap(program: libc::pid_t) -> ! {
    end_with(-1, program)
}

/// Waits (`waitpid(which)`) until `program` has ended, then ends with its
/// status.
fn end_with(which: libc::pid_t, program: libc::pid_t) -> ! {
    let mut status = 0;
    loop {
        let mut s = 0;
        // SAFETY: waitpid with a valid pointer to a local.
        let r = unsafe { libc::waitpid(which, &mut s, 0) };
        if r == program {
            status = s;
            break;
        }
        if r < 0 && last_errno() != libc::EINTR {
            break;
        }
    }
    exit_with(status)
}

/// The entry as a reaper ([`REAP_ARG`]): the program is PID 2.
pub fn reap_program() -> ! {
    reap(PROGRAM_PID)
}

fn exit_with(status: i32) -> ! {
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    // SAFETY: _exit ends the process without running anything of this one's
    // (no atexit handlers, no destructors), as a forked child must.
    unsafe { libc::_exit(code) }
}

/// The environment a program gets: `vars` in order, a later value of a
/// name replacing an earlier one in its place.
pub fn merge_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = Vec::new();
    for (k, v) in vars {
        match out.iter_mut().find(|(name, _)| *name == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_follow_execvp() {
        assert_eq!(
            candidates(OsStr::new("ls"), Some(OsStr::new("/a:/b/c::/d"))),
            vec![
                PathBuf::from("/a/ls"),
                PathBuf::from("/b/c/ls"),
                PathBuf::from("./ls"),
                PathBuf::from("/d/ls")
            ]
        );
        assert_eq!(
            candidates(OsStr::new("./x"), Some(OsStr::new("/a"))),
            vec![PathBuf::from("./x")]
        );
        assert_eq!(
            candidates(OsStr::new("sh"), None),
            vec![PathBuf::from("/bin/sh"), PathBuf::from("/usr/bin/sh")]
        );
    }

    #[test]
    fn a_later_value_replaces_an_earlier_one_in_place() {
        let kv = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
        assert_eq!(
            merge_env([kv("A", "1"), kv("B", "2"), kv("A", "3")]),
            vec![kv("A", "3"), kv("B", "2")]
        );
    }

    #[test]
    fn failures_are_reported_without_allocating_in_one_line() {
        let mut line = Line::default();
        line.push(b"x ");
        line.push_number(-12);
        line.push_number(0);
        assert_eq!(&line.buf[..line.len], b"x 120");
        let mut long = Line::default();
        long.push(&[b'a'; 600]);
        assert_eq!(long.len, 512);
        assert_eq!(Failure::Exec(libc::ENOENT).status(), CANNOT_RUN);
        assert_eq!(Failure::NoLayer.status(), REFUSED);
    }
}
