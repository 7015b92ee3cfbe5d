//! Path selectors: `path:A-B,C-D` and the forms read will accept.
//!
//! Grammar (after the last `:` of an argument that is not itself an existing path):
//!
//! ```text
//! selector := item ("," item)*
//! item     := A          one line
//!           | A-B        lines A to B
//!           | A+N        N lines from A
//!           | A-         A to the end
//!           | -N         the last N lines
//! ```
//!
//! `A..B` and `A-$` are accepted as `A-B` and `A-` with a note. Declaration
//! selectors (`path:name`), versions (`path#TAG`) and revisions (`path@REV`)
//! are recognised so they can fail with a clear message until their issues land.

/// One item of a line selector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineRange {
    /// From line `start` to `end` (inclusive), or to the end of the file.
    From {
        /// First line (1-based).
        start: usize,
        /// Last line, if bounded.
        end: Option<usize>,
    },
    /// The last N lines.
    Last(usize),
}

/// What part of a file an argument asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// The whole file (subject to outline and size rules).
    Whole,
    /// Line ranges.
    Lines(Vec<LineRange>),
    /// A declaration by name (not built yet).
    Declaration(String),
    /// Changes since a version (not built yet).
    Version(String),
    /// A git revision (not built yet).
    Revision(String),
    /// A malformed line selector; the message says what is wrong.
    Invalid(String),
}

/// A selector that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// Splits an argument into a path and a selector. `exists` says whether a
/// path exists, so a file whose name holds `:`, `#` or `@` is still found.
pub fn split(arg: &str, exists: impl Fn(&str) -> bool) -> (String, Selector, Vec<String>) {
    let mut notes = Vec::new();
    if exists(arg) {
        return (arg.to_string(), Selector::Whole, notes);
    }
    if let Some((path, tag)) = arg.rsplit_once('#')
        && tag.len() == 4
        && tag.bytes().all(|b| b.is_ascii_hexdigit())
        && !path.is_empty()
    {
        return (path.to_string(), Selector::Version(tag.to_string()), notes);
    }
    // `path@REV`, and `path@REV:SPEC` (lines or a declaration of the file
    // at that revision, a file of a folder's): the revision comes first.
    if let Some((path, rev)) = arg.split_once('@')
        && !rev.is_empty()
        && exists(if path.is_empty() { "." } else { path })
    {
        return (path.to_string(), Selector::Revision(rev.to_string()), notes);
    }
    if let Some((path, spec)) = arg.rsplit_once(':')
        && !path.is_empty()
        && !spec.is_empty()
    {
        match parse_lines(spec, &mut notes) {
            Ok(Some(ranges)) => return (path.to_string(), Selector::Lines(ranges), notes),
            Ok(None) => {}
            Err(e) if !looks_like_name(spec) => {
                return (path.to_string(), Selector::Invalid(e.0), notes);
            }
            Err(_) => {}
        }
        if looks_like_name(spec) {
            return (
                path.to_string(),
                Selector::Declaration(spec.to_string()),
                notes,
            );
        }
    }
    (arg.to_string(), Selector::Whole, notes)
}

/// Whether `spec` reads as declaration names (`name`, `Type.member`, `a,b`).
pub fn looks_like_name(spec: &str) -> bool {
    spec.split(',').all(|part| {
        let p = part.trim();
        !p.is_empty()
            && p.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
            && p.chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '.' | '#'))
    })
}

/// Parses a line selector. `Ok(None)` means "not a line selector at all"
/// (no digits), an error means a line selector that is malformed.
pub fn parse_lines(
    spec: &str,
    notes: &mut Vec<String>,
) -> Result<Option<Vec<LineRange>>, SelectorError> {
    let spec = spec.trim();
    if !spec.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
        return Ok(None);
    }
    let mut out = Vec::new();
    for raw in spec.split(',') {
        let item = raw.trim();
        out.push(parse_item(item, notes)?);
    }
    Ok(Some(out))
}

fn number(s: &str, item: &str) -> Result<usize, SelectorError> {
    s.trim().parse::<usize>().map_err(|_| {
        SelectorError(format!(
            "\"{item}\" is not a line range; the forms are A, A-B, A+N, A-, -N and A-B,C-D"
        ))
    })
}

fn parse_item(item: &str, notes: &mut Vec<String>) -> Result<LineRange, SelectorError> {
    let bad = || {
        SelectorError(format!(
            "\"{item}\" is not a line range; the forms are A, A-B, A+N, A-, -N and A-B,C-D"
        ))
    };
    if let Some(n) = item.strip_prefix('-') {
        let n = number(n, item)?;
        if n == 0 {
            return Err(bad());
        }
        return Ok(LineRange::Last(n));
    }
    let (start, end) = if let Some((a, b)) = item.split_once("..") {
        notes.push(format!("took \"{item}\" as \"{}-{}\"", a.trim(), b.trim()));
        (number(a, item)?, Some(b))
    } else if let Some((a, n)) = item.split_once('+') {
        let a = number(a, item)?;
        let n = number(n, item)?;
        if n == 0 || a == 0 {
            return Err(bad());
        }
        return Ok(LineRange::From {
            start: a,
            end: Some(a.saturating_add(n - 1)),
        });
    } else if let Some((a, b)) = item.split_once('-') {
        (number(a, item)?, Some(b))
    } else {
        let a = number(item, item)?;
        (a, Some(item))
    };
    if start == 0 {
        return Err(SelectorError(format!(
            "\"{item}\": lines are numbered from 1"
        )));
    }
    let end = match end.map(str::trim) {
        None | Some("") => None,
        Some("$") => {
            notes.push(format!("took \"{item}\" as \"{start}-\""));
            None
        }
        Some(b) => Some(number(b, item)?),
    };
    if let Some(e) = end
        && e < start
    {
        return Err(SelectorError(format!(
            "\"{item}\" ends before it starts; write the smaller line first"
        )));
    }
    Ok(LineRange::From { start, end })
}

/// Turns ranges into concrete, merged, 1-based inclusive spans of a file of
/// `len` lines. A range that starts past the end is an error.
pub fn resolve(ranges: &[LineRange], len: usize) -> Result<Vec<(usize, usize)>, SelectorError> {
    let mut spans = Vec::new();
    for r in ranges {
        let (a, b) = match *r {
            LineRange::Last(n) => (len.saturating_sub(n) + 1, len),
            LineRange::From { start, end } => {
                if start > len {
                    return Err(SelectorError(format!(
                        "line {start} is past the end: the file has {len} line{}",
                        if len == 1 { "" } else { "s" }
                    )));
                }
                (start, end.unwrap_or(len).min(len))
            }
        };
        if a <= b {
            spans.push((a, b));
        }
    }
    Ok(merge_spans(spans))
}

/// Line spans sorted, with overlapping and touching ones joined.
pub fn merge_spans(mut spans: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (a, b) in spans {
        match merged.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// No declaration of that name: which ones, and the nearest names if any.
#[derive(Debug)]
pub struct UnknownDeclaration {
    names: Vec<String>,
    /// `did you mean …?`, when names are near.
    pub hint: Option<String>,
}

impl std::fmt::Display for UnknownDeclaration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no declaration named {}", self.names.join(", "))
    }
}

/// The line spans of the declarations `names` (`name`, `Type.member`,
/// `a,b`) in `bytes` of `lang`, merged; or which names are unknown.
pub fn declaration_spans(
    lang: nib_text::lang::Lang,
    names: &str,
    bytes: &[u8],
) -> Result<Vec<(usize, usize)>, UnknownDeclaration> {
    let decls = nib_text::lang::declarations(lang, bytes);
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut unknown = Vec::new();
    for want in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let found: Vec<&nib_text::lang::Decl> = decls
            .iter()
            .filter(|d| {
                d.qualified == want || d.name == want || d.qualified.ends_with(&format!(".{want}"))
            })
            .collect();
        if found.is_empty() {
            unknown.push(want.to_string());
        }
        spans.extend(found.iter().map(|d| (d.start, d.end)));
    }
    if unknown.is_empty() {
        return Ok(merge_spans(spans));
    }
    let all: Vec<&str> = decls.iter().map(|d| d.qualified.as_str()).collect();
    let mut near: Vec<String> = unknown
        .iter()
        .flat_map(|u| nib_text::readable::similar(u, all.iter().copied()))
        .collect();
    let mut once = std::collections::HashSet::new();
    near.retain(|n| once.insert(n.clone()));
    Err(UnknownDeclaration {
        names: unknown,
        hint: (!near.is_empty()).then(|| format!("did you mean {}?", near.join(", "))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(spec: &str) -> Vec<LineRange> {
        parse_lines(spec, &mut Vec::new()).unwrap().unwrap()
    }

    #[test]
    fn every_form_parses() {
        use LineRange::*;
        assert_eq!(
            lines("5"),
            vec![From {
                start: 5,
                end: Some(5)
            }]
        );
        assert_eq!(
            lines("5-9"),
            vec![From {
                start: 5,
                end: Some(9)
            }]
        );
        assert_eq!(
            lines("5+3"),
            vec![From {
                start: 5,
                end: Some(7)
            }]
        );
        assert_eq!(
            lines("5-"),
            vec![From {
                start: 5,
                end: None
            }]
        );
        assert_eq!(lines("-4"), vec![Last(4)]);
        assert_eq!(
            lines("1-2,8-9"),
            vec![
                From {
                    start: 1,
                    end: Some(2)
                },
                From {
                    start: 8,
                    end: Some(9)
                }
            ]
        );
        let mut notes = Vec::new();
        assert_eq!(
            parse_lines("3..4", &mut notes).unwrap().unwrap(),
            vec![From {
                start: 3,
                end: Some(4)
            }]
        );
        assert_eq!(notes.len(), 1);
    }

    #[test]
    fn huge_numbers_saturate() {
        let big = format!("{}+{}", usize::MAX, usize::MAX);
        assert_eq!(
            lines(&big),
            vec![LineRange::From {
                start: usize::MAX,
                end: Some(usize::MAX)
            }]
        );
        assert!(resolve(&lines(&big), 10).is_err());
    }

    #[test]
    fn malformed_ranges_are_errors() {
        for bad in ["0", "9-3", "1-x", "-0", "2+0"] {
            assert!(parse_lines(bad, &mut Vec::new()).is_err(), "{bad}");
        }
    }

    #[test]
    fn resolve_clips_and_merges() {
        assert_eq!(resolve(&lines("2-4,3-6"), 10).unwrap(), vec![(2, 6)]);
        assert_eq!(resolve(&lines("8-"), 10).unwrap(), vec![(8, 10)]);
        assert_eq!(resolve(&lines("-3"), 10).unwrap(), vec![(8, 10)]);
        assert_eq!(resolve(&lines("-30"), 10).unwrap(), vec![(1, 10)]);
        assert_eq!(resolve(&lines("9-40"), 10).unwrap(), vec![(9, 10)]);
        assert!(resolve(&lines("11"), 10).is_err());
    }

    #[test]
    fn split_prefers_existing_paths() {
        let exists = |p: &str| p == "a:1" || p == "src/a.rs" || p == ".";
        assert_eq!(split("a:1", exists).1, Selector::Whole);
        assert!(matches!(
            split("src/a.rs:3-4", exists).1,
            Selector::Lines(_)
        ));
        assert_eq!(
            split("src/a.rs:Foo.bar", exists).1,
            Selector::Declaration("Foo.bar".into())
        );
        assert_eq!(
            split("src/a.rs#3C4D", exists).1,
            Selector::Version("3C4D".into())
        );
        assert_eq!(
            split("src/a.rs@HEAD~1", exists).1,
            Selector::Revision("HEAD~1".into())
        );
        assert_eq!(split("missing.txt", exists).1, Selector::Whole);
    }
}
