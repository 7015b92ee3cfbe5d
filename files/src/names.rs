//! Named directories: `~NAME/rest` stands for a folder in every tool's
//! arguments, and every path nib prints under a named folder is shortened
//! with the longest name that matches.
//!
//! This module owns the table: which names exist, where each came from,
//! what is accepted as a name, how conflicts are settled (the first
//! definition of a name stays; a name that is a prefix of another is
//! refused), expanding a `~NAME` argument and shortening a path. Where the
//! names come from is decided by their sources (nib.json here, `hash -d` in
//! nibash); what a name may reach is decided by confinement as for any
//! path: a name never widens access.

use std::path::{Path, PathBuf};

/// Where a name was defined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Source {
    /// `directories` in the project's nib.json.
    NibJson,
    /// `hash -d name=dir` in nibash.
    Hash,
    /// A JVM source root's package prefix (`src/<set>/java|kotlin`).
    Jvm,
    /// A folder the agent kept seeing, named by nib.
    Auto,
    /// A name (`hash -d` or automatic) used in two earlier sessions.
    Kept,
}

impl Source {
    /// The source a [`Source::label`] names.
    pub fn from_label(label: &str) -> Option<Source> {
        [
            Source::NibJson,
            Source::Hash,
            Source::Jvm,
            Source::Auto,
            Source::Kept,
        ]
        .into_iter()
        .find(|s| s.label() == label)
    }

    /// How the source is named in notes and listings.
    pub fn label(self) -> &'static str {
        match self {
            Source::NibJson => "nib.json",
            Source::Hash => "hash -d",
            Source::Jvm => "JVM source root",
            Source::Auto => "seen often",
            Source::Kept => "kept from earlier sessions",
        }
    }
}

/// One named folder.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Name {
    /// The name, without the `~`.
    pub name: String,
    /// The folder, absolute.
    pub dir: PathBuf,
    /// Where it was defined.
    pub source: Source,
}

/// The names in force.
#[derive(Clone, Debug, Default)]
pub struct Names {
    list: Vec<Name>,
    /// Why definitions from files were not taken (for nibash_status).
    notes: Vec<String>,
    /// Notes not yet said in an answer.
    pub unannounced: Vec<String>,
    /// How often each folder of the project was shown, while automatic
    /// names are on.
    sightings: Option<std::collections::HashMap<PathBuf, u32>>,
    /// An automatic name was announced with the whole note already.
    auto_announced: bool,
    /// The project's folder names, to keep automatic names unambiguous
    /// (made when a name is first about to be given).
    folders: Option<FolderIndex>,
}

/// How many folders of the project bear each last name, and each
/// `parent/last` pair: a name several folders share would leave the agent
/// guessing which one `~NAME` is.
#[derive(Clone, Debug, Default)]
struct FolderIndex {
    root: PathBuf,
    made: Option<std::time::Instant>,
    last: std::collections::HashMap<String, u32>,
    pair: std::collections::HashMap<(String, String), u32>,
}

/// At most this many folders are looked at for the index.
const INDEX_FOLDERS: usize = 50_000;

impl FolderIndex {
    /// Counts the folders under `root`, leaving out hidden ones and the
    /// usual dependency and build folders; made again after five minutes.
    fn refresh(&mut self) {
        let fresh = self
            .made
            .is_some_and(|m| m.elapsed() < std::time::Duration::from_secs(300));
        if fresh {
            return;
        }
        self.last.clear();
        self.pair.clear();
        let mut stack = vec![(self.root.clone(), 0usize)];
        let mut seen = 0;
        while let Some((dir, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let parent = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            for e in entries.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') || matches!(name.as_str(), "node_modules" | "target") {
                    continue;
                }
                seen += 1;
                *self.last.entry(name.clone()).or_default() += 1;
                *self.pair.entry((parent.clone(), name)).or_default() += 1;
                if depth < 16 && seen < INDEX_FOLDERS {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
        self.made = Some(std::time::Instant::now());
    }

    /// Whether `~last` (or `~parent-last`, with `parent`) names one folder only.
    fn unique(&self, parent: Option<&str>, last: &str) -> bool {
        match parent {
            None => self.last.get(last).copied().unwrap_or(0) <= 1,
            Some(p) => {
                self.pair
                    .get(&(p.to_string(), last.to_string()))
                    .copied()
                    .unwrap_or(0)
                    <= 1
            }
        }
    }
}

/// A folder may get an automatic name once paths in it were shown this
/// often, and only when the name would have saved, over those sightings,
/// at least the characters of the note that announces it; the first note
/// of a session is whole, later ones name the name and the folder only.
/// Chosen by replaying 500 commits each of three real repositories as
/// agent sessions (`bench/names_rule.py`; docs/tools.md has the figures).
pub const AUTO_SIGHTINGS: u32 = 4;

/// Whether `name` may be a name: letters, digits, `_`, `-` and `.`, not
/// starting with `-` or `.`, no `..`, at most 64 characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['-', '.'])
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Whether two names cannot both be defined: one is a prefix of the other.
fn clashes(a: &str, b: &str) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

impl Names {
    /// A table of `(name, folder)` pairs the broker already accepted (what a
    /// worker receives with its request); pairs that clash are left out.
    /// `sources` gives each name's source by its label (`hash -d` when
    /// missing).
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a String, &'a PathBuf)>,
        sources: &std::collections::BTreeMap<String, String>,
    ) -> Names {
        let mut names = Names::default();
        for (name, dir) in pairs {
            let source = sources
                .get(name)
                .and_then(|l| Source::from_label(l))
                .unwrap_or(Source::Hash);
            let _ = names.define(name, dir, source);
        }
        names
    }

    /// The names, in the order they were defined.
    pub fn list(&self) -> &[Name] {
        &self.list
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Why definitions read from files were not taken.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Adds notes (why definitions were not taken) to this table's.
    pub fn add_notes(&mut self, notes: &[String]) {
        self.notes.extend(notes.iter().cloned());
    }

    /// Turns automatic names on (folders shown often get one) for the
    /// project at `root`.
    pub fn enable_auto(&mut self, root: &Path) {
        self.sightings.get_or_insert_with(Default::default);
        self.folders = Some(FolderIndex {
            root: root.to_path_buf(),
            ..FolderIndex::default()
        });
    }

    /// Counts a sighting of `path` (absolute, normalized, in the project),
    /// shown as `shown`: from [`AUTO_SIGHTINGS`] on, its folder gets a name
    /// once the name pays for its note, announced once.
    pub fn saw(&mut self, path: &Path, shown: &str) {
        let Some(sightings) = self.sightings.as_mut() else {
            return;
        };
        let Some(folder) = path.parent() else {
            return;
        };
        let folder_shown = shown.rfind('/').unwrap_or(0);
        let last = folder.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // What each later path in it would save with the shortest name,
        // `~LAST`: nothing for short folders, which are not even counted.
        let per_path = folder_shown.saturating_sub(last.len() + 1);
        if per_path == 0 {
            return;
        }
        // Counted without allocating once a folder is known (most calls).
        let count = match sightings.get_mut(folder) {
            Some(c) => {
                *c = c.saturating_add(1);
                *c
            }
            None => {
                if sightings.len() > 50_000 {
                    sightings.clear();
                }
                sightings.insert(folder.to_path_buf(), 1);
                1
            }
        };
        // The shortest note is "names: ~NAME = FOLDER".
        let shortest_note = 13 + last.len() + folder_shown;
        if count < AUTO_SIGHTINGS
            || (count as usize) * per_path < shortest_note
            || self.list.iter().any(|n| n.dir == folder)
        {
            return;
        }
        let parent = folder
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or("");
        // A last name several folders share is qualified by its parent,
        // and left unnamed when the pair is shared too: `~server` must not
        // stand for packages/tests/server beside packages/server.
        let index = self.folders.as_mut().map(|f| {
            f.refresh();
            &*f
        });
        let candidates = [
            (last.to_string(), index.is_none_or(|f| f.unique(None, last))),
            (
                format!("{parent}-{last}"),
                !parent.is_empty() && index.is_none_or(|f| f.unique(Some(parent), last)),
            ),
        ];
        let Some(name) = candidates
            .into_iter()
            .filter(|(_, unique)| *unique)
            .map(|(name, _)| name)
            .find(|name| matches!(self.check(name, folder, Source::Auto), Ok(true)))
        else {
            return;
        };
        let folder_text = &shown[..folder_shown];
        let note = if self.auto_announced {
            format!("names: ~{name} = {folder_text}")
        } else {
            format!(
                "names: ~{name} now stands for {folder_text} (shown {count} times; NIB_AUTO_NAMES=0 turns automatic names off)"
            )
        };
        let saved = (count as usize) * folder_shown.saturating_sub(name.len() + 1);
        if saved <= note.chars().count() || self.define(&name, folder, Source::Auto).is_err() {
            return;
        }
        self.auto_announced = true;
        self.unannounced.push(note);
    }

    /// Drops the names whose folder is gone; says which.
    pub fn prune(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        self.list.retain(|n| {
            let there = n.dir.is_dir();
            if !there {
                notes.push(format!(
                    "names: ~{} was dropped, its folder {} is gone",
                    n.name,
                    nib_text::path_text::escape_control(&n.dir.to_string_lossy())
                ));
            }
            there
        });
        self.notes.extend(notes.iter().cloned());
        notes
    }

    /// The listing nibash_status prints: each name with its folder (as
    /// `shown` shows it) and its source, then the notes.
    pub fn describe(&self, shown: impl Fn(&Path) -> String) -> String {
        if self.list.is_empty() && self.notes.is_empty() {
            return "names: none (define them in nib.json's \"directories\" or with hash -d name=dir)\n".into();
        }
        let mut out = String::from("names:\n");
        for n in &self.list {
            out.push_str(&format!(
                "  ~{} = {} ({})\n",
                n.name,
                shown(&n.dir),
                n.source.label()
            ));
        }
        for note in &self.notes {
            out.push_str(&format!("  {note}\n"));
        }
        out
    }

    /// Defines `name` for `dir` (absolute, already checked to be a folder by
    /// the caller). Refuses, saying why and that the name was not defined: a
    /// name that is not valid, a folder path with `..` or control
    /// characters, a name defined before (the first stays), and a name that
    /// is a prefix of another or has another as its prefix. Defining the
    /// same name for the same folder again is no change.
    pub fn define(&mut self, name: &str, dir: &Path, source: Source) -> Result<(), String> {
        if self.check(name, dir, source)? {
            // An agent's own name takes the place of nib's guesses.
            if source == Source::Hash {
                self.list
                    .retain(|n| !(n.source == Source::Auto && clashes(&n.name, name)));
            }
            self.list.push(Name {
                name: name.to_string(),
                dir: dir.to_path_buf(),
                source,
            });
        }
        Ok(())
    }

    /// Whether `define` would add the name (`Ok(false)`: it is already
    /// there for that folder), or why it would refuse it.
    pub fn check(&self, name: &str, dir: &Path, source: Source) -> Result<bool, String> {
        if !valid_name(name) {
            return Err(format!(
                "~{}: a name is letters, digits, _, - and . (not first), without \"..\"; it was not defined",
                nib_text::path_text::escape_control(name)
            ));
        }
        let shown = dir.to_string_lossy();
        if !dir.is_absolute()
            || shown.chars().any(char::is_control)
            || dir
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(format!(
                "~{name}: {} is not an absolute folder path without \"..\" or control characters; the name was not defined",
                nib_text::path_text::escape_control(&shown)
            ));
        }
        // What `hash -d` may replace: a name nib made from sightings.
        let yields = |n: &Name| source == Source::Hash && n.source == Source::Auto;
        if let Some(old) = self.list.iter().find(|n| n.name == name && !yields(n)) {
            if old.dir == dir {
                return Ok(false);
            }
            return Err(format!(
                "~{name} is already {} (from {}); the {} definition for {} was ignored",
                old.dir.display(),
                old.source.label(),
                source.label(),
                nib_text::path_text::escape_control(&shown)
            ));
        }
        if let Some(other) = self
            .list
            .iter()
            .find(|n| clashes(&n.name, name) && n.name != name && !yields(n))
        {
            return Err(format!(
                "~{name} and ~{} would be prefixes of each other; ~{name} was not defined",
                other.name
            ));
        }
        Ok(true)
    }

    /// The path an argument `~NAME` or `~NAME/rest` stands for, when NAME
    /// is defined (`~/…` and `~` are the home folder, not names).
    pub fn expand(&self, arg: &str) -> Option<PathBuf> {
        let rest = arg.strip_prefix('~')?;
        let (name, tail) = match rest.split_once('/') {
            Some((n, t)) => (n, Some(t)),
            None => (rest, None),
        };
        if name.is_empty() {
            return None;
        }
        let dir = &self.list.iter().find(|n| n.name == name)?.dir;
        Some(match tail {
            Some(t) if !t.is_empty() => dir.join(t),
            _ => dir.clone(),
        })
    }

    /// `path` (absolute, normalized) written with the longest name whose
    /// folder holds it: `~NAME` or `~NAME/rest`.
    pub fn shorten(&self, path: &Path) -> Option<String> {
        // Byte prefixes that end at a `/` (both paths are normalized): a
        // memcmp per name, not a walk of components.
        let bytes = path.as_os_str().as_encoded_bytes();
        let (n, rest) = self
            .list
            .iter()
            .filter_map(|n| {
                let dir = n.dir.as_os_str().as_encoded_bytes();
                let rest = bytes.strip_prefix(dir)?;
                match rest.first() {
                    None => Some((n, &rest[..0])),
                    Some(b'/') => Some((n, &rest[1..])),
                    // A folder written with its final `/` (the root).
                    Some(_) if dir.ends_with(b"/") => Some((n, rest)),
                    Some(_) => None,
                }
            })
            .max_by_key(|(n, _)| n.dir.as_os_str().len())?;
        Some(if rest.is_empty() {
            format!("~{}", n.name)
        } else {
            format!("~{}/{}", n.name, String::from_utf8_lossy(rest))
        })
    }
}

/// The `directories` of the project's nib.json (`{"directories": {"orm":
/// "path/to/orm"}}`, paths relative to the project), defined into `names`
/// with nib.json as their source. Why any was not defined (or the file
/// could not be read as JSON) is kept in the table's notes.
pub fn load_project(project_dir: &Path, names: &mut Names) {
    let (mut notes, auto) = read_project(project_dir, names);
    if auto {
        notes.extend(name_jvm_roots(project_dir, names));
    }
    names.notes.extend(notes.iter().cloned());
    names.unannounced.extend(
        notes
            .iter()
            .map(|n| n.trim_start_matches('[').trim_end_matches(']').to_string()),
    );
}

/// A package prefix this long or longer gets a name.
pub const JVM_PREFIX: usize = 24;

/// Folders a JVM source-root search looks through at most (a bound on a
/// large tree's startup cost).
const JVM_SEARCH_LIMIT: usize = 20_000;

/// Names the package prefix of each JVM source root (`src/<set>/java` or
/// `src/<set>/kotlin`, at most 6 folders deep, ignored folders skipped): the
/// folders below the root that each hold exactly one folder and no file,
/// when their path is [`JVM_PREFIX`] characters or more. The name is the
/// prefix's last folder (`orm`), else the set and that (`test-orm`), else
/// no name, with a note.
fn name_jvm_roots(project_dir: &Path, names: &mut Names) -> Vec<String> {
    let mut roots: Vec<(PathBuf, String)> = Vec::new();
    let walk = ignore::WalkBuilder::new(project_dir)
        .hidden(true)
        .max_depth(Some(6))
        .filter_entry(|e| e.file_type().is_some_and(|t| t.is_dir()))
        .build();
    for entry in walk.flatten().take(JVM_SEARCH_LIMIT) {
        let path = entry.path();
        let lang = path.file_name().and_then(|n| n.to_str());
        let set = path
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str());
        let src = path
            .parent()
            .and_then(Path::parent)
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str());
        if matches!(lang, Some("java" | "kotlin"))
            && src == Some("src")
            && let Some(set) = set
        {
            roots.push((path.to_path_buf(), set.to_string()));
        }
    }
    roots.sort();
    let mut notes = Vec::new();
    for (root, set) in roots {
        let prefix = single_chain(&root);
        let Ok(rel) = prefix.strip_prefix(&root) else {
            continue;
        };
        if rel.to_string_lossy().len() < JVM_PREFIX {
            continue;
        }
        if names.list.iter().any(|n| n.dir == prefix) {
            continue;
        }
        let Some(last) = prefix.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let defined = [last.to_string(), format!("{set}-{last}")]
            .into_iter()
            .any(|name| names.define(&name, &prefix, Source::Jvm).is_ok());
        if !defined {
            notes.push(format!(
                "[names: the package folder {} got no name: ~{last} and ~{set}-{last} are taken or clash with other names]",
                nib_text::path_text::escape_control(&prefix.to_string_lossy())
            ));
        }
    }
    notes
}

/// The deepest folder below `root` reached through folders that each hold
/// exactly one folder and nothing else.
fn single_chain(root: &Path) -> PathBuf {
    let mut at = root.to_path_buf();
    for _ in 0..64 {
        let Ok(entries) = std::fs::read_dir(&at) else {
            break;
        };
        let mut only: Option<PathBuf> = None;
        let mut count = 0;
        for e in entries.flatten() {
            count += 1;
            if count > 1 {
                break;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                only = Some(e.path());
            }
        }
        match (count, only) {
            (1, Some(next)) => at = next,
            _ => break,
        }
    }
    at
}

/// nib.json's names, its notes, and whether JVM roots get names
/// (`"autoDirectories": false` turns that off).
fn read_project(project_dir: &Path, names: &mut Names) -> (Vec<String>, bool) {
    let path = project_dir.join("nib.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return (Vec::new(), true);
    };
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return (
                vec![format!(
                    "[names: nib.json is not JSON ({e}); no names were read from it]"
                )],
                true,
            );
        }
    };
    let auto = value.get("autoDirectories") != Some(&serde_json::Value::Bool(false));
    (read_directories(project_dir, &value, names), auto)
}

fn read_directories(
    project_dir: &Path,
    value: &serde_json::Value,
    names: &mut Names,
) -> Vec<String> {
    let Some(dirs) = value.get("directories") else {
        return Vec::new();
    };
    let Some(dirs) = dirs.as_object() else {
        return vec![
            "[names: \"directories\" in nib.json is not an object of name: folder; no names were read from it]".into(),
        ];
    };
    let mut notes = Vec::new();
    for (name, dir) in dirs {
        let Some(dir) = dir.as_str() else {
            notes.push(format!(
                "[names: ~{name}: the folder is not a string; the name was not defined]"
            ));
            continue;
        };
        // `..` folded: the name stands for the folder the path names (what
        // it may reach is still decided by confinement at each use).
        let full = nib_text::path_text::lexical_normalize(&project_dir.join(dir));
        if !full.is_dir() {
            notes.push(format!(
                "[names: ~{name}: {} is not a folder; the name was not defined]",
                nib_text::path_text::escape_control(dir)
            ));
            continue;
        }
        if let Err(why) = names.define(name, &full, Source::NibJson) {
            notes.push(format!("[names: {why}]"));
        }
    }
    notes
}

/// A name as kept under the state folder: in how many sessions it was
/// defined, and the last of them.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct KeptName {
    name: String,
    dir: PathBuf,
    sessions: u32,
    last_session: String,
}

/// Names are kept for a project once they were used in this many sessions.
pub const KEEP_AFTER_SESSIONS: u32 = 2;

/// The file of a project's names under the state folder.
fn kept_file(state_dir: &Path, project_dir: &Path) -> PathBuf {
    let key = xxhash_rust::xxh3::xxh3_64(project_dir.as_os_str().as_encoded_bytes());
    state_dir.join("names").join(format!("{key:016x}.json"))
}

fn read_kept(state_dir: &Path, project_dir: &Path) -> Vec<KeptName> {
    std::fs::read(kept_file(state_dir, project_dir))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Defines the names of this project used in [`KEEP_AFTER_SESSIONS`]
/// earlier sessions (whose folders still exist), after the other sources.
pub fn load_kept(state_dir: &Path, project_dir: &Path, names: &mut Names) {
    for k in read_kept(state_dir, project_dir) {
        if k.sessions >= KEEP_AFTER_SESSIONS
            && k.dir.is_dir()
            && let Err(why) = names.define(&k.name, &k.dir, Source::Kept)
        {
            names.notes.push(format!("[names: {why}]"));
        }
    }
}

/// Records this session's `hash -d` and automatic names (and the kept ones
/// still in use) for the project, counting each session once.
pub fn save_used(state_dir: &Path, project_dir: &Path, names: &[Name], session: &str) {
    let mut kept = read_kept(state_dir, project_dir);
    let mut changed = false;
    for n in names {
        if !matches!(n.source, Source::Hash | Source::Auto | Source::Kept) {
            continue;
        }
        match kept.iter_mut().find(|k| k.name == n.name && k.dir == n.dir) {
            Some(k) if k.last_session == session => {}
            Some(k) => {
                k.sessions = k.sessions.saturating_add(1);
                k.last_session = session.to_string();
                changed = true;
            }
            None => {
                kept.push(KeptName {
                    name: n.name.clone(),
                    dir: n.dir.clone(),
                    sessions: 1,
                    last_session: session.to_string(),
                });
                changed = true;
            }
        }
    }
    if !changed {
        return;
    }
    let path = kept_file(state_dir, project_dir);
    let Ok(bytes) = serde_json::to_vec_pretty(&kept) else {
        return;
    };
    if let Some(dir) = path.parent()
        && std::fs::create_dir_all(dir).is_ok()
    {
        // Written whole, then renamed over the old file.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(&str, &str)]) -> Names {
        let mut n = Names::default();
        for (name, dir) in entries {
            n.define(name, Path::new(dir), Source::NibJson).unwrap();
        }
        n
    }

    #[test]
    fn names_expand_and_paths_shorten_with_the_longest_match() {
        let n = table(&[
            ("orm", "/p/src/main/java/com/ex/orm"),
            ("wf", "/p/src/main/java/com/ex/orm/workflow"),
        ]);
        assert_eq!(
            n.expand("~orm/Repo.java"),
            Some(PathBuf::from("/p/src/main/java/com/ex/orm/Repo.java"))
        );
        assert_eq!(
            n.expand("~orm"),
            Some(PathBuf::from("/p/src/main/java/com/ex/orm"))
        );
        assert_eq!(
            n.expand("~orm/"),
            Some(PathBuf::from("/p/src/main/java/com/ex/orm"))
        );
        assert_eq!(n.expand("~/x"), None);
        assert_eq!(n.expand("~"), None);
        assert_eq!(n.expand("~nope/x"), None);
        assert_eq!(n.expand("orm/x"), None);
        assert_eq!(
            n.shorten(Path::new("/p/src/main/java/com/ex/orm/workflow/Step.java"))
                .as_deref(),
            Some("~wf/Step.java")
        );
        assert_eq!(
            n.shorten(Path::new("/p/src/main/java/com/ex/orm/A.java"))
                .as_deref(),
            Some("~orm/A.java")
        );
        assert_eq!(
            n.shorten(Path::new("/p/src/main/java/com/ex/orm"))
                .as_deref(),
            Some("~orm")
        );
        // A sibling whose name only starts the same is not under the folder.
        assert_eq!(
            n.shorten(Path::new("/p/src/main/java/com/ex/ormx/A.java")),
            None
        );
        let root = table(&[("top", "/")]);
        assert_eq!(
            root.shorten(Path::new("/etc/hosts")).as_deref(),
            Some("~top/etc/hosts")
        );
    }

    #[test]
    fn conflicts_keep_the_first_and_refuse_prefixes_and_bad_names() {
        let mut n = table(&[("orm", "/p/orm")]);
        let twice = n
            .define("orm", Path::new("/p/other"), Source::Hash)
            .unwrap_err();
        assert!(
            twice.contains("already /p/orm (from nib.json)") && twice.contains("hash -d"),
            "{twice}"
        );
        assert_eq!(n.expand("~orm"), Some(PathBuf::from("/p/orm")));
        assert!(
            n.define("orm", Path::new("/p/orm"), Source::Hash).is_ok(),
            "the same definition again is no change"
        );
        assert!(
            n.define("ormx", Path::new("/p/x"), Source::Hash)
                .unwrap_err()
                .contains("prefixes")
        );
        assert!(
            n.define("or", Path::new("/p/x"), Source::Hash)
                .unwrap_err()
                .contains("prefixes")
        );
        assert!(n.define("a..b", Path::new("/p/x"), Source::Hash).is_err());
        assert!(n.define("a\nb", Path::new("/p/x"), Source::Hash).is_err());
        assert!(
            n.define("up", Path::new("/p/../etc"), Source::Hash)
                .is_err()
        );
        assert!(n.define("rel", Path::new("p/x"), Source::Hash).is_err());
        assert!(
            n.define("ctl", Path::new("/p/a\u{7}b"), Source::Hash)
                .is_err()
        );
        assert_eq!(n.list().len(), 1);
    }

    #[test]
    fn jvm_source_roots_with_a_long_package_prefix_get_names() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let make = |rel: &str| {
            let f = p.join(rel);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, "class A {}\n").unwrap();
        };
        make("src/main/java/com/example/platform/orm/A.java");
        make("src/main/java/com/example/platform/orm/workflow/B.java");
        make("src/test/java/com/example/platform/orm/T.java");
        make("lib/src/main/kotlin/org/short/K.kt");
        let loaded = || {
            let mut n = Names::default();
            load_project(p, &mut n);
            let got: Vec<(String, Source)> = n
                .list()
                .iter()
                .map(|x| (x.name.clone(), x.source))
                .collect();
            (n, got)
        };
        let named = |v: &[(&str, Source)]| -> Vec<(String, Source)> {
            v.iter().map(|(n, s)| (n.to_string(), *s)).collect()
        };
        let (n, got) = loaded();
        assert_eq!(
            got,
            named(&[("orm", Source::Jvm), ("test-orm", Source::Jvm)]),
            "{:?}",
            n.notes()
        );
        assert_eq!(
            n.list()[0].dir,
            p.join("src/main/java/com/example/platform/orm")
        );
        // nib.json first, and "autoDirectories": false turns the roots off.
        std::fs::write(p.join("nib.json"), r#"{"directories": {"orm": "lib"}}"#).unwrap();
        assert_eq!(
            loaded().1,
            named(&[
                ("orm", Source::NibJson),
                ("main-orm", Source::Jvm),
                ("test-orm", Source::Jvm)
            ])
        );
        std::fs::write(p.join("nib.json"), r#"{"autoDirectories": false}"#).unwrap();
        assert!(loaded().0.is_empty());
    }

    #[test]
    fn a_folder_gets_a_name_when_it_pays_for_its_note_and_later_notes_are_short() {
        let mut n = Names::default();
        n.enable_auto(Path::new("/p"));
        let deep = Path::new("/p/services/billing/internal/reconciliation");
        let shown = "services/billing/internal/reconciliation/f.txt";
        // 40 characters of folder, ~reconciliation saves 25 a path: the
        // whole note (about 130 characters) is paid for at the 6th sighting.
        let mut named_at = None;
        for i in 1..=8 {
            n.saw(&deep.join("f.txt"), shown);
            if named_at.is_none() && !n.is_empty() {
                named_at = Some(i);
            }
        }
        assert_eq!(named_at, Some(6));
        assert_eq!(n.list()[0].name, "reconciliation");
        assert_eq!(
            n.unannounced,
            vec![
                "names: ~reconciliation now stands for services/billing/internal/reconciliation (shown 6 times; NIB_AUTO_NAMES=0 turns automatic names off)".to_string()
            ]
        );
        // The next name's note is short, so it pays sooner: at the 4th.
        let other = Path::new("/p/services/billing/internal/settlement-batches");
        for _ in 0..4 {
            n.saw(
                &other.join("g.txt"),
                "services/billing/internal/settlement-batches/g.txt",
            );
        }
        assert_eq!(
            n.unannounced.last().map(String::as_str),
            Some("names: ~settlement-batches = services/billing/internal/settlement-batches")
        );
        // A short folder saves little a path: not named after 20 sightings
        // (3 characters a path against a 94-character note); a folder whose
        // name is as long as its path never is.
        let mut short = Names::default();
        short.enable_auto(Path::new("/p"));
        for _ in 0..20 {
            short.saw(Path::new("/p/src/lib/x.rs"), "src/lib/x.rs");
        }
        for _ in 0..100 {
            short.saw(Path::new("/p/src/x.rs"), "src/x.rs");
        }
        assert!(short.is_empty() && short.unannounced.is_empty());
        // Off unless enabled.
        let mut off = Names::default();
        for _ in 0..100 {
            off.saw(&deep.join("f.txt"), shown);
        }
        assert!(off.is_empty());
    }

    #[test]
    fn names_used_in_two_sessions_are_kept_for_later_ones() {
        let state = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let dir = project.path().join("deep");
        std::fs::create_dir(&dir).unwrap();
        let mut used = Names::default();
        used.define("deep", &dir, Source::Hash).unwrap();
        let later = || {
            let mut n = Names::default();
            load_kept(state.path(), project.path(), &mut n);
            n
        };
        save_used(state.path(), project.path(), used.list(), "s1");
        save_used(state.path(), project.path(), used.list(), "s1");
        assert!(later().is_empty(), "one session is not enough");
        save_used(state.path(), project.path(), used.list(), "s2");
        let kept = later();
        assert_eq!(kept.list().len(), 1);
        assert_eq!(
            (kept.list()[0].name.as_str(), kept.list()[0].source),
            ("deep", Source::Kept)
        );
        // Another project does not see them; a folder that went is not kept.
        let mut other = Names::default();
        load_kept(state.path(), &project.path().join("x"), &mut other);
        assert!(other.is_empty());
        std::fs::remove_dir(&dir).unwrap();
        assert!(later().is_empty());
    }
}
