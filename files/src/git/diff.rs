//! Unified diffs as rows of the current file: a `[PATH#TAG]` header per
//! file, `+N:TEXT` and ` N:TEXT` for added and context lines that the work
//! tree's file still holds at line N (anchors: an edit can follow without a
//! read), `+N|TEXT` and ` N|TEXT` where it does not (another revision's
//! lines), and `-|TEXT` for removed lines. Shared by read's `path@REV` and
//! nibash's git.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::context::Ctx;
use crate::fs;
use nib_text::blocks::{Block, Row, SeenTarget};
use nib_text::hashline::{self, Tag};
use nib_text::text::Text;

/// Undoes git's C-style quoting of a path (`"a\303\251 \"b\""`); a path
/// that is not quoted comes back as it is.
pub fn unquote(s: &str) -> Vec<u8> {
    let Some(inner) = s.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
        return s.as_bytes().to_vec();
    };
    let b = inner.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = b[i + 1];
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                for _ in 0..2 {
                    if let Some(d) = b.get(i).filter(|d| (b'0'..=b'7').contains(*d)) {
                        v = v * 8 + u32::from(d - b'0');
                        i += 1;
                    }
                }
                out.push(u8::try_from(v & 0xff).unwrap_or(b'?'));
            }
            other => out.push(other),
        }
    }
    out
}

/// The path a `--- a/x` / `+++ b/x` line names, without its prefix; `None`
/// for `/dev/null`.
fn side_path(rest: &str) -> Option<PathBuf> {
    // git ends a path containing a space with a tab on these lines.
    let rest = rest.trim_end_matches('\t');
    if rest == "/dev/null" {
        return None;
    }
    let raw = unquote(rest);
    let raw = raw
        .strip_prefix(b"a/")
        .or_else(|| raw.strip_prefix(b"b/"))
        .unwrap_or(&raw);
    use std::os::unix::ffi::OsStrExt;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(raw)))
}

/// The path of a `diff --git a/X b/X` line, when both sides are the same
/// name (a file with no `---`/`+++` lines: binary, mode change, pure rename).
fn git_line_path(rest: &str) -> Option<PathBuf> {
    if let Some(quoted) = rest.strip_prefix('"') {
        let end = quoted.find("\" ")?;
        return side_path(&quoted[end + 2..]);
    }
    let half = rest.len().checked_sub(1)? / 2;
    let (a, b) = (rest.get(..half)?, rest.get(half + 1..)?);
    (a.strip_prefix("a/")? == b.strip_prefix("b/")?).then(|| PathBuf::from(&b[2..]))
}

/// The name of a file whose diff had no `---`/`+++` lines: where it was
/// renamed to, else the name its `diff --git` line gives.
fn named(git_line: String, renamed: Option<PathBuf>) -> PathBuf {
    renamed
        .or_else(|| git_line_path(&git_line))
        .unwrap_or_else(|| git_line.into())
}

/// A file's extended header line as a short note, or `None` for the ones
/// another note already says.
fn meta_note(line: &str) -> Option<String> {
    let unquoted = |s: &str| String::from_utf8_lossy(&unquote(s)).into_owned();
    if line.starts_with("new file mode") {
        return Some("(new file)".into());
    }
    if line.starts_with("deleted file mode") {
        return Some("(deleted)".into());
    }
    if let Some(from) = line.strip_prefix("rename from ") {
        return Some(format!("(renamed from {})", unquoted(from)));
    }
    if let Some(from) = line.strip_prefix("copy from ") {
        return Some(format!("(copied from {})", unquoted(from)));
    }
    if let Some(mode) = line.strip_prefix("new mode ") {
        return Some(format!("(mode now {mode})"));
    }
    if line.starts_with("Binary files ") {
        return Some("(binary)".into());
    }
    let said_elsewhere = [
        "rename to ",
        "copy to ",
        "similarity index",
        "dissimilarity index",
        "old mode ",
    ];
    if said_elsewhere.iter().any(|p| line.starts_with(p)) {
        return None;
    }
    Some(format!("({line})"))
}

/// The block of one file: its header and, when the work tree holds it, the
/// version its rows are checked against.
fn file_block(ctx: &Ctx, base: &Path, name: &Path) -> (Block, Option<Arc<Text>>) {
    let path = base.join(name);
    let shown = ctx.workspace.display(&path);
    let mut block = Block {
        shown_path: shown.clone(),
        ..Block::default()
    };
    match fs::read_file(&ctx.scope, &path, crate::context::TEXT_LIMIT) {
        Ok(f) => {
            let tag = Tag::of(&f.bytes);
            let text = Arc::new(Text::decode(&f.bytes));
            block.head = hashline::header(&shown, tag);
            block.total_lines = text.len();
            if let Ok(canonical) = fs::canonical(&path) {
                block.seen = Some(SeenTarget {
                    canonical,
                    tag,
                    text: Arc::clone(&text),
                });
            }
            (block, Some(text))
        }
        Err(_) => {
            block.head = format!("[{shown}] (not in the working tree)");
            (block, None)
        }
    }
}

/// One block per file of a unified diff whose paths are relative to `base`.
/// A line nib does not know inside a file's diff stays as a plain row.
pub fn blocks(ctx: &Ctx, base: &Path, diff: &str) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    let mut current: Option<Arc<Text>> = None;
    // The file's `diff --git` line until its name is known.
    let mut pending: Option<String> = None;
    let mut old_name: Option<PathBuf> = None;
    let mut renamed: Option<PathBuf> = None;
    let os_path = |bytes: Vec<u8>| {
        use std::os::unix::ffi::OsStringExt;
        PathBuf::from(std::ffi::OsString::from_vec(bytes))
    };
    let mut n = 0usize;
    let mut notes: Vec<String> = Vec::new();
    let open = |name: &Path,
                blocks: &mut Vec<Block>,
                current: &mut Option<Arc<Text>>,
                notes: &mut Vec<String>| {
        let (mut block, text) = file_block(ctx, base, name);
        block.rows.extend(notes.drain(..).map(Row::plain));
        blocks.push(block);
        *current = text;
    };
    // A last `diff --git` line (empty) opens the block of a file still
    // waiting for its name.
    for line in diff.lines().chain(std::iter::once("diff --git ")) {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            if let Some(p) = pending.take() {
                open(
                    &named(p, renamed.take()),
                    &mut blocks,
                    &mut current,
                    &mut notes,
                );
            }
            pending = Some(rest.to_string());
            old_name = None;
            renamed = None;
            continue;
        }
        if pending.is_some() {
            if let Some(rest) = line.strip_prefix("--- ") {
                old_name = side_path(rest);
                continue;
            }
            if let Some(rest) = line.strip_prefix("+++ ") {
                let name = side_path(rest).or(old_name.take());
                pending = None;
                let name = name.unwrap_or_default();
                open(&name, &mut blocks, &mut current, &mut notes);
                continue;
            }
            if line.starts_with("index ") {
                continue;
            }
            if let Some(to) = line
                .strip_prefix("rename to ")
                .or_else(|| line.strip_prefix("copy to "))
            {
                renamed = Some(os_path(unquote(to)));
            }
            if let Some(note) = meta_note(line) {
                notes.push(note);
            }
            continue;
        }
        let Some(block) = blocks.last_mut() else {
            continue;
        };
        if let Some(h) = line.strip_prefix("@@ ") {
            // @@ -a,b +c,d @@
            n = h
                .split_whitespace()
                .find_map(|t| t.strip_prefix('+'))
                .and_then(|t| t.split(',').next())
                .and_then(|t| t.parse().ok())
                .unwrap_or(1);
            continue;
        }
        if line.starts_with('\\') {
            continue;
        }
        let (mark, body) = match line.chars().next() {
            Some('+') => ('+', &line[1..]),
            // Context rows as read's `path#TAG` prints them.
            Some(' ') => (' ', &line[1..]),
            Some('-') => {
                block.rows.push(Row::plain(format!("-|{}", &line[1..])));
                continue;
            }
            _ => {
                block.rows.push(Row::plain(line.to_string()));
                continue;
            }
        };
        if current.as_ref().and_then(|t| t.line(n)) == Some(body) {
            block.rows.push(Row::anchored(
                n,
                format!("{mark}{}", hashline::anchored_row(n, body)),
            ));
        } else {
            block.rows.push(Row::plain(format!("{mark}{n}|{body}")));
        }
        n += 1;
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_paths_come_back_as_bytes() {
        assert_eq!(unquote("\"\\303\\251 \\\"b\\\"\""), "é \"b\"".as_bytes());
        assert_eq!(unquote("plain name"), b"plain name");
    }

    #[test]
    fn paths_are_read_from_the_diff_lines() {
        assert_eq!(
            side_path("a/docs/with space.md\t"),
            Some("docs/with space.md".into())
        );
        assert_eq!(side_path("/dev/null"), None);
        assert_eq!(git_line_path("a/x y.png b/x y.png"), Some("x y.png".into()));
        assert_eq!(git_line_path("a/old b/new"), None);
        assert_eq!(
            git_line_path("\"a/\\303\\251\" \"b/\\303\\251\""),
            Some("é".into())
        );
    }
}
