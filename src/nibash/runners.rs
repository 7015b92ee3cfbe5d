//! What real test runners and compilers print, row by row: which rows say
//! a test passed (they never count as failures, whatever words a test's
//! name holds), which rows carry a failure's details (pytest's `E` rows and
//! section titles, jest's and vitest's expected/received and code frames,
//! javac's `symbol:`/`location:` lines, go test's messages of failing
//! tests), and where a file's rows begin (eslint's file lines).
//!
//! The shapes were taken from real runs (`bench/corpus/`): pytest (`-v`,
//! `-q`, `-x`, `-rA`), unittest, jest, vitest, node's test runner, go test
//! `-v`, cargo test and nextest, tsc, eslint, javac, make with gcc. Pure
//! functions; which rows stay is [`super::cut`]'s.

use std::collections::{HashMap, HashSet};

/// How a row reads to the keyword decider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    /// A passing (or skipped) test, or a failure's first copy that the
    /// runner prints again later: never a failure row nor its context.
    Pass,
    /// A failure's detail: kept for itself, before any context row.
    Detail,
    /// Nothing a runner marks.
    Plain,
}

/// What a whole output says before its rows are judged: the go tests that
/// failed (their messages print under `=== RUN`, far from `--- FAIL`).
#[derive(Debug, Default)]
pub struct Outline {
    failed_go_tests: HashSet<String>,
    /// jest prints each failure under its suite and again in a closing
    /// summary: how often each `●` title appears.
    titles: HashMap<String, u32>,
}

impl Outline {
    /// Reads the failing tests' names out of `rows`.
    pub fn of(rows: &[&str]) -> Outline {
        let failed_go_tests = rows
            .iter()
            .filter_map(|r| r.trim_start().strip_prefix("--- FAIL: "))
            .filter_map(|rest| rest.split_whitespace().next())
            .map(str::to_string)
            .collect();
        let mut titles: HashMap<String, u32> = HashMap::new();
        for r in rows {
            let t = r.trim();
            if t.starts_with('●') {
                *titles.entry(t.to_string()).or_default() += 1;
            }
        }
        Outline {
            failed_go_tests,
            titles,
        }
    }
}

/// Reads rows in order, keeping what a row's kind depends on (the go test
/// whose output is printing).
#[derive(Debug, Default)]
pub struct Reader {
    go_test: Option<String>,
    /// Inside a jest/vitest diff (after `- Expected`): `-`/`+` rows are details.
    in_diff: bool,
    /// After a jest failure title: the first `at` row naming a file of the
    /// project is its location.
    want_location: bool,
    /// `●` titles met so far, and whether the rows now belong to a failure
    /// printed again later (its first copy says nothing more).
    titles_met: HashMap<String, u32>,
    repeated: bool,
}

impl Reader {
    /// The kind of the next row.
    pub fn kind(&mut self, outline: &Outline, row: &str) -> RowKind {
        let t = row.trim_start();
        // go test: which test prints now.
        for marker in ["=== RUN ", "=== CONT ", "=== NAME ", "=== PAUSE "] {
            if let Some(name) = t.strip_prefix(marker) {
                self.go_test = Some(name.trim().to_string());
                return RowKind::Pass;
            }
        }
        if is_pass(row, t) {
            return RowKind::Pass;
        }
        if t.starts_with('●') {
            let title = row.trim();
            let met = self.titles_met.entry(title.to_string()).or_default();
            *met += 1;
            self.repeated = outline.titles.get(title).is_some_and(|&all| *met < all);
        } else if self.repeated && !row.starts_with(' ') && !t.is_empty() {
            self.repeated = false;
        }
        if self.repeated {
            return RowKind::Pass;
        }
        if t.is_empty() {
            return RowKind::Plain;
        }
        // A jest/vitest diff runs from `- Expected` to the code frame, the
        // stack or the next failure; blank rows do not end it.
        if self.in_diff {
            if t.starts_with('-') || t.starts_with('+') {
                return RowKind::Detail;
            }
            let frame = t.split('|').next().is_some_and(|n| {
                let n = n.trim().trim_start_matches('>').trim();
                !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
            });
            if frame || t.starts_with("at ") || t.starts_with('●') || !row.starts_with(' ') {
                self.in_diff = false;
            }
        }
        if t.starts_with("- Expected") {
            self.in_diff = true;
            return RowKind::Detail;
        }
        if t.starts_with('●') || t.starts_with("FAIL ") {
            self.want_location = true;
            return RowKind::Detail;
        }
        if self.want_location && t.starts_with("at ") && t.contains(':') {
            if !t.contains("node_modules") && !t.contains("node:internal") {
                self.want_location = false;
                return RowKind::Detail;
            }
            return RowKind::Plain;
        }
        if is_go_message(t) {
            // A test's own message: a failure's detail when that test
            // failed, else the chatter of one that passed.
            let failed = self
                .go_test
                .as_ref()
                .is_some_and(|n| outline.failed_go_tests.contains(n));
            return if failed {
                RowKind::Detail
            } else {
                RowKind::Pass
            };
        }
        if is_detail(row, t) {
            return RowKind::Detail;
        }
        RowKind::Plain
    }
}

/// A row that says a test passed or was skipped.
fn is_pass(row: &str, t: &str) -> bool {
    // pytest -v puts the outcome after the test id (`… PASSED   [ 3%]`),
    // -rA before it; a failure's message may quote the word.
    let pytest_outcome = |word: &str| {
        row.split_once(word).is_some_and(|(id, rest)| {
            id.contains("::")
                && !id.contains(' ')
                && (rest.trim().is_empty() || rest.trim_start().starts_with(['[', '(']))
        })
    };
    // pytest -v, -rA; unittest; cargo test; go test; jest/vitest; nextest; TAP.
    row.ends_with(" ... ok")
        || pytest_outcome(" PASSED")
        || pytest_outcome(" SKIPPED")
        || pytest_outcome(" XFAIL")
        || t.starts_with("PASSED ")
        || t.starts_with("--- PASS")
        || t.starts_with("--- SKIP")
        || t.starts_with("ok  \t")
        || t.starts_with("ok ")
            && !row.starts_with("ok  ")
            && t.split_whitespace()
                .nth(1)
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        || t.starts_with('✓')
        || t.starts_with('√')
        || t.starts_with("PASS [")
        || t.starts_with("PASS ")
}

/// `    cart_test.go:41: total = 4, want 5`: a go test's message.
fn is_go_message(t: &str) -> bool {
    let Some((file, rest)) = t.split_once(':') else {
        return false;
    };
    file.ends_with("_test.go")
        && rest
            .split_once(':')
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A row that carries a failure's detail in one runner's shape.
fn is_detail(row: &str, t: &str) -> bool {
    // pytest: `E       assert 4 == 5`, `>       assert total == 5`, and a
    // failure's title `____ test_total ____`.
    if row.starts_with("E  ") || row == "E" {
        return true;
    }
    if row.starts_with(">  ") && row.len() > 4 {
        return true;
    }
    if row.len() > 8 && row.starts_with("___") && row.ends_with("___") && row.contains(' ') {
        return true;
    }
    // pytest: where each frame of a failure is (`tests/x.py:15: in helper`).
    if !row.starts_with(char::is_whitespace)
        && row.split_once(".py:").is_some_and(|(_, rest)| {
            rest.split_once(": ")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    {
        return true;
    }
    // jest/vitest: `Expected: 5`, `Received: 4`, a code frame's marked row.
    if t.starts_with("Expected:") || t.starts_with("Received:") || t.starts_with("+ Received") {
        return true;
    }
    if let Some(rest) = t.strip_prefix("> ")
        && rest.trim_start().split('|').next().is_some_and(|n| {
            let n = n.trim();
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        })
    {
        return true;
    }
    // vitest: `❯ src/cart.test.ts:13:15`.
    if t.starts_with('❯') && t.contains(':') {
        return true;
    }
    // javac: the lines under an error.
    ["symbol:", "location:", "found:", "required:", "reason:"]
        .iter()
        .any(|w| t.starts_with(w))
}

/// eslint's stylish format heads a file's rows with its path alone on a
/// row (`/work/app/src/cart.js`).
pub fn is_path_header(row: &str) -> bool {
    row.starts_with('/')
        && !row.contains(' ')
        && row.rsplit('/').next().is_some_and(|f| f.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<RowKind> {
        let rows: Vec<&str> = text.lines().collect();
        let outline = Outline::of(&rows);
        let mut r = Reader::default();
        rows.iter().map(|row| r.kind(&outline, row)).collect()
    }

    #[test]
    fn passing_rows_are_passes_whatever_the_test_is_called() {
        use RowKind::*;
        assert_eq!(
            kinds(
                "tests/test_parse.py::test_error[ParseError-3] PASSED    [ 1%]\n\
                 test parse::error_case ... ok\n\
                 --- PASS: TestErrorPath (0.00s)\n\
                 \x20 ✓ reports an Error (3 ms)\n\
                 ok 12 - error text\n\
                 not ok 13 - error text"
            ),
            vec![Pass, Pass, Pass, Pass, Pass, Plain]
        );
    }

    #[test]
    fn a_failure_quoting_a_pass_word_is_no_pass() {
        use RowKind::*;
        assert_eq!(
            kinds(
                "FAILED tests/test_a.py::test_status - AssertionError: assert 'x PASSED' == 'FAILED'\n\
                 tests/test_a.py::test_ok PASSED                                   [ 50%]\n\
                 tests/test_a.py::test_slow SKIPPED (slow)                          [ 60%]"
            ),
            [Plain, Pass, Pass]
        );
    }

    #[test]
    fn a_go_message_is_a_detail_when_its_test_failed_else_a_pass() {
        use RowKind::*;
        let text = "=== RUN   TestA\n    a_test.go:10: got 4, want 5\n=== RUN   TestB\n    b_test.go:3: fine\n--- FAIL: TestA (0.00s)\n--- PASS: TestB (0.00s)";
        assert_eq!(kinds(text), vec![Pass, Detail, Pass, Pass, Plain, Pass]);
    }

    #[test]
    fn runner_details_are_details() {
        use RowKind::*;
        assert_eq!(
            kinds(
                "E       assert 4 == 5\n\
                 ______________ test_total ______________\n\
                 \x20   Expected: 5\n\
                 \x20   > 13 |   expect(total).toBe(5);\n\
                 \x20 symbol:   variable totl\n\
                 \x20   - Expected  - 1\n\
                 \x20   -   \"b\": 2,\n\
                 \x20   +   \"b\": 3,\n\
                 \n\
                 \x20   at Object.<anonymous> (node_modules/x.js:1:1)\n\
                 plain"
            ),
            vec![
                Detail, Detail, Detail, Detail, Detail, Detail, Detail, Detail, Plain, Plain, Plain
            ]
        );
    }
}
