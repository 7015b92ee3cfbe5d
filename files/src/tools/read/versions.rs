//! What changed, and what the agent already saw.
//!
//! `path#TAG` prints the changes since a version the agent was shown (from
//! the store edit uses, [`crate::seen::Seen`]): rows of the current file,
//! `+N:TEXT` for new or changed lines and ` N:TEXT` for one line of context
//! (both anchors), `-|TEXT` for removed lines (not anchors). The same rows
//! serve git diffs ([`diff_rows`]).
//!
//! On any other read, runs of 3 or more lines the agent saw in a remembered
//! version and that are unchanged now print as one
//! `[lines A-B unchanged since you saw them]` row (or as `N~TEXT` rows with
//! `collapse: false`); `full: true` prints them whole. Collapsed lines still
//! count as seen.

use std::collections::BTreeSet;
use std::path::Path;

use crate::seen::Seen;
use nib_text::blocks::Row;
use nib_text::hashline::{self, Tag};
use nib_text::text::{self, Text};

/// Rows for the differences from `old` to `new`, with one line of context.
/// A new-side line is an anchor only when `anchor(n, text)` says the current
/// file still has that text at line `n`.
pub fn diff_rows(old: &Text, new: &Text, anchor: &dyn Fn(usize, &str) -> bool) -> Vec<Row> {
    let ops = text::diff_ops(old, new);
    let mut rows = Vec::new();
    let new_row = |n: usize, mark: char, rows: &mut Vec<Row>| {
        let line = new.line(n).unwrap_or("");
        if anchor(n, line) {
            rows.push(Row::anchored(
                n,
                format!("{mark}{}", hashline::anchored_row(n, line)),
            ));
        } else {
            rows.push(Row::plain(format!("{mark}{n}|{line}")));
        }
    };
    for group in similar::group_diff_ops(ops, 1) {
        for op in group {
            match op {
                similar::DiffOp::Equal { new_index, len, .. } => {
                    for k in 0..len {
                        new_row(new_index + k + 1, ' ', &mut rows);
                    }
                }
                similar::DiffOp::Delete {
                    old_index, old_len, ..
                } => {
                    for k in 0..old_len {
                        rows.push(Row::plain(format!(
                            "-|{}",
                            old.line(old_index + k + 1).unwrap_or("")
                        )));
                    }
                }
                similar::DiffOp::Insert {
                    new_index, new_len, ..
                } => {
                    for k in 0..new_len {
                        new_row(new_index + k + 1, '+', &mut rows);
                    }
                }
                similar::DiffOp::Replace {
                    old_index,
                    old_len,
                    new_index,
                    new_len,
                } => {
                    for k in 0..old_len {
                        rows.push(Row::plain(format!(
                            "-|{}",
                            old.line(old_index + k + 1).unwrap_or("")
                        )));
                    }
                    for k in 0..new_len {
                        new_row(new_index + k + 1, '+', &mut rows);
                    }
                }
            }
        }
    }
    rows
}

/// The answer to `path#TAG`: the changes since that version, or the known versions.
pub fn since(
    seen: &Seen,
    canonical: &Path,
    want: &str,
    current: &Text,
    current_tag: Tag,
) -> Result<(String, Vec<Row>), String> {
    let want_tag = Tag::parse(want).ok_or_else(|| format!("\"{want}\" is not a tag"))?;
    let versions: Vec<_> = seen.versions(canonical).collect();
    let Some(old) = versions.iter().find(|v| v.tag == want_tag) else {
        let known: Vec<String> = versions.iter().map(|v| format!("#{}", v.tag)).collect();
        return Err(if known.is_empty() {
            "you were shown no version of this file yet".to_string()
        } else {
            format!(
                "nib keeps the last 4 versions you were shown: {}",
                known.join(", ")
            )
        });
    };
    if *old.text == *current {
        return Ok((
            format!("[no changes since #{want_tag}: the file is #{current_tag}]"),
            Vec::new(),
        ));
    }
    let rows = diff_rows(&old.text, current, &|_, _| true);
    Ok((format!("[changes since #{want_tag}]"), rows))
}

/// The lines of `current` that the agent saw, in a remembered version, and
/// that are unchanged now (1-based).
pub fn seen_unchanged(
    seen: &Seen,
    canonical: &Path,
    current: &Text,
    current_tag: Tag,
) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for v in seen.versions(canonical) {
        if v.tag == current_tag && *v.text == *current {
            for &(a, b) in v.seen.ranges() {
                out.extend(a..=b.min(current.len()));
            }
            continue;
        }
        let map = text::unchanged_map(&v.text, current);
        for &(a, b) in v.seen.ranges() {
            for n in a..=b {
                if let Some(Some(i)) = map.get(n - 1) {
                    out.insert(i + 1);
                }
            }
        }
    }
    out
}

/// How unchanged, already-seen lines print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collapse {
    /// One `[lines A-B unchanged since you saw them]` row per run.
    Run,
    /// `N~TEXT` rows.
    Sparse,
    /// Whole rows (`full: true`).
    Off,
}

/// Replaces runs of 3 or more anchored rows on `known` lines. Returns the
/// rows and the lines collapsed (still seen).
pub fn collapse(
    rows: Vec<Row>,
    known: &BTreeSet<usize>,
    mode: Collapse,
    text: &Text,
) -> (Vec<Row>, Vec<usize>) {
    if mode == Collapse::Off || known.is_empty() {
        return (rows, Vec::new());
    }
    let mut out = Vec::with_capacity(rows.len());
    let mut hidden = Vec::new();
    let mut run: Vec<Row> = Vec::new();
    let flush = |run: &mut Vec<Row>, out: &mut Vec<Row>, hidden: &mut Vec<usize>| {
        let contiguous = run
            .windows(2)
            .all(|w| w[0].anchor.map(|a| a + 1) == w[1].anchor);
        if run.len() >= 3 && contiguous {
            let a = run[0].anchor.unwrap_or(0);
            let b = run[run.len() - 1].anchor.unwrap_or(0);
            hidden.extend(a..=b);
            match mode {
                Collapse::Run => out.push(Row::plain(format!(
                    "[lines {a}-{b} unchanged since you saw them]"
                ))),
                _ => {
                    for n in a..=b {
                        out.push(Row::plain(hashline::sparse_row(
                            n,
                            text.line(n).unwrap_or(""),
                        )));
                    }
                }
            }
            run.clear();
        } else {
            out.append(run);
        }
    };
    for r in rows {
        let is_known = r.anchor.is_some_and(|n| known.contains(&n));
        let continues = run.last().and_then(|l| l.anchor).map(|a| a + 1) == r.anchor;
        if is_known && (run.is_empty() || continues) {
            run.push(r);
            continue;
        }
        flush(&mut run, &mut out, &mut hidden);
        if is_known {
            run.push(r);
        } else {
            out.push(r);
        }
    }
    flush(&mut run, &mut out, &mut hidden);
    (out, hidden)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Text {
        Text::decode(s.as_bytes())
    }

    #[test]
    fn diff_rows_mark_changes() {
        let rows: Vec<String> = diff_rows(&t("a\nb\nc\nd\n"), &t("a\nB\nc\nd\ne\n"), &|_, _| true)
            .into_iter()
            .map(|r| r.text)
            .collect();
        assert_eq!(rows, vec![" 1:a", "-|b", "+2:B", " 3:c", " 4:d", "+5:e"]);
    }

    #[test]
    fn runs_of_three_collapse() {
        let text = t("1\n2\n3\n4\n5\n6\n");
        let rows: Vec<Row> = (1..=6)
            .map(|n| Row::anchored(n, format!("{n}:{n}")))
            .collect();
        let known: BTreeSet<usize> = [1, 2, 3, 5].into_iter().collect();
        let (out, hidden) = collapse(rows.clone(), &known, Collapse::Run, &text);
        let out: Vec<String> = out.into_iter().map(|r| r.text).collect();
        assert_eq!(
            out,
            vec![
                "[lines 1-3 unchanged since you saw them]",
                "4:4",
                "5:5",
                "6:6"
            ]
        );
        assert_eq!(hidden, vec![1, 2, 3]);
        let (out, _) = collapse(rows.clone(), &known, Collapse::Sparse, &text);
        assert_eq!(out[0].text, "1~1");
        let (out, hidden) = collapse(rows, &known, Collapse::Off, &text);
        assert_eq!(out.len(), 6);
        assert!(hidden.is_empty());
    }
}
