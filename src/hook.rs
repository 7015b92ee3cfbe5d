//! `nib hook`: Claude Code's hook events, read from stdin, answered on stdout.
//!
//! - PreToolUse of the built-in Read on a text file nib can read: refused once
//!   with the equivalent nib call; the same call sent again goes through.
//!   Images, PDFs and notebooks always go through.
//! - PreToolUse of one of nib's own tools: records which session and agent
//!   issued the tool use ([`crate::agents::record_tool_use`]), so the server
//!   can tell agents apart.
//! - SessionStart (startup, compact, clear) and PostCompact: what the session's
//!   agents saw stops counting ([`crate::agents::record_reset`]); a SessionStart
//!   that names a parent session records a fork ([`crate::agents::record_fork`]).
//! - PostToolUse of nib's edit and write: the change as a diff, a message
//!   for the person (from [`nib_files::undo`]'s record), not for the model.
//! - UserPromptSubmit and SessionStart: a one-line reminder of nib's tools
//!   (a session's first prompt gets none: SessionStart's is in the same request).
//!
//! It runs on every tool call, so it does little: no runtime, a few small
//! files under the state folder.

use std::path::Path;

use serde_json::{Value, json};

use crate::agents::{self, ToolUse};

/// The reminder added as context.
pub const REMINDER: &str = "nib is this project's file tool: mcp__nib__read, grep and find print [PATH#TAG] headers and LINE:TEXT rows; mcp__nib__edit changes files by those line numbers (never repeat old text); mcp__nib__write creates files.";

/// Extensions the built-in Read keeps: nib does not read them as text.
const PASS_THROUGH: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "webp", "pdf", "ipynb", "svg", "bmp", "ico",
];

/// nib's own tool a Claude Code tool name stands for: `mcp__nib__edit` as
/// `nib setup` registers the server, `mcp__plugin_nib_nib__edit` as the
/// nib plugin does.
pub fn nib_tool(name: &str) -> Option<&str> {
    name.strip_prefix("mcp__nib__")
        .or_else(|| name.strip_prefix("mcp__plugin_nib_nib__"))
}

/// Whether the user's Claude Code settings (`$CLAUDE_CONFIG_DIR`, else
/// `~/.claude`) enable the nib plugin, whose mod shows each edit's diff in
/// its row: the hook's message would repeat it.
fn mod_enabled() -> bool {
    let dir = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".claude")));
    dir.and_then(|d| std::fs::read_to_string(d.join("settings.json")).ok())
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("enabledPlugins")?.get("nib@nib")?.as_bool())
        .unwrap_or(false)
}

/// What the hook prints, and its exit status.
#[derive(Debug, PartialEq, Eq)]
pub struct HookAnswer {
    /// JSON for Claude Code, or nothing.
    pub stdout: String,
    /// 0 unless the input could not be read.
    pub code: i32,
}

fn answer(v: Value) -> HookAnswer {
    HookAnswer {
        stdout: format!("{v}\n"),
        code: 0,
    }
}

fn quiet() -> HookAnswer {
    HookAnswer {
        stdout: String::new(),
        code: 0,
    }
}

fn context(event: &str) -> HookAnswer {
    answer(json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": REMINDER}}))
}

/// The mark a session's SessionStart reminder leaves for its first prompt.
fn reminded_mark(state: &Path, session: &str) -> std::path::PathBuf {
    state.join("hook").join("reminded").join(format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64(session.as_bytes())
    ))
}

/// Whether nib reads this file as text (so the built-in Read is refused once).
fn nib_reads(path: &Path) -> bool {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if PASS_THROUGH.contains(&ext.as_str()) {
        return false;
    }
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() || meta.len() > 8 * 1024 * 1024 {
        return false;
    }
    let mut head = [0u8; 4096];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    !head[..n].contains(&0)
}

/// Answers one hook event.
pub fn run(state: &Path, input: &[u8]) -> HookAnswer {
    let Ok(event) = serde_json::from_slice::<Value>(input) else {
        return HookAnswer {
            stdout: String::new(),
            code: 1,
        };
    };
    let s = |k: &str| {
        event
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let session = s("session_id");
    match s("hook_event_name").as_str() {
        "PreToolUse" => {
            let tool = s("tool_name");
            if nib_tool(&tool).is_some() {
                let id = s("tool_use_id");
                if !id.is_empty() {
                    let agent = match s("agent_id") {
                        a if a.is_empty() => "main".to_string(),
                        a => a,
                    };
                    let _ = agents::record_tool_use(state, &id, &ToolUse { session, agent });
                }
                return quiet();
            }
            if tool != "Read" {
                return quiet();
            }
            let input = event.get("tool_input").cloned().unwrap_or(Value::Null);
            let file = input.get("file_path").and_then(Value::as_str).unwrap_or("");
            if file.is_empty() || !nib_reads(Path::new(file)) {
                return quiet();
            }
            let offset = input.get("offset").and_then(Value::as_u64);
            let limit = input.get("limit").and_then(Value::as_u64);
            let key = format!("{session}\u{0}{file}\u{0}{offset:?}\u{0}{limit:?}");
            let mark = state.join("hook").join("read-refused").join(format!(
                "{:016x}",
                xxhash_rust::xxh3::xxh3_64(key.as_bytes())
            ));
            if std::fs::remove_file(&mark).is_ok() {
                return quiet();
            }
            if let Some(dir) = mark.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(&mark, b"");
            let selector = match (offset, limit) {
                (Some(o), Some(l)) if l > 0 => format!(":{o}-{}", o + l - 1),
                (Some(o), _) => format!(":{o}-"),
                (None, Some(l)) if l > 0 => format!(":1-{l}"),
                _ => String::new(),
            };
            // The client shows the reason to the user: the path is the model's.
            let file = crate::terminal::visible_line(file);
            let reason = format!(
                "Read this with nib instead: mcp__nib__read with paths [\"{file}{selector}\"]. Its rows are edit anchors for mcp__nib__edit. (Sending the same Read again lets it through.)"
            );
            answer(json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason
            }}))
        }
        "PostToolUse" => {
            // nib's edit and write, shown to the person as a diff (a
            // message for the user: the agent's context does not grow).
            let tool = match nib_tool(&s("tool_name")) {
                Some("edit") => "edit",
                Some("write") => "write",
                _ => return quiet(),
            };
            // The nib mod draws the diff in the tool's own row.
            if mod_enabled() {
                return quiet();
            }
            let cwd = s("cwd");
            let project = if cwd.is_empty() {
                std::env::current_dir().unwrap_or_default()
            } else {
                std::path::PathBuf::from(cwd)
            };
            let project = std::fs::canonicalize(&project).unwrap_or(project);
            // The change's own confinement applies; the hook's
            // environment may add the sandbox, never take it away.
            let floor = nib_files::undo::Confinement {
                sandbox: nib_settings::sandbox_on(),
                confirm: false,
                roots: vec![project.clone()],
            };
            match nib_files::undo::latest_diff(
                state,
                &project,
                &floor,
                Some(tool),
                std::time::Duration::from_secs(120),
            ) {
                Some(diff) => answer(json!({
                    "systemMessage": format!("nib {tool}:\n{}", crate::terminal::visible(&diff))
                })),
                None => quiet(),
            }
        }
        "SessionStart" => {
            if matches!(s("source").as_str(), "startup" | "compact" | "clear")
                && !session.is_empty()
            {
                let _ = agents::record_reset(state, &session);
            }
            // A forked session names its parent (the field names clients use for it).
            let parent = ["forked_from_session_id", "parent_session_id", "fork_of"]
                .iter()
                .map(|k| s(k))
                .find(|p| !p.is_empty());
            if let Some(parent) = parent
                && !session.is_empty()
            {
                let _ = agents::record_fork(state, &session, &parent);
            }
            // The first prompt of the session gets no second copy.
            if !session.is_empty() {
                let mark = reminded_mark(state, &session);
                if let Some(dir) = mark.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                let _ = std::fs::write(&mark, b"");
            }
            context("SessionStart")
        }
        "PostCompact" => {
            if !session.is_empty() {
                let _ = agents::record_reset(state, &session);
            }
            quiet()
        }
        "UserPromptSubmit" => {
            // Right after SessionStart's reminder, the same text would reach
            // the model twice in one request.
            if !session.is_empty() && std::fs::remove_file(reminded_mark(state, &session)).is_ok() {
                return quiet();
            }
            context("UserPromptSubmit")
        }
        _ => quiet(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_is_refused_once_then_allowed() {
        let state = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.rs");
        std::fs::write(&f, "fn main() {}\n").unwrap();
        let ev = json!({"hook_event_name": "PreToolUse", "session_id": "S", "tool_name": "Read",
                        "tool_input": {"file_path": f, "offset": 10, "limit": 5}})
        .to_string();
        let first = run(state.path(), ev.as_bytes());
        let v: Value = serde_json::from_str(&first.stdout).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        assert!(
            v["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap()
                .contains("a.rs:10-14")
        );
        assert_eq!(
            run(state.path(), ev.as_bytes()).stdout,
            "",
            "the same call goes through"
        );
        let png = dir.path().join("p.png");
        std::fs::write(&png, b"\x89PNG").unwrap();
        let ev = json!({"hook_event_name": "PreToolUse", "session_id": "S", "tool_name": "Read", "tool_input": {"file_path": png}}).to_string();
        assert_eq!(
            run(state.path(), ev.as_bytes()).stdout,
            "",
            "images go through"
        );
    }
}
