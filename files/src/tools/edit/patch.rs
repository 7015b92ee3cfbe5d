//! The hashline patch language: text in, a typed [`Patch`] out.
//!
//! ```text
//! patch    := "REAPPLY" TOKEN
//!           | section+
//! section  := "[" PATH "#" TAG "]" NL (hunk | file-op)*      a tagged file
//!           | "[" PATH "]" NL ("PUT >$:" rows | import)*     tagless: append and IMPORT only
//!           | "*** Add File: " PATH NL rows                  a new file
//! hunk     := "PUT " N ".=" M ":" NL checks body             replace lines N..M
//!           | "PUT " N ":" NL checks body                    replace line N
//!           | "PUT <" N ":" NL body                          insert before N
//!           | "PUT >" N ":" NL body                          insert after N
//!           | "PUT >$:" NL body                              append
//!           | "PUT " N "*:" NL checks body                   replace the block starting at N
//!           | "PUT >" N "*:" NL body                         insert after that block
//!           | "CUT " N ".=" M NL checks | "CUT " N NL checks | "CUT " N "*" NL checks
//!           | "SUB " N ": " OLD NL body                      replace OLD on line N
//! file-op  := "REM" | "MV " DEST | "CP " DEST | "IMPORT " NAMES
//! checks   := ("~" TEXT NL){0,2}     line N starts with TEXT; a second checks line M
//! body     := ("-" TEXT NL)* ("+" TEXT NL)*    "-" rows must match the replaced lines
//! ```
//!
//! Line numbers are those of the tagged output and are never shifted by
//! earlier hunks. Forgiven with a note: `N-M` and `N..M` for `N.=M`; pasted
//! `N:` prefixes on every `+` row of a hunk when they count up from the
//! hunk's own first line (otherwise the rows are text as sent). An apply_patch or unified diff is
//! refused with an explanation of this form. The parser checks only the shape
//! of the text; [`super::apply`] checks it against the file.

use nib_text::hashline::Tag;

/// A parsed patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Patch {
    /// `REAPPLY TOKEN`.
    Reapply(String),
    /// One or more file sections.
    Sections(Vec<Section>),
}

/// The edits to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// The path as written.
    pub path: String,
    /// The header's tag; `None` for a tagless header or a new file.
    pub tag: Option<Tag>,
    /// What kind of section.
    pub kind: SectionKind,
    /// The hunks, in the order written.
    pub hunks: Vec<Hunk>,
    /// What happens to the file after its hunks.
    pub file_op: Option<FileOp>,
    /// `IMPORT` names (not built yet).
    pub imports: Vec<String>,
    /// The line number in the patch where the section starts (for messages).
    pub line: usize,
}

/// The header a section started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SectionKind {
    /// `[PATH#TAG]`
    Tagged,
    /// `[PATH]`
    Tagless,
    /// `*** Add File: PATH` with its rows.
    AddFile(Vec<String>),
}

/// Where a hunk acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Lines `start..=end`.
    Range(usize, usize),
    /// The block starting at this line.
    Block(usize),
    /// Before this line.
    Before(usize),
    /// After this line.
    After(usize),
    /// After the block starting at this line.
    AfterBlock(usize),
    /// At the end of the file.
    End,
}

/// One change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hunk {
    /// `PUT`: replace or insert rows.
    Put {
        /// Where.
        target: Target,
        /// `~` checks: the first for the first line, the second for the last.
        checks: Vec<String>,
        /// `-` rows (must match the replaced lines).
        minus: Vec<String>,
        /// `+` rows.
        rows: Vec<String>,
        /// Line in the patch.
        line: usize,
    },
    /// `CUT`: delete lines.
    Cut {
        /// Which (a Range or a Block).
        target: Target,
        /// `~` checks.
        checks: Vec<String>,
        /// `-` rows.
        minus: Vec<String>,
        /// Line in the patch.
        line: usize,
    },
    /// `SUB N: OLD` with the replacement rows.
    Sub {
        /// The line OLD should be on.
        at: usize,
        /// The text to replace.
        old: String,
        /// The replacement rows (one empty row deletes OLD).
        rows: Vec<String>,
        /// Line in the patch.
        line: usize,
    },
}

impl Hunk {
    /// The line in the patch text where the hunk starts.
    pub fn patch_line(&self) -> usize {
        match self {
            Hunk::Put { line, .. } | Hunk::Cut { line, .. } | Hunk::Sub { line, .. } => *line,
        }
    }
}

/// A whole-file operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileOp {
    /// Delete to the trash.
    Rem,
    /// Move after the edits.
    Mv(String),
    /// Copy; the edits land only in the copy.
    Cp(String),
}

/// A patch that cannot be read: the line, its number, and the right forms
/// (the line is quoted unless it is blank: an empty patch has none).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "line {line}: {message}\n{quote}hint: {hint}",
    quote = if text.trim().is_empty() { String::new() } else { format!("  {text}\n") }
)]
pub struct ParseError {
    /// 1-based line in the patch.
    pub line: usize,
    /// The offending line, quoted.
    pub text: String,
    /// What is wrong.
    pub message: String,
    /// The right form.
    pub hint: String,
}

const HUNK_FORMS: &str = "the hunks are PUT N.=M:, PUT N:, PUT <N:, PUT >N:, PUT >$:, PUT N*:, PUT >N*:, \
CUT N.=M, CUT N, CUT N*, SUB N: OLD, and REM, MV DEST, CP DEST, IMPORT a.b.C";

const PATCH_FORM: &str = "a nib patch names each file as [PATH#TAG] (from read), then hunks such as\n\
  PUT 12.=14:\n  +new line 12\n  +new line 13\n\
using the line numbers read printed; new files start with *** Add File: PATH";

fn err(line: usize, text: &str, message: impl Into<String>, hint: impl Into<String>) -> ParseError {
    ParseError {
        line,
        text: text.to_string(),
        message: message.into(),
        hint: hint.into(),
    }
}

/// What the parser forgave, to print as notes.
pub type Notes = Vec<String>;

/// Parses a patch.
pub fn parse(input: &str) -> Result<(Patch, Notes), ParseError> {
    let mut notes = Notes::new();
    let lines: Vec<&str> = input
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let first = lines.iter().enumerate().find(|(_, l)| !l.trim().is_empty());
    let Some((first_no, first_line)) = first else {
        return Err(err(1, "", "the patch is empty", PATCH_FORM));
    };
    if let Some(token) = first_line.trim().strip_prefix("REAPPLY") {
        let token = token.trim();
        let rest_blank = lines[first_no + 1..].iter().all(|l| l.trim().is_empty());
        if token.is_empty() || token.contains(' ') || !rest_blank {
            return Err(err(
                first_no + 1,
                first_line,
                "REAPPLY takes one token and must be the whole input",
                "send exactly: REAPPLY TOKEN",
            ));
        }
        return Ok((Patch::Reapply(token.to_string()), notes));
    }
    reject_foreign(first_no + 1, first_line)?;

    let mut sections: Vec<Section> = Vec::new();
    let mut i = first_no;
    while i < lines.len() {
        let raw = lines[i];
        let no = i + 1;
        let t = raw.trim_end();
        if t.trim().is_empty() {
            i += 1;
            continue;
        }
        if let Some(path) = t.strip_prefix("*** Add File:") {
            let path = path.trim();
            if path.is_empty() {
                return Err(err(
                    no,
                    raw,
                    "Add File needs a path",
                    "*** Add File: src/new.ts",
                ));
            }
            let (rows, next) = take_rows(&lines, i + 1, &mut notes)?;
            sections.push(Section {
                path: path.to_string(),
                tag: None,
                kind: SectionKind::AddFile(rows),
                hunks: Vec::new(),
                file_op: None,
                imports: Vec::new(),
                line: no,
            });
            i = next;
            continue;
        }
        if t.starts_with('[') && t.ends_with(']') {
            sections.push(parse_header(no, raw, t)?);
            i += 1;
            continue;
        }
        let Some(section) = sections.last_mut() else {
            reject_foreign(no, raw)?;
            return Err(err(
                no,
                raw,
                "a hunk before any file header",
                "start with the file's header as read printed it: [PATH#TAG]",
            ));
        };
        if matches!(section.kind, SectionKind::AddFile(_)) {
            return Err(err(
                no,
                raw,
                "only + rows may follow *** Add File",
                "put the new file's content on + rows; edit other files in their own sections",
            ));
        }
        i = parse_command(&lines, i, section, &mut notes)?;
    }
    if sections.is_empty() {
        return Err(err(
            first_no + 1,
            first_line,
            "no file sections",
            PATCH_FORM,
        ));
    }
    Ok((Patch::Sections(sections), notes))
}

/// apply_patch and unified diffs get an explanation instead of a guess.
fn reject_foreign(no: usize, raw: &str) -> Result<(), ParseError> {
    let t = raw.trim();
    if t.starts_with("*** Begin Patch")
        || t.starts_with("*** Update File:")
        || t.starts_with("*** Delete File:")
        || t.starts_with("--- ")
        || t.starts_with("+++ ")
        || t.starts_with("@@ ")
        || t.starts_with("diff --git")
    {
        return Err(err(
            no,
            raw,
            "this looks like an apply_patch or unified diff, which nib's edit does not take",
            PATCH_FORM,
        ));
    }
    Ok(())
}

fn parse_header(no: usize, raw: &str, t: &str) -> Result<Section, ParseError> {
    let inner = &t[1..t.len() - 1];
    let (path, tag, kind) = match inner.rsplit_once('#') {
        Some((p, tag_text)) if Tag::parse(tag_text).is_some() => {
            (p, Tag::parse(tag_text), SectionKind::Tagged)
        }
        Some((_, tag_text)) if tag_text.len() <= 6 && !tag_text.contains('/') => {
            return Err(err(
                no,
                raw,
                format!("\"{tag_text}\" is not a tag"),
                "a tag is the 4 hex digits read printed, as in [src/a.ts#3C4D]",
            ));
        }
        _ => (inner, None, SectionKind::Tagless),
    };
    let path = path.trim();
    if path.is_empty() {
        return Err(err(no, raw, "the header has no path", "[src/a.ts#3C4D]"));
    }
    Ok(Section {
        path: path.to_string(),
        tag,
        kind,
        hunks: Vec::new(),
        file_op: None,
        imports: Vec::new(),
        line: no,
    })
}

/// A line number, `$` is not a number here.
fn num(s: &str) -> Option<usize> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|&n: &usize| n > 0)
}

/// `N.=M`, also `N-M` and `N..M` (with a note), or `N`.
fn range(spec: &str, notes: &mut Notes) -> Option<(usize, usize)> {
    if let Some((a, b)) = spec.split_once(".=") {
        return Some((num(a)?, num(b)?));
    }
    for sep in ["..", "-"] {
        if let Some((a, b)) = spec.split_once(sep) {
            let r = (num(a)?, num(b)?);
            notes.push(format!("took \"{spec}\" as \"{}.={}\"", r.0, r.1));
            return Some(r);
        }
    }
    num(spec).map(|n| (n, n))
}

fn parse_command(
    lines: &[&str],
    i: usize,
    section: &mut Section,
    notes: &mut Notes,
) -> Result<usize, ParseError> {
    let raw = lines[i];
    let no = i + 1;
    let t = raw.trim();
    let tagless = section.kind == SectionKind::Tagless;
    if let Some(rest) = t.strip_prefix("IMPORT ") {
        section.imports.extend(
            rest.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
        );
        return Ok(i + 1);
    }
    if tagless && !t.starts_with("PUT >$:") {
        return Err(err(
            no,
            raw,
            "a header without a tag allows only PUT >$: and IMPORT",
            "to change existing lines, use the header read printed, with its tag: [PATH#TAG]",
        ));
    }
    if t == "REM" || t.starts_with("MV ") || t.starts_with("CP ") {
        parse_file_op(t, no, raw, section)?;
        return Ok(i + 1);
    }
    if let Some(rest) = t.strip_prefix("SUB ") {
        return parse_sub(lines, i, rest, section, notes);
    }
    let (verb, spec) = if let Some(rest) = t.strip_prefix("PUT ") {
        let Some(spec) = rest.trim().strip_suffix(':') else {
            return Err(err(no, raw, "PUT ends with a colon", "PUT 12.=14:"));
        };
        ("PUT", spec.trim())
    } else if let Some(rest) = t.strip_prefix("CUT ") {
        ("CUT", rest.trim().trim_end_matches(':'))
    } else if t.starts_with('+') || t.starts_with('-') || t.starts_with('~') {
        return Err(err(
            no,
            raw,
            "a row outside any hunk",
            "rows follow a hunk line such as PUT 12: or SUB 12: old",
        ));
    } else {
        return Err(err(no, raw, "not a hunk", HUNK_FORMS));
    };
    let target = parse_target(verb, spec, no, raw, notes)?;
    if let Target::Range(a, b) = target
        && b < a
    {
        return Err(err(
            no,
            raw,
            "the range ends before it starts",
            "write the smaller line first: PUT 3.=5:",
        ));
    }
    if tagless && target != Target::End {
        return Err(err(
            no,
            raw,
            "a header without a tag allows only PUT >$:",
            "use [PATH#TAG]",
        ));
    }
    let first = match target {
        Target::Range(a, _) | Target::Block(a) | Target::Before(a) => Some(a),
        Target::After(a) | Target::AfterBlock(a) => a.checked_add(1),
        // The end's number is not known until the file is read.
        Target::End => None,
    };
    let (body, next) = take_body(lines, i + 1, first, notes)?;
    let inserts = matches!(
        target,
        Target::Before(_) | Target::After(_) | Target::AfterBlock(_) | Target::End
    );
    if body.checks.len() > 2 {
        return Err(err(
            no,
            raw,
            "at most two ~ checks (first line, last line)",
            "~start of line N",
        ));
    }
    if inserts && !body.minus.is_empty() {
        return Err(err(
            no,
            raw,
            "an insertion replaces nothing, so it takes no - rows",
            "use + rows only",
        ));
    }
    if verb == "CUT" {
        if !body.rows.is_empty() {
            return Err(err(
                no,
                raw,
                "CUT takes no + rows",
                "to replace lines, use PUT N.=M:",
            ));
        }
        section.hunks.push(Hunk::Cut {
            target,
            checks: body.checks,
            minus: body.minus,
            line: no,
        });
    } else {
        if inserts && body.rows.is_empty() {
            return Err(err(
                no,
                raw,
                "an insertion needs + rows",
                "PUT >12:\n  +new line",
            ));
        }
        // A replacement with nothing in its place is a deletion said by
        // accident as often as on purpose: it must be said as one.
        if body.rows.is_empty() {
            let cut = match target {
                Target::Range(a, b) if a == b => format!("CUT {a}"),
                Target::Range(a, b) => format!("CUT {a}.={b}"),
                Target::Block(a) => format!("CUT {a}*"),
                _ => "CUT N".to_string(),
            };
            return Err(err(
                no,
                raw,
                "PUT with no + rows would delete the lines",
                format!(
                    "to delete them, write {cut}; to keep an empty line, write a + row with nothing after it"
                ),
            ));
        }
        section.hunks.push(Hunk::Put {
            target,
            checks: body.checks,
            minus: body.minus,
            rows: body.rows,
            line: no,
        });
    }
    Ok(next)
}

/// `REM`, `MV DEST` or `CP DEST`: the section's one file operation.
fn parse_file_op(t: &str, no: usize, raw: &str, section: &mut Section) -> Result<(), ParseError> {
    if section.file_op.is_some() {
        return Err(err(
            no,
            raw,
            "a section takes one of REM, MV, CP",
            "split it into two sections",
        ));
    }
    section.file_op = Some(match t {
        "REM" => FileOp::Rem,
        _ if t.starts_with("MV ") => FileOp::Mv(t[3..].trim().to_string()),
        _ => FileOp::Cp(t[3..].trim().to_string()),
    });
    if matches!(&section.file_op, Some(FileOp::Mv(d) | FileOp::Cp(d)) if d.is_empty()) {
        return Err(err(
            no,
            raw,
            "MV and CP need a destination",
            "MV src/new/path.ts",
        ));
    }
    Ok(())
}

/// `SUB N: OLD` and its `+` rows. Returns the index of the line after them.
fn parse_sub(
    lines: &[&str],
    i: usize,
    rest: &str,
    section: &mut Section,
    notes: &mut Notes,
) -> Result<usize, ParseError> {
    let raw = lines[i];
    let no = i + 1;
    let Some((n, old)) = rest.split_once(':') else {
        return Err(err(no, raw, "SUB needs \"N: OLD\"", "SUB 12: oldName"));
    };
    let Some(at) = num(n) else {
        return Err(err(no, raw, "SUB needs a line number", "SUB 12: oldName"));
    };
    let old = old.strip_prefix(' ').unwrap_or(old).to_string();
    if old.is_empty() {
        return Err(err(
            no,
            raw,
            "SUB needs the text to replace",
            "SUB 12: oldName",
        ));
    }
    let (body, next) = take_body(lines, i + 1, Some(at), notes)?;
    if !body.checks.is_empty() || !body.minus.is_empty() {
        return Err(err(no, raw, "SUB takes only + rows", "SUB 12: old\n  +new"));
    }
    if body.rows.is_empty() {
        return Err(err(
            no,
            raw,
            "SUB needs + rows with the replacement (a lone + deletes OLD)",
            "SUB 12: oldName\n  +newName",
        ));
    }
    section.hunks.push(Hunk::Sub {
        at,
        old,
        rows: body.rows,
        line: no,
    });
    Ok(next)
}

/// The lines a `PUT` or `CUT` names: a range, a block (`N*`), before or
/// after a line (`<N`, `>N`, `>N*`), or the end (`>$`).
fn parse_target(
    verb: &str,
    spec: &str,
    no: usize,
    raw: &str,
    notes: &mut Notes,
) -> Result<Target, ParseError> {
    Ok(if verb == "PUT" {
        if spec == ">$" {
            Target::End
        } else if let Some(n) = spec.strip_prefix('<') {
            Target::Before(num(n).ok_or_else(|| err(no, raw, "bad line number", "PUT <12:"))?)
        } else if let Some(n) = spec.strip_prefix('>') {
            match n.strip_suffix('*') {
                Some(n) => Target::AfterBlock(
                    num(n).ok_or_else(|| err(no, raw, "bad line number", "PUT >12*:"))?,
                ),
                None => Target::After(
                    num(n).ok_or_else(|| err(no, raw, "bad line number", "PUT >12:"))?,
                ),
            }
        } else if let Some(n) = spec.strip_suffix('*') {
            Target::Block(num(n).ok_or_else(|| err(no, raw, "bad line number", "PUT 12*:"))?)
        } else {
            let (a, b) =
                range(spec, notes).ok_or_else(|| err(no, raw, "bad line range", HUNK_FORMS))?;
            Target::Range(a, b)
        }
    } else if let Some(n) = spec.strip_suffix('*') {
        Target::Block(num(n).ok_or_else(|| err(no, raw, "bad line number", "CUT 12*"))?)
    } else {
        let (a, b) =
            range(spec, notes).ok_or_else(|| err(no, raw, "bad line range", HUNK_FORMS))?;
        Target::Range(a, b)
    })
}

struct Body {
    checks: Vec<String>,
    minus: Vec<String>,
    rows: Vec<String>,
}

/// Reads `~`, `-` and `+` rows until the next command or header.
/// `first`: the line number read would have printed beside the hunk's first
/// `+` row (pasted numbers are stripped only when they start there).
fn take_body(
    lines: &[&str],
    mut i: usize,
    first: Option<usize>,
    notes: &mut Notes,
) -> Result<(Body, usize), ParseError> {
    let mut body = Body {
        checks: Vec::new(),
        minus: Vec::new(),
        rows: Vec::new(),
    };
    let start = i;
    while i < lines.len() {
        let l = lines[i];
        if let Some(c) = l.strip_prefix('~') {
            if !body.rows.is_empty() {
                return Err(err(
                    i + 1,
                    l,
                    "~ checks come before the + rows",
                    "PUT 3:\n  ~old start\n  +new",
                ));
            }
            body.checks.push(c.to_string());
        } else if let Some(m) = l.strip_prefix('-') {
            body.minus.push(m.to_string());
        } else if let Some(p) = l.strip_prefix('+') {
            body.rows.push(p.to_string());
        } else {
            break;
        }
        i += 1;
    }
    if let Some(first) = first {
        strip_pasted_numbers(&mut body.rows, start, first, notes);
    }
    Ok((body, i))
}

/// `+12:text` on every row, counting up from the hunk's own first line
/// (`first`): the model pasted read's prefixes, so strip them. Anything
/// else is text as sent — `+57:lexopt = "0.3.0"` in a hunk at line 288 is
/// grep output in a document, a YAML port, a time.
fn strip_pasted_numbers(rows: &mut [String], at: usize, first: usize, notes: &mut Notes) {
    if rows.is_empty() {
        return;
    }
    let mut expected = first;
    for r in rows.iter() {
        let Some((n, _)) = r.split_once(':') else {
            return;
        };
        if num(n) != Some(expected) {
            return;
        }
        let Some(next) = expected.checked_add(1) else {
            return;
        };
        expected = next;
    }
    for r in rows.iter_mut() {
        if let Some((_, rest)) = r.split_once(':') {
            *r = rest.to_string();
        }
    }
    notes.push(format!(
        "removed pasted line numbers from the + rows after patch line {at}; + rows hold only the new text"
    ));
}

fn take_rows(
    lines: &[&str],
    i: usize,
    notes: &mut Notes,
) -> Result<(Vec<String>, usize), ParseError> {
    // A new file's rows, pasted from read, would start at line 1.
    let (body, next) = take_body(lines, i, Some(1), notes)?;
    if !body.checks.is_empty() || !body.minus.is_empty() {
        return Err(err(
            i + 1,
            lines.get(i).copied().unwrap_or(""),
            "a new file takes only + rows",
            "*** Add File: a.txt\n  +first line",
        ));
    }
    Ok((body.rows, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(p: &str) -> Vec<Section> {
        match parse(p).unwrap().0 {
            Patch::Sections(s) => s,
            Patch::Reapply(_) => panic!("reapply"),
        }
    }

    #[test]
    fn a_replacement_without_rows_is_refused_naming_cut() {
        for (hunk, cut) in [
            ("PUT 5:", "CUT 5"),
            ("PUT 3.=5:\n-a", "CUT 3.=5"),
            ("PUT 9*:", "CUT 9*"),
        ] {
            let e = parse(&format!("[a.txt#0001]\n{hunk}\n")).unwrap_err();
            assert!(e.message.contains("no + rows"), "{hunk}: {e:?}");
            assert!(e.hint.contains(cut), "{hunk}: {e:?}");
        }
        assert!(
            parse("[a.txt#0001]\nPUT 5:\n+\n").is_ok(),
            "an empty line is a row"
        );
    }

    #[test]
    fn every_hunk_form_parses() {
        let s = sections(
            "[a.ts#3C4D]\nPUT 2.=3:\n~two\n~three\n+x\nPUT 5:\n+y\nPUT <7:\n+b\nPUT >7:\n+a\nPUT >$:\n+end\n\
             PUT 9*:\n+blk\nPUT >9*:\n+after\nCUT 11.=12\nCUT 13\nCUT 14*\nSUB 15: old\n+new\nMV b.ts\n",
        );
        assert_eq!(s.len(), 1);
        let targets: Vec<Target> = s[0]
            .hunks
            .iter()
            .map(|h| match h {
                Hunk::Put { target, .. } | Hunk::Cut { target, .. } => *target,
                Hunk::Sub { at, .. } => Target::Range(*at, *at),
            })
            .collect();
        use Target::*;
        assert_eq!(
            targets,
            vec![
                Range(2, 3),
                Range(5, 5),
                Before(7),
                After(7),
                End,
                Block(9),
                AfterBlock(9),
                Range(11, 12),
                Range(13, 13),
                Block(14),
                Range(15, 15)
            ]
        );
        assert_eq!(s[0].file_op, Some(FileOp::Mv("b.ts".into())));
        assert_eq!(s[0].tag, Tag::parse("3C4D"));
        match &s[0].hunks[0] {
            Hunk::Put { checks, rows, .. } => {
                assert_eq!(checks, &vec!["two".to_string(), "three".to_string()]);
                assert_eq!(rows, &vec!["x".to_string()]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sections_and_new_files() {
        let s =
            sections("[a#0001]\nREM\n*** Add File: n.txt\n+one\n+\n[log.txt]\nPUT >$:\n+tail\n");
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].file_op, Some(FileOp::Rem));
        assert_eq!(
            s[1].kind,
            SectionKind::AddFile(vec!["one".into(), String::new()])
        );
        assert_eq!(s[2].kind, SectionKind::Tagless);
    }

    #[test]
    fn slips_are_forgiven_with_notes() {
        let (p, notes) =
            parse("[a#0001]\nPUT 3-4:\n+x\nCUT 6..7\nPUT 9:\n+9:nine\n+10:ten\n").unwrap();
        let Patch::Sections(s) = p else { panic!() };
        assert!(matches!(
            s[0].hunks[0],
            Hunk::Put {
                target: Target::Range(3, 4),
                ..
            }
        ));
        assert!(matches!(
            s[0].hunks[1],
            Hunk::Cut {
                target: Target::Range(6, 7),
                ..
            }
        ));
        match &s[0].hunks[2] {
            Hunk::Put { rows, .. } => {
                assert_eq!(rows, &vec!["nine".to_string(), "ten".to_string()])
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(notes.len(), 3);
    }

    #[test]
    fn rows_that_merely_contain_colons_are_kept() {
        let s = sections("[a#0001]\nPUT 1:\n+key: value\n+3: x\n");
        match &s[0].hunks[0] {
            Hunk::Put { rows, .. } => assert_eq!(rows[0], "key: value"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_quote_the_line_and_show_the_forms() {
        let e = parse("[a#0001]\nPUT 3\n+x\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.text, "PUT 3");
        assert!(e.to_string().contains("hint:"));
        let e = parse("*** Begin Patch\n*** Update File: a\n").unwrap_err();
        assert!(e.message.contains("apply_patch"));
        let e = parse("--- a/x\n+++ b/x\n@@ -1 +1 @@\n").unwrap_err();
        assert!(e.message.contains("unified diff"));
        let e = parse("[a]\nPUT 3:\n+x\n").unwrap_err();
        assert!(e.message.contains("without a tag"));
        let e = parse("PUT 3:\n+x\n").unwrap_err();
        assert!(e.message.contains("before any file header"));
        let e = parse("[a#0001]\nCUT 3\n+x\n").unwrap_err();
        assert!(e.message.contains("CUT takes no + rows"));
        let e = parse("[a#0001]\nPUT 5.=3:\n+x\n").unwrap_err();
        assert!(e.message.contains("ends before"));
        let e = parse("[a#XYZ]\nREM\n").unwrap_err();
        assert!(e.message.contains("not a tag"));
        assert!(parse("").is_err());
    }

    #[test]
    fn pasted_numbers_are_stripped_only_when_they_start_at_the_hunk() {
        let rows = |patch: &str| match parse(patch).unwrap().0 {
            Patch::Sections(s) => match &s[0].hunks[0] {
                Hunk::Put { rows, .. } => rows.clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        // read's rows pasted into the hunk they came from: stripped.
        assert_eq!(rows("[a#0001]\nPUT 3.=4:\n+3:x\n+4:y\n"), ["x", "y"]);
        assert_eq!(rows("[a#0001]\nPUT >7:\n+8:x\n"), ["x"]);
        // Text that happens to start with digits and a colon: kept as sent
        // (a replay of ripgrep's history found these two).
        assert_eq!(
            rows("[a#0001]\nPUT 288:\n+57:lexopt = \"0.3.0\"\n"),
            ["57:lexopt = \"0.3.0\""]
        );
        assert_eq!(
            rows("[a#0001]\nPUT 12:\n+2:1:Holmeses, success\n"),
            ["2:1:Holmeses, success"]
        );
        assert_eq!(rows("[a#0001]\nPUT 5:\n+5:x\n+7:y\n"), ["5:x", "7:y"]);
        assert_eq!(rows("[a#0001]\nPUT >$:\n+1:x\n"), ["1:x"]);
        assert_eq!(rows("[a#0001]\nPUT 3:\n+3:x\n+y\n"), ["3:x", "y"]);
    }

    #[test]
    fn huge_pasted_numbers_do_not_overflow() {
        // Found by the fuzzer: a row numbered usize::MAX.
        let p = format!("[a#0001]\nPUT >$:\n+{}:x\n", usize::MAX);
        assert!(parse(&p).is_ok());
    }

    #[test]
    fn reapply_is_the_whole_input() {
        assert_eq!(
            parse("REAPPLY k3x9\n").unwrap().0,
            Patch::Reapply("k3x9".into())
        );
        assert!(parse("REAPPLY k3x9\n[a#0001]\nREM\n").is_err());
    }
}
