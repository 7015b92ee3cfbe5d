//! A word of a command as far as it is known before the line runs: the
//! one type `extract` (which finds commands) and `wrappers` (which finds
//! the command a wrapper runs) both speak, so neither imports the other's
//! module for it.

/// A word of a command, as far as it is known before the line runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// Its value after quote removal.
    Literal(String),
    /// Expanded at run time (variables, substitutions, globs).
    Dynamic(String),
}

impl Arg {
    /// The literal value, if known.
    pub fn literal(&self) -> Option<&str> {
        match self {
            Arg::Literal(s) => Some(s),
            Arg::Dynamic(_) => None,
        }
    }

    /// The word as written (for messages).
    pub fn text(&self) -> &str {
        match self {
            Arg::Literal(s) | Arg::Dynamic(s) => s,
        }
    }
}
