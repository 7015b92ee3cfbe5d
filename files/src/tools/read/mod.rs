//! The `read` tool: files as anchored rows, folders as listings.
//!
//! For each path: split off its selector ([`selector`]), stat it through
//! [`crate::fs`], then print lines, an outline, the first rows, a skip notice, a
//! listing, or a refusal. Blocks are fitted into the 40 KiB cap
//! ([`nib_text::blocks::fit`]) and the anchored rows that survive are recorded as
//! seen. Declarations, versions, revisions, images and SQLite come with later
//! issues and fail clearly until then.

pub mod git;
pub mod image;
pub mod selector;
pub mod sqlite;
pub mod versions;

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use crate::context::args::{ArgError, Args};
use crate::context::{Ctx, ToolOutput};
use crate::fs::{self, FsError, Kind};
use nib_text::blocks::OUTPUT_CAP;
use nib_text::blocks::{Block, Row, SeenTarget};
use nib_text::filekind::{self, Shape};
use nib_text::hashline::{self, Tag};
use nib_text::outline;
use nib_text::readable;
use nib_text::text::Text;
use selector::Selector;

pub use crate::context::TEXT_LIMIT;
/// Default for `maxLineLength`.
pub const DEFAULT_MAX_LINE: usize = 2000;
/// Upper bound for `maxLineLength`.
pub const MAX_MAX_LINE: usize = 2 * 1024 * 1024;
/// Rows shown of a large flat-data file.
pub const FLAT_HEAD: usize = 100;
/// Entries shown of a folder.
pub const LISTING_LIMIT: usize = 500;

/// Options that apply to every path of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Lines longer than this (in characters) are cut and not anchors.
    pub max_line_length: usize,
    /// Bare lines, no anchors, no cap.
    pub plain: bool,
    /// One line of facts per file.
    pub info: bool,
    /// How lines already seen and unchanged print.
    pub collapse: versions::Collapse,
    /// The outline, whatever the file's size (of the selected lines only,
    /// when lines are selected): how a cut outline is continued.
    pub outline: bool,
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions {
            max_line_length: DEFAULT_MAX_LINE,
            plain: false,
            info: false,
            collapse: versions::Collapse::Run,
            outline: false,
        }
    }
}

/// One `read` call: what the MCP server deserialises its arguments into,
/// what `nib read` parses its flags into, and what the worker's own commands
/// and the providers' locations build. Its arguments are the `read` schema's
/// (`paths`, `maxLineLength`, `plain`, `info`, `full`, `outline`,
/// `collapse`), taken leniently ([`Args`]): aliases (`file_path`, `path`,
/// …), `offset`/`limit` as a line selector, numbers and booleans as text,
/// a list as JSON text or one string, each slip noted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadRequest {
    /// Files or folders, each with an optional selector.
    pub paths: Vec<String>,
    /// Options for every path.
    pub options: ReadOptions,
    /// What the lenient parse took or ignored, printed under the answer.
    pub notes: Vec<String>,
}

impl ReadRequest {
    /// A read of these paths with the default options.
    pub fn new(paths: Vec<String>) -> ReadRequest {
        ReadRequest {
            paths,
            ..ReadRequest::default()
        }
    }

    /// Sets `maxLineLength`: 0 is the default, over [`MAX_MAX_LINE`] is cut
    /// to it with a note.
    pub fn max_line_length(&mut self, n: usize) {
        self.options.max_line_length = match n {
            0 => DEFAULT_MAX_LINE,
            n if n > MAX_MAX_LINE => {
                self.notes
                    .push(format!("maxLineLength is at most {MAX_MAX_LINE}"));
                MAX_MAX_LINE
            }
            n => n,
        };
    }

    /// Takes a `read` call's arguments apart.
    pub fn from_args(mut args: Args) -> Result<ReadRequest, ArgError> {
        for alias in ["path", "file_path", "filePath", "file", "files"] {
            args.alias(alias, "paths");
        }
        let mut paths = args
            .string_list("paths")?
            .ok_or_else(|| ArgError("\"paths\" is required: a list of files or folders".into()))?;
        if paths.is_empty() {
            return Err(ArgError(
                "\"paths\" is empty: name at least one file or folder".into(),
            ));
        }
        let offset = args.usize("offset")?;
        let limit = args.usize("limit")?;
        if offset.is_some() || limit.is_some() {
            let start = offset.unwrap_or(1).max(1);
            let range = match limit {
                Some(n) if n > 0 => format!("{start}-{}", start.saturating_add(n - 1)),
                _ => format!("{start}-"),
            };
            args.note(format!("took offset/limit as the selector :{range}"));
            for p in &mut paths {
                if !p.contains(':') {
                    p.push(':');
                    p.push_str(&range);
                }
            }
        }
        let mut request = ReadRequest::new(paths);
        let max_line_length = args.usize("maxLineLength")?;
        request.notes = args.take_notes();
        if let Some(n) = max_line_length {
            request.max_line_length(n);
        }
        let plain = args.bool("plain")?.unwrap_or(false);
        let info = args.bool("info")?.unwrap_or(false);
        let full = args.bool("full")?.unwrap_or(false);
        let collapse_runs = args.bool("collapse")?.unwrap_or(true);
        let outline = args.bool("outline")?.unwrap_or(false);
        request.options.plain = plain;
        request.options.info = info;
        request.options.outline = outline;
        request.options.collapse = if full {
            versions::Collapse::Off
        } else if collapse_runs {
            versions::Collapse::Run
        } else {
            versions::Collapse::Sparse
        };
        request.notes.extend(args.finish());
        Ok(request)
    }
}

impl<'de> serde::Deserialize<'de> for ReadRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ReadRequest, D::Error> {
        let map = serde_json::Map::deserialize(d)?;
        ReadRequest::from_args(Args::new(Some(map))).map_err(serde::de::Error::custom)
    }
}

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
fn read_arg(
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

fn read_one(
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

/// `plain: true`: the selected lines as `N|TEXT` rows under a `==> PATH <==`
/// head, uncapped, anchoring nothing (as `head` and `cat` print them).
fn plain_block(
    mut block: Block,
    shown: &str,
    text: &Text,
    ranges: Option<&[selector::LineRange]>,
) -> Block {
    block.uncapped = true;
    let spans = match ranges.map(|r| selector::resolve(r, text.len())).transpose() {
        Ok(s) => s.unwrap_or_else(|| vec![(1, text.len())]),
        Err(e) => return Block::failure(format!("{shown}: {e}. Nothing was read.")),
    };
    block.rows = plain_rows(text, &spans);
    block.head = format!("==> {shown} <==");
    block
}

/// `PATH#TAG`: what changed since the version with that tag, which the
/// agent was shown.
fn version_block(
    mut block: Block,
    ctx: &Ctx,
    canonical: Option<&std::path::PathBuf>,
    want: &str,
    shown: &str,
    text: &Text,
    tag: Tag,
) -> Block {
    let answer = match canonical {
        Some(c) => ctx.with_seen(|s| versions::since(s, c, want, text, tag)),
        None => Err("the file has no stable identity".into()),
    };
    match answer {
        Ok((note, rows)) => {
            block.rows = rows;
            block.notes.push(note);
            block
        }
        Err(why) => Block::failure(format!(
            "{shown}#{want}: {why}. Nothing was read.\nhint: read {shown} for its current rows"
        )),
    }
}

/// Lines of a file over the 8 MiB that nib holds whole: read as a stream
/// (a count of its lines, then the selected ones), printed as `N|TEXT`
/// rows that are not anchors — nib does not edit a file that size.
fn large_file_lines(
    ctx: &Ctx,
    path: &Path,
    shown: &str,
    size: u64,
    ranges: &[selector::LineRange],
    opts: ReadOptions,
) -> Block {
    use std::io::{BufRead, BufReader, Seek};
    let failed = |e: std::io::Error| Block::failure(format!("{shown}: {e}. Nothing was read."));
    let mut file = match fs::open_regular(&ctx.scope, path) {
        Ok(f) => f,
        Err(e) => return missing(&ctx.scope, path, shown, &e, None),
    };
    let mut reader = BufReader::with_capacity(1 << 16, &mut file);
    let mut len = 0usize;
    let mut last_open = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) => return failed(e),
        };
        if buf.is_empty() {
            break;
        }
        len += memchr::memchr_iter(b'\n', buf).count();
        last_open = buf.last() != Some(&b'\n');
        let n = buf.len();
        reader.consume(n);
    }
    if last_open {
        len += 1;
    }
    let spans = match selector::resolve(ranges, len) {
        Ok(s) => s,
        Err(e) => {
            return Block::failure(format!(
                "{shown}: {e}. Nothing was read.\nhint: read {shown}:-20 for the last lines"
            ));
        }
    };
    drop(reader);
    if let Err(e) = file.rewind() {
        return failed(e);
    }
    let mut block = Block {
        head: format!(
            "[{shown}] ({}, {len} lines: over the 8 MiB nib edits, so these rows are not anchors)",
            readable::size(size)
        ),
        shown_path: shown.to_string(),
        total_lines: len,
        ..Block::default()
    };
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut line = Vec::new();
    let mut n = 0usize;
    let mut bytes = 0usize;
    let last_wanted = spans.last().map_or(0, |s| s.1);
    while n < last_wanted {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return failed(e),
        }
        n += 1;
        if !spans.iter().any(|&(a, b)| a <= n && n <= b) {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        let shown_text: String = text.chars().take(opts.max_line_length).collect();
        bytes += shown_text.len() + 8;
        if bytes > OUTPUT_CAP {
            block.notes.push(format!(
                "[cut at the {} KiB output limit after line {}; read {shown}:{n}- for the rest]",
                OUTPUT_CAP / 1024,
                n - 1
            ));
            break;
        }
        block.rows.push(Row::plain(format!("{n}|{shown_text}")));
    }
    block.uncapped = true;
    block
}

/// A text file being read: where it is, how the answer names it, its
/// text and its bytes as read.
#[derive(Clone, Copy)]
struct Reading<'a> {
    path: &'a Path,
    shown: &'a str,
    text: &'a Text,
    file: &'a fs::FileBytes,
}

/// The rows of a text file: a range, the whole file, its first rows, or its
/// outline; `head` is its first bytes (what kind of file it is).
fn rows_for(
    mut block: Block,
    of: Reading<'_>,
    head: &[u8],
    ranges: Option<Vec<selector::LineRange>>,
    opts: ReadOptions,
) -> Block {
    let Reading {
        path,
        shown,
        text,
        file,
    } = of;
    if let Some(ranges) = ranges {
        let spans = match selector::resolve(&ranges, text.len()) {
            Ok(s) => s,
            Err(e) => {
                return Block::failure(format!(
                    "{shown}: {e}. Nothing was read.\nhint: read {shown}:-20 for the last lines"
                ));
            }
        };
        if opts.outline {
            let within = |n: usize| spans.iter().any(|&(a, b)| a <= n && n <= b);
            return outline_rows(block, of, opts, &within);
        }
        for (a, b) in spans {
            for n in a..=b {
                block
                    .rows
                    .push(row(n, text.line(n).unwrap_or(""), opts.max_line_length));
            }
        }
        return block;
    }
    if text.is_empty() {
        block.notes.push("[empty file]".to_string());
        return block;
    }
    if let Some(reason) = filekind::skip_reason(path, file.stat.size, head) {
        block.notes.push(format!(
            "[skipped: {reason}, {}; read {shown}:1-100 to see it anyway]",
            readable::size(file.stat.size)
        ));
        return block;
    }
    let shape = filekind::shape(path);
    let (max_lines, max_bytes) = shape.limits();
    if opts.outline {
        return outline_rows(block, of, opts, &|_| true);
    }
    if text.len() <= max_lines && file.stat.size <= max_bytes {
        for n in 1..=text.len() {
            block
                .rows
                .push(row(n, text.line(n).unwrap_or(""), opts.max_line_length));
        }
        return block;
    }
    if shape == Shape::FlatData {
        for n in 1..=text.len().min(FLAT_HEAD) {
            block
                .rows
                .push(row(n, text.line(n).unwrap_or(""), opts.max_line_length));
        }
        block.notes.push(format!(
            "[first {FLAT_HEAD} of {} lines; read {shown}:{}- for more, or plain: true]",
            text.len(),
            FLAT_HEAD + 1
        ));
        return block;
    }
    outline_rows(block, of, opts, &|_| true)
}

/// A file's outline rows (those of lines `within` allows): the syntax
/// tree's top-level and first-level declarations where the language is
/// parsed, else the indentation outline.
fn outline_rows(
    mut block: Block,
    of: Reading<'_>,
    opts: ReadOptions,
    within: &dyn Fn(usize) -> bool,
) -> Block {
    let Reading {
        path,
        shown,
        text,
        file,
    } = of;
    let shape = filekind::shape(path);
    let parsed = nib_text::lang::Lang::of(path).map(|l| nib_text::lang::outline(l, &file.bytes));
    let mut lines = match &parsed {
        Some(o) => o.lines.clone(),
        None => outline::outline(&text.lines, shape),
    };
    lines.retain(|&n| within(n));
    block.outline = true;
    let runs = parsed.map(|o| o.import_runs.clone()).unwrap_or_default();
    let mut run_iter = runs.iter().peekable();
    for &n in &lines {
        if let Some((first, last, names)) = run_iter.peek()
            && n >= *first
            && n <= *last
        {
            if n == *first {
                block.rows.push(Row::plain(format!(
                    "[imports {first}-{last}: {} of them]",
                    names.len()
                )));
                block.rows.extend(
                    nib_text::lang::package_tree(names)
                        .into_iter()
                        .map(Row::plain),
                );
            }
            if n == *last {
                run_iter.next();
            }
            continue;
        }
        block
            .rows
            .push(row(n, text.line(n).unwrap_or(""), opts.max_line_length));
    }
    block.notes.push(format!(
        "[outline: {} of {} lines ({}), top-level and first-level rows; read {shown}:A-B for the lines between]",
        lines.len(),
        text.len(),
        readable::size(file.stat.size)
    ));
    block
}

/// An anchored row, or a cut non-anchor row when the line is too long.
fn row(n: usize, line: &str, max_chars: usize) -> Row {
    if line.len() <= max_chars {
        return Row::anchored(n, hashline::anchored_row(n, line));
    }
    let total = line.chars().count();
    if total <= max_chars {
        return Row::anchored(n, hashline::anchored_row(n, line));
    }
    let cut: String = line.chars().take(max_chars).collect();
    Row::plain(hashline::long_line_row(n, max_chars, total, &cut))
}

/// Removes ANSI escape sequences (CSI and OSC) from a line.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('[') => {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            Some(']') => {
                chars.next();
                while let Some(d) = chars.next() {
                    if d == '\u{7}' {
                        break;
                    }
                    if d == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn plain_rows(text: &Text, spans: &[(usize, usize)]) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut last: Option<String> = None;
    let mut repeats = 0usize;
    let flush = |rows: &mut Vec<Row>, repeats: &mut usize| {
        if *repeats > 0 {
            rows.push(Row::plain(format!(
                "[the line above repeats {repeats} more times]"
            )));
            *repeats = 0;
        }
    };
    for &(a, b) in spans {
        for n in a..=b {
            let line = strip_ansi(text.line(n).unwrap_or(""));
            if last.as_deref() == Some(line.as_str()) {
                repeats += 1;
                continue;
            }
            flush(&mut rows, &mut repeats);
            rows.push(Row::plain(line.clone()));
            last = Some(line);
        }
    }
    flush(&mut rows, &mut repeats);
    rows
}

fn info_line(shown: &str, tag: Tag, text: &Text, stat: &fs::Stat, now: SystemTime) -> Block {
    let longest = text
        .lines
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let mut facts = vec![
        format!(
            "{} line{}",
            text.len(),
            if text.len() == 1 { "" } else { "s" }
        ),
        readable::size(stat.size),
        format!("longest line {longest} chars"),
        if text.mixed_endings {
            format!("mixed line endings (mostly {})", text.ending.name())
        } else {
            text.ending.name().to_string()
        },
    ];
    if text.bom {
        facts.push("BOM".into());
    }
    if !text.is_empty() && !text.final_newline {
        facts.push("no final newline".into());
    }
    facts.push(format!("modified {}", readable::age(stat.modified, now)));
    Block {
        head: format!("{} {}", hashline::header(shown, tag), facts.join(", ")),
        ..Block::default()
    }
}

/// `path:name`, `path:Type.member`, `path:a,b`: declarations with their doc
/// comments and annotations, as anchored rows.
fn declaration_block(
    mut block: Block,
    path: &Path,
    shown: &str,
    names: &str,
    bytes: &[u8],
    text: &Text,
    opts: ReadOptions,
) -> Block {
    let Some(lang) = nib_text::lang::Lang::of(path) else {
        return Block::failure(format!(
            "{shown}: \":{names}\" reads a declaration, which nib finds in Java, Kotlin, TypeScript, TSX, \
             JavaScript, Go, Python, Rust, C, C++ and Zig files. Nothing was read.\nhint: read a line range, e.g. {shown}:1-80"
        ));
    };
    let spans = match selector::declaration_spans(lang, names, bytes) {
        Ok(s) => s,
        Err(why) => {
            return Block::failure(format!(
                "{shown}: {why}. Nothing was read.\nhint: {}",
                why.hint
                    .as_deref()
                    .map_or_else(|| format!("read {shown} for its outline"), str::to_string)
            ));
        }
    };
    for (a, b) in spans {
        for n in a..=b.min(text.len()) {
            block
                .rows
                .push(row(n, text.line(n).unwrap_or(""), opts.max_line_length));
        }
    }
    block
}

/// An image as image content, scaled to what a model sees.
fn image_block(shown: &str, kind: &str, bytes: &[u8]) -> Block {
    match image::scale(bytes) {
        Ok(img) => {
            let (ow, oh) = img.original;
            let (sw, sh) = img.sent;
            let scaled = if (ow, oh) == (sw, sh) {
                String::new()
            } else {
                format!(", sent at {sw}×{sh}")
            };
            Block {
                head: format!(
                    "[{shown}] {} {ow}×{oh}{scaled}",
                    kind.trim_start_matches("a ")
                ),
                image: Some((img.base64, img.mime.to_string())),
                ..Block::default()
            }
        }
        Err(e) => Block::failure(format!("{shown}: {e}. Nothing was read.")),
    }
}

/// A SQLite database: its tables, a table's rows, or a read-only query.
fn database(ctx: &Ctx, db: &str, rest: Option<&str>) -> Block {
    let path = ctx.workspace.resolve(db);
    let shown = ctx.workspace.display(&path);
    let file = match fs::open_regular(&ctx.scope, &path) {
        Ok(f) => f,
        Err(e) => {
            return missing(
                &ctx.scope,
                &path,
                &shown,
                &e,
                ctx.workspace.unknown_name(db),
            );
        }
    };
    let answer = match rest {
        None => {
            sqlite::overview(&file).map(|t| (format!("SQLite database, {} tables", t.len()), t))
        }
        Some(q) => sqlite::query(&file, q),
    };
    match answer {
        Ok((what, rows)) => Block {
            head: format!("[{shown}] {what}"),
            rows: rows.into_iter().map(Row::plain).collect(),
            shown_path: shown,
            ..Block::default()
        },
        Err(e) => Block::failure(format!(
            "{shown}: {e}.\nhint: read {shown} to list its tables; {shown}:TABLE shows rows, {shown}:SELECT … runs a read-only query"
        )),
    }
}

fn refuse_binary(shown: &str, kind: &str, size: u64) -> Block {
    let hint = match kind {
        "a PDF" => "nib does not read PDFs; use the client's own file viewer for them",
        k if k.ends_with("image") => "images are shown whole, without a selector",
        "a SQLite database" => "read it without a selector for its tables, or PATH:TABLE",
        _ => "nib reads text files only",
    };
    Block::failure(format!(
        "{shown} is {kind} ({}); {hint}. Nothing was read.",
        readable::size(size)
    ))
}

fn missing(
    scope: &fs::Scope,
    path: &Path,
    shown: &str,
    e: &FsError,
    unknown: Option<String>,
) -> Block {
    let mut msg = format!("{shown}: {e}. Nothing was read.");
    if let Some(why) = unknown.filter(|_| matches!(e, FsError::NotFound)) {
        msg.push_str(&format!("\nhint: {why}"));
    } else if matches!(e, FsError::NotFound) {
        let parent = path.parent().unwrap_or(path);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let near = fs::list_dir(scope, parent)
            .map(|entries| {
                let names: Vec<String> = entries.into_iter().map(|e| e.name).collect();
                readable::similar(&name, names.iter().map(String::as_str))
            })
            .unwrap_or_default();
        if near.is_empty() {
            msg.push_str("\nhint: check the path; read the folder it should be in to list it");
        } else {
            msg.push_str(&format!("\nhint: did you mean {}?", near.join(", ")));
        }
    }
    Block::failure(msg)
}

fn listing(
    scope: &fs::Scope,
    path: &Path,
    shown: &str,
    opts: ReadOptions,
    now: SystemTime,
) -> Block {
    let mut entries = match fs::list_dir(scope, path) {
        Ok(e) => e,
        Err(e) => return Block::failure(format!("{shown}: {e}. Nothing was read.")),
    };
    entries.sort_by(|a, b| {
        let ad = a.stat.as_ref().is_some_and(|s| s.kind == Kind::Dir);
        let bd = b.stat.as_ref().is_some_and(|s| s.kind == Kind::Dir);
        bd.cmp(&ad).then_with(|| a.name.cmp(&b.name))
    });
    let dirs = entries
        .iter()
        .filter(|e| e.stat.as_ref().is_some_and(|s| s.kind == Kind::Dir))
        .count();
    let files = entries.len() - dirs;
    let base = if shown == "." {
        String::new()
    } else {
        format!("{shown}/")
    };
    let head = format!(
        "[{}] {dirs} folder{}, {files} file{}",
        if base.is_empty() { "./" } else { &base },
        if dirs == 1 { "" } else { "s" },
        if files == 1 { "" } else { "s" }
    );
    if opts.info {
        return Block {
            head,
            ..Block::default()
        };
    }
    let total = entries.len();
    let mut rows = Vec::new();
    for e in entries.iter().take(LISTING_LIMIT) {
        let name = nib_text::path_text::escape_control(&e.name);
        let row = match &e.stat {
            Some(s) if s.kind == Kind::Dir => {
                if e.name == ".git" {
                    format!("{name}/")
                } else {
                    let n = fs::list_dir(scope, &e.path).map(|v| v.len()).unwrap_or(0);
                    format!("{name}/ ({n} entr{})", if n == 1 { "y" } else { "ies" })
                }
            }
            Some(s) if s.kind == Kind::File => {
                format!("{name} ({})", file_facts(scope, &e.path, s, now))
            }
            Some(s) => match s.kind {
                Kind::Special(k) => format!("{name} ({k})"),
                _ => name,
            },
            None => format!("{name} (dangling link)"),
        };
        rows.push(Row::plain(row));
    }
    let mut notes = Vec::new();
    if total > LISTING_LIMIT {
        notes.push(format!("[{LISTING_LIMIT} of {total} entries shown]"));
    }
    Block {
        head,
        rows,
        notes,
        shown_path: shown.to_string(),
        ..Block::default()
    }
}

/// `120 lines, 4.1 KiB, 3m ago` or `image/png, 12.0 KiB, 40d ago`.
pub fn file_facts(scope: &fs::Scope, path: &Path, stat: &fs::Stat, now: SystemTime) -> String {
    let age = readable::age(stat.modified, now);
    let size = readable::size(stat.size);
    if stat.size > 1024 * 1024 {
        return format!("{size}, {age}");
    }
    match fs::read_file(scope, path, 1024 * 1024) {
        Ok(f) => {
            let head = &f.bytes[..f.bytes.len().min(8192)];
            if let Some(mime) = filekind::mime_type(path, head) {
                format!("{mime}, {size}, {age}")
            } else {
                let lines = Text::decode(&f.bytes).len();
                format!(
                    "{lines} line{}, {size}, {age}",
                    if lines == 1 { "" } else { "s" }
                )
            }
        }
        Err(_) => format!("{size}, {age}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_and_not_anchors() {
        let r = row(7, &"é".repeat(30), 10);
        assert_eq!(r.anchor, None);
        assert_eq!(
            r.text,
            format!("[line 7, chars 1-10 of 30]|{}", "é".repeat(10))
        );
        let r = row(7, "short", 10);
        assert_eq!((r.anchor, r.text.as_str()), (Some(7), "7:short"));
    }

    #[test]
    fn ansi_is_stripped() {
        assert_eq!(strip_ansi("\u{1b}[31mred\u{1b}[0m ok"), "red ok");
        assert_eq!(strip_ansi("\u{1b}]0;title\u{7}x"), "x");
    }

    #[test]
    fn plain_collapses_repeats() {
        let t = Text::decode(b"a\nb\nb\nb\nc\n");
        let rows: Vec<String> = plain_rows(&t, &[(1, 5)])
            .into_iter()
            .map(|r| r.text)
            .collect();
        assert_eq!(
            rows,
            vec!["a", "b", "[the line above repeats 2 more times]", "c"]
        );
    }
}
