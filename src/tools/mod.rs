//! The tools nib offers as one table: the file tools (`nib-files`) and the
//! shell's (nibash, nibash_status, nibash_control, skim), their definitions and one
//! dispatch function shared by the MCP server and the CLI verbs. It knows
//! nothing of MCP: `server` wraps the output in a CallToolResult, `cli`
//! prints it.

pub mod definitions;
pub mod nibash;

use std::sync::Arc;

use nib_files::context::args::Args;
use nib_files::context::{Ctx, ToolOutput};
use serde_json::{Map, Value};

use crate::broker_ctx::BrokerCtx;
use crate::nibash::Nibash;
use crate::nibash::jobs::Owner;

pub use definitions::{ToolDef, definitions, definitions_for};
pub use nib_files::tools::{CallError, OUTPUT_CAP, call_file_tool};
use nib_files::tools::{FileRequest, run_file_request};

/// The names of the tools, in the order they are listed.
pub const TOOL_NAMES: &[&str] = &[
    "read",
    "grep",
    "find",
    "edit",
    "write",
    "nibash",
    "nibash_status",
    "nibash_control",
    "skim",
];

/// Runs a tool by name; the shell's tools with the shell's state `shell`
/// (jobs, warm worker, watcher), which the server keeps for the session,
/// as `owner` (the agent whose jobs they reach: empty for the stdio client
/// and the CLI, the token's NAME over HTTP).
pub fn call(
    name: &str,
    arguments: Option<Map<String, Value>>,
    ctx: &BrokerCtx,
    shell: &Arc<Nibash>,
    owner: &Owner,
) -> Result<ToolOutput, CallError> {
    match name {
        "nibash" => {
            let request = nibash::NibashRequest::from_args(Args::new(arguments))?;
            Ok(nibash::run(request, ctx, shell, owner)?)
        }
        "nibash_status" => Ok(nibash::status(Args::new(arguments), ctx, shell, owner)?),
        "nibash_control" => Ok(nibash::control(Args::new(arguments), ctx, shell, owner)?),
        "skim" => Ok(nibash::skim(
            nibash::SkimRequest::from_args(Args::new(arguments))?,
            ctx,
        )?),
        "edit" | "write" => {
            // Noted, with what it puts in place before it is there, so a
            // nibash call running meanwhile (another agent's) does not name
            // these writes as its changes, and never waits for this call.
            let request = FileRequest::parse(name, arguments)?;
            let mut running = shell.tool_writes.begin();
            let out = run_file_request(
                request,
                &Ctx {
                    placing: Some(&running),
                    ..ctx.files.clone()
                },
            );
            if out.as_ref().is_ok_and(|o| !o.is_error) {
                running.succeeded();
            }
            out
        }
        _ if TOOL_NAMES.contains(&name) => call_file_tool(name, arguments, ctx),
        other => Err(CallError::UnknownTool(other.to_string(), TOOL_NAMES)),
    }
}
