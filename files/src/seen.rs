//! What an agent has been shown: the last versions of each file and, per
//! version, the lines it saw whole.
//!
//! The broker records here every anchored row it prints (read, write, and later
//! grep, edit and nibash rows). The edit engine asks it two questions: which
//! version of a file does a tag name (comparing full text, so a 16-bit collision
//! never passes for the version the agent saw), and were the anchored lines seen.
//! Until agents are told apart (client-integration issue), one connection is one
//! agent and owns one [`Agent`]: its [`Seen`] lines and its [`Tokens`] (edits
//! it was refused, which `REAPPLY TOKEN` applies unchanged).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nib_text::hashline::Tag;
use nib_text::text::Text;

/// How many versions of one file are remembered.
pub const VERSIONS_PER_FILE: usize = 4;
/// How many files are remembered before the least recently shown is dropped.
pub const MAX_FILES: usize = 4096;

/// A set of line numbers, kept as sorted, disjoint, inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeenLines {
    ranges: Vec<(usize, usize)>,
}

impl SeenLines {
    /// Adds lines `a..=b` (merging with touching ranges; O(log n) to find them).
    pub fn insert_range(&mut self, a: usize, b: usize) {
        if a > b {
            return;
        }
        // Ranges i..j touch or overlap a..=b.
        let i = self
            .ranges
            .partition_point(|&(_, e)| e.saturating_add(1) < a);
        let j = self
            .ranges
            .partition_point(|&(s, _)| s <= b.saturating_add(1));
        if i >= j {
            self.ranges.insert(i, (a, b));
            return;
        }
        let lo = a.min(self.ranges[i].0);
        let hi = b.max(self.ranges[j - 1].1);
        self.ranges.splice(i..j, [(lo, hi)]);
    }

    /// Adds one line.
    pub fn insert(&mut self, n: usize) {
        self.insert_range(n, n);
    }

    /// Whether line `n` is in the set.
    pub fn contains(&self, n: usize) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e < n);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= n)
    }

    /// The ranges, in order.
    pub fn ranges(&self) -> &[(usize, usize)] {
        &self.ranges
    }
}

/// One version of a file as the agent was shown it.
#[derive(Clone, Debug)]
pub struct FileVersion {
    /// Its tag.
    pub tag: Tag,
    /// Its full text, to tell tag collisions apart.
    pub text: Arc<Text>,
    /// The lines the agent saw whole.
    pub seen: SeenLines,
}

/// Everything one agent has been shown.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    files: HashMap<PathBuf, VecDeque<FileVersion>>,
    clock: u64,
    touched: HashMap<PathBuf, u64>,
}

impl Seen {
    /// Records that the agent saw `lines` of `text` (tag `tag`) at `path` (canonical).
    pub fn record(
        &mut self,
        path: &Path,
        tag: Tag,
        text: &Arc<Text>,
        lines: impl IntoIterator<Item = usize>,
    ) {
        self.clock += 1;
        self.touched.insert(path.to_path_buf(), self.clock);
        let versions = self.files.entry(path.to_path_buf()).or_default();
        let pos = versions
            .iter()
            .position(|v| v.tag == tag && (Arc::ptr_eq(&v.text, text) || *v.text == **text));
        let mut version = match pos {
            Some(i) => versions.remove(i).unwrap_or_else(|| FileVersion {
                tag,
                text: Arc::clone(text),
                seen: SeenLines::default(),
            }),
            None => FileVersion {
                tag,
                text: Arc::clone(text),
                seen: SeenLines::default(),
            },
        };
        for n in lines {
            version.seen.insert(n);
        }
        versions.push_front(version);
        versions.truncate(VERSIONS_PER_FILE);
        if self.files.len() > MAX_FILES {
            self.evict_oldest();
        }
    }

    /// Every remembered version of every file, newest files first.
    pub fn all_versions(&self) -> impl Iterator<Item = (&Path, &FileVersion)> {
        let mut paths: Vec<(&PathBuf, u64)> = self
            .files
            .keys()
            .map(|p| (p, self.touched.get(p).copied().unwrap_or(0)))
            .collect();
        paths.sort_by_key(|p| std::cmp::Reverse(p.1));
        paths
            .into_iter()
            .flat_map(move |(p, _)| self.versions(p).map(move |v| (p.as_path(), v)))
    }

    /// The remembered versions of a file, newest first.
    pub fn versions(&self, path: &Path) -> impl Iterator<Item = &FileVersion> {
        self.files.get(path).into_iter().flatten()
    }

    /// The newest remembered version with this tag.
    pub fn version_with_tag(&self, path: &Path, tag: Tag) -> Option<&FileVersion> {
        self.versions(path).find(|v| v.tag == tag)
    }

    /// The remembered version with this tag whose text is exactly `text`, if any.
    pub fn version_matching(&self, path: &Path, tag: Tag, text: &Text) -> Option<&FileVersion> {
        self.versions(path)
            .find(|v| v.tag == tag && *v.text == *text)
    }

    fn evict_oldest(&mut self) {
        if let Some(oldest) = self
            .touched
            .iter()
            .min_by_key(|(_, t)| **t)
            .map(|(p, _)| p.clone())
        {
            self.touched.remove(&oldest);
            self.files.remove(&oldest);
        }
    }
}

/// An edit that was refused with a token: what `REAPPLY TOKEN` (or the same
/// patch sent again) applies, and the file versions it was checked against.
#[derive(Clone, Debug)]
pub struct PendingEdit {
    /// The patch text.
    pub patch: String,
    /// Apply even where anchored lines were not seen.
    pub waive_seen: bool,
    /// SUB hunks approved to apply elsewhere: (patch line, found line).
    pub sub_moves: Vec<(usize, usize)>,
    /// Each file's canonical path and text when the token was given; the
    /// token applies only while the file still has that text.
    pub versions: Vec<(PathBuf, Arc<Text>)>,
}

/// How many refused edits are remembered.
pub const MAX_TOKENS: usize = 64;

/// Refused edits by token, and by the hash of their patch text.
#[derive(Debug, Default)]
pub struct Tokens {
    by_token: HashMap<String, PendingEdit>,
    by_patch: HashMap<u32, String>,
    order: VecDeque<String>,
    counter: u64,
}

impl Tokens {
    /// Remembers a refused edit and returns its token.
    pub fn remember(&mut self, edit: PendingEdit) -> String {
        self.counter += 1;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let seed = format!("{}-{}-{}", self.counter, nanos, std::process::id());
        let h = xxhash_rust::xxh32::xxh32(seed.as_bytes(), 0x6e6962);
        let token = format!("{:08x}", h);
        self.by_patch.insert(patch_hash(&edit.patch), token.clone());
        self.by_token.insert(token.clone(), edit);
        self.order.push_back(token.clone());
        while self.order.len() > MAX_TOKENS {
            if let Some(old) = self.order.pop_front()
                && let Some(e) = self.by_token.remove(&old)
            {
                self.by_patch.remove(&patch_hash(&e.patch));
            }
        }
        token
    }

    /// Puts back an edit remembered under `token` by an earlier process.
    pub fn restore(&mut self, token: String, edit: PendingEdit) {
        if self.by_token.contains_key(&token) {
            return;
        }
        self.by_patch.insert(patch_hash(&edit.patch), token.clone());
        self.by_token.insert(token.clone(), edit);
        self.order.push_back(token);
    }

    /// Every remembered token and its edit, oldest first.
    pub fn all(&self) -> impl Iterator<Item = (&String, &PendingEdit)> {
        self.order
            .iter()
            .filter_map(|t| self.by_token.get(t).map(|e| (t, e)))
    }

    /// The edit a token names.
    pub fn get(&self, token: &str) -> Option<&PendingEdit> {
        self.by_token.get(token)
    }

    /// The edit refused for exactly this patch text, if any.
    pub fn for_patch(&self, patch: &str) -> Option<&PendingEdit> {
        self.by_patch
            .get(&patch_hash(patch))
            .and_then(|t| self.by_token.get(t))
            .filter(|e| e.patch == patch)
    }

    /// Forgets an edit once it applied.
    pub fn forget_patch(&mut self, patch: &str) {
        if let Some(t) = self.by_patch.remove(&patch_hash(patch)) {
            self.by_token.remove(&t);
            self.order.retain(|o| *o != t);
        }
    }
}

fn patch_hash(patch: &str) -> u32 {
    xxhash_rust::xxh32::xxh32(patch.trim().as_bytes(), 0)
}

/// Writes waiting for a person's approval, and writes approved, each with the
/// folder fd opened before asking (so the write lands where the person said yes).
#[derive(Debug, Default)]
pub struct Approvals {
    pending: HashMap<PathBuf, crate::fs::WriteTarget>,
    approved: HashMap<PathBuf, crate::fs::WriteTarget>,
}

impl Approvals {
    /// Remembers a target that waits for approval.
    pub fn wait(&mut self, key: &Path, target: crate::fs::WriteTarget) {
        self.pending.insert(key.to_path_buf(), target);
    }

    /// The person approved: the waiting target may be written.
    pub fn approve(&mut self, key: &Path) -> bool {
        match self.pending.remove(key) {
            Some(t) => {
                self.approved.insert(key.to_path_buf(), t);
                true
            }
            None => false,
        }
    }

    /// The approved target for a path, if any.
    pub fn approved(&self, key: &Path) -> Option<&crate::fs::WriteTarget> {
        self.approved.get(key)
    }

    /// An approval covers one write: forget it once used (or refused).
    pub fn consume(&mut self, key: &Path) {
        self.approved.remove(key);
        self.pending.remove(key);
    }
}

/// What one agent has skimmed (the data; the broker's `skim` tool reads
/// and updates it).
#[derive(Clone, Debug, Default)]
pub struct Skims {
    /// Per file: the rows shown, and how far each question has read.
    pub files: HashMap<PathBuf, FileSkims>,
}

/// What `skim` has shown of one file.
#[derive(Clone, Debug, Default)]
pub struct FileSkims {
    /// Line indexes shown, whatever the question.
    pub shown: std::collections::BTreeSet<usize>,
    /// Per question, the line count read so far.
    pub read_to: HashMap<String, usize>,
}

/// Everything the server remembers for one agent.
#[derive(Debug, Default)]
pub struct Agent {
    /// File versions shown and the lines seen in each.
    pub seen: Seen,
    /// Refused edits that may be reapplied.
    pub tokens: Tokens,
    /// Writes waiting for, or holding, a person's approval.
    pub approvals: Approvals,
    /// What `skim` has shown of each file.
    pub skims: Skims,
    /// The names this agent defined with `hash -d`, and those its parent
    /// had when this agent was first met ([`crate::agents`]).
    pub names: std::sync::Arc<std::sync::RwLock<crate::names::Names>>,
}

impl Agent {
    /// A copy of this agent's own names, for an agent it starts.
    pub fn names_for_child(&self) -> crate::names::Names {
        self.names.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_lines_merge_ranges() {
        let mut s = SeenLines::default();
        s.insert_range(5, 7);
        s.insert(9);
        s.insert(8);
        s.insert_range(1, 2);
        assert_eq!(s.ranges(), &[(1, 2), (5, 9)]);
        assert!(s.contains(6) && s.contains(9) && !s.contains(3) && !s.contains(10));
    }

    #[test]
    fn versions_are_bounded_and_newest_first() {
        let mut seen = Seen::default();
        let p = PathBuf::from("/f");
        for i in 0..6 {
            let raw = format!("v{i}\n");
            let text = Arc::new(Text::decode(raw.as_bytes()));
            seen.record(&p, Tag::of(raw.as_bytes()), &text, [1]);
        }
        let tags: Vec<Tag> = seen.versions(&p).map(|v| v.tag).collect();
        assert_eq!(tags.len(), VERSIONS_PER_FILE);
        assert_eq!(tags[0], Tag::of(b"v5\n"));
    }

    #[test]
    fn colliding_tags_are_told_apart_by_text() {
        let mut seen = Seen::default();
        let p = PathBuf::from("/f");
        let a = b"line one 263\nline two 4471\n";
        let b = b"line one 410\nline two 6970\n";
        assert_eq!(Tag::of(a), Tag::of(b));
        let ta = Arc::new(Text::decode(a));
        seen.record(&p, Tag::of(a), &ta, [1, 2]);
        assert!(
            seen.version_matching(&p, Tag::of(b), &Text::decode(b))
                .is_none()
        );
        assert!(
            seen.version_matching(&p, Tag::of(a), &Text::decode(a))
                .is_some()
        );
    }
}

#[cfg(test)]
mod token_tests {
    use super::*;

    #[test]
    fn tokens_find_edits_by_token_and_by_patch() {
        let mut t = Tokens::default();
        let tok = t.remember(PendingEdit {
            patch: "[a#0001]\nREM\n".into(),
            waive_seen: true,
            sub_moves: Vec::new(),
            versions: Vec::new(),
        });
        assert!(t.get(&tok).is_some());
        assert!(t.for_patch("[a#0001]\nREM\n").is_some());
        t.forget_patch("[a#0001]\nREM\n");
        assert!(t.get(&tok).is_none());
        for i in 0..(MAX_TOKENS + 5) {
            t.remember(PendingEdit {
                patch: format!("p{i}"),
                waive_seen: false,
                sub_moves: Vec::new(),
                versions: Vec::new(),
            });
        }
        assert!(t.for_patch("p0").is_none());
        assert!(t.for_patch(&format!("p{}", MAX_TOKENS + 4)).is_some());
    }
}
