//! The `grep` tool: matches as edit-ready rows.
//!
//! [`crate::search`] walks and matches; this module pages and prints. A page
//! holds 20 files and 20 matches per file (100 when one file matches). Each
//! file prints `[PATH#TAG]`, then `*N:TEXT` for matches and ` N:TEXT` for
//! context. A page has at most 40 context rows, given first to matches that
//! look like definitions; matches left without context get a note with the
//! read selectors of their context. Every row printed whole is recorded as
//! seen, so an edit can anchor on it without a read. Files over 8 MiB, or that
//! change while being read, print `N|TEXT` rows, which are not anchors.
//! `replace` previews changed lines as `>N|TEXT` and leaves a token that
//! `edit` with `REAPPLY TOKEN` turns into exactly those line changes.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::read::selector::{self, LineRange, Selector};
use crate::context::TEXT_LIMIT;
use crate::context::args::{ArgError, Args};
use crate::context::{Ctx, ToolOutput};
use crate::fs;
use crate::search::{self, GlobFilter, Pattern, PatternOptions, WalkOptions};
use crate::seen::PendingEdit;
use nib_text::hashline::{self, Tag};
use nib_text::text::Text;

/// Files per page.
pub const PAGE_FILES: usize = 20;
/// Matches shown per file (more when a single file matches).
pub const FILE_MATCHES: usize = 20;
/// Matches shown when only one file matches.
pub const SINGLE_FILE_MATCHES: usize = 100;
/// Context rows per page.
pub const CONTEXT_BUDGET: usize = 40;
/// Paths per page in `files` and `count` modes.
pub const PAGE_PATHS: usize = 200;
/// How long the look into ignored files may take when nothing matched.
pub const IGNORED_LOOK: Duration = Duration::from_secs(3);

/// What grep prints (`mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// The matching lines with context (no `mode`).
    #[default]
    Content,
    /// The matching files' paths (`files`).
    Files,
    /// A count per file (`count`).
    Count,
}

impl Mode {
    /// Reads a `mode` value; `name` is what the caller calls it in the
    /// error (`"mode"` in a tool call, `--mode` on the command line).
    pub fn parse(text: &str, name: &str) -> Result<Mode, ArgError> {
        match text {
            "content" => Ok(Mode::Content),
            "files" | "files_with_matches" => Ok(Mode::Files),
            "count" => Ok(Mode::Count),
            other => Err(ArgError(format!(
                "{name} is \"files\" or \"count\" (or absent for matching lines), not \"{other}\""
            ))),
        }
    }
}

/// One `grep` call: what the MCP server deserialises its arguments into,
/// what `nib grep` parses its flags into, and what the worker's own grep
/// builds. Its arguments are the `grep` schema's, taken leniently
/// ([`Args`]): aliases (`query`, `regex`, `path`, `case_insensitive`,
/// `-i`, `-A`, `-B`, `output_mode`, `context`), numbers and booleans as
/// text, lists as JSON text or one string, each slip noted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepRequest {
    /// The regular expression (or text, with `literal`).
    pub pattern: String,
    /// Files or folders, each with an optional line selector (empty: the project).
    pub paths: Vec<String>,
    /// File name globs; `!glob` excludes.
    pub globs: Vec<String>,
    /// Case-insensitive.
    pub ignore_case: bool,
    /// The pattern is plain text.
    pub literal: bool,
    /// Context rows before each match.
    pub before: usize,
    /// Context rows after each match.
    pub after: usize,
    /// What to print.
    pub mode: Mode,
    /// Search what ignore rules would skip.
    pub no_ignore: bool,
    /// Longer lines print cut (clamped to 1..=[`super::read::MAX_MAX_LINE`]).
    pub max_line_length: usize,
    /// Files to skip (paging).
    pub skip: usize,
    /// A replacement to preview.
    pub replace: Option<String>,
    /// What the lenient parse took or ignored, printed under the answer.
    pub notes: Vec<String>,
}

impl GrepRequest {
    /// A search for `pattern` in the project with the defaults.
    pub fn new(pattern: String) -> GrepRequest {
        GrepRequest {
            pattern,
            paths: Vec::new(),
            globs: Vec::new(),
            ignore_case: false,
            literal: false,
            before: 1,
            after: 1,
            mode: Mode::Content,
            no_ignore: false,
            max_line_length: super::read::DEFAULT_MAX_LINE,
            skip: 0,
            replace: None,
            notes: Vec::new(),
        }
    }

    /// Takes a `grep` call's arguments apart.
    pub fn from_args(mut args: Args) -> Result<GrepRequest, ArgError> {
        args.alias("query", "pattern");
        args.alias("regex", "pattern");
        args.alias("path", "paths");
        args.alias("case_insensitive", "ignoreCase");
        args.alias("-i", "ignoreCase");
        args.alias("-B", "before");
        args.alias("-A", "after");
        args.alias("output_mode", "mode");
        let mut request = GrepRequest::new(args.required_string("pattern")?);
        request.paths = args.string_list("paths")?.unwrap_or_default();
        request.globs = args.string_list("glob")?.unwrap_or_default();
        request.ignore_case = args.bool("ignoreCase")?.unwrap_or(false);
        request.literal = args.bool("literal")?.unwrap_or(false);
        let context = args.usize("context")?;
        request.before = args.usize("before")?.or(context).unwrap_or(1);
        request.after = args.usize("after")?.or(context).unwrap_or(1);
        if let Some(mode) = args.string("mode")? {
            request.mode = Mode::parse(&mode, "\"mode\"")?;
        }
        request.no_ignore = args.bool("noIgnore")?.unwrap_or(false);
        if let Some(n) = args.usize("maxLineLength")? {
            request.max_line_length = n;
        }
        request.skip = args.usize("skip")?.unwrap_or(0);
        request.replace = args.string("replace")?;
        request.notes = args.finish();
        Ok(request)
    }
}

impl<'de> serde::Deserialize<'de> for GrepRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<GrepRequest, D::Error> {
        let map = serde_json::Map::deserialize(d)?;
        GrepRequest::from_args(Args::new(Some(map))).map_err(serde::de::Error::custom)
    }
}

/// A path to search, with its line selector.
struct Target {
    path: PathBuf,
    spans: Option<Vec<LineRange>>,
}

struct Options {
    pattern: Pattern,
    targets: Vec<Target>,
    walk: WalkOptions,
    before: usize,
    after: usize,
    mode: Mode,
    max_line: usize,
    skip: usize,
    replace: Option<String>,
}

/// The hint under a pattern that does not compile, in the MCP argument's
/// words; the command line says it with its own flag instead.
pub const LITERAL_HINT: &str = "hint: pass literal: true to search for the text as written";

/// Why `pattern` does not compile, quoting the pattern as it was given:
/// the matcher wraps it in a group (`(?:…)`), and its error would show and
/// point into that wrapper, which the caller never wrote. The plain regex
/// parser's error is used when it also refuses the pattern; else the
/// matcher's, with the wrapper taken out of its text, and PCRE2's with its
/// offset counted in the caller's pattern.
fn pattern_error(pattern: &str, ignore_case: bool, matcher_error: &str) -> String {
    // PCRE2's error names an offset into the wrapped pattern: three bytes
    // (`(?:`) past the same place in the caller's.
    if matcher_error.contains("(PCRE2)") {
        const AT: &str = "at offset ";
        let Some(at) = matcher_error.find(AT) else {
            return matcher_error.to_string();
        };
        let (head, tail) = matcher_error.split_at(at + AT.len());
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        return match tail[..digits].parse::<usize>() {
            Ok(n) => format!(
                "{head}{}{}",
                n.saturating_sub(3).min(pattern.len()),
                &tail[digits..]
            ),
            Err(_) => matcher_error.to_string(),
        };
    }
    match regex::RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .build()
    {
        Err(regex::Error::Syntax(why)) => format!("the pattern does not compile: {why}"),
        _ => matcher_error.replace(&format!("(?:{pattern})"), pattern),
    }
}

/// Runs `grep`.
pub fn run(request: GrepRequest, ctx: &Ctx) -> Result<ToolOutput, ArgError> {
    let GrepRequest {
        pattern: pattern_text,
        paths,
        globs,
        ignore_case,
        literal,
        before,
        after,
        mode,
        no_ignore,
        max_line_length,
        skip,
        replace,
        mut notes,
    } = request;
    let max_line = max_line_length.clamp(1, super::read::MAX_MAX_LINE);

    let pattern = match Pattern::new(
        &pattern_text,
        PatternOptions {
            ignore_case,
            literal,
        },
    ) {
        Ok(p) => p,
        Err(e) => {
            return Ok(ToolOutput::error(format!(
                "grep: {}. Nothing was searched.\n{LITERAL_HINT}\n",
                pattern_error(&pattern_text, ignore_case, &e.to_string())
            )));
        }
    };
    if let Some(rep) = &replace {
        for name in pattern.unknown_groups(rep) {
            notes.push(format!(
                "the replacement names ${name}, a group the pattern does not have: it is replaced by nothing; write $$ for a literal $, or ${{NAME}} where a name runs into the text after it"
            ));
        }
    }
    let globs = match GlobFilter::new(&globs) {
        Ok(g) => g,
        Err(e) => {
            return Ok(ToolOutput::error(format!(
                "grep: {e}. Nothing was searched."
            )));
        }
    };
    let mut targets = Vec::new();
    let ws = ctx.workspace;
    let raw_paths = if paths.is_empty() {
        vec![".".to_string()]
    } else {
        paths
    };
    for raw in &raw_paths {
        let (p, sel, _) = selector::split(raw, |p| fs::exists(&ctx.scope, &ws.resolve(p)));
        let spans = match sel {
            Selector::Whole => None,
            Selector::Lines(r) => Some(r),
            Selector::Invalid(msg) => {
                return Ok(ToolOutput::error(format!(
                    "grep: {raw}: {msg}. Nothing was searched."
                )));
            }
            _ => {
                return Ok(ToolOutput::error(format!(
                    "grep: {raw}: only line selectors (path:A-B) narrow a search. Nothing was searched."
                )));
            }
        };
        let path = ws.resolve(&p);
        if !fs::exists(&ctx.scope, &path) {
            let hint = ws
                .unknown_name(&p)
                .unwrap_or_else(|| "grep without paths searches the project".into());
            return Ok(ToolOutput::error(format!(
                "grep: {}: no such file or folder. Nothing was searched.\nhint: {hint}",
                ws.display(&path)
            )));
        }
        targets.push(Target { path, spans });
    }
    let opts = Options {
        pattern,
        targets,
        walk: WalkOptions {
            no_ignore,
            globs,
            scope: ctx.scope.clone(),
        },
        before,
        after,
        mode,
        max_line,
        skip,
        replace,
    };
    Ok(grep(&opts, ctx, notes))
}

thread_local! {
    static SEARCHER: RefCell<grep_searcher::Searcher> = RefCell::new(search::searcher());
}

/// Matching files, sorted by path, with their line numbers.
struct Found {
    files: Vec<(PathBuf, search::FileMatches)>,
    searched: usize,
    truncated: bool,
}

fn find_matches(
    opts: &Options,
    walk: &WalkOptions,
    skip_set: Option<&HashSet<u64>>,
    deadline: Option<Instant>,
) -> (Found, Option<HashSet<u64>>) {
    let results: Mutex<Vec<(PathBuf, search::FileMatches)>> = Mutex::new(Vec::new());
    // Paths as 64-bit hashes: the set covers every file searched (30,000
    // in a large tree), kept only for the look into ignored files.
    let path_key = |p: &Path| xxhash_rust::xxh3::xxh3_64(p.as_os_str().as_encoded_bytes());
    let searched_paths: Option<Mutex<HashSet<u64>>> =
        skip_set.is_none().then(|| Mutex::new(HashSet::new()));
    let searched = std::sync::atomic::AtomicUsize::new(0);
    let roots: Vec<PathBuf> = opts.targets.iter().map(|t| t.path.clone()).collect();
    let keep = SINGLE_FILE_MATCHES + 1;
    let visit = |path: &Path, _rel: &Path| -> bool {
        if deadline.is_some_and(|d| Instant::now() > d) {
            return false;
        }
        if let Some(set) = &searched_paths
            && let Ok(mut s) = set.lock()
        {
            s.insert(path_key(path));
        }
        if skip_set.is_some_and(|s| s.contains(&path_key(path))) {
            return true;
        }
        searched.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let m = SEARCHER.with(|s| {
            search::search_file(&mut s.borrow_mut(), &walk.scope, &opts.pattern, path, keep)
        });
        if (m.count > 0 || m.error.is_some())
            && let Ok(mut r) = results.lock()
        {
            r.push((path.to_path_buf(), m));
        }
        true
    };
    let report = search::walk(&roots, walk, &visit);
    let mut files = results.into_inner().unwrap_or_default();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    // Line selectors narrow the matches of their files.
    for t in opts.targets.iter().filter(|t| t.spans.is_some()) {
        if let Some((_, m)) = files.iter_mut().find(|(p, _)| *p == t.path) {
            let ranges = t.spans.as_deref().unwrap_or(&[]);
            let within = |n: usize| {
                ranges.iter().any(|r| match *r {
                    LineRange::From { start, end } => n >= start && end.is_none_or(|e| n <= e),
                    // The last N lines need the file's length; keep the match.
                    LineRange::Last(_) => true,
                })
            };
            m.lines.retain(|&n| within(n));
            m.count = m.lines.len();
        }
    }
    files.retain(|(_, m)| m.count > 0 || m.error.is_some());
    let seen = searched_paths.and_then(|m| m.into_inner().ok());
    (
        Found {
            files,
            searched: searched.into_inner(),
            truncated: report.truncated,
        },
        seen,
    )
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A line that looks like the start of a definition.
pub fn looks_like_definition(line: &str) -> bool {
    const MODIFIERS: &[&str] = &[
        "pub",
        "pub(crate)",
        "export",
        "default",
        "async",
        "static",
        "public",
        "private",
        "protected",
        "internal",
        "abstract",
        "final",
        "override",
        "open",
        "sealed",
        "inline",
        "extern",
        "unsafe",
        "const",
        "declare",
        "data",
        "suspend",
    ];
    const KEYWORDS: &[&str] = &[
        "fn",
        "def",
        "class",
        "func",
        "function",
        "interface",
        "struct",
        "enum",
        "trait",
        "impl",
        "type",
        "let",
        "var",
        "val",
        "object",
        "module",
        "record",
        "mod",
        "macro_rules!",
        "fun",
        "const",
    ];
    let mut had_modifier = false;
    for w in line.split_whitespace().take(6) {
        if KEYWORDS.contains(&w) {
            return true;
        }
        if !MODIFIERS.contains(&w) {
            // `public static void main(…` and the like: modifiers, a type, a call shape.
            return had_modifier && line.contains('(');
        }
        had_modifier = true;
    }
    false
}

fn grep(opts: &Options, ctx: &Ctx, notes: Vec<String>) -> ToolOutput {
    let (found, searched_set) = find_matches(opts, &opts.walk, None, None);
    let total: usize = found.files.iter().map(|(_, m)| m.count).sum();
    let nfiles = found.files.iter().filter(|(_, m)| m.count > 0).count();
    let ws = ctx.workspace;
    let mut out = String::new();
    if total == 0 {
        out.push_str(&format!(
            "no matches in {}",
            plural(found.searched, "file", "files")
        ));
        out.push('\n');
        for (p, m) in &found.files {
            if let Some(e) = &m.error {
                out.push_str(&format!("[{}: {e}]\n", ws.display(p)));
            }
        }
        if !opts.walk.no_ignore {
            out.push_str(&ignored_hint(opts, searched_set.as_ref(), ctx));
        }
        // `nib grep` exits 1 when nothing matched, as grep and rg do (the
        // MCP answer is the same text, not an error).
        let mut answer = ToolOutput::ok(with_notes(out, &notes, opts));
        answer.exit = Some(1);
        return answer;
    }
    out.push_str(&format!(
        "{} in {}\n",
        plural(total, "match", "matches"),
        plural(nfiles, "file", "files")
    ));
    if found.truncated {
        out.push_str(&format!(
            "[the search stopped after {} files; name narrower paths]\n",
            search::MAX_FILES
        ));
    }
    match opts.mode {
        Mode::Files | Mode::Count => {
            out.push('\n');
            let page: Vec<_> = found
                .files
                .iter()
                .skip(opts.skip)
                .take(PAGE_PATHS)
                .collect();
            for (p, m) in &page {
                if opts.mode == Mode::Count {
                    out.push_str(&format!("{} ({})\n", ws.display(p), m.count));
                } else {
                    out.push_str(&format!("{}\n", ws.display(p)));
                }
            }
            page_note(&mut out, opts.skip, page.len(), found.files.len(), "paths");
        }
        Mode::Content => content(&mut out, &found, opts, ctx),
    }
    ToolOutput::ok(with_notes(out, &notes, opts))
}

fn with_notes(mut out: String, notes: &[String], opts: &Options) -> String {
    let mut all: Vec<String> = notes.to_vec();
    if opts.pattern.engine() == "PCRE2" {
        all.push("the pattern uses look-around or backreferences, so PCRE2 ran it".into());
    }
    if !all.is_empty() {
        out.push_str(&format!("[note: {}]\n", all.join("; ")));
    }
    out
}

fn page_note(out: &mut String, skip: usize, shown: usize, total: usize, what: &str) {
    if skip > 0 || skip + shown < total {
        if shown == 0 {
            out.push_str(&format!(
                "[no {what} past skip: {skip}; there are {total}]\n"
            ));
        } else {
            out.push_str(&format!("[{what} {}-{} of {total}", skip + 1, skip + shown));
            if skip + shown < total {
                out.push_str(&format!("; skip: {} for the next page", skip + shown));
            }
            out.push_str("]\n");
        }
    }
}

/// One file of the page, read for rows.
struct PageFile {
    shown: String,
    lang: Option<nib_text::lang::Lang>,
    text: Option<Arc<Text>>,
    tag: Option<Tag>,
    canonical: Option<PathBuf>,
    /// Rows are anchors (the file is small enough and did not change while read).
    anchors: bool,
    matches: Vec<usize>,
    /// Lines of big files, by number (no whole text).
    big_lines: BTreeMap<usize, String>,
    total: usize,
    error: Option<String>,
}

fn load(
    scope: &fs::Scope,
    path: &Path,
    shown: String,
    m: &search::FileMatches,
    cap: usize,
    opts: &Options,
) -> PageFile {
    let matches: Vec<usize> = m.lines.iter().copied().take(cap).collect();
    let mut pf = PageFile {
        lang: nib_text::lang::Lang::of(path),
        shown,
        text: None,
        tag: None,
        canonical: fs::canonical(path).ok(),
        anchors: false,
        matches,
        big_lines: BTreeMap::new(),
        total: m.count,
        error: m.error.clone(),
    };
    let before = fs::stat(scope, path).ok();
    match fs::read_file(scope, path, TEXT_LIMIT) {
        Ok(f) => {
            let after = fs::stat(scope, path).ok();
            let steady = matches!((&before, &after), (Some(a), Some(b)) if a.size == b.size && a.modified == b.modified && b.size == f.stat.size);
            pf.tag = Some(Tag::of(&f.bytes));
            pf.text = Some(Arc::new(Text::decode(&f.bytes)));
            pf.anchors = steady;
        }
        Err(fs::FsError::TooLarge { .. }) => {
            // Big files: the matching lines only, as non-anchor rows.
            let wanted: BTreeSet<usize> = pf.matches.iter().copied().collect();
            let mut lines = BTreeMap::new();
            if let Ok(file) = fs::open_regular(scope, path) {
                let mut searcher = search::searcher();
                let sink = grep_searcher::sinks::Lossy(|n: u64, line: &str| {
                    let n = n as usize;
                    if wanted.contains(&n) {
                        let cut: String = line
                            .trim_end_matches(['\n', '\r'])
                            .chars()
                            .take(opts.max_line)
                            .collect();
                        lines.insert(n, cut);
                    }
                    Ok(lines.len() < wanted.len())
                });
                let _ = match &opts.pattern {
                    Pattern::Regex(m) => searcher.search_file(m, &file, sink),
                    Pattern::Pcre2(m) => searcher.search_file(m, &file, sink),
                };
            }
            pf.big_lines = lines;
        }
        Err(e) => pf.error = Some(e.to_string()),
    }
    pf
}

fn content(out: &mut String, found: &Found, opts: &Options, ctx: &Ctx) {
    let ws = ctx.workspace;
    let with_matches: Vec<&(PathBuf, search::FileMatches)> = found.files.iter().collect();
    let cap = if with_matches.len() == 1 {
        SINGLE_FILE_MATCHES
    } else {
        FILE_MATCHES
    };
    let page: Vec<PageFile> = with_matches
        .iter()
        .skip(opts.skip)
        .take(PAGE_FILES)
        .map(|(p, m)| load(&ctx.scope, p, ws.display(p), m, cap, opts))
        .collect();

    let (context, unserved) = context_rows(&page, opts);

    let mut replace_sections = String::new();
    let mut replaced = 0usize;
    for (fi, pf) in page.iter().enumerate() {
        out.push('\n');
        let Some(text) = &pf.text else {
            out.push_str(&format!("[{}]\n", pf.shown));
            for (n, line) in &pf.big_lines {
                out.push_str(&format!("*{n}|{line}\n"));
            }
            out.push_str(&format!(
                "[{} is over 8 MiB: its rows are not anchors]\n",
                pf.shown
            ));
            if let Some(e) = &pf.error {
                out.push_str(&format!("[{e}]\n"));
            }
            continue;
        };
        let tag = pf.tag.unwrap_or(Tag(0));
        out.push_str(&hashline::header(&pf.shown, tag));
        out.push('\n');
        let mut rows: BTreeSet<usize> = context[fi].clone();
        rows.extend(pf.matches.iter().copied());
        let mut seen_lines = Vec::new();
        let mut section = String::new();
        for n in rows {
            let line = text.line(n).unwrap_or("");
            let is_match = pf.matches.contains(&n);
            let mark = if is_match { '*' } else { ' ' };
            let whole = line.chars().count() <= opts.max_line;
            if whole && pf.anchors {
                out.push_str(&format!("{mark}{}\n", hashline::anchored_row(n, line)));
                seen_lines.push(n);
            } else if whole {
                out.push_str(&format!("{mark}{n}|{line}\n"));
            } else {
                let cut: String = line.chars().take(opts.max_line).collect();
                let total = line.chars().count();
                out.push_str(&format!(
                    "{mark}{}\n",
                    hashline::long_line_row(n, opts.max_line, total, &cut)
                ));
            }
            if let (true, Some(rep)) = (is_match && whole && pf.anchors, &opts.replace)
                && let Some(new) = opts.pattern.replace(line, rep)
                && new != line
                && !new.contains('\n')
            {
                out.push_str(&format!(">{n}|{new}\n"));
                section.push_str(&format!("PUT {n}:\n+{new}\n"));
                replaced += 1;
            }
        }
        if !section.is_empty() {
            replace_sections.push_str(&format!("{}\n{section}", hashline::header(&pf.shown, tag)));
        }
        if pf.total > pf.matches.len() {
            out.push_str(&format!(
                "[{} of {} matches in this file shown; grep it alone (paths: [\"{}\"]) for up to {SINGLE_FILE_MATCHES}]\n",
                pf.matches.len(),
                pf.total,
                pf.shown
            ));
        }
        if !pf.anchors {
            out.push_str("[the file changed while it was read: its rows are not anchors]\n");
        }
        if !unserved[fi].is_empty() {
            out.push_str(&unserved_note(&unserved[fi], &pf.shown));
        }
        if let Some(e) = &pf.error {
            out.push_str(&format!("[{e}]\n"));
        }
        if let (Some(canonical), Some(tag)) = (&pf.canonical, pf.tag) {
            ctx.with_seen(|s| s.record(canonical, tag, text, seen_lines.iter().copied()));
        }
    }
    page_note(out, opts.skip, page.len(), with_matches.len(), "files");
    if replaced > 0 {
        let token = ctx.with_agent(|a| {
            a.tokens.remember(PendingEdit {
                patch: replace_sections,
                waive_seen: true,
                sub_moves: Vec::new(),
                versions: Vec::new(),
            })
        });
        out.push_str(&format!(
            "[replace preview: {} changed; edit with REAPPLY {token} applies exactly these lines]\n",
            plural(replaced, "line", "lines")
        ));
    }
}

/// Lines `a` to `b` of a file, both included.
type Lines = (usize, usize);

/// The context rows around each file's matches, under the page's budget of
/// [`CONTEXT_BUDGET`] rows: definitions' matches first, then file order.
/// Returns the rows per file, and per file the ranges the budget left out.
fn context_rows(page: &[PageFile], opts: &Options) -> (Vec<BTreeSet<usize>>, Vec<Vec<Lines>>) {
    // Context budget: definitions first, then file order.
    let mut order: Vec<(bool, usize, usize)> = Vec::new(); // (not a definition, file, line)
    for (fi, pf) in page.iter().enumerate() {
        if let Some(text) = &pf.text {
            // Where the language is parsed, a definition is a line a declaration starts on.
            let heads: Option<std::collections::HashSet<usize>> = pf.lang.map(|l| {
                nib_text::lang::declarations(l, &text.encode())
                    .iter()
                    .map(|d| d.head)
                    .collect()
            });
            for &n in &pf.matches {
                // The line test stays as a fallback for files that do not parse.
                let def = heads.as_ref().is_some_and(|h| h.contains(&n))
                    || looks_like_definition(text.line(n).unwrap_or(""));
                order.push((!def, fi, n));
            }
        }
    }
    order.sort();
    let mut context: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); page.len()];
    let mut unserved: Vec<Vec<(usize, usize)>> = vec![Vec::new(); page.len()];
    let mut budget = CONTEXT_BUDGET;
    for &(_, fi, n) in &order {
        let pf = &page[fi];
        let len = pf.text.as_ref().map_or(0, |t| t.len());
        let lo = n.saturating_sub(opts.before).max(1);
        let hi = (n + opts.after).min(len);
        let want: Vec<usize> = (lo..=hi)
            .filter(|l| *l != n && !pf.matches.contains(l) && !context[fi].contains(l))
            .collect();
        if want.len() <= budget {
            budget -= want.len();
            context[fi].extend(want);
        } else if lo < hi {
            unserved[fi].push((lo, hi));
        }
    }
    (context, unserved)
}

/// The note naming the context ranges the budget left out, merged, as a
/// read selector.
fn unserved_note(unserved: &[(usize, usize)], shown: &str) -> String {
    let mut ranges = unserved.to_vec();
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let sel: Vec<String> = merged.iter().map(|(a, b)| format!("{a}-{b}")).collect();
    format!(
        "[context past the page's {CONTEXT_BUDGET}-row budget: read {}:{}]\n",
        shown,
        sel.join(",")
    )
}

/// When nothing matched: which ignored files would, if that look is quick.
fn ignored_hint(opts: &Options, searched: Option<&HashSet<u64>>, ctx: &Ctx) -> String {
    let Some(searched) = searched else {
        return String::new();
    };
    let walk = WalkOptions {
        scope: opts.walk.scope.clone(),
        no_ignore: true,
        globs: opts.walk.globs.clone(),
    };
    let deadline = Instant::now() + IGNORED_LOOK;
    let (found, _) = find_matches(opts, &walk, Some(searched), Some(deadline));
    if Instant::now() > deadline {
        return format!(
            "[ignored files were not checked: that look took over {} s]\n",
            IGNORED_LOOK.as_secs()
        );
    }
    let hits: Vec<String> = found
        .files
        .iter()
        .filter(|(_, m)| m.count > 0)
        .take(10)
        .map(|(p, m)| format!("{} ({})", ctx.workspace.display(p), m.count))
        .collect();
    if hits.is_empty() {
        return String::new();
    }
    format!(
        "[ignored files match: {}; pass noIgnore: true, or name them in paths, to search them]\n",
        hits.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_recognised() {
        assert!(looks_like_definition("pub fn login(user: User) {"));
        assert!(looks_like_definition("export async function login() {"));
        assert!(looks_like_definition("  def login(self):"));
        assert!(looks_like_definition(
            "public static void main(String[] a) {"
        ));
        assert!(!looks_like_definition("return login(user);"));
        assert!(!looks_like_definition("    login(user);"));
        assert!(looks_like_definition("class Login:"));
    }
}
