//! Why a section of a patch cannot apply, and the file's rows shown with
//! it: a [`Refusal`] is hard (fix the patch), to confirm (send it again or
//! REAPPLY) or waiting for a person's approval, with the rows it shows
//! ([`rows_of`], [`around`]). The rows shown are recorded as seen by the
//! call (`super::apply_sections`); what to refuse, and its words, are
//! decided by `current`, `section`, `rebase` and `land`.

use std::path::PathBuf;
use std::sync::Arc;

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
