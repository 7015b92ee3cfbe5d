//! Outlines by indentation: the top-level lines of a file and the first-level
//! members of its containers (classes, structs, impls, objects), or the headings
//! of a Markdown file.
//!
//! This is the heuristic for every language until the tree-sitter issue gives
//! real declarations for the languages it parses; it stays for the others. It
//! returns line numbers only: read turns them into anchored rows, write into a
//! sparse map.

use crate::filekind::Shape;
use crate::text::Lines;

/// 1-based line numbers worth showing as an outline of `lines`.
pub fn outline(lines: &Lines, shape: Shape) -> Vec<usize> {
    match shape {
        Shape::Markdown => markdown_headings(lines),
        Shape::Code => by_indentation(lines, true),
        Shape::Text | Shape::FlatData => by_indentation(lines, false),
    }
}

/// ATX headings (`# Title`) and setext ones (`Title` over `=====` or
/// `-----`: the title's line), outside fences and front matter.
fn markdown_headings(lines: &Lines) -> Vec<usize> {
    let all: Vec<&str> = lines.iter().collect();
    let mut out = Vec::new();
    let mut fence = false;
    // YAML front matter (`---` first, to the next `---`) holds no headings.
    let mut start = 0;
    if all.first().is_some_and(|l| l.trim_end() == "---") {
        start = all
            .iter()
            .skip(1)
            .position(|l| l.trim_end() == "---")
            .map_or(0, |p| p + 2);
    }
    for (i, line) in all.iter().enumerate().skip(start) {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        if line.starts_with('#') {
            out.push(i + 1);
        } else if i > start
            && setext_underline(line)
            && all.get(i - 1).is_some_and(|prev| paragraph_line(prev))
        {
            out.push(i);
        }
    }
    out
}

/// `===` or `---` (two or more, up to three spaces before, spaces after).
fn setext_underline(line: &str) -> bool {
    let lead = line.len() - line.trim_start_matches(' ').len();
    let t = line.trim();
    lead <= 3 && t.len() >= 2 && (t.bytes().all(|b| b == b'=') || t.bytes().all(|b| b == b'-'))
}

/// A line that can be a setext heading's title: text, not a heading, a
/// list item, a quote, code or a rule of its own.
fn paragraph_line(line: &str) -> bool {
    let t = line.trim_start();
    let lead = line.len() - t.len();
    !t.is_empty()
        && lead <= 3
        && !t.starts_with('#')
        && !t.starts_with('>')
        && !t.starts_with("- ")
        && !t.starts_with("* ")
        && !t.starts_with("+ ")
        && !t.starts_with('|')
        && !setext_underline(line)
}

/// Indentation in columns (a tab counts 4), or None for a blank line.
pub fn indent(line: &str) -> Option<usize> {
    let mut cols = 0;
    for ch in line.chars() {
        match ch {
            ' ' => cols += 1,
            '\t' => cols += 4,
            _ => return Some(cols),
        }
    }
    None
}

fn is_noise(t: &str, code: bool) -> bool {
    let closers = t.chars().all(|c| matches!(c, '}' | ')' | ']' | ';' | ','));
    closers
        || t == "end"
        || (code
            && (t.starts_with("//")
                || t.starts_with("/*")
                || t.starts_with("* ")
                || t == "*"
                || t.starts_with("*/")
                || (t.starts_with('#')
                    && !t.starts_with("#[")
                    && !t.starts_with("#include")
                    && !t.starts_with("#define"))))
}

fn is_container(t: &str) -> bool {
    const WORDS: &[&str] = &[
        "class",
        "struct",
        "enum",
        "interface",
        "trait",
        "impl",
        "mod",
        "object",
        "namespace",
        "record",
        "module",
        "extension",
        "protocol",
        "union",
        "companion",
        "type",
        "export",
        "public",
        "private",
        "protected",
        "internal",
        "abstract",
        "final",
        "sealed",
        "data",
        "open",
        "pub",
        "static",
        "declare",
        "default",
        "const",
    ];
    let mut words = t.split(|c: char| !(c.is_alphanumeric() || c == '_'));
    let mut is = false;
    for w in words.by_ref().filter(|w| !w.is_empty()).take(4) {
        if matches!(
            w,
            "class"
                | "struct"
                | "enum"
                | "interface"
                | "trait"
                | "impl"
                | "mod"
                | "object"
                | "namespace"
                | "record"
                | "module"
                | "extension"
                | "protocol"
                | "union"
        ) {
            is = true;
            break;
        }
        if !WORDS.contains(&w) {
            break;
        }
    }
    is
}

fn by_indentation(lines: &Lines, code: bool) -> Vec<usize> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let Some(ind) = indent(line) else {
            i += 1;
            continue;
        };
        let t = line.trim();
        if ind > 0 {
            i += 1;
            continue;
        }
        if !is_noise(t, code) {
            out.push(i + 1);
        }
        // The block under this top-level line runs to the next top-level line.
        let mut j = i + 1;
        let mut first_level: Option<usize> = None;
        while j < lines.len() {
            match indent(&lines[j]) {
                Some(0) => break,
                Some(n) => first_level = Some(first_level.map_or(n, |f: usize| f.min(n))),
                None => {}
            }
            j += 1;
        }
        let wants_members = !code || is_container(t);
        if let (true, Some(level)) = (wants_members, first_level) {
            for (k, member) in lines.iter().enumerate().take(j).skip(i + 1) {
                if indent(member) == Some(level) && !is_noise(member.trim(), code) {
                    out.push(k + 1);
                }
            }
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Lines {
        s.lines().collect()
    }

    #[test]
    fn code_shows_top_level_and_container_members() {
        let src = lines(
            "use std::io;\n\
             \n\
             /// Doc.\n\
             pub struct S {\n    a: u32,\n}\n\
             impl S {\n    pub fn new() -> S {\n        S { a: 1 }\n    }\n\n    fn b(&self) {}\n}\n\
             fn main() {\n    let x = 1;\n}\n",
        );
        let got = outline(&src, Shape::Code);
        let shown: Vec<&str> = got.iter().map(|&n| &src[n - 1]).collect();
        assert_eq!(
            shown,
            vec![
                "use std::io;",
                "pub struct S {",
                "    a: u32,",
                "impl S {",
                "    pub fn new() -> S {",
                "    fn b(&self) {}",
                "fn main() {"
            ]
        );
    }

    #[test]
    fn markdown_shows_headings_outside_fences() {
        let src = lines("# A\ntext\n```\n# not\n```\n## B\n");
        assert_eq!(outline(&src, Shape::Markdown), vec![1, 6]);
    }

    #[test]
    fn markdown_setext_headings_are_their_title_lines() {
        let src = lines(
            "---\ntitle: x\n---\nTitle\n=====\n\ntext\nmore\n\nSub\n---\n- item\n---\n```\nno\n===\n```\n",
        );
        assert_eq!(outline(&src, Shape::Markdown), vec![4, 10]);
    }

    #[test]
    fn yaml_shows_two_levels() {
        let src = lines("a:\n  b: 1\n  c:\n    d: 2\ne: 3\n");
        assert_eq!(outline(&src, Shape::Text), vec![1, 2, 3, 5]);
    }
}
