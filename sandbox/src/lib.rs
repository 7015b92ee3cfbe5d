//! nib's sandbox: starts a program under a [`Policy`], in layers.
//!
//! Layer 1, always ([`lifetime`], [`limits`], [`env`]): a new session with no
//! controlling terminal, empty stdin (a pipe from the caller for a service,
//! [`Sandbox::spawn_service`]), only fds 0–2 (and the channel at fd 3),
//! a scrubbed environment, resource limits, and a process tree that ends with
//! the call and with the broker: the confined process runs under a reaper that is PID 1
//! of its own PID namespace (the kernel kills everything left in it when the
//! reaper ends, which it does when the program does), dies with
//! its parent, and sits in a pids cgroup where one can be made.
//!
//! Layer 2, when the policy confines ([`bwrap`], [`landlock`], [`seccomp`]):
//! chosen by trying each layer once ([`layers`]): bubblewrap + seccomp
//! (+ Landlock where the kernel has it), else Landlock (ABI 3+, fully
//! enforced) + seccomp, else nothing runs — fail closed, with what is
//! missing and the fix. Helpers the broker starts outside the sandbox
//! (bubblewrap, the confining entry) are taken only from outside every root.
//!
//! What confined programs may read ([`Reads`]): the system folders, the
//! toolchains and caches builds use, the roots and the user's binds; every
//! other file of the user's is absent (bubblewrap) or not granted
//! (Landlock), and well-known credential files are hidden even inside
//! those. Secret-looking environment variables are withheld.
//!
//! The exec-time layer, in every mode when the caller gives a judge
//! ([`exec_filter`], [`exec_guard`]): each `execve`/`execveat` of the tree
//! waits while a supervisor thread in the broker identifies the file the
//! kernel would run and asks the [`ExecJudge`]; a refusal fails with
//! `EACCES` and is logged for the caller.
//!
//! The network, when the policy routes it through nib's proxy
//! ([`ProxyRoute`]): programs get the proxy's variables and TCP only to its
//! port — bubblewrap's empty network namespace with a [`bridge`] to the
//! proxy's socket, Landlock's port rule, seccomp allowing TCP sockets only
//! where one of those holds them.
//!
//! How a confined process starts: outside bubblewrap the broker's forked child takes
//! the steps to the program itself ([`launch`]: prepared before the fork,
//! system calls only after it) and the program is the start's one exec;
//! inside bubblewrap the confining entry ([`entry_main`], in `nib-confine`)
//! takes the same steps.
//!
//! Only the broker knows MCP and JSON-RPC: this crate takes a [`Policy`] and
//! returns a [`Confined`] or a [`SandboxError`].

#![deny(missing_docs)]
#![allow(unsafe_code)]

mod bridge;
mod bwrap;
mod entry;
mod env;
mod exec_filter;
mod exec_guard;
mod landlock;
mod launch;
mod layers;
mod leftovers;
mod lifetime;
mod limits;
mod policy;
mod private_tmp;
mod reads;
mod seccomp;
mod spawn;
mod zygote;

pub use bwrap::{bwrap_argv, bwrap_usable, note_roots, trusted as trusted_helper, trusted_usable};
pub use entry::{ENTRY_ARG, ENTRY_BINARY, entry_beside, entry_main, trusted_entry};
pub use env::{PROXY_USER, is_secret_name, proxy_token, proxy_vars, scrub, withhold_secrets};
pub use exec_guard::{ExecAttempt, ExecFile, ExecJudge, ExecLog, ExecRefusal};
pub use layers::{MIN_LANDLOCK_ABI, Mode, Trial, Wanted, choose, exec_rules_refusal, trial};
pub use leftovers::sweep as sweep_leftovers;
pub use limits::{open_files_quarter, pids_cgroup_root};
pub use policy::{Layers, Limits, Policy, ProxyRoute};
pub use reads::{CREDENTIALS, HOME_TOOLCHAINS, Reads, SYSTEM, SYSTEM_SECRETS, UserReads};
pub use seccomp::denied_syscalls;
pub use spawn::{Confined, Killer, Output, Sandbox, SandboxError, ServicePipes, probe};
pub use zygote::{Forked, Zygote, serve as serve_zygote};
