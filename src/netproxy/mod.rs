//! The network programs may reach: a filtering proxy in the broker with a
//! host allowlist (issue: sandboxed programs reach only the hosts the user
//! allows). [`rules`] decides which hosts and addresses, [`address`]
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
pub mod proxy;
pub mod rules;
pub mod secrets;
pub mod terminate;
pub mod tls;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

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

/// The session's brokered secrets and what programs need to use them.
pub struct Brokered {
    /// The declarations.
    pub secrets: secrets::Secrets,
    /// The authority terminating the declared hosts' tunnels (when any
    /// secret is in force).
    pub authority: Option<tls::Authority>,
    /// The folder programs read the authority's certificate from
    /// (`ca.pem`, and `bundle.pem` with the system's roots), when written;
    /// it also holds the brokered files' stand-ins (`files/N`).
    pub trust_dir: Option<PathBuf>,
    /// `(brokered file, its stand-in holding the placeholder)`: bound over
    /// the file under bubblewrap; with Landlock alone the file is hidden.
    pub stand_ins: Vec<(PathBuf, PathBuf)>,
}

impl Brokered {
    /// The variables confined programs get: each declared variable's
    /// placeholder; with an authority, the trust variables naming its
    /// bundle, and a git credential helper for Basic secrets' hosts.
    pub fn program_env(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .secrets
            .placeholders
            .iter()
            .filter(|(source, _)| secrets::file_of(source).is_none())
            .cloned()
            .collect();
        let Some(dir) = self.trust_dir.as_ref().filter(|_| self.authority.is_some()) else {
            return out;
        };
        let bundle = dir.join("bundle.pem").to_string_lossy().into_owned();
        for var in [
            "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
            "GIT_SSL_CAINFO",
            "CARGO_HTTP_CAINFO",
        ] {
            out.push((var.into(), bundle.clone()));
        }
        out.push((
            "NODE_EXTRA_CA_CERTS".into(),
            dir.join("ca.pem").to_string_lossy().into_owned(),
        ));
        out.extend(git_config(
            &self.secrets,
            std::env::var("GIT_CONFIG_COUNT").ok(),
        ));
        out
    }
}

/// git's settings for the secrets, as `GIT_CONFIG_*` variables after the
/// `existing` count: the user's credential helpers reset, a helper that
/// answers a Basic secret's placeholder for its hosts (git asks it after
/// the server's challenge, on any port), and for Bearer and header secrets
/// an extra header on the hosts' default HTTPS port.
fn git_config(secrets: &secrets::Secrets, existing: Option<String>) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut answers = String::new();
    for s in &secrets.accepted {
        match &s.wire {
            secrets::Wire::Basic { user } => {
                for h in &s.hosts {
                    answers.push_str(&format!(
                        " {h}) printf 'username=%s\\npassword=%s\\n' '{user}' '{}';;",
                        s.placeholder
                    ));
                }
            }
            _ => {
                for h in &s.hosts {
                    pairs.push((
                        format!("http.https://{h}/.extraHeader"),
                        s.placeholder_header(),
                    ));
                }
            }
        }
    }
    if !answers.is_empty() {
        pairs.insert(0, ("credential.helper".into(), String::new()));
        pairs.insert(
            1,
            (
                "credential.helper".into(),
                format!(
                    "!f() {{ test \"$1\" = get || exit 0; h=; while IFS='=' read -r k v; do [ \"$k\" = host ] && h=\"${{v%:*}}\"; done; case \"$h\" in{answers} esac; }}; f"
                ),
            ),
        );
    }
    if pairs.is_empty() {
        return Vec::new();
    }
    let start: usize = existing.and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut out = vec![(
        "GIT_CONFIG_COUNT".to_string(),
        (start + pairs.len()).to_string(),
    )];
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        out.push((format!("GIT_CONFIG_KEY_{}", start + i), k));
        out.push((format!("GIT_CONFIG_VALUE_{}", start + i), v));
    }
    out
}

static BROKERED: OnceLock<Arc<Brokered>> = OnceLock::new();

/// The session's brokered secrets, read from `spec` the first time
/// (later calls get the same): entries whose hosts `rules` does not allow
/// are refused, all of them when there are no rules (no proxy runs).
pub fn brokered(
    spec: Option<&str>,
    rules: Option<&rules::HostRules>,
    project: &Path,
) -> Arc<Brokered> {
    Arc::clone(BROKERED.get_or_init(|| {
        let mut secrets = secrets::Secrets::parse(
            spec.unwrap_or_default(),
            |source| match secrets::file_of(source) {
                Some(path) => std::fs::read_to_string(path).ok(),
                None => std::env::var(source).ok(),
            },
            |h| rules.is_some_and(|r| r.check_host(h).is_ok()),
        );
        // nib's own file tools read inside the project: a file there would
        // be read whole by any agent that asks.
        let project = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
        secrets.refuse_if(|s| {
            let file = secrets::file_of(&s.var)?;
            let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
            real.starts_with(&project).then(|| {
                format!(
                    "{} is inside the project's folder, where nib's file tools read; keep a brokered file outside it",
                    file.display()
                )
            })
        });
        for (entry, why) in &secrets.refused {
            tracing::warn!("NIB_SANDBOX_SECRETS: {entry} is refused: {why}");
        }
        let mut hosts: Vec<String> = secrets
            .accepted
            .iter()
            .flat_map(|s| s.hosts.iter().cloned())
            .collect();
        hosts.sort();
        hosts.dedup();
        let authority = if hosts.is_empty() {
            None
        } else {
            match tls::Authority::new(&hosts, tls::system_roots()) {
                Ok(a) => Some(a),
                Err(e) => {
                    tracing::warn!("NIB_SANDBOX_SECRETS: {e}; no secret is brokered");
                    None
                }
            }
        };
        let files: Vec<(PathBuf, String)> = secrets
            .placeholders
            .iter()
            .filter_map(|(source, p)| Some((secrets::file_of(source)?.to_path_buf(), p.clone())))
            .collect();
        let written = (authority.is_some() || !files.is_empty())
            .then(|| write_trust(authority.as_ref(), &files))
            .transpose()
            .unwrap_or_else(|e| {
                tracing::warn!("NIB_SANDBOX_SECRETS: writing the session's trust folder: {e}");
                None
            });
        let (trust_dir, stand_ins) = written.unzip();
        Arc::new(Brokered {
            secrets,
            authority,
            trust_dir,
            stand_ins: stand_ins.unwrap_or_default(),
        })
    }))
}

/// Writes the authority's certificate (`ca.pem`) and it with the system's
/// roots (`bundle.pem`), and a stand-in for each brokered file (`files/N`,
/// the placeholder and a line end), to a folder of this process's,
/// readable to programs; the folders of killed nibs are swept. Returns the
/// folder and `(file, stand-in)` pairs.
#[allow(clippy::type_complexity)]
fn write_trust(
    authority: Option<&tls::Authority>,
    files: &[(PathBuf, String)],
) -> Result<(PathBuf, Vec<(PathBuf, PathBuf)>), String> {
    use std::os::unix::fs::DirBuilderExt;
    nib_sandbox::sweep_leftovers(
        &std::env::temp_dir(),
        "nib-trust-",
        std::time::Duration::from_secs(600),
        |p| std::fs::remove_dir_all(p),
    );
    let dir = std::env::temp_dir().join(format!("nib-trust-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let put = |path: PathBuf, text: &str| {
        std::fs::write(&path, text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
    };
    if let Some(authority) = authority {
        let bundle = format!(
            "{}{}",
            tls::pem_of(&tls::system_roots()),
            authority.ca_pem()
        );
        put(dir.join("ca.pem"), authority.ca_pem())?;
        put(dir.join("bundle.pem"), &bundle)?;
    }
    let mut stand_ins = Vec::new();
    if !files.is_empty() {
        std::fs::create_dir(dir.join("files")).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    for (i, (file, placeholder)) in files.iter().enumerate() {
        let copy = dir.join("files").join(i.to_string());
        put(copy.clone(), &format!("{placeholder}\n"))?;
        stand_ins.push((file.clone(), copy));
    }
    Ok((dir, stand_ins))
}

/// The session's brokered secrets when they were read.
pub fn brokered_now() -> Option<Arc<Brokered>> {
    BROKERED.get().cloned()
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

/// Puts a host a program wants (`HOST:PORT`) to the user; true when the
/// user allows it for the session. Set by the server when the client can
/// be asked mid-call (`NIB_CONFIRM_NETWORK=1`).
pub type Asker = Arc<dyn Fn(&str) -> bool + Send + Sync>;

static ASKER: std::sync::Mutex<Option<Asker>> = std::sync::Mutex::new(None);

/// Installs (or removes) the way the proxy asks the user.
pub fn set_asker(asker: Option<Asker>) {
    if let Ok(mut a) = ASKER.lock() {
        *a = asker;
    }
}

fn asker() -> Option<Asker> {
    ASKER.lock().ok().and_then(|a| a.clone())
}

/// The proxy for `NIB_SANDBOX_NETWORK`'s hosts minus the project's deny
/// list, started on first call; `Ok(None)` when no host is allowed
/// (programs get no network). The project's allow list is never added: the
/// sandbox's limits are the user's ([`ignored_allow_note`] says so once).
/// The first call's settings hold for the process.
pub fn running(
    hosts: Option<&str>,
    confirm: bool,
    project: &Path,
    secrets: Option<&str>,
) -> Result<Option<&'static Running>, String> {
    RUNNING
        .get_or_init(|| {
            let (allow, deny) = project_lists(project);
            let _ = IGNORED_ALLOW.set(allow);
            let (rules, unread) = rules::HostRules::new(hosts, &deny);
            for u in &unread {
                tracing::warn!("network: {u:?} is not a host name, *.domain or address; left out");
            }
            if !rules.any() {
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
    rules: rules::HostRules,
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
