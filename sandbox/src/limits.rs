//! Layer 1: resource limits. rlimits on each process's private memory,
//! file size and core dumps (and processes, which the kernel does not apply
//! to root), plus, where they can be made, a pids cgroup, which contains a
//! fork bomb even for root, and a memory cgroup, which caps what the whole
//! tree uses. The cgroups are made by the broker before the confined process starts
//! and removed (their processes killed) when the confined process ends.

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

/// This process's own cgroup of the v1 `memory` hierarchy, or of the v2
/// hierarchy when it offers the memory controller: where a confined process's
/// memory cgroup is nested, so the limits above nib's still hold over it.
fn memory_root() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut candidates = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            candidates.push(Path::new("/sys/fs/cgroup/memory").join(path));
        } else if id == "0" && controllers.is_empty() {
            for mount in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
                let base = Path::new(mount);
                let offers = std::fs::read_to_string(base.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|w| w == "memory"));
                if offers {
                    candidates.push(base.join(path));
                }
            }
        }
    }
    candidates.into_iter().find(|dir| {
        let test = dir.join(format!("nib-probe-{}", std::process::id()));
        if std::fs::create_dir(&test).is_err() {
            return false;
        }
        let ok = memory_limit_file(&test).is_some();
        let _ = std::fs::remove_dir(&test);
        ok
    })
}

/// The file that caps a memory cgroup's usage: `memory.max` (v2) or
/// `memory.limit_in_bytes` (v1).
fn memory_limit_file(dir: &Path) -> Option<PathBuf> {
    ["memory.max", "memory.limit_in_bytes"]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|f| f.exists())
}

/// Where nib's memory cgroups are made, if they can be.
pub fn memory_cgroup_root() -> Option<PathBuf> {
    static ROOT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ROOT.get_or_init(memory_root).clone()
}

/// Whether a memory cgroup can be made here.
pub fn memory_cgroup_available() -> bool {
    memory_cgroup_root().is_some()
}

/// The cgroups of one confined process's tree: a pids cgroup capping its processes
/// and a memory cgroup capping the memory they use together, each where
/// the machine allows. The tree joins both before its first exec.
#[derive(Debug)]
pub struct TreeCgroups {
    dirs: Vec<PathBuf>,
    /// Each cgroup's `cgroup.procs`, kept open to join (opening a cgroup
    /// file costs more than writing it); `None` where it could not be.
    procs: Vec<Option<std::fs::File>>,
}

impl TreeCgroups {
    /// Makes the cgroups `limits` asks for that this machine allows;
    /// `None` when it allows neither.
    pub fn create(limits: &Limits) -> Option<TreeCgroups> {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            // Once, in the background: the cgroups of brokers killed before
            // they could remove them, and whatever still runs in them (a
            // bubblewrap child left waiting for a parent that was gone
            // mid-start held its broker's pipes for hours).
            let roots: Vec<PathBuf> = [pids_cgroup_root(), memory_cgroup_root()]
                .into_iter()
                .flatten()
                .collect();
            std::thread::spawn(move || {
                for base in roots {
                    crate::leftovers::sweep(
                        &base,
                        "nib-",
                        std::time::Duration::ZERO,
                        kill_and_remove,
                    );
                }
            });
        });
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("nib-{}-{n}", std::process::id());
        let mut dirs = Vec::new();
        if let Some(root) = pids_cgroup_root() {
            let dir = root.join(&name);
            if std::fs::create_dir(&dir).is_ok() {
                if std::fs::write(dir.join("pids.max"), limits.processes.to_string()).is_ok() {
                    dirs.push(dir);
                } else {
                    let _ = std::fs::remove_dir(&dir);
                }
            }
        }
        if let Some(root) = memory_cgroup_root() {
            let dir = root.join(&name);
            if std::fs::create_dir(&dir).is_ok() {
                let capped = memory_limit_file(&dir).is_some_and(|file| {
                    std::fs::write(file, limits.tree_memory_bytes.to_string()).is_ok()
                });
                if capped {
                    // No swap beyond the cap either: v2's swap of its own,
                    // v1's memory and swap together.
                    let _ = std::fs::write(dir.join("memory.swap.max"), "0");
                    let _ = std::fs::write(
                        dir.join("memory.memsw.limit_in_bytes"),
                        limits.tree_memory_bytes.to_string(),
                    );
                    dirs.push(dir);
                } else {
                    let _ = std::fs::remove_dir(&dir);
                }
            }
        }
        let procs = dirs
            .iter()
            .map(|d| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("cgroup.procs"))
                    .ok()
            })
            .collect();
        (!dirs.is_empty()).then_some(TreeCgroups { dirs, procs })
    }

    /// The files a process writes its pid to, to join.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Raises the pids cap to `max` (a zygote's tree: the proxy bridge's
    /// threads and the calls it forks before each moves to its own).
    pub fn widen_pids(&self, max: u64) {
        for dir in &self.dirs {
            let file = dir.join("pids.max");
            if file.exists() {
                let _ = std::fs::write(file, max.to_string());
            }
        }
    }

    /// Moves the process `pid` (this process's namespace) into the cgroups;
    /// the processes it starts from then on are in them too.
    pub fn join(&self, pid: u32) {
        use std::io::Write;
        let pid = pid.to_string();
        for (dir, open) in self.dirs.iter().zip(&self.procs) {
            let _ = match open {
                Some(file) => {
                    let mut file: &std::fs::File = file;
                    file.write_all(pid.as_bytes())
                }
                None => std::fs::write(dir.join("cgroup.procs"), &pid),
            };
        }
    }

    /// Kills every process in the cgroups, repeatedly until they are
    /// empty, then removes them.
    pub fn kill_all(&self) {
        for dir in &self.dirs {
            kill_members(dir);
            let _ = std::fs::remove_dir(dir);
        }
    }

    /// Kills every process in the cgroups now, once, without waiting for
    /// them to leave (a process forking meanwhile may leave a child: see
    /// [`TreeCgroups::is_empty`] before the cgroups serve again).
    pub fn kill_members_once(&self) {
        for dir in &self.dirs {
            for pid in members(dir).unwrap_or_default() {
                // SAFETY: kill(2) with a pid read from a cgroup of nib's own
                // and a constant signal; no memory is passed.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }

    /// Whether no process is in the cgroups (and they can be read).
    pub fn is_empty(&self) -> bool {
        self.dirs
            .iter()
            .all(|dir| members(dir).is_some_and(|m| m.is_empty()))
    }
}

/// The processes in the cgroup at `dir`; `None` when it cannot be read.
/// The list is read from a fresh open each time: cgroup v1 keeps the list
/// an open file read first and serves it again to that file's later reads.
fn members(dir: &Path) -> Option<Vec<i32>> {
    Some(
        std::fs::read_to_string(dir.join("cgroup.procs"))
            .ok()?
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect(),
    )
}

/// Kills every process in the cgroup at `dir`, repeatedly until it is
/// empty, then removes it.
fn kill_and_remove(dir: &Path) -> std::io::Result<()> {
    kill_members(dir);
    std::fs::remove_dir(dir)
}

/// Kills every process in the cgroup at `dir`, repeatedly until it is
/// empty (or about half a second passed); whether it is empty.
fn kill_members(dir: &Path) -> bool {
    // Processes that are ending (a PID namespace's init right after its
    // parent) leave the list within microseconds: check again soon, then
    // less often, for at most about half a second.
    let mut nap = std::time::Duration::from_micros(50);
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    loop {
        let Some(pids) = members(dir) else {
            return false;
        };
        if pids.is_empty() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
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
}

impl Drop for TreeCgroups {
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
    // Private writable memory, not address space: runtimes reserve large
    // ranges they never touch (V8's WebAssembly guard regions, Go's heap
    // arenas, the JVM's), which RLIMIT_AS counts and RLIMIT_DATA does not.
    set(libc::RLIMIT_DATA, limits.memory_bytes)?;
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
