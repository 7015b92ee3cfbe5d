//! The search engine behind grep and find: which files are searched (the
//! walk) and where a pattern matches in them (the matcher), on ripgrep's crates.
//!
//! The walk: hidden files are searched and `.git/` is not; git's ignore rules
//! (and `.ignore` files) apply inside repositories; a nested repository that
//! its parent ignores is still walked, by its own rules; `noIgnore` turns all
//! ignore files off; a path named explicitly is searched even when ignored
//! (a named file always, a named folder by its own rules only); `glob` filters
//! by name (or by relative path when the glob holds a `/`), `!glob` excludes.
//! The walk runs on the ignore crate's parallel walker and is bounded.
//!
//! The matcher: the `regex` engine (linear time, size-limited) unless the
//! pattern needs look-around or backreferences, then PCRE2 (as ripgrep's
//! `--engine auto`). Matching happens per file through grep-searcher with a
//! bounded line buffer (no memory maps), so a huge line costs a bounded error,
//! not the server's memory.
//!
//! This module and [`crate::fs`] are the only places that touch the
//! filesystem: the walker reads folders and ignore files through the ignore
//! crate; files are opened for searching through [`crate::fs::open_regular`].

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use globset::{Glob, GlobSet, GlobSetBuilder};
use grep_matcher::{Captures, Matcher};
use grep_searcher::{BinaryDetection, MmapChoice, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::{WalkBuilder, WalkState};

use crate::fs;

/// At most this many files are visited by one walk; the cap is stated in the answer.
pub const MAX_FILES: usize = 200_000;
/// A line longer than this (bytes) ends the search of its file with an error.
pub const LINE_LIMIT: usize = 16 * 1024 * 1024;
/// Compiled regex size limit.
pub const REGEX_SIZE_LIMIT: usize = 10 * 1024 * 1024;

/// A pattern that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PatternError(pub String);

/// Name filters from `glob`.
#[derive(Clone, Debug, Default)]
pub struct GlobFilter {
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
}

impl GlobFilter {
    /// Builds the filter; `!` marks an exclusion.
    pub fn new(globs: &[String]) -> Result<GlobFilter, PatternError> {
        let (mut inc, mut exc) = (GlobSetBuilder::new(), GlobSetBuilder::new());
        let (mut n_inc, mut n_exc) = (0, 0);
        for g in globs {
            let (set, text, count) = match g.strip_prefix('!') {
                Some(rest) => (&mut exc, rest, &mut n_exc),
                None => (&mut inc, g.as_str(), &mut n_inc),
            };
            let glob = Glob::new(text).map_err(|e| PatternError(format!("glob \"{g}\": {e}")))?;
            set.add(glob);
            *count += 1;
        }
        let build = |b: GlobSetBuilder, n: usize| -> Result<Option<GlobSet>, PatternError> {
            if n == 0 {
                return Ok(None);
            }
            b.build().map(Some).map_err(|e| PatternError(e.to_string()))
        };
        Ok(GlobFilter {
            include: build(inc, n_inc)?,
            exclude: build(exc, n_exc)?,
        })
    }

    /// Whether a file (path relative to its walk root) passes.
    pub fn allows(&self, rel: &Path) -> bool {
        let name = rel.file_name().map(Path::new).unwrap_or(rel);
        let hit = |set: &GlobSet| set.is_match(name) || set.is_match(rel);
        self.include.as_ref().is_none_or(hit) && !self.exclude.as_ref().is_some_and(hit)
    }
}

/// How to walk.
#[derive(Clone, Debug)]
pub struct WalkOptions {
    /// Turn every ignore file off.
    pub no_ignore: bool,
    /// Name filters.
    pub globs: GlobFilter,
    /// How files are opened and roots checked.
    pub scope: fs::Scope,
}

/// What a walk found besides files.
#[derive(Debug, Default)]
pub struct WalkReport {
    /// The walk stopped at [`MAX_FILES`].
    pub truncated: bool,
    /// Folders that could not be read.
    pub errors: usize,
}

fn builder(root: &Path, no_ignore: bool, parents: bool) -> WalkBuilder {
    let mut b = WalkBuilder::new(root);
    b.hidden(false)
        .parents(parents && !no_ignore)
        .ignore(!no_ignore)
        .git_ignore(!no_ignore)
        .git_global(!no_ignore)
        .git_exclude(!no_ignore)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git");
    b
}

/// Whether `dir` itself is ignored by the rules of the folders above it.
fn ignored_by_parent(dir: &Path) -> bool {
    let Some(parent) = dir.parent() else {
        return false;
    };
    let mut found = false;
    for entry in builder(parent, false, true)
        .max_depth(Some(1))
        .build()
        .flatten()
    {
        if entry.path() == dir {
            found = true;
            break;
        }
    }
    !found
}

/// Repositories below `root` (not `root` itself), a bounded look.
fn nested_repos(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut seen = 0usize;
    let walk = WalkBuilder::new(root)
        .standard_filters(false)
        .hidden(false)
        .max_depth(Some(4))
        .filter_entry(|e| e.file_name() != ".git" && e.file_name() != "node_modules")
        .build();
    for entry in walk.flatten() {
        seen += 1;
        if seen > 20_000 {
            break;
        }
        if entry.depth() > 0
            && entry.file_type().is_some_and(|t| t.is_dir())
            && entry.path().join(".git").exists()
        {
            out.push(entry.into_path());
        }
    }
    out
}

/// Walks `roots` in parallel, calling `visit` for every file (absolute path,
/// path relative to its root) that passes the options. Stops at [`MAX_FILES`]
/// or when `visit` returns false.
pub fn walk(
    roots: &[PathBuf],
    opts: &WalkOptions,
    visit: &(dyn Fn(&Path, &Path) -> bool + Sync),
) -> WalkReport {
    let count = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let errors = AtomicUsize::new(0);
    // Nested repositories the walk reached (their own rules applied); the
    // others are walked on their own afterwards.
    let visited_dirs: Mutex<HashSet<PathBuf>> = Mutex::new(HashSet::new());
    let walk_one = |root: &Path, parents: bool, repos: &HashSet<PathBuf>| {
        let base = root.to_path_buf();
        builder(root, opts.no_ignore, parents)
            .build_parallel()
            .run(|| {
                let base = base.clone();
                let count = &count;
                let stop = &stop;
                let errors = &errors;
                let visited_dirs = &visited_dirs;
                Box::new(move |entry| {
                    if stop.load(Ordering::Relaxed) {
                        return WalkState::Quit;
                    }
                    let entry = match entry {
                        Ok(e) => e,
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            return WalkState::Continue;
                        }
                    };
                    let Some(ft) = entry.file_type() else {
                        return WalkState::Continue;
                    };
                    if ft.is_dir() {
                        if repos.contains(entry.path())
                            && let Ok(mut v) = visited_dirs.lock()
                        {
                            v.insert(entry.path().to_path_buf());
                        }
                        return WalkState::Continue;
                    }
                    if !ft.is_file() {
                        return WalkState::Continue;
                    }
                    let rel = entry.path().strip_prefix(&base).unwrap_or(entry.path());
                    let rel = if rel.as_os_str().is_empty() {
                        Path::new(entry.file_name())
                    } else {
                        rel
                    };
                    if !opts.globs.allows(rel) {
                        return WalkState::Continue;
                    }
                    if count.fetch_add(1, Ordering::Relaxed) >= MAX_FILES {
                        stop.store(true, Ordering::Relaxed);
                        return WalkState::Quit;
                    }
                    if !visit(entry.path(), rel) {
                        stop.store(true, Ordering::Relaxed);
                        return WalkState::Quit;
                    }
                    WalkState::Continue
                })
            });
    };
    for root in roots {
        match fs::stat(&opts.scope, root) {
            Ok(st) if st.kind == fs::Kind::File => {
                // A named file is searched even when ignored.
                let name = root.file_name().map(Path::new).unwrap_or(root);
                if opts.globs.allows(name) {
                    count.fetch_add(1, Ordering::Relaxed);
                    visit(root, name);
                }
            }
            Ok(st) if st.kind == fs::Kind::Dir => {
                let own_rules_only = !opts.no_ignore && ignored_by_parent(root);
                let repos: HashSet<PathBuf> = if opts.no_ignore {
                    HashSet::new()
                } else {
                    nested_repos(root).into_iter().collect()
                };
                walk_one(root, !own_rules_only, &repos);
                if !stop.load(Ordering::Relaxed) {
                    let mut repos: Vec<PathBuf> = repos.into_iter().collect();
                    repos.sort();
                    for repo in repos {
                        let visited = visited_dirs
                            .lock()
                            .map(|v| v.contains(&repo))
                            .unwrap_or(true);
                        if !visited {
                            walk_one(&repo, false, &HashSet::new());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    WalkReport {
        truncated: stop.load(Ordering::Relaxed) && count.load(Ordering::Relaxed) > MAX_FILES,
        errors: errors.load(Ordering::Relaxed),
    }
}

/// A compiled pattern.
#[derive(Clone, Debug)]
pub enum Pattern {
    /// Rust's regex: linear time.
    Regex(grep_regex::RegexMatcher),
    /// PCRE2, for look-around and backreferences.
    Pcre2(grep_pcre2::RegexMatcher),
}

/// How to compile a pattern.
#[derive(Clone, Copy, Debug, Default)]
pub struct PatternOptions {
    /// Case-insensitive.
    pub ignore_case: bool,
    /// The pattern is literal text.
    pub literal: bool,
}

impl Pattern {
    /// Compiles `pattern`, switching to PCRE2 when the regex engine cannot
    /// express it (look-around, backreferences).
    pub fn new(pattern: &str, opts: PatternOptions) -> Result<Pattern, PatternError> {
        let mut b = grep_regex::RegexMatcherBuilder::new();
        b.case_insensitive(opts.ignore_case)
            .fixed_strings(opts.literal)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .line_terminator(Some(b'\n'));
        match b.build(pattern) {
            Ok(m) => Ok(Pattern::Regex(m)),
            Err(e) => {
                let msg = e.to_string();
                if !opts.literal && (msg.contains("look-around") || msg.contains("backreference")) {
                    let mut p = grep_pcre2::RegexMatcherBuilder::new();
                    p.caseless(opts.ignore_case)
                        .utf(true)
                        .ucp(true)
                        .jit_if_available(true);
                    p.build(pattern).map(Pattern::Pcre2).map_err(|e| {
                        PatternError(format!("the pattern does not compile (PCRE2): {e}"))
                    })
                } else {
                    Err(PatternError(format!("the pattern does not compile: {msg}")))
                }
            }
        }
    }

    /// The engine's name, for notes.
    pub fn engine(&self) -> &'static str {
        match self {
            Pattern::Regex(_) => "regex",
            Pattern::Pcre2(_) => "PCRE2",
        }
    }

    /// Replaces every match in `line` following ripgrep's syntax (`$1`, `${name}`).
    pub fn replace(&self, line: &str, replacement: &str) -> Option<String> {
        fn run<M: Matcher>(m: &M, line: &str, replacement: &str) -> Option<String> {
            let mut caps = m.new_captures().ok()?;
            let mut dst = Vec::new();
            let hay = line.as_bytes();
            m.replace_with_captures(hay, &mut caps, &mut dst, |caps, dst| {
                caps.interpolate(
                    |name| m.capture_index(name),
                    hay,
                    replacement.as_bytes(),
                    dst,
                );
                true
            })
            .ok()?;
            String::from_utf8(dst).ok()
        }
        match self {
            Pattern::Regex(m) => run(m, line, replacement),
            Pattern::Pcre2(m) => run(m, line, replacement),
        }
    }

    /// The groups `replacement` names (`$1`, `$name`, `${name}`; `$$` is a
    /// dollar) that the pattern does not have: each becomes empty, as in
    /// ripgrep, which a caller says. A name runs as far as letters, digits
    /// and `_` go (`$chain` is the group `chain`, not `$c` + `hain`).
    pub fn unknown_groups(&self, replacement: &str) -> Vec<String> {
        fn known<M: Matcher>(m: &M, name: &str) -> bool {
            match name.parse::<usize>() {
                Ok(i) => i < m.capture_count(),
                Err(_) => m.capture_index(name).is_some(),
            }
        }
        let mut unknown = Vec::new();
        let mut rest = replacement;
        while let Some(at) = rest.find('$') {
            rest = &rest[at + 1..];
            let name = if let Some(r) = rest.strip_prefix('$') {
                rest = r;
                continue;
            } else if let Some(r) = rest.strip_prefix('{') {
                let Some(end) = r.find('}') else { break };
                let name = &r[..end];
                rest = &r[end + 1..];
                name
            } else {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let name = &rest[..end];
                rest = &rest[end..];
                name
            };
            if name.is_empty() {
                continue;
            }
            let ok = match self {
                Pattern::Regex(m) => known(m, name),
                Pattern::Pcre2(m) => known(m, name),
            };
            if !ok && !unknown.iter().any(|u| u == name) {
                unknown.push(name.to_string());
            }
        }
        unknown
    }

    /// Whether `line` matches.
    pub fn is_match(&self, line: &str) -> bool {
        match self {
            Pattern::Regex(m) => m.is_match(line.as_bytes()).unwrap_or(false),
            Pattern::Pcre2(m) => m.is_match(line.as_bytes()).unwrap_or(false),
        }
    }
}

/// A new searcher: line numbers, binary files skipped, bounded line buffer.
pub fn searcher() -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .memory_map(MmapChoice::never())
        .heap_limit(Some(LINE_LIMIT))
        .build()
}

/// The lines of one file that match.
#[derive(Debug, Default)]
pub struct FileMatches {
    /// 1-based line numbers of matching lines (at most `keep` of them).
    pub lines: Vec<usize>,
    /// All matching lines, counted past `keep`.
    pub count: usize,
    /// Why the search of this file stopped early, if it did.
    pub error: Option<String>,
}

struct Collect<'a> {
    out: &'a mut FileMatches,
    keep: usize,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.out.count += 1;
        if self.out.lines.len() < self.keep
            && let Some(n) = mat.line_number()
        {
            self.out.lines.push(n as usize);
        }
        Ok(true)
    }
}

/// Searches one file, keeping at most `keep` line numbers.
pub fn search_file(
    searcher: &mut Searcher,
    scope: &fs::Scope,
    pattern: &Pattern,
    path: &Path,
    keep: usize,
) -> FileMatches {
    let mut out = FileMatches::default();
    let file = match fs::open_regular(scope, path) {
        Ok(f) => f,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let mut sink = Collect {
        out: &mut out,
        keep,
    };
    let result = match pattern {
        Pattern::Regex(m) => searcher.search_file(m, &file, &mut sink),
        Pattern::Pcre2(m) => searcher.search_file(m, &file, &mut sink),
    };
    if let Err(e) = result {
        let msg = e.to_string();
        out.error = Some(if msg.contains("heap limit") || msg.contains("exceeded") {
            format!(
                "a line is longer than {} MiB; the rest of the file was not searched",
                LINE_LIMIT >> 20
            )
        } else {
            msg
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_auto_switches_for_look_around() {
        let p = Pattern::new("foo(?=bar)", PatternOptions::default()).unwrap();
        assert_eq!(p.engine(), "PCRE2");
        assert!(p.is_match("foobar") && !p.is_match("foobaz"));
        let p = Pattern::new(r"(\w)\1", PatternOptions::default()).unwrap();
        assert_eq!(p.engine(), "PCRE2");
        let p = Pattern::new("fo+", PatternOptions::default()).unwrap();
        assert_eq!(p.engine(), "regex");
        assert!(Pattern::new("(", PatternOptions::default()).is_err());
        let p = Pattern::new(
            "a.b(",
            PatternOptions {
                literal: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(p.is_match("xa.b(y") && !p.is_match("axb("));
    }

    #[test]
    fn groups_a_replacement_names_that_the_pattern_lacks_are_found() {
        let p = Pattern::new(r"(?P<fn>\w+)\((\d)\)", PatternOptions::default()).unwrap();
        assert_eq!(
            p.unknown_groups("$fn $1 ${2} $$chain $0 $3"),
            vec!["3".to_string()]
        );
        assert_eq!(
            p.unknown_groups("$chain.${fn}x $fnx"),
            vec!["chain".to_string(), "fnx".to_string()]
        );
        assert!(p.unknown_groups("no groups $").is_empty());
    }

    #[test]
    fn replace_uses_ripgrep_syntax() {
        let p = Pattern::new(r"(?P<k>\w+)=(\d+)", PatternOptions::default()).unwrap();
        assert_eq!(
            p.replace("a=1, b=2", "${k}:$2").as_deref(),
            Some("a:1, b:2")
        );
    }

    #[test]
    fn globs_match_names_and_paths() {
        let g = GlobFilter::new(&["*.rs".into(), "!*_test.rs".into()]).unwrap();
        assert!(g.allows(Path::new("src/a.rs")));
        assert!(!g.allows(Path::new("src/a_test.rs")));
        assert!(!g.allows(Path::new("src/a.ts")));
        let g = GlobFilter::new(&["src/**/*.ts".into()]).unwrap();
        assert!(g.allows(Path::new("src/x/y.ts")) && !g.allows(Path::new("lib/y.ts")));
    }
}
