//! Why a section of a patch cannot apply, and the file's rows shown with
//! it: a [`Refusal`] is hard (fix the patch), to confirm (send it again or
//! REAPPLY) or waiting for a person's approval; [`problem`] words the
//! planner's [`Problem`]s with the rows they are about. The rows shown are
//! recorded as seen by the call (`super::apply_sections`); what to refuse
//! is decided by `section` and `rebase`.

use std::path::PathBuf;
use std::sync::Arc;

use super::apply::Problem;
use super::section::Current;
use nib_text::hashline::{self, Tag};
use nib_text::text::Text;

/// Rows shown in a refusal, recorded as seen because the agent now has them.
pub(super) struct Shown {
    pub(super) canonical: PathBuf,
    pub(super) tag: Tag,
    pub(super) text: Arc<Text>,
    pub(super) lines: Vec<usize>,
}

/// Why a section cannot apply.
pub(super) enum Refusal {
    /// Fix the patch.
    Hard(String, Option<Shown>),
    /// The agent may confirm: send again, or REAPPLY.
    Confirm(String, Option<Shown>, Vec<(usize, usize)>),
    /// A person must approve a write first.
    Approval(crate::context::ApprovalRequest),
}

/// Anchored rows of `text` for `lines` (1-based), sorted and unique.
pub(super) fn rows_of(text: &Text, lines: &[usize]) -> (Vec<String>, Vec<usize>) {
    let mut ls: Vec<usize> = lines
        .iter()
        .copied()
        .filter(|&n| n >= 1 && n <= text.len())
        .collect();
    ls.sort_unstable();
    ls.dedup();
    let rows = ls
        .iter()
        .map(|&n| hashline::anchored_row(n, text.line(n).unwrap_or("")))
        .collect();
    (rows, ls)
}

/// Lines around each of `centers` (±radius).
pub(super) fn around(centers: &[usize], radius: usize, len: usize) -> Vec<usize> {
    let mut out = Vec::new();
    for &c in centers {
        let lo = c.saturating_sub(radius).max(1);
        let hi = (c + radius).min(len);
        out.extend(lo..=hi);
    }
    out
}

/// Turns a planning problem into a refusal that quotes the file.
pub(super) fn problem(p: Problem, shown: &str, cur: Option<&Current>) -> Refusal {
    let show = |lines: &[usize]| -> (String, Option<Shown>) {
        match cur {
            Some(c) => {
                let (rows, ls) = rows_of(&c.text, lines);
                (
                    format!("{}\n{}", hashline::header(shown, c.tag), rows.join("\n")),
                    Some(c.shown(ls)),
                )
            }
            None => (String::new(), None),
        }
    };
    match p {
        Problem::OutOfRange {
            patch_line,
            line,
            len,
        } => {
            let (rows, s) = show(&around(&[len], 2, len));
            Refusal::Hard(
                format!(
                    "patch line {patch_line}: line {line} is past the end of {shown}, which has {len} lines. Its last lines:\n{rows}"
                ),
                s,
            )
        }
        Problem::Mismatch {
            patch_line,
            line,
            expected,
        } => {
            let (rows, s) = show(&[line]);
            Refusal::Hard(
                format!(
                    "patch line {patch_line}: line {line} of {shown} does not match \"{expected}\"; it reads:\n{rows}\nhint: check the line numbers against the rows read printed"
                ),
                s,
            )
        }
        Problem::SubNotOnLine {
            patch_line,
            line,
            old,
            on_line,
            ..
        } => {
            let (rows, s) = show(&[line]);
            let why = if on_line > 1 {
                format!("occurs {on_line} times on line {line}; SUB needs text that occurs once")
            } else {
                format!("is not on line {line}, nor once elsewhere in the file")
            };
            Refusal::Hard(
                format!("patch line {patch_line}: SUB {line}: \"{old}\" {why}:\n{rows}"),
                s,
            )
        }
        Problem::Overlap { first, second } => Refusal::Hard(
            format!(
                "patch lines {first} and {second}: these hunks of {shown} touch the same lines; merge them into one hunk (line numbers never shift between hunks)"
            ),
            None,
        ),
    }
}
