//! Where a section's ops land: the splice into the current text, the
//! warnings the edit applies with, the write steps (place, trash, move,
//! copy) and the answer's rows, with the lines the agent now has seen.
//! Nothing is written here: the steps go to [`super::journal`] once every
//! section is ready (`super::apply_sections`). Planning the ops is
//! `section`'s; the warnings' checks are [`super::warnings`]' and
//! [`super::missing_import`]'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::apply::{self, Op};
use super::journal::Step;
use super::patch::{FileOp, Section};
use super::refusal::Refusal;
use super::{missing_import, warnings};
use crate::context::Ctx;
use crate::fs;
use crate::seen::SeenLines;
use nib_text::hashline::{self, Tag};
use nib_text::text::Text;

/// A section ready to write.
pub(super) struct Ready {
    pub(super) steps: Vec<Step>,
    /// The paths written (their approvals are spent once the edit lands).
    pub(super) written: Vec<PathBuf>,
    /// The header and rows of the answer.
    pub(super) head: String,
    pub(super) rows: Vec<String>,
    pub(super) notes: Vec<String>,
    /// The new version to record as seen: path (canonicalized after the write), tag, text, lines.
    pub(super) record: Option<(PathBuf, Tag, Arc<Text>, Vec<usize>)>,
}

/// The target of a write, or the refusal that stops the section.
pub(super) fn target(ctx: &Ctx, path: &Path, shown: &str) -> Result<fs::WriteTarget, Refusal> {
    match ctx.write_target(path) {
        Ok(t) => Ok(t),
        Err(crate::context::TargetError::NeedsApproval(req)) => Err(Refusal::Approval(req)),
        Err(crate::context::TargetError::Fs(e)) => {
            Err(Refusal::Hard(format!("{shown}: {e}"), None))
        }
    }
}

/// One section's planned change, ready to be spliced: the file, the text
/// the agent's patch was read against and the text it lands on, the ops,
/// and what the agent has seen.
pub(super) struct Planned<'a> {
    pub(super) section: &'a Section,
    pub(super) path: &'a Path,
    /// The path as the answer shows it.
    pub(super) shown: &'a str,
    /// The text the patch's line numbers refer to.
    pub(super) base: &'a Text,
    /// The text the ops land on (the base itself, or the file as it is now
    /// when the edit was rebased).
    pub(super) current: &'a Arc<Text>,
    pub(super) ops: &'a [Op],
    /// Lines seen, in `current`'s numbering.
    pub(super) seen_now: &'a SeenLines,
    /// The ops against `base` when they were rebased (for warnings that
    /// read the agent's own lines).
    pub(super) base_ops: Option<&'a [Op]>,
    /// The file's metadata, kept on the new version.
    pub(super) stat: Option<fs::Stat>,
    /// The file's bytes as read (written as they are when there are no ops).
    pub(super) raw: Option<&'a [u8]>,
}

/// Splices the ops into the current text and builds the steps and answer.
pub(super) fn finish(planned: Planned<'_>, ctx: &Ctx) -> Result<Ready, Refusal> {
    let Planned {
        section,
        path,
        shown,
        base,
        current,
        ops,
        seen_now,
        base_ops,
        stat,
        raw,
    } = planned;
    let (new_text, landed) = apply::splice(current, ops);
    let new_text = Arc::new(new_text);
    let mut notes = Vec::new();
    notes.extend(warnings::one_off(base, base_ops.unwrap_or(ops)));
    if let Some(w) = warnings::brackets(current, ops) {
        notes.push(w);
    }
    let after_bytes = new_text.encode();
    if nib_text::filekind::syntax(path).is_some() {
        let before = String::from_utf8_lossy(&current.encode()).into_owned();
        if let Some(w) = warnings::syntax(
            path,
            (!current.is_empty()).then_some(before.as_str()),
            &String::from_utf8_lossy(&after_bytes),
        ) {
            notes.push(w);
        }
    }

    // The new version first: it is parsed incrementally from the old one's
    // cached tree, and the old one is only looked at when the new one fails.
    if let Some(lang) = nib_text::lang::Lang::of(path)
        && let before = current.encode()
        && let Some(line) = nib_text::lang::first_error_after_edit(lang, &before, &after_bytes)
        && nib_text::lang::first_error(lang, &before).is_none()
    {
        notes.push(format!(
            "[warning: the file no longer parses: the first error is on line {line}]"
        ));
    }

    if nib_text::lang::Lang::of(path) == Some(nib_text::lang::Lang::Java) {
        let rows: Vec<(usize, usize)> = landed
            .iter()
            .filter(|l| l.sent && l.len > 0)
            .map(|l| (l.start + 1, l.start + l.len))
            .collect();
        if !rows.is_empty()
            && let Some(found) = missing_import::unimported(&after_bytes, &rows)
            && !found.names.is_empty()
        {
            let fixes = missing_import::resolve(&found, &ctx.workspace.roots(), &ctx.scope);
            notes.extend(missing_import::warning(&fixes));
        }
    }

    // Seen in the new version: what was seen, carried through the splice, the
    // new rows, and the context rows printed below.
    let map = apply::line_map(current.len(), ops);
    let mut seen: Vec<usize> = Vec::new();
    for &(a, b) in seen_now.ranges() {
        for n in a..=b {
            if let Some(Some(i)) = map.get(n - 1) {
                seen.push(i + 1);
            }
        }
    }
    let rows = change_rows(&new_text, &landed, &mut seen);
    // Without hunks the file's bytes go as they are (whatever they hold).
    let after_bytes = match raw {
        Some(bytes) if ops.is_empty() => bytes.to_vec(),
        _ => after_bytes,
    };
    let new_tag = Tag::of(&after_bytes);
    let mut steps = Vec::new();
    let mut written = vec![path.to_path_buf()];
    let (head, record_path) = match &section.file_op {
        None => {
            if ops.is_empty() {
                notes.push("[no hunks: nothing changed]".into());
            } else {
                steps.push(Step::Place {
                    target: target(ctx, path, shown)?,
                    bytes: after_bytes,
                    like: stat,
                });
            }
            (hashline::header(shown, new_tag), path.to_path_buf())
        }
        Some(FileOp::Rem) => {
            steps.push(Step::Trash(target(ctx, path, shown)?));
            return Ok(Ready {
                steps,
                written,
                head: format!("[{shown}] moved to the trash"),
                rows: Vec::new(),
                notes,
                record: None,
            });
        }
        Some(FileOp::Mv(dest)) | Some(FileOp::Cp(dest)) => {
            let dest_path = ctx.workspace.resolve(dest);
            let dest_shown = ctx.workspace.display(&dest_path);
            if fs::exists(&ctx.scope, &dest_path) {
                return Err(Refusal::Hard(
                    format!(
                        "{dest_shown} already exists; MV and CP do not overwrite. REM it first or pick another name"
                    ),
                    None,
                ));
            }
            steps.push(Step::Place {
                target: target(ctx, &dest_path, &dest_shown)?,
                bytes: after_bytes,
                like: stat,
            });
            written.push(dest_path.clone());
            let verb = if matches!(section.file_op, Some(FileOp::Mv(_))) {
                steps.push(Step::Remove(target(ctx, path, shown)?));
                "moved"
            } else {
                "copied"
            };
            (
                format!(
                    "{} ({verb} from {shown})",
                    hashline::header(&dest_shown, new_tag)
                ),
                dest_path,
            )
        }
    };
    seen.sort_unstable();
    seen.dedup();
    Ok(Ready {
        steps,
        written,
        head,
        rows,
        notes,
        record: Some((record_path, new_tag, new_text, seen)),
    })
}

/// The answer's rows for the changes: one unchanged row on each side of each
/// group of touching changes, the agent's own rows as `[lines A-B as you sent
/// them]`, rows nib built (SUB) in full, and `[N lines cut]` for deletions.
/// Every anchored row printed, and every new line, is added to `seen`.
fn change_rows(new_text: &Text, landed: &[apply::Landed], seen: &mut Vec<usize>) -> Vec<String> {
    let mut rows = Vec::new();
    let mut last_row = 0usize; // the last line printed as a row (1-based)
    let mut i = 0;
    while i < landed.len() {
        // A group: changes that touch (no unchanged line between them).
        let mut j = i + 1;
        let mut end = landed[i].start + landed[i].len;
        while j < landed.len() && landed[j].start <= end {
            end = end.max(landed[j].start + landed[j].len);
            j += 1;
        }
        let start = landed[i].start;
        if start >= 1 && start > last_row {
            rows.push(hashline::anchored_row(
                start,
                new_text.line(start).unwrap_or(""),
            ));
            seen.push(start);
        }
        let mut sent_run: Option<(usize, usize)> = None;
        let flush = |rows: &mut Vec<String>, run: &mut Option<(usize, usize)>| {
            if let Some((a, b)) = run.take() {
                rows.push(if a == b {
                    format!("[line {a} as you sent it]")
                } else {
                    format!("[lines {a}-{b} as you sent them]")
                });
            }
        };
        for l in &landed[i..j] {
            if l.len == 0 {
                if l.removed > 0 {
                    flush(&mut rows, &mut sent_run);
                    rows.push(format!(
                        "[{} line{} cut]",
                        l.removed,
                        if l.removed == 1 { "" } else { "s" }
                    ));
                }
                continue;
            }
            let (a, b) = (l.start + 1, l.start + l.len);
            seen.extend(a..=b);
            if l.sent {
                sent_run = match sent_run {
                    Some((ra, rb)) if rb + 1 == a => Some((ra, b)),
                    other => {
                        let mut run = other;
                        flush(&mut rows, &mut run);
                        Some((a, b))
                    }
                };
            } else {
                flush(&mut rows, &mut sent_run);
                for n in a..=b {
                    rows.push(hashline::anchored_row(n, new_text.line(n).unwrap_or("")));
                }
            }
        }
        flush(&mut rows, &mut sent_run);
        let after = end + 1;
        if after <= new_text.len() {
            rows.push(hashline::anchored_row(
                after,
                new_text.line(after).unwrap_or(""),
            ));
            seen.push(after);
        }
        last_row = after;
        i = j;
    }
    rows
}
