//! Environment variables nib reads, each named once, and the startup
//! configuration built from them.
//!
//! Tools never read the environment themselves: they get a [`Config`].

use std::path::PathBuf;

/// The project directory; relative paths in tool arguments start here.
/// Unset: the working directory.
pub const NIB_DIRECTORY: &str = "NIB_DIRECTORY";

/// How long the server waits for a client's `roots/list` answer, in
/// milliseconds (default 3000). Tests shorten it.
pub const NIB_ROOTS_TIMEOUT_MS: &str = "NIB_ROOTS_TIMEOUT_MS";

/// Log filter for stderr diagnostics (tracing's env-filter syntax; default `warn`).
pub const NIB_LOG: &str = "NIB_LOG";

/// Startup settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The project directory, absolute and canonical.
    pub project_dir: PathBuf,
    /// The bound on a `roots/list` round trip.
    pub roots_timeout: std::time::Duration,
}

impl Config {
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
        })
    }
}
