//! One section of a patch planned against its file as it is now: an
//! `*** Add File`, a section without a tag (the current
//! text is the base) or one under a `[PATH#TAG]` header (the base the tag
//! names, the hunks planned on it, every anchored line checked against what
//! the agent saw, the ops rebased when the tag is stale). What the planner
//! does with hunks lives in [`super::apply`], the base and the rebase in
//! `rebase`, IMPORT lines in `imports`, the splice and the answer's rows in
//! `land`, the file as read in `current`, a refusal's rows in `refusal`;
//! what a token or a patch sent again waives ([`Waivers`]) is kept here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::apply::{self, Op, Problem, SubPolicy};
use super::current::{Current, read_current};
use super::imports::with_imports;
use super::journal::Step;
use super::land::{Planned, Ready, finish, target};
use super::patch::{FileOp, Section, SectionKind};
use super::rebase::{base_of, rebase};
use super::refusal::{Refusal, Shown, around, rows_of};
use crate::context::Ctx;
use crate::fs;
use crate::seen::{PendingEdit, SeenLines};
use nib_text::hashline::{self, Tag};
use nib_text::text::Text;

/// What a token (or the same patch sent again) lets through.
#[derive(Default)]
pub(super) struct Waivers {
    seen: bool,
    sub_moves: Vec<(usize, usize)>,
    versions: Option<Vec<(PathBuf, Arc<Text>)>>,
}

impl From<&PendingEdit> for Waivers {
    fn from(p: &PendingEdit) -> Waivers {
        Waivers {
            seen: p.waive_seen,
            sub_moves: p.sub_moves.clone(),
            versions: Some(p.versions.clone()),
        }
    }
}

/// Where a SUB may look for its text, and which moves it may make without
/// asking: two lines from where it was named, onto a line the agent saw.
struct AllowSub<'a> {
    section: &'a Section,
    lang: Option<nib_text::lang::Lang>,
    seen: &'a SeenLines,
    approved: &'a [(usize, usize)],
}

impl SubPolicy for AllowSub<'_> {
    fn block_end(&self, text: &Text, line: usize) -> usize {
        match self.lang {
            Some(lang) => nib_text::lang::block_end(lang, &text.encode(), line)
                .unwrap_or_else(|| apply::block_end(&text.lines, line)),
            None => apply::block_end(&text.lines, line),
        }
    }

    fn allow(&self, hunk: usize, named: usize, found: usize) -> bool {
        let patch_line = self
            .section
            .hunks
            .get(hunk)
            .map(|h| h.patch_line())
            .unwrap_or(0);
        self.approved.contains(&(patch_line, found))
            || (named.abs_diff(found) <= 2 && self.seen.contains(found))
    }
}

pub(super) fn plan_section(
    section: &Section,
    path: &Path,
    waivers: &Waivers,
    ctx: &Ctx,
) -> Result<Ready, Refusal> {
    let shown = ctx.workspace.display(path);
    let hard = |m: String| Refusal::Hard(m, None);
    let import_lang = match (section.imports.is_empty(), nib_text::lang::Lang::of(path)) {
        (true, _) => None,
        (false, Some(l)) if nib_text::lang::has_imports(l) => Some(l),
        (false, _) => {
            return Err(hard(format!(
                "patch line {}: IMPORT adds Java or Kotlin imports; {shown} is not a Java or Kotlin file. \
                 Add the line with PUT instead",
                section.line
            )));
        }
    };
    let current = read_current(&ctx.scope, path, &shown)?;
    if let (Some(cur), Some(versions)) = (&current, &waivers.versions)
        && let Some((_, t)) = versions.iter().find(|(p, _)| *p == cur.canonical)
        && **t != *cur.text
    {
        return Err(hard(format!(
            "{shown} changed after the edit was refused, so its token no longer applies; \
                     read it again and send a new patch"
        )));
    }
    match &section.kind {
        SectionKind::AddFile(rows) => {
            plan_added(section, rows, path, &shown, current.is_some(), ctx)
        }
        SectionKind::Tagless => plan_tagless(section, path, &shown, import_lang, current, ctx),
        SectionKind::Tagged => {
            let Some(cur) = current else {
                return Err(hard(format!(
                    "{shown}: no such file. To create it, use *** Add File: {shown}"
                )));
            };
            plan_tagged(section, path, &shown, import_lang, cur, waivers, ctx)
        }
    }
}

/// A section that adds a file (`*** Add File`): refused when the path exists.
fn plan_added(
    section: &Section,
    rows: &[String],
    path: &Path,
    shown: &str,
    exists: bool,
    ctx: &Ctx,
) -> Result<Ready, Refusal> {
    if exists || fs::exists(&ctx.scope, path) {
        return Err(Refusal::Hard(
            format!(
                "patch line {}: {shown} already exists; change it under its [PATH#TAG] header, or REM it first",
                section.line
            ),
            None,
        ));
    }
    let text = Arc::new(Text {
        bom: false,
        ending: nib_text::text::LineEnding::Lf,
        mixed_endings: false,
        endings: Vec::new(),
        lines: rows.iter().collect(),
        final_newline: true,
    });
    let n = text.len();
    let tag = Tag::of(&text.encode());
    Ok(Ready {
        steps: vec![Step::Place {
            target: target(ctx, path, shown)?,
            bytes: text.encode(),
            like: None,
        }],
        written: vec![path.to_path_buf()],
        head: hashline::header(shown, tag),
        rows: vec![format!(
            "[created: {n} line{}, as you sent them]",
            if n == 1 { "" } else { "s" }
        )],
        notes: Vec::new(),
        record: Some((path.to_path_buf(), tag, text, (1..=n).collect())),
    })
}

/// A section without a tag: the hunks apply to the current text (an empty
/// one when the file does not exist yet, which creates it).
fn plan_tagless(
    section: &Section,
    path: &Path,
    shown: &str,
    import_lang: Option<nib_text::lang::Lang>,
    current: Option<Current>,
    ctx: &Ctx,
) -> Result<Ready, Refusal> {
    let (base, stat, created) = match &current {
        Some(c) => (Arc::clone(&c.text), Some(c.stat.clone()), false),
        None => (Arc::new(Text::decode(b"")), None, true),
    };
    let plan = apply::plan(
        &base,
        &section.hunks,
        &AllowSub {
            section,
            lang: nib_text::lang::Lang::of(path),
            seen: &SeenLines::default(),
            approved: &[],
        },
    )
    .map_err(|p| problem(p, shown, current.as_ref()))?;
    let ops = with_imports(plan.ops.clone(), import_lang, &base, &section.imports)
        .map_err(|m| Refusal::Hard(format!("patch line {}: {m}", section.line), None))?;
    let mut ready = finish(
        Planned {
            section,
            path,
            shown,
            base: &base,
            current: &base,
            ops: &ops,
            seen_now: &SeenLines::default(),
            base_ops: None,
            stat,
            raw: current.as_ref().map(|c| c.bytes.as_slice()),
        },
        ctx,
    )?;
    if created {
        ready
            .notes
            .push(format!("[{shown} did not exist; created it]"));
    }
    ready.notes.extend(plan.notes);
    Ok(ready)
}

/// A section under a `[PATH#TAG]` header: the base version the tag names
/// ([`base_of`]), the hunks planned on it, the anchors checked against what
/// the agent saw, and the ops rebased onto the current text when the tag
/// is stale.
fn plan_tagged(
    section: &Section,
    path: &Path,
    shown: &str,
    import_lang: Option<nib_text::lang::Lang>,
    cur: Current,
    waivers: &Waivers,
    ctx: &Ctx,
) -> Result<Ready, Refusal> {
    let given = section.tag.unwrap_or(cur.tag);
    if section.file_op == Some(FileOp::Rem) && !section.hunks.is_empty() {
        return Err(Refusal::Hard(
            format!(
                "patch line {}: REM deletes {shown}, so its hunks would be lost; drop the hunks or the REM",
                section.line
            ),
            None,
        ));
    }
    let (base_text, base_seen, stale) = base_of(section, shown, &cur, given, ctx)?;
    let policy = AllowSub {
        section,
        lang: nib_text::lang::Lang::of(path),
        seen: &base_seen,
        approved: &waivers.sub_moves,
    };
    let plan = match apply::plan(&base_text, &section.hunks, &policy) {
        Ok(p) => p,
        Err(Problem::SubNotOnLine {
            patch_line,
            line,
            old,
            on_line: 0,
            found: Some(found),
        }) => {
            let (rows, ls) = rows_of(&cur.text, &[line, found]);
            let msg = format!(
                "patch line {patch_line}: SUB {line}: \"{old}\" is not on line {line}; it is on line {found}:\n{}\n{}",
                hashline::header(shown, cur.tag),
                rows.join("\n")
            );
            return Err(Refusal::Confirm(
                msg,
                Some(cur.shown(ls)),
                vec![(patch_line, found)],
            ));
        }
        Err(p) => return Err(problem(p, shown, Some(&cur))),
    };
    let mut confirmed = SeenLines::default();
    plan.confirmed.iter().for_each(|&n| confirmed.insert(n));
    let map = stale.then(|| nib_text::text::unchanged_map(&base_text, &cur.text));
    let ops = match &map {
        None => plan.ops.clone(),
        Some(m) => rebase(&plan.ops, m, base_text.len(), cur.text.len()).map_err(|changed| {
            let lines = around(&changed, 2, cur.text.len());
            let (rows, ls) = rows_of(&cur.text, &lines);
            Refusal::Hard(
                format!(
                    "the tag #{given} is stale and lines this edit anchors on changed since ({}); {shown} is now:\n{}\n{}\nhint: edit against these rows with the new tag",
                    changed.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
                    hashline::header(shown, cur.tag),
                    rows.join("\n")
                ),
                Some(cur.shown(ls)),
            )
        })?,
    };
    let ops = with_imports(ops, import_lang, &cur.text, &section.imports)
        .map_err(|m| Refusal::Hard(format!("patch line {}: {m}", section.line), None))?;
    if ctx.enforce_seen && !waivers.seen {
        refuse_unseen_anchors(
            &plan.ops,
            &base_seen,
            &confirmed,
            map.as_deref(),
            shown,
            &cur,
        )?;
    }
    let seen_now = seen_in_current(&base_seen, map.as_deref());
    let mut ready = finish(
        Planned {
            section,
            path,
            shown,
            base: &base_text,
            current: &cur.text,
            ops: &ops,
            seen_now: &seen_now,
            base_ops: Some(&plan.ops),
            stat: Some(cur.stat.clone()),
            raw: Some(&cur.bytes),
        },
        ctx,
    )?;
    if stale {
        ready.notes.push(format!(
            "[the tag #{given} was stale; the edit was rebased onto #{}]",
            cur.tag
        ));
    }
    ready.notes.extend(plan.notes);
    Ok(ready)
}

/// Refuses ops that anchor on lines of the base the agent has not seen
/// whole (nor confirmed with a `~` check), showing them in the current text.
fn refuse_unseen_anchors(
    ops: &[Op],
    base_seen: &SeenLines,
    confirmed: &SeenLines,
    map: Option<&[Option<usize>]>,
    shown: &str,
    cur: &Current,
) -> Result<(), Refusal> {
    let mut unseen: Vec<usize> = ops
        .iter()
        .flat_map(|o| o.anchors.iter().copied())
        .filter(|&n| !base_seen.contains(n) && !confirmed.contains(n))
        .collect();
    unseen.sort_unstable();
    unseen.dedup();
    if !unseen.is_empty() {
        let in_current: Vec<usize> = match map {
            None => unseen.clone(),
            Some(m) => unseen
                .iter()
                .filter_map(|&n| m.get(n - 1).copied().flatten().map(|i| i + 1))
                .collect(),
        };
        let (rows, ls) = rows_of(&cur.text, &in_current);
        let msg = format!(
            "{shown}: the edit anchors on line{} {} which you have not seen whole (read, grep or a ~ check); here they are:\n{}\n{}",
            if unseen.len() == 1 { "" } else { "s" },
            unseen
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            hashline::header(shown, cur.tag),
            rows.join("\n")
        );
        return Err(Refusal::Confirm(msg, Some(cur.shown(ls)), Vec::new()));
    }
    Ok(())
}

/// What the agent saw of the base, in the current text's numbering (`map`
/// takes a base line to its current one; `None` when the base is current).
fn seen_in_current(base_seen: &SeenLines, map: Option<&[Option<usize>]>) -> SeenLines {
    let mut seen_now = SeenLines::default();
    for &(a, b) in base_seen.ranges() {
        for n in a..=b {
            let mapped = match map {
                None => Some(n),
                Some(m) => m.get(n - 1).copied().flatten().map(|i| i + 1),
            };
            if let Some(c) = mapped {
                seen_now.insert(c);
            }
        }
    }
    seen_now
}

/// Turns a planning problem into a refusal that quotes the file.
fn problem(p: Problem, shown: &str, cur: Option<&Current>) -> Refusal {
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
