//! The exec-time layer, broker side: the supervisor that decides each
//! `execve`/`execveat` of a confined process's tree (the filter is in
//! [`crate::exec_filter`]).
//!
//! It runs on a thread of the broker, outside every filter. For each
//! notification it reads the path the program asked for from the caller's
//! memory, finds the file the kernel will run *as the caller sees it* (its
//! root, its working folder or the folder fd, symlinks resolved in its
//! root, `/proc/self` and `/dev/fd/N` followed for that process), then each
//! `#!` interpreter of that file, and hands them to an [`ExecJudge`]. A
//! refusal answers the call with `EACCES` (the program that tried sees an
//! ordinary error) and is written to the confined process's [`ExecLog`]; anything else
//! lets the kernel go on. What is forbidden is the judge's business.
//!
//! Residual risk, inherent in user notification: the kernel reads the path
//! again after the supervisor answered, so a program that changes the path
//! in memory (another thread) or swaps the file at that path (another
//! process, in a folder it may write) between the check and the exec can run
//! something the judge did not see. SECURITY.md says so.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rustix::fs::{FileType, Mode, OFlags};

use crate::exec_filter::{exec_calls, recv_fd};

/// Decides whether one exec may run.
pub trait ExecJudge: Send + Sync + std::fmt::Debug {
    /// `None` lets it run; `Some(why)` refuses it with `EACCES`, `why` naming
    /// the rule that refused it.
    fn judge(&self, attempt: &ExecAttempt<'_>) -> Option<String>;
}

/// A file an exec would run.
#[derive(Debug)]
pub struct ExecFile {
    /// The path as it was named (by the caller, or on a `#!` line).
    pub named: PathBuf,
    /// The file itself (an `O_PATH` fd, opened in the caller's view).
    pub fd: OwnedFd,
    /// Its device.
    pub dev: u64,
    /// Its inode.
    pub ino: u64,
    /// Its size in bytes.
    pub size: u64,
    /// It is a regular file.
    pub regular: bool,
}

impl ExecFile {
    fn new(named: PathBuf, fd: OwnedFd) -> std::io::Result<ExecFile> {
        let st = rustix::fs::fstat(&fd)?;
        Ok(ExecFile {
            named,
            dev: st.st_dev,
            ino: st.st_ino,
            size: u64::try_from(st.st_size).unwrap_or(0),
            regular: FileType::from_raw_mode(st.st_mode) == FileType::RegularFile,
            fd,
        })
    }

    /// Opens the file for reading (regular files only; never blocks).
    pub fn open(&self) -> std::io::Result<File> {
        if !self.regular {
            return Err(std::io::Error::other("not a regular file"));
        }
        let fd = rustix::fs::open(
            format!("/proc/self/fd/{}", self.fd.as_raw_fd()),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?;
        Ok(File::from(fd))
    }
}

/// One exec a program of the confined process's tree is making.
#[derive(Debug)]
pub struct ExecAttempt<'a> {
    /// The path the caller asked for.
    pub path: PathBuf,
    /// The file the kernel would run, then its `#!` interpreters in order
    /// (empty when nothing runnable is at the path).
    pub files: Vec<ExecFile>,
    /// The caller's process id (as the broker sees it).
    pub pid: u32,
    mem: &'a File,
    argv: u64,
    narrow: bool,
}

/// The most argument bytes read for a judge.
const ARGV_BYTES: usize = 1 << 20;
/// The most arguments read for a judge.
const ARGV_COUNT: usize = 8192;

impl ExecAttempt<'_> {
    /// The arguments the program is started with (read from the caller's
    /// memory); `None` when they cannot be read whole.
    pub fn argv(&self) -> Option<Vec<OsString>> {
        let mut out = Vec::new();
        let mut total = 0usize;
        if self.argv == 0 {
            return Some(out);
        }
        let width = if self.narrow { 4 } else { 8 };
        for i in 0..ARGV_COUNT as u64 {
            let mut buf = [0u8; 8];
            self.mem
                .read_exact_at(&mut buf[..width], self.argv.checked_add(i * width as u64)?)
                .ok()?;
            let ptr = if self.narrow {
                u64::from(u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]))
            } else {
                u64::from_ne_bytes(buf)
            };
            if ptr == 0 {
                return Some(out);
            }
            let s = read_cstr(self.mem, ptr, ARGV_BYTES - total)?;
            total += s.len() + 1;
            out.push(OsString::from_vec(s));
        }
        None
    }
}

/// One refused exec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecRefusal {
    /// The path the program asked to run.
    pub program: PathBuf,
    /// The program that asked (its command name).
    pub caller: String,
    /// The judge's words.
    pub why: String,
}

/// The refusals of one confined process's tree, in order.
#[derive(Clone, Debug, Default)]
pub struct ExecLog(Arc<Mutex<Vec<ExecRefusal>>>);

impl ExecLog {
    /// Every refusal so far.
    pub fn refusals(&self) -> Vec<ExecRefusal> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn push(&self, r: ExecRefusal) {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A loop retrying the same exec is one refusal to report.
        if v.len() < 1000 && !v.contains(&r) {
            v.push(r);
        }
    }
}

/// Where a confined tree may connect to pathname unix sockets when the
/// supervisor checks them (Landlock before ABI 9 cannot): beneath these
/// folders (the roots and the private `/tmp`), nowhere else.
#[derive(Debug)]
pub(crate) struct ConnectRule {
    allowed: Vec<PathBuf>,
}

impl ConnectRule {
    /// The rule for these folders (made canonical, as the kernel sees them).
    pub(crate) fn new(folders: &[PathBuf]) -> ConnectRule {
        ConnectRule {
            allowed: folders
                .iter()
                .filter_map(|f| std::fs::canonicalize(f).ok())
                .collect(),
        }
    }

    /// The error a connect gets, if it is refused: a pathname unix socket
    /// (resolved in the caller's view) outside the allowed folders. Other
    /// families and abstract sockets go on (Landlock scopes abstract ones).
    fn refuses(
        &self,
        listener: BorrowedFd<'_>,
        notif: &libc::seccomp_notif,
        socketcall: bool,
    ) -> Option<i32> {
        if socketcall {
            // i386's multiplexer: its arguments are in the caller's memory;
            // connect (call 3) is refused, the rest go on.
            return (notif.data.args[0] == 3).then_some(libc::EACCES);
        }
        let (addr, len) = (notif.data.args[1], notif.data.args[2]);
        let Ok(mem) = File::open(format!("/proc/{}/mem", notif.pid)) else {
            return Some(libc::EACCES);
        };
        if !still_valid(listener, notif.id) {
            return None;
        }
        let len = usize::try_from(len)
            .unwrap_or(0)
            .min(std::mem::size_of::<libc::sockaddr_un>());
        let mut buf = vec![0u8; len];
        if len < 2 || mem.read_exact_at(&mut buf, addr).is_err() {
            // The kernel refuses what it cannot read itself.
            return None;
        }
        if u16::from_ne_bytes([buf[0], buf[1]]) != libc::AF_UNIX as u16 {
            return None;
        }
        let path = &buf[2..];
        let path = &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())];
        if path.is_empty() {
            // Abstract (a leading NUL) or unnamed.
            return None;
        }
        let view = View { pid: notif.pid };
        let fd = match view.open(libc::AT_FDCWD, path, false) {
            Ok(fd) => fd,
            Err(e) => return Some(e.raw_os_error().unwrap_or(libc::ENOENT)),
        };
        let Ok(at) = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) else {
            return Some(libc::EACCES);
        };
        if self.allowed.iter().any(|a| at.starts_with(a)) {
            None
        } else {
            Some(libc::EACCES)
        }
    }
}

/// Starts the supervisor of one confined process: it waits for the listener on
/// `socket`, then answers every exec (with a judge) and every connect
/// (with a connect rule) of the tree until the tree is gone.
pub(crate) fn supervise(
    socket: OwnedFd,
    judge: Option<Arc<dyn ExecJudge>>,
    connects: Option<Arc<ConnectRule>>,
    log: ExecLog,
) {
    let spawned = std::thread::Builder::new()
        .name("nib-exec-guard".into())
        .spawn(move || {
            let listener = match recv_fd(socket.as_fd()) {
                Ok(Some(l)) => l,
                // The confined process ended (or refused to start) before its program.
                _ => return,
            };
            drop(socket);
            serve(
                listener.as_fd(),
                judge.as_deref(),
                connects.as_deref(),
                &log,
            );
        });
    // Without its thread no exec of the confined process is ever answered: the confined process
    // then fails at its first exec (fail closed), so nothing more to do here.
    drop(spawned);
}

fn serve(
    listener: BorrowedFd<'_>,
    judge: Option<&dyn ExecJudge>,
    connects: Option<&ConnectRule>,
    log: &ExecLog,
) {
    loop {
        let mut fds = [rustix::event::PollFd::new(
            &listener,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return,
        }
        let got = fds[0].revents();
        if !got.contains(rustix::event::PollFlags::IN) {
            // Every process of the tree is gone (HUP), or the fd broke.
            return;
        }
        // SAFETY: seccomp_notif is plain data; all zeroes is what the kernel
        // requires before SECCOMP_IOCTL_NOTIF_RECV fills it.
        let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl writes one seccomp_notif into `notif`, which is
        // valid and large enough for it.
        let r = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut notif as *mut libc::seccomp_notif,
            )
        };
        if r < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                // The caller died before we took it, or a signal: go on.
                Some(libc::ENOENT) | Some(libc::EINTR) => continue,
                _ => return,
            }
        }
        let connect = exec_calls()
            .iter()
            .find(|c| c.arch == notif.data.arch)
            .and_then(|c| {
                let nr = u32::try_from(notif.data.nr).ok()?;
                c.connect
                    .contains(&nr)
                    .then_some(nr == crate::exec_filter::SOCKETCALL_I386 && c.narrow)
            });
        let error = match (connect, connects, judge) {
            (Some(socketcall), Some(rule), _) => rule.refuses(listener, &notif, socketcall),
            (Some(_), None, _) => None,
            (None, _, Some(judge)) => {
                let refusal = decide(listener, &notif, judge);
                let refused = refusal.is_some();
                // Logged before the answer: once the caller goes on, the call may
                // end at once, and its closing lines must already hold this.
                if let Some(r) = refusal {
                    log.push(r);
                }
                refused.then_some(libc::EACCES)
            }
            (None, _, None) => None,
        };
        let refused = error.is_some();
        let answer = libc::seccomp_notif_resp {
            id: notif.id,
            val: 0,
            error: error.map_or(0, |e| -e),
            flags: if refused {
                0
            } else {
                libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
            },
        };
        // SAFETY: the ioctl reads one seccomp_notif_resp from `answer`, which
        // lives across the call. A caller that died meanwhile gives ENOENT,
        // which changes nothing.
        unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &answer as *const libc::seccomp_notif_resp,
            );
        }
    }
}

/// Whether the notification still stands (its caller has not died and been
/// replaced by another process with the same pid).
fn still_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64 from a pointer to a live local.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id as *const u64,
        ) == 0
    }
}

fn decide(
    listener: BorrowedFd<'_>,
    notif: &libc::seccomp_notif,
    judge: &dyn ExecJudge,
) -> Option<ExecRefusal> {
    let refuse = |program: PathBuf, why: &str| {
        Some(ExecRefusal {
            program,
            caller: caller_name(notif.pid),
            why: why.to_string(),
        })
    };
    let Some(calls) = exec_calls().iter().find(|c| c.arch == notif.data.arch) else {
        return refuse(PathBuf::new(), "an exec from an unknown architecture");
    };
    let Ok(nr) = u32::try_from(notif.data.nr) else {
        return refuse(PathBuf::new(), "an unknown exec system call");
    };
    let a = notif.data.args;
    let (dirfd, path_ptr, argv, flags) = if calls.execve.contains(&nr) {
        (libc::AT_FDCWD, a[0], a[1], 0)
    } else {
        // The dirfd is an int: its low 32 bits, sign included.
        (a[0] as u32 as i32, a[1], a[2], a[4])
    };
    if notif.pid == 0 {
        return refuse(PathBuf::new(), "the process is not visible to nib");
    }
    let Ok(mem) = File::open(format!("/proc/{}/mem", notif.pid)) else {
        return refuse(PathBuf::new(), "nib cannot read the process's memory");
    };
    // Checked after opening: the memory is the caller's, not a reused pid's.
    if !still_valid(listener, notif.id) {
        return None;
    }
    let Some(path) = read_cstr(&mem, path_ptr, libc::PATH_MAX as usize) else {
        return refuse(PathBuf::new(), "the program's path cannot be read");
    };
    let path = PathBuf::from(OsString::from_vec(path));
    let view = View { pid: notif.pid };
    let empty_path = flags & libc::AT_EMPTY_PATH as u64 != 0;
    let mut files = Vec::new();
    if let Ok(file) = view
        .open(dirfd, path.as_os_str().as_encoded_bytes(), empty_path)
        .and_then(|fd| ExecFile::new(path.clone(), fd))
    {
        files.push(file);
        // The kernel runs a `#!` script's interpreter (up to 4 levels deep)
        // without another exec call: each counts as run.
        while files.len() < 5 {
            let Some(interp) = files.last().and_then(shebang) else {
                break;
            };
            match view
                .open(libc::AT_FDCWD, &interp, false)
                .and_then(|fd| ExecFile::new(PathBuf::from(OsString::from_vec(interp)), fd))
            {
                Ok(f) => files.push(f),
                Err(_) => break,
            }
        }
    }
    let attempt = ExecAttempt {
        path: path.clone(),
        files,
        pid: notif.pid,
        mem: &mem,
        argv,
        narrow: calls.narrow,
    };
    let why = judge.judge(&attempt)?;
    refuse(path, &why)
}

/// The command name of a process, for the refusal line.
fn caller_name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| format!("process {pid}"))
}

/// A NUL-terminated string at `addr` in another process's memory, read page
/// by page (the string may end just before an unmapped page).
fn read_cstr(mem: &File, addr: u64, max: usize) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let room = (PAGE - at % PAGE).min((max - out.len()) as u64) as usize;
        let mut buf = vec![0u8; room];
        let n = mem.read_at(&mut buf, at).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Some(out);
        }
        out.extend_from_slice(&buf[..n]);
        at = at.checked_add(n as u64)?;
    }
    None
}

/// The interpreter named on a `#!` line, as the kernel reads it (the first
/// word after `#!`, within the first 256 bytes).
fn shebang(file: &ExecFile) -> Option<Vec<u8>> {
    let f = file.open().ok()?;
    let mut head = [0u8; 256];
    let n = f.read_at(&mut head, 0).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[line.iter().position(|&b| b != b' ' && b != b'\t')?..];
    let end = line
        .iter()
        .position(|&b| matches!(b, b' ' | b'\t' | b'\n' | 0))
        .unwrap_or(line.len());
    (end > 0).then(|| line[..end].to_vec())
}

/// A process's view of the file system: its root, its working folder, its
/// fds, reached through `/proc/PID` (which works across mount namespaces).
struct View {
    pid: u32,
}

/// The most symlinks one resolution follows (the kernel's limit).
const MAX_LINKS: usize = 40;
/// `statfs.f_type` of procfs (its C type differs between architectures
/// and between glibc and musl, so it is compared as an i64).
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

impl View {
    fn proc_open(&self, rest: &str) -> std::io::Result<OwnedFd> {
        Ok(rustix::fs::open(
            format!("/proc/{}/{rest}", self.pid),
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// The file at `path` as the process would open it for exec: relative to
    /// `dirfd` (or its working folder), symlinks resolved in its root.
    fn open(&self, dirfd: i32, path: &[u8], empty_path: bool) -> std::io::Result<OwnedFd> {
        if path.is_empty() {
            return if empty_path && dirfd >= 0 {
                self.proc_open(&format!("fd/{dirfd}"))
            } else {
                Err(std::io::Error::from_raw_os_error(libc::ENOENT))
            };
        }
        let root = self.proc_open("root")?;
        let start = if path.starts_with(b"/") {
            rustix::io::dup(&root)?
        } else if dirfd == libc::AT_FDCWD {
            self.proc_open("cwd")?
        } else {
            self.proc_open(&format!("fd/{dirfd}"))?
        };
        self.walk(&root, start, path)
    }

    /// Walks `path` component by component from `start`: `..` never climbs
    /// above `root`, absolute symlinks restart at `root`, and links in
    /// `/proc` (`self`, `fd/N`, `exe`…) are followed for this process.
    fn walk(&self, root: &OwnedFd, start: OwnedFd, path: &[u8]) -> std::io::Result<OwnedFd> {
        let mut cur = start;
        let mut todo: Vec<Vec<u8>> = components(path);
        todo.reverse();
        let mut links = 0;
        while let Some(c) = todo.pop() {
            match c.as_slice() {
                b"" | b"." => continue,
                b".." => {
                    if !same_file(&cur, root) {
                        cur = rustix::fs::openat(
                            &cur,
                            "..",
                            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                            Mode::empty(),
                        )?;
                    }
                    continue;
                }
                _ => {}
            }
            let name = OsString::from_vec(c);
            let next = rustix::fs::openat(
                &cur,
                name.as_os_str(),
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            let st = rustix::fs::fstat(&next)?;
            if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
                cur = next;
                continue;
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
            }
            let on_proc = rustix::fs::fstatfs(&cur)
                .map(|s| {
                    #[allow(clippy::unnecessary_cast)]
                    let kind = s.f_type as i64;
                    kind == PROC_SUPER_MAGIC
                })
                .unwrap_or(false);
            if on_proc {
                cur = match name.as_encoded_bytes() {
                    // The process's own entry, as nib reaches it.
                    b"self" => self.proc_open("")?,
                    b"thread-self" => self.proc_open(&format!("task/{}", self.pid))?,
                    // A magic link (fd/N, exe, cwd, root): the kernel's own
                    // answer for that process is the file.
                    _ => rustix::fs::openat(
                        &cur,
                        name.as_os_str(),
                        OFlags::PATH | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?,
                };
                continue;
            }
            let target = rustix::fs::readlinkat(&next, "", Vec::new())?.into_bytes();
            if target.starts_with(b"/") {
                cur = rustix::io::dup(root)?;
            }
            let mut more = components(&target);
            more.reverse();
            todo.extend(more);
        }
        Ok(cur)
    }
}

fn components(path: &[u8]) -> Vec<Vec<u8>> {
    path.split(|&b| b == b'/').map(<[u8]>::to_vec).collect()
}

fn same_file(a: &OwnedFd, b: &OwnedFd) -> bool {
    match (rustix::fs::fstat(a), rustix::fs::fstat(b)) {
        (Ok(x), Ok(y)) => x.st_dev == y.st_dev && x.st_ino == y.st_ino,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_lines_are_read_as_the_kernel_does() {
        let dir = tempfile::tempdir().unwrap();
        let cases: &[(&[u8], Option<&[u8]>)] = &[
            (b"#!/bin/sh\necho", Some(b"/bin/sh")),
            (b"#! /usr/bin/env python3 -u\n", Some(b"/usr/bin/env")),
            (b"#!\t./rel x", Some(b"./rel")),
            (b"#!\n", None),
            (b"\x7fELF", None),
            (b"", None),
        ];
        for (i, (text, want)) in cases.iter().enumerate() {
            let p = dir.path().join(format!("f{i}"));
            std::fs::write(&p, text).unwrap();
            let fd = rustix::fs::open(&p, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
            let f = ExecFile::new(p, fd).unwrap();
            assert_eq!(shebang(&f).as_deref(), *want, "{text:?}");
        }
    }

    #[test]
    fn the_walk_resolves_links_in_the_process_root() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::write(d.join("a/b/prog"), b"x").unwrap();
        std::os::unix::fs::symlink("b/prog", d.join("a/rel")).unwrap();
        std::os::unix::fs::symlink(d.join("a/b/prog"), d.join("abs")).unwrap();
        std::os::unix::fs::symlink("../../a/./b/../b/prog", d.join("a/b/up")).unwrap();
        let view = View {
            pid: std::process::id(),
        };
        let want = std::fs::metadata(d.join("a/b/prog")).unwrap();
        for p in [
            d.join("a/rel"),
            d.join("abs"),
            d.join("a/b/up"),
            d.join("a/../a/b/prog"),
        ] {
            let fd = view
                .open(libc::AT_FDCWD, p.as_os_str().as_encoded_bytes(), false)
                .unwrap();
            let st = rustix::fs::fstat(&fd).unwrap();
            use std::os::unix::fs::MetadataExt;
            assert_eq!((st.st_dev, st.st_ino), (want.dev(), want.ino()), "{p:?}");
        }
        // `/proc/self` means the process, not nib.
        let f = File::open(d.join("a/b/prog")).unwrap();
        let through = format!("/proc/self/fd/{}", f.as_raw_fd());
        let fd = view
            .open(libc::AT_FDCWD, through.as_bytes(), false)
            .unwrap();
        let st = rustix::fs::fstat(&fd).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(st.st_ino, want.ino());
        assert!(view.open(libc::AT_FDCWD, b"/nonexistent/x", false).is_err());
    }
}
