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
//! This file owns the call as a whole: the patch (or its REAPPLY token) and
//! what a token waives, every section's verdict gathered into one answer,
//! the commit through the journal, `nib undo`'s record and what the agent
//! has seen once the files are written. One section's work lies beside it:
//! `section` plans it (the tag's base, the anchors checked) on the file as
//! `current` reads it,
//! `rebase` finds the base a tag names and moves ops onto the current text,
//! `imports` turns IMPORT lines into ops, `land` splices the ops and builds
//! the section's write steps and rows, and `refusal` words a section's
//! refusal with the file's rows. Parsing lives in [`patch`], splicing in
//! [`apply`], crash safety in [`journal`], the warnings an edit applies with
//! in [`warnings`] and [`missing_import`].

pub mod apply;
mod current;
mod imports;
pub mod journal;
mod land;
pub mod missing_import;
pub mod patch;
mod rebase;
mod refusal;
mod section;
pub mod warnings;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::context::args::{ArgError, Args};
use crate::context::{Ctx, TEXT_LIMIT, ToolOutput};
use crate::fs;
use crate::seen::PendingEdit;
use journal::Step;
use nib_text::text::Text;
use patch::{Patch, Section};
use refusal::Refusal;
use section::Waivers;

pub use rebase::NOT_SHOWN;

/// One `edit` call: what the MCP server deserialises its arguments into
/// and what `nib edit` reads from stdin. Its one argument is the `edit`
/// schema's `input`, taken leniently ([`Args`]): aliases (`patch`, `diff`,
/// `edits`), a number or boolean as text, each slip noted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EditRequest {
    /// The patch, or `REAPPLY TOKEN`.
    pub input: String,
    /// What the lenient parse took or ignored, printed under the answer.
    pub notes: Vec<String>,
}

impl EditRequest {
    /// Takes an `edit` call's arguments apart.
    pub fn from_args(mut args: Args) -> Result<EditRequest, ArgError> {
        for alias in ["patch", "diff", "edits"] {
            args.alias(alias, "input");
        }
        let input = args.required_string("input")?;
        Ok(EditRequest {
            input,
            notes: args.finish(),
        })
    }
}

impl<'de> serde::Deserialize<'de> for EditRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<EditRequest, D::Error> {
        let map = serde_json::Map::deserialize(d)?;
        EditRequest::from_args(Args::new(Some(map))).map_err(serde::de::Error::custom)
    }
}

/// Runs `edit`.
pub fn run(request: EditRequest, ctx: &Ctx) -> Result<ToolOutput, ArgError> {
    Ok(edit(&request.input, ctx, request.notes))
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

/// Plans every section, then either refuses the whole patch or writes
/// every file through the journal and answers with each section's rows.
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
        match section::plan_section(section, &path, waivers, ctx) {
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
    for step in &steps {
        if let Step::Place { target, bytes, .. } = step {
            ctx.about_to_place(&target.path, bytes);
        }
    }
    if let Err(e) = journal::commit_all(
        &ctx.settings.state_dir,
        steps,
        ctx.settings.failpoint.as_deref(),
    ) {
        let what = if e.partial {
            "some files were written; the rest will be completed from the journal at nib's next start"
        } else {
            "nothing was written"
        };
        return ToolOutput::error(format!("edit failed while writing: {e}; {what}."));
    }
    crate::undo::record(
        &ctx.settings.state_dir,
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
