//! `git log`, `git show` and `git diff`, reshaped: a commit header on one
//! line (abbreviated hash, subject, author email unless it is the user's
//! own, local time to the minute, then decorations), the message body
//! indented under it, `--stat` as exact added and removed counts per file
//! grouped by folder (git ran with `--numstat`), and patches as rows of the
//! current files ([`super::patch`]). A command with its own format keeps its
//! commit lines as git printed them.

use std::cell::OnceCell;
use std::path::{Path, PathBuf};

use crate::context::Ctx;
use nib_text::by_folder;
use nib_text::hashline::Tag;

/// The reshaped text and the anchors it printed.
#[derive(Debug, Default)]
pub struct History {
    /// What the model gets.
    pub text: String,
    /// (canonical path, tag, lines) of the anchored rows printed.
    pub seen: Vec<(PathBuf, Tag, Vec<usize>)>,
}

/// A commit's header as git printed it in the default (medium) format.
#[derive(Default)]
struct Commit {
    hash: String,
    decorations: String,
    merge: String,
    email: String,
    date: String,
    subject: Option<String>,
    body: Vec<String>,
}

impl Commit {
    fn render(&self, me: &dyn Fn() -> Option<String>, out: &mut String) {
        out.push_str(&self.hash);
        out.push(' ');
        out.push_str(self.subject.as_deref().unwrap_or("(no message)"));
        let mut who: Vec<&str> = Vec::new();
        let mine = me().is_some_and(|m| m.eq_ignore_ascii_case(&self.email));
        if !mine && !self.email.is_empty() {
            who.push(&self.email);
        }
        if !self.date.is_empty() {
            who.push(&self.date);
        }
        if !who.is_empty() {
            out.push_str(&format!(" ({})", who.join(", ")));
        }
        if !self.decorations.is_empty() {
            out.push_str(&format!(" [{}]", self.decorations));
        }
        if !self.merge.is_empty() {
            out.push_str(&format!(" [merge of {}]", self.merge));
        }
        out.push('\n');
        let end = self
            .body
            .iter()
            .rposition(|b| !b.trim().is_empty())
            .map_or(0, |i| i + 1);
        for b in &self.body[..end] {
            if !b.trim().is_empty() {
                out.push_str("  ");
                out.push_str(b);
            }
            out.push('\n');
        }
    }
}

/// A `--numstat` line: added, removed (`None` for a binary file), path.
fn numstat(line: &str) -> Option<(Option<u64>, Option<u64>, &str)> {
    let mut p = line.splitn(3, '\t');
    let (a, d, path) = (p.next()?, p.next()?, p.next()?);
    let count = |s: &str| -> Option<Option<u64>> {
        if s == "-" {
            Some(None)
        } else {
            s.parse().ok().map(Some)
        }
    };
    Some((count(a)?, count(d)?, path))
}

/// Numstat lines as `path +A -D` entries grouped by folder, one group per
/// line, and a total.
fn render_stat(entries: &[(Option<u64>, Option<u64>, String)], out: &mut String) {
    let mut shown = Vec::new();
    let (mut added, mut removed) = (0, 0);
    for (a, d, path) in entries {
        let counts = match (a, d) {
            (Some(a), Some(d)) => {
                added += a;
                removed += d;
                let mut c = String::new();
                if *a > 0 {
                    c.push_str(&format!(" +{a}"));
                }
                if *d > 0 {
                    c.push_str(&format!(" -{d}"));
                }
                c
            }
            _ => " (binary)".to_string(),
        };
        shown.push(format!("{path}{counts}"));
    }
    for g in by_folder::group(&shown) {
        out.push_str(&format!("  {g}\n"));
    }
    out.push_str(&format!(
        "  {} file{} changed, +{added} -{removed}\n",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" }
    ));
}

/// What the reader is in the middle of.
enum State {
    Text,
    Header(Commit),
    Message(Commit),
}

/// Reshapes `out`; diff paths are relative to `top`, and `name` shortens
/// them (with a named directory).
pub fn reshape(
    ctx: &Ctx,
    top: &Path,
    out: &str,
    headers: bool,
    me: &dyn Fn() -> Option<String>,
    name: &dyn Fn(&str) -> String,
) -> History {
    let email: OnceCell<Option<String>> = OnceCell::new();
    let me = || email.get_or_init(me).clone();
    let mut h = History::default();
    let mut state = State::Text;
    let mut stats: Vec<(Option<u64>, Option<u64>, String)> = Vec::new();
    let mut patch = String::new();
    let lines: Vec<&str> = out.lines().collect();
    let flush_patch = |patch: &mut String, h: &mut History| {
        if patch.is_empty() {
            return;
        }
        for b in super::diff::blocks(ctx, top, patch) {
            h.text.push_str(&b.head);
            h.text.push('\n');
            for r in &b.rows {
                h.text.push_str(&r.text);
                h.text.push('\n');
            }
            if let Some(t) = &b.seen {
                let lines: Vec<usize> = b.kept_anchors().collect();
                if !lines.is_empty() {
                    h.seen.push((t.canonical.clone(), t.tag, lines));
                }
            }
        }
        patch.clear();
    };
    for line in lines {
        let commit_line = headers
            && line
                .strip_prefix("commit ")
                .and_then(|r| r.split(' ').next())
                .is_some_and(|w| w.len() >= 4 && w.bytes().all(|b| b.is_ascii_hexdigit()));
        if commit_line {
            flush_patch(&mut patch, &mut h);
            if !stats.is_empty() {
                render_stat(&stats, &mut h.text);
                stats.clear();
            }
            if let State::Header(c) | State::Message(c) = std::mem::replace(&mut state, State::Text)
            {
                c.render(&me, &mut h.text);
            }
            let rest = &line["commit ".len()..];
            let (hash, deco) = rest.split_once(' ').unwrap_or((rest, ""));
            state = State::Header(Commit {
                hash: hash.to_string(),
                decorations: deco
                    .trim()
                    .trim_start_matches('(')
                    .trim_end_matches(')')
                    .to_string(),
                ..Commit::default()
            });
            continue;
        }
        if !patch.is_empty() || line.starts_with("diff --git ") {
            if let State::Header(c) | State::Message(c) = std::mem::replace(&mut state, State::Text)
            {
                c.render(&me, &mut h.text);
            }
            if !stats.is_empty() {
                render_stat(&stats, &mut h.text);
                stats.clear();
            }
            patch.push_str(line);
            patch.push('\n');
            continue;
        }
        state = match state {
            State::Header(mut c) => {
                if line.is_empty() {
                    State::Message(c)
                } else {
                    if let Some(m) = line.strip_prefix("Merge: ") {
                        c.merge = m.to_string();
                    } else if let Some(a) = line.strip_prefix("Author: ") {
                        c.email = a
                            .rsplit_once('<')
                            .map(|(_, e)| e.trim_end_matches('>').to_string())
                            .unwrap_or_default();
                    } else if let Some(d) = line.strip_prefix("Date:") {
                        c.date = d.trim().to_string();
                    } else {
                        c.body.push(line.to_string());
                    }
                    State::Header(c)
                }
            }
            State::Message(mut c) => {
                if let Some(m) = line.strip_prefix("    ") {
                    if c.subject.is_none() {
                        c.subject = Some(m.to_string());
                    } else if !m.trim().is_empty() || !c.body.is_empty() {
                        // Blank lines between paragraphs stay; the one
                        // after the subject goes.
                        c.body.push(m.to_string());
                    }
                    State::Message(c)
                } else if line.is_empty() {
                    State::Message(c)
                } else {
                    c.render(&me, &mut h.text);
                    text_line(line, &mut stats, &mut h.text, name);
                    State::Text
                }
            }
            State::Text => {
                text_line(line, &mut stats, &mut h.text, name);
                State::Text
            }
        };
    }
    flush_patch(&mut patch, &mut h);
    if let State::Header(c) | State::Message(c) = state {
        c.render(&me, &mut h.text);
    }
    if !stats.is_empty() {
        render_stat(&stats, &mut h.text);
    }
    h
}

/// A line outside commit headers and patches: a numstat entry is kept for
/// the stat; a blank line goes; anything else prints as it is.
fn text_line(
    line: &str,
    stats: &mut Vec<(Option<u64>, Option<u64>, String)>,
    out: &mut String,
    name: &dyn Fn(&str) -> String,
) {
    if let Some((a, d, p)) = numstat(line) {
        stats.push((a, d, name(p)));
        return;
    }
    if !stats.is_empty() {
        render_stat(stats, out);
        stats.clear();
    }
    if line.is_empty() {
        return;
    }
    out.push_str(line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_lines_become_exact_counts_grouped_by_folder() {
        let mut out = String::new();
        let e = |a: Option<u64>, d: Option<u64>, p: &str| (a, d, p.to_string());
        render_stat(
            &[
                e(Some(2), Some(1), "src/a.rs"),
                e(Some(1), Some(0), "src/b.rs"),
                e(None, None, "logo.png"),
                e(Some(0), Some(0), "old.txt => src/new.txt"),
            ],
            &mut out,
        );
        assert_eq!(
            out,
            "  src/{a.rs +2 -1, b.rs +1}\n  logo.png (binary)\n  old.txt => src/new.txt\n  4 files changed, +3 -1\n"
        );
        assert_eq!(
            numstat("3\t0\tsrc/a.rs"),
            Some((Some(3), Some(0), "src/a.rs"))
        );
        assert_eq!(numstat("-\t-\tx.png"), Some((None, None, "x.png")));
        assert_eq!(numstat("  3\tfoo"), None);
    }
}
