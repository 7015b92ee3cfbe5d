//! Layer 1: the confined process tree ends with its call and with the broker.
//!
//! Outside bubblewrap the confined process is PID 1 of its own PID namespace: the
//! broker's spawner thread switches the namespace its children start in
//! ([`NamespaceSwitch`]) so the confined process starts as that namespace's init; it
//! only reaps, and forks to run the program as PID 2 (an ordinary process:
//! `kill $$` works). The kernel kills everything left in the namespace when
//! PID 1 ends — setsid'd and double-forked descendants included. Where the
//! broker cannot switch, the confined process unshares CLONE_NEWPID itself and forks
//! once more (its child is the init). Each hop dies with its parent
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

/// Switches the PID namespace the calling thread's children start in: a
/// new one for the next child (which becomes its init), then back to this
/// process's own. A thread's namespace for children is its own (other
/// threads are unaffected), so only the spawner thread uses this.
#[derive(Debug)]
pub struct NamespaceSwitch {
    /// This process's own PID namespace, to switch back to.
    own: std::os::fd::OwnedFd,
}

impl NamespaceSwitch {
    /// A switch, where this process may make PID namespaces.
    pub fn open() -> Option<NamespaceSwitch> {
        if !pid_namespace_available() {
            return None;
        }
        let own = std::fs::File::open("/proc/self/ns/pid").ok()?;
        Some(NamespaceSwitch { own: own.into() })
    }

    /// The calling thread's next child starts as the init of a new PID
    /// namespace. False when it could not be made (the child then starts
    /// in this process's namespace).
    pub fn enter_new(&self) -> bool {
        // SAFETY: unshare takes only flags; CLONE_NEWPID changes only the
        // namespace this thread's future children start in.
        unsafe { libc::unshare(libc::CLONE_NEWPID) == 0 }
    }

    /// Children of the calling thread start in this process's namespace
    /// again. False when that failed: the thread must fork nothing more.
    pub fn restore(&self) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: setns with an fd we own for the whole call, naming this
        // process's own PID namespace (an ancestor of, or the same as, the
        // thread's namespace for children, as setns requires).
        unsafe { libc::setns(self.own.as_raw_fd(), libc::CLONE_NEWPID) == 0 }
    }
}

/// Dies with SIGKILL when the parent does.
pub fn die_with_parent() {
    // SAFETY: prctl with constant arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
}

/// No new privileges from here on (setuid binaries gain nothing; seccomp
/// and Landlock need it); the error number when refused. A system call
/// only: safe in a forked child.
pub fn no_new_privs() -> Result<(), i32> {
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    }
}
