//! Layer 2, inner: Landlock, at the best ABI the kernel offers. Only what
//! the read policy names may be read and run (an allow-list: a folder that
//! holds a hidden path is granted as its other entries, `reads.rs`'s
//! `split_around`); only the roots, the private temp folder and a few
//! devices may be written, and no device node made anywhere; TCP bind and
//! connect are denied without network; abstract unix sockets and signals
//! are scoped to the worker (ABI 6+); pathname unix sockets resolve only
//! in the roots and the private temp folder (ABI 9+).
//! The ruleset is created ahead ([`ruleset`]); the process that becomes the
//! program puts it in force on itself ([`restrict_self`], from `launch.rs`).

use std::path::{Path, PathBuf};

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, path_beneath_rules,
};

use crate::Policy;
use crate::reads::{Grant, list_dir, split_around};

/// The newest ABI this crate knows; the kernel's is used when lower.
const BEST: ABI = ABI::V6;

/// The kernel's Landlock ABI (0 when unsupported), checked once.
pub fn abi() -> u32 {
    static ABI_FOUND: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *ABI_FOUND.get_or_init(probe_abi)
}

fn probe_abi() -> u32 {
    for (v, abi) in [
        (9, ABI::V9),
        (8, ABI::V8),
        (7, ABI::V7),
        (6, ABI::V6),
        (5, ABI::V5),
        (4, ABI::V4),
        (3, ABI::V3),
        (2, ABI::V2),
        (1, ABI::V1),
    ] {
        let ok = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.create())
            .is_ok();
        if ok {
            return v;
        }
    }
    0
}

/// The policy's ruleset, created (not yet in force): `None` where the
/// kernel has no Landlock. [`restrict_self`] puts it in force.
pub fn ruleset(policy: &Policy, private_tmp: Option<&PathBuf>) -> Result<Option<OwnedFd>, String> {
    let best = if abi() >= 9 { ABI::V9 } else { BEST };
    let all = AccessFs::from_all(best);
    let read = AccessFs::from_read(best);
    // Writable folders get every right but making device nodes.
    let write = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| e.to_string())?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(BEST))
            .map_err(|e| e.to_string())?;
    }
    ruleset = ruleset
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(|e| e.to_string())?;
    let mut writable: Vec<PathBuf> = policy.writable.clone();
    writable.extend(private_tmp.cloned());
    let devices: Vec<&str> = [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
        "/dev/ptmx",
        "/dev/pts",
        "/dev/shm",
    ]
    .into_iter()
    .filter(|d| Path::new(d).exists())
    .collect();
    let mut created = ruleset.create().map_err(|e| e.to_string())?;
    // Through the proxy only: TCP connections to its port (the bridge's
    // inside bubblewrap), nothing else.
    if let Some(r) = policy.proxy.as_ref().filter(|_| !policy.network) {
        created = created
            .add_rule(NetPort::new(r.port, AccessNet::ConnectTcp))
            .map_err(|e| e.to_string())?;
    }
    for (path, access) in grants(policy, &writable, read, write) {
        // A path that cannot be opened now (gone, or not there inside
        // bubblewrap) is left out rather than failing the whole ruleset.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let Ok(fd) = PathFd::new(&path) else {
            continue;
        };
        let access = if meta.is_dir() {
            access
        } else {
            access & AccessFs::from_file(best)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| e.to_string())?;
    }
    let created = created
        .add_rules(path_beneath_rules(
            devices,
            AccessFs::from_read(best) | AccessFs::WriteFile,
        ))
        .map_err(|e| e.to_string())?;
    Ok(created.into())
}

/// Every path rule but the devices': the read policy's folders (split
/// around hidden paths), `/dev`, `/proc`, the binds, the entry, and the
/// writable folders. `/etc/resolv.conf` is followed where it leads
/// elsewhere (often `/run`), so names still resolve with the network on.
fn grants(
    policy: &Policy,
    writable: &[PathBuf],
    read: BitFlags<AccessFs>,
    write: BitFlags<AccessFs>,
) -> Vec<(PathBuf, BitFlags<AccessFs>)> {
    let hidden = &policy.reads.hidden;
    let mut out = Vec::new();
    let mut readable: Vec<PathBuf> = policy.reads.readable.clone();
    readable.extend(policy.read_only.iter().cloned());
    readable.push(PathBuf::from("/dev"));
    readable.push(PathBuf::from("/proc"));
    if let Ok(target) = std::fs::canonicalize("/etc/resolv.conf")
        && !readable.iter().any(|r| target.starts_with(r))
    {
        readable.push(target);
    }
    for r in &readable {
        for g in split_around(r, hidden, &list_dir) {
            match g {
                Grant::Whole(p) => out.push((p, read)),
                Grant::ListOnly(p) => out.push((p, AccessFs::ReadDir.into())),
            }
        }
    }
    out.extend(writable.iter().map(|w| (w.clone(), write)));
    out
}
/// Adds a rule letting the tree read and run beneath `path` to a created
/// ruleset, from the calling process's own view (the fresh `/proc` a
/// forked child mounted). System calls only: safe in a forked child.
pub fn grant_read_raw(ruleset: BorrowedFd<'_>, path: &std::ffi::CStr) -> bool {
    /// `struct landlock_path_beneath_attr` (packed).
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const EXECUTE: u64 = 1;
    const READ_FILE: u64 = 1 << 2;
    const READ_DIR: u64 = 1 << 3;
    const RULE_PATH_BENEATH: libc::c_int = 1;
    // SAFETY: open with a NUL-terminated path; the fd is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let attr = PathBeneathAttr {
        allowed_access: EXECUTE | READ_FILE | READ_DIR,
        parent_fd: fd,
    };
    // SAFETY: landlock_add_rule reads one attribute struct of the rule type
    // given from a pointer to a live local; then the fd we opened is closed.
    unsafe {
        let ok = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        ) == 0;
        libc::close(fd);
        ok
    }
}

/// Restricts the calling thread (and what it runs) to a created ruleset;
/// no_new_privs must be set. Whether Landlock is in force. A system call
/// only: safe in a forked child.
pub fn restrict_self(ruleset: BorrowedFd<'_>) -> bool {
    // SAFETY: landlock_restrict_self takes a ruleset fd we borrow for the
    // call and flags.
    unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) == 0 }
}
