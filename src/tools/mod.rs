//! The tools nib offers as one table: the file tools (`nib-files`) and the
//! shell's (nibash, nibash_status, nibash_control, skim), their definitions and one
//! dispatch function shared by the MCP server and the CLI verbs. It knows
//! nothing of MCP: `server` wraps the output in a CallToolResult, `cli`
//! prints it.

pub mod nibash;

use std::sync::Arc;

use nib_files::config::Config;
use nib_files::context::args::Args;
use nib_files::context::{Ctx, ToolOutput};
use serde_json::{Map, Value, json};

use crate::nibash::Nibash;
use crate::nibash::jobs::Owner;

pub use nib_files::tools::{CallError, OUTPUT_CAP, ToolDef, call_file_tool};

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

/// The tool definitions offered under this configuration: the shell tools
/// (nibash, nibash_status, nibash_control, skim) only while the shell is on.
pub fn definitions_for(config: &Config) -> Vec<ToolDef> {
    definitions()
        .into_iter()
        .filter(|d| {
            config.shell
                || !matches!(
                    d.name,
                    "nibash" | "nibash_status" | "nibash_control" | "skim"
                )
        })
        .collect()
}

/// All tool definitions: the file tools', then the shell's.
pub fn definitions() -> Vec<ToolDef> {
    let mut defs = nib_files::tools::definitions();
    defs.extend(shell_definitions());
    defs
}

/// The shell tools' definitions.
fn shell_definitions() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "nibash",
            description: "Run a command line in nibash, a bash interpreter. Every call starts afresh in the \
                project directory (cd, variables and functions do not carry over); programs get empty stdin \
                and no pager. cat, head, tail, grep, egrep, fgrep, rg, sed -n, cut -c and wc print \
                [PATH#TAG] blocks of anchored rows (edit anchors) when their output reaches you and nib knows \
                their options; piped, redirected or inside $(...) they are the system programs. rm and unlink \
                move files to the trash (trash list, trash restore [-f] PATH). A command still running at its \
                timeout (default 2 minutes, at most 10) goes on as a job %N; background: true or cmd & start \
                one; jobs, wait %N and kill %N work across calls. Output over 400 rows or 30 KiB is cut to the \
                rows that matter (numbered N|TEXT by log line) and saved whole to a log. hash -d name=dir \
                names a folder.",
            schema: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line."},
                    "description": {"type": "string", "description": "What it is for, in a few words."},
                    "expect": {"type": "string", "description": "What you want to learn from it (did the build pass; which tests failed); steers which rows of long output stay."},
                    "timeout": {"type": "integer", "description": "Seconds before it turns into a job (default 120, at most 600); values over 600 are read as milliseconds."},
                    "background": {"type": "boolean", "description": "Start it as a job at once."}
                },
                "required": ["command"]
            }),
            read_only: false,
        },
        ToolDef {
            name: "nibash_status",
            description: "List running nibash calls and jobs with their last lines (tail), show one's output \
                (view: %N), and say which sandbox layers are in force. Reads only: nibash_control stops a job, \
                restores a trashed path and switches summaries.",
            schema: json!({
                "type": "object",
                "properties": {
                    "tail": {"type": "integer", "minimum": 0, "description": "Last lines shown per call (default 5)."},
                    "view": {"type": "string", "description": "A call or job (%3) whose output to show."},
                    "format": {"type": "string", "enum": ["text", "json"], "description": "json: the same status as one JSON document (for a client's own interface)."}
                }
            }),
            read_only: true,
        },
        ToolDef {
            name: "nibash_control",
            description: "Stop a nibash job (stop: %N), put a trashed path back (restore: PATH), or turn \
                summaries of long output off or on for this session (summaries). nibash_status lists the jobs.",
            schema: json!({
                "type": "object",
                "properties": {
                    "stop": {"type": "string", "description": "A job (%3) to stop."},
                    "restore": {"type": "string", "description": "A path to put back from the trash."},
                    "summaries": {"type": "boolean", "description": "false turns summaries of long output off for this session, true back on."}
                }
            }),
            read_only: false,
        },
        ToolDef {
            name: "skim",
            description: "Read long files (logs, test reports) for what expect asks (did the build pass; which \
                tests failed and why), as plain N|TEXT rows shaped like nibash's long output; never edit \
                anchors. Skimming again with the same expect shows only lines added since; with another \
                expect, lines already shown are left out.",
            schema: json!({
                "type": "object",
                "properties": {
                    "paths": {"type": "array", "items": {"type": "string"}},
                    "expect": {"type": "string", "description": "What to look for."}
                },
                "required": ["paths", "expect"]
            }),
            read_only: true,
        },
    ]
}

/// Runs a tool by name; the shell's tools with the shell's state `shell`
/// (jobs, warm worker, watcher), which the server keeps for the session,
/// as `owner` (the agent whose jobs they reach: empty for the stdio client
/// and the CLI, the token's NAME over HTTP).
pub fn call(
    name: &str,
    arguments: Option<Map<String, Value>>,
    ctx: &Ctx,
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
        _ if TOOL_NAMES.contains(&name) => call_file_tool(name, arguments, ctx),
        other => Err(CallError::UnknownTool(other.to_string(), TOOL_NAMES)),
    }
}
