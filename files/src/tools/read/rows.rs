//! A text file's rows: its lines (cut where long, ANSI stripped), its
//! outline, the first rows of a large file, the lines of an older version
//! or of a declaration, and the `--info` line. Which path gets which is
//! `paths`'; paths that are not text are `kinds`'.

use std::path::Path;
use std::time::SystemTime;

use crate::context::Ctx;
use crate::fs;
use nib_text::blocks::OUTPUT_CAP;
use nib_text::blocks::{Block, Row};
use nib_text::filekind::{self, Shape};
use nib_text::hashline::{self, Tag};
use nib_text::outline;
use nib_text::readable;
use nib_text::text::Text;

use super::kinds::missing;
use super::request::{FLAT_HEAD, ReadOptions};
use super::selector;
use super::versions;

/// `plain: true`: the selected lines as `N|TEXT` rows under a `==> PATH <==`
/// head, uncapped, anchoring nothing (as `head` and `cat` print them).
pub(super) fn plain_block(
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
pub(super) fn version_block(
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
pub(super) fn large_file_lines(
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
pub(super) struct Reading<'a> {
    pub(super) path: &'a Path,
    pub(super) shown: &'a str,
    pub(super) text: &'a Text,
    pub(super) file: &'a fs::FileBytes,
}

/// The rows of a text file: a range, the whole file, its first rows, or its
/// outline; `head` is its first bytes (what kind of file it is).
pub(super) fn rows_for(
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
pub(super) fn outline_rows(
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
pub(super) fn row(n: usize, line: &str, max_chars: usize) -> Row {
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
pub(super) fn strip_ansi(line: &str) -> String {
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

pub(super) fn plain_rows(text: &Text, spans: &[(usize, usize)]) -> Vec<Row> {
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

pub(super) fn info_line(
    shown: &str,
    tag: Tag,
    text: &Text,
    stat: &fs::Stat,
    now: SystemTime,
) -> Block {
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
pub(super) fn declaration_block(
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
