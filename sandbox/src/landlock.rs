//! Layer 2, inner: Landlock, at the kernel's ABI and fully enforced (every
//! access handled is one the kernel has; never best effort). Only what
//! the read policy names may be read and run (an allow-list: a folder that
//! holds a hidden path is granted as its other entries, `reads.rs`'s
//! `split_all`); only the roots, the private temp folder and a few
//! devices may be written, and no device node made anywhere; TCP bind and
//! connect are denied without network; abstract unix sockets and signals
//! are scoped to the confined process (ABI 6+); pathname unix sockets resolve only
//! in the roots and the private temp folder (ABI 9+).
//! The ruleset is created ahead ([`ruleset`]); the process that becomes the
//! program puts it in force on itself ([`restrict_self`], from `launch.rs`).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use crate::Policy;
use crate::reads::{Grant, is_system_secret, list_dir, split_all};

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
/// kernel has no Landlock. [`restrict_self`] puts it in force. Under
/// bubblewrap (`in_bwrap`) too, readable folders are split around hidden
/// paths: a stand-in covers only a path that existed when the mounts were
/// made, and one the host replaces (a rename over it) falls off; a hidden
/// path made later is granted by no rule.
pub fn ruleset(
    policy: &Policy,
    private_tmp: Option<&PathBuf>,
    in_bwrap: bool,
) -> Result<Option<OwnedFd>, String> {
    let best = best_abi();
    if abi() == 0 {
        return Ok(None);
    }
    // Fully enforced, never best effort: every access handled is one the
    // kernel's ABI has, and asking for one it lacks is an error.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(best))
        .map_err(|e| e.to_string())?;
    if !policy.network && abi() >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(best))
            .map_err(|e| e.to_string())?;
    }
    if abi() >= 6 {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| e.to_string())?;
    }
    let mut created = ruleset.create().map_err(|e| e.to_string())?;
    // Through the proxy only: TCP connections to its port (the bridge's
    // inside bubblewrap), nothing else.
    if let Some(r) = policy
        .proxy
        .as_ref()
        .filter(|_| !policy.network && abi() >= 4)
    {
        created = created
            .add_rule(NetPort::new(r.port, AccessNet::ConnectTcp))
            .map_err(|e| e.to_string())?;
    }
    let key = GrantKey::of(policy, in_bwrap);
    let opened = match cached(&key) {
        Some(o) => o,
        None => {
            let o = Arc::new(OpenedGrants::open(&key, best));
            keep(key, o.clone());
            o
        }
    };
    for (fd, access) in &opened.rules {
        created = created
            .add_rule(PathBeneath::new(fd.as_fd(), *access))
            .map_err(|e| e.to_string())?;
    }
    // The start's own temporary folder, opened for this start only.
    if let Some(tmp) = private_tmp
        && let Ok(fd) = PathFd::new(tmp)
    {
        created = created
            .add_rule(PathBeneath::new(fd, writable_access(best)))
            .map_err(|e| e.to_string())?;
    }
    Ok(created.into())
}

/// The kernel's ABI, up to the newest this crate knows (ABI 9).
fn best_abi() -> ABI {
    ABI::from(i32::try_from(abi().min(9)).unwrap_or(0))
}

/// A ruleset that handles every file access of the kernel's ABI and
/// grants nothing, created (fully enforced or an error): for the trial of
/// Landlock in `layers.rs`.
pub fn empty_ruleset() -> Result<OwnedFd, String> {
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(best_abi()))
        .and_then(|r| r.create())
        .map_err(|e| e.to_string())?;
    Option::<OwnedFd>::from(created).ok_or_else(|| "no ruleset was made".to_string())
}

/// Writable folders get every right but making device nodes.
fn writable_access(best: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_all(best) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// The devices programs may read and write.
const DEVICES: [&str; 9] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// What a policy's path rules are made from: the folders granted for
/// reading (the read policy's, `/dev`, `/proc`, the binds, the entry,
/// `/etc/resolv.conf`'s target where it leads elsewhere, often `/run`, so
/// names still resolve with the network on), the hidden paths they are
/// split around, and the writable folders.
#[derive(Clone, PartialEq, Eq)]
struct GrantKey {
    readable: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    writable: Vec<PathBuf>,
}

impl GrantKey {
    fn of(policy: &Policy, in_bwrap: bool) -> GrantKey {
        let mut readable: Vec<PathBuf> = policy.reads.readable.clone();
        readable.extend(policy.read_only.iter().cloned());
        readable.push(PathBuf::from("/dev"));
        readable.push(PathBuf::from("/proc"));
        if let Ok(target) = std::fs::canonicalize("/etc/resolv.conf")
            && !readable.iter().any(|r| target.starts_with(r))
        {
            readable.push(target);
        }
        // Under bubblewrap a brokered file's placeholder is bound over the
        // hidden file: that stand-in is for reading. The system's secrets
        // in `/etc` are left to their stand-ins (SECURITY.md).
        let mut hidden = policy.reads.hidden.clone();
        if in_bwrap {
            hidden.retain(|h| {
                !is_system_secret(h) && !policy.stand_in_files.iter().any(|(f, _)| f == h)
            });
        }
        GrantKey {
            readable,
            hidden,
            writable: policy.writable.clone(),
        }
    }
}

/// A path's identity, and for a folder that was listed its modification
/// time too (an entry added, removed or replaced changes it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: Option<(i64, i64)>,
}

fn stamp(path: &Path, listed: bool) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        mtime: listed.then(|| (m.mtime(), m.mtime_nsec())),
    })
}

/// A policy's path rules, opened once and kept between starts: listing the
/// folders split around hidden paths and opening every granted entry (an
/// `/etc` of 150 entries) was most of a start's cost. They are used while
/// every path they were made from is the same file and every listed
/// folder has the same modification time.
struct OpenedGrants {
    rules: Vec<(OwnedFd, BitFlags<AccessFs>)>,
    stamps: Vec<(PathBuf, bool, Option<Stamp>)>,
}

impl OpenedGrants {
    fn open(key: &GrantKey, best: ABI) -> OpenedGrants {
        let read = AccessFs::from_read(best);
        let file_only = AccessFs::from_file(best);
        let listed = std::cell::RefCell::new(Vec::new());
        let list = |dir: &Path| {
            listed.borrow_mut().push(dir.to_path_buf());
            list_dir(dir)
        };
        let mut wanted: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
        for g in split_all(&key.readable, &key.hidden, &list) {
            match g {
                Grant::Whole(p) => wanted.push((p, read)),
                Grant::ListOnly(p) => wanted.push((p, AccessFs::ReadDir.into())),
            }
        }
        let write = writable_access(best);
        wanted.extend(key.writable.iter().map(|w| (w.clone(), write)));
        wanted.extend(
            DEVICES
                .iter()
                .map(|d| (PathBuf::from(d), read | AccessFs::WriteFile)),
        );
        // Stamps first: a change while the rules are opened shows at the
        // next start.
        let mut stamps: Vec<(PathBuf, bool, Option<Stamp>)> = Vec::new();
        for p in key.readable.iter().chain(&key.writable) {
            stamps.push((p.clone(), false, stamp(p, false)));
        }
        for d in listed.borrow().iter() {
            stamps.push((d.clone(), true, stamp(d, true)));
        }
        let mut rules = Vec::new();
        for (path, access) in wanted {
            // A path that cannot be opened now (gone, or not there inside
            // bubblewrap) is left out rather than failing the whole ruleset.
            let Some((fd, is_dir)) = open_path(&path) else {
                continue;
            };
            let access = if is_dir { access } else { access & file_only };
            rules.push((fd, access));
        }
        OpenedGrants { rules, stamps }
    }

    /// Whether every path the rules were made from is as it was.
    fn still_true(&self) -> bool {
        self.stamps
            .iter()
            .all(|(p, listed, s)| stamp(p, *listed) == *s)
    }
}

/// `path` opened with `O_PATH` (following links), and whether it is a folder.
fn open_path(path: &Path) -> Option<(OwnedFd, bool)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
        .ok()?;
    let is_dir = file.metadata().ok()?.is_dir();
    Some((file.into(), is_dir))
}

/// The opened grants kept, at most a quarter of the fd limit's worth (the
/// proxy and the programs' pipes need the rest).
static KEPT: Mutex<Vec<(GrantKey, Arc<OpenedGrants>)>> = Mutex::new(Vec::new());

fn cached(key: &GrantKey) -> Option<Arc<OpenedGrants>> {
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let at = kept.iter().position(|(k, _)| k == key)?;
    if kept[at].1.still_true() {
        return Some(kept[at].1.clone());
    }
    kept.remove(at);
    None
}

fn keep(key: GrantKey, opened: Arc<OpenedGrants>) {
    let budget = crate::limits::open_files_quarter();
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    kept.retain(|(k, _)| *k != key);
    kept.insert(0, (key, opened));
    // The most recently made first; the oldest go when over the budget.
    let mut used = 0;
    kept.retain(|(_, o)| {
        used += o.rules.len();
        used <= budget
    });
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
