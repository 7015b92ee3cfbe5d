//! What a confined process may do: the policy the broker hands the sandbox, and the
//! report of which layers are in force. Plain data; no effects here.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::Reads;

/// Resource limits of a confined process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Processes (a pids cgroup where one can be made, else RLIMIT_NPROC).
    pub processes: u64,
    /// Private writable memory per process (RLIMIT_DATA), bytes: runtimes'
    /// untouched reservations do not count, what they write does.
    pub memory_bytes: u64,
    /// Memory the whole tree uses together (a memory cgroup where one can
    /// be made), bytes.
    #[serde(default = "default_tree_memory")]
    pub tree_memory_bytes: u64,
    /// Largest file a process may write, bytes.
    pub file_size_bytes: u64,
    /// Output (stdout and stderr together) read before the tree is killed.
    pub output_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            processes: 512,
            memory_bytes: 8 << 30,
            tree_memory_bytes: default_tree_memory(),
            file_size_bytes: 4 << 30,
            output_bytes: 64 << 20,
        }
    }
}

fn default_tree_memory() -> u64 {
    8 << 30
}

/// Programs reach the network only through nib's filtering proxy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyRoute {
    /// The TCP port programs connect to on 127.0.0.1: the proxy's own
    /// outside bubblewrap, the bridge's inside its network namespace.
    pub port: u16,
    /// The proxy's Unix socket, bound into bubblewrap for the bridge.
    pub socket: PathBuf,
}

/// How a confined process is confined.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Layer 2 on (NIB_SANDBOX=1): the system read-only, only the roots writable.
    pub confine: bool,
    /// Folders the confined process may write (the roots).
    pub writable: Vec<PathBuf>,
    /// Extra folders bound read-only (NIB_SANDBOX_BIND).
    pub read_only: Vec<PathBuf>,
    /// Network allowed (NIB_SANDBOX_NETWORK=1).
    pub network: bool,
    /// Paths inside the roots that stay read-only (files that make code run).
    pub protected: Vec<PathBuf>,
    /// Folders inside the roots that stay where they are (git dirs): bound
    /// over themselves, writable, so that programs may change what is in
    /// them (but the protected paths) and cannot rename, replace or remove
    /// the folder itself (a mount point cannot be: `EBUSY`).
    #[serde(default)]
    pub pinned: Vec<PathBuf>,
    /// Resource limits.
    pub limits: Limits,
    /// Use bubblewrap when it is usable (tests turn it off to check Landlock alone).
    pub use_bwrap: bool,
    /// Files hidden behind `/dev/null` under bubblewrap (forbidden programs).
    #[serde(default)]
    pub masked: Vec<PathBuf>,
    /// Every exec of the confined process's tree is decided by a supervisor in the
    /// broker (seccomp user notification; set by the sandbox when it has an
    /// [`crate::ExecJudge`], in every mode).
    #[serde(default)]
    pub supervise_exec: bool,
    /// With `network` off: the network through nib's proxy only (its
    /// allowlist decides), when the layers can hold programs to it.
    #[serde(default)]
    pub proxy: Option<ProxyRoute>,
    /// What programs may read when the policy confines ([`Reads`]): the
    /// roots, the private `/tmp` and these, nothing else.
    #[serde(default)]
    pub reads: Reads,
    /// Secret-looking variables passed to confined programs anyway
    /// (NIB_SANDBOX_ENV); the others are withheld ([`crate::env`]).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Variables set for confined programs after the secrets are withheld
    /// (brokered secrets' placeholders, the trust their proxy needs); they
    /// replace any of the same name.
    #[serde(default)]
    pub set_env: Vec<(String, String)>,
    /// `(file, stand-in)`: under bubblewrap the stand-in is bound read-only
    /// over the file (a brokered secret's file, holding its placeholder);
    /// the caller also hides the file, which is all Landlock alone can do.
    #[serde(default)]
    pub stand_in_files: Vec<(PathBuf, PathBuf)>,
}

/// Which layers this machine offers (see [`crate::probe`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    /// bubblewrap is installed and can create its namespaces.
    pub bwrap: bool,
    /// The Landlock ABI version (0: none).
    pub landlock_abi: u32,
    /// seccomp filters can be installed.
    pub seccomp: bool,
    /// A PID namespace can be made for the confined process's tree.
    pub pid_namespace: bool,
    /// A pids cgroup can be made (fork bombs are contained even for root).
    pub pids_cgroup: bool,
    /// A memory cgroup can be made (the tree's memory together is capped).
    #[serde(default)]
    pub memory_cgroup: bool,
}

impl Layers {
    /// One line per layer, for people.
    pub fn describe(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "no" };
        format!(
            "bubblewrap: {}\nLandlock ABI: {}\nseccomp: {}\nPID namespace: {}\npids cgroup: {}\nmemory cgroup: {}\n",
            yes(self.bwrap),
            if self.landlock_abi == 0 {
                "none".to_string()
            } else {
                self.landlock_abi.to_string()
            },
            yes(self.seccomp),
            yes(self.pid_namespace),
            yes(self.pids_cgroup),
            yes(self.memory_cgroup)
        )
    }
}
