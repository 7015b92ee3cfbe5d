//! A `read` call: each path argument split from its selector, resolved
//! through the workspace and [`crate::fs`], and read by what it is; the
//! blocks fitted into the cap and the anchored rows recorded as seen. A text
//! file's rows are `rows`'; every other kind of path `kinds`'.

use std::sync::Arc;
use std::time::SystemTime;

use crate::context::TEXT_LIMIT;
use crate::context::args::ArgError;
use crate::context::{Ctx, ToolOutput};
use crate::fs::{self, Kind};
use nib_text::blocks::OUTPUT_CAP;
use nib_text::blocks::{Block, SeenTarget};
use nib_text::filekind;
use nib_text::hashline::{self, Tag};
use nib_text::readable;
use nib_text::text::Text;

use super::kinds::{database, image_block, listing, missing, refuse_binary};
use super::request::{ReadOptions, ReadRequest};
use super::rows::{
    Reading, declaration_block, info_line, large_file_lines, plain_block, rows_for, version_block,
};
use super::selector::{self, Selector};
use super::{git, sqlite, versions};

/// Runs `read`.
pub fn run(request: ReadRequest, ctx: &Ctx) -> Result<ToolOutput, ArgError> {
    if request.paths.is_empty() {
        return Err(ArgError(
            "\"paths\" is empty: name at least one file or folder".into(),
        ));
    }
    Ok(read_paths(
        &request.paths,
        request.options,
        ctx,
        request.notes,
    ))
}

/// Reads each path into a block, fits the blocks, records what was seen.
pub fn read_paths(
    paths: &[String],
    opts: ReadOptions,
    ctx: &Ctx,
    mut notes: Vec<String>,
) -> ToolOutput {
    let now = SystemTime::now();
    let mut blocks: Vec<Block> = paths
        .iter()
        .flat_map(|p| read_arg(p, opts, ctx, now, &mut notes))
        .collect();
    nib_text::blocks::fit(&mut blocks, OUTPUT_CAP);
    ctx.with_seen(|seen| {
        for b in &blocks {
            if let Some(t) = &b.seen {
                seen.record(
                    &t.canonical,
                    t.tag,
                    &t.text,
                    b.kept_anchors().chain(b.extra_seen.iter().copied()),
                );
            }
        }
    });
    let is_error = blocks.iter().all(|b| b.error);
    let images = blocks.iter_mut().filter_map(|b| b.image.take()).collect();
    ToolOutput {
        text: nib_text::blocks::render(&blocks, &notes),
        is_error,
        approval: None,
        images,
        exit: None,
        written: Vec::new(),
        network_refused: Vec::new(),
    }
}

/// One argument's blocks: a git revision gives one per file, anything else one.
pub(super) fn read_arg(
    arg: &str,
    opts: ReadOptions,
    ctx: &Ctx,
    now: SystemTime,
    notes: &mut Vec<String>,
) -> Vec<Block> {
    if sqlite::split(arg).is_none() {
        let ws = ctx.workspace;
        let (path_arg, sel, _) = selector::split(arg, |p| {
            fs::stat(&ctx.scope, &ws.resolve(if p.is_empty() { "." } else { p })).is_ok()
        });
        if let Selector::Revision(rev) = sel {
            let path = ws.resolve(if path_arg.is_empty() { "." } else { &path_arg });
            return git::revision(ctx, &path, &rev);
        }
    }
    vec![read_one(arg, opts, ctx, now, notes)]
}

pub(super) fn read_one(
    arg: &str,
    opts: ReadOptions,
    ctx: &Ctx,
    now: SystemTime,
    notes: &mut Vec<String>,
) -> Block {
    let ws = ctx.workspace;
    if let Some((db, rest)) = sqlite::split(arg) {
        return database(ctx, db, Some(rest));
    }
    let (path_arg, selector, mut sel_notes) = selector::split(arg, |p| {
        fs::stat(&ctx.scope, &ws.resolve(if p.is_empty() { "." } else { p })).is_ok()
    });
    notes.append(&mut sel_notes);
    let path = ws.resolve(&path_arg);
    let shown = ws.display(&path);
    let mut version = None;
    let mut decl = None;
    let ranges = match selector {
        Selector::Whole => None,
        Selector::Lines(r) => Some(r),
        Selector::Version(tag) => {
            version = Some(tag);
            None
        }
        Selector::Invalid(msg) => {
            return Block::failure(format!(
                "{shown}: {msg}. Nothing was read.\nhint: {shown}:10-40 reads lines 10 to 40"
            ));
        }
        Selector::Declaration(name) => {
            decl = Some(name);
            None
        }
        Selector::Revision(_) => {
            return Block::failure(format!(
                "{shown}: a revision is read through read_arg. Nothing was read."
            ));
        }
    };
    let stat = match fs::stat(&ctx.scope, &path) {
        Ok(s) => s,
        Err(e) => return missing(&ctx.scope, &path, &shown, &e, ws.unknown_name(&path_arg)),
    };
    match stat.kind {
        Kind::Dir => {
            if ranges.is_some() {
                return Block::failure(format!(
                    "{shown} is a folder; a line selector needs a file. Nothing was read.\nhint: read {shown} to list it"
                ));
            }
            return listing(&ctx.scope, &path, &shown, opts, now);
        }
        Kind::Special(kind) => {
            return Block::failure(format!(
                "{shown} is a {kind}, not a regular file; nib does not read it (that could block). Nothing was read."
            ));
        }
        Kind::File => {}
    }
    if stat.size > TEXT_LIMIT {
        if let Some(ranges) = &ranges {
            return large_file_lines(ctx, &path, &shown, stat.size, ranges, opts);
        }
        return Block::failure(format!(
            "{shown} is {}, over the 8 MiB limit for text files. Nothing was read.\n\
             hint: read a line range of it ({shown}:1-200, {shown}:-100), or grep it",
            readable::size(stat.size)
        ));
    }
    let file = match fs::read_file(&ctx.scope, &path, TEXT_LIMIT) {
        Ok(f) => f,
        Err(e) => return missing(&ctx.scope, &path, &shown, &e, None),
    };
    let head = &file.bytes[..file.bytes.len().min(8192)];
    if let Some(kind) = filekind::binary_kind(&path, head) {
        if kind == "a SQLite database" && ranges.is_none() && version.is_none() {
            return database(ctx, &path_arg, None);
        }
        if kind.ends_with("image") && ranges.is_none() && version.is_none() && !opts.info {
            return image_block(&shown, kind, &file.bytes);
        }
        return refuse_binary(&shown, kind, file.stat.size);
    }
    let tag = Tag::of(&file.bytes);
    let text = Arc::new(Text::decode(&file.bytes));
    if opts.info {
        return info_line(&shown, tag, &text, &file.stat, now);
    }
    let mut block = Block {
        head: hashline::header(&shown, tag),
        shown_path: shown.clone(),
        total_lines: text.len(),
        ..Block::default()
    };
    if opts.plain {
        return plain_block(block, &shown, &text, ranges.as_deref());
    }
    let canonical = fs::canonical(&path).ok();
    if let Some(canonical) = &canonical {
        block.seen = Some(SeenTarget {
            canonical: canonical.clone(),
            tag,
            text: Arc::clone(&text),
        });
    }
    if let Some(names) = decl {
        return declaration_block(block, &path, &shown, &names, &file.bytes, &text, opts);
    }
    if let Some(want) = version {
        return version_block(block, ctx, canonical.as_ref(), &want, &shown, &text, tag);
    }
    let known = match (&canonical, opts.collapse) {
        (Some(c), versions::Collapse::Run | versions::Collapse::Sparse) => {
            ctx.with_seen(|s| versions::seen_unchanged(s, c, &text, tag))
        }
        _ => Default::default(),
    };
    let of = Reading {
        path: &path,
        shown: &shown,
        text: &text,
        file: &file,
    };
    let mut block = rows_for(block, of, head, ranges, opts);
    if !block.error && !known.is_empty() {
        let rows = std::mem::take(&mut block.rows);
        let (rows, hidden) = versions::collapse(rows, &known, opts.collapse, &text);
        block.rows = rows;
        block.extra_seen = hidden;
    }
    block
}
