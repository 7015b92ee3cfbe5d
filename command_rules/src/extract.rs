//! Every command a command line may run, found statically on brush-parser's
//! syntax tree: simple commands in pipelines, lists, subshells, groups,
//! loops, conditionals, functions defined in the line, process
//! substitutions; command substitutions (`$(…)`, backticks) anywhere in a
//! word, including inside parameter and arithmetic expansions and
//! here-documents; the command a wrapper runs (`wrappers`); the text a
//! nested shell, `eval`, `source`, `trap` or `alias` runs, parsed again.
//!
//! It fails closed: a command whose name is not a literal (built from
//! variables, globs, braces or substitutions), `eval` of text built at run
//! time, a shell reading its commands from a pipe, `hash -p`, a script that
//! cannot be read — each is a [`Finding::Unknown`] naming the construct.
//! There is no cap after which it stops; nested text always gets shorter,
//! and each script file is read once.

use std::collections::HashSet;
use std::path::PathBuf;

use brush_parser::ast::{CommandPrefixOrSuffixItem, IoRedirect, SimpleCommand, Word};
use brush_parser::word::WordPiece;

pub use crate::arg::Arg;
use crate::ast::{VisitMut, walk};
use crate::wrappers;

/// A command the line may run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// The program as written (a name or a path).
    pub name: String,
    /// Its arguments.
    pub args: Vec<Arg>,
    /// Where it was found (`"$(…)"`, `"env"`, `"bash -c"`…), outermost first.
    pub via: Vec<String>,
}

/// What the extractor found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// A command with a known name.
    Run(Invocation),
    /// A command whose name (or text) cannot be known before it runs.
    Unknown {
        /// The construct, in words.
        construct: String,
        /// The text it was found in.
        text: String,
    },
}

/// Where to read scripts that `source`, `.` or `bash FILE` run.
#[derive(Clone, Debug)]
pub struct Context {
    /// The folder the line starts in.
    pub cwd: PathBuf,
}

/// A command line that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the command line does not parse: {0}")]
pub struct ParseFailure(pub String);

struct Extractor<'a> {
    ctx: &'a Context,
    via: Vec<String>,
    out: Vec<Finding>,
    read_scripts: HashSet<PathBuf>,
    failure: Option<ParseFailure>,
}

fn options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

/// Everything `text` may run.
pub fn extract(text: &str, ctx: &Context) -> Result<Vec<Finding>, ParseFailure> {
    let mut e = Extractor {
        ctx,
        via: Vec::new(),
        out: Vec::new(),
        read_scripts: HashSet::new(),
        failure: None,
    };
    e.program(text, None)?;
    match e.failure {
        Some(f) => Err(f),
        None => Ok(e.out),
    }
}

/// The value of a word after quote removal, when no expansion can change it.
pub fn literal(word: &str) -> Option<String> {
    let pieces = brush_parser::word::parse(word, &options()).ok()?;
    let mut out = String::new();
    for p in pieces {
        literal_piece(&p.piece, &mut out, false)?;
    }
    Some(out)
}

fn literal_piece(piece: &WordPiece, out: &mut String, quoted: bool) -> Option<()> {
    match piece {
        WordPiece::Text(t) => {
            // Unquoted globs and brace expansions make the word depend on
            // files or expand to several words.
            if !quoted && (t.contains(['*', '?']) || glob_class(t) || brace_expansion(t)) {
                return None;
            }
            out.push_str(t);
        }
        WordPiece::SingleQuotedText(t) | WordPiece::AnsiCQuotedText(t) => out.push_str(t),
        WordPiece::EscapeSequence(e) => out.push_str(e.strip_prefix('\\').unwrap_or(e)),
        WordPiece::DoubleQuotedSequence(seq) | WordPiece::GettextDoubleQuotedSequence(seq) => {
            for p in seq {
                literal_piece(&p.piece, out, true)?;
            }
        }
        WordPiece::TildeExpansion(_)
        | WordPiece::ParameterExpansion(_)
        | WordPiece::CommandSubstitution(_)
        | WordPiece::BackquotedCommandSubstitution(_)
        | WordPiece::ArithmeticExpression(_) => return None,
    }
    Some(())
}

/// Unclosed `(` past which a text is refused without parsing.
const MAX_UNMATCHED_PARENS: usize = 8;

/// How many more `(` than `)` the text has outside quotes and comments.
/// Text brush-parser 0.4 cannot be given (both found by fuzzing): a file
/// descriptor number too large before a redirection (it panics), and a
/// here-document whose delimiter is an empty quoted word (it allocates
/// without end). The reason, if `text` holds either; such lines are refused
/// before parsing (fail closed).
pub fn parser_trap(text: &str) -> Option<String> {
    if let Some(fd) = oversized_fd(text) {
        return Some(format!(
            "the file descriptor {fd} before a redirection is too large"
        ));
    }
    if empty_heredoc_tag(text) {
        return Some("a here-document's delimiter is empty (<<\"\")".to_string());
    }
    odd_heredoc_tag(text).then(|| {
        "a here-document's delimiter starts with an operator or a control character".to_string()
    })
}

/// Where each here-document's delimiter starts (after `<<` or `<<-` and
/// blanks; a here-string's `<<<` is not one).
fn heredoc_delimiters(text: &str) -> impl Iterator<Item = usize> + '_ {
    let b = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        loop {
            let at = text.get(i..)?.find("<<")?;
            let mut j = i + at + 2;
            i = j;
            if b.get(j) == Some(&b'<') {
                i += 1;
                continue; // a here-string
            }
            if b.get(j) == Some(&b'-') {
                j += 1;
            }
            while matches!(b.get(j), Some(b' ' | b'\t')) {
                j += 1;
            }
            return Some(j);
        }
    })
}

/// `<<` followed (after `-` and blanks) by a control character, an
/// operator character or nothing: brush-parser 0.4 can allocate without
/// end on such a delimiter (found by fuzzing: `<<\r(`), and no real
/// here-document is written so.
fn odd_heredoc_tag(text: &str) -> bool {
    let b = text.as_bytes();
    heredoc_delimiters(text).any(|j| match b.get(j) {
        None => true,
        Some(c) => c.is_ascii_control() || b"()<>;&|".contains(c),
    })
}

/// A `<<` (not a here-string's `<<<`) with no newline after it: a
/// here-document whose body never comes.
fn heredoc_without_body(text: &str) -> bool {
    let mut i = 0;
    while let Some(at) = text[i..].find("<<") {
        let end = i + at + 2;
        if !text[end..].starts_with('<') && !text[end..].contains('\n') {
            return true;
        }
        i = end + usize::from(text[end..].starts_with('<'));
    }
    false
}

/// `<<""`, `<<''` (also `<<-` and with spaces before the quotes).
fn empty_heredoc_tag(text: &str) -> bool {
    let b = text.as_bytes();
    heredoc_delimiters(text).any(|j| {
        matches!(
            (b.get(j), b.get(j + 1)),
            (Some(b'"'), Some(b'"')) | (Some(b'\''), Some(b'\''))
        )
    })
}

/// A run of digits right before `<` or `>` that does not fit a file
/// descriptor number (brush-parser 0.4 unwraps its parse and panics), if
/// the text has one. Any such run counts, wherever it stands: refusing a
/// line with one only errs on the safe side.
pub fn oversized_fd(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b != b'<' && b != b'>' {
            continue;
        }
        let start = bytes[..i]
            .iter()
            .rposition(|c| !c.is_ascii_digit())
            .map_or(0, |p| p + 1);
        if i - start >= 10 && text[start..i].parse::<i32>().is_err() {
            return Some(&text[start..i]);
        }
    }
    None
}

fn unmatched_open_parens(text: &str) -> usize {
    let (mut open, mut close) = (0usize, 0usize);
    let (mut single, mut double, mut comment) = (false, false, false);
    let mut prev = b' ';
    let mut chars = text.bytes().peekable();
    while let Some(c) = chars.next() {
        if comment {
            if c == b'\n' {
                comment = false;
            }
        } else if single {
            if c == b'\'' {
                single = false;
            }
        } else {
            match c {
                b'\\' => {
                    chars.next();
                }
                b'\'' if !double => single = true,
                b'"' => double = !double,
                b'#' if !double && prev.is_ascii_whitespace() => comment = true,
                b'(' if !double => open += 1,
                b')' if !double => close += 1,
                _ => {}
            }
        }
        prev = c;
    }
    open.saturating_sub(close)
}

/// Arithmetic text with its expansions (`$(…)`, `${…}`, `$x`, backticks)
/// replaced by `0`, to tell whether it is arithmetic at all.
fn arithmetic_shape(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'$' if b.get(i + 1) == Some(&b'(') => match closing_paren(b, i + 2) {
                Some(end) => {
                    out.push('0');
                    i = end + 1;
                }
                None => return text.to_string(),
            },
            b'$' if b.get(i + 1) == Some(&b'{') => match text[i..].find('}') {
                Some(end) => {
                    out.push('0');
                    i += end + 1;
                }
                None => return text.to_string(),
            },
            b'$' => {
                out.push('0');
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
            }
            b'`' => match text[i + 1..].find('`') {
                Some(end) => {
                    out.push('0');
                    i += end + 2;
                }
                None => return text.to_string(),
            },
            _ => {
                let ch = text[i..].chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    out
}

fn glob_class(t: &str) -> bool {
    t.find('[').is_some_and(|i| t[i..].contains(']'))
}

fn brace_expansion(t: &str) -> bool {
    t.find('{').is_some_and(|i| {
        let rest = &t[i..];
        rest.contains('}') && (rest.contains(',') || rest.contains(".."))
    })
}

/// The texts of the command substitutions in a word (`$(…)`, backticks,
/// `<(…)`, `>(…)`), wherever they sit outside single quotes — inside
/// double quotes, parameter and arithmetic expansions included. `$((…))`
/// gives its text twice: as arithmetic (searched for substitutions) and, as
/// bash falls back to when it is not arithmetic, as `$( (…) )` — a
/// subshell, marked `maybe` since arithmetic need not parse as commands.
/// `Err` when one is not closed.
pub fn substitutions(text: &str) -> Result<Vec<String>, String> {
    Ok(substitutions_marked(text)?
        .into_iter()
        .map(|(t, _)| t)
        .collect())
}

/// [`substitutions`], each with whether it may fail to parse as commands
/// (the subshell reading of `$((…))`).
fn substitutions_marked(text: &str) -> Result<Vec<(String, bool)>, String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut single = false;
    let mut double = false;
    while i < b.len() {
        let c = b[i];
        if single {
            if c == b'\'' {
                single = false;
            }
            i += 1;
            continue;
        }
        match c {
            b'\\' => i += 2,
            b'"' => {
                double = !double;
                i += 1;
            }
            b'\'' => {
                // Inside double quotes a single quote is plain text.
                if !double {
                    single = true;
                }
                i += 1;
            }
            b'$' | b'<' | b'>' if b.get(i + 1) == Some(&b'(') => {
                let arithmetic = c == b'$' && b.get(i + 2) == Some(&b'(');
                let start = i + 2;
                let end = closing_paren(b, start).ok_or_else(|| text.to_string())?;
                let inner = &text[start..end];
                if arithmetic {
                    // `$(( X ))`: arithmetic that may hold substitutions, or
                    // (when it is not arithmetic) a subshell running X.
                    let t = inner.trim();
                    let x = t
                        .strip_prefix('(')
                        .and_then(|r| r.strip_suffix(')'))
                        .unwrap_or(t);
                    out.extend(substitutions_marked(x)?);
                    out.push((x.to_string(), true));
                } else {
                    out.push((inner.to_string(), false));
                }
                i = end + 1;
            }
            b'`' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'`' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                if j >= b.len() {
                    return Err(text.to_string());
                }
                out.push((text[i + 1..j].replace("\\`", "`"), false));
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    Ok(out)
}

/// The index of the `)` closing a `(` just before `start`, skipping quotes
/// and nested parentheses.
fn closing_paren(b: &[u8], start: usize) -> Option<usize> {
    let mut depth = 1;
    let mut i = start;
    let mut single = false;
    let mut double = false;
    while i < b.len() {
        let c = b[i];
        if single {
            if c == b'\'' {
                single = false;
            }
        } else {
            match c {
                b'\\' => i += 1,
                b'\'' if !double => single = true,
                b'"' => double = !double,
                b'(' if !double => depth += 1,
                b')' if !double => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

impl Extractor<'_> {
    fn unknown(&mut self, construct: &str, text: &str) {
        self.out.push(Finding::Unknown {
            construct: construct.to_string(),
            text: text.to_string(),
        });
    }

    /// Parses `text` as a command line and extracts from it.
    fn program(&mut self, text: &str, via: Option<&str>) -> Result<(), ParseFailure> {
        if unmatched_open_parens(text) > MAX_UNMATCHED_PARENS {
            // brush-parser takes time exponential in a run of unclosed `(`;
            // such text cannot parse anyway.
            return Err(ParseFailure(format!(
                "more than {MAX_UNMATCHED_PARENS} `(` are never closed"
            )));
        }
        if let Some(why) = parser_trap(text) {
            return Err(ParseFailure(why));
        }
        if heredoc_without_body(text) {
            // brush-parser 0.4 can allocate without end on such text (found
            // by fuzzing): the rule check refuses it rather than risk nib.
            return Err(ParseFailure(
                "a here-document (<<) has no body after it (write its lines after the command line)".into(),
            ));
        }
        let mut parser =
            brush_parser::Parser::new(std::io::BufReader::new(text.as_bytes()), &options());
        let mut program = parser
            .parse_program()
            .map_err(|e| ParseFailure(e.to_string()))?;
        if let Some(v) = via {
            self.via.push(v.to_string());
        }
        walk(&mut program, self);
        if via.is_some() {
            self.via.pop();
        }
        Ok(())
    }

    /// Arithmetic text read as the subshell bash runs when it is not
    /// arithmetic. Text that is valid arithmetic is not commands: what it
    /// would make unknowable (`$x`) is dropped, the programs it would name
    /// still count (fail closed). Text that is not arithmetic is commands,
    /// read in full.
    fn maybe_commands(&mut self, text: &str) {
        if unmatched_open_parens(text) > MAX_UNMATCHED_PARENS
            || brush_parser::arithmetic::parse(&arithmetic_shape(text)).is_err()
        {
            self.nested(text, "$((…)) read as a subshell");
            return;
        }
        let before = self.out.len();
        let failure = self.failure.clone();
        let _ = self.program(text, Some("$((…)) read as a subshell"));
        self.failure = failure;
        let mut k = before;
        while k < self.out.len() {
            if matches!(self.out[k], Finding::Unknown { .. }) {
                self.out.remove(k);
            } else {
                k += 1;
            }
        }
    }

    /// Extracts from nested text; a nested parse failure fails the whole line.
    fn nested(&mut self, text: &str, via: &str) {
        if let Err(f) = self.program(text, Some(via)) {
            self.failure
                .get_or_insert(ParseFailure(format!("{} (in {via})", f.0)));
        }
    }

    /// Reads a script that the line runs, once.
    fn script(&mut self, path: &str, via: &str) {
        let p = self.ctx.cwd.join(path);
        if !self.read_scripts.insert(p.clone()) {
            return;
        }
        match std::fs::read_to_string(&p) {
            Ok(text) => self.nested(&text, via),
            Err(_) => self.unknown(&format!("{via} of a script that cannot be read"), path),
        }
    }

    /// A command with its words, and what it runs in turn.
    pub(crate) fn invocation(&mut self, name: &Arg, args: &[Arg], stdin_text: Option<&str>) {
        let Some(name_text) = name.literal() else {
            self.unknown("a command name built at run time", name.text());
            return;
        };
        self.out.push(Finding::Run(Invocation {
            name: name_text.to_string(),
            args: args.to_vec(),
            via: self.via.clone(),
        }));
        let base = crate::rules::base_name(name_text).to_string();
        // nibash's git-each runs git with the same words: rules on git hold.
        if base == "git-each" {
            let mut via = self.via.clone();
            via.push(base.clone());
            self.out.push(Finding::Run(Invocation {
                name: "git".to_string(),
                args: args.to_vec(),
                via,
            }));
        }
        match wrappers::inner(&base, args) {
            wrappers::Inner::None => {}
            wrappers::Inner::Command(i) => {
                self.via.push(base.clone());
                // The inner command inherits the wrapper's input.
                if let Some((n, rest)) = args[i..].split_first() {
                    self.invocation(n, rest, stdin_text);
                }
                self.via.pop();
            }
            wrappers::Inner::Commands(starts) => {
                self.via.push(base.clone());
                for (i, end) in starts {
                    if let Some((n, rest)) = args[i..end].split_first() {
                        self.invocation(n, rest, stdin_text);
                    }
                }
                self.via.pop();
            }
            wrappers::Inner::Candidates(from) => {
                // Options this wrapper takes are not all known: any later
                // literal word may be the command.
                self.via.push(format!("{base} (any of its words)"));
                for (k, a) in args.iter().enumerate().skip(from) {
                    if a.literal().is_some_and(|t| !t.starts_with('-')) {
                        self.invocation(a, &args[k + 1..], stdin_text);
                    }
                }
                self.via.pop();
            }
            wrappers::Inner::Text(i) => match args.get(i).and_then(Arg::literal) {
                Some(t) => {
                    let t = t.to_string();
                    self.nested(&t, &format!("{base} -c"));
                }
                None => self.unknown(&format!("{base} running text built at run time"), name_text),
            },
            wrappers::Inner::JoinedText(i) => {
                let parts: Option<Vec<&str>> = args[i..].iter().map(Arg::literal).collect();
                match parts {
                    Some(p) => {
                        let t = p.join(" ");
                        self.nested(&t, &base);
                    }
                    None => self.unknown(&format!("{base} of text built at run time"), name_text),
                }
            }
            wrappers::Inner::Script(i) => match args.get(i).and_then(Arg::literal) {
                Some(path) => {
                    let path = path.to_string();
                    self.script(&path, &base);
                }
                None => self.unknown(&format!("{base} of a script named at run time"), name_text),
            },
            wrappers::Inner::Stdin => match stdin_text {
                Some(t) => {
                    let t = t.to_string();
                    self.nested(&t, &format!("{base} reading a here-document"));
                }
                None => self.unknown(
                    &format!("{base} reading its commands from its input (a pipe or a file)"),
                    name_text,
                ),
            },
            wrappers::Inner::Alias(i) => {
                for a in &args[i..] {
                    match a.literal() {
                        Some(def) => {
                            if let Some((_, value)) = def.split_once('=') {
                                let v = value.to_string();
                                self.nested(&v, "alias");
                            }
                        }
                        None => self.unknown("an alias defined at run time", a.text()),
                    }
                }
            }
            wrappers::Inner::Refuse(what) => self.unknown(what, name_text),
        }
    }
}

fn arg_of(w: &Word) -> Arg {
    match literal(&w.value) {
        Some(v) => Arg::Literal(v),
        None => Arg::Dynamic(w.value.clone()),
    }
}

impl VisitMut for Extractor<'_> {
    fn simple(&mut self, s: &mut SimpleCommand) {
        let Some(name) = &s.word_or_name else {
            return;
        };
        let name = arg_of(name);
        let mut args = Vec::new();
        let mut stdin_text: Option<String> = None;
        for item in s.suffix.iter().flat_map(|x| x.0.iter()) {
            match item {
                CommandPrefixOrSuffixItem::Word(w) => args.push(arg_of(w)),
                CommandPrefixOrSuffixItem::AssignmentWord(_, w) => args.push(arg_of(w)),
                CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                    args.push(Arg::Dynamic("<(…)".into()))
                }
                CommandPrefixOrSuffixItem::IoRedirect(r) => match r {
                    IoRedirect::HereDocument(_, doc) => stdin_text = Some(doc.doc.value.clone()),
                    IoRedirect::HereString(_, w) => {
                        stdin_text = Some(literal(&w.value).unwrap_or_else(|| w.value.clone()))
                    }
                    _ => {}
                },
            }
        }
        for item in s.prefix.iter().flat_map(|x| x.0.iter()) {
            if let CommandPrefixOrSuffixItem::IoRedirect(IoRedirect::HereDocument(_, doc)) = item {
                stdin_text = Some(doc.doc.value.clone());
            }
        }
        self.invocation(&name, &args, stdin_text.as_deref());
    }

    fn arithmetic(&mut self, expr: &mut brush_parser::ast::UnexpandedArithmeticExpr) {
        // brush reads `( ( a ) )` as arithmetic; bash (in a nested shell)
        // runs it as subshells: extract both readings.
        let text = expr.value.clone();
        match substitutions(&text) {
            Ok(subs) => {
                for s in subs {
                    self.nested(&s, "$(…)");
                }
            }
            Err(t) => self.unknown("a command substitution that is not closed", &t),
        }
        self.maybe_commands(&text);
    }

    fn word(&mut self, w: &mut Word) {
        match substitutions_marked(&w.value) {
            Ok(subs) => {
                for (s, maybe) in subs {
                    if maybe {
                        self.maybe_commands(&s);
                    } else {
                        self.nested(&s, "$(…)");
                    }
                }
            }
            Err(t) => self.unknown("a command substitution that is not closed", &t),
        }
    }
}

#[cfg(test)]
mod oversized {
    use super::*;

    #[test]
    fn file_descriptors_too_large_for_the_parser_are_found_first() {
        assert_eq!(oversized_fd("echo 99999999999>x"), Some("99999999999"));
        assert_eq!(
            oversized_fd("cat 3333333333333333<in"),
            Some("3333333333333333")
        );
        assert_eq!(oversized_fd("echo 2147483647>x"), None, "fits an i32");
        assert_eq!(oversized_fd("echo 2>x; ls 10>y"), None);
        // The input the fuzzer found: no panic, a refusal.
        let crash = "\u{ff}Ue$U33333333333ssssss33333333&&33333333333333333>33333U\u{e2}";
        assert!(oversized_fd(crash).is_some());
        // And the one that ran out of memory.
        // And a third: a delimiter that starts with a control or operator character.
        for t in [
            "\u{ff}e!&<<\"\" ",
            "cat <<'' x",
            "cat <<- \"\" x",
            "\u{fb}<\u{cd}\n\0r\0\u{8}\n\0r(\u{11}\u{8}<<\r(o\0=\"*\n\" ",
            "cat << (x)\nbody\n",
            "cat <<-\t|x\nbody\n",
        ] {
            assert!(parser_trap(t).is_some(), "{t:?}");
        }
        for t in [
            "cat <<EOF\nx\nEOF\n",
            "cat <<< ''",
            "cat <<'E'\nx\nE\n",
            "cat <<-  \\EOF\nx\nEOF\n",
            "a <<<b <<c\nx\nc\n",
        ] {
            assert!(parser_trap(t).is_none(), "{t:?}");
        }
        // The second input that ran out of memory: a here-document with no body.
        assert!(heredoc_without_body(
            "\u{fb}\n\0r(\u{11}\u{8}<<\r(o)\u{8}\0-c "
        ));
        assert!(!heredoc_without_body("cat <<EOF\nx\nEOF"));
        assert!(!heredoc_without_body("cat <<< x"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        let ctx = Context {
            cwd: std::env::temp_dir(),
        };
        match extract(text, &ctx) {
            Ok(f) => f
                .into_iter()
                .map(|f| match f {
                    Finding::Run(i) => i.name,
                    Finding::Unknown { construct, .. } => format!("?{construct}"),
                })
                .collect(),
            Err(e) => vec![format!("!{e}")],
        }
    }

    #[test]
    fn commands_are_found_in_every_construct() {
        assert_eq!(names("a | b && c || d; e &"), ["a", "b", "c", "d", "e"]);
        assert_eq!(names("(a; { b; }) > f"), ["a", "b"]);
        assert_eq!(
            names("if a; then b; elif c; then d; else e; fi"),
            ["a", "b", "c", "d", "e"]
        );
        assert_eq!(
            names("for x in 1; do a; done; while b; do c; done"),
            ["a", "b", "c"]
        );
        assert_eq!(names("case x in y) a;; esac"), ["a"]);
        assert_eq!(names("( ( a ) )"), ["a"]);
        assert_eq!(names("(( x + $(a) ))"), ["a", "x", "a"]);
        assert_eq!(names("f() { a; }; f"), ["a", "f"]);
        assert_eq!(names("echo $(a \"$(b)\") `c`"), ["echo", "a", "b", "c"]);
        assert_eq!(
            names("x=$(a); echo ${y:-$(b)} $(( $(c) + 1 ))"),
            ["a", "echo", "b", "c", "c"]
        );
        // `$((` that is a subshell in a command substitution.
        assert_eq!(names("echo $(( a --flag ))"), ["echo", "a"]);
        assert_eq!(names("diff <(a) >(b)"), ["diff", "a", "b"]);
        assert_eq!(names("cat <<EOF\n$(a)\nEOF\n"), ["cat", "a"]);
    }

    #[test]
    fn git_each_is_git_to_the_rules() {
        assert_eq!(names("git-each push --force"), ["git-each", "git"]);
    }

    #[test]
    fn wrappers_nested_shells_and_eval_are_seen_through() {
        assert_eq!(names("env -i X=1 a"), ["env", "a"]);
        assert_eq!(names("env -S 'a b'"), ["env", "a"]);
        assert_eq!(
            names("timeout -s KILL 5 nice -n 3 a"),
            ["timeout", "nice", "a"]
        );
        assert_eq!(names("xargs -I{} -n1 a {}"), ["xargs", "a"]);
        assert_eq!(
            names("find . -name x -exec a {} \\; -execdir b {} +"),
            ["find", "a", "b"]
        );
        assert_eq!(names("sudo -u root a"), ["sudo", "a"]);
        assert_eq!(names("bash -c 'a; b'"), ["bash", "a", "b"]);
        assert_eq!(names("sh -c \"sh -c 'a'\""), ["sh", "sh", "a"]);
        assert_eq!(names("eval 'a' b"), ["eval", "a"]);
        assert_eq!(names("bash <<< 'a'"), ["bash", "a"]);
        assert_eq!(names("bash <<EOF\na\nEOF\n"), ["bash", "a"]);
        assert_eq!(names("watch -n 1 a b"), ["watch", "a"]);
        assert_eq!(names("flock /tmp/l -c 'a'"), ["flock", "a"]);
        assert_eq!(
            names("command a; builtin b; exec c; time d; nohup e"),
            [
                "command", "a", "builtin", "b", "exec", "c", "d", "nohup", "e"
            ]
        );
        assert_eq!(names("alias x='a b'"), ["alias", "a"]);
        assert_eq!(names("trap 'a' EXIT"), ["trap", "a"]);
    }

    #[test]
    fn names_known_only_at_run_time_are_unknown() {
        assert_eq!(names("$x y"), ["?a command name built at run time"]);
        assert_eq!(names("gra\"$y\" x"), ["?a command name built at run time"]);
        assert_eq!(names("gr*le"), ["?a command name built at run time"]);
        assert_eq!(
            names("eval \"$cmd\""),
            ["eval", "?eval of text built at run time"]
        );
        assert_eq!(
            names("echo a | sh"),
            [
                "echo",
                "sh",
                "?sh reading its commands from its input (a pipe or a file)"
            ]
        );
        assert_eq!(
            names("hash -p /bin/a x"),
            ["hash", "?hash -p maps a name to another program"]
        );
        assert!(names("echo 'unclosed").iter().any(|n| n.starts_with('!')));
        // Unclosed runs of `(` are refused at once (the parser would take
        // exponential time), including inside nested text.
        let t = std::time::Instant::now();
        assert!(
            names(&format!("e>{}", "(".repeat(40)))
                .iter()
                .any(|n| n.starts_with('!'))
        );
        assert!(
            names(&format!("bash -c '{}'", "(".repeat(40)))
                .iter()
                .any(|n| n.starts_with('!'))
        );
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(names("echo x # ((((((((((\na"), ["echo", "a"]);
    }

    #[test]
    fn quoting_is_removed_from_literal_names() {
        assert_eq!(literal("'gr'a\\dle"), Some("gradle".into()));
        assert_eq!(literal("\"gradle\""), Some("gradle".into()));
        assert_eq!(literal("$x"), None);
        assert_eq!(literal("{a,b}"), None);
        assert_eq!(
            substitutions("'$(a)' \"$(b)\"").ok(),
            Some(vec!["b".to_string()])
        );
    }
}
