//! Command-line verbs: every tool is also `nib VERB`, printing exactly what the
//! tool returns, so people and CI bots can use nib without an MCP client.
//!
//! Exit status: 0 on success, 1 when the tool reports an error, 2 for a usage
//! error; `nib grep` 0 for a match, 1 for none, 2 for any error; `nib sh` the
//! command's; `nib undo` 0 when nothing is recorded (docs/cli.md has every
//! verb's). The MCP server is `nib` with no arguments (see `main`).
//!
//! This file only names the rooms, each importing only those beneath it:
//! `parse` (the arguments into a [`Command`]), `usage` (the usage text and
//! each verb's help page), `run` (a tool verb run and printed), `doctor`,
//! `undo` and `shape` (the verbs that are not tools), `output` (an answer's
//! exit status, wording and JSON form), and `command` (what a command line
//! asks for) beneath them all.

mod command;
mod doctor;
mod output;
mod parse;
mod run;
mod shape;
mod undo;
mod usage;

pub use command::{Command, ToolCall, UsageError};
pub use doctor::doctor;
pub use parse::parse;
pub use run::run_tool;
pub use shape::{Shape, shape};
pub use undo::{undo, undo_diff, undo_floor};
pub use usage::{USAGE, help_page, verb_usage};
