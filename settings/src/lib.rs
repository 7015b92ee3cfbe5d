//! nib's settings: the environment variables nib reads, each named once,
//! and the startup configuration ([`Config`]) built from them, with the
//! model's settings ([`llm`]). A leaf: it depends on no crate of nib's, and
//! no other crate reads the environment for a setting; each layer is handed
//! what it reads: the file tools only [`FileTools`] (through their call
//! context), the sandbox only the policy the broker builds from the
//! `Config`, the broker the whole `Config`.

#![deny(missing_docs)]

pub mod llm;

use std::path::PathBuf;

/// The project directory; relative paths in tool arguments start here.
/// Unset: the working directory.
pub const NIB_DIRECTORY: &str = "NIB_DIRECTORY";

/// How long the server waits for a client's `roots/list` answer, in
/// milliseconds (default 3000). Tests shorten it.
pub const NIB_ROOTS_TIMEOUT_MS: &str = "NIB_ROOTS_TIMEOUT_MS";

/// On unless `0` (or `false`): every tool, reads included, stays inside the
/// roots (resolved by the kernel); writes to files that make code run need a
/// person's approval; programs run confined ([`sandbox_on`]).
pub const NIB_SANDBOX: &str = "NIB_SANDBOX";

/// Whether the sandbox is on: nib's default, so every route (setup, the
/// plugin, npx, a bare `nib`) gets it without writing anything; only
/// `NIB_SANDBOX=0` (or `false`, `off`, `no`) turns it off.
pub fn sandbox_on() -> bool {
    on_unless_off(NIB_SANDBOX)
}

/// A setting that is on unless set to `0`, `false`, `off` or `no`.
fn on_unless_off(name: &str) -> bool {
    std::env::var(name).map_or(true, |v| {
        !["0", "false", "off", "no"].contains(&v.trim().to_ascii_lowercase().as_str())
    })
}

/// `1`: a write outside the roots asks the user (elicitation) and is refused
/// without an approval.
pub const NIB_CONFIRM_OUTSIDE_ROOTS: &str = "NIB_CONFIRM_OUTSIDE_ROOTS";

/// `1`: sandboxed programs get the network.
pub const NIB_SANDBOX_NETWORK: &str = "NIB_SANDBOX_NETWORK";
/// On unless `0` (or `false`, `off`, `no`): under the sandbox, a host not in
/// NIB_SANDBOX_NETWORK is put to the user (elicitation) when the client can
/// be asked, and allowed for the session when approved; a client that
/// cannot be asked gets it refused and named. `0` refuses such hosts
/// without asking.
pub const NIB_CONFIRM_NETWORK: &str = "NIB_CONFIRM_NETWORK";

/// `0`: `NIB_SANDBOX=1` confines with Landlock + seccomp alone, even where
/// bubblewrap works (containers without user namespaces; testing each mode).
pub const NIB_SANDBOX_BWRAP: &str = "NIB_SANDBOX_BWRAP";

/// Folders (`:` separated) bound read-only into the sandbox.
pub const NIB_SANDBOX_BIND: &str = "NIB_SANDBOX_BIND";

/// Paths (`:` separated) hidden from sandboxed programs on top of the
/// default credential list (a project's nib.json `sandbox.hide` adds more).
pub const NIB_SANDBOX_HIDE: &str = "NIB_SANDBOX_HIDE";

/// Names (`,` separated) of secret-looking variables sandboxed programs get
/// anyway; the others are withheld under `NIB_SANDBOX=1`.
pub const NIB_SANDBOX_ENV: &str = "NIB_SANDBOX_ENV";

/// Brokered secrets (`;` separated `VAR@HOST[,HOST…][=basic:USER|=header:NAME]`):
/// sandboxed programs see a placeholder in VAR, and nib's proxy puts the
/// real value in the declared header of requests to those hosts (the
/// broker's network proxy reads them).
pub const NIB_SANDBOX_SECRETS: &str = "NIB_SANDBOX_SECRETS";

/// The memory a call's programs may use together (`8G`, `512M`, bytes;
/// default 8G): a memory cgroup where one can be made, and each process's
/// private memory (RLIMIT_DATA) everywhere.
pub const NIB_SANDBOX_MEMORY: &str = "NIB_SANDBOX_MEMORY";

/// `0` turns nibash (and skim, nibash_status) off.
pub const NIB_SHELL: &str = "NIB_SHELL";

/// `0`: no worker is started ahead of the next nibash call.
pub const NIB_WARM: &str = "NIB_WARM";
/// `1`: providers run under `NIB_SANDBOX=1` too (confined like nibash
/// programs); without it a sandboxed nib starts none and says so.
pub const NIB_PROVIDERS_SANDBOX: &str = "NIB_PROVIDERS_SANDBOX";
/// How long a provider may take to start or to answer one call, in
/// milliseconds (default 60000).
pub const NIB_PROVIDER_TIMEOUT_MS: &str = "NIB_PROVIDER_TIMEOUT_MS";

/// `0` turns off the names nib gives folders an agent keeps seeing.
pub const NIB_AUTO_NAMES: &str = "NIB_AUTO_NAMES";

/// `1`: Claude Code was started with nib's channel, so a job that ends is
/// announced at once (`notifications/claude/channel`).
pub const NIB_CHANNEL: &str = "NIB_CHANNEL";

/// How long the server waits for the user to answer an approval, in
/// milliseconds (default 120000).
pub const NIB_APPROVAL_TIMEOUT_MS: &str = "NIB_APPROVAL_TIMEOUT_MS";

/// Where nib keeps state that outlives a process (the edit journal).
/// Unset: `$XDG_STATE_HOME/nib`, else `~/.local/state/nib`.
pub const NIB_STATE_DIR: &str = "NIB_STATE_DIR";

/// Test-only fault injection: `edit-between-files:MARKER` makes a multi-file
/// edit create MARKER and stop for a minute after its first file, so a test
/// can kill the process there and check the journal's recovery.
pub const NIB_FAILPOINT: &str = "NIB_FAILPOINT";

/// Log filter for stderr diagnostics (tracing's env-filter syntax; default `warn`).
pub const NIB_LOG: &str = "NIB_LOG";

/// Startup settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The project directory, absolute and canonical.
    pub project_dir: PathBuf,
    /// The bound on a `roots/list` round trip.
    pub roots_timeout: std::time::Duration,
    /// Where the edit journal lives.
    pub state_dir: PathBuf,
    /// Test-only fault injection ([`NIB_FAILPOINT`]).
    pub failpoint: Option<String>,
    /// [`NIB_SANDBOX`] is on.
    pub sandbox: bool,
    /// [`NIB_CONFIRM_OUTSIDE_ROOTS`] is on.
    pub confirm_outside_roots: bool,
    /// The bound on an approval round trip.
    pub approval_timeout: std::time::Duration,
    /// [`NIB_SANDBOX_NETWORK`] is on (`1`: every host).
    pub sandbox_network: bool,
    /// [`NIB_SANDBOX_NETWORK`] names hosts: programs reach them through
    /// nib's proxy (less nib.json's `network.deny`).
    pub network_hosts: Option<String>,
    /// [`NIB_CONFIRM_NETWORK`] is not `0`: hosts not listed are put to the
    /// user when the client can be asked.
    pub confirm_network: bool,
    /// bubblewrap may be used ([`NIB_SANDBOX_BWRAP`] is not `0`).
    pub sandbox_bwrap: bool,
    /// [`NIB_SANDBOX_BIND`] folders.
    pub sandbox_bind: Vec<PathBuf>,
    /// [`NIB_SANDBOX_HIDE`] paths.
    pub sandbox_hide: Vec<PathBuf>,
    /// [`NIB_SANDBOX_ENV`] names.
    pub sandbox_env: Vec<String>,
    /// [`NIB_SANDBOX_SECRETS`] as written.
    pub sandbox_secrets: Option<String>,
    /// [`NIB_SANDBOX_MEMORY`] in bytes, when set to a size.
    pub sandbox_memory: Option<u64>,
    /// nibash is on ([`NIB_SHELL`] is not `0`).
    pub shell: bool,
    /// [`NIB_CHANNEL`] is on.
    pub channel: bool,
    /// Warm workers are on ([`NIB_WARM`] is not `0`).
    pub warm: bool,
    /// Automatic names for folders shown often ([`NIB_AUTO_NAMES`] is not `0`).
    pub auto_names: bool,
    /// [`NIB_PROVIDERS_SANDBOX`] is on.
    pub providers_sandbox: bool,
    /// The bound on a provider's start and on each of its calls.
    pub provider_timeout: std::time::Duration,
    /// `--provider NAME=PROGRAM` on nib's command line, in order.
    pub cli_providers: Vec<(String, String)>,
    /// The folder of nib's settings (`setup.json`): `$XDG_CONFIG_HOME/nib`,
    /// else `~/.config/nib`.
    pub config_dir: PathBuf,
    /// Model calls: deciders, summarizers, the rule judge (`NIB_DECIDER*`).
    pub model: llm::Settings,
}

/// What the file tools read of the settings (nib-files' call context), and
/// no more: the broker's own settings (the model, the network, providers,
/// the sandbox's layers) stay in [`Config`], which the file tools never see.
#[derive(Clone, Debug)]
pub struct FileTools {
    /// Where the edit journal lives ([`NIB_STATE_DIR`]).
    pub state_dir: PathBuf,
    /// Test-only fault injection ([`NIB_FAILPOINT`]).
    pub failpoint: Option<String>,
    /// [`NIB_SANDBOX`] is on: read's `path@REV` runs git only inside the roots.
    pub sandbox: bool,
    /// [`NIB_SHELL`] is on: read's `path@REV` may run git at all.
    pub programs: bool,
}

/// A size as people write it: bytes, or a number with K, M or G (powers of
/// 1024; a trailing `B`/`iB` is allowed). `None` for anything else, and for 0.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_uppercase();
    let t = t
        .strip_suffix("IB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(&t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K')) => (&t[..i], 10),
        Some((i, 'M')) => (&t[..i], 20),
        Some((i, 'G')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift).filter(|&b| b > 0)
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// The folder of nib's settings: `$XDG_CONFIG_HOME/nib`, else `~/.config/nib`.
pub fn config_dir() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/"))
                .join(".config")
        })
        .join("nib")
}

/// `$NIB_STATE_DIR`, else `$XDG_STATE_HOME/nib`, else `~/.local/state/nib`,
/// else a folder in the temp directory.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(NIB_STATE_DIR).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("nib");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(h).join(".local/state/nib");
    }
    std::env::temp_dir().join("nib-state")
}

impl Config {
    /// The part of these settings the file tools read.
    pub fn file_tools(&self) -> FileTools {
        FileTools {
            state_dir: self.state_dir.clone(),
            failpoint: self.failpoint.clone(),
            sandbox: self.sandbox,
            programs: self.shell,
        }
    }

    /// Reads the configuration from the environment.
    pub fn from_env() -> std::io::Result<Config> {
        let dir = match std::env::var_os(NIB_DIRECTORY) {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => std::env::current_dir()?,
        };
        let project_dir = std::fs::canonicalize(&dir).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "project directory {}: {e}; set {NIB_DIRECTORY} to an existing folder",
                    dir.display()
                ),
            )
        })?;
        let roots_timeout = std::env::var(NIB_ROOTS_TIMEOUT_MS)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(3000);
        Ok(Config {
            project_dir,
            roots_timeout: std::time::Duration::from_millis(roots_timeout),
            state_dir: state_dir(),
            failpoint: std::env::var(NIB_FAILPOINT).ok().filter(|v| !v.is_empty()),
            sandbox: sandbox_on(),
            channel: flag(NIB_CHANNEL),
            warm: std::env::var(NIB_WARM).map_or(true, |v| v != "0"),
            auto_names: std::env::var(NIB_AUTO_NAMES).map_or(true, |v| v != "0"),
            shell: std::env::var(NIB_SHELL)
                .map_or(true, |v| v != "0" && !v.eq_ignore_ascii_case("false")),
            confirm_outside_roots: flag(NIB_CONFIRM_OUTSIDE_ROOTS),
            sandbox_network: flag(NIB_SANDBOX_NETWORK),
            confirm_network: on_unless_off(NIB_CONFIRM_NETWORK),
            network_hosts: std::env::var(NIB_SANDBOX_NETWORK).ok().filter(|v| {
                let v = v.trim();
                !v.is_empty()
                    && !["0", "1", "true", "false"].contains(&v.to_ascii_lowercase().as_str())
            }),
            sandbox_bwrap: std::env::var(NIB_SANDBOX_BWRAP)
                .map_or(true, |v| v != "0" && !v.eq_ignore_ascii_case("false")),
            sandbox_bind: std::env::var_os(NIB_SANDBOX_BIND)
                .map(|v| {
                    std::env::split_paths(&v)
                        .filter(|p| !p.as_os_str().is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            sandbox_hide: std::env::var_os(NIB_SANDBOX_HIDE)
                .map(|v| {
                    std::env::split_paths(&v)
                        .filter(|p| p.is_absolute())
                        .collect()
                })
                .unwrap_or_default(),
            sandbox_env: std::env::var(NIB_SANDBOX_ENV)
                .map(|v| {
                    v.split(',')
                        .map(|n| n.trim().to_string())
                        .filter(|n| !n.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            sandbox_secrets: std::env::var(NIB_SANDBOX_SECRETS)
                .ok()
                .filter(|v| !v.trim().is_empty()),
            sandbox_memory: std::env::var(NIB_SANDBOX_MEMORY).ok().and_then(|v| {
                let size = parse_size(&v);
                if size.is_none() {
                    tracing::warn!(
                        "{NIB_SANDBOX_MEMORY}={v:?} is not a size (8G, 512M or bytes): the default 8G applies"
                    );
                }
                size
            }),
            approval_timeout: std::time::Duration::from_millis(
                std::env::var(NIB_APPROVAL_TIMEOUT_MS)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(120_000),
            ),
            providers_sandbox: flag(NIB_PROVIDERS_SANDBOX),
            provider_timeout: std::time::Duration::from_millis(
                std::env::var(NIB_PROVIDER_TIMEOUT_MS)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(60_000),
            ),
            cli_providers: Vec::new(),
            config_dir: config_dir(),
            model: llm::Settings::from_env(&config_dir()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_size("8G"), Some(8 << 30));
        assert_eq!(parse_size("512m"), Some(512 << 20));
        assert_eq!(parse_size(" 64 KiB"), Some(64 << 10));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("2GB"), Some(2 << 30));
        for bad in ["", "0", "G", "-1G", "1.5G", "8T", "lots"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }
}
