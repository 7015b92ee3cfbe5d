//! What the agent asked a nibash call to run ([`CallArgs`]) and the bounds
//! on its timeout.

use std::time::Duration;

/// The default timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest timeout.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// What the agent asked to run.
#[derive(Clone, Debug)]
pub struct CallArgs {
    /// The command line.
    pub command: String,
    /// What it is for, in the agent's words.
    pub description: Option<String>,
    /// What the agent expects to learn (steers which rows of long output stay).
    pub expect: Option<String>,
    /// When it turns into a job.
    pub timeout: Duration,
    /// Start it as a job at once.
    pub background: bool,
}
