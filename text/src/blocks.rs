//! A tool's answer as blocks of rows, fitted into the per-call output cap.
//!
//! Each file a tool prints is a [`Block`]: a header, rows (anchored or not) and
//! notes. [`fit`] shares the cap fairly between blocks (a small block keeps all
//! it needs; the rest is split evenly among the larger ones), cuts rows at row
//! boundaries and says where to continue. Only rows that survive the cut are
//! recorded as seen, by the caller, from [`Block::kept_anchors`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::hashline::Tag;
use crate::text::Text;

/// The per-call output cap of read and grep, shared between files.
pub const OUTPUT_CAP: usize = 40 * 1024;

/// One printed row.
#[derive(Clone, Debug)]
pub struct Row {
    /// The row as printed.
    pub text: String,
    /// The file line it shows whole, when it is an anchor.
    pub anchor: Option<usize>,
}

impl Row {
    /// An anchored row.
    pub fn anchored(line: usize, text: String) -> Row {
        Row {
            text,
            anchor: Some(line),
        }
    }

    /// A row that is not an anchor.
    pub fn plain(text: String) -> Row {
        Row { text, anchor: None }
    }
}

/// The file version a block's anchored rows belong to.
#[derive(Clone, Debug)]
pub struct SeenTarget {
    /// Canonical path (the identity in the seen lines agents keep).
    pub canonical: PathBuf,
    /// The version's tag.
    pub tag: Tag,
    /// The version's text.
    pub text: Arc<Text>,
}

/// What one file (or folder) contributes to a tool's answer.
#[derive(Clone, Debug, Default)]
pub struct Block {
    /// The header line, e.g. `[src/a.rs#1F2A]`.
    pub head: String,
    /// The rows under it.
    pub rows: Vec<Row>,
    /// Lines printed after the rows.
    pub notes: Vec<String>,
    /// The block reports a failure.
    pub error: bool,
    /// Where anchored rows are recorded as seen.
    pub seen: Option<SeenTarget>,
    /// The path as shown, for "read PATH:N-" continuation hints.
    pub shown_path: String,
    /// How many lines the file has (for continuation hints).
    pub total_lines: usize,
    /// Exempt from the cap (plain reads).
    pub uncapped: bool,
    /// Lines printed collapsed, not as anchors, that still count as seen.
    pub extra_seen: Vec<usize>,
    /// Image content (base64 data, MIME type) instead of rows.
    pub image: Option<(String, String)>,
    /// The rows are an outline: a cut one continues as an outline.
    pub outline: bool,
}

impl Block {
    /// An error block: what happened and the next step.
    pub fn failure(message: String) -> Block {
        Block {
            head: message,
            error: true,
            ..Block::default()
        }
    }

    fn size(&self) -> usize {
        self.head.len()
            + 1
            + self.rows.iter().map(|r| r.text.len() + 1).sum::<usize>()
            + self.notes.iter().map(|n| n.len() + 1).sum::<usize>()
    }

    /// The anchored lines this block prints.
    pub fn kept_anchors(&self) -> impl Iterator<Item = usize> + '_ {
        self.rows.iter().filter_map(|r| r.anchor)
    }

    fn cut_to(&mut self, budget: usize, cap: usize) {
        let total_rows = self.rows.len();
        let note_room = 160 + self.shown_path.len();
        let fixed = self.head.len() + 1 + self.notes.iter().map(|n| n.len() + 1).sum::<usize>();
        let mut used = fixed + note_room;
        let mut keep = 0;
        for r in &self.rows {
            if used + r.text.len() + 1 > budget {
                break;
            }
            used += r.text.len() + 1;
            keep += 1;
        }
        self.rows.truncate(keep);
        let last_anchor = self.rows.iter().rev().find_map(|r| r.anchor);
        let kib = cap / 1024;
        let note = match last_anchor {
            Some(l) if l < self.total_lines && self.outline => format!(
                "[outline cut at the {kib} KiB output limit after line {l} of {}; read {}:{}- with outline: true (nib read --outline) for the rest of the outline, or :A-B for the lines between]",
                self.total_lines,
                self.shown_path,
                l + 1
            ),
            Some(l) if l < self.total_lines => format!(
                "[cut at the {kib} KiB output limit after line {l} of {}; read {}:{}- for the rest]",
                self.total_lines,
                self.shown_path,
                l + 1
            ),
            _ => format!(
                "[cut at the {kib} KiB output limit: {keep} of {total_rows} rows shown; name fewer paths or a line range]"
            ),
        };
        self.notes.insert(0, note);
    }
}

/// Fits blocks into `cap` bytes, sharing it fairly.
pub fn fit(blocks: &mut [Block], cap: usize) {
    let capped: Vec<usize> = (0..blocks.len()).filter(|&i| !blocks[i].uncapped).collect();
    let total: usize = capped.iter().map(|&i| blocks[i].size()).sum();
    if total <= cap {
        return;
    }
    let mut order = capped;
    order.sort_by_key(|&i| blocks[i].size());
    let mut remaining = cap;
    let n = order.len();
    for (k, &i) in order.iter().enumerate() {
        let share = remaining / (n - k);
        let size = blocks[i].size();
        if size <= share {
            remaining -= size;
        } else {
            blocks[i].cut_to(share, cap);
            remaining = remaining.saturating_sub(share);
        }
    }
}

/// Joins blocks and notes into the final text.
pub fn render(blocks: &[Block], notes: &[String]) -> String {
    let mut out = String::new();
    for (i, b) in blocks.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&b.head);
        out.push('\n');
        for r in &b.rows {
            out.push_str(&r.text);
            out.push('\n');
        }
        for n in &b.notes {
            out.push_str(n);
            out.push('\n');
        }
    }
    if !notes.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("[note: {}]\n", notes.join("; ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(name: &str, rows: usize, width: usize) -> Block {
        Block {
            head: format!("[{name}#0000]"),
            rows: (1..=rows)
                .map(|i| Row::anchored(i, format!("{i}:{}", "x".repeat(width))))
                .collect(),
            shown_path: name.to_string(),
            total_lines: rows,
            ..Block::default()
        }
    }

    #[test]
    fn small_blocks_keep_everything_large_ones_share() {
        let mut blocks = vec![
            block("small", 3, 10),
            block("big1", 2000, 50),
            block("big2", 2000, 50),
        ];
        fit(&mut blocks, 40 * 1024);
        assert_eq!(blocks[0].rows.len(), 3);
        let a = blocks[1].size();
        let b = blocks[2].size();
        assert!(a.abs_diff(b) < 200, "shares are even: {a} vs {b}");
        assert!(blocks.iter().map(Block::size).sum::<usize>() <= 40 * 1024);
        assert!(blocks[1].notes[0].contains("read big1:"));
    }

    #[test]
    fn under_the_cap_nothing_is_cut() {
        let mut blocks = vec![block("a", 10, 10)];
        fit(&mut blocks, 40 * 1024);
        assert_eq!(blocks[0].rows.len(), 10);
        assert!(blocks[0].notes.is_empty());
    }
}
