//! What nib's own edit and write tools wrote, by any agent: a nibash call's
//! report of changed files (`changes`) leaves out a file whose content is
//! what a tool wrote while the call ran, since over HTTP that is another
//! agent's edit, not the call's change.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use nib_files::context::Ctx;
use nib_text::hashline::Tag;

/// The tools' writes, each with the tag of what was written, numbered in
/// order.
#[derive(Default)]
pub struct ToolWrites {
    /// The number the next write gets.
    next: u64,
    /// The newest writes: (number, canonical path, tag).
    kept: VecDeque<(u64, PathBuf, Tag)>,
}

/// Tool writes kept; a call that ran past this many others' writes may list
/// some of the oldest as its own (as before they were kept at all).
const TOOL_WRITES_KEPT: usize = 4096;

impl ToolWrites {
    /// The number the next write gets: a call's mark at its start.
    pub fn mark(&self) -> u64 {
        self.next
    }

    /// Notes what a file tool's call wrote (`written`: as shown to that
    /// agent, and the new tag), the shown paths resolved by its workspace.
    pub fn note(&mut self, ctx: &Ctx, written: &[(String, String)]) {
        for (shown, tag) in written {
            let Some(tag) = Tag::parse(tag) else {
                continue;
            };
            let path = ctx.workspace.resolve(shown);
            let path = nib_files::fs::canonical(&path).unwrap_or(path);
            if self.kept.len() == TOOL_WRITES_KEPT {
                self.kept.pop_front();
            }
            self.kept.push_back((self.next, path, tag));
            self.next += 1;
        }
    }

    /// Whether a tool wrote exactly this content (`tag`) to `canonical`
    /// since `mark`.
    pub fn wrote_since(&self, mark: u64, canonical: &Path, tag: Tag) -> bool {
        self.kept
            .iter()
            .rev()
            .take_while(|(n, _, _)| *n >= mark)
            .any(|(_, p, t)| *t == tag && p == canonical)
    }
}
