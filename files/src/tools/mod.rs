//! The file tools (read, grep, find, edit, write): their definitions and
//! one dispatch function, [`call_file_tool`], shared by the broker's MCP
//! server and CLI (through its tool table, which adds the shell's tools)
//! and by nibash's own commands inside the sandbox.
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

use serde_json::{Map, Value, json};

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

/// One tool's definition as listed to clients.
#[derive(Clone, Debug)]
pub struct ToolDef {
    /// Name (within `[A-Za-z0-9_-]`).
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// JSON Schema of its arguments.
    pub schema: Value,
    /// It changes nothing.
    pub read_only: bool,
}

/// The file tools' definitions, in [`FILE_TOOL_NAMES`]' order.
pub fn definitions() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "read",
            description: "Read files or folders. Prints [PATH#TAG] then LINE:TEXT rows; the rows are \
                edit anchors. Selectors: path:A, path:A-B, path:A+N, path:A-, path:-N, path:A-B,C-D \
                (lines); path:name, path:Type.member, path:a,b (declarations with their comments, in \
                Java, Kotlin, TS, JS, Go, Python, Rust, C, C++, Zig); path#TAG (what changed since that version); path@REV (a git revision; a \
                folder gives the commit and its diff), path@A...B or path@A..B (the diff between them), \
                .@A...B:FILE; file.db (tables), file.db:TABLE, file.db:TABLE:-15, file.db:SELECT ... \
                (read-only). Images come back as images. Large files give an outline; lines you saw \
                and that are unchanged print as one [lines A-B unchanged since you saw them] row \
                (full:true prints them whole, collapse:false as N~TEXT rows); plain:true prints bare \
                lines (logs); info:true prints one line of facts per file.",
            schema: json!({
                "type": "object",
                "properties": {
                    "paths": {"type": "array", "items": {"type": "string"},
                              "description": "Files or folders, each optionally with a selector (src/a.ts:10-40)."},
                    "maxLineLength": {"type": "integer", "minimum": 1,
                                      "description": "Longer lines print cut, as non-anchors (default 2000, at most 2 MiB)."},
                    "plain": {"type": "boolean", "description": "Lines without numbers or tag, colors stripped, repeats collapsed; no size cap."},
                    "info": {"type": "boolean", "description": "One line of facts per file: lines, size, longest line, line endings, age."},
                    "full": {"type": "boolean", "description": "Print lines you already saw whole instead of collapsing them."},
                    "outline": {"type": "boolean", "description": "The outline whatever the size; with PATH:A-B, of those lines (continues a cut outline)."},
                    "collapse": {"type": "boolean", "description": "false: print seen, unchanged lines as N~TEXT rows instead of one row per run."}
                },
                "required": ["paths"]
            }),
            read_only: true,
        },
        ToolDef {
            name: "grep",
            description: "Search file contents (ripgrep's engine; look-around and backreferences run on PCRE2). \
                Prints a count line, then per file [PATH#TAG] with *N:TEXT match rows and  N:TEXT context rows; \
                the rows are edit anchors, so edit can use them without a read. Hidden files are searched, \
                .git/ and git-ignored files are not (noIgnore searches them). A path may carry a line \
                selector (app.log:1100-1250). Pages hold 20 files (skip for more). replace previews a \
                replacement ($1, ${name}) and returns a token for edit's REAPPLY.",
            schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "A regular expression (or text, with literal)."},
                    "paths": {"type": "array", "items": {"type": "string"}, "description": "Files or folders (default: the project)."},
                    "glob": {"type": "array", "items": {"type": "string"}, "description": "File name globs (*.rs); !glob excludes."},
                    "ignoreCase": {"type": "boolean"},
                    "literal": {"type": "boolean", "description": "Match the pattern as plain text."},
                    "before": {"type": "integer", "minimum": 0, "description": "Context rows before each match (default 1)."},
                    "after": {"type": "integer", "minimum": 0, "description": "Context rows after each match (default 1)."},
                    "mode": {"type": "string", "enum": ["files", "count"], "description": "List matching paths, or count per file."},
                    "noIgnore": {"type": "boolean", "description": "Search files that ignore rules would skip."},
                    "maxLineLength": {"type": "integer", "minimum": 1},
                    "skip": {"type": "integer", "minimum": 0, "description": "Files to skip (paging)."},
                    "replace": {"type": "string", "description": "Preview replacing each match ($1, ${name})."}
                },
                "required": ["pattern"]
            }),
            read_only: true,
        },
        ToolDef {
            name: "find",
            description: "List the files grep would search, with line counts, sizes and ages; folders are \
                printed once with their files indented. Filters: glob, minSize (20k, 1.5M), newer (30m, 2h, \
                3d); sort by path, size or modified. Pages hold 200 files; a larger listing shows folders \
                with file counts unless skip is given.",
            schema: json!({
                "type": "object",
                "properties": {
                    "paths": {"type": "array", "items": {"type": "string"}},
                    "glob": {"type": "array", "items": {"type": "string"}},
                    "minSize": {"type": "string"},
                    "newer": {"type": "string"},
                    "sort": {"type": "string", "enum": ["path", "size", "modified"]},
                    "noIgnore": {"type": "boolean"},
                    "skip": {"type": "integer", "minimum": 0}
                }
            }),
            read_only: true,
        },
        ToolDef {
            name: "edit",
            description: "Edit files with a patch that names lines by the numbers read printed, never \
                repeating old text. Each file starts with its header [PATH#TAG] as read printed it; hunks: \
                PUT N.=M: / PUT N: (replace with the + rows below), PUT <N: / PUT >N: (insert before/after), \
                PUT >$: (append), PUT N*: / CUT N* / PUT >N*: (the block starting at N), CUT N.=M / CUT N \
                (delete), SUB N: OLD (replace OLD on line N with the + rows), ~TEXT under a hunk checks \
                that line N starts with TEXT. IMPORT a.b.C, ... adds Java or Kotlin imports. File ops: REM (to the trash), \
                MV DEST, CP DEST. New files: \
                *** Add File: PATH then + rows. Line numbers never shift between hunks. An edit may only \
                anchor on lines you have seen. REAPPLY TOKEN applies a refused edit unchanged.",
            schema: json!({
                "type": "object",
                "properties": {
                    "input": {"type": "string", "description": "The patch, or REAPPLY TOKEN."}
                },
                "required": ["input"]
            }),
            read_only: false,
        },
        ToolDef {
            name: "write",
            description: "Create a file (and its folders), or overwrite one given its current tag \
                (from read). Keeps a replaced file's CRLF endings, BOM and mode. Answers with the new \
                [PATH#TAG] and a sparse map of N~TEXT rows; every written line may be edited at once.",
            schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file to write."},
                    "content": {"type": "string", "description": "The whole new content."},
                    "tag": {"type": "string", "description": "The file's current tag, required to overwrite (e.g. 3C4D)."}
                },
                "required": ["path", "content"]
            }),
            read_only: false,
        },
    ]
}

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

    /// A value of the schema's type for each property, as a client sends it.
    fn example(schema: &Value) -> Value {
        match (schema["type"].as_str(), schema["enum"].as_array()) {
            (_, Some(values)) => values[0].clone(),
            (Some("array"), _) => json!(["a.txt"]),
            (Some("integer"), _) => json!(3),
            (Some("boolean"), _) => json!(true),
            _ => json!("x"),
        }
    }

    #[test]
    fn every_schema_property_is_read_by_its_request() {
        for def in definitions() {
            let Some(props) = def.schema["properties"].as_object() else {
                panic!("{} has no properties", def.name);
            };
            let mut args = Map::new();
            for (name, schema) in props {
                let v = match (def.name, name.as_str()) {
                    ("find", "minSize") => json!("20k"),
                    ("find", "newer") => json!("2h"),
                    _ => example(schema),
                };
                args.insert(name.clone(), v);
            }
            let request = match FileRequest::parse(def.name, Some(args)) {
                Ok(r) => r,
                Err(e) => panic!("{}: {e}", def.name),
            };
            assert_eq!(request.name(), def.name);
            let notes = match request {
                FileRequest::Read(r) => r.notes,
                FileRequest::Grep(r) => r.notes,
                FileRequest::Find(r) => r.notes,
                FileRequest::Edit(r) => r.notes,
                FileRequest::Write(r) => r.notes,
            };
            assert!(notes.is_empty(), "{}: {notes:?}", def.name);
        }
    }

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
