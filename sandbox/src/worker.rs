//! The worker side: what runs in the spawned process before the program.
//!
//! `ENTRY __nib-worker POLICY_JSON PRIVATE_TMP -- PROGRAM ARGS…`: outside
//! bubblewrap, make a PID namespace and fork (the parent waits and passes the
//! exit status on), and fork again (PID 1 reaps, the program is PID 2); then,
//! in the process that will become the program, die
//! with the parent, set the rlimits, and when the policy confines: no new
//! privileges, Landlock, seccomp; when execs are supervised (in every mode),
//! the exec filter last. A confining policy with no confining layer
//! in force (no bubblewrap, no Landlock, no seccomp) refuses to run anything.

use std::ffi::{CString, OsString};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::{Policy, bridge, bwrap, exec_filter, landlock, lifetime, limits, seccomp};

/// The argument that marks a worker entry.
pub const WORKER_ARG: &str = "__nib-worker";

/// Exit status when the worker cannot confine or start the program.
const REFUSED: i32 = 125;

fn die(msg: &str, code: i32) -> ! {
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("nib sandbox: {msg}\n").as_bytes(),
    );
    std::process::exit(code)
}

/// Forks; the parent waits for the child (reaping every other child it
/// gets meanwhile when `reap_all`, as a PID 1 must) and exits with the
/// child's status. Returns in the child.
fn fork_and_pass_on_status(reap_all: bool) {
    // SAFETY: the worker is single-threaded here (nothing has spawned a
    // thread), so the child may run arbitrary code after fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        die("fork failed", REFUSED);
    }
    if pid == 0 {
        return;
    }
    let mut status = 0;
    loop {
        let mut s = 0;
        // SAFETY: waitpid with a valid pointer to a local.
        let r = unsafe { libc::waitpid(if reap_all { -1 } else { pid }, &mut s, 0) };
        if r == pid {
            status = s;
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    if libc::WIFEXITED(status) {
        std::process::exit(libc::WEXITSTATUS(status));
    }
    std::process::exit(128 + libc::WTERMSIG(status));
}

/// The file name of the small worker entry installed beside the main binary.
pub const WORKER_BINARY: &str = "nib-worker";

/// The worker entry to use for a main binary at `exe`: the small
/// [`WORKER_BINARY`] beside it when that is an executable file (it starts
/// faster: fewer pages to map, relocate and copy on fork), else `exe`
/// itself, whose `main` must then call [`worker_main`] for [`WORKER_ARG`].
pub fn entry_beside(exe: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let small = exe.with_file_name(WORKER_BINARY);
    match std::fs::metadata(&small) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => small,
        _ => exe.to_path_buf(),
    }
}

/// Runs the worker entry; `args` are the arguments after [`WORKER_ARG`].
pub fn worker_main(args: &[OsString]) -> ! {
    let (Some(policy_json), Some(tmp), Some(sep)) = (args.first(), args.get(1), args.get(2)) else {
        die("worker entry without policy", REFUSED);
    };
    if sep != "--" || args.len() < 4 {
        die("worker entry without a program", REFUSED);
    }
    let policy: Policy = match serde_json::from_slice(policy_json.as_bytes()) {
        Ok(p) => p,
        Err(e) => die(&format!("bad policy: {e}"), REFUSED),
    };
    let in_bwrap_early = std::env::var_os(bwrap::IN_BWRAP).is_some();
    // Inside bubblewrap, /tmp is its private tmpfs: the worker's temp folder,
    // writable under Landlock too. Outside, the broker made a private folder.
    let private_tmp = if tmp.is_empty() && in_bwrap_early {
        Some(PathBuf::from("/tmp"))
    } else {
        (!tmp.is_empty()).then(|| PathBuf::from(tmp))
    };
    let program = &args[3..];
    let in_bwrap = in_bwrap_early;

    // Programs built for the sandbox must not build the filter after fork:
    // do it now, while allocation is still allowed.
    // The proxy: programs get TCP only where it is held to the proxy's
    // port (bubblewrap's empty network namespace, or Landlock's port rule
    // from ABI 4); without either they get no network at all.
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
    let filters = if policy.confine {
        seccomp::programs(sockets).ok()
    } else {
        None
    };
    if in_bwrap
        && let Some(route) = proxy
        && let Err(e) = bridge::start(route)
    {
        die(&e, REFUSED);
    }

    if !in_bwrap {
        // SAFETY: unshare takes only flags; it affects our future children.
        // Where it is not permitted, the worker goes on without a namespace
        // (the pids cgroup and the parent-death signal still bound the tree).
        if unsafe { libc::unshare(libc::CLONE_NEWPID) } == 0 {
            // The first child is PID 1 of the namespace: when it ends, the
            // kernel ends everything left in it. We wait for it here.
            fork_and_pass_on_status(false);
            // PID 1 only reaps, like bubblewrap's: the program runs as PID 2,
            // so it is an ordinary process (`$$` can be signalled) and orphans
            // are reaped.
            lifetime::die_with_parent();
            fork_and_pass_on_status(true);
        }
    }
    lifetime::die_with_parent();
    if let Err(e) = limits::apply_rlimits(&policy.limits) {
        die(&format!("resource limits: {e}"), REFUSED);
    }
    if let Some(t) = &private_tmp {
        // SAFETY: setting the environment before exec in a single-threaded process.
        unsafe {
            std::env::set_var("TMPDIR", t);
        }
    }
    if policy.confine {
        if let Err(e) = lifetime::no_new_privs() {
            die(&format!("no_new_privs: {e}"), REFUSED);
        }
        let landlock_on = landlock::apply(&policy, private_tmp.as_ref()).unwrap_or(false);
        let seccomp_on = match &filters {
            Some(f) => seccomp::install(f).is_ok(),
            None => false,
        };
        if !in_bwrap && !landlock_on && !seccomp_on {
            die(
                "NIB_SANDBOX=1 but no confining layer could be applied (no usable bubblewrap, no Landlock, no seccomp); refusing to run the program",
                REFUSED,
            );
        }
    }
    if policy.supervise_exec {
        // The exec-time layer: in every mode, and last, so the filter sees
        // the program's own exec too. It needs no_new_privs.
        if !policy.confine
            && let Err(e) = lifetime::no_new_privs()
        {
            die(&format!("no_new_privs: {e}"), REFUSED);
        }
        // SAFETY: the broker put the supervisor socket at SUPERVISOR_FD for
        // this process and nothing else here owns that fd.
        let socket = unsafe { OwnedFd::from_raw_fd(exec_filter::SUPERVISOR_FD) };
        if let Err(e) = exec_filter::install_and_hand_over(socket) {
            die(
                &format!(
                    "program rules are in force, but nib cannot check programs as they start: {e}; refusing to run anything"
                ),
                REFUSED,
            );
        }
    }
    let cargs: Vec<CString> = program
        .iter()
        .filter_map(|a| CString::new(a.as_bytes()).ok())
        .collect();
    if cargs.len() != program.len() {
        die("an argument holds a NUL byte", REFUSED);
    }
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: execvp with a NUL-terminated program name and a NULL-terminated
    // array of pointers to NUL-terminated strings that outlive the call.
    unsafe {
        libc::execvp(ptrs[0], ptrs.as_ptr());
    }
    die(
        &format!(
            "cannot run {}: {}",
            program[0].to_string_lossy(),
            std::io::Error::last_os_error()
        ),
        127,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_small_entry_is_used_only_when_it_is_an_executable_file_beside_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("nib");
        std::fs::write(&exe, b"").unwrap();
        // Missing: nib itself.
        assert_eq!(entry_beside(&exe), exe);
        // Present but not executable: nib itself.
        let small = dir.path().join(WORKER_BINARY);
        std::fs::write(&small, b"").unwrap();
        std::fs::set_permissions(&small, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(entry_beside(&exe), exe);
        // Executable: the small entry.
        std::fs::set_permissions(&small, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(entry_beside(&exe), small);
        // A folder of that name is not an entry.
        std::fs::remove_file(&small).unwrap();
        std::fs::create_dir(&small).unwrap();
        assert_eq!(entry_beside(&exe), exe);
    }
}
