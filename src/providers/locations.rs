//! A provider's answer as nib shows it: the provider's prose, then each
//! location it named as `[PATH#TAG]` and `N:TEXT` rows of the file as it is
//! now — read through nib's own `read`, so the rows are resolved and
//! confined like any path and count as seen (an edit can follow at once).
//!
//! Locations come from `structuredContent.locations[]` (`path`, `line`,
//! optional `endLine` and `note`); without that array, from `path:N` and
//! `path:N-M` in the text, kept only where such a file exists. The format is
//! written down for provider authors in docs/providers.md.

use std::sync::LazyLock;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::broker_ctx::BrokerCtx;
use nib_files::context::ToolOutput;
use nib_files::tools::read::ReadRequest;

/// Lines shown for one location at most.
pub const MAX_LOCATION_LINES: usize = 40;
/// Files shown at most; the rest are named.
pub const MAX_FILES: usize = 20;
/// The provider's own text kept at most, in bytes.
pub const MAX_PROSE: usize = 16 * 1024;

/// One place in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The path as the provider wrote it.
    pub path: String,
    /// First line (1-based).
    pub line: usize,
    /// Last line (at least `line`).
    pub end: usize,
    /// What the provider says about it.
    pub note: Option<String>,
}

/// `structuredContent.locations`, when the provider sent that array;
/// entries without a path or a line are skipped (and counted).
pub fn structured(result: &CallToolResult) -> Option<(Vec<Location>, usize)> {
    let list = result
        .structured_content
        .as_ref()?
        .get("locations")?
        .as_array()?;
    let mut skipped = 0;
    let mut out = Vec::new();
    for v in list {
        let path = v
            .get("path")
            .and_then(Value::as_str)
            .map(|p| p.strip_prefix("file://").unwrap_or(p).to_string());
        let line = v.get("line").and_then(Value::as_u64);
        match (path, line) {
            (Some(path), Some(line)) if line >= 1 && !path.is_empty() => {
                let line = usize::try_from(line).unwrap_or(usize::MAX);
                let end = v
                    .get("endLine")
                    .and_then(Value::as_u64)
                    .and_then(|e| usize::try_from(e).ok())
                    .filter(|e| *e >= line)
                    .unwrap_or(line);
                out.push(Location {
                    path,
                    line,
                    end,
                    note: v.get("note").and_then(Value::as_str).map(str::to_string),
                });
            }
            _ => skipped += 1,
        }
    }
    Some((out, skipped))
}

static IN_TEXT: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
    regex::Regex::new(r"(?:^|[\s(\[`'\x22])([~\w./@+-]+):(\d+)(?:-(\d+))?\b").ok()
});

/// `path:N` and `path:N-M` in the provider's text, in order, once each.
pub fn in_text(text: &str) -> Vec<Location> {
    let Some(re) = IN_TEXT.as_ref() else {
        return Vec::new();
    };
    let mut out: Vec<Location> = Vec::new();
    for c in re.captures_iter(text) {
        let (Some(path), Some(line)) = (c.get(1), c.get(2)) else {
            continue;
        };
        let path = path.as_str();
        // Times (12:30), ports and bare numbers are not paths.
        if path.is_empty() || path.chars().all(|ch| ch.is_ascii_digit() || ch == '.') {
            continue;
        }
        let Ok(line) = line.as_str().parse::<usize>() else {
            continue;
        };
        if line == 0 {
            continue;
        }
        let end = c
            .get(3)
            .and_then(|e| e.as_str().parse::<usize>().ok())
            .filter(|e| *e >= line)
            .unwrap_or(line);
        let loc = Location {
            path: path.to_string(),
            line,
            end,
            note: None,
        };
        if !out.contains(&loc) {
            out.push(loc);
        }
    }
    out
}

/// The provider's text content, its images, and what else it sent, named.
fn prose(result: &CallToolResult) -> (String, Vec<(String, String)>) {
    let mut text = String::new();
    let mut images = Vec::new();
    for c in &result.content {
        match c {
            ContentBlock::Text(t) => {
                text.push_str(&t.text);
                if !t.text.ends_with('\n') {
                    text.push('\n');
                }
            }
            ContentBlock::Image(i) => images.push((i.data.clone(), i.mime_type.clone())),
            ContentBlock::ResourceLink(r) => text.push_str(&format!("[resource: {}]\n", r.uri)),
            ContentBlock::Resource(r) => {
                text.push_str(&format!("[resource: {}]\n", resource_uri(&r.resource)));
            }
            ContentBlock::Audio(_) => text.push_str("[audio content, not shown]\n"),
            _ => text.push_str("[content of a kind nib does not show]\n"),
        }
    }
    (text, images)
}

fn resource_uri(r: &rmcp::model::ResourceContents) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| v.get("uri").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default()
}

/// The answer to the agent for `full` (`NAME_TOOL`).
pub fn render(provider: &str, full: &str, result: &CallToolResult, ctx: &BrokerCtx) -> ToolOutput {
    let (mut text, images) = prose(result);
    if text.len() > MAX_PROSE {
        let total = text.len();
        let mut cut = MAX_PROSE;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(&format!(
            "\n[cut: {provider}'s text was {} KiB; the first {} KiB are shown]\n",
            total / 1024,
            MAX_PROSE / 1024
        ));
    }
    if result.is_error == Some(true) {
        let mut out = ToolOutput::error(format!(
            "{full}: provider {provider} reported an error; nib wrote nothing.\n{text}"
        ));
        out.images = images;
        return out;
    }
    let (locations, skipped, from_text) = match structured(result) {
        Some((l, skipped)) => (l, skipped, false),
        None => (in_text(&text), 0, true),
    };
    let mut notes = Vec::new();
    if skipped > 0 {
        notes.push(format!(
            "{provider}: {skipped} location{} without a path or a line skipped",
            if skipped == 1 { "" } else { "s" }
        ));
    }
    let rows = rows_of(provider, &locations, from_text, ctx, &mut notes);
    if !rows.is_empty() {
        if !text.is_empty() && !text.ends_with("\n\n") {
            text.push('\n');
        }
        text.push_str(&rows);
    }
    nib_files::context::push_notes(&mut text, &notes);
    let mut out = ToolOutput::ok(text);
    out.images = images;
    out
}

/// Each file's locations read through nib's `read` (grouped by file, in
/// the order the provider gave them); notes for those left out.
fn rows_of(
    provider: &str,
    locations: &[Location],
    from_text: bool,
    ctx: &BrokerCtx,
    notes: &mut Vec<String>,
) -> String {
    let mut files: Vec<(String, Vec<&Location>)> = Vec::new();
    for l in locations {
        match files.iter_mut().find(|(p, _)| *p == l.path) {
            Some((_, v)) => v.push(l),
            None => files.push((l.path.clone(), vec![l])),
        }
    }
    let mut out = String::new();
    let mut dropped = Vec::new();
    let more: Vec<String> = files
        .iter()
        .skip(MAX_FILES)
        .map(|(p, _)| p.clone())
        .collect();
    for (path, locs) in files.iter().take(MAX_FILES) {
        let ranges: Vec<String> = locs
            .iter()
            .map(|l| {
                let end = l.end.min(l.line + MAX_LOCATION_LINES - 1);
                if end == l.line {
                    l.line.to_string()
                } else {
                    format!("{}-{end}", l.line)
                }
            })
            .collect();
        let request = ReadRequest::new(vec![format!("{path}:{}", ranges.join(","))]);
        match nib_files::tools::read::run(request, ctx) {
            Ok(r) if !r.is_error => {
                let said: Vec<String> = locs
                    .iter()
                    .filter_map(|l| l.note.as_ref().map(|n| format!("{}: {n}", l.line)))
                    .collect();
                if !said.is_empty() {
                    out.push_str(&format!("({provider} on {path}: {})\n", said.join("; ")));
                }
                out.push_str(&r.text);
                if !r.text.ends_with('\n') {
                    out.push('\n');
                }
            }
            // A guess from the text that names no file is not a location.
            Ok(_) | Err(_) if from_text && !outside_roots(path, ctx) => {}
            Ok(r) => dropped.push(format!(
                "{path}:{} ({})",
                locs[0].line,
                r.text.lines().next().unwrap_or("not readable").trim()
            )),
            Err(e) => dropped.push(format!("{path}:{} ({e})", locs[0].line)),
        }
    }
    if !dropped.is_empty() {
        notes.push(format!(
            "{provider}: location{} dropped: {}",
            if dropped.len() == 1 { "" } else { "s" },
            dropped.join(", ")
        ));
    }
    if !more.is_empty() {
        notes.push(format!(
            "{provider} named {} more file{} (not shown): {}",
            more.len(),
            if more.len() == 1 { "" } else { "s" },
            more.join(", ")
        ));
    }
    out
}

/// Whether `path` resolves outside the roots of a sandboxed call (where a
/// guessed location is worth a note: it was refused, not missing).
fn outside_roots(path: &str, ctx: &BrokerCtx) -> bool {
    if !ctx.config.sandbox {
        return false;
    }
    let p = ctx.workspace.resolve(path);
    !ctx.workspace.roots().iter().any(|r| p.starts_with(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_in_text_are_paths_with_lines() {
        let got = in_text(
            "see src/lib.rs:12 and (tests/a b.rs:3) `lib/x.py:10-14`, at 12:30 on port :8080; ~orm/Repo.java:7; Makefile:2 and src/lib.rs:12 again",
        );
        let got: Vec<(String, usize, usize)> =
            got.into_iter().map(|l| (l.path, l.line, l.end)).collect();
        assert_eq!(
            got,
            vec![
                ("src/lib.rs".to_string(), 12, 12),
                ("b.rs".to_string(), 3, 3),
                ("lib/x.py".to_string(), 10, 14),
                ("~orm/Repo.java".to_string(), 7, 7),
                ("Makefile".to_string(), 2, 2),
            ]
        );
    }

    #[test]
    fn structured_locations_skip_entries_without_path_or_line() {
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "two hits"}],
            "structuredContent": {"locations": [
                {"path": "src/a.rs", "line": 3, "endLine": 5, "note": "the definition"},
                {"path": "file:///p/b.rs", "line": 9, "endLine": 2},
                {"path": "src/c.rs"},
                {"line": 4}
            ]}
        }))
        .unwrap();
        let (locs, skipped) = structured(&result).unwrap();
        assert_eq!(skipped, 2);
        assert_eq!(
            locs,
            vec![
                Location {
                    path: "src/a.rs".into(),
                    line: 3,
                    end: 5,
                    note: Some("the definition".into())
                },
                Location {
                    path: "/p/b.rs".into(),
                    line: 9,
                    end: 9,
                    note: None
                },
            ]
        );
    }
}
