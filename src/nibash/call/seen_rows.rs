//! The seen-row check: rows a call's worker reports as shown count as seen
//! only when the call's output really holds them, under a header with the
//! file's current tag.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nib_files::context::Ctx;
use nib_text::hashline::Tag;
use nib_text::text::Text;

/// Rows a worker printed as anchors: path, tag, line ranges.
pub(super) type SeenReport = (PathBuf, String, Vec<(usize, usize)>);

/// Counts the rows nib's own commands printed as seen: for files whose
/// content still has the printed tag, and only the rows that really are in
/// the call's output (under a header with that tag and file name, with the
/// line's current text). A report of rows the model was not shown counts
/// for nothing, whoever sent it.
pub(super) fn record_seen(ctx: &Ctx, seen: &[SeenReport], output: &str) {
    if seen.is_empty() {
        return;
    }
    let shown = ShownRows::of(output);
    for (path, tag, lines) in seen {
        let Some(tag) = Tag::parse(tag) else { continue };
        let Ok(file) = nib_files::fs::read_file(&ctx.scope, path, nib_files::context::TEXT_LIMIT)
        else {
            continue;
        };
        if Tag::of(&file.bytes) != tag {
            continue;
        }
        let text = Arc::new(Text::decode(&file.bytes));
        let proven = shown.lines_of(path, &tag.to_string(), &text, lines);
        if proven.is_empty() {
            continue;
        }
        ctx.with_seen(|s| s.record(path, tag, &text, proven));
    }
}

/// The anchored rows an output shows, by the header above them.
pub(super) struct ShownRows<'a> {
    /// (tag, file name, line number, text).
    rows: std::collections::HashSet<(&'a str, &'a str, usize, &'a str)>,
}

impl<'a> ShownRows<'a> {
    pub(super) fn of(output: &'a str) -> ShownRows<'a> {
        let mut rows = std::collections::HashSet::new();
        let mut header: Option<(&str, &str)> = None;
        for line in output.lines() {
            if let Some(h) = parse_header(line) {
                header = Some(h);
                continue;
            }
            let Some((tag, name)) = header else { continue };
            // grep marks its rows with `*` (a match) or a space (context),
            // git's diffs mark added rows with `+`.
            let row = line
                .strip_prefix('*')
                .or_else(|| line.strip_prefix(' '))
                .or_else(|| line.strip_prefix('+'))
                .unwrap_or(line);
            let Some((digits, text)) = row.split_once(':') else {
                continue;
            };
            if digits.is_empty()
                || digits.starts_with('0')
                || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                continue;
            }
            if let Ok(n) = digits.parse::<usize>() {
                rows.insert((tag, name, n, text));
            }
        }
        ShownRows { rows }
    }

    /// The claimed lines of `path` that the output shows with their text.
    pub(super) fn lines_of(
        &self,
        path: &Path,
        tag: &str,
        text: &Text,
        claimed: &[(usize, usize)],
    ) -> Vec<usize> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = nib_text::path_text::escape_control(&name);
        let mut out: Vec<usize> = claimed
            .iter()
            .flat_map(|&(a, b)| a..=b.min(text.len()))
            .filter(|&k| {
                k >= 1
                    && text
                        .line(k)
                        .is_some_and(|line| self.rows.contains(&(tag, name.as_str(), k, line)))
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// `[PATH#TAG]` (maybe followed by a note): the tag and the path's last name.
pub(super) fn parse_header(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('[')?;
    // The last `#XXXX]` ends the header (a path may hold `#` and `]`).
    let hash = rest.char_indices().rev().find_map(|(i, c)| {
        let tag = rest.get(i + 1..i + 5)?;
        (c == '#'
            && tag.bytes().all(|b| b.is_ascii_hexdigit())
            && rest.get(i + 5..i + 6) == Some("]"))
        .then_some(i)
    })?;
    let path = &rest[..hash];
    Some((
        &rest[hash + 1..hash + 5],
        path.rsplit('/').next().unwrap_or(path),
    ))
}
