//! The `edit` tool: a patch checked whole, then written all-or-nothing.
//!
//! Flow for each section: read the file through [`crate::fs`]; pick the base
//! version the patch's line numbers refer to (the current text when the tag is
//! current and not a collision, else the remembered version with that tag);
//! [`apply::plan`] the hunks against it; check that every anchored line was
//! seen (or confirmed by `~`); rebase the ops onto the current text when the
//! tag was stale, refusing when an anchored line changed; [`apply::splice`].
//! Only when every section passes are the files written, through
//! [`journal::commit_all`]. Refusals that the agent may override (unseen
//! lines, a SUB found further away) leave a token in [`crate::seen::Tokens`].
//!
//! Parsing lives in [`patch`], splicing in [`apply`], crash safety in
//! [`journal`], the warnings an edit applies with in [`warnings`].

pub mod apply;
pub mod journal;
pub mod missing_import;
pub mod patch;
pub mod warnings;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::context::args::{ArgError, Args};
use crate::context::{Ctx, TEXT_LIMIT, ToolOutput};
use crate::fs::{self, FsError, Kind};
use crate::seen::{PendingEdit, SeenLines};
use apply::{Op, Problem, SubPolicy};
use journal::Step;
use nib_text::hashline::{self, Tag};
use nib_text::text::Text;
use patch::{FileOp, Patch, Section, SectionKind};

/// Runs `edit`.
pub fn run(mut args: Args, ctx: &Ctx) -> Result<ToolOutput, ArgError> {
    for alias in ["patch", "diff", "edits"] {
        args.alias(alias, "input");
    }
    let input = args.required_string("input")?;
    let notes = args.finish();
    Ok(edit(&input, ctx, notes))
}

/// What a token (or the same patch sent again) lets through.
#[derive(Default)]
struct Waivers {
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

/// Applies a patch text.
pub fn edit(input: &str, ctx: &Ctx, mut notes: Vec<String>) -> ToolOutput {
    let (parsed, parse_notes) = match patch::parse(input) {
        Ok(p) => p,
        Err(e) => {
            return ToolOutput::error(format!(
                "edit: the patch could not be read, so nothing was written.\n{e}"
            ));
        }
    };
    notes.extend(parse_notes);
    let (patch_text, sections, waivers) = match parsed {
        Patch::Reapply(token) => {
            let Some(pending) = ctx.with_agent(|a| a.tokens.get(&token).cloned()) else {
                return ToolOutput::error(format!(
                    "edit: REAPPLY {token}: no refused edit has this token (tokens last for this session \
                     and the 64 latest refusals). Nothing was written.\nhint: send the patch itself"
                ));
            };
            match patch::parse(&pending.patch) {
                Ok((Patch::Sections(s), _)) => (pending.patch.clone(), s, Waivers::from(&pending)),
                _ => {
                    return ToolOutput::error(
                        "edit: the remembered patch no longer parses. Nothing was written.".into(),
                    );
                }
            }
        }
        Patch::Sections(s) => {
            let waivers = ctx
                .with_agent(|a| a.tokens.for_patch(input).map(Waivers::from))
                .unwrap_or_default();
            (input.to_string(), s, waivers)
        }
    };
    apply_sections(&patch_text, &sections, &waivers, ctx, notes)
}

/// Rows shown in a refusal, recorded as seen because the agent now has them.
struct Shown {
    canonical: PathBuf,
    tag: Tag,
    text: Arc<Text>,
    lines: Vec<usize>,
}

/// Why a section cannot apply.
enum Refusal {
    /// Fix the patch.
    Hard(String, Option<Shown>),
    /// The agent may confirm: send again, or REAPPLY.
    Confirm(String, Option<Shown>, Vec<(usize, usize)>),
    /// A person must approve a write first.
    Approval(crate::context::ApprovalRequest),
}

/// The target of a write, or the refusal that stops the section.
fn target(ctx: &Ctx, path: &Path, shown: &str) -> Result<fs::WriteTarget, Refusal> {
    match ctx.write_target(path) {
        Ok(t) => Ok(t),
        Err(crate::context::TargetError::NeedsApproval(req)) => Err(Refusal::Approval(req)),
        Err(crate::context::TargetError::Fs(e)) => {
            Err(Refusal::Hard(format!("{shown}: {e}"), None))
        }
    }
}

/// A section ready to write.
struct Ready {
    steps: Vec<Step>,
    /// The paths written (their approvals are spent once the edit lands).
    written: Vec<PathBuf>,
    /// The header and rows of the answer.
    head: String,
    rows: Vec<String>,
    notes: Vec<String>,
    /// The new version to record as seen: path (canonicalized after the write), tag, text, lines.
    record: Option<(PathBuf, Tag, Arc<Text>, Vec<usize>)>,
}

fn apply_sections(
    patch_text: &str,
    sections: &[Section],
    waivers: &Waivers,
    ctx: &Ctx,
    notes: Vec<String>,
) -> ToolOutput {
    let mut ready = Vec::new();
    let mut hard = Vec::new();
    let mut confirm = Vec::new();
    let mut sub_moves = Vec::new();
    let mut shown = Vec::new();
    let mut targets: HashSet<PathBuf> = HashSet::new();
    let mut approval = None;
    for section in sections {
        let path = ctx.workspace.resolve(&section.path);
        let key = fs::canonical(&path).unwrap_or_else(|_| path.clone());
        if !targets.insert(key) {
            hard.push(format!(
                "patch line {}: {} has two sections; put all its hunks under one header",
                section.line,
                ctx.workspace.display(&path)
            ));
            continue;
        }
        match plan_section(section, &path, waivers, ctx) {
            Ok(r) => ready.push(r),
            Err(Refusal::Hard(msg, s)) => {
                hard.push(msg);
                shown.extend(s);
            }
            Err(Refusal::Confirm(msg, s, moves)) => {
                confirm.push(msg);
                shown.extend(s);
                sub_moves.extend(moves);
            }
            Err(Refusal::Approval(req)) => {
                approval.get_or_insert(req);
            }
        }
    }
    ctx.with_agent(|a| {
        for s in &shown {
            a.seen
                .record(&s.canonical, s.tag, &s.text, s.lines.iter().copied());
        }
    });
    if !hard.is_empty() {
        let mut out = String::from("edit refused; nothing was written.\n\n");
        out.push_str(&hard.join("\n\n"));
        if !confirm.is_empty() {
            out.push_str("\n\n");
            out.push_str(&confirm.join("\n\n"));
        }
        return ToolOutput::error(with_notes(out, &notes));
    }
    if let Some(req) = approval {
        return ToolOutput::needs_approval(req);
    }
    if !confirm.is_empty() {
        let versions = current_versions(sections, ctx);
        let token = ctx.with_agent(|a| {
            a.tokens.remember(PendingEdit {
                patch: patch_text.to_string(),
                waive_seen: true,
                sub_moves,
                versions,
            })
        });
        let mut out = String::from("edit not applied yet; nothing was written.\n\n");
        out.push_str(&confirm.join("\n\n"));
        out.push_str(&format!(
            "\n\nhint: if these are the lines you meant, send the same patch again, or REAPPLY {token}, \
             to apply it unchanged; otherwise fix the patch"
        ));
        return ToolOutput::error(with_notes(out, &notes));
    }

    let steps: Vec<Step> = ready.iter().flat_map(|r| r.steps.iter().cloned()).collect();
    let undo_files = undo_files(&ctx.scope, &steps);
    if let Err(e) = journal::commit_all(
        &ctx.config.state_dir,
        steps,
        ctx.config.failpoint.as_deref(),
    ) {
        let what = if e.partial {
            "some files were written; the rest will be completed from the journal at nib's next start"
        } else {
            "nothing was written"
        };
        return ToolOutput::error(format!("edit failed while writing: {e}; {what}."));
    }
    crate::undo::record(
        &ctx.config.state_dir,
        ctx.workspace.project_dir(),
        &ctx.scope,
        "edit",
        undo_files,
    );
    ctx.consume_approvals(
        ready
            .iter()
            .flat_map(|r| r.written.iter().map(PathBuf::as_path)),
    );
    ctx.with_agent(|a| {
        for r in &ready {
            if let Some((path, tag, text, lines)) = &r.record
                && let Ok(canonical) = fs::canonical(path)
            {
                a.seen.record(&canonical, *tag, text, lines.iter().copied());
            }
        }
        a.tokens.forget_patch(patch_text);
    });
    let mut out = String::new();
    for (i, r) in ready.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&r.head);
        out.push('\n');
        for row in r.rows.iter().chain(r.notes.iter()) {
            out.push_str(row);
            out.push('\n');
        }
    }
    let mut answer = ToolOutput::ok(with_notes(out, &notes));
    answer.written = ready
        .iter()
        .filter_map(|r| r.record.as_ref())
        .map(|(path, tag, _, _)| (ctx.workspace.display(path), tag.to_string()))
        .collect();
    answer
}

fn with_notes(mut out: String, notes: &[String]) -> String {
    crate::context::push_notes(&mut out, notes);
    out
}

fn current_versions(sections: &[Section], ctx: &Ctx) -> Vec<(PathBuf, Arc<Text>)> {
    sections
        .iter()
        .filter_map(|s| {
            let path = ctx.workspace.resolve(&s.path);
            let bytes = fs::read_file(&ctx.scope, &path, TEXT_LIMIT).ok()?.bytes;
            Some((fs::canonical(&path).ok()?, Arc::new(Text::decode(&bytes))))
        })
        .collect()
}

/// Anchored rows of `text` for `lines` (1-based), sorted and unique.
fn rows_of(text: &Text, lines: &[usize]) -> (Vec<String>, Vec<usize>) {
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
fn around(centers: &[usize], radius: usize, len: usize) -> Vec<usize> {
    let mut out = Vec::new();
    for &c in centers {
        let lo = c.saturating_sub(radius).max(1);
        let hi = (c + radius).min(len);
        out.extend(lo..=hi);
    }
    out
}

fn hunk_lines(section: &Section) -> Vec<usize> {
    use patch::{Hunk, Target};
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

/// A file's current state, read for editing.
struct Current {
    text: Arc<Text>,
    /// The file's bytes as read (MV and CP without hunks copy them as they are).
    bytes: Vec<u8>,
    tag: Tag,
    stat: fs::Stat,
    canonical: PathBuf,
}

impl Current {
    /// These lines of the current text, as rows printed in a refusal.
    fn shown(&self, lines: Vec<usize>) -> Shown {
        Shown {
            canonical: self.canonical.clone(),
            tag: self.tag,
            text: Arc::clone(&self.text),
            lines,
        }
    }
}

fn read_current(scope: &fs::Scope, path: &Path, shown: &str) -> Result<Option<Current>, Refusal> {
    let hard = |m: String| Refusal::Hard(m, None);
    let stat = match fs::stat(scope, path) {
        Ok(s) => s,
        Err(FsError::NotFound) => return Ok(None),
        Err(e) => return Err(hard(format!("{shown}: {e}"))),
    };
    match stat.kind {
        Kind::File => {}
        Kind::Dir => return Err(hard(format!("{shown} is a folder; edit changes files"))),
        Kind::Special(k) => return Err(hard(format!("{shown} is a {k}, not a regular file"))),
    }
    let file = fs::read_file(scope, path, TEXT_LIMIT).map_err(|e| hard(format!("{shown}: {e}")))?;
    let head = &file.bytes[..file.bytes.len().min(8192)];
    if let Some(kind) = nib_text::filekind::binary_kind(path, head) {
        return Err(hard(format!("{shown} is {kind}; edit changes text files")));
    }
    let canonical = fs::canonical(path).map_err(|e| hard(format!("{shown}: {e}")))?;
    Ok(Some(Current {
        tag: Tag::of(&file.bytes),
        text: Arc::new(Text::decode(&file.bytes)),
        bytes: file.bytes.clone(),
        stat: file.stat,
        canonical,
    }))
}

fn plan_section(
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
fn base_of(
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
            &ctx.config.state_dir,
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

/// Adds the ops of IMPORT lines (computed on `text`, the current numbering)
/// to `ops`: each new import goes into the file's import block in sorted
/// order, names already imported are skipped, and a file without imports
/// gets them after its package line.
fn with_imports(
    mut ops: Vec<Op>,
    lang: Option<nib_text::lang::Lang>,
    text: &Text,
    names: &[String],
) -> Result<Vec<Op>, String> {
    let Some(lang) = lang else {
        return Ok(ops);
    };
    let java = lang == nib_text::lang::Lang::Java;
    let line_for = |n: &str| {
        if java {
            format!("import {n};")
        } else {
            format!("import {n}")
        }
    };
    let existing = nib_text::lang::imports(lang, &text.encode());
    let mut wanted: Vec<&String> = names
        .iter()
        .filter(|n| !existing.iter().any(|(_, e)| e == *n))
        .collect();
    wanted.sort();
    wanted.dedup();
    let mut inserts: std::collections::BTreeMap<usize, Vec<String>> =
        std::collections::BTreeMap::new();
    for name in wanted {
        let at = match existing.iter().find(|(_, e)| e.as_str() > name.as_str()) {
            Some((line, _)) => line - 1,
            None => match existing.last() {
                Some((line, _)) => *line,
                None => {
                    let package = text
                        .lines
                        .iter()
                        .position(|l| l.trim_start().starts_with("package "));
                    match package {
                        Some(i) => {
                            inserts.entry(i + 1).or_default().push(String::new());
                            i + 1
                        }
                        None => 0,
                    }
                }
            },
        };
        inserts.entry(at).or_default().push(line_for(name));
    }
    for (at, rows) in inserts {
        if ops.iter().any(|o| o.start < at && at < o.end) {
            return Err(format!(
                "IMPORT goes at line {}, inside lines another hunk replaces; split the edit",
                at + 1
            ));
        }
        ops.push(Op {
            start: at,
            end: at,
            rows,
            sent: false,
            anchors: Vec::new(),
            hunk: usize::MAX,
        });
    }
    ops.sort_by_key(|o| (o.start, o.end, o.hunk));
    Ok(ops)
}

/// One section's planned change, ready to be spliced: the file, the text
/// the agent's patch was read against and the text it lands on, the ops,
/// and what the agent has seen.
struct Planned<'a> {
    section: &'a Section,
    path: &'a Path,
    /// The path as the answer shows it.
    shown: &'a str,
    /// The text the patch's line numbers refer to.
    base: &'a Text,
    /// The text the ops land on (the base itself, or the file as it is now
    /// when the edit was rebased).
    current: &'a Arc<Text>,
    ops: &'a [Op],
    /// Lines seen, in `current`'s numbering.
    seen_now: &'a SeenLines,
    /// The ops against `base` when they were rebased (for warnings that
    /// read the agent's own lines).
    base_ops: Option<&'a [Op]>,
    /// The file's metadata, kept on the new version.
    stat: Option<fs::Stat>,
    /// The file's bytes as read (written as they are when there are no ops).
    raw: Option<&'a [u8]>,
}

/// Splices the ops into the current text and builds the steps and answer.
fn finish(planned: Planned<'_>, ctx: &Ctx) -> Result<Ready, Refusal> {
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

/// Moves ops from base numbering to current numbering; `Err` lists the base
/// lines (1-based) that changed.
fn rebase(
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

/// What `nib undo` needs of the steps about to be committed: each file's
/// bytes now and what it will hold (nothing for a file moved away).
pub fn undo_files(scope: &fs::Scope, steps: &[Step]) -> Vec<crate::undo::FileChange> {
    steps
        .iter()
        .map(|s| {
            let (target, after) = match s {
                Step::Place { target, bytes, .. } => (target, Some(bytes.clone())),
                Step::Trash(target) | Step::Remove(target) => (target, None),
            };
            let before = target
                .old
                .as_ref()
                .and_then(|_| fs::read_file(scope, &target.path, crate::context::TEXT_LIMIT).ok())
                .map(|f| f.bytes);
            crate::undo::FileChange {
                path: target.path.clone(),
                before,
                after,
            }
        })
        .collect()
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
