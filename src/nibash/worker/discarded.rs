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

use brush_parser::ast::{
    Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, Program, RedirectList,
};

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
        for list in &mut program.complete_commands {
            self.list(list);
        }
    }

    fn list(&mut self, list: &mut CompoundList) {
        for item in &mut list.0 {
            let and_or = &mut item.0;
            for c in &mut and_or.first.seq {
                self.command(c);
            }
            for next in &mut and_or.additional {
                let p = match next {
                    brush_parser::ast::AndOr::And(p) | brush_parser::ast::AndOr::Or(p) => p,
                };
                for c in &mut p.seq {
                    self.command(c);
                }
            }
        }
    }

    fn command(&mut self, c: &mut Command) {
        match c {
            Command::Simple(s) => {
                let items = s
                    .prefix
                    .iter_mut()
                    .flat_map(|p| p.0.iter_mut())
                    .chain(s.suffix.iter_mut().flat_map(|x| x.0.iter_mut()));
                for item in items {
                    if let CommandPrefixOrSuffixItem::IoRedirect(r) = item {
                        self.redirect(r);
                    }
                }
            }
            Command::Compound(cc, redirects) => {
                self.compound(cc);
                self.redirects(redirects.as_mut());
            }
            Command::Function(f) => {
                self.compound(&mut f.body.0);
                self.redirects(f.body.1.as_mut());
            }
            Command::ExtendedTest(_, redirects) => self.redirects(redirects.as_mut()),
        }
    }

    fn compound(&mut self, cc: &mut CompoundCommand) {
        match cc {
            CompoundCommand::Arithmetic(_) => {}
            CompoundCommand::ArithmeticForClause(f) => self.list(&mut f.body.list),
            CompoundCommand::BraceGroup(b) => self.list(&mut b.list),
            CompoundCommand::Subshell(s) => self.list(&mut s.list),
            CompoundCommand::ForClause(f) => self.list(&mut f.body.list),
            CompoundCommand::CaseClause(c) => {
                for item in &mut c.cases {
                    if let Some(l) = &mut item.cmd {
                        self.list(l);
                    }
                }
            }
            CompoundCommand::IfClause(i) => {
                self.list(&mut i.condition);
                self.list(&mut i.then);
                for e in i.elses.iter_mut().flatten() {
                    if let Some(cond) = &mut e.condition {
                        self.list(cond);
                    }
                    self.list(&mut e.body);
                }
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&mut w.0);
                self.list(&mut w.1.list);
            }
            CompoundCommand::Coprocess(c) => self.command(&mut c.body),
        }
    }

    fn redirects(&mut self, list: Option<&mut RedirectList>) {
        for r in list.into_iter().flat_map(|l| l.0.iter_mut()) {
            self.redirect(r);
        }
    }

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
