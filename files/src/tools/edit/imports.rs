//! IMPORT lines of a patch (Java and Kotlin) turned into ops on the current
//! text: each name into the import block in sorted order, once. Which files
//! take IMPORT is decided by `section`; the warning about names an edit
//! uses without importing them is [`super::missing_import`]'s.

use super::apply::Op;
use nib_text::text::Text;

/// Adds the ops of IMPORT lines (computed on `text`, the current numbering)
/// to `ops`: each new import goes into the file's import block in sorted
/// order, names already imported are skipped, and a file without imports
/// gets them after its package line.
pub(super) fn with_imports(
    mut ops: Vec<Op>,
    lang: Option<nib_text::lang::Lang>,
    text: &Text,
    names: &[String],
) -> Result<Vec<Op>, String> {
    let Some(lang) = lang else {
        return Ok(ops);
    };
    let java = lang == nib_text::lang::Lang::Java;
    let line_for = |n: &str| {
        if java {
            format!("import {n};")
        } else {
            format!("import {n}")
        }
    };
    let existing = nib_text::lang::imports(lang, &text.encode());
    let mut wanted: Vec<&String> = names
        .iter()
        .filter(|n| !existing.iter().any(|(_, e)| e == *n))
        .collect();
    wanted.sort();
    wanted.dedup();
    let mut inserts: std::collections::BTreeMap<usize, Vec<String>> =
        std::collections::BTreeMap::new();
    for name in wanted {
        let at = match existing.iter().find(|(_, e)| e.as_str() > name.as_str()) {
            Some((line, _)) => line - 1,
            None => match existing.last() {
                Some((line, _)) => *line,
                None => {
                    let package = text
                        .lines
                        .iter()
                        .position(|l| l.trim_start().starts_with("package "));
                    match package {
                        Some(i) => {
                            inserts.entry(i + 1).or_default().push(String::new());
                            i + 1
                        }
                        None => 0,
                    }
                }
            },
        };
        inserts.entry(at).or_default().push(line_for(name));
    }
    for (at, rows) in inserts {
        if ops.iter().any(|o| o.start < at && at < o.end) {
            return Err(format!(
                "IMPORT goes at line {}, inside lines another hunk replaces; split the edit",
                at + 1
            ));
        }
        ops.push(Op {
            start: at,
            end: at,
            rows,
            sent: false,
            anchors: Vec::new(),
            hunk: usize::MAX,
        });
    }
    ops.sort_by_key(|o| (o.start, o.end, o.hunk));
    Ok(ops)
}
