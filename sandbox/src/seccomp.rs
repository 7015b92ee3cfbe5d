//! Layer 2, inner: the seccomp filter. Built once per architecture with
//! seccompiler (the architecture field is checked by the program it emits),
//! installed by the confined process after `PR_SET_NO_NEW_PRIVS` and before it runs the
//! program. Denied with `EPERM`: io_uring, ptrace and process_vm_*, the key
//! ring, mount and friends, unshare/setns, clone with namespace flags, bpf,
//! perf_event_open, module loading, kexec, `ioctl(TIOCSTI)`, `mknod` of a
//! character or block device, and, without
//! network, sockets other than unix ones. `clone3` answers `ENOSYS`, so libc
//! falls back to `clone`, whose flags the filter can see.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The syscalls denied without conditions, by name (for reports and tests).
pub fn denied_syscalls() -> Vec<&'static str> {
    UNCONDITIONAL.iter().map(|(n, _)| *n).collect()
}

const UNCONDITIONAL: &[(&str, i64)] = &[
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
];

const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

fn arch() -> Result<TargetArch, String> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(TargetArch::aarch64)
    } else {
        Err("seccomp filters are built for x86_64 and aarch64 only".into())
    }
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(|e| e.to_string())
}

/// Rules matching a mknod call whose mode (argument `mode_arg`) makes a
/// character or block device.
fn device_node_rules(mode_arg: u8) -> Result<Vec<SeccompRule>, String> {
    [libc::S_IFCHR, libc::S_IFBLK]
        .into_iter()
        .map(|kind| {
            let mode = cond(
                mode_arg,
                SeccompCmpOp::MaskedEq(libc::S_IFMT as u64),
                kind as u64,
            )?;
            SeccompRule::new(vec![mode]).map_err(|e| e.to_string())
        })
        .collect()
}

/// Which sockets programs may open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sockets {
    /// Any (`NIB_SANDBOX_NETWORK=1`).
    All,
    /// Unix sockets, and TCP ones for the proxy (where the other layers hold
    /// TCP to the proxy's port: Landlock's port rule, bubblewrap's empty
    /// network namespace).
    UnixAndTcp,
    /// Unix sockets only.
    Unix,
}

/// The two programs: the `EPERM` list, and `clone3` → `ENOSYS`.
pub fn programs(sockets: Sockets) -> Result<Vec<BpfProgram>, String> {
    let arch = arch()?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (_, nr) in UNCONDITIONAL {
        rules.insert(*nr, Vec::new());
    }
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        clone_rules.push(
            SeccompRule::new(vec![cond(0, SeccompCmpOp::MaskedEq(*flag), *flag)?])
                .map_err(|e| e.to_string())?,
        );
    }
    rules.insert(libc::SYS_clone, clone_rules);
    // No device nodes: mknod of a character or block device (root keeps
    // CAP_MKNOD without bubblewrap); FIFOs and sockets stay possible.
    rules.insert(libc::SYS_mknodat, device_node_rules(2)?);
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, device_node_rules(1)?);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            SeccompRule::new(vec![cond(
                1,
                SeccompCmpOp::MaskedEq(0xffff_ffff),
                // An unsigned long in glibc, an int in musl.
                #[allow(clippy::unnecessary_cast)]
                {
                    libc::TIOCSTI as u64
                },
            )?])
            .map_err(|e| e.to_string())?,
        ],
    );
    let rule = |conds: Vec<SeccompCondition>| SeccompRule::new(conds).map_err(|e| e.to_string());
    match sockets {
        Sockets::All => {}
        Sockets::Unix => {
            rules.insert(
                libc::SYS_socket,
                vec![rule(vec![cond(
                    0,
                    SeccompCmpOp::Ne,
                    libc::AF_UNIX as u64,
                )?])?],
            );
        }
        Sockets::UnixAndTcp => {
            // Refused: any family but Unix, IPv4 and IPv6; and IPv4 or IPv6
            // sockets that are not streams (the type's low bits; the high
            // ones are SOCK_NONBLOCK and SOCK_CLOEXEC).
            let mut refused = vec![rule(vec![
                cond(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?,
                cond(0, SeccompCmpOp::Ne, libc::AF_INET as u64)?,
                cond(0, SeccompCmpOp::Ne, libc::AF_INET6 as u64)?,
            ])?];
            let not_streams = [
                libc::SOCK_DGRAM,
                libc::SOCK_RAW,
                libc::SOCK_RDM,
                libc::SOCK_SEQPACKET,
                libc::SOCK_DCCP,
                // SOCK_PACKET (deprecated in libc, still a type the kernel takes).
                10,
            ];
            for family in [libc::AF_INET, libc::AF_INET6] {
                for t in not_streams {
                    refused.push(rule(vec![
                        cond(0, SeccompCmpOp::Eq, family as u64)?,
                        cond(1, SeccompCmpOp::MaskedEq(0xf), t as u64)?,
                    ])?);
                }
            }
            // And an IPv4 or IPv6 stream of any protocol but TCP: Landlock's
            // port rules hold TCP alone, so a Multipath TCP socket
            // (IPPROTO_MPTCP) would connect past the proxy.
            for family in [libc::AF_INET, libc::AF_INET6] {
                refused.push(rule(vec![
                    cond(0, SeccompCmpOp::Eq, family as u64)?,
                    cond(2, SeccompCmpOp::Ne, 0)?,
                    cond(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
                ])?);
            }
            rules.insert(libc::SYS_socket, refused);
        }
    }
    let deny = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let mut c3 = BTreeMap::new();
    c3.insert(libc::SYS_clone3, Vec::new());
    let clone3 = SeccompFilter::new(
        c3,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    Ok(vec![
        BpfProgram::try_from(deny).map_err(|e| e.to_string())?,
        BpfProgram::try_from(clone3).map_err(|e| e.to_string())?,
    ])
}

/// Installs the filters on the calling thread (after no-new-privs);
/// whether all are in force. No allocation: safe in a forked child.
pub fn install(programs: &[BpfProgram]) -> bool {
    !programs.is_empty()
        && programs
            .iter()
            .all(|p| seccompiler::apply_filter(p).is_ok())
}

/// Whether seccomp filtering is available (the kernel reports a mode).
pub fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .map(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
            .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_build_for_both_network_modes() {
        for sockets in [Sockets::All, Sockets::UnixAndTcp, Sockets::Unix] {
            assert_eq!(programs(sockets).unwrap().len(), 2);
        }
        assert!(denied_syscalls().contains(&"ptrace"));
        assert!(denied_syscalls().contains(&"io_uring_setup"));
    }
}
