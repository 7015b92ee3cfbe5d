//! stderr sent to `/dev/null`, kept aside: before the command line runs, each
//! `2>/dev/null` (and `2>>/dev/null`) in its syntax tree is pointed at a
//! capture file of its own in the worker's temp folder instead, and the
//! command it belongs to is wrapped as `{ CMD 2>>CAPTURE; __nib_discarded N $? T "$_"; }`
//! so its status is known (the builtin records it and returns it unchanged:
//! `$?`, `set -e`, `if` and `||` see what they would have seen). Every such
//! command that failed — whatever the call's own status — is named in the
//! closing line with the first line it wrote there, unless the script tests
//! its status itself (T is 1: an `if`, `while` or `until` condition, `!`, the
//! left of `&&`/`||`), as bash would say nothing of it
//! (`[exit 0; cat exited 1, its stderr discarded: "…"]`); the output itself
//! stays without it, as the command line asked.
//!
//! Only the parsed command line is rewritten: commands inside `$(…)`,
//! `eval` strings and scripts it runs keep their `/dev/null`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use brush_parser::ast::{
    AndOr, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, Program,
};

/// The builtin a wrapped command reports its status to.
pub const BUILTIN: &str = "__nib_discarded";

/// The statuses wrapped commands ended with, by capture index (the last
/// run), and whether the script tests that status itself.
static STATUSES: Mutex<Vec<Option<(i32, bool)>>> = Mutex::new(Vec::new());

/// Records that the command of capture `index` ended with `status`;
/// `tested`: its status decides what the script does next (`if`, `while`,
/// `!`, the left of `&&`/`||`), so its failure is the script's to handle.
pub fn record(index: usize, status: i32, tested: bool) {
    let mut s = STATUSES.lock().unwrap_or_else(|p| p.into_inner());
    if s.len() <= index {
        s.resize(index + 1, None);
    }
    s[index] = Some((status, tested));
}

/// How many failures the closing line names before it only counts.
const NAMED: usize = 3;

/// Where a call's discarded stderr goes.
pub struct Captures {
    dir: PathBuf,
    /// Makes the file names this call's own: the broker's mark for the call
    /// (the worker's pid is the same, 2, in every worker's PID namespace,
    /// and unconfined workers share the system's temp folder).
    call: String,
    files: Vec<PathBuf>,
    /// The command each capture belongs to (its name as written).
    names: Vec<String>,
}

impl Captures {
    /// Captures in `dir` (the worker's temp folder) for the call `call`
    /// (letters, digits and `-`; anything else is dropped).
    pub fn new(dir: &Path, call: &str) -> Captures {
        Captures {
            dir: dir.to_path_buf(),
            call: call
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect(),
            files: Vec::new(),
            names: Vec::new(),
        }
    }

    /// Points every `2>/dev/null` of the program at a capture file, and wraps
    /// its command so its status is recorded.
    pub fn rewrite(&mut self, program: &mut Program) {
        nib_command_rules::ast::walk(program, self);
        for list in &mut program.complete_commands {
            tested_list(list, false);
        }
    }

    /// The capture index of a redirection this rewrite made, if it is one.
    fn index_of(&self, r: &IoRedirect) -> Option<usize> {
        let IoRedirect::File(Some(2), _, IoFileRedirectTarget::Filename(word)) = r else {
            return None;
        };
        self.files
            .iter()
            .position(|f| f.as_os_str() == word.value.as_str())
    }
}

/// Marks the wrappers whose command's status the script tests: the last
/// pipeline of a list whose status is tested, every pipeline but the last
/// of an `&&`/`||` chain, a `!` pipeline, an `if`/`while`/`until`
/// condition. Bodies of loops, cases and functions are not tested.
fn tested_list(list: &mut CompoundList, tested: bool) {
    let n = list.0.len();
    for (i, item) in list.0.iter_mut().enumerate() {
        let and_or = &mut item.0;
        let count = 1 + and_or.additional.len();
        let pipelines = std::iter::once(&mut and_or.first).chain(and_or.additional.iter_mut().map(
            |a| match a {
                AndOr::And(p) | AndOr::Or(p) => p,
            },
        ));
        for (k, p) in pipelines.enumerate() {
            let tested = p.bang || k + 1 < count || (tested && i + 1 == n);
            let last = p.seq.len().saturating_sub(1);
            for (j, c) in p.seq.iter_mut().enumerate() {
                tested_command(c, tested && j == last);
            }
        }
    }
}

fn tested_command(c: &mut Command, tested: bool) {
    let Command::Compound(compound, _) = c else {
        return;
    };
    match compound {
        CompoundCommand::BraceGroup(g) => {
            if let Some(flag) = wrapper_flag(&mut g.list) {
                if tested {
                    flag.value = "1".into();
                }
                if let Some(item) = g.list.0.first_mut() {
                    for inner in &mut item.0.first.seq {
                        tested_command(inner, tested);
                    }
                }
            } else {
                tested_list(&mut g.list, tested);
            }
        }
        CompoundCommand::Subshell(s) => tested_list(&mut s.list, tested),
        CompoundCommand::IfClause(i) => {
            tested_list(&mut i.condition, true);
            tested_list(&mut i.then, tested);
            for e in i.elses.iter_mut().flatten() {
                if let Some(cond) = &mut e.condition {
                    tested_list(cond, true);
                }
                tested_list(&mut e.body, tested);
            }
        }
        CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
            tested_list(&mut w.0, true);
            tested_list(&mut w.1.list, false);
        }
        _ => {}
    }
}

/// In a wrapper's list (`CMD; __nib_discarded N $? 0 "$_"`), the word that
/// says whether CMD's status is tested.
fn wrapper_flag(list: &mut CompoundList) -> Option<&mut brush_parser::ast::Word> {
    if list.0.len() != 2 {
        return None;
    }
    let Command::Simple(s) = list.0.get_mut(1)?.0.first.seq.first_mut()? else {
        return None;
    };
    if s.word_or_name.as_ref()?.value != BUILTIN {
        return None;
    }
    s.suffix
        .as_mut()?
        .0
        .iter_mut()
        .filter_map(|i| match i {
            CommandPrefixOrSuffixItem::Word(w) => Some(w),
            _ => None,
        })
        .nth(2)
}

/// The wrapper `{ :; __nib_discarded N $? 0 "$_"; }`, parsed, so its nodes
/// are whatever brush-parser makes of that text (the `0` becomes `1` where
/// the script tests the command's status; `"$_"` last keeps `$_` what the
/// command left, as the wrapper's own last word would otherwise be).
fn wrapper(index: usize) -> Option<Command> {
    let text = format!("{{ :; {BUILTIN} {index} $? 0 \"$_\"; }}");
    let mut parser = brush_parser::Parser::new(
        std::io::BufReader::new(text.as_bytes()),
        &brush_parser::ParserOptions::default(),
    );
    let program = parser.parse_program().ok()?;
    let mut list = program.complete_commands.into_iter().next()?;
    let item = list.0.drain(..).next()?;
    item.0.first.seq.into_iter().next()
}

/// Wraps the command `c` in place: it takes the wrapper's first slot (where
/// `:` stands). Left as it is when the wrapper cannot be built.
fn wrap(c: &mut Command, index: usize) {
    let Some(mut outer) = wrapper(index) else {
        return;
    };
    let Command::Compound(brush_parser::ast::CompoundCommand::BraceGroup(group), _) = &mut outer
    else {
        return;
    };
    let Some(slot) = group
        .list
        .0
        .first_mut()
        .and_then(|item| item.0.first.seq.first_mut())
    else {
        return;
    };
    std::mem::swap(slot, c);
    // `c` now holds `:`, the slot the command: put the wrapper in place.
    std::mem::swap(c, &mut outer);
}

impl nib_command_rules::ast::VisitMut for Captures {
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
                "nib-stderr-{}-{}-{}",
                self.call,
                std::process::id(),
                self.files.len()
            ));
            // The path is made of plain characters: no quoting needed.
            word.value = file.display().to_string();
            *kind = IoFileRedirectKind::Append;
            self.files.push(file);
            self.names.push(String::new());
        }
    }

    fn command(&mut self, c: &mut Command) {
        // The command's own redirections (not those of commands inside it).
        let (own, name): (Vec<&IoRedirect>, String) = match &*c {
            Command::Simple(s) => {
                let items = s
                    .prefix
                    .iter()
                    .flat_map(|p| p.0.iter())
                    .chain(s.suffix.iter().flat_map(|x| x.0.iter()));
                let redirects = items
                    .filter_map(|i| match i {
                        CommandPrefixOrSuffixItem::IoRedirect(r) => Some(r),
                        _ => None,
                    })
                    .collect();
                let name = s
                    .word_or_name
                    .as_ref()
                    .map(|w| w.value.clone())
                    .unwrap_or_default();
                // `exec 2>/dev/null` and a bare redirection change the shell
                // itself: nothing to wrap.
                if name.is_empty() || name == "exec" {
                    return;
                }
                (redirects, name)
            }
            Command::Compound(_, Some(list)) => (list.0.iter().collect(), "a group".to_string()),
            _ => return,
        };
        let Some(index) = own.iter().find_map(|r| self.index_of(r)) else {
            return;
        };
        if let Some(n) = self.names.get_mut(index) {
            *n = name;
        }
        wrap(c, index);
    }
}

impl Captures {
    /// The first line a capture caught, if it caught any text.
    fn first_line(&self, index: usize) -> Option<String> {
        let text = std::fs::read(self.files.get(index)?).ok()?;
        let line = String::from_utf8_lossy(&text)
            .lines()
            .find(|l| !l.trim().is_empty())?
            .chars()
            .take(300)
            .collect();
        Some(line)
    }

    /// The first line of the most recently written capture, if any caught text.
    pub fn last_line(&self) -> Option<String> {
        let newest = (0..self.files.len())
            .filter_map(|i| {
                let m = std::fs::metadata(&self.files[i]).ok()?;
                (m.len() > 0).then(|| (m.modified().ok(), i))
            })
            .max_by_key(|(t, _)| *t)?
            .1;
        self.first_line(newest)
    }

    /// The closing line's words for the commands that failed with their
    /// stderr discarded (`None` when none did), for a call that ended with
    /// `code`.
    pub fn report(&self, code: i32) -> Option<String> {
        let statuses = STATUSES.lock().unwrap_or_else(|p| p.into_inner()).clone();
        // A failure the script tests is the script's to handle, as in bash.
        let failed: Vec<(usize, i32)> = statuses
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.filter(|&(s, tested)| s != 0 && !tested)
                    .map(|(s, _)| (i, s))
            })
            .collect();
        if failed.is_empty() {
            // A failure that ended the line before its status was recorded
            // (`set -e`): the newest capture, as the call's own status.
            return self
                .last_line()
                .filter(|_| code != 0)
                .map(|line| format!("exit {code}, its stderr discarded: {line:?}"));
        }
        let mut parts: Vec<String> = failed
            .iter()
            .take(NAMED)
            .map(|&(i, s)| {
                let name = self.names.get(i).map(String::as_str).unwrap_or("a command");
                match self.first_line(i) {
                    Some(line) => format!("{name} exited {s}, its stderr discarded: {line:?}"),
                    None => format!("{name} exited {s}, its stderr discarded (it wrote nothing)"),
                }
            })
            .collect();
        if failed.len() > NAMED {
            parts.push(format!(
                "{} more commands failed with their stderr discarded",
                failed.len() - NAMED
            ));
        }
        Some(format!("exit {code}; {}", parts.join("; ")))
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
        let mut c = Captures::new(Path::new("/cap"), "m1");
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
        // Each command is wrapped so its status is recorded, in order.
        for i in 0..4 {
            assert!(text.contains(&format!("{BUILTIN} {i} $?")), "{text}");
        }
        assert_eq!(c.names, ["cat", "ls", "a group", "a"]);
        // `exec 2>/dev/null` changes the shell: its stderr goes to a capture,
        // but nothing is wrapped.
        let mut prog = parse("exec 2>/dev/null; echo x");
        let mut c = Captures::new(Path::new("/cap"), "m1");
        c.rewrite(&mut prog);
        assert!(!prog.to_string().contains(BUILTIN), "{prog}");
    }
}
