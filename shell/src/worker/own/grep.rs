//! The grep family (`grep`, `egrep`, `fgrep`) and `rg` read as one grep
//! tool call: the pattern (a basic regular expression turned extended; `-w`
//! and `-x` as anchors around it), the paths, the globs, the context and the
//! mode (`-l`, `-c`). `None` (the system program runs) on an option it does
//! not know, stdin, a folder without `-r`, or a file nib should not show as
//! rows. Running the call is `answer`'s; the line commands are `lines`'.

use std::path::Path;

use nib_files::tools::grep::{GrepRequest, Mode};

use super::call::{Call, is_log, text_file};

/// Turns a basic regular expression (grep's default) into the extended
/// syntax the grep tool reads.
fn bre_to_ere(bre: &str) -> String {
    let mut out = String::new();
    let mut chars = bre.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('(' | ')' | '|' | '{' | '}' | '+' | '?')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '|' | '{' | '}' | '+' | '?' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// `grep`, `egrep`, `fgrep` and their options.
pub(super) fn plan_grep(name: &str, args: &[String], cwd: &Path) -> Option<Call> {
    let mut extended = name == "egrep";
    let mut literal = name == "fgrep";
    let (mut ignore_case, mut recursive, mut word, mut line) = (false, false, false, false);
    let (mut before, mut after) = (0usize, 0usize);
    let mut mode = Mode::Content;
    let mut pattern: Option<String> = None;
    let mut globs: Vec<String> = Vec::new();
    let mut operands: Vec<&str> = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let a = args[i].as_str();
        let mut next = || -> Option<String> {
            i += 1;
            args.get(i).cloned()
        };
        if options_done || !a.starts_with('-') || a == "-" {
            operands.push(a);
        } else if a == "--" {
            options_done = true;
        } else if let Some(g) = a.strip_prefix("--include=") {
            globs.push(g.to_string());
        } else if let Some(g) = a.strip_prefix("--exclude=") {
            globs.push(format!("!{g}"));
        } else if a == "-e" || a == "--regexp" {
            if pattern.is_some() {
                return None;
            }
            pattern = Some(next()?);
        } else if let Some(p) = a.strip_prefix("--regexp=") {
            pattern = Some(p.to_string());
        } else if matches!(a, "-A" | "-B" | "-C") {
            let n: usize = next()?.parse().ok()?;
            match a {
                "-A" => after = n,
                "-B" => before = n,
                _ => (before, after) = (n, n),
            }
        } else if a.starts_with("--") {
            match a {
                "--ignore-case" => ignore_case = true,
                "--recursive" => recursive = true,
                "--line-number" | "--with-filename" | "--color=never" | "--no-messages" => {}
                "--fixed-strings" => literal = true,
                "--extended-regexp" => extended = true,
                "--word-regexp" => word = true,
                "--line-regexp" => line = true,
                "--files-with-matches" => mode = Mode::Files,
                "--count" => mode = Mode::Count,
                _ => return None,
            }
        } else {
            let flags: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < flags.len() {
                match flags[k] {
                    'i' | 'y' => ignore_case = true,
                    'r' | 'R' => recursive = true,
                    'n' | 'H' | 's' => {}
                    'E' => extended = true,
                    'F' => literal = true,
                    'G' => extended = false,
                    'P' => extended = true,
                    'w' => word = true,
                    'x' => line = true,
                    'l' => mode = Mode::Files,
                    'c' => mode = Mode::Count,
                    c @ ('A' | 'B' | 'C') => {
                        let rest: String = flags[k + 1..].iter().collect();
                        let n: usize = if rest.is_empty() {
                            next()?.parse().ok()?
                        } else {
                            rest.parse().ok()?
                        };
                        match c {
                            'A' => after = n,
                            'B' => before = n,
                            _ => (before, after) = (n, n),
                        }
                        k = flags.len();
                        continue;
                    }
                    d if d.is_ascii_digit() => {
                        let n: usize = flags[k..].iter().collect::<String>().parse().ok()?;
                        (before, after) = (n, n);
                        k = flags.len();
                        continue;
                    }
                    _ => return None,
                }
                k += 1;
            }
        }
        i += 1;
    }
    let mut operands = operands.into_iter();
    let pattern = match pattern {
        Some(p) => p,
        None => operands.next()?.to_string(),
    };
    let mut paths: Vec<String> = Vec::new();
    for p in operands {
        let full = cwd.join(p);
        let meta = std::fs::metadata(&full).ok()?;
        if meta.is_dir() && !recursive {
            return None;
        }
        if meta.is_file() && (is_log(&full) || text_file(p, cwd).is_none()) {
            return None;
        }
        paths.push(full.display().to_string());
    }
    if paths.is_empty() {
        if !recursive {
            return None;
        }
        paths.push(cwd.display().to_string());
    }
    let mut regex = if literal || extended {
        pattern
    } else {
        bre_to_ere(&pattern)
    };
    if word || line {
        if literal {
            regex = escape_regex(&regex);
            literal = false;
        }
        regex = if line {
            format!("^(?:{regex})$")
        } else {
            format!(r"\b(?:{regex})\b")
        };
    }
    grep_call(GrepAsk {
        pattern: regex,
        paths,
        globs,
        ignore_case,
        literal,
        before,
        after,
        mode,
    })
}

/// `text` with every regular-expression character escaped.
fn escape_regex(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What a grep-family command line asks the grep tool for.
struct GrepAsk {
    pattern: String,
    paths: Vec<String>,
    globs: Vec<String>,
    ignore_case: bool,
    literal: bool,
    before: usize,
    after: usize,
    mode: Mode,
}

/// The grep tool call for `ask`.
fn grep_call(ask: GrepAsk) -> Option<Call> {
    let GrepAsk {
        pattern,
        paths,
        globs,
        ignore_case,
        literal,
        before,
        after,
        mode,
    } = ask;
    let mut request = GrepRequest::new(pattern);
    request.paths = paths;
    request.globs = globs;
    request.ignore_case = ignore_case;
    request.literal = literal;
    request.before = before;
    request.after = after;
    request.mode = mode;
    Some(Call::Grep(request))
}

/// `rg` and its options.
pub(super) fn plan_rg(args: &[String], cwd: &Path) -> Option<Call> {
    let (mut ignore_case, mut literal, mut word) = (false, false, false);
    let (mut before, mut after) = (0usize, 0usize);
    let mut mode = Mode::Content;
    let mut globs = Vec::new();
    let mut operands: Vec<&str> = Vec::new();
    let mut pattern: Option<String> = None;
    let mut no_ignore = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut next = || -> Option<String> {
            i += 1;
            args.get(i).cloned()
        };
        match a {
            "-i" | "--ignore-case" | "-S" | "--smart-case" => ignore_case = a.contains('i'),
            "-F" | "--fixed-strings" => literal = true,
            "-w" | "--word-regexp" => word = true,
            "-n" | "--line-number" | "--hidden" | "-." => {}
            "-u" | "--no-ignore" => no_ignore = true,
            "-l" | "--files-with-matches" => mode = Mode::Files,
            "-c" | "--count" => mode = Mode::Count,
            "-g" | "--glob" => globs.push(next()?),
            "-e" | "--regexp" => pattern = Some(next()?),
            "-A" => after = next()?.parse().ok()?,
            "-B" => before = next()?.parse().ok()?,
            "-C" => {
                let n: usize = next()?.parse().ok()?;
                (before, after) = (n, n);
            }
            _ if a.starts_with('-') && a.len() > 1 => return None,
            _ => operands.push(a),
        }
        i += 1;
    }
    let mut operands = operands.into_iter();
    let mut regex = match pattern {
        Some(p) => p,
        None => operands.next()?.to_string(),
    };
    let mut paths = Vec::new();
    for p in operands {
        let full = cwd.join(p);
        let meta = std::fs::metadata(&full).ok()?;
        if meta.is_file() && (is_log(&full) || text_file(p, cwd).is_none()) {
            return None;
        }
        paths.push(full.display().to_string());
    }
    if paths.is_empty() {
        paths.push(cwd.display().to_string());
    }
    if word {
        if literal {
            regex = escape_regex(&regex);
            literal = false;
        }
        regex = format!(r"\b(?:{regex})\b");
    }
    let mut call = grep_call(GrepAsk {
        pattern: regex,
        paths,
        globs,
        ignore_case,
        literal,
        before,
        after,
        mode,
    })?;
    if let Call::Grep(request) = &mut call {
        request.no_ignore = no_ignore;
    }
    Some(call)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_regular_expressions_become_extended() {
        assert_eq!(bre_to_ere(r"a\(b\|c\)+"), r"a(b|c)\+");
        assert_eq!(bre_to_ere(r"x\{2\}"), "x{2}");
        assert_eq!(bre_to_ere(r"\.\*"), r"\.\*");
    }
}
