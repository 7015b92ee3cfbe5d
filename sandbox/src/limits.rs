//! Layer 1: resource limits. rlimits on memory, file size and core dumps
//! (and processes, which the kernel does not apply to root), plus a pids
//! cgroup where one can be made, which contains a fork bomb even for root.
//! The cgroup is made by the broker before the worker starts and removed
//! (its processes killed) when the worker ends.

use std::path::{Path, PathBuf};

use crate::Limits;

/// cgroup v2 or v1 mount of the pids controller, if writable.
fn pids_root() -> Option<PathBuf> {
    for candidate in [
        "/sys/fs/cgroup/pids",
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup",
    ] {
        let p = Path::new(candidate);
        let v1 = p.join("tasks").exists() && p.ends_with("pids");
        let v2 = p.join("cgroup.controllers").exists()
            && std::fs::read_to_string(p.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|w| w == "pids"));
        if v1 || v2 {
            let test = p.join(format!("nib-probe-{}", std::process::id()));
            if std::fs::create_dir(&test).is_ok() {
                let ok = test.join("pids.max").exists();
                let _ = std::fs::remove_dir(&test);
                if ok {
                    return Some(p.to_path_buf());
                }
            }
        }
    }
    None
}

/// Where nib's pids cgroups are made, if they can be.
pub fn pids_cgroup_root() -> Option<PathBuf> {
    static ROOT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ROOT.get_or_init(pids_root).clone()
}

/// Whether a pids cgroup can be made here.
pub fn pids_cgroup_available() -> bool {
    pids_cgroup_root().is_some()
}

/// A pids cgroup for one worker.
#[derive(Debug)]
pub struct PidsCgroup {
    dir: PathBuf,
}

impl PidsCgroup {
    /// Makes a cgroup capped at `max` processes, if the machine allows.
    pub fn create(max: u64) -> Option<PidsCgroup> {
        static ROOT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
        let root = ROOT
            .get_or_init(|| {
                let root = pids_root()?;
                // Once, in the background: the cgroups of brokers killed
                // before they could remove them, and whatever still runs in
                // them (a bubblewrap child left waiting for a parent that
                // was gone mid-start held its broker's pipes for hours).
                let base = root.clone();
                std::thread::spawn(move || {
                    crate::leftovers::sweep(
                        &base,
                        "nib-",
                        std::time::Duration::ZERO,
                        kill_and_remove,
                    )
                });
                Some(root)
            })
            .as_ref()?;
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = root.join(format!("nib-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        if std::fs::write(dir.join("pids.max"), max.to_string()).is_err() {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(PidsCgroup { dir })
    }

    /// The file a process writes its pid to, to join.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Kills every process in the cgroup, repeatedly until it is empty, then removes it.
    pub fn kill_all(&self) {
        let _ = kill_and_remove(&self.dir);
    }
}

/// Kills every process in the cgroup at `dir`, repeatedly until it is
/// empty, then removes it.
fn kill_and_remove(dir: &Path) -> std::io::Result<()> {
    // Processes that are ending (a PID namespace's init right after its
    // parent) leave the list within microseconds: check again soon, then
    // less often, for at most about half a second.
    let procs_file = dir.join("cgroup.procs");
    let mut nap = std::time::Duration::from_micros(50);
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    while std::time::Instant::now() < deadline {
        let procs = std::fs::read_to_string(&procs_file).unwrap_or_default();
        let pids: Vec<i32> = procs
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // SAFETY: kill(2) with a pid read from a cgroup of nib's own
            // and a constant signal; no memory is passed.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(std::time::Duration::from_millis(10));
    }
    std::fs::remove_dir(dir)
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Sets the rlimits of the process that becomes the program; the error
/// number when one could not be set. System calls only: safe in a forked child.
pub fn apply_rlimits_raw(limits: &Limits) -> Result<(), i32> {
    let set = |res, v: u64| {
        let lim = libc::rlimit {
            rlim_cur: v as libc::rlim_t,
            rlim_max: v as libc::rlim_t,
        };
        // SAFETY: setrlimit with a valid resource constant and a pointer to a
        // live, initialized rlimit on this stack frame.
        let r = unsafe { libc::setrlimit(res, &lim) };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO))
        }
    };
    set(libc::RLIMIT_AS, limits.memory_bytes)?;
    set(libc::RLIMIT_FSIZE, limits.file_size_bytes)?;
    set(libc::RLIMIT_CORE, 0)?;
    set(libc::RLIMIT_NPROC, limits.processes)?;
    Ok(())
}

/// A quarter of this process's soft limit on open files (1024 when it
/// cannot be read or is unlimited): what one user of descriptors in the
/// broker may hold — the kept Landlock grants, the proxy's connections —
/// so the tools always keep the rest.
pub fn open_files_quarter() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
    if !ok || lim.rlim_cur == libc::RLIM_INFINITY {
        return 1024;
    }
    usize::try_from(lim.rlim_cur / 4).unwrap_or(usize::MAX)
}
