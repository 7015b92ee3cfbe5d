//! The applier: hunks checked against a file's lines and turned into splices.
//!
//! [`plan`] resolves each hunk against the text the agent saw (its numbering):
//! targets become half-open line spans, `~` checks and `-` rows are compared,
//! block ends are found, SUB's text is located. It also lists the lines each
//! hunk anchors on, so the caller can check them against what was seen.
//! [`splice`] applies planned ops to a text and reports where the new rows
//! landed. Both are pure: no files, no state. The edit module decides which
//! version is the base, rebases ops onto the current text and writes.

use super::patch::{Hunk, Target};
use nib_text::text::Text;

/// One splice, in 0-based line indices of the base text: replace lines
/// `start..end` with `rows` (an insertion when `start == end`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// First replaced line (0-based).
    pub start: usize,
    /// One past the last replaced line.
    pub end: usize,
    /// The new rows.
    pub rows: Vec<String>,
    /// The rows are exactly what the agent sent (not built by nib, as SUB's are).
    pub sent: bool,
    /// Lines (1-based) this op anchors on: they must have been seen.
    pub anchors: Vec<usize>,
    /// Index of the hunk in its section.
    pub hunk: usize,
}

/// What a hunk's checks found wrong, or where it cannot apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A line number past the end.
    OutOfRange {
        /// The hunk's line in the patch.
        patch_line: usize,
        /// The line asked for.
        line: usize,
        /// Lines in the file.
        len: usize,
    },
    /// A `~` check or `-` row does not match.
    Mismatch {
        /// The hunk's line in the patch.
        patch_line: usize,
        /// The file line that differs.
        line: usize,
        /// What the patch expected.
        expected: String,
    },
    /// SUB's text is not once on its line; `found` is the single line
    /// elsewhere in the file holding it, if there is one.
    SubNotOnLine {
        /// The hunk's line in the patch.
        patch_line: usize,
        /// The line SUB named.
        line: usize,
        /// The text.
        old: String,
        /// Times it occurs on that line.
        on_line: usize,
        /// The one other line that holds it, if exactly one does.
        found: Option<usize>,
    },
    /// Two hunks touch the same lines.
    Overlap {
        /// The first hunk's line in the patch.
        first: usize,
        /// The second hunk's line in the patch.
        second: usize,
    },
}

/// What planning asks of its caller: whether SUB may be relocated, and where
/// a block ends (the syntax tree where the language has one).
pub trait SubPolicy {
    /// May hunk `hunk` (named line `named`) apply on `found` instead?
    fn allow(&self, hunk: usize, named: usize, found: usize) -> bool;

    /// The last line (1-based) of the block starting at `line`; by
    /// indentation unless the caller knows the language.
    fn block_end(&self, text: &Text, line: usize) -> usize {
        block_end(&text.lines, line)
    }
}

/// The planned ops, sorted, and notes about what was forgiven.
#[derive(Debug, Default)]
pub struct Plan {
    /// Ops sorted by position.
    pub ops: Vec<Op>,
    /// Lines confirmed by `~` checks or matching `-` rows (count as seen).
    pub confirmed: Vec<usize>,
    /// Notes for the answer.
    pub notes: Vec<String>,
}

fn is_closer(t: &str) -> bool {
    let t = t.trim();
    !t.is_empty()
        && (t.chars().all(|c| matches!(c, '}' | ')' | ']' | ';' | ','))
            || t == "end"
            || t.starts_with("} else")
            || t.starts_with("};")
            || t.starts_with("})"))
}

/// The last line (1-based) of the block starting at `start`, by indentation:
/// following lines indented deeper (blank lines inside included), plus a
/// closing line at the block's own indentation.
pub fn block_end(lines: &nib_text::text::Lines, start: usize) -> usize {
    let Some(first) = lines.get(start - 1) else {
        return start;
    };
    let Some(base) = nib_text::outline::indent(first) else {
        return start;
    };
    let mut end = start;
    let mut i = start; // 0-based index of the next line
    while i < lines.len() {
        match nib_text::outline::indent(&lines[i]) {
            None => {}
            Some(n) if n > base => end = i + 1,
            Some(n) if n == base && is_closer(&lines[i]) => {
                end = i + 1;
                break;
            }
            Some(_) => break,
        }
        i += 1;
    }
    end
}

fn starts_with_loosely(line: &str, expected: &str) -> bool {
    line.trim_start()
        .starts_with(expected.trim_start().trim_end())
}

/// `n` when it names a line of a `len`-line text.
fn in_range(len: usize, patch_line: usize, n: usize) -> Result<usize, Problem> {
    if n == 0 || n > len {
        Err(Problem::OutOfRange {
            patch_line,
            line: n,
            len,
        })
    } else {
        Ok(n)
    }
}

/// Plans a section's hunks against `text` (the version the agent saw).
pub fn plan(text: &Text, hunks: &[Hunk], subs: &dyn SubPolicy) -> Result<Plan, Problem> {
    let len = text.len();
    let mut plan = Plan::default();
    let line = |n: usize| text.line(n).unwrap_or("");
    let check_line = |patch_line: usize, n: usize| in_range(len, patch_line, n);
    for (idx, hunk) in hunks.iter().enumerate() {
        let patch_line = hunk.patch_line();
        match hunk {
            Hunk::Put {
                target,
                checks,
                minus,
                rows,
                ..
            } => {
                let op = resolve_target(*target, text, patch_line, idx, subs)?;
                verify(text, &op, checks, minus, patch_line, &mut plan.confirmed)?;
                plan.ops.push(Op {
                    rows: rows.clone(),
                    sent: true,
                    ..op
                });
            }
            Hunk::Cut {
                target,
                checks,
                minus,
                ..
            } => {
                let op = resolve_target(*target, text, patch_line, idx, subs)?;
                verify(text, &op, checks, minus, patch_line, &mut plan.confirmed)?;
                plan.ops.push(op);
            }
            Hunk::Sub { at, old, rows, .. } => {
                check_line(patch_line, *at)?;
                let on_line = line(*at).matches(old.as_str()).count();
                let target_line = if on_line == 1 {
                    *at
                } else {
                    let holders: Vec<usize> = (1..=len)
                        .filter(|&n| n != *at && line(n).contains(old.as_str()))
                        .collect();
                    let single = (holders.len() == 1
                        && line(holders[0]).matches(old.as_str()).count() == 1)
                        .then(|| holders[0]);
                    // The documented tolerance: the nearest line within 2
                    // that holds OLD once, when no other is as near — even
                    // if OLD also occurs further away.
                    let near: Vec<usize> = holders
                        .iter()
                        .copied()
                        .filter(|&n| {
                            n.abs_diff(*at) <= 2 && line(n).matches(old.as_str()).count() == 1
                        })
                        .collect();
                    let nearest = near
                        .iter()
                        .copied()
                        .min_by_key(|&n| n.abs_diff(*at))
                        .filter(|&n| {
                            near.iter()
                                .filter(|&&m| m.abs_diff(*at) == n.abs_diff(*at))
                                .count()
                                == 1
                        });
                    let candidate = nearest.or(single);
                    match candidate {
                        Some(found) if on_line == 0 && subs.allow(idx, *at, found) => {
                            plan.notes.push(format!(
                                "SUB {at}: \"{old}\" is on line {found}, not {at}; applied there"
                            ));
                            found
                        }
                        _ => {
                            return Err(Problem::SubNotOnLine {
                                patch_line,
                                line: *at,
                                old: old.clone(),
                                on_line,
                                found: candidate,
                            });
                        }
                    }
                };
                let current = line(target_line);
                let replacement = rows.join("\n");
                let new_line = current.replacen(old.as_str(), &replacement, 1);
                plan.ops.push(Op {
                    start: target_line - 1,
                    end: target_line,
                    rows: new_line.split('\n').map(str::to_string).collect(),
                    sent: false,
                    anchors: vec![target_line],
                    hunk: idx,
                });
            }
        }
    }
    plan.ops.sort_by_key(|o| (o.start, o.end, o.hunk));
    for pair in plan.ops.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let a_replaces = a.end > a.start;
        if b.start < a.end || (a_replaces && b.start == a.start && b.end > b.start) {
            let first = hunks[a.hunk.min(b.hunk)].patch_line();
            let second = hunks[a.hunk.max(b.hunk)].patch_line();
            return Err(Problem::Overlap { first, second });
        }
    }
    Ok(plan)
}

fn resolve_target(
    target: Target,
    text: &Text,
    patch_line: usize,
    hunk: usize,
    ctx: &dyn SubPolicy,
) -> Result<Op, Problem> {
    let len = text.len();
    let in_range = |n: usize| in_range(len, patch_line, n);
    let op = |start: usize, end: usize, anchors: Vec<usize>| Op {
        start,
        end,
        rows: Vec::new(),
        sent: true,
        anchors,
        hunk,
    };
    Ok(match target {
        Target::Range(a, b) => {
            in_range(a)?;
            in_range(b)?;
            op(a - 1, b, if a == b { vec![a] } else { vec![a, b] })
        }
        Target::Block(n) => {
            in_range(n)?;
            let end = ctx.block_end(text, n).max(n);
            op(n - 1, end, vec![n])
        }
        Target::Before(n) => {
            in_range(n)?;
            op(n - 1, n - 1, vec![n])
        }
        Target::After(n) => {
            in_range(n)?;
            op(n, n, vec![n])
        }
        Target::AfterBlock(n) => {
            in_range(n)?;
            let end = ctx.block_end(text, n).max(n);
            op(end, end, vec![n])
        }
        Target::End => op(len, len, Vec::new()),
    })
}

fn verify(
    text: &Text,
    op: &Op,
    checks: &[String],
    minus: &[String],
    patch_line: usize,
    confirmed: &mut Vec<usize>,
) -> Result<(), Problem> {
    let first = op.start + 1;
    let last = op.end.max(op.start + 1);
    let anchor_first = op.anchors.first().copied().unwrap_or(first);
    for (k, expected) in checks.iter().enumerate() {
        let n = if k == 0 { anchor_first } else { last };
        let actual = text.line(n).unwrap_or("");
        if !starts_with_loosely(actual, expected) {
            return Err(Problem::Mismatch {
                patch_line,
                line: n,
                expected: expected.clone(),
            });
        }
        confirmed.push(n);
    }
    if !minus.is_empty() {
        let replaced: Vec<&str> = (op.start..op.end)
            .map(|i| text.lines.get(i).unwrap_or(""))
            .collect();
        for (k, m) in minus.iter().enumerate() {
            let n = op.start + k + 1;
            match replaced.get(k) {
                Some(actual) if actual.trim_end() == m.trim_end() => confirmed.push(n),
                _ => {
                    return Err(Problem::Mismatch {
                        patch_line,
                        line: n,
                        expected: m.clone(),
                    });
                }
            }
        }
        if minus.len() != replaced.len() {
            return Err(Problem::Mismatch {
                patch_line,
                line: op.start + minus.len().min(replaced.len()) + 1,
                expected: format!(
                    "{} - rows for {} replaced lines",
                    minus.len(),
                    replaced.len()
                ),
            });
        }
    }
    Ok(())
}

/// Where one op's rows landed in the new text (0-based), and what it replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landed {
    /// First new line (0-based).
    pub start: usize,
    /// Number of new lines.
    pub len: usize,
    /// Lines removed from the old text.
    pub removed: usize,
    /// The rows are the agent's own.
    pub sent: bool,
}

/// Applies sorted, non-overlapping ops to `text`. Where line endings are
/// mixed, untouched lines keep their own, a replaced line keeps the ending
/// of the line it replaces, and other new rows take their neighbour's (the
/// last replaced line's, else the line before, else the first line's).
pub fn splice(text: &Text, ops: &[Op]) -> (Text, Vec<Landed>) {
    let mixed = !text.endings.is_empty();
    let mut lines =
        nib_text::text::Lines::with_capacity(text.lines.byte_len() + 64, text.len() + 16);
    let mut endings = Vec::new();
    let mut landed = Vec::with_capacity(ops.len());
    let mut cursor = 0;
    for op in ops {
        lines.extend(text.lines.range(cursor..op.start));
        if mixed {
            endings.extend((cursor..op.start).map(|i| text.ending_of(i)));
        }
        landed.push(Landed {
            start: lines.len(),
            len: op.rows.len(),
            removed: op.end - op.start,
            sent: op.sent,
        });
        lines.extend(&op.rows);
        if mixed {
            // A replaced line keeps its ending; rows beyond the replaced ones
            // (and inserted rows) take their neighbour's.
            let neighbour = if op.end > op.start {
                text.ending_of(op.end - 1)
            } else {
                match op.start.checked_sub(1) {
                    Some(before) => text.ending_of(before),
                    None => text.ending_of(0),
                }
            };
            endings.extend((0..op.rows.len()).map(|k| {
                if op.start + k < op.end {
                    text.ending_of(op.start + k)
                } else {
                    neighbour
                }
            }));
        }
        cursor = op.end;
    }
    lines.extend(text.lines.range(cursor..text.len()));
    if mixed {
        endings.extend((cursor..text.len()).map(|i| text.ending_of(i)));
    }
    let mut new = text.with_lines(lines, endings);
    if text.is_empty() {
        new.final_newline = true;
    }
    (new, landed)
}

/// For each old line (0-based), its new index if it survived the ops.
pub fn line_map(old_len: usize, ops: &[Op]) -> Vec<Option<usize>> {
    let mut map = vec![None; old_len];
    let mut shift: isize = 0;
    let mut cursor = 0;
    for op in ops {
        for (i, slot) in map.iter_mut().enumerate().take(op.start).skip(cursor) {
            *slot = Some((i as isize + shift) as usize);
        }
        shift += op.rows.len() as isize - (op.end - op.start) as isize;
        cursor = op.end;
    }
    for (i, slot) in map.iter_mut().enumerate().skip(cursor) {
        *slot = Some((i as isize + shift) as usize);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::edit::patch::{Patch, parse};

    struct Deny;
    impl SubPolicy for Deny {
        fn allow(&self, _: usize, named: usize, found: usize) -> bool {
            named.abs_diff(found) <= 2
        }
    }

    fn run(before: &str, patch: &str) -> Result<String, Problem> {
        let text = Text::decode(before.as_bytes());
        let Patch::Sections(s) = parse(patch).unwrap().0 else {
            panic!()
        };
        let plan = plan(&text, &s[0].hunks, &Deny)?;
        let (new, _) = splice(&text, &plan.ops);
        Ok(String::from_utf8(new.encode()).unwrap())
    }

    const FIVE: &str = "one\ntwo\nthree\nfour\nfive\n";

    #[test]
    fn numbers_refer_to_the_original_lines() {
        let out = run(
            FIVE,
            "[f#0000]\nPUT <1:\n+zero\nCUT 2\nPUT 4:\n+FOUR\n+FOUR2\nPUT >$:\n+six\n",
        )
        .unwrap();
        assert_eq!(out, "zero\none\nthree\nFOUR\nFOUR2\nfive\nsix\n");
    }

    #[test]
    fn checks_and_minus_rows_must_match() {
        assert!(run(FIVE, "[f#0000]\nPUT 2.=3:\n~two\n~thr\n+x\n").is_ok());
        assert!(matches!(
            run(FIVE, "[f#0000]\nPUT 2.=3:\n~two\n~four\n+x\n"),
            Err(Problem::Mismatch { line: 3, .. })
        ));
        assert!(run(FIVE, "[f#0000]\nPUT 2:\n-two\n+2\n").is_ok());
        assert!(matches!(
            run(FIVE, "[f#0000]\nPUT 2:\n-too\n+2\n"),
            Err(Problem::Mismatch { line: 2, .. })
        ));
    }

    #[test]
    fn overlaps_are_refused() {
        assert!(matches!(
            run(FIVE, "[f#0000]\nPUT 2.=3:\n+x\nCUT 3\n"),
            Err(Problem::Overlap { .. })
        ));
        assert!(matches!(
            run(FIVE, "[f#0000]\nCUT 2.=4\nPUT >2:\n+x\n"),
            Err(Problem::Overlap { .. })
        ));
        // Inserting before a replaced line is not an overlap.
        assert_eq!(
            run(FIVE, "[f#0000]\nPUT <2:\n+a\nPUT 2:\n+b\n").unwrap(),
            "one\na\nb\nthree\nfour\nfive\n"
        );
    }

    #[test]
    fn sub_replaces_once_and_relocates_nearby() {
        assert_eq!(
            run(FIVE, "[f#0000]\nSUB 3: hre\n+HRE\n").unwrap(),
            "one\ntwo\ntHREe\nfour\nfive\n"
        );
        assert_eq!(
            run(FIVE, "[f#0000]\nSUB 3: thr\n+\n").unwrap(),
            "one\ntwo\nee\nfour\nfive\n"
        );
        assert_eq!(
            run(FIVE, "[f#0000]\nSUB 2: hre\n+X\n").unwrap(),
            "one\ntwo\ntXe\nfour\nfive\n"
        );
        assert!(matches!(
            run(FIVE, "[f#0000]\nSUB 5: wo\n+X\n"),
            Err(Problem::SubNotOnLine { found: Some(2), .. })
        ));
        // OLD on the next line and once more far away: the near one.
        assert_eq!(
            run(
                "a\nkey = 1\nb\nc\nd\ne\nkey = 2\n",
                "[f#0000]\nSUB 1: key\n+KEY\n"
            )
            .unwrap(),
            "a\nKEY = 1\nb\nc\nd\ne\nkey = 2\n"
        );
        // Two lines as near as each other: neither is chosen.
        assert!(matches!(
            run("key\nx\nkey\n", "[f#0000]\nSUB 2: key\n+K\n"),
            Err(Problem::SubNotOnLine { found: None, .. })
        ));
        assert!(matches!(
            run("aa\n", "[f#0000]\nSUB 1: a\n+X\n"),
            Err(Problem::SubNotOnLine { on_line: 2, .. })
        ));
        assert_eq!(
            run(FIVE, "[f#0000]\nSUB 1: one\n+a\n+b\n").unwrap(),
            "a\nb\ntwo\nthree\nfour\nfive\n"
        );
    }

    #[test]
    fn blocks_end_by_indentation() {
        let src = "fn a() {\n    x();\n\n    y();\n}\nfn b() {}\ndef c():\n    pass\nz = 1\n";
        let lines: nib_text::text::Lines = src.lines().collect();
        assert_eq!(block_end(&lines, 1), 5);
        assert_eq!(block_end(&lines, 6), 6);
        assert_eq!(block_end(&lines, 7), 8);
        assert_eq!(
            run(src, "[f#0000]\nCUT 1*\n").unwrap(),
            "fn b() {}\ndef c():\n    pass\nz = 1\n"
        );
        assert_eq!(
            run(src, "[f#0000]\nPUT >7*:\n+w = 0\n").unwrap(),
            "fn a() {\n    x();\n\n    y();\n}\nfn b() {}\ndef c():\n    pass\nw = 0\nz = 1\n"
        );
    }

    #[test]
    fn out_of_range_is_reported() {
        assert!(matches!(
            run(FIVE, "[f#0000]\nPUT 6:\n+x\n"),
            Err(Problem::OutOfRange {
                line: 6,
                len: 5,
                ..
            })
        ));
    }

    #[test]
    fn empty_files_take_appends() {
        assert_eq!(run("", "[f#0000]\nPUT >$:\n+a\n").unwrap(), "a\n");
    }

    #[test]
    fn line_map_follows_splices() {
        let text = Text::decode(FIVE.as_bytes());
        let Patch::Sections(s) = parse("[f#0000]\nCUT 2\nPUT >3:\n+x\n+y\n").unwrap().0 else {
            panic!()
        };
        let p = plan(&text, &s[0].hunks, &Deny).unwrap();
        assert_eq!(
            line_map(5, &p.ops),
            vec![Some(0), None, Some(1), Some(4), Some(5)]
        );
    }
}
