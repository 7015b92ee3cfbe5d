//! The exec-time layer, confined side: a seccomp filter that hands every
//! `execve`/`execveat` of the confined process's tree to a supervisor outside it
//! (`SECCOMP_RET_USER_NOTIF`), installed in every mode while the policy asks
//! for it ([`crate::Policy::supervise_exec`]).
//!
//! The confined process installs the filter just before it runs its program, sends the
//! listener fd to the broker over the supervisor socket (fd
//! [`SUPERVISOR_FD`]) and closes both, so no program ever holds either. From
//! then on the kernel stops each exec of the tree until the broker's
//! supervisor ([`crate::exec_guard`]) answers. seccompiler has no
//! user-notification action, so the few BPF instructions are assembled here.
//! Deciding what may run is the supervisor's business, not this file's.

use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// The fd the confined process receives the supervisor socket on (the channel, if
/// any, is fd 3).
pub const SUPERVISOR_FD: RawFd = 4;

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
/// x32 system calls carry this bit on x86_64.
const X32_BIT: u32 = 0x4000_0000;
/// i386's multiplexed socket call (`connect` is its call 3).
pub(crate) const SOCKETCALL_I386: u32 = 102;

/// One architecture a process of this machine can make system calls in,
/// with its exec system call numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExecCalls {
    /// The `AUDIT_ARCH_*` value seccomp reports.
    pub arch: u32,
    /// `execve` numbers (x86_64 also has an x32 one).
    pub execve: &'static [u32],
    /// `execveat` numbers.
    pub execveat: &'static [u32],
    /// `connect` numbers (sent to the supervisor when pathname unix
    /// sockets are checked there), `socketcall` on i386 included.
    pub connect: &'static [u32],
    /// Pointers are 4 bytes wide (a compat architecture).
    pub narrow: bool,
}

/// The architectures whose execs the filter sends to the supervisor: the
/// native one first, then its compat one.
pub(crate) fn exec_calls() -> &'static [ExecCalls] {
    if cfg!(target_arch = "x86_64") {
        &[
            ExecCalls {
                arch: AUDIT_ARCH_X86_64,
                execve: &[59, X32_BIT | 520],
                execveat: &[322, X32_BIT | 545],
                connect: &[42, X32_BIT | 42],
                narrow: false,
            },
            ExecCalls {
                arch: AUDIT_ARCH_I386,
                execve: &[11],
                execveat: &[358],
                connect: &[362, SOCKETCALL_I386],
                narrow: true,
            },
        ]
    } else if cfg!(target_arch = "aarch64") {
        &[
            ExecCalls {
                arch: AUDIT_ARCH_AARCH64,
                execve: &[221],
                execveat: &[281],
                connect: &[203],
                narrow: false,
            },
            ExecCalls {
                arch: AUDIT_ARCH_ARM,
                execve: &[11],
                execveat: &[387],
                connect: &[283],
                narrow: true,
            },
        ]
    } else {
        &[]
    }
}

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// Offsets in `struct seccomp_data`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

/// Where a jump goes, resolved once the program is laid out.
#[derive(Clone, Copy)]
enum Target {
    Next,
    Notify,
    Allow,
    Kill,
    /// The first instruction of the block for architecture `i`.
    Arch(usize),
}

/// The filter: for each known architecture, its exec numbers (with
/// `execs`) and its connect numbers (with `connects`) → notify, anything
/// else → allow; an architecture this machine should not have → kill
/// (fail closed).
pub(crate) fn notify_program(
    execs: bool,
    connects: bool,
) -> Result<Vec<libc::sock_filter>, String> {
    let calls = exec_calls();
    if calls.is_empty() {
        return Err("exec rules are enforced on x86_64 and aarch64 only".into());
    }
    // Lay out symbolic instructions first: (code, k, jump if true, jump if
    // false). Each architecture's block loads the architecture itself.
    let mut laid: Vec<(u16, u32, Target, Target)> = Vec::new();
    let mut arch_at = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        arch_at.push(laid.len());
        let otherwise = if i + 1 < calls.len() {
            Target::Arch(i + 1)
        } else {
            Target::Kill
        };
        laid.push((BPF_LD_W_ABS, ARCH_OFFSET, Target::Next, Target::Next));
        laid.push((BPF_JEQ_K, c.arch, Target::Next, otherwise));
        laid.push((BPF_LD_W_ABS, NR_OFFSET, Target::Next, Target::Next));
        let mut numbers: Vec<u32> = Vec::new();
        if execs {
            numbers.extend(c.execve.iter().chain(c.execveat));
        }
        if connects {
            numbers.extend(c.connect);
        }
        for (j, nr) in numbers.iter().enumerate() {
            let miss = if j + 1 < numbers.len() {
                Target::Next
            } else {
                Target::Allow
            };
            laid.push((BPF_JEQ_K, *nr, Target::Notify, miss));
        }
    }
    let allow = laid.len();
    let notify = allow + 1;
    let kill = allow + 2;
    let resolve = |pc: usize, t: Target| -> Result<u8, String> {
        let dest = match t {
            Target::Next => pc + 1,
            Target::Notify => notify,
            Target::Allow => allow,
            Target::Kill => kill,
            Target::Arch(i) => arch_at[i],
        };
        u8::try_from(dest - pc - 1).map_err(|_| "exec filter jump too long".to_string())
    };
    let mut out = Vec::with_capacity(laid.len() + 3);
    for (pc, (code, k, jt, jf)) in laid.iter().enumerate() {
        let (jt, jf) = if *code == BPF_JEQ_K {
            (resolve(pc, *jt)?, resolve(pc, *jf)?)
        } else {
            (0, 0)
        };
        out.push(libc::sock_filter {
            code: *code,
            jt,
            jf,
            k: *k,
        });
    }
    for k in [
        libc::SECCOMP_RET_ALLOW,
        libc::SECCOMP_RET_USER_NOTIF,
        libc::SECCOMP_RET_KILL_PROCESS,
    ] {
        out.push(libc::sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k,
        });
    }
    Ok(out)
}

/// Installs the filter on the calling (single-threaded) process and returns
/// the listener, or the error number (`ENOSYS`-like errors mean the kernel
/// lacks user notification: Linux 5.5 or later). no_new_privs must already
/// be set. System calls only: safe in a forked child.
pub(crate) fn install(program: &[libc::sock_filter]) -> Result<OwnedFd, i32> {
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len()).map_err(|_| libc::E2BIG)?,
        // The kernel only reads the program (seccomp copies it in).
        filter: program.as_ptr().cast_mut(),
    };
    let mut flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
        // A non-fatal signal does not restart an exec the supervisor is deciding.
        | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    loop {
        // SAFETY: seccomp(2) with SECCOMP_SET_MODE_FILTER reads `prog`, which
        // points at `program` (alive for the call) with its exact length.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &prog as *const libc::sock_fprog,
            )
        };
        if fd >= 0 {
            let fd = RawFd::try_from(fd).map_err(|_| libc::EBADF)?;
            // SAFETY: the kernel just returned this fd to us; nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let err = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        // Kernels before 5.19 lack WAIT_KILLABLE_RECV: go on without it.
        if err == libc::EINVAL && flags & libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0 {
            flags &= !libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
            continue;
        }
        return Err(err);
    }
}

/// Sends `fd` over `socket` (the listener to the supervisor). No allocation.
pub(crate) fn send_fd(socket: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let fds = [fd];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("no room for the fd"));
    }
    sendmsg(
        socket,
        &[std::io::IoSlice::new(b"L")],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Receives the listener the confined process sent (broker side); `None` when the
/// confined process ended without sending one.
pub(crate) fn recv_fd(socket: BorrowedFd<'_>) -> std::io::Result<Option<OwnedFd>> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let got = loop {
        match recvmsg(
            socket,
            &mut [std::io::IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(m) => break m,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    if got.bytes == 0 {
        return Ok(None);
    }
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = msg
            && let Some(fd) = fds.next()
        {
            return Ok(Some(fd));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the filter over one system call, as the kernel would.
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32) -> u32 {
        let mut a = 0u32;
        let mut pc = 0usize;
        loop {
            let ins = program[pc];
            match ins.code {
                BPF_LD_W_ABS => {
                    a = if ins.k == ARCH_OFFSET { arch } else { nr };
                    pc += 1;
                }
                BPF_JEQ_K => {
                    pc += 1 + usize::from(if a == ins.k { ins.jt } else { ins.jf });
                }
                BPF_RET_K => return ins.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    #[test]
    fn execs_are_sent_to_the_supervisor_and_nothing_else_is() {
        let p = notify_program(true, false).unwrap();
        let c = notify_program(false, true).unwrap();
        for arch in exec_calls() {
            for nr in arch.connect {
                assert_eq!(run(&c, arch.arch, *nr), libc::SECCOMP_RET_USER_NOTIF);
                assert_eq!(run(&p, arch.arch, *nr), libc::SECCOMP_RET_ALLOW);
            }
            for nr in arch.execve {
                assert_eq!(run(&c, arch.arch, *nr), libc::SECCOMP_RET_ALLOW);
            }
        }
        for c in exec_calls() {
            for nr in c.execve.iter().chain(c.execveat) {
                assert_eq!(run(&p, c.arch, *nr), libc::SECCOMP_RET_USER_NOTIF);
            }
            for nr in [0, 1, 2, 3, 56, 57, 58, 60, 321, 323, 435] {
                if !c.execve.contains(&nr) && !c.execveat.contains(&nr) {
                    assert_eq!(run(&p, c.arch, nr), libc::SECCOMP_RET_ALLOW, "{nr}");
                }
            }
        }
        assert_eq!(run(&p, 0x1234, 59), libc::SECCOMP_RET_KILL_PROCESS);
    }
}
