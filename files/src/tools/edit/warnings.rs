//! Warnings an edit still applies with: a range that looks one line off,
//! brackets that stop balancing, and a JSON, YAML or TOML file that stops
//! parsing or (JSON) repeats a key.

use std::path::Path;

use super::apply::Op;
use nib_text::filekind;
use nib_text::text::Text;
use nib_text::validate;

/// The replacement repeats the line just outside its range: the agent probably
/// meant a range one line wider.
pub fn one_off(base: &Text, ops: &[Op]) -> Vec<String> {
    let mut out = Vec::new();
    for op in ops
        .iter()
        .filter(|o| o.sent && o.end > o.start && !o.rows.is_empty())
    {
        let before = op.start.checked_sub(1).and_then(|i| base.lines.get(i));
        let after = base.lines.get(op.end);
        let same = |a: &str, b: &str| !a.trim().is_empty() && a.trim() == b.trim();
        if let (Some(b), Some(first)) = (before, op.rows.first())
            && same(b, first)
        {
            out.push(format!(
                    "[warning: the first new row repeats line {}, which is outside the range {}-{} and stays; the range may be one line off]",
                    op.start,
                    op.start + 1,
                    op.end
                ));
        }
        if let (Some(a), Some(last)) = (after, op.rows.last())
            && same(a, last)
        {
            out.push(format!(
                    "[warning: the last new row repeats line {}, which is outside the range {}-{} and stays; the range may be one line off]",
                    op.end + 1,
                    op.start + 1,
                    op.end
                ));
        }
    }
    out
}

fn balance<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) -> [i64; 3] {
    let mut b = [0i64; 3];
    for line in lines {
        // Brackets are ASCII: bytes suffice, and never occur inside a UTF-8 sequence.
        for c in line.as_ref().bytes() {
            match c {
                b'(' => b[0] += 1,
                b')' => b[0] -= 1,
                b'[' => b[1] += 1,
                b']' => b[1] -= 1,
                b'{' => b[2] += 1,
                b'}' => b[2] -= 1,
                _ => {}
            }
        }
    }
    b
}

/// Brackets the edit unbalances: the balance of the new rows against the
/// lines they replace (only the changed lines are scanned).
pub fn brackets(current: &Text, ops: &[Op]) -> Option<String> {
    let mut delta = [0i64; 3];
    for op in ops {
        let added = balance(&op.rows);
        let removed = balance(current.lines.range(op.start..op.end));
        for k in 0..3 {
            delta[k] += added[k] - removed[k];
        }
    }
    if delta == [0, 0, 0] {
        return None;
    }
    let names = [("(", ")"), ("[", "]"), ("{", "}")];
    let mut parts = Vec::new();
    for (k, (open, close)) in names.iter().enumerate() {
        if delta[k] > 0 {
            parts.push(format!("{} more {open} than {close}", delta[k]));
        } else if delta[k] < 0 {
            parts.push(format!("{} more {close} than {open}", -delta[k]));
        }
    }
    Some(format!(
        "[warning: brackets no longer balance as before: the edit adds {}]",
        parts.join(", ")
    ))
}

/// A JSON, YAML or TOML file that parsed before and does not now, or JSON
/// that now repeats a key.
pub fn syntax(path: &Path, before: Option<&str>, after: &str) -> Option<String> {
    let kind = filekind::syntax(path)?;
    let was_sound = before.is_none_or(|b| validate::check(kind, b).is_none());
    if !was_sound {
        return None;
    }
    if let Some(e) = validate::check(kind, after) {
        return Some(format!(
            "[warning: this {} no longer parses: line {}: {}]",
            validate::name(kind),
            e.line,
            e.message
        ));
    }
    if kind == filekind::Syntax::Json {
        let had_dup = before.is_some_and(|b| validate::json_duplicate_key(b).is_some());
        if !had_dup && let Some(e) = validate::json_duplicate_key(after) {
            return Some(format!("[warning: line {}: {}]", e.line, e.message));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracket_changes_are_named() {
        let a = Text::decode(b"f(x) {\n}\n");
        let cut_close = Op {
            start: 1,
            end: 2,
            rows: vec![],
            sent: true,
            anchors: vec![2],
            hunk: 0,
        };
        assert!(
            brackets(&a, &[cut_close])
                .unwrap()
                .contains("1 more { than }")
        );
        let same = Op {
            start: 1,
            end: 2,
            rows: vec!["}".into()],
            sent: true,
            anchors: vec![2],
            hunk: 0,
        };
        assert_eq!(brackets(&a, &[same]), None);
    }

    #[test]
    fn one_off_ranges_are_spotted() {
        let base = Text::decode(b"a\nb\nc\nd\n");
        let op = Op {
            start: 1,
            end: 2,
            rows: vec!["a".into(), "B".into()],
            sent: true,
            anchors: vec![2],
            hunk: 0,
        };
        assert_eq!(one_off(&base, &[op]).len(), 1);
        let op = Op {
            start: 1,
            end: 2,
            rows: vec!["B".into()],
            sent: true,
            anchors: vec![2],
            hunk: 0,
        };
        assert!(one_off(&base, &[op]).is_empty());
    }

    #[test]
    fn syntax_warnings_only_for_files_that_were_sound() {
        let p = Path::new("a.json");
        assert!(syntax(p, Some("{}"), "{").is_some());
        assert!(syntax(p, Some("{"), "{{").is_none());
        assert!(
            syntax(p, Some("{\"a\":1}"), "{\"a\":1,\"a\":2}")
                .unwrap()
                .contains("repeated")
        );
        assert!(syntax(Path::new("a.txt"), None, "{").is_none());
    }
}
