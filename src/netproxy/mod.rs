//! The network programs may reach: a filtering proxy in the broker with a
//! host allowlist (issue: sandboxed programs reach only the hosts the user
//! allows). [`hosts`] decides which hosts and addresses, [`address`]
//! classifies addresses, [`proxy`] serves `CONNECT` tunnels and plain HTTP
//! and records what it reached and refused.
//!
//! Brokered secrets ([`secrets`], `NIB_SANDBOX_SECRETS`): programs hold
//! placeholders; for the hosts the user declared, the proxy terminates the
//! tunnel under a session authority ([`tls`]) and fills the declared header
//! on the way out ([`terminate`]). [`brokered`] holds the session's.
//!
//! [`running`] starts the proxy once per process, on a thread of its own,
//! listening on `127.0.0.1` (for programs held to its port by Landlock) and
//! on a Unix socket in a private folder (bound into bubblewrap, where a
//! bridge in the program's network namespace joins it); `nib_sandbox`
//! applies the route ([`nib_sandbox::ProxyRoute`]).

pub mod address;
mod asker;
mod brokering;
pub mod hosts;
pub mod proxy;
pub mod secrets;
pub mod terminate;
pub mod tls;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub use asker::{Asker, askable, note_askable, set_asker};
pub use brokering::{Brokered, brokered, brokered_now};

/// The proxy of this process.
pub struct Running {
    /// The proxy (its rules and log).
    pub proxy: Arc<proxy::Proxy>,
    /// The loopback port it listens on.
    pub port: u16,
    /// Its Unix socket.
    pub socket: PathBuf,
    /// The allowlist as written.
    pub described: String,
}

impl Running {
    /// The route programs take to it.
    pub fn route(&self) -> nib_sandbox::ProxyRoute {
        nib_sandbox::ProxyRoute {
            port: self.port,
            socket: self.socket.clone(),
        }
    }
}

/// nib.json's `network` lists, when the project has them (`allow`, `deny`).
fn project_lists(project: &Path) -> (Vec<String>, Vec<String>) {
    let json = std::fs::read(project.join("nib.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    let list = |key: &str| -> Vec<String> {
        json.as_ref()
            .and_then(|j| j.get("network"))
            .and_then(|n| n.get(key))
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    (list("allow"), list("deny"))
}

static RUNNING: OnceLock<Result<Option<Running>, String>> = OnceLock::new();

/// The project's `network.allow` entries, left out (a project may narrow
/// the sandbox's network, never widen it).
static IGNORED_ALLOW: OnceLock<Vec<String>> = OnceLock::new();
/// Whether [`ignored_allow_note`] has given its note this session.
static IGNORED_NOTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The one note of a session about a project's `network.allow`, the first
/// time it is asked for after the proxy's rules were made: which entries
/// were left out and the user's setting that would allow them.
pub fn ignored_allow_note() -> Option<String> {
    let ignored = IGNORED_ALLOW.get().filter(|i| !i.is_empty())?;
    if IGNORED_NOTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    Some(format!(
        "[network: nib.json's network.allow ({}) is ignored: a project's file may narrow the sandbox's network, never widen it; the user allows hosts with NIB_SANDBOX_NETWORK={}]",
        ignored.join(", "),
        ignored.join(",")
    ))
}

/// The proxy for `NIB_SANDBOX_NETWORK`'s hosts minus the project's deny
/// list, started on first call; `Ok(None)` when no host is allowed and
/// nobody can be asked about one (`confirm` with a client that can be
/// asked: [`askable`]) — programs then get no network. Until a client that
/// can be asked is seen, `None` is not kept: a later call may start it.
/// The project's allow list is never added: the sandbox's limits are the
/// user's ([`ignored_allow_note`] says so once). Once started, the first
/// settings hold for the process.
pub fn running(
    hosts: Option<&str>,
    confirm: bool,
    project: &Path,
    secrets: Option<&str>,
) -> Result<Option<&'static Running>, String> {
    let asking = confirm && askable();
    if RUNNING.get().is_none() && hosts.is_none() && !asking {
        // No host listed and nobody to ask, yet: no proxy (the project's
        // allow list is still read once, for its note).
        IGNORED_ALLOW.get_or_init(|| project_lists(project).0);
        return Ok(None);
    }
    RUNNING
        .get_or_init(|| {
            let (allow, deny) = project_lists(project);
            let _ = IGNORED_ALLOW.set(allow);
            let (rules, unread) = hosts::HostRules::new(hosts, &deny);
            for u in &unread {
                tracing::warn!("network: {u:?} is not a host name, *.domain or address; left out");
            }
            if !rules.any() && !asking {
                return Ok(None);
            }
            let brokered = brokered(secrets, Some(&rules), project);
            start(rules, confirm, brokered).map(Some)
        })
        .as_ref()
        .map(Option::as_ref)
        .map_err(Clone::clone)
}

/// Removes the running proxy's socket folder and the brokered secrets'
/// trust folder, at a normal exit (the folders of a nib that was killed
/// are swept by a later one).
pub fn remove_socket_folder() {
    if let Some(dir) = current().and_then(|r| r.socket.parent()) {
        let _ = std::fs::remove_dir_all(dir);
    }
    if let Some(dir) = brokered_now().and_then(|b| b.trust_dir.clone()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The proxy already running, if any (for answers and nibash_status).
pub fn current() -> Option<&'static Running> {
    RUNNING
        .get()
        .and_then(|r| r.as_ref().ok())
        .and_then(Option::as_ref)
}

fn start(
    rules: hosts::HostRules,
    confirm: bool,
    brokered: Arc<Brokered>,
) -> Result<Running, String> {
    use std::os::unix::fs::DirBuilderExt;
    let described = rules.describe();
    let proxy = Arc::new(
        proxy::Proxy::new(rules, Arc::new(proxy::SystemResolver))
            .confirming(confirm)
            .brokering(brokered),
    );
    let tcp = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("listening on 127.0.0.1: {e}"))?;
    let port = tcp.local_addr().map_err(|e| e.to_string())?.port();
    // The folders of proxies whose nib was killed before removing them.
    nib_sandbox::sweep_leftovers(
        &std::env::temp_dir(),
        "nib-proxy-",
        std::time::Duration::from_secs(600),
        |p| std::fs::remove_dir_all(p),
    );
    let dir = std::env::temp_dir().join(format!("nib-proxy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let socket = dir.join("proxy.sock");
    let unix = std::os::unix::net::UnixListener::bind(&socket)
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    tcp.set_nonblocking(true).map_err(|e| e.to_string())?;
    unix.set_nonblocking(true).map_err(|e| e.to_string())?;
    let serving = Arc::clone(&proxy);
    std::thread::Builder::new()
        .name("nib-proxy".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let (Ok(tcp), Ok(unix)) = (
                    tokio::net::TcpListener::from_std(tcp),
                    tokio::net::UnixListener::from_std(unix),
                ) else {
                    return;
                };
                tokio::join!(
                    Arc::clone(&serving).serve_tcp(tcp),
                    serving.serve_unix(unix)
                );
            });
        })
        .map_err(|e| e.to_string())?;
    Ok(Running {
        proxy,
        port,
        socket,
        described,
    })
}
