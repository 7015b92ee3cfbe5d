//! A tagged section's base and the move onto the current text: the version
//! the agent was shown with the tag ([`base_of`], refused on a collision,
//! an unknown tag or a version `nib undo` put back) and the ops moved from
//! its numbering to the current one ([`rebase`], refused when a line they
//! anchor on changed). Which versions were shown is remembered in
//! [`crate::seen`]; the line map between two texts is
//! [`nib_text::text::unchanged_map`]; `section` decides when to rebase.

use std::sync::Arc;

use super::apply::Op;
use super::current::Current;
use super::patch::Section;
use super::refusal::{Refusal, around, rows_of};
use crate::context::Ctx;
use crate::seen::SeenLines;
use nib_text::hashline::{self, Tag};
use nib_text::text::Text;

/// How a stale tag's refusal says that no version with it was shown in
/// this session (then the tag); the command line, whose processes keep no
/// history, says it in its own words.
pub const NOT_SHOWN: &str = "and you were not shown a version with #";

/// The version a tagged section's hunks are planned on: the one the agent
/// was shown with that tag (its text and the lines seen whole in it), and
/// whether it is stale (not the current text). Refused, with the current
/// rows around the edit, when no shown version has the tag, when the
/// current text holds the tag but is not what the agent saw (a 16-bit
/// collision), or when `nib undo` has put the tagged version back.
pub(super) fn base_of(
    section: &Section,
    shown: &str,
    cur: &Current,
    given: Tag,
    ctx: &Ctx,
) -> Result<(Arc<Text>, SeenLines, bool), Refusal> {
    let base = ctx.with_agent(|a| {
        if given == cur.tag {
            match a.seen.version_matching(&cur.canonical, given, &cur.text) {
                Some(v) => Ok((Arc::clone(&v.text), v.seen.clone(), false)),
                None if a.seen.version_with_tag(&cur.canonical, given).is_some() => Err(true),
                None => Ok((Arc::clone(&cur.text), SeenLines::default(), false)),
            }
        } else {
            match a.seen.version_with_tag(&cur.canonical, given) {
                Some(v) => Ok((Arc::clone(&v.text), v.seen.clone(), true)),
                None => Err(false),
            }
        }
    });
    // A version nib wrote and `nib undo` has since put back is not
    // rebased onto: the agent reads the file again.
    if given != cur.tag
        && crate::undo::was_undone(
            &ctx.settings.state_dir,
            ctx.workspace.project_dir(),
            &cur.canonical,
            &given.to_string(),
        )
    {
        let lines = around(&hunk_lines(section), 2, cur.text.len());
        let (rows, ls) = rows_of(&cur.text, &lines);
        return Err(Refusal::Hard(
            format!(
                "{shown}#{given} was put back by nib undo: {shown} is now #{}. Its current lines around the edit:\n{}\n{}\nhint: edit against these rows with the new tag",
                cur.tag,
                hashline::header(shown, cur.tag),
                rows.join("\n")
            ),
            Some(cur.shown(ls)),
        ));
    }
    match base {
        Ok(b) => Ok(b),
        Err(collision) => {
            let lines = around(&hunk_lines(section), 2, cur.text.len());
            let (rows, ls) = rows_of(&cur.text, &lines);
            let why = if collision {
                format!(
                    "{shown} now holds a different text with the same tag #{given} (a 16-bit collision): \
                     it is not the version you were shown"
                )
            } else {
                format!(
                    "the tag #{given} is stale: {shown} is now #{}, {NOT_SHOWN}{given}",
                    cur.tag
                )
            };
            let msg = format!(
                "{why}. Its current lines around the edit:\n{}\n{}\nhint: edit against these rows with the new tag",
                hashline::header(shown, cur.tag),
                rows.join("\n")
            );
            Err(Refusal::Hard(msg, Some(cur.shown(ls))))
        }
    }
}

/// The lines a section's hunks name, for the rows shown around the edit.
fn hunk_lines(section: &Section) -> Vec<usize> {
    use super::patch::{Hunk, Target};
    section
        .hunks
        .iter()
        .flat_map(|h| match h {
            Hunk::Put { target, .. } | Hunk::Cut { target, .. } => match *target {
                Target::Range(a, b) => vec![a, b],
                Target::Block(n) | Target::Before(n) | Target::After(n) | Target::AfterBlock(n) => {
                    vec![n]
                }
                Target::End => vec![],
            },
            Hunk::Sub { at, .. } => vec![*at],
        })
        .collect()
}

/// Moves ops from base numbering to current numbering; `Err` lists the base
/// lines (1-based) that changed.
pub(super) fn rebase(
    ops: &[Op],
    map: &[Option<usize>],
    base_len: usize,
    cur_len: usize,
) -> Result<Vec<Op>, Vec<usize>> {
    let mut out = Vec::with_capacity(ops.len());
    let mut changed = Vec::new();
    let at = |i: usize| map.get(i).copied().flatten();
    for op in ops {
        for &a in &op.anchors {
            if at(a - 1).is_none() {
                changed.push(a);
            }
        }
        let (start, end) = if op.end > op.start {
            let mut ok = true;
            for i in op.start..op.end {
                match (
                    at(i),
                    i.checked_sub(1).filter(|&p| p >= op.start).and_then(at),
                ) {
                    (None, _) => {
                        ok = false;
                        changed.push(i + 1);
                    }
                    (Some(n), Some(prev)) if n != prev + 1 => {
                        ok = false;
                        changed.push(i + 1);
                    }
                    _ => {}
                }
            }
            if !ok {
                continue;
            }
            match (at(op.start), at(op.end - 1)) {
                (Some(s), Some(e)) => (s, e + 1),
                _ => continue,
            }
        } else if op.anchors.is_empty() {
            if op.start == base_len {
                (cur_len, cur_len)
            } else {
                changed.push(op.start + 1);
                continue;
            }
        } else if op.anchors.contains(&(op.start + 1)) {
            match at(op.start) {
                Some(p) => (p, p),
                None => continue,
            }
        } else {
            match op.start.checked_sub(1).and_then(at) {
                Some(p) => (p + 1, p + 1),
                None => {
                    changed.push(op.start);
                    continue;
                }
            }
        };
        out.push(Op {
            start,
            end,
            ..op.clone()
        });
    }
    if changed.is_empty() {
        Ok(out)
    } else {
        changed.sort_unstable();
        changed.dedup();
        Err(changed)
    }
}
