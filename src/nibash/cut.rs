//! Long output: which rows of a long text stay in the answer, and the log
//! that keeps the whole of it.
//!
//! Output over [`MAX_ROWS`] rows or [`MAX_BYTES`] is cut. A [`Decider`]
//! picks the rows that stay; they print as `N|TEXT`, numbered by log line,
//! with one `[… lines A-B cut …]` row per gap, so `read LOG:A-B plain:true`
//! shows a gap. The same shaping serves nibash's output, `skim` and
//! `nib shape`. Pure functions, except [`save_log`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::runners::RowKind;

/// Rows over which output is cut.
pub const MAX_ROWS: usize = 400;
/// Bytes over which output is cut.
pub const MAX_BYTES: usize = 30 * 1024;
/// Rows around a keyword row that stay with it.
const AROUND: usize = 3;
/// At most this many rows are kept for keywords (the rest of the budget is
/// the head and tail).
const KEYWORD_BUDGET: usize = 200;
/// A kept row is cut to this many characters.
const ROW_CHARS: usize = 500;

/// How rows are picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decider {
    /// The first 10 and last 30 rows that are not passing tests', rows
    /// naming errors or failures and runners' failure details (first),
    /// with 3 rows around each (then, nearest first), and rows naming a
    /// place a failure row names (a backtrace's frame). Chosen on the
    /// corpus in `bench/corpus/` (real runs of 14 tools): every must-see
    /// line at 10.4% of the characters.
    Keywords,
    /// The first 100 and last 200 rows.
    Fixed,
}

impl Decider {
    /// The rows a configured decider starts from (`NIB_DECIDER`, else
    /// setup.json's `decider`): the model decider adds windows to the
    /// keyword rows.
    pub fn of(kind: crate::llm::DeciderKind) -> Decider {
        match kind {
            crate::llm::DeciderKind::Fixed => Decider::Fixed,
            crate::llm::DeciderKind::Keywords | crate::llm::DeciderKind::OpenRouter => {
                Decider::Keywords
            }
        }
    }

    fn head_tail(self) -> (usize, usize) {
        match self {
            Decider::Keywords => (10, 30),
            Decider::Fixed => (100, 200),
        }
    }
}

/// Whether a row names an error or a failure (build tools, test runners,
/// compilers, shells).
pub fn names_failure(row: &str) -> bool {
    let lower = row.to_ascii_lowercase();
    const WORDS: &[&str] = &[
        "error",
        "fail",
        "fatal",
        // Not bare `panic`: every frame of a Rust backtrace names the
        // panic machinery (`core::panicking::panic_fmt`).
        "panicked",
        "panic:",
        "exception",
        "traceback",
        "assert",
        "undefined reference",
        "segmentation fault",
        "cannot find",
        "not found",
        "no such file",
        "denied",
        "timed out",
        "make: ***",
        "--- fail",
        "not ok",
        "✕",
        "✗",
    ];
    (WORDS.iter().any(|w| lower.contains(w)) || is_assertion_detail(&lower))
        && !is_all_clear(&lower)
}

/// A row of an assertion's comparison (`left: 3`, `expected: 'a'`,
/// `actual: 'b'`): test runners print them a few rows away from the failure.
fn is_assertion_detail(lower: &str) -> bool {
    let t = lower.trim_start();
    [
        "expected:",
        "actual:",
        "left:",
        "right:",
        "+ actual - expected",
    ]
    .iter()
    .any(|w| t.starts_with(w))
}

/// `path:LINE` or `path:LINE:COL` locations a row names (`src/main.rs:5:22`).
fn locations(row: &str) -> Vec<&str> {
    row.split_whitespace()
        .map(|t| {
            t.trim_start_matches(['(', '\'', '"', '`'])
                .trim_end_matches([':', ',', ')', '\'', '"', '`', '.'])
        })
        .filter(|t| {
            let Some((path, rest)) = t.split_once(':') else {
                return false;
            };
            path.contains('.')
                && !path.contains("//")
                && rest
                    .split(':')
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect()
}

/// Summary rows that say nothing failed (`0 failed`, `errors: 0`).
fn is_all_clear(lower: &str) -> bool {
    (lower.contains(" 0 failed") || lower.contains("0 errors") || lower.contains("failed: 0"))
        && !lower.contains(" 1 failed")
}

/// The words of what the agent expects (a call's `expect`, skim's, shape's
/// `--purpose`) that pick out few rows: a word on more than one row in 20
/// (`tests` in a test log) says nothing about which rows matter.
pub fn expect_words(expect: &str, rows: &[&str]) -> Vec<String> {
    let lower_rows: Vec<String> = rows.iter().map(|r| r.to_ascii_lowercase()).collect();
    let most = (rows.len() / 20).max(1);
    expect
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 3)
        .map(str::to_ascii_lowercase)
        .filter(|w| lower_rows.iter().filter(|r| r.contains(w.as_str())).count() <= most)
        .collect()
}

/// Whether a row holds one of `words` (from [`expect_words`]).
pub fn has_word(row: &str, words: &[String]) -> bool {
    let lower = row.to_ascii_lowercase();
    words.iter().any(|w| lower.contains(w.as_str()))
}

/// Whether the text is long enough to be cut.
pub fn is_long(text: &str) -> bool {
    text.len() > MAX_BYTES || text.lines().count() > MAX_ROWS
}

/// The line numbers (1-based) a decider keeps of `rows`, leaving out those
/// in `skip`.
pub fn pick(rows: &[&str], decider: Decider, extra: &dyn Fn(&str) -> bool) -> BTreeSet<usize> {
    let n = rows.len();
    let (head, tail) = decider.head_tail();
    let mut keep: BTreeSet<usize> = BTreeSet::new();
    if decider == Decider::Keywords {
        keyword_rows(rows, extra, head, tail, &mut keep);
    } else {
        keep.extend(1..=head.min(n));
        keep.extend(n.saturating_sub(tail) + 1..=n);
    }
    keep_headers(rows, &mut keep);
    keep
}

/// The keyword decider's rows: first every row that names a failure or
/// carries one's detail in a runner's shape (passing tests' rows never
/// count, whatever their names hold), in order; then the rows around
/// them, nearest first; then rows naming a place a failure row names (a
/// backtrace's frame) — all within [`KEYWORD_BUDGET`]. Rows that merely
/// hold a keyword early on no longer crowd out the failures printed later.
fn keyword_rows(
    rows: &[&str],
    extra: &dyn Fn(&str) -> bool,
    head: usize,
    tail: usize,
    keep: &mut BTreeSet<usize>,
) {
    let n = rows.len();
    let outline = super::runners::Outline::of(rows);
    let mut reader = super::runners::Reader::default();
    let mut cores: Vec<usize> = Vec::new();
    let mut kinds: Vec<RowKind> = Vec::with_capacity(n);
    let mut places: Vec<&str> = Vec::new();
    // A row repeated (`yes`, a progress line) is judged once.
    let mut last: Option<(&str, RowKind)> = None;
    for (i, row) in rows.iter().enumerate() {
        let kind = match last {
            Some((r, k)) if r == *row => k,
            _ => {
                let k = match reader.kind(&outline, row) {
                    RowKind::Pass => RowKind::Pass,
                    RowKind::Detail => RowKind::Detail,
                    RowKind::Plain if names_failure(row) || extra(row) => RowKind::Detail,
                    RowKind::Plain => RowKind::Plain,
                };
                last = Some((row, k));
                k
            }
        };
        if kind == RowKind::Detail {
            if places.len() < 64 {
                places.extend(locations(row));
            }
            cores.push(i + 1);
        }
        kinds.push(kind);
    }
    // The first and last rows that are not passing tests' (a verbose
    // runner's first rows are all passes); all of them when too few.
    let telling: Vec<usize> = (1..=n).filter(|&k| kinds[k - 1] != RowKind::Pass).collect();
    if telling.len() < head + tail {
        keep.extend(1..=head.min(n));
        keep.extend(n.saturating_sub(tail) + 1..=n);
    }
    keep.extend(telling.iter().take(head));
    keep.extend(telling.iter().rev().take(tail));
    // Rows of passing tests are no failure's context.
    let context = |k: usize| k >= 1 && kinds.get(k - 1).is_some_and(|&c| c != RowKind::Pass);
    let mut budget = KEYWORD_BUDGET;
    let mut take = |k: usize, keep: &mut BTreeSet<usize>| {
        if budget > 0 && (1..=n).contains(&k) && keep.insert(k) {
            budget -= 1;
        }
        budget > 0
    };
    for &c in &cores {
        if !take(c, keep) {
            return;
        }
    }
    for d in 1..=AROUND {
        for &c in &cores {
            for k in [c.saturating_sub(d), c + d] {
                if context(k) && !take(k, keep) {
                    return;
                }
            }
        }
    }
    places.sort_unstable();
    places.dedup();
    if !places.is_empty() {
        for (i, row) in rows.iter().enumerate() {
            if places.iter().any(|p| row.contains(p)) && !take(i + 1, keep) {
                return;
            }
        }
    }
}

/// Whether a row heads the rows of one file: nib's `[PATH#TAG]` (and
/// `[PATH] (not in the working tree)`) or a raw diff's `diff --git`.
fn is_file_header(row: &str) -> bool {
    if row.starts_with("diff --git ") || super::runners::is_path_header(row) {
        return true;
    }
    let Some(inner) = row.strip_prefix('[') else {
        return false;
    };
    if row.ends_with("] (not in the working tree)") {
        return true;
    }
    inner.strip_suffix(']').is_some_and(|i| {
        i.rsplit_once('#').is_some_and(|(path, tag)| {
            !path.is_empty() && tag.len() == 4 && tag.bytes().all(|b| b.is_ascii_hexdigit())
        })
    })
}

/// Every kept row keeps the header of the file it belongs to, so a cut
/// diff or read still says which file each row is from.
fn keep_headers(rows: &[&str], keep: &mut BTreeSet<usize>) {
    let mut header_of = Vec::with_capacity(rows.len());
    let mut current = None;
    for (i, row) in rows.iter().enumerate() {
        if is_file_header(row) {
            current = Some(i + 1);
        }
        header_of.push(current);
    }
    let headers: Vec<usize> = keep
        .iter()
        .filter_map(|&k| header_of.get(k - 1).copied().flatten())
        .collect();
    keep.extend(headers);
}

/// Whether a call's output is nib's own anchored rows — `[PATH#TAG]`
/// headers, `N:TEXT` rows and nib's bracketed notes — no larger than a
/// tool's answer: its own commands already cut it once (with a hint that
/// continues in file lines), so it is not cut again.
pub fn is_own_rows(text: &str) -> bool {
    if text.len() > nib_text::blocks::OUTPUT_CAP + 4096 {
        return false;
    }
    let mut anchored = false;
    for row in text.lines() {
        let digits = row.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && matches!(row.as_bytes().get(digits), Some(b':' | b'~')) {
            anchored = true;
        } else if !(row.starts_with('[') || row.is_empty()) {
            return false;
        }
    }
    anchored
}

/// Renders the kept rows as `N|TEXT` with one row per gap naming the log.
pub fn render(rows: &[&str], keep: &BTreeSet<usize>, log: Option<&Path>) -> String {
    let mut out = String::new();
    let mut next = 1;
    let where_ = |a: usize, b: usize| match log {
        Some(p) => format!("read {}:{a}-{b} plain:true", p.display()),
        None => "not shown".to_string(),
    };
    for &k in keep {
        // A gap of one row costs more to name than to show.
        if k == next + 1 {
            let row = rows.get(next - 1).copied().unwrap_or_default();
            out.push_str(&format!("{next}|{}\n", clip(row)));
            next = k;
        }
        if k > next {
            out.push_str(&format!(
                "[… lines {next}-{} cut; {} …]\n",
                k - 1,
                where_(next, k - 1)
            ));
        }
        let row = rows.get(k - 1).copied().unwrap_or_default();
        out.push_str(&format!("{k}|{}\n", clip(row)));
        next = k + 1;
    }
    if next <= rows.len() {
        out.push_str(&format!(
            "[… lines {next}-{} cut; {} …]\n",
            rows.len(),
            where_(next, rows.len())
        ));
    }
    out
}

fn clip(row: &str) -> String {
    if row.chars().count() <= ROW_CHARS {
        return row.to_string();
    }
    let kept: String = row.chars().take(ROW_CHARS).collect();
    format!("{kept}[… {} more chars]", row.chars().count() - ROW_CHARS)
}

/// Shapes a long text: the rows a decider keeps, numbered by line, gaps
/// naming the log. Short text comes back unchanged.
pub fn shape(text: &str, decider: Decider, log: Option<&Path>) -> String {
    if !is_long(text) {
        return text.to_string();
    }
    let rows: Vec<&str> = text.lines().collect();
    let keep = pick(&rows, decider, &|_| false);
    render(&rows, &keep, log)
}

/// The folder for logs: `$XDG_RUNTIME_DIR/nib`, else `nib-logs` in the temp folder.
pub fn log_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d).join("nib"),
        None => std::env::temp_dir().join("nib-logs"),
    }
}

/// Saves the whole output to a new log file (owner-only) and returns its path.
pub fn save_log(name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = log_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    let path = dir.join(format!("{name}.log"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)?;
    f.write_all(bytes)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("row {i}\n")).collect()
    }

    #[test]
    fn failures_bring_their_assertion_details_and_the_frames_at_their_place() {
        let mut t = numbered(600);
        t = t.replace("row 100\n", "thread 'main' panicked at src/main.rs:5:22:\n");
        t = t.replace("row 300\n", "       at /work/pn/src/main.rs:5:22\n");
        t = t.replace("row 310\n", "   at core::panicking::panic_fmt\n");
        t = t.replace("row 400\n", "not ok 12 - parses\n");
        t = t.replace("row 412\n", "  expected: 'a'\n");
        let rows: Vec<&str> = t.lines().collect();
        let keep = pick(&rows, Decider::Keywords, &|_| false);
        for line in [100, 300, 400, 412] {
            assert!(keep.contains(&line), "{line} kept: {keep:?}");
        }
        assert!(
            !keep.contains(&310),
            "the panic machinery's frames are not failures"
        );
        assert_eq!(
            locations("panicked at src/main.rs:5:22: x"),
            vec!["src/main.rs:5:22"]
        );
        assert!(locations("at 10:30 the https://a.b:8080 thing").is_empty());
    }

    #[test]
    fn short_output_is_unchanged() {
        let t = numbered(400);
        assert_eq!(shape(&t, Decider::Keywords, None), t);
    }

    #[test]
    fn keywords_keep_head_tail_and_failures_with_context() {
        let mut t = numbered(1000);
        t = t.replace("row 500\n", "error: row 500 broke\n");
        let rows: Vec<&str> = t.lines().collect();
        let keep = pick(&rows, Decider::Keywords, &|_| false);
        let expected: BTreeSet<usize> = (1..=10).chain(497..=503).chain(971..=1000).collect();
        assert_eq!(keep, expected);
        let out = render(&rows, &keep, Some(Path::new("/l/x.log")));
        assert!(
            out.contains(
                "10|row 10\n[… lines 11-496 cut; read /l/x.log:11-496 plain:true …]\n497|row 497\n"
            ),
            "{out}"
        );
        assert!(out.contains("500|error: row 500 broke\n"));
        assert!(out.ends_with("1000|row 1000\n"));
    }

    #[test]
    fn fixed_keeps_first_100_and_last_200() {
        let t = numbered(1000).replace("row 500\n", "error\n");
        let rows: Vec<&str> = t.lines().collect();
        let keep = pick(&rows, Decider::Fixed, &|_| false);
        let expected: BTreeSet<usize> = (1..=100).chain(801..=1000).collect();
        assert_eq!(keep, expected);
    }

    #[test]
    fn all_clear_summaries_are_not_failures() {
        assert!(!names_failure(
            "test result: ok. 12 passed; 0 failed; 0 ignored"
        ));
        assert!(names_failure("test result: FAILED. 11 passed; 1 failed"));
        assert!(names_failure("make: *** [Makefile:3: all] Error 1"));
        assert!(!names_failure("compiling nib v0.1.0"));
    }

    #[test]
    fn bytes_alone_make_output_long() {
        let t = "x".repeat(MAX_BYTES + 1);
        assert!(is_long(&t));
        let out = shape(&t, Decider::Keywords, None);
        assert!(out.starts_with("1|") && out.contains("more chars"), "{out}");
    }
}
