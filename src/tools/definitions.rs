//! The tools' definitions as MCP lists them: each tool's name, its
//! description for the model, the JSON Schema of its arguments and whether
//! it only reads. The file tools' requests (`nib-files`) and the shell's
//! (`tools::nibash`) read these arguments leniently; a test here holds that
//! every property a schema lists is read by its request.

use nib_settings::Config;
use serde_json::{Value, json};

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

/// The file tools' definitions, in [`nib_files::tools::FILE_TOOL_NAMES`]' order.
fn file_definitions() -> Vec<ToolDef> {
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
    let mut defs = file_definitions();
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

#[cfg(test)]
mod tests {
    use super::*;
    use nib_files::tools::FileRequest;
    use serde_json::Map;

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
        for def in file_definitions() {
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
}
