//! Two spellings nibash adds to bash, rewritten in the parsed command line
//! before it runs:
//!
//! - `$!` (and `${!}`) is the job spec of this call (`%3`): the number a
//!   later call's `wait`, `kill` or `jobs` knows it by, should the call
//!   leave jobs running. Within the call, `wait %3` and `kill %3` mean the
//!   latest job it started (see `builtins`).
//! - `~name/…` at the start of an unquoted word is the named directory
//!   `name` (from `hash -d`); programs receive the real path.

use std::collections::BTreeMap;
use std::path::PathBuf;

use brush_parser::ast::Word;

/// The rewrites for one call.
pub struct Words<'a> {
    /// This call's job number.
    pub job: u32,
    /// Named directories.
    pub names: &'a BTreeMap<String, PathBuf>,
}

/// Quotes a path for the shell (single quotes; `'` as `'\''`).
fn quote(path: &str) -> String {
    format!("'{}'", path.replace('\'', r"'\''"))
}

impl Words<'_> {
    /// `$!` and `${!}` outside single quotes become `%N`.
    pub fn last_job(&self, text: &str) -> String {
        let spec = format!("%{}", self.job);
        let mut out = String::with_capacity(text.len());
        let mut single = false;
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '\'' if !single && !in_double(text, i) => {
                    single = true;
                    out.push(c);
                }
                '\'' if single => {
                    single = false;
                    out.push(c);
                }
                '\\' if !single => {
                    out.push(c);
                    if let Some((_, n)) = chars.next() {
                        out.push(n);
                    }
                }
                '$' if !single && text[i..].starts_with("$!") => {
                    out.push_str(&spec);
                    chars.next();
                }
                '$' if !single && text[i..].starts_with("${!}") => {
                    out.push_str(&spec);
                    for _ in 0..3 {
                        chars.next();
                    }
                }
                _ => out.push(c),
            }
        }
        out
    }

    /// `~name` or `~name/rest` at the start of a word, for a known name.
    pub fn named_dir(&self, text: &str) -> Option<String> {
        let rest = text.strip_prefix('~')?;
        let (name, tail) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let dir = self.names.get(name)?;
        Some(format!("{}{tail}", quote(&dir.display().to_string())))
    }
}

/// Whether byte `at` of `text` lies inside double quotes (before it, an odd
/// number of unescaped `"` outside single quotes).
fn in_double(text: &str, at: usize) -> bool {
    let mut double = false;
    let mut single = false;
    let mut escaped = false;
    for c in text[..at].chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if !single => escaped = true,
            '"' if !single => double = !double,
            '\'' if !double => single = !single,
            _ => {}
        }
    }
    double
}

impl nib_command_rules::ast::VisitMut for Words<'_> {
    fn word(&mut self, w: &mut Word) {
        if let Some(v) = self.named_dir(&w.value) {
            w.value = v;
        }
        if w.value.contains("$!") || w.value.contains("${!}") {
            w.value = self.last_job(&w.value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_job_is_a_job_spec_except_in_single_quotes() {
        let names = BTreeMap::new();
        let w = Words {
            job: 3,
            names: &names,
        };
        assert_eq!(w.last_job("$!"), "%3");
        assert_eq!(w.last_job("\"pid $!\""), "\"pid %3\"");
        assert_eq!(w.last_job("${!}x"), "%3x");
        assert_eq!(w.last_job("'$!'"), "'$!'");
        assert_eq!(w.last_job("\"it's $!\""), "\"it's %3\"");
        assert_eq!(w.last_job("\\$!"), "\\$!");
    }

    #[test]
    fn named_directories_expand_at_the_start_of_a_word() {
        let mut names = BTreeMap::new();
        names.insert("orm".to_string(), PathBuf::from("/p/o r'm"));
        let w = Words {
            job: 1,
            names: &names,
        };
        assert_eq!(
            w.named_dir("~orm/a.java"),
            Some(r"'/p/o r'\''m'/a.java".into())
        );
        assert_eq!(w.named_dir("~orm"), Some(r"'/p/o r'\''m'".into()));
        assert_eq!(w.named_dir("~other/x"), None);
        assert_eq!(w.named_dir("x~orm"), None);
    }
}
