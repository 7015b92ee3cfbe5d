//! What confined programs may read (the read policy): the system folders,
//! the toolchains and caches real builds use, the folders the user binds,
//! and the roots — nothing else of the user's. Well-known credential files
//! stay hidden even inside a readable folder.
//!
//! This file describes; it does not confine. `bwrap.rs` renders a
//! [`Reads`] as mounts (a folder not mounted does not exist, a hidden path
//! is covered by an unreadable one), `landlock.rs` as granted paths (an
//! allow-list: a folder holding a hidden path is granted as its other
//! entries, [`split_all`]). The broker builds the description
//! ([`Reads::for_user`]) from its environment and the user's settings.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// System folders programs may read (and run from), where they exist.
/// `/dev`, `/proc` and `/tmp` are made or granted apart from these.
pub const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/sys",
];

/// Secrets inside the system folders, hidden even though `/etc` is readable.
pub const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/security/opasswd",
    "/etc/machine-id",
];

/// Folders and files under `$HOME` that builds read: toolchains, version
/// managers (their shims are on PATH, the toolchains beside them), package
/// caches, and git's own settings.
pub const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".pyenv",
    ".rbenv",
    ".nvm",
    ".asdf",
    ".local/share/mise",
    ".sdkman",
    ".volta",
    ".bun",
    ".deno",
    ".dotnet",
    ".jdks",
    ".local/bin",
    ".local/lib",
    ".npm",
    ".yarn",
    ".cache/yarn",
    ".local/share/pnpm",
    ".cache/node-gyp",
    ".cache/pip",
    ".cache/uv",
    ".cache/pypoetry",
    "go",
    ".cache/go-build",
    ".gradle",
    ".m2",
    ".ivy2",
    ".sbt",
    ".cache/coursier",
    ".konan",
    ".gem",
    ".nuget",
    ".gitconfig",
    ".config/git",
];

/// Variables that name a toolchain or a cache outside the usual places
/// (`GOPATH` may list several, `:` separated).
pub const TOOLCHAIN_VARS: &[&str] = &[
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOROOT",
    "GOMODCACHE",
    "GOCACHE",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "NVM_DIR",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
    "SDKMAN_DIR",
    "VOLTA_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "PNPM_HOME",
    "npm_config_cache",
    "NPM_CONFIG_CACHE",
    "YARN_CACHE_FOLDER",
    "PIP_CACHE_DIR",
    "UV_CACHE_DIR",
    "JAVA_HOME",
    "GRADLE_USER_HOME",
    "M2_HOME",
    "MAVEN_HOME",
    "RBENV_ROOT",
    "GEM_HOME",
    "DOTNET_ROOT",
    "NUGET_PACKAGES",
    "GIT_CONFIG_GLOBAL",
];

/// Well-known credential files and folders under `$HOME`: hidden even
/// inside a readable folder (`.cargo/credentials.toml` in `.cargo`).
pub const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".pki",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".oci",
    ".kube",
    ".docker",
    ".config/gh",
    ".config/hub",
    ".config/glab-cli",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".config/configstore",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".gradle/gradle.properties",
    ".sbt/.credentials",
    ".ivy2/.credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".nuget/NuGet/NuGet.Config",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".boto",
    ".databrickscfg",
    ".config/rclone",
    ".config/op",
    ".config/doctl",
    ".huggingface",
    ".cache/huggingface/token",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/nib",
    ".claude",
    ".claude.json",
    ".config/claude",
    ".config/opencode",
    ".local/share/opencode",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
];

/// Credential files a toolchain keeps in its own folder: hidden inside
/// every toolchain folder a variable ([`TOOLCHAIN_VARS`]) names, wherever
/// it lies, and those named for credentials inside a `bin` or `shims`
/// folder's parent on `PATH` (which may be a project's root) — the rust
/// container's `CARGO_HOME=/usr/local/cargo` holds `credentials.toml` as
/// `~/.cargo` does. Cargo's and gem's `credentials`, Gradle's properties,
/// Maven's settings (a user folder's, an install's `conf/`), sbt's and
/// Ivy's `.credentials`, NuGet's config.
pub const TOOLCHAIN_CREDENTIALS: &[&str] = &[
    "credentials",
    "credentials.toml",
    "gradle.properties",
    "settings.xml",
    "settings-security.xml",
    "conf/settings.xml",
    "conf/settings-security.xml",
    ".credentials",
    "NuGet/NuGet.Config",
];

/// Variables that name a credential file or folder elsewhere than the
/// credential list's place: what each names is hidden, whole
/// (`KUBECONFIG` may list several files, `:` separated).
pub const CREDENTIAL_VARS: &[&str] = &[
    "NPM_CONFIG_USERCONFIG",
    "npm_config_userconfig",
    "DOCKER_CONFIG",
    "KUBECONFIG",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_CONFIG",
    "AZURE_CONFIG_DIR",
    "GH_CONFIG_DIR",
    "GNUPGHOME",
    "PASSWORD_STORE_DIR",
];

/// Variables that move a folder of `$HOME` the credential list names
/// entries in, with that folder: the entries are hidden where the
/// variable puts them too (`XDG_CONFIG_HOME=/srv/cfg` hides
/// `/srv/cfg/gh`, as `~/.config/gh`).
pub const MOVED_HOME_FOLDERS: &[(&str, &str)] = &[
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_CACHE_HOME", ".cache"),
];

/// The read policy: what confined programs may read besides the roots
/// (always readable and writable) and the private `/tmp`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reads {
    /// Folders and files programs may read (and run from).
    pub readable: Vec<PathBuf>,
    /// Paths hidden even inside a readable folder or a root.
    pub hidden: Vec<PathBuf>,
}

impl Default for Reads {
    /// The system folders alone, their secrets hidden.
    fn default() -> Reads {
        Reads {
            readable: SYSTEM.iter().map(PathBuf::from).collect(),
            hidden: system_secrets(Path::new("/etc/ssh")),
        }
    }
}

/// What the user's side says about the read policy (environment and user
/// config; a project may only add to `hide`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserReads {
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `PATH`.
    pub path: Option<OsString>,
    /// The [`TOOLCHAIN_VARS`], [`CREDENTIAL_VARS`] and
    /// [`MOVED_HOME_FOLDERS`] variables that are set, as (name, value).
    pub toolchain_vars: Vec<(String, OsString)>,
    /// Paths the user allows (NIB_SANDBOX_BIND): readable, and shown even
    /// when a credential entry would hide them.
    pub allow: Vec<PathBuf>,
    /// Paths the user (NIB_SANDBOX_HIDE) or the project hides on top.
    pub hide: Vec<PathBuf>,
}

impl UserReads {
    /// The toolchain variables, and those that move credential files
    /// ([`CREDENTIAL_VARS`], [`MOVED_HOME_FOLDERS`]), from an environment
    /// lookup.
    pub fn toolchain_vars_from(
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Vec<(String, OsString)> {
        TOOLCHAIN_VARS
            .iter()
            .chain(CREDENTIAL_VARS)
            .chain(MOVED_HOME_FOLDERS.iter().map(|(n, _)| n))
            .filter_map(|n| {
                lookup(n)
                    .filter(|v| !v.is_empty())
                    .map(|v| (n.to_string(), v))
            })
            .collect()
    }
}

impl Reads {
    /// The policy for a user: the system folders, the toolchains under
    /// `$HOME` and those the environment names, PATH's folders (a `bin` or
    /// `shims` folder with its toolchain's root), and the allowed paths;
    /// hidden: the system secrets, the credential list under `$HOME`, the
    /// user's and the project's hides, less what the user allows.
    /// Nothing is listed but `/etc/ssh`; a hidden path's folder is
    /// resolved, so a toolchain folder that is a link hides its files
    /// where they are too.
    /// The last answer is kept and given again for the same user while
    /// `/etc/ssh` is unchanged (every nibash call asks, twice).
    pub fn for_user(user: &UserReads) -> Reads {
        type Last = Option<(UserReads, Option<std::time::SystemTime>, Reads)>;
        static LAST: std::sync::Mutex<Last> = std::sync::Mutex::new(None);
        let ssh = std::fs::metadata("/etc/ssh")
            .and_then(|m| m.modified())
            .ok();
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((u, m, reads)) = last.as_ref()
            && u == user
            && *m == ssh
        {
            return reads.clone();
        }
        let reads = Reads::make_for(user);
        *last = Some((user.clone(), ssh, reads.clone()));
        reads
    }

    fn make_for(user: &UserReads) -> Reads {
        let mut readable: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
        let home = user
            .home
            .as_deref()
            .filter(|h| h.is_absolute() && *h != Path::new("/"));
        if let Some(home) = home {
            readable.extend(HOME_TOOLCHAINS.iter().map(|p| home.join(p)));
        }
        // Toolchain folders outside the usual places: readable (unless too
        // wide), and their own credential files hidden wherever they lie.
        // (folder, named by a variable rather than found as a PATH root)
        let mut toolchains: Vec<(PathBuf, bool)> = Vec::new();
        for (name, value) in &user.toolchain_vars {
            if !TOOLCHAIN_VARS.contains(&name.as_str()) {
                continue;
            }
            let values: Vec<PathBuf> = if name == "GOPATH" {
                std::env::split_paths(value).collect()
            } else {
                vec![PathBuf::from(value)]
            };
            readable.extend(
                values
                    .iter()
                    .filter(|p| too_wide(p, home).is_none())
                    .cloned(),
            );
            // GIT_CONFIG_GLOBAL names a file: nothing lies inside it.
            if name != "GIT_CONFIG_GLOBAL" {
                toolchains.extend(
                    values
                        .into_iter()
                        .filter(|p| p.is_absolute())
                        .map(|p| (p, true)),
                );
            }
        }
        if let Some(path) = &user.path {
            for dir in std::env::split_paths(path) {
                if !dir.is_absolute() || too_wide(&dir, home).is_some() {
                    continue;
                }
                let toolchain_root = dir
                    .file_name()
                    .is_some_and(|n| n == "bin" || n == "shims")
                    .then(|| dir.parent().map(Path::to_path_buf))
                    .flatten()
                    .filter(|p| too_wide(p, home).is_none())
                    .filter(|p| home.is_none_or(|h| *p != h.join(".local")));
                // The system's own prefixes (`/usr/bin`'s `/usr`,
                // `/usr/local`) are no toolchain's folder: splitting them
                // would cost every start, and a variable names a toolchain
                // that really lives there.
                toolchains.extend(
                    toolchain_root
                        .iter()
                        .filter(|p| !is_system_prefix(p))
                        .map(|p| (p.clone(), false)),
                );
                readable.extend(toolchain_root);
                readable.push(dir);
            }
        }
        // A toolchain in its usual place under `$HOME` has its credential
        // files on the list already (`.cargo/credentials.toml`); splitting
        // `~/.pyenv` around names no tool keeps there would cost every start.
        if let Some(home) = home {
            let usual: Vec<PathBuf> = HOME_TOOLCHAINS.iter().map(|t| home.join(t)).collect();
            toolchains.retain(|(t, _)| !usual.iter().any(|u| t.starts_with(u)));
        }
        readable.extend(user.allow.iter().cloned());
        let mut hidden = system_secrets(Path::new("/etc/ssh"));
        if let Some(home) = home {
            hidden.extend(CREDENTIALS.iter().map(|p| home.join(p)));
        }
        hidden.extend(moved_credentials(&user.toolchain_vars));
        for (t, named) in &toolchains {
            // A PATH root may be a project (`PROJECT/bin` on PATH), whose
            // `gradle.properties` or `settings.xml` is ordinary settings:
            // only files named for credentials are hidden there.
            hidden.extend(
                TOOLCHAIN_CREDENTIALS
                    .iter()
                    .filter(|c| *named || c.contains("credentials"))
                    .map(|c| t.join(c)),
            );
        }
        hidden.extend(user.hide.iter().cloned());
        hidden.extend(through_links(&hidden));
        // What the user names exactly is shown; an allowed path inside a
        // hidden folder is shown on its own (the deeper entry wins), and a
        // hidden entry inside an allowed folder stays hidden.
        hidden.retain(|h| !user.allow.iter().any(|a| a == h));
        let mut reads = Reads { readable, hidden };
        reads.tidy();
        reads
    }

    /// Sorted, without duplicates, and without a path inside another
    /// readable one unless a hidden path lies between them.
    fn tidy(&mut self) {
        self.readable.sort();
        self.readable.dedup();
        self.hidden.sort();
        self.hidden.dedup();
        // Each path's ancestors looked up in a set: comparing every pair
        // took a millisecond per call for a user's list of 70 paths.
        let all: std::collections::BTreeSet<PathBuf> = self.readable.iter().cloned().collect();
        let hidden = &self.hidden;
        self.readable.retain(|p| {
            !p.ancestors().skip(1).any(|q| {
                all.contains(q) && !hidden.iter().any(|h| p.starts_with(h) && h.starts_with(q))
            })
        });
    }

    /// Whether `path` (absolute, lexically normal) is hidden from programs,
    /// given the roots: the deepest entry that holds it decides (a hidden
    /// one hides, a readable one or a root shows); a path no entry holds is
    /// hidden, except under `/dev`, `/proc` and `/tmp`.
    pub fn hides(&self, path: &Path, roots: &[PathBuf]) -> bool {
        let depth = |p: &PathBuf| path.starts_with(p).then(|| p.components().count());
        let shown = self.readable.iter().chain(roots).filter_map(depth).max();
        let hidden = self.hidden.iter().filter_map(depth).max();
        let always = ["/dev", "/proc", "/tmp"]
            .iter()
            .any(|p| path.starts_with(p));
        match (shown, hidden) {
            (Some(s), Some(h)) => h >= s,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (None, None) => !always,
        }
    }

    /// The hidden paths that exist and lie inside what is readable (the
    /// ones a mount must cover), given the roots.
    pub fn hidden_inside(&self, roots: &[PathBuf], also: &[PathBuf]) -> Vec<PathBuf> {
        // This runs for every call: the paths are compared as bytes once
        // their components are laid out the same way (as `starts_with` would
        // compare them, a component at a time, but without walking them for
        // each pair), and only those inside are looked for on disk.
        let inside: Vec<Vec<u8>> = self
            .readable
            .iter()
            .chain(roots)
            .chain(also)
            .map(|r| laid_out(r))
            .collect();
        self.hidden
            .iter()
            .filter(|h| {
                let h = laid_out(h);
                inside.iter().any(|r| is_under(&h, r))
            })
            .filter(|h| std::fs::symlink_metadata(h).is_ok())
            .cloned()
            .collect()
    }

    /// One block for people (`nib doctor`, nibash_status): what is
    /// readable and what is hidden.
    pub fn describe(&self, home: Option<&Path>) -> String {
        let show = |p: &PathBuf| match home.and_then(|h| p.strip_prefix(h).ok()) {
            Some(rest) => format!("~/{}", rest.display()),
            None => p.display().to_string(),
        };
        let existing: Vec<String> = self
            .readable
            .iter()
            .filter(|p| p.exists())
            .map(show)
            .collect();
        let hidden: Vec<String> = self.hidden.iter().map(show).collect();
        format!(
            "readable (besides the roots, /dev, /proc and a private /tmp): {}\nhidden, even inside those: {}\n",
            existing.join(", "),
            hidden.join(", ")
        )
    }
}

/// `path`'s bytes with its components laid out one way (no doubled or
/// trailing `/`, no `.`), so two such forms compare as their components do.
fn laid_out(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.components()
        .collect::<PathBuf>()
        .as_os_str()
        .as_bytes()
        .to_vec()
}

/// Whether laid-out `path` is `root` or inside it (as `Path::starts_with`).
fn is_under(path: &[u8], root: &[u8]) -> bool {
    path.starts_with(root)
        && (path.len() == root.len() || root.ends_with(b"/") || path[root.len()] == b'/')
}

/// The credential files and folders the variables that move them name:
/// each [`CREDENTIAL_VARS`] value whole, and the credential list's entries
/// of a folder a [`MOVED_HOME_FOLDERS`] variable moves, where it puts them.
/// Relative values name nothing (programs run elsewhere).
fn moved_credentials(vars: &[(String, OsString)]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (name, value) in vars {
        if CREDENTIAL_VARS.contains(&name.as_str()) {
            let values: Vec<PathBuf> = if name == "KUBECONFIG" {
                std::env::split_paths(value).collect()
            } else {
                vec![PathBuf::from(value)]
            };
            out.extend(values.into_iter().filter(|p| p.is_absolute()));
        } else if let Some((_, folder)) = MOVED_HOME_FOLDERS.iter().find(|(n, _)| n == name) {
            let moved = PathBuf::from(value);
            if !moved.is_absolute() {
                continue;
            }
            out.extend(CREDENTIALS.iter().filter_map(|c| {
                Path::new(c)
                    .strip_prefix(folder)
                    .ok()
                    .map(|rest| moved.join(rest))
            }));
        }
    }
    out
}

/// Where the hidden paths whose folder is reached through a link are
/// (`/usr/local/cargo -> /opt/cargo`: `/opt/cargo/credentials.toml`, which
/// `/opt` would show): a path is granted or mounted as it is reached, so
/// each of those is hidden as well. Each folder is resolved once.
fn through_links(hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut resolved: std::collections::BTreeMap<&Path, Option<PathBuf>> =
        std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for h in hidden {
        let (Some(folder), Some(name)) = (h.parent(), h.file_name()) else {
            continue;
        };
        let real = resolved
            .entry(folder)
            .or_insert_with(|| std::fs::canonicalize(folder).ok().filter(|r| r != folder));
        if let Some(real) = real {
            out.push(real.join(name));
        }
    }
    out
}

/// A system folder ([`SYSTEM`]) or `/usr/local`.
fn is_system_prefix(p: &Path) -> bool {
    p == Path::new("/usr/local") || SYSTEM.iter().any(|s| p == Path::new(s))
}

/// Whether `p` is one of the system's secrets ([`SYSTEM_SECRETS`], an ssh
/// host key in `/etc/ssh`): files in `/etc` that no program makes while
/// another runs; under bubblewrap their stand-ins are left to hide them
/// (splitting `/etc`, 150 entries, would double a start's cost).
pub fn is_system_secret(p: &Path) -> bool {
    SYSTEM_SECRETS.iter().any(|s| p == Path::new(s))
        || p.parent() == Some(Path::new("/etc/ssh"))
            && p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ssh_host_") && n.ends_with("_key"))
}

/// Why a folder named by PATH or a variable may not be made readable:
/// it is `/`, `$HOME` or above it (it would open the user's files whole).
fn too_wide(p: &Path, home: Option<&Path>) -> Option<&'static str> {
    if p == Path::new("/") || !p.is_absolute() {
        return Some("the whole system");
    }
    match home {
        Some(h) if h.starts_with(p) => Some("the whole home folder"),
        _ => None,
    }
}

/// The system secrets, and the ssh host keys found in `ssh_dir`.
fn system_secrets(ssh_dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = SYSTEM_SECRETS.iter().map(PathBuf::from).collect();
    if let Ok(entries) = std::fs::read_dir(ssh_dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            let n = name.to_string_lossy();
            if n.starts_with("ssh_host_") && n.ends_with("_key") {
                out.push(ssh_dir.join(&name));
            }
        }
    }
    out.sort();
    out
}

/// How one readable path is granted when hidden paths lie inside it:
/// whole, or as a folder that may be listed while each of its entries is
/// granted on its own (recursively around the hidden ones, which are left
/// out). `list` gives a folder's entries (the real one reads the disk).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grant {
    /// The path and everything beneath it.
    Whole(PathBuf),
    /// Only listing the folder itself (its entries are granted apart).
    ListOnly(PathBuf),
}

/// The grants for each of `allowed`, in order, that leave out every path
/// in `hidden` (laid out once for all of them).
pub fn split_all(
    allowed: &[PathBuf],
    hidden: &[PathBuf],
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> Vec<Grant> {
    let hidden: Vec<Vec<u8>> = hidden.iter().map(|h| laid_out(h)).collect();
    let mut out = Vec::new();
    for a in allowed {
        // Only the hidden paths strictly below the allowed one matter (one
        // that holds the allowed path itself is overruled by it: the user
        // named the deeper path), compared as laid-out bytes: every
        // readable folder is checked against every hidden path at each
        // start.
        let top = laid_out(a);
        let below: Vec<&[u8]> = hidden
            .iter()
            .filter(|h| h.len() > top.len() && is_under(h, &top))
            .map(Vec::as_slice)
            .collect();
        if below.is_empty() {
            out.push(Grant::Whole(a.clone()));
        } else {
            split_into(a, &below, list, &mut out, 0);
        }
    }
    out
}

fn split_into(
    at: &Path,
    below: &[&[u8]],
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
    out: &mut Vec<Grant>,
    depth: usize,
) {
    // Below the allowed path a hidden entry is met exactly (the walk goes
    // entry by entry).
    let here = laid_out(at);
    if depth > 0 && below.contains(&here.as_slice()) {
        return;
    }
    let inside = below
        .iter()
        .any(|h| h.len() > here.len() && is_under(h, &here));
    if !inside || depth > 8 {
        out.push(Grant::Whole(at.to_path_buf()));
        return;
    }
    out.push(Grant::ListOnly(at.to_path_buf()));
    for entry in list(at) {
        split_into(&entry, below, list, out, depth + 1);
    }
}

/// A folder's entries from the disk (nothing for a file or an error).
pub fn list_dir(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laid_out_paths_compare_as_starts_with_does() {
        let paths = [
            "/",
            "/home",
            "/home/",
            "/home/ann",
            "/home/ann/",
            "/home//ann",
            "/home/./ann",
            "/home/anna",
            "/home/ann/.ssh",
            "/home/ann/.ssh/id",
            "/homer",
            "/usr/lib/x",
            "rel",
            "rel/x",
            "relx",
        ];
        for p in paths {
            for r in paths {
                let (p, r) = (Path::new(p), Path::new(r));
                assert_eq!(
                    is_under(&laid_out(p), &laid_out(r)),
                    p.starts_with(r),
                    "{} under {}",
                    p.display(),
                    r.display()
                );
            }
        }
    }

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn a_folder_holding_a_hidden_path_is_granted_as_its_other_entries() {
        let list = |d: &Path| -> Vec<PathBuf> {
            match d.to_str() {
                Some("/h/.cargo") => vec![
                    p("/h/.cargo/bin"),
                    p("/h/.cargo/credentials.toml"),
                    p("/h/.cargo/registry"),
                ],
                _ => Vec::new(),
            }
        };
        let hidden = [
            p("/h/.cargo/credentials.toml"),
            p("/elsewhere"),
            p("/h/.docker"),
        ];
        assert_eq!(
            split_all(&[p("/h/.cargo")], &hidden, &list),
            vec![
                Grant::ListOnly(p("/h/.cargo")),
                Grant::Whole(p("/h/.cargo/bin")),
                Grant::Whole(p("/h/.cargo/registry")),
            ]
        );
        assert_eq!(
            split_all(&[p("/usr")], &hidden, &list),
            vec![Grant::Whole(p("/usr"))]
        );
        assert_eq!(
            split_all(&[p("/h/.docker/config.json")], &hidden, &list),
            vec![Grant::Whole(p("/h/.docker/config.json"))],
            "a path the user allowed inside a hidden folder is granted"
        );
    }

    #[test]
    fn a_hidden_path_reached_through_a_link_is_hidden_where_it_lies() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(d.join("real")).unwrap();
        std::os::unix::fs::symlink(d.join("real"), d.join("cargo")).unwrap();
        let user = UserReads {
            toolchain_vars: vec![("CARGO_HOME".into(), d.join("cargo").into_os_string())],
            ..UserReads::default()
        };
        let reads = Reads::for_user(&user);
        assert!(reads.hidden.contains(&d.join("cargo/credentials.toml")));
        assert!(
            reads.hidden.contains(&d.join("real/credentials.toml")),
            "{:?}",
            reads.hidden
        );
        assert!(reads.hides(&d.join("real/credentials.toml"), &[d.join("real")]));
    }

    #[test]
    fn the_user_policy_names_toolchains_and_hides_credentials() {
        // Nothing is looked up on the disk but /etc/ssh.
        let h = Path::new("/home/u");
        let user = UserReads {
            home: Some(h.to_path_buf()),
            path: Some(
                std::env::join_paths([
                    h.join(".pyenv/shims"),
                    h.join(".local/bin"),
                    h.to_path_buf(),
                    p("/opt/sdk/bin"),
                    p("/usr/bin"),
                    p("/usr/local/bin"),
                    p("/"),
                    p("relative/bin"),
                ])
                .unwrap(),
            ),
            toolchain_vars: vec![
                ("CARGO_HOME".into(), "/srv/cargo".into()),
                (
                    "GOPATH".into(),
                    std::env::join_paths([p("/g1"), h.to_path_buf()]).unwrap(),
                ),
                ("GIT_CONFIG_GLOBAL".into(), "/srv/gitconfig".into()),
                ("DOCKER_CONFIG".into(), "/srv/docker".into()),
                ("KUBECONFIG".into(), "/srv/k1:/srv/k2:rel".into()),
                ("XDG_CONFIG_HOME".into(), "/srv/cfg".into()),
                ("XDG_DATA_HOME".into(), "relative".into()),
            ],
            allow: vec![
                h.join(".docker/config.json"),
                h.join(".cargo/credentials.toml"),
            ],
            hide: vec![p("/opt/sdk/secret")],
        };
        let reads = Reads::for_user(&user);
        let show: Vec<String> = reads
            .readable
            .iter()
            .map(|r| r.to_string_lossy().replace("/home/u", "~"))
            .collect();
        for want in [
            "~/.cargo",
            "~/.pyenv",
            "~/.local/bin",
            "/opt",
            "/srv/cargo",
            "/g1",
            "~/.docker/config.json",
        ] {
            assert!(
                show.contains(&want.to_string()),
                "{want} readable: {show:?}"
            );
        }
        // Inside /opt, so folded into it; never $HOME, `/` or a relative path.
        for never in ["/opt/sdk/bin", "~", "/", "relative/bin", "~/.local"] {
            assert!(
                !show.contains(&never.to_string()),
                "{never} not readable: {show:?}"
            );
        }
        assert!(reads.hidden.contains(&h.join(".ssh")));
        assert!(reads.hidden.contains(&h.join(".cargo/credentials")));
        assert!(
            !reads.hidden.contains(&h.join(".cargo/credentials.toml")),
            "the user named it"
        );
        assert!(reads.hidden.contains(&p("/etc/shadow")));
        assert!(reads.hidden.contains(&p("/opt/sdk/secret")));
        assert!(reads.hidden.contains(&h.join(".docker")));
        assert!(
            !reads.hides(&h.join(".docker/config.json"), &[]),
            "the deeper entry wins"
        );
        assert!(reads.hides(&h.join(".docker/other.json"), &[]));
        assert!(reads.hides(&p("/opt/sdk/secret/x"), &[]));
        assert!(reads.hides(&h.join("other-project/x"), &[]));
        assert!(reads.hides(&h.join(".ssh/id_ed25519"), &[h.join("proj")]));
        assert!(!reads.hides(&h.join("proj/src/a.rs"), &[h.join("proj")]));
        assert!(reads.hides(&p("/srv/elsewhere"), &[]));
        assert!(!reads.hides(&p("/usr/bin/git"), &[]));
        // Toolchain folders wherever they lie hold their credential files
        // hidden; the variables that move credential files are followed.
        for hidden in [
            "/srv/cargo/credentials.toml",
            "/srv/cargo/credentials",
            "/g1/credentials",
            "/opt/sdk/credentials.toml",
            "/opt/sdk/.credentials",
            "/srv/docker",
            "/srv/k1",
            "/srv/k2",
            "/srv/cfg/gh",
            "/srv/cfg/gcloud",
            "/srv/cfg/git/credentials",
            "/home/u/.sbt/.credentials",
            "/home/u/.ivy2/.credentials",
        ] {
            assert!(
                reads.hidden.contains(&p(hidden)),
                "{hidden}: {:?}",
                reads.hidden
            );
        }
        assert!(reads.hides(&p("/srv/cargo/credentials.toml"), &[]));
        assert!(!reads.hides(&p("/srv/cargo/registry/x"), &[]));
        assert!(reads.hides(&p("/opt/sdk/credentials.toml"), &[]));
        assert!(!reads.hides(&p("/opt/sdk/lib/x"), &[]));
        for never in [
            "/srv/gitconfig/credentials",
            "rel",
            "relative/keyrings",
            "/home/u/.pyenv/credentials",
            "/usr/credentials",
            "/usr/local/credentials",
            "/opt/sdk/conf/settings.xml",
            "/opt/sdk/gradle.properties",
        ] {
            assert!(!reads.hidden.contains(&p(never)), "{never}");
        }
        assert!(
            !reads.hides(&p("/srv/gitconfig"), &[]),
            "git's file stays readable"
        );
    }
}
