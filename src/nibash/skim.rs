//! `skim`: a long file (a log, a test report) read for what `expect` asks,
//! shaped like nibash's long output, as plain `N|TEXT` rows (never anchors).
//!
//! Rows that say how a build or test run went are recognised without any
//! model, for cargo, pytest, go test, jest/vitest and make: summaries,
//! failing test names, panics and assertion messages, compiler errors.
//! Skimming the same file again with the same expect shows only lines added
//! since; with another expect, rows already shown are left out. The memory
//! is per agent (`seen::Skims`, kept in its state; its methods are here).

use std::collections::BTreeSet;
use std::path::Path;

use super::cut;
pub use nib_files::seen::Skims;

/// Rows that report how a build or test run went.
pub fn is_summary(row: &str) -> bool {
    let t = row.trim_start();
    let lower = t.to_ascii_lowercase();
    // cargo
    t.starts_with("test result:")
        || t.starts_with("failures:")
        || (t.starts_with("---- ") && t.ends_with(" ----"))
        || t.starts_with("error[")
        || t.starts_with("error:")
        || t.contains("panicked at")
        || t.starts_with("Finished ")
        // pytest
        || (t.starts_with("===") && (lower.contains("passed") || lower.contains("failed") || lower.contains("error") || lower.contains("summary")))
        || t.starts_with("FAILED ")
        || t.starts_with("ERROR ")
        || t.starts_with("E   ")
        // go test
        || t.starts_with("--- FAIL")
        || t.starts_with("FAIL")
        || t.starts_with("ok  ")
        || t.starts_with("PASS")
        // jest / vitest
        || t.starts_with("Tests:")
        || t.starts_with("Test Suites:")
        || t.starts_with("Test Files")
        || t.starts_with("●")
        || t.starts_with("✕")
        || t.starts_with("×")
        || t.starts_with("FAIL ")
        // make
        || t.starts_with("make: ***")
        || (t.starts_with("make[") && t.contains("Error"))
}

/// Whether the rows say the run failed, passed, or neither.
fn verdict(rows: &[&str]) -> &'static str {
    let failed = rows.iter().any(|r| {
        let t = r.trim_start();
        t.starts_with("test result: FAILED")
            || t.starts_with("--- FAIL")
            || t.starts_with("FAIL")
            || t.starts_with("FAILED ")
            || t.starts_with("make: ***")
            || t.starts_with("error[")
            || t.starts_with("error:")
            || (t.starts_with("Tests:") && t.contains("failed"))
            || (t.starts_with("===") && t.contains(" failed"))
    });
    if failed {
        return "failed: the rows below name what failed";
    }
    let passed = rows.iter().any(|r| {
        let t = r.trim_start();
        t.starts_with("test result: ok")
            || t.starts_with("ok  ")
            || t == "PASS"
            || (t.starts_with("Tests:") && t.contains("passed"))
            || (t.starts_with("===") && t.contains(" passed"))
            || t.starts_with("Finished ")
    });
    if passed {
        "passed: no failure is reported"
    } else {
        "no build or test summary found"
    }
}

/// Skims `text` (the file at `path`) for `expect`, remembering in the
/// agent's `skims` what was shown.
pub fn skim(skims: &mut Skims, path: &Path, shown_path: &str, text: &str, expect: &str) -> String {
    let rows: Vec<&str> = text.lines().collect();
    let n = rows.len();
    let mem = skims.files.entry(path.to_path_buf()).or_default();
    let key = expect.trim().to_ascii_lowercase();
    let from = mem.read_to.get(&key).copied().unwrap_or(0).min(n);
    if from == n && n > 0 && mem.read_to.contains_key(&key) {
        return format!("{shown_path}: no lines added since you skimmed it for this ({n} lines)\n");
    }
    let repeat = mem.read_to.contains_key(&key);
    let words = cut::expect_words(&key, &rows[from..]);
    let relevant = |row: &str| is_summary(row) || cut::has_word(row, &words);
    let candidates: Vec<usize> = (from + 1..=n)
        .filter(|k| repeat || !mem.shown.contains(k))
        .collect();
    let chosen: BTreeSet<usize> = if candidates.len() <= cut::MAX_ROWS
        && candidates
            .iter()
            .map(|k| rows[k - 1].len() + 1)
            .sum::<usize>()
            <= cut::MAX_BYTES
    {
        candidates.into_iter().collect()
    } else {
        let window: Vec<&str> = rows[from..].to_vec();
        cut::pick(&window, cut::Decider::Keywords, &relevant)
            .into_iter()
            .map(|k| k + from)
            .filter(|k| repeat || !mem.shown.contains(k))
            .collect()
    };
    mem.shown.extend(chosen.iter().copied());
    mem.read_to.insert(key, n);
    let mut out = format!(
        "[{shown_path}: {n} lines{}; {}]\n",
        if from > 0 {
            format!(", {} new since you last skimmed it for this", n - from)
        } else {
            String::new()
        },
        verdict(&rows[from..])
    );
    let mut next = from + 1;
    for &k in &chosen {
        if k > next {
            out.push_str(&format!("[… lines {next}-{} not shown …]\n", k - 1));
        }
        out.push_str(&format!("{k}|{}\n", rows[k - 1]));
        next = k + 1;
    }
    if next <= n {
        out.push_str(&format!("[… lines {next}-{n} not shown …]\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cargo_log(failing: bool) -> String {
        let mut t = String::new();
        for i in 0..900 {
            t.push_str(&format!("test tests::case_{i} ... ok\n"));
        }
        if failing {
            t.push_str(
                "test tests::broken ... FAILED\n\nfailures:\n\n---- tests::broken stdout ----\n",
            );
            t.push_str(
                "thread 'tests::broken' panicked at src/lib.rs:10:5:\nassertion failed: 1 == 2\n\n",
            );
            t.push_str("test result: FAILED. 900 passed; 1 failed; 0 ignored\n");
        } else {
            t.push_str("test result: ok. 900 passed; 0 failed; 0 ignored\n");
        }
        t
    }

    #[test]
    fn a_failing_cargo_run_shows_the_failure_and_its_reason() {
        let mut s = Skims::default();
        let out = skim(
            &mut s,
            Path::new("/l"),
            "l",
            &cargo_log(true),
            "which tests failed and why",
        );
        assert!(out.starts_with("[l: 909 lines; failed"), "{out}");
        assert!(out.contains("|---- tests::broken stdout ----"), "{out}");
        assert!(out.contains("|assertion failed: 1 == 2"), "{out}");
        assert!(out.contains("|test result: FAILED."), "{out}");
        assert!(out.lines().count() < 200, "{out}");
    }

    #[test]
    fn a_passing_run_says_so() {
        let mut s = Skims::default();
        let out = skim(
            &mut s,
            Path::new("/l"),
            "l",
            &cargo_log(false),
            "did the build pass",
        );
        assert!(out.contains("passed: no failure"), "{out}");
        assert!(out.contains("|test result: ok."), "{out}");
    }

    #[test]
    fn the_same_expect_shows_only_new_lines_and_another_leaves_out_shown_rows() {
        let mut s = Skims::default();
        let first = "a\nb\n";
        skim(&mut s, Path::new("/l"), "l", first, "did it pass");
        let again = skim(&mut s, Path::new("/l"), "l", first, "did it pass");
        assert!(again.contains("no lines added"), "{again}");
        let grown = "a\nb\nc\n";
        let out = skim(&mut s, Path::new("/l"), "l", grown, "did it pass");
        assert!(out.contains("3|c") && !out.contains("1|a"), "{out}");
        let other = skim(&mut s, Path::new("/l"), "l", "a\nb\nc\nd\n", "what else");
        assert!(other.contains("4|d") && !other.contains("1|a"), "{other}");
    }

    #[test]
    fn go_pytest_jest_and_make_summaries_are_recognised() {
        for row in [
            "--- FAIL: TestParse (0.00s)",
            "FAILED tests/test_a.py::test_x - AssertionError",
            "=========== 1 failed, 3 passed in 0.12s ===========",
            "Tests:       1 failed, 4 passed, 5 total",
            "make: *** [Makefile:4: test] Error 2",
            "ok  \texample.com/pkg\t0.01s",
        ] {
            assert!(is_summary(row), "{row}");
        }
        assert!(!is_summary("compiling foo"));
    }
}
