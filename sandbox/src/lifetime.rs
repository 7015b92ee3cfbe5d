//! Layer 1: the worker's process tree ends with its call and with the broker.
//!
//! Outside bubblewrap the worker makes its own PID namespace: it unshares
//! CLONE_NEWPID and forks; the child (PID 1 there) only reaps, and forks
//! again to run the program as PID 2 (an ordinary process: `kill $$` works);
//! the kernel kills everything left in the namespace when PID 1 ends — setsid'd
//! and double-forked descendants included. Each hop dies with its parent
//! (PR_SET_PDEATHSIG), and the broker spawns from one long-lived thread so
//! "parent" means the broker. Inside bubblewrap, `--unshare-pid` and
//! `--die-with-parent` do the same. Other layers live in their own files.

use std::sync::OnceLock;

/// Whether this process may make a PID namespace (root, or CAP_SYS_ADMIN).
pub fn pid_namespace_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        // Probe in a child so this process keeps its namespace.
        // SAFETY: fork in a probe; the child only calls async-signal-safe
        // functions (unshare, _exit) before exiting.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: see above; unshare takes only flags.
            let r = unsafe { libc::unshare(libc::CLONE_NEWPID) };
            // SAFETY: _exit never returns and touches no Rust state.
            unsafe { libc::_exit(if r == 0 { 0 } else { 1 }) };
        }
        if pid < 0 {
            return false;
        }
        let mut status = 0;
        // SAFETY: waitpid on the child we just forked, with a valid pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    })
}

/// Dies with SIGKILL when the parent does.
pub fn die_with_parent() {
    // SAFETY: prctl with constant arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
}

/// No new privileges from here on (setuid binaries gain nothing; seccomp needs it).
pub fn no_new_privs() -> Result<(), String> {
    // SAFETY: prctl with constant arguments.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}
