//! stderr sent to `/dev/null`, kept aside: before the command line runs, each
//! `2>/dev/null` (and `2>>/dev/null`) in its syntax tree is pointed at a
//! capture file of its own in the worker's temp folder instead. When the
//! call fails, the first line the most recent of them caught is quoted in
//! the closing line (`[exit 2, its stderr discarded: "…"]`); the output
//! itself stays without it, as the command line asked.
//!
//! Only the parsed command line is rewritten: commands inside `$(…)`,
//! `eval` strings and scripts it runs keep their `/dev/null`.

use std::path::{Path, PathBuf};

use brush_parser::ast::{IoFileRedirectKind, IoFileRedirectTarget, IoRedirect, Program};

/// Where a call's discarded stderr goes.
pub struct Captures {
    dir: PathBuf,
    files: Vec<PathBuf>,
}

impl Captures {
    /// Captures in `dir` (the worker's temp folder).
    pub fn new(dir: &Path) -> Captures {
        Captures {
            dir: dir.to_path_buf(),
            files: Vec::new(),
        }
    }

    /// Points every `2>/dev/null` of the program at a capture file.
    pub fn rewrite(&mut self, program: &mut Program) {
        nib_policy::ast::walk(program, self);
    }
}

impl nib_policy::ast::VisitMut for Captures {
    fn redirect(&mut self, r: &mut IoRedirect) {
        if let IoRedirect::File(
            Some(2),
            kind @ (IoFileRedirectKind::Write
            | IoFileRedirectKind::Append
            | IoFileRedirectKind::Clobber),
            IoFileRedirectTarget::Filename(word),
        ) = r
            && word.value == "/dev/null"
        {
            let file = self.dir.join(format!(
                "nib-stderr-{}-{}",
                std::process::id(),
                self.files.len()
            ));
            // The path is made of plain characters: no quoting needed.
            word.value = file.display().to_string();
            *kind = IoFileRedirectKind::Append;
            self.files.push(file);
        }
    }
}

impl Captures {
    /// The first line of the most recently written capture, if any caught text.
    pub fn last_line(&self) -> Option<String> {
        let newest = self
            .files
            .iter()
            .filter_map(|f| {
                let m = std::fs::metadata(f).ok()?;
                (m.len() > 0).then(|| (m.modified().ok(), f))
            })
            .max_by_key(|(t, _)| *t)?
            .1;
        let text = std::fs::read(newest).ok()?;
        let line = String::from_utf8_lossy(&text)
            .lines()
            .find(|l| !l.trim().is_empty())?
            .chars()
            .take(300)
            .collect();
        Some(line)
    }
}

impl Drop for Captures {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Program {
        let mut p = brush_parser::Parser::new(
            std::io::BufReader::new(text.as_bytes()),
            &brush_parser::ParserOptions::default(),
        );
        match p.parse_program() {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn stderr_to_dev_null_is_pointed_at_captures_everywhere_in_the_tree() {
        let mut prog = parse(
            "cat x 2>/dev/null; if true; then ls y 2>>/dev/null; fi; { echo; } 2>/dev/null; f() { a 2>/dev/null; }; echo 2>/tmp/keep >/dev/null",
        );
        let mut c = Captures::new(Path::new("/cap"));
        c.rewrite(&mut prog);
        assert_eq!(c.files.len(), 4);
        let text = prog.to_string().replace("> ", ">");
        assert!(
            !text.contains("2>/dev/null") && !text.contains("2>>/dev/null"),
            "{text}"
        );
        assert!(
            text.contains("2>/tmp/keep") && text.contains(">/dev/null"),
            "{text}"
        );
        assert!(text.contains("2>>/cap/nib-stderr-"), "{text}");
    }
}
