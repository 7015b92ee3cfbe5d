//! The lines of a real runner's log that a developer must see, picked by a
//! rule per tool (the log's name says the tool: `pytest-v.log`). Written
//! from each tool's own output format, apart from nib's deciders, so the
//! bench measures them against what the tools print rather than against
//! themselves. Logs of other tools name their lines in `must.txt`.

/// The 1-based lines a developer must see in the log `name`, or `None` when
/// no rule covers the tool.
pub fn must_see(name: &str, lines: &[&str]) -> Option<Vec<usize>> {
    let tool = name.split('-').next().unwrap_or_default();
    let picked: Vec<usize> = match tool {
        "pytest" => pytest(lines),
        "jest" => jest(lines),
        "vitest" => vitest(lines),
        "go" => go_test(lines),
        "nextest" => nextest(lines),
        "tsc" => tsc(lines),
        "eslint" => eslint(lines),
        "javac" => javac(lines),
        _ => return None,
    };
    let mut picked = picked;
    picked.sort_unstable();
    picked.dedup();
    Some(picked)
}

fn numbered<'a>(lines: &'a [&'a str]) -> impl Iterator<Item = (usize, &'a str)> + 'a {
    lines.iter().enumerate().map(|(i, l)| (i + 1, *l))
}

/// pytest: each failure's title (`____ test_x ____`), its `E` lines and
/// where it failed (`tests/x.py:8: AssertionError`), the short summary's
/// `FAILED`/`ERROR` lines, `-x`'s stop and the closing counts.
fn pytest(lines: &[&str]) -> Vec<usize> {
    numbered(lines)
        .filter(|(_, l)| {
            let title = l.starts_with("___") && l.ends_with("___") && l.contains(" test");
            let e_line = l.starts_with("E ");
            let place = l.split_once(".py:").is_some_and(|(_, rest)| {
                let (n, what) = rest.split_once(": ").unwrap_or(("", ""));
                !l.starts_with(' ')
                    && !n.is_empty()
                    && n.bytes().all(|b| b.is_ascii_digit())
                    && !what.is_empty()
            });
            let summary = l.starts_with("FAILED ") || l.starts_with("ERROR ");
            let counts = l.starts_with('=')
                && l.ends_with('=')
                && (l.contains(" failed") || l.contains(" error"))
                && l.contains(" in ");
            let stop = l.contains("stopping after");
            title || e_line || place || summary || counts || stop
        })
        .map(|(n, _)| n)
        .collect()
}

/// jest: each failure's title (`● suite › test`), expected and received
/// values and their diff, the marked row of its code frame, the first
/// frame in the project's files, and the summary counts.
fn jest(lines: &[&str]) -> Vec<usize> {
    // jest prints each failure under its suite and again in its closing
    // summary: the last copy is the one to see.
    let mut copies: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for l in lines {
        if l.trim_start().starts_with('●') {
            *copies.entry(l.trim()).or_default() += 1;
        }
    }
    let mut met: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    let mut earlier_copy = false;
    let mut out = Vec::new();
    let mut in_diff = false;
    let mut want_frame = false;
    for (n, l) in numbered(lines) {
        let t = l.trim_start();
        if t.is_empty() {
            continue;
        }
        if t.starts_with('●') {
            let seen = met.entry(l.trim()).or_default();
            *seen += 1;
            earlier_copy = copies.get(l.trim()).is_some_and(|&all| *seen < all);
        } else if !l.starts_with(' ') {
            earlier_copy = false;
        }
        if earlier_copy {
            continue;
        }
        // The diff runs to the code frame (`  12 |`), the stack or the next title.
        let frame_row = t
            .trim_start_matches('>')
            .split('|')
            .next()
            .is_some_and(|c| !c.trim().is_empty() && c.trim().bytes().all(|b| b.is_ascii_digit()));
        if frame_row || t.starts_with("at ") || t.starts_with('●') {
            in_diff = false;
        }
        if t.starts_with('●') && !t.starts_with("● Console") {
            out.push(n);
            want_frame = true;
        } else if t.starts_with("Expected:")
            || t.starts_with("Received:")
            || t.starts_with("- Expected")
            || t.starts_with("+ Received")
        {
            in_diff = t.starts_with("- Expected") || (in_diff && t.starts_with("+ Received"));
            out.push(n);
        } else if (in_diff && (t.starts_with('-') || t.starts_with('+')))
            || (t.starts_with('>') && t.contains('|'))
        {
            out.push(n);
        } else if want_frame
            && t.starts_with("at ")
            && !t.contains("node_modules")
            && t.contains(".js:")
        {
            out.push(n);
            want_frame = false;
        } else if t.starts_with("Tests:") || t.starts_with("Test Suites:") {
            out.push(n);
        }
    }
    out
}

/// vitest: the failed tests' titles (`FAIL  file > suite > test`), the
/// assertion, expected/received and their diff, where it failed (`❯
/// file:line:col` in the project), and the summary counts.
fn vitest(lines: &[&str]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_diff = false;
    for (n, l) in numbered(lines) {
        let t = l.trim_start();
        if t.is_empty() {
            in_diff = false;
            continue;
        }
        let located = t.starts_with('❯') && t.contains(".test.") && !t.contains("node_modules");
        if t.starts_with("FAIL ")
            || t.starts_with("AssertionError")
            || t.starts_with("Error:")
            || located
            || t.starts_with("Test Files")
            || t.starts_with("Tests ")
        {
            out.push(n);
        } else if t.starts_with("- Expected") || t.starts_with("+ Received") {
            in_diff = true;
            out.push(n);
        } else if in_diff && (t.starts_with('-') || t.starts_with('+')) {
            out.push(n);
        }
    }
    out
}

/// go test: each `--- FAIL` line, the messages a failing test printed
/// (`ledger_test.go:41: …`, wherever they were printed: under the test's
/// `=== RUN`/`=== CONT`), and the package's and the run's `FAIL` lines.
fn go_test(lines: &[&str]) -> Vec<usize> {
    let failed: std::collections::HashSet<&str> = lines
        .iter()
        .filter_map(|l| l.trim_start().strip_prefix("--- FAIL: "))
        .filter_map(|r| r.split_whitespace().next())
        .collect();
    let mut out = Vec::new();
    let mut current: Option<&str> = None;
    for (n, l) in numbered(lines) {
        let t = l.trim_start();
        for marker in ["=== RUN", "=== CONT", "=== NAME", "=== PAUSE"] {
            if let Some(rest) = t.strip_prefix(marker) {
                current = rest.split_whitespace().next();
            }
        }
        let message = t.split_once("_test.go:").is_some_and(|(_, rest)| {
            rest.split_once(':')
                .is_some_and(|(num, _)| num.bytes().all(|b| b.is_ascii_digit()))
        });
        if t.starts_with("--- FAIL")
            || l.starts_with("FAIL")
            || (message && current.is_some_and(|c| failed.contains(c)))
        {
            out.push(n);
        }
    }
    out
}

/// cargo nextest: each `FAIL [` line, the panic and its message line, an
/// assertion's `left:`/`right:`, and the summary.
fn nextest(lines: &[&str]) -> Vec<usize> {
    let mut out = Vec::new();
    for (n, l) in numbered(lines) {
        let t = l.trim_start();
        if t.starts_with("FAIL [")
            || t.starts_with("Summary [")
            || t.starts_with("left:")
            || t.starts_with("right:")
        {
            out.push(n);
        }
        if t.contains("panicked at") {
            out.push(n);
            out.push(n + 1);
        }
    }
    out.retain(|&n| n <= lines.len());
    out
}

/// tsc: each error (`src/a.ts(3,5): error TS2322: …`) with the indented
/// lines that continue it, and the error count when printed.
fn tsc(lines: &[&str]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_error = false;
    for (n, l) in numbered(lines) {
        if l.contains("): error TS") {
            in_error = true;
            out.push(n);
        } else if in_error && l.starts_with("  ") {
            out.push(n);
        } else {
            in_error = false;
        }
        if l.starts_with("Found ") && l.contains(" error") {
            out.push(n);
        }
    }
    out
}

/// eslint (stylish): each error row, the file line above it, and the
/// problem count.
fn eslint(lines: &[&str]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut file: Option<usize> = None;
    for (n, l) in numbered(lines) {
        if !l.is_empty() && !l.starts_with(' ') && !l.starts_with('✖') {
            file = Some(n);
        }
        let mut words = l.split_whitespace();
        let place = words.next().is_some_and(|p| {
            p.split_once(':').is_some_and(|(a, b)| {
                a.bytes().all(|c| c.is_ascii_digit()) && b.bytes().all(|c| c.is_ascii_digit())
            })
        });
        if l.starts_with(' ') && place && words.next() == Some("error") {
            out.push(n);
            out.extend(file);
        }
        if l.starts_with('✖') {
            out.push(n);
        }
    }
    out
}

/// javac: each error line, the source line and caret under it, the
/// `symbol:`/`location:`/`found:`/`required:` lines that follow, and the
/// error count.
fn javac(lines: &[&str]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut after_error: Option<usize> = None;
    for (n, l) in numbered(lines) {
        if l.contains(".java:") && l.contains(": error:") {
            out.push(n);
            after_error = Some(n);
            continue;
        }
        if let Some(e) = after_error {
            let t = l.trim_start();
            if n <= e + 2 {
                out.push(n);
                continue;
            }
            if ["symbol:", "location:", "found:", "required:", "reason:"]
                .iter()
                .any(|w| t.starts_with(w))
            {
                out.push(n);
                continue;
            }
            after_error = None;
        }
        let t = l.trim();
        if (t.ends_with(" error") || t.ends_with(" errors"))
            && t.split_whitespace()
                .next()
                .is_some_and(|c| c.bytes().all(|b| b.is_ascii_digit()))
        {
            out.push(n);
        }
    }
    out
}
