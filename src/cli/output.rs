//! How a tool verb's answer leaves the process: its exit status, the
//! command line's wording where the tool's speaks to a model, the JSON
//! object of `--json`, and a failure's line on stderr. Running the tool is
//! `run`'s.

use serde_json::{Value, json};
use std::io::Write;

/// The answer as one JSON object for scripts: the text, whether it is an
/// error, the exit status of a command (`sh`), the files written with their
/// new tags.
pub(super) fn json_answer(out: &nib_files::context::ToolOutput, code: i32) -> String {
    let written: Vec<Value> = out
        .written
        .iter()
        .map(|(path, tag)| json!({"path": path, "tag": tag}))
        .collect();
    let mut v = json!({
        "text": out.text,
        "is_error": out.is_error,
        "exit": code,
        "written": written,
    });
    if let Some(req) = &out.approval {
        v["needs_approval"] = json!(req.place);
    }
    format!("{v}\n")
}

/// The exit status of a tool's answer: `nib sh` the command's, `nib grep`
/// 0 for a match, 1 for none and 2 for an error (as grep and rg), every
/// other verb 1 for an error.
pub(super) fn exit_status(name: &str, out: &nib_files::context::ToolOutput) -> i32 {
    match (out.exit, name) {
        (Some(code), _) => code.clamp(0, 255),
        (None, "grep") if out.is_error => 2,
        (None, _) => i32::from(out.is_error),
    }
}

/// A tool's answer in the command line's words, where the tool's own speak
/// to a model in an MCP session: a bad pattern's hint names `-F`, and a
/// stale tag's refusal says that each command starts afresh (an MCP session
/// remembers the versions it showed; a command keeps none).
pub(super) fn cli_wording(name: &str, text: &str) -> String {
    match name {
        "grep" => text.replace(
            nib_files::tools::grep::LITERAL_HINT,
            "hint: pass -F (--fixed-strings) to search for the text as written",
        ),
        "edit" => {
            let mut out = String::with_capacity(text.len());
            let mut rest = text;
            while let Some(at) = rest.find(nib_files::tools::edit::NOT_SHOWN) {
                let after = &rest[at + nib_files::tools::edit::NOT_SHOWN.len()..];
                let tag_len = after
                    .bytes()
                    .take(4)
                    .take_while(u8::is_ascii_hexdigit)
                    .count();
                let (tag, tail) = after.split_at(tag_len);
                out.push_str(&rest[..at]);
                out.push_str(&format!(
                    "and each nib command starts afresh, keeping no earlier version to rebase #{tag} onto"
                ));
                rest = tail;
            }
            out.push_str(rest);
            out
        }
        _ => text.to_string(),
    }
}

pub(super) fn fail(message: &str) -> i32 {
    let mut stderr = std::io::stderr().lock();
    let tty = std::io::IsTerminal::is_terminal(&stderr);
    let _ = writeln!(stderr, "{}", crate::terminal::for_stream(message, tty));
    2
}
