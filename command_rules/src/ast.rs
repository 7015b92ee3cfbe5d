//! A walk over brush-parser's syntax tree that visits, mutably, every word
//! and every redirection of the command line as parsed: simple commands
//! (their name, arguments, assignments and redirections), pipelines, lists,
//! compound commands (groups, subshells, loops, `if`, `case`, coprocesses),
//! function definitions and the redirections of each (here-document bodies
//! are words too). Text inside words (`$(…)`, quoted strings) is not parsed
//! further here. nibash rewrites the command line with it; the extractor
//! reads it.

use brush_parser::ast::{
    AndOr, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectTarget,
    IoRedirect, Program, RedirectList, SimpleCommand, UnexpandedArithmeticExpr, Word,
};

/// What to do at each node; all default to nothing.
pub trait VisitMut {
    /// A simple command, before its words and redirections are visited.
    fn simple(&mut self, _s: &mut SimpleCommand) {}
    /// A word: a command name, an argument, an assigned value, a loop list
    /// item, a case subject or pattern, a redirection target.
    fn word(&mut self, _w: &mut Word) {}
    /// A redirection (visited before its target word).
    fn redirect(&mut self, _r: &mut IoRedirect) {}
    /// The text of an arithmetic command (`(( … ))`) or of an arithmetic
    /// `for` clause's parts.
    fn arithmetic(&mut self, _expr: &mut UnexpandedArithmeticExpr) {}
    /// A command in a pipeline, after everything in it was visited; it may
    /// be replaced.
    fn command(&mut self, _c: &mut Command) {}
}

/// Visits the whole program.
pub fn walk(program: &mut Program, v: &mut impl VisitMut) {
    for list in &mut program.complete_commands {
        compound_list(list, v);
    }
}

fn compound_list(list: &mut CompoundList, v: &mut impl VisitMut) {
    for item in &mut list.0 {
        let and_or = &mut item.0;
        for c in &mut and_or.first.seq {
            command(c, v);
        }
        for next in &mut and_or.additional {
            let (AndOr::And(p) | AndOr::Or(p)) = next;
            for c in &mut p.seq {
                command(c, v);
            }
        }
    }
}

fn command(c: &mut Command, v: &mut impl VisitMut) {
    match c {
        Command::Simple(s) => {
            v.simple(s);
            if let Some(prefix) = &mut s.prefix {
                for item in &mut prefix.0 {
                    item_of(item, v);
                }
            }
            if let Some(w) = &mut s.word_or_name {
                v.word(w);
            }
            if let Some(suffix) = &mut s.suffix {
                for item in &mut suffix.0 {
                    item_of(item, v);
                }
            }
        }
        Command::Compound(cc, redirects) => {
            compound(cc, v);
            redirect_list(redirects.as_mut(), v);
        }
        Command::Function(f) => {
            compound(&mut f.body.0, v);
            redirect_list(f.body.1.as_mut(), v);
        }
        Command::ExtendedTest(_, redirects) => redirect_list(redirects.as_mut(), v),
    }
    v.command(c);
}

fn item_of(item: &mut CommandPrefixOrSuffixItem, v: &mut impl VisitMut) {
    match item {
        CommandPrefixOrSuffixItem::IoRedirect(r) => redirect(r, v),
        CommandPrefixOrSuffixItem::Word(w) => v.word(w),
        CommandPrefixOrSuffixItem::AssignmentWord(_, w) => v.word(w),
        CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => compound_list(&mut sub.list, v),
    }
}

fn compound(cc: &mut CompoundCommand, v: &mut impl VisitMut) {
    match cc {
        CompoundCommand::Arithmetic(a) => v.arithmetic(&mut a.expr),
        CompoundCommand::ArithmeticForClause(f) => {
            for e in [&mut f.initializer, &mut f.condition, &mut f.updater]
                .into_iter()
                .flatten()
            {
                v.arithmetic(e);
            }
            compound_list(&mut f.body.list, v);
        }
        CompoundCommand::BraceGroup(b) => compound_list(&mut b.list, v),
        CompoundCommand::Subshell(s) => compound_list(&mut s.list, v),
        CompoundCommand::ForClause(f) => {
            for w in f.values.iter_mut().flatten() {
                v.word(w);
            }
            compound_list(&mut f.body.list, v);
        }
        CompoundCommand::CaseClause(c) => {
            v.word(&mut c.value);
            for item in &mut c.cases {
                for p in &mut item.patterns {
                    v.word(p);
                }
                if let Some(l) = &mut item.cmd {
                    compound_list(l, v);
                }
            }
        }
        CompoundCommand::IfClause(i) => {
            compound_list(&mut i.condition, v);
            compound_list(&mut i.then, v);
            for e in i.elses.iter_mut().flatten() {
                if let Some(cond) = &mut e.condition {
                    compound_list(cond, v);
                }
                compound_list(&mut e.body, v);
            }
        }
        CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
            compound_list(&mut w.0, v);
            compound_list(&mut w.1.list, v);
        }
        CompoundCommand::Coprocess(c) => command(&mut c.body, v),
    }
}

fn redirect_list(list: Option<&mut RedirectList>, v: &mut impl VisitMut) {
    for r in list.into_iter().flat_map(|l| l.0.iter_mut()) {
        redirect(r, v);
    }
}

fn redirect(r: &mut IoRedirect, v: &mut impl VisitMut) {
    v.redirect(r);
    match r {
        IoRedirect::File(_, _, IoFileRedirectTarget::Filename(w))
        | IoRedirect::File(_, _, IoFileRedirectTarget::Duplicate(w))
        | IoRedirect::HereString(_, w)
        | IoRedirect::OutputAndError(w, _) => v.word(w),
        IoRedirect::File(_, _, IoFileRedirectTarget::ProcessSubstitution(_, sub)) => {
            compound_list(&mut sub.list, v)
        }
        IoRedirect::HereDocument(_, doc) => v.word(&mut doc.doc),
        IoRedirect::File(_, _, IoFileRedirectTarget::Fd(_)) => {}
    }
}
