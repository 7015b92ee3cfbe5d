//! The file tools (read, grep, find, edit, write): their typed requests and
//! one dispatch function, [`call_file_tool`], shared by the broker's MCP
//! server and CLI (through its tool table, which adds the shell's tools)
//! and by nibash's own commands inside the sandbox. The tools' MCP
//! definitions (descriptions, JSON schemas) live with the server, in the
//! broker's `tools::definitions`.
//!
//! A tool takes its typed request ([`FileRequest`]: `ReadRequest`,
//! `GrepRequest`, … beside each tool, read leniently from a client's
//! arguments through [`crate::context::args::Args`]) and a [`Ctx`]
//! (workspace and what the agent has seen) and returns a [`ToolOutput`] —
//! both from [`crate::context`], the layer beneath every tool. It knows
//! nothing of MCP and nothing of the shell: the parts of the process that
//! call a tool build its request, never a JSON map.

pub mod edit;
pub mod find;
pub mod grep;
pub mod read;
pub mod write;

use serde_json::{Map, Value};

use crate::context::args::{ArgError, Args};
use crate::context::{Ctx, ToolOutput};

pub use nib_text::blocks::OUTPUT_CAP;

/// A call that cannot be routed or whose arguments cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No tool has this name; the names that exist where it was called.
    #[error("unknown tool \"{0}\"; the tools are {list}", list = .1.join(", "))]
    UnknownTool(String, &'static [&'static str]),
    /// The arguments are of the wrong type.
    #[error("{0}")]
    Args(#[from] ArgError),
}

/// The file tools' names, in the order they are listed.
pub const FILE_TOOL_NAMES: &[&str] = &["read", "grep", "find", "edit", "write"];

/// One file tool's call, typed: what [`call_file_tool`] parses a name and
/// its arguments into, and what the command line, the worker's own commands
/// and the providers' locations build themselves. Each tool's request lives
/// beside the tool and reads the tool's schema leniently.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileRequest {
    /// `read`.
    Read(read::ReadRequest),
    /// `grep`.
    Grep(grep::GrepRequest),
    /// `find`.
    Find(find::FindRequest),
    /// `edit`.
    Edit(edit::EditRequest),
    /// `write`.
    Write(write::WriteRequest),
}

impl FileRequest {
    /// The tool's name.
    pub fn name(&self) -> &'static str {
        match self {
            FileRequest::Read(_) => "read",
            FileRequest::Grep(_) => "grep",
            FileRequest::Find(_) => "find",
            FileRequest::Edit(_) => "edit",
            FileRequest::Write(_) => "write",
        }
    }

    /// Parses a file tool's arguments (absent arguments are an empty
    /// object) into its request.
    pub fn parse(
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<FileRequest, CallError> {
        let args = Args::new(arguments);
        Ok(match name {
            "read" => FileRequest::Read(read::ReadRequest::from_args(args)?),
            "grep" => FileRequest::Grep(grep::GrepRequest::from_args(args)?),
            "find" => FileRequest::Find(find::FindRequest::from_args(args)?),
            "edit" => FileRequest::Edit(edit::EditRequest::from_args(args)?),
            "write" => FileRequest::Write(write::WriteRequest::from_args(args)?),
            other => return Err(CallError::UnknownTool(other.to_string(), FILE_TOOL_NAMES)),
        })
    }
}

/// Runs a typed file tool call.
pub fn run_file_request(request: FileRequest, ctx: &Ctx) -> Result<ToolOutput, CallError> {
    Ok(match request {
        FileRequest::Read(r) => read::run(r, ctx)?,
        FileRequest::Grep(r) => grep::run(r, ctx)?,
        FileRequest::Find(r) => find::run(r, ctx)?,
        FileRequest::Edit(r) => edit::run(r, ctx)?,
        FileRequest::Write(r) => write::run(r, ctx)?,
    })
}

/// Runs a file tool by name with a client's arguments, as the broker's
/// tool table (the MCP server's `tools/call`) calls it: the arguments are
/// parsed into the tool's request ([`FileRequest::parse`]), then run.
pub fn call_file_tool(
    name: &str,
    arguments: Option<Map<String, Value>>,
    ctx: &Ctx,
) -> Result<ToolOutput, CallError> {
    run_file_request(FileRequest::parse(name, arguments)?, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lenient_forms_build_the_same_request_as_the_typed_ones() {
        let parse = |v: Value| FileRequest::parse("grep", v.as_object().cloned());
        let Ok(FileRequest::Grep(lenient)) = parse(json!({
            "query": "fn", "path": "src", "-A": "2", "case_insensitive": "true",
            "output_mode": "files_with_matches", "glob": "[\"*.rs\"]"
        })) else {
            panic!("the lenient grep was refused");
        };
        let mut typed = grep::GrepRequest::new("fn".into());
        typed.paths = vec!["src".into()];
        typed.after = 2;
        typed.ignore_case = true;
        typed.mode = grep::Mode::Files;
        typed.globs = vec!["*.rs".into()];
        assert_eq!(lenient.notes.len(), 9, "{:?}", lenient.notes);
        typed.notes = lenient.notes.clone();
        assert_eq!(lenient, typed);
        let Ok(FileRequest::Read(read)) = FileRequest::parse(
            "read",
            json!({"file_path": "a.rs", "offset": "10", "limit": 5, "full": "yes"})
                .as_object()
                .cloned(),
        ) else {
            panic!("the lenient read was refused");
        };
        assert_eq!(read.paths, ["a.rs:10-14"]);
        assert_eq!(read.options.collapse, read::versions::Collapse::Off);
        let bad = FileRequest::parse("find", json!({"minSize": "lots"}).as_object().cloned());
        assert!(matches!(bad, Err(CallError::Args(e)) if e.0.starts_with("\"minSize\" is a size")));
        assert!(matches!(
            FileRequest::parse("nibash", None),
            Err(CallError::UnknownTool(..))
        ));
    }
}
