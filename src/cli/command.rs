//! What a command line asks for: the [`Command`], a tool verb's
//! [`ToolCall`], and the [`UsageError`] of one that cannot be used. Reading
//! the arguments into them is `parse`'s; running them is the verbs' rooms'.

use crate::tools::nibash::{NibashRequest, SkimRequest};
use nib_files::tools::FileRequest;

use super::shape::Shape;

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// Serve MCP on stdio, with the providers named by `--provider NAME=PROGRAM`.
    Serve(Vec<(String, String)>),
    /// Serve MCP over streamable HTTP (`nib serve --http ADDR --token-file FILE`).
    ServeHttp(crate::serve_http::Options),
    /// Print the version.
    Version,
    /// Print usage.
    Help,
    /// Print one verb's usage.
    HelpFor(String),
    /// Report what the sandbox can apply here.
    Doctor,
    /// Answer a Claude Code hook event from stdin.
    Hook,
    /// One line about the project's running nibash calls and jobs.
    Statusline,
    /// Register nib with the clients.
    Setup(crate::setup::SetupArgs),
    /// Run a tool verb; `json`: print the answer as one JSON object.
    Tool {
        /// The call.
        call: ToolCall,
        /// `--json` was given.
        json: bool,
    },
    /// Shape a saved log as nibash would show it.
    Shape(Shape),
    /// Put a change of nib's back (`None`: list them).
    Undo(Option<usize>),
    /// `nib undo --diff`: the newest change as a diff.
    UndoDiff,
}

/// A tool verb's call: the tool's typed request, as the MCP server parses
/// a client's arguments into it.
#[derive(Debug, PartialEq, Eq)]
pub enum ToolCall {
    /// read, grep, find, edit or write.
    File(FileRequest),
    /// `nib sh`: the nibash tool.
    Nibash(NibashRequest),
    /// `nib skim`.
    Skim(SkimRequest),
    /// A flag's value the tool cannot use (`--mode lots`): the tool and
    /// what is wrong, naming the flag; nothing runs.
    Refused(&'static str, String),
}

impl ToolCall {
    /// The tool's name.
    pub fn name(&self) -> &'static str {
        match self {
            ToolCall::File(r) => r.name(),
            ToolCall::Nibash(_) => "nibash",
            ToolCall::Skim(_) => "skim",
            ToolCall::Refused(name, _) => name,
        }
    }
}

/// A command line that cannot be used: what is wrong, then the usage to
/// follow (the verb's own when a verb was named, else every verb's).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub(super) String);
