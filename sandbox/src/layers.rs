//! Which confining layers hold here, found by trying each once on nib's own
//! terms, and the mode a confining policy runs in (fail closed).
//!
//! Each layer is tried with a fixed configuration that owes nothing to the
//! project's files: bubblewrap with the flags a confined process uses (`--proc`
//! included; `bwrap.rs` finds and starts it), Landlock put in force on a
//! forked child at the kernel's ABI and checked to refuse a read it does
//! not grant, a seccomp filter installed on a forked child, and seccomp user
//! notification (a listener asked for) on another. The order a confining
//! policy takes them in, first that holds:
//!
//! First, bubblewrap + Landlock (where the kernel has it) + seccomp.
//! Second, Landlock (ABI [`MIN_LANDLOCK_ABI`] or later) + seccomp, when
//! bubblewrap is off or cannot start here (a container that refuses user
//! namespaces or a new `/proc`); why is said once.
//! Third, nothing: programs are refused, with what is missing and what
//! would fix it. A start that fails later, once a layer was found to hold,
//! is an error of that start, never a step down to fewer layers.
//!
//! What the layers themselves hold is `bwrap.rs`, `landlock.rs` and
//! `seccomp.rs`; `launch.rs` checks at each start that those asked for are
//! in force.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::{bwrap, exec_filter, landlock, lifetime, seccomp};

/// The oldest Landlock ABI nib confines programs with when bubblewrap is
/// not there: ABI 3 is the first that handles truncation, before it a
/// program could empty any file of the user's by its path.
pub const MIN_LANDLOCK_ABI: u32 = 3;

/// Why bubblewrap is not used when the user turned it off.
const BWRAP_OFF: &str = "NIB_SANDBOX_BWRAP=0";

/// What was tried, and what held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trial {
    /// The Landlock ABI put in force and verified, or why none.
    pub landlock: Result<u32, String>,
    /// Whether a seccomp filter could be installed, or why not.
    pub seccomp: Result<(), String>,
    /// Whether seccomp user notification (the exec-time rules) works, or
    /// why not.
    pub exec_notify: Result<(), String>,
}

/// The layers tried once per process.
pub fn trial() -> &'static Trial {
    static TRIED: OnceLock<Trial> = OnceLock::new();
    TRIED.get_or_init(|| Trial {
        landlock: try_landlock(),
        seccomp: try_seccomp(),
        exec_notify: try_exec_notify(),
    })
}

/// The layers a confining policy runs under here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// bubblewrap (the trusted binary at this path), with seccomp and with
    /// Landlock where the kernel has it (`landlock` is its ABI, 0: none).
    Bubblewrap {
        /// The bubblewrap binary.
        bwrap: PathBuf,
        /// The Landlock ABI in force inside it (0: none).
        landlock: u32,
    },
    /// Landlock + seccomp, without bubblewrap; `why` says why bubblewrap
    /// is not among the layers.
    Landlock {
        /// The Landlock ABI.
        abi: u32,
        /// Why bubblewrap is not used.
        why: String,
    },
}

impl Mode {
    /// The layers in force, in a few words.
    pub fn describe(&self) -> String {
        match self {
            Mode::Bubblewrap { landlock: 0, .. } => {
                "bubblewrap + seccomp (no Landlock in this kernel)".into()
            }
            Mode::Bubblewrap { landlock, .. } => {
                format!("bubblewrap + Landlock ABI {landlock} + seccomp")
            }
            Mode::Landlock { abi, why } => {
                let why = if why == BWRAP_OFF {
                    format!("bubblewrap off: {why}")
                } else {
                    "bubblewrap cannot start here".to_string()
                };
                // Before ABI 6 nothing scopes them without bubblewrap's
                // namespaces: say so rather than claim it.
                let unheld = if *abi < 6 {
                    "; abstract unix sockets and signals outside the tree are not held (Landlock ABI 6 scopes them)"
                } else {
                    ""
                };
                format!("Landlock ABI {abi} + seccomp ({why}){unheld}")
            }
        }
    }
}

/// The options a choice depends on.
#[derive(Clone, Copy, Debug)]
pub struct Wanted<'a> {
    /// Whether bubblewrap may be used (NIB_SANDBOX_BWRAP is not 0).
    pub use_bwrap: bool,
    /// The roots: a bubblewrap inside one (or inside any root this process
    /// made a sandbox for, or its current folder) is never run.
    pub roots: &'a [PathBuf],
}

/// The mode a confining policy runs in here, or why programs are refused
/// (what is missing, and what would fix it).
pub fn choose(wanted: Wanted<'_>) -> Result<Mode, String> {
    let tried = trial();
    let seccomp_ok = tried.seccomp.is_ok();
    let bwrap = if wanted.use_bwrap {
        // Every root this process knows too: another session's programs
        // write there.
        let mut roots = bwrap::known_roots();
        roots.extend(wanted.roots.iter().cloned());
        bwrap::trusted_usable(&roots)
    } else {
        Err(BWRAP_OFF.to_string())
    };
    let landlock = tried.landlock.clone();
    if let (Ok(path), true) = (&bwrap, seccomp_ok) {
        return Ok(Mode::Bubblewrap {
            bwrap: path.clone(),
            landlock: landlock.as_ref().map_or(0, |a| *a),
        });
    }
    // Pathname unix sockets outside the roots (a docker socket, an ssh
    // agent) are held by Landlock from ABI 9, before it by the connect
    // supervisor, which needs seccomp user notification.
    let sockets_held = landlock.as_ref().is_ok_and(|a| *a >= 9) || tried.exec_notify.is_ok();
    match (&landlock, seccomp_ok) {
        (Ok(abi), true) if *abi >= MIN_LANDLOCK_ABI && sockets_held => {
            return Ok(Mode::Landlock {
                abi: *abi,
                why: bwrap.err().unwrap_or_default(),
            });
        }
        _ => {}
    }
    Err(refusal_text(
        &bwrap,
        &landlock,
        &tried.seccomp,
        (!sockets_held).then_some(&tried.exec_notify),
    ))
}

fn refusal_text(
    bwrap: &Result<PathBuf, String>,
    landlock: &Result<u32, String>,
    seccomp: &Result<(), String>,
    sockets: Option<&Result<(), String>>,
) -> String {
    let mut missing = Vec::new();
    match bwrap {
        Err(e) if e == BWRAP_OFF => missing.push(format!("bubblewrap is off ({e})")),
        Err(e) => missing.push(format!("bubblewrap cannot start here ({e})")),
        Ok(_) => {}
    }
    match landlock {
        Err(e) => missing.push(format!("Landlock is not available ({e})")),
        Ok(abi) if *abi < MIN_LANDLOCK_ABI => missing.push(format!(
            "Landlock ABI {abi} is older than {MIN_LANDLOCK_ABI}, the first that holds writes (truncation) to the roots"
        )),
        Ok(_) => {}
    }
    if let Err(e) = seccomp {
        missing.push(format!("seccomp filters cannot be installed ({e})"));
    }
    if let (Ok(abi), Some(Err(e))) = (landlock, sockets)
        && *abi >= MIN_LANDLOCK_ABI
    {
        missing.push(format!(
            "without bubblewrap, Landlock ABI {abi} (before 9) cannot keep programs from unix sockets outside the roots, and the connect check that would needs seccomp user notification ({e})"
        ));
    }
    format!(
        "NIB_SANDBOX=1, but no confined mode holds here: {}. Programs (and nib's own commands in nibash) are refused. \
         To fix: allow user namespaces and a new /proc for bubblewrap (with NIB_SANDBOX_BWRAP unset), \
         or run on a kernel with Landlock ABI {MIN_LANDLOCK_ABI} or later (Linux 6.2+, with landlock in its lsm= list), \
         with seccomp available; or run without NIB_SANDBOX if programs may act as you",
        missing.join("; ")
    )
}

/// Why nib.json's program rules cannot be enforced here, if they cannot:
/// the exec-time layer needs seccomp user notification.
pub fn exec_rules_refusal() -> Option<String> {
    trial().exec_notify.as_ref().err().map(|e| {
        format!(
            "nib.json has program rules, but this kernel refuses seccomp user notification ({e}), \
             which nib needs to check each program as it starts: programs are refused while such rules exist. \
             To fix: run on a kernel or runtime that allows SECCOMP_FILTER_FLAG_NEW_LISTENER (Linux 5.5+, not gVisor), \
             or remove the program rules from nib.json"
        )
    })
}

/// Runs `step` in a forked child, which ends with its result: whether the
/// child's `step` returned 0, else the error number it returned. The child
/// makes system calls only.
fn in_child(step: impl FnOnce() -> i32) -> Result<(), i32> {
    // SAFETY: fork; the child runs `step` (system calls only, no
    // allocation) and ends with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    if pid == 0 {
        let code = step();
        // SAFETY: _exit ends the forked child without running anything of
        // the parent's.
        unsafe { libc::_exit(code.clamp(0, 255)) }
    }
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child with a pointer to a local.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(libc::ECHILD);
        }
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, e) => Err(e),
        _ => Err(libc::EINTR),
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn text(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

/// Landlock at the kernel's ABI, every file access handled, put in force
/// on a child, which then must fail to open `/` (nothing granted).
fn try_landlock() -> Result<u32, String> {
    let abi = landlock::abi();
    if abi == 0 {
        return Err("the kernel answers no Landlock ABI".into());
    }
    let ruleset = landlock::empty_ruleset()
        .map_err(|e| format!("a ruleset at ABI {abi} cannot be made: {e}"))?;
    let fd = std::os::fd::AsFd::as_fd(&ruleset);
    in_child(|| {
        if let Err(e) = lifetime::no_new_privs() {
            return e;
        }
        if !landlock::restrict_self(fd) {
            return errno();
        }
        // SAFETY: open with a static NUL-terminated path.
        let opened = unsafe { libc::open(c"/".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
        if opened >= 0 {
            // Not enforced: a read it does not grant went through.
            return libc::ENOTRECOVERABLE;
        }
        0
    })
    .map_err(|e| format!("Landlock ABI {abi} could not be put in force: {}", text(e)))?;
    Ok(abi)
}

/// A seccomp filter nib builds, installed on a child.
fn try_seccomp() -> Result<(), String> {
    if !seccomp::available() {
        return Err("the kernel reports no seccomp".into());
    }
    let programs = seccomp::programs(seccomp::Sockets::Unix)?;
    in_child(|| {
        if let Err(e) = lifetime::no_new_privs() {
            return e;
        }
        if seccomp::install(&programs) {
            0
        } else {
            libc::EPERM
        }
    })
    .map_err(|e| format!("installing it failed: {}", text(e)))
}

/// A user-notification filter (asks for a listener), installed on a child.
fn try_exec_notify() -> Result<(), String> {
    let program = exec_filter::notify_program(true, false)?;
    in_child(|| {
        if let Err(e) = lifetime::no_new_privs() {
            return e;
        }
        match exec_filter::install(&program) {
            Ok(_) => 0,
            Err(e) => e,
        }
    })
    .map_err(|e| format!("SECCOMP_FILTER_FLAG_NEW_LISTENER: {}", text(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_each_missing_layer_and_the_fix() {
        let t = refusal_text(
            &Err("bwrap: Can't mount proc on /newroot/proc: Operation not permitted".into()),
            &Err("the kernel answers no Landlock ABI".into()),
            &Ok(()),
            None,
        );
        assert!(t.contains("Can't mount proc"), "{t}");
        assert!(t.contains("Landlock is not available"), "{t}");
        assert!(t.contains("are refused"), "{t}");
        assert!(t.contains("To fix"), "{t}");
        let old = refusal_text(&Err("x".into()), &Ok(2), &Ok(()), None);
        assert!(old.contains("Landlock ABI 2 is older than 3"), "{old}");
        let sockets = refusal_text(
            &Err("x".into()),
            &Ok(8),
            &Ok(()),
            Some(&Err("EINVAL".into())),
        );
        assert!(
            sockets.contains("unix sockets outside the roots"),
            "{sockets}"
        );
    }
}
