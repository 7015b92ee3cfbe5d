//! The session's brokered secrets (`NIB_SANDBOX_SECRETS`) as the sandbox
//! and the proxy use them: the declarations read once, the authority, the
//! trust folder programs read, and the variables they get.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::{hosts, secrets, tls};

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
    rules: Option<&hosts::HostRules>,
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
