//! What programs leave in git dirs for the person's own git.
//!
//! Under `NIB_SANDBOX=1` the git dirs found before a call are held
//! (`runs_code`: their config, hooks and included files read-only, the
//! folder and every folder above it pinned), but a call may make a *new*
//! repository — `git init sub`, a commit, `core.fsmonitor` in
//! `sub/.git/config`, `git add sub` — or point a held one elsewhere (a
//! `commondir`), and the person's next `git status` in the project (which
//! looks inside a tracked nested repository) or in `sub` would run the
//! model's command with the person's full authority. So after each call
//! (and when a job ends) the broker sweeps the roots for git dirs, follows
//! what leads git from one to another (`.git` files, `commondir`,
//! `modules/`, `worktrees/`, includes), and neutralizes what in them makes
//! git run a command: a config keeps only settings on an allowlist of
//! what runs nothing, hooks go, and the originals go to the user's trash
//! (restorable by the person), named in the answer. A git dir the sweep
//! did not know before the call, that the call made, is judged whole,
//! whatever the age of its files; one it knew, by what changed during the
//! call.
//!
//! The sweep keeps each root's folders with their modification times, so
//! after the first walk a call costs a `stat` per folder and a listing of
//! the folders whose entries changed. This module decides and neutralizes;
//! `runs_code` says what is a git dir and what is held, `trash` keeps what
//! was taken out.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{Mode, OFlags};

use super::{FsError, Root, Scope, beneath};

/// The most folders one root's sweep keeps track of (about 150 bytes
/// each): past it, folders are not walked into (SECURITY.md's residual).
const FOLDERS_KEPT: usize = 200_000;

/// Settings known to run nothing and to lead git nowhere that does, as
/// `section.key` with the subsection left out, lowercase; `section.*` for
/// every key of a section whose keys all run nothing. An allowlist: what
/// `git init`, `git clone`, `git submodule` and `git worktree` write, and
/// the plain preferences people set; any other setting is taken out and
/// named (a setting git adds later is unknown here, so it goes).
const RUNS_NOTHING: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.worktree",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.quotepath",
    "core.compression",
    "core.loosecompression",
    "core.bigfilethreshold",
    "core.sharedrepository",
    "core.abbrev",
    "core.checkstat",
    "core.trustctime",
    "core.untrackedcache",
    "core.splitindex",
    "core.preloadindex",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "core.whitespace",
    "core.commentchar",
    "core.warnambiguousrefs",
    "core.protecthfs",
    "core.protectntfs",
    "core.multipackindex",
    "core.commitgraph",
    "core.fsync",
    "core.fsmonitorhookversion",
    "extensions.objectformat",
    "extensions.worktreeconfig",
    "extensions.refstorage",
    "extensions.preciousobjects",
    "user.name",
    "user.email",
    "user.useconfigonly",
    "author.name",
    "author.email",
    "committer.name",
    "committer.email",
    "init.defaultbranch",
    "remote.url",
    "remote.pushurl",
    "remote.fetch",
    "remote.push",
    "remote.mirror",
    "remote.tagopt",
    "remote.prune",
    "remote.prunetags",
    "remote.skipdefaultupdate",
    "remote.skipfetchall",
    "branch.remote",
    "branch.merge",
    "branch.rebase",
    "branch.pushremote",
    "branch.description",
    "branch.autosetupmerge",
    "branch.autosetuprebase",
    "submodule.url",
    "submodule.active",
    "submodule.branch",
    "submodule.shallow",
    "submodule.ignore",
    "submodule.fetchrecursesubmodules",
    "submodule.recurse",
    "submodule.propagatebranches",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "push.followtags",
    "fetch.prune",
    "fetch.prunetags",
    "fetch.recursesubmodules",
    "merge.ff",
    "merge.conflictstyle",
    "merge.defaulttoupstream",
    "merge.log",
    "diff.renames",
    "diff.algorithm",
    "diff.mnemonicprefix",
    "diff.noprefix",
    "diff.context",
    "diff.colormoved",
    "diff.submodule",
    "status.showuntrackedfiles",
    "status.branch",
    "status.short",
    "status.submodulesummary",
    "status.relativepaths",
    "log.date",
    "log.decorate",
    "log.follow",
    "rerere.enabled",
    "rerere.autoupdate",
    "worktree.guessremote",
    "clone.defaultremotename",
    "i18n.commitencoding",
    "i18n.logoutputencoding",
    "index.version",
    "index.sparse",
    "color.*",
    "advice.*",
];

/// Whether `section.key` (subsection removed) is known to run nothing.
/// `core.fsmonitor` runs nothing only as a boolean (git's own daemon).
fn runs_nothing(section: &str, key: &str, value: &str) -> bool {
    let section = section.to_ascii_lowercase();
    let key = key.to_ascii_lowercase();
    if section == "core" && key == "fsmonitor" {
        return is_boolean(value);
    }
    RUNS_NOTHING.iter().any(|rule| {
        let (s, k) = rule.split_once('.').unwrap_or((rule, "*"));
        s == section && (k == "*" || k == key)
    })
}

/// Whether `core.fsmonitor`'s value is a boolean (git's own daemon, no
/// command) rather than a program to run.
fn is_boolean(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "1" | "0"
    )
}

/// A git config with only the lines that are plainly settings that run
/// nothing: blank lines, comments, section headers of the simple form and
/// `key = value` lines of the simple form whose key runs no command. A
/// line this reading does not understand (a continuation, a key after a
/// header on the same line, quoting it does not follow) is dropped too:
/// what is kept is read by git exactly as here. Returns the kept text and
/// the settings dropped (as `section.key`, or the line for an odd one).
pub fn clean_config(text: &str) -> (String, Vec<String>) {
    let mut kept = String::new();
    let mut dropped = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let t = line.trim();
        let plain = !t.contains(['"', '\\']);
        if t.is_empty() || (plain && (t.starts_with('#') || t.starts_with(';'))) {
            kept.push_str(line);
            kept.push('\n');
            continue;
        }
        if let Some(header) = simple_header(t) {
            section = header;
            kept.push_str(line);
            kept.push('\n');
            continue;
        }
        match simple_setting(t) {
            Some((key, value)) if !section.is_empty() && runs_nothing(&section, &key, value) => {
                kept.push_str(line);
                kept.push('\n');
            }
            Some((key, _)) => dropped.push(format!("{section}.{key}")),
            None => dropped.push(format!(
                "an unusual line ({})",
                nib_text::path_text::escape_control(&t.chars().take(60).collect::<String>())
            )),
        }
    }
    (kept, dropped)
}

/// `[section]` or `[section "subsection"]`: the section's name (the
/// subsection is not needed to judge a key).
fn simple_header(t: &str) -> Option<String> {
    let inner = t.strip_prefix('[')?.strip_suffix(']')?;
    let (name, sub) = match inner.split_once(' ') {
        Some((n, rest)) => (n, Some(rest)),
        None => (inner, None),
    };
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    let sub_ok = sub.is_none_or(|s| {
        s.len() >= 2
            && s.starts_with('"')
            && s.ends_with('"')
            && !s[1..s.len() - 1].contains(['"', '\\'])
    });
    // `[a.b]` is the old form of `[a "b"]`: the section is before the dot.
    (name_ok && sub_ok).then(|| name.split('.').next().unwrap_or(name).to_string())
}

/// `key = value` or `key` (a boolean), with a value that holds no quote or
/// backslash (so it cannot continue on the next line): the key and value.
fn simple_setting(t: &str) -> Option<(String, &str)> {
    let (key, value) = match t.split_once('=') {
        Some((k, v)) => (k.trim(), v),
        None => (t, ""),
    };
    let key_ok = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    (key_ok && !value.contains(['"', '\\'])).then(|| (key.to_string(), value))
}

/// Whether `dir` is a git dir by its content, as git tells one.
fn is_git_dir(dir: &Path) -> bool {
    dir.join("HEAD").is_file()
        && (dir.join("objects").is_dir() || dir.join("commondir").is_file())
        && dir.join("refs").is_dir()
}

/// One root's folders as the last sweep saw them: path → (mtime in ns,
/// inode); the git dirs found; the folders holding an entry named `HEAD`
/// (a git dir in the making, rechecked every sweep: its `HEAD` may be a
/// link whose target appears elsewhere); the `.git` files (each names a
/// git dir, which may lie where the walk does not go).
#[derive(Default)]
struct Seen {
    folders: HashMap<PathBuf, (i128, u64)>,
    git_dirs: HashSet<PathBuf>,
    heads: HashSet<PathBuf>,
    dot_git_files: HashSet<PathBuf>,
}

/// What the sweeps know: each root's folders, and the git dirs (and common
/// dirs) known at the end of the last sweep, with their inodes. A git dir
/// not known there, or known with another inode, is judged whole when the
/// call may have made it.
#[derive(Default)]
struct Known {
    roots: HashMap<PathBuf, Seen>,
    git_dirs: HashMap<PathBuf, u64>,
}

static SEEN: Mutex<Option<Known>> = Mutex::new(None);

fn stamp(m: &std::fs::Metadata) -> (i128, u64) {
    (
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        m.ino(),
    )
}

/// Lists `dir`: notes whether it holds a `HEAD` entry and a `.git` file,
/// and returns its subfolders.
fn list(seen: &mut Seen, dir: &Path) -> Vec<PathBuf> {
    seen.heads.remove(dir);
    seen.dot_git_files.remove(&dir.join(".git"));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut subfolders = Vec::new();
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let name = e.file_name();
        if name == "HEAD" {
            seen.heads.insert(dir.to_path_buf());
        }
        if t.is_dir() {
            subfolders.push(e.path());
        } else if name == ".git" {
            seen.dot_git_files.insert(e.path());
        }
    }
    subfolders
}

/// Lists `dir`, notes it, and walks into its new subfolders (a git dir is
/// noted and not walked into).
fn walk_into(seen: &mut Seen, dir: &Path) {
    if seen.folders.len() >= FOLDERS_KEPT {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    seen.folders.insert(dir.to_path_buf(), stamp(&meta));
    if is_git_dir(dir) {
        seen.git_dirs.insert(dir.to_path_buf());
        return;
    }
    for p in list(seen, dir) {
        if !seen.folders.contains_key(&p) {
            walk_into(seen, &p);
        }
    }
}

/// Brings a root's record up to date: folders gone are forgotten, folders
/// whose entries changed are listed again (and their new subfolders walked).
fn refresh(seen: &mut Seen, root: &Path) {
    if seen.folders.is_empty() {
        walk_into(seen, root);
        return;
    }
    let known: Vec<(PathBuf, (i128, u64))> =
        seen.folders.iter().map(|(p, s)| (p.clone(), *s)).collect();
    for (dir, was) in known {
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {
                let now = stamp(&m);
                if now != was {
                    seen.folders.insert(dir.clone(), now);
                    if seen.git_dirs.contains(&dir) {
                        continue;
                    }
                    if is_git_dir(&dir) {
                        seen.git_dirs.insert(dir);
                        continue;
                    }
                    for p in list(seen, &dir) {
                        if !seen.folders.contains_key(&p) {
                            walk_into(seen, &p);
                        }
                    }
                }
            }
            _ => {
                seen.folders.remove(&dir);
                seen.git_dirs.remove(&dir);
                seen.heads.remove(&dir);
                seen.dot_git_files.remove(&dir.join(".git"));
            }
        }
    }
    // A folder that became a git dir without its own entries changing (a
    // `HEAD` link whose target appeared elsewhere), or stopped being one.
    let heads: Vec<PathBuf> = seen.heads.iter().cloned().collect();
    for d in heads {
        if is_git_dir(&d) {
            seen.git_dirs.insert(d);
        }
    }
    seen.git_dirs.retain(|d| is_git_dir(d));
}

/// The git dir a `.git` file names (`gitdir: PATH`, relative to the file's
/// folder), when it is one.
fn named_by(dot_git: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dot_git).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let dir = dot_git.parent()?.join(target);
    std::fs::canonicalize(dir).ok()
}

/// The common dir a git dir's `commondir` names (relative to the git dir).
fn common_of(dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dir.join("commondir")).ok()?;
    let target = text.lines().next()?.trim();
    if target.is_empty() {
        return None;
    }
    std::fs::canonicalize(dir.join(target)).ok()
}

/// An inode, or 0 where there is nothing.
fn inode(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).map_or(0, |m| m.ino())
}

/// Whether what makes `dir` a git dir (the folder, `HEAD`, `objects`,
/// `refs`, `commondir`) changed at or after `since` (ns) — each entry and,
/// for a link, what it leads to — or is a link (its target may change
/// anywhere): a git dir the call made, whatever the age of its config.
fn made_since(dir: &Path, since: i128) -> bool {
    let changed = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| changed_at(&m) >= since)
            || std::fs::metadata(p).is_ok_and(|m| changed_at(&m) >= since)
    };
    changed(dir)
        || ["HEAD", "objects", "refs", "commondir"].iter().any(|n| {
            let p = dir.join(n);
            changed(&p) || std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink())
        })
}

/// Whether a file that leads git to a git dir (a `.git` file, a
/// `commondir`) changed at or after `since` (ns), or is a link.
fn pointer_changed(file: &Path, since: i128) -> bool {
    std::fs::symlink_metadata(file)
        .is_ok_and(|m| m.file_type().is_symlink() || changed_at(&m) >= since)
        || std::fs::metadata(file).is_ok_and(|m| changed_at(&m) >= since)
}

/// Walks `roots` once so that the first call's sweep only looks at what
/// changed (run beside the session's start, not on a call's path); the git
/// dirs found are the person's (known to later sweeps).
pub fn prime(roots: &[PathBuf]) {
    let mut guard = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let all = guard.get_or_insert_with(Known::default);
    let mut found = Vec::new();
    for root in roots {
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
        let seen = all.roots.entry(root.clone()).or_default();
        if seen.folders.is_empty() {
            walk_into(seen, &root);
            found.extend(git_dirs_of(seen));
        }
    }
    for (dir, _) in with_inner(found) {
        let ino = inode(&dir);
        all.git_dirs.insert(dir, ino);
    }
}

/// Before a call: walks the roots of a sandbox `scope` that no sweep has
/// walked yet (a one-shot `nib sh`, or a first call that came before the
/// session's walk ended), so the sweep after it knows which git dirs were
/// there before; costs nothing once they were walked.
pub fn before_call(scope: &Scope) {
    if let Scope::Sandbox(open_roots) = scope {
        let roots: Vec<PathBuf> = open_roots.iter().map(|r| r.path.clone()).collect();
        prime(&roots);
    }
}

/// How a git dir was reached: what must be judged with it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Via {
    /// Found on its own (by content, or below `modules/`, `worktrees/`).
    Found,
    /// Named by a `.git` file (the file).
    DotGit(PathBuf),
    /// Named by the `commondir` of a git dir (that git dir).
    Common(PathBuf),
}

/// The git dirs a root's record holds: those found, and those its `.git`
/// files name.
fn git_dirs_of(seen: &Seen) -> Vec<(PathBuf, Via)> {
    let mut out: Vec<(PathBuf, Via)> = seen
        .git_dirs
        .iter()
        .map(|d| (d.clone(), Via::Found))
        .collect();
    out.extend(seen.dot_git_files.iter().filter_map(|f| {
        named_by(f)
            .filter(|d| is_git_dir(d))
            .map(|d| (d, Via::DotGit(f.clone())))
    }));
    out
}

/// `found` with the git dirs inside them (submodules' under `modules/`,
/// worktrees' under `worktrees/`, where the walk does not go) and the
/// common dirs their `commondir` files name; each with how it was reached
/// (a git dir reached two ways is listed twice).
fn with_inner(found: Vec<(PathBuf, Via)>) -> Vec<(PathBuf, Via)> {
    let mut out: Vec<(PathBuf, Via)> = Vec::new();
    let mut stack = found;
    let mut visited: HashSet<PathBuf> = HashSet::new();
    while let Some((dir, via)) = stack.pop() {
        out.push((dir.clone(), via));
        if !visited.insert(dir.clone()) {
            continue;
        }
        for below in ["modules", "worktrees"] {
            stack.extend(
                super::runs_code::git_dirs_below(&dir.join(below), 0)
                    .into_iter()
                    .map(|d| (d, Via::Found)),
            );
        }
        if let Some(common) = common_of(&dir) {
            stack.push((common, Via::Common(dir.clone())));
        }
    }
    out
}

/// Sweeps the roots of a sandbox `scope` for git dirs and neutralizes what
/// in them runs a command. A git dir (or common dir) the last sweep knew,
/// with the same inode, is judged by change time — what changed since
/// `since` (the start of the call, or of the oldest job that ran beside
/// it; a change time no program can set back) — but for the `held` paths
/// (bound read-only for the call's programs: the person's own config and
/// hooks, which may change beside a long job). One it did not know, that
/// the call made (its `HEAD`, `objects`, `refs` or `commondir` changed, or
/// the pointer that leads to it did), is judged whole: every config and
/// hook in it, whatever their age. Returns one line per git dir changed,
/// for the answer. A person's own repository, made or configured outside a
/// call, is left alone.
pub fn sweep(scope: &Scope, held: &[PathBuf], since: std::time::SystemTime) -> Vec<String> {
    let Scope::Sandbox(open_roots) = scope else {
        return Vec::new();
    };
    // Keyed as `prime` keys them.
    let roots: Vec<PathBuf> = open_roots
        .iter()
        .map(|r| std::fs::canonicalize(&r.path).unwrap_or_else(|_| r.path.clone()))
        .collect();
    // Change times are kept at the kernel's tick: a second of margin.
    let since = since
        .checked_sub(std::time::Duration::from_secs(1))
        .unwrap_or(since);
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let mut guard = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let all = guard.get_or_insert_with(Known::default);
    let mut found = Vec::new();
    for root in &roots {
        let seen = all.roots.entry(root.clone()).or_default();
        refresh(seen, root);
        found.extend(git_dirs_of(seen));
    }
    let before = std::mem::take(&mut all.git_dirs);
    let reached = with_inner(found);
    // Whether a path is one the sweep knew, as the same folder.
    let known = |d: &Path| before.get(d).is_some_and(|ino| *ino == inode(d));
    // A git dir the call made, by any route: not known (a `.git` folder
    // held read-only during the call is not the person's for that: it may
    // have become a git dir now from files a former call left), and its
    // own making, or the pointer that leads to it, changed in the call.
    let mut dirs: HashMap<PathBuf, bool> = HashMap::new();
    for (dir, via) in &reached {
        let new = !known(dir)
            && (before.contains_key(dir)
                || made_since(dir, since)
                || match via {
                    Via::Found => false,
                    Via::DotGit(file) => pointer_changed(file, since),
                    Via::Common(by) => !known(by) || pointer_changed(&by.join("commondir"), since),
                });
        *dirs.entry(dir.clone()).or_default() |= new;
    }
    let mut dirs: Vec<(PathBuf, bool)> = dirs.into_iter().collect();
    dirs.sort();
    let mut lines = Vec::new();
    let mut now_known = HashMap::new();
    for (dir, new) in &dirs {
        let judge = if *new {
            Judge::Whole
        } else {
            Judge::Since(since)
        };
        if let Some(line) = neutralize(scope, open_roots, held, dir, judge) {
            lines.push(line);
        }
        now_known.insert(dir.clone(), inode(dir));
    }
    all.git_dirs = now_known;
    lines
}

/// How much of a git dir [`neutralize`] judges.
#[derive(Clone, Copy)]
enum Judge {
    /// Every config and hook: a git dir the call made.
    Whole,
    /// What changed at or after this time (ns), but the held paths.
    Since(i128),
}

/// Moves the entry at `path` to the trash, its folder resolved beneath the
/// roots (a folder swapped for a symlink by a program still running cannot
/// send nib elsewhere), the entry itself never followed.
pub(super) fn to_trash(roots: &[Root], path: &Path) -> Result<(), FsError> {
    let name = path.file_name().ok_or(FsError::IsDirectory)?;
    let parent = path.parent().ok_or(FsError::IsDirectory)?;
    let (fd, _, _) = beneath::open(
        roots,
        parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    super::trash::move_to_trash(&fd, name, path)
}

/// Writes the kept config back where it was, beneath the roots (no
/// approval is asked: this is nib undoing what a program did).
fn write_back(scope: &Scope, path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    let target = super::write_target(scope, path)?;
    let p = super::prepare(&target, bytes, None, &super::unique_id())?;
    super::commit(&p).inspect_err(|_| super::discard(&p))
}

/// A file's change time in nanoseconds since the epoch.
fn changed_at(m: &std::fs::Metadata) -> i128 {
    i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec())
}

/// Takes out of one git dir what runs a command — everything in it when
/// `judge` is [`Judge::Whole`], else what changed at or after the time but
/// the held paths: its config's settings that do (the whole file to the
/// trash, the kept lines written back), its hooks (each to the trash), and
/// a `commondir` a call put in a git dir with objects of its own (a main
/// git dir sent to another's config). `None` when there was nothing.
fn neutralize(
    scope: &Scope,
    roots: &[Root],
    held: &[PathBuf],
    dir: &Path,
    judge: Judge,
) -> Option<String> {
    let (since, honour_held) = match judge {
        Judge::Whole => (i128::MIN, false),
        Judge::Since(t) => (t, true),
    };
    let skip = |p: &PathBuf| honour_held && held.contains(p);
    let mut what = Vec::new();
    for name in ["config", "config.worktree"] {
        let path = dir.join(name);
        if skip(&path) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if changed_at(&meta) < since {
            continue;
        }
        if !meta.is_file() {
            // A link or anything else where git reads its config: gone.
            if to_trash(roots, &path).is_ok() {
                what.push(format!("{name} (not a plain file)"));
            }
            continue;
        }
        let Ok(file) = super::read_file(scope, &path, 1 << 20) else {
            continue;
        };
        let text = String::from_utf8_lossy(&file.bytes);
        let (kept, dropped) = clean_config(&text);
        if dropped.is_empty() {
            continue;
        }
        if to_trash(roots, &path).is_ok() && write_back(scope, &path, kept.as_bytes()).is_ok() {
            what.push(format!("{name}: {}", dropped.join(", ")));
        }
    }
    // The files a config of this git dir includes, in the roots: read by
    // git as the repository's settings (a git dir judged whole has lost
    // its include lines above).
    if honour_held {
        let included: Vec<PathBuf> = ["config", "config.worktree"]
            .iter()
            .flat_map(|name| super::runs_code::included_files(&dir.join(name)))
            .filter(|f| roots.iter().any(|r| f.starts_with(&r.path)))
            .collect();
        for path in included {
            if skip(&path)
                || !std::fs::symlink_metadata(&path)
                    .is_ok_and(|m| m.is_file() && changed_at(&m) >= since)
            {
                continue;
            }
            let Ok(file) = super::read_file(scope, &path, 1 << 20) else {
                continue;
            };
            let (kept, dropped) = clean_config(&String::from_utf8_lossy(&file.bytes));
            if !dropped.is_empty()
                && to_trash(roots, &path).is_ok()
                && write_back(scope, &path, kept.as_bytes()).is_ok()
            {
                what.push(format!(
                    "{} (included by its config): {}",
                    nib_text::path_text::escape_control(&path.to_string_lossy()),
                    dropped.join(", ")
                ));
            }
        }
    }
    let commondir = dir.join("commondir");
    if honour_held
        && !skip(&commondir)
        && dir.join("objects").is_dir()
        && std::fs::symlink_metadata(&commondir).is_ok_and(|m| changed_at(&m) >= since)
        && to_trash(roots, &commondir).is_ok()
    {
        what.push("commondir (this git dir has objects of its own)".into());
    }
    let hooks = dir.join("hooks");
    match std::fs::symlink_metadata(&hooks) {
        _ if skip(&hooks) => {}
        Ok(m) if m.is_dir() => {
            if let Ok(entries) = std::fs::read_dir(&hooks) {
                let mut names: Vec<String> = Vec::new();
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let fresh = e
                        .path()
                        .symlink_metadata()
                        .is_ok_and(|m| changed_at(&m) >= since);
                    if name.ends_with(".sample") || !fresh {
                        continue;
                    }
                    if to_trash(roots, &e.path()).is_ok() {
                        names.push(nib_text::path_text::escape_control(&name));
                    }
                }
                if !names.is_empty() {
                    names.sort();
                    what.push(format!("hooks {}", names.join(", ")));
                }
            }
        }
        Ok(m) if changed_at(&m) >= since && to_trash(roots, &hooks).is_ok() => {
            what.push("hooks (not a folder)".into());
        }
        _ => {}
    }
    (!what.is_empty()).then(|| {
        format!(
            "[git: {} was made or changed by this call and would have run commands in your own git; \
             taken out and moved to the trash: {}. `trash list` shows them; the person can restore them]",
            nib_text::path_text::escape_control(&dir.to_string_lossy()),
            what.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_keeps_only_settings_that_run_nothing() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = ./evil.sh\n\tbare = false\n\
                    [core] pager = evil\n\
                    [remote \"origin\"]\n\turl = https://example.test/x\n\tuploadpack = evil\n\
                    [alias]\n\tst = !evil\n\
                    [diff \"x\"]\n\ttextconv = evil\n\
                    [user]\n\tname = a \\\n\tfsmonitor = evil\n\
                    [include]\n\tpath = ../other\n\
                    [Core]\n\tFSMonitor = true\n\thooksPath = h\n";
        let (kept, dropped) = clean_config(text);
        assert_eq!(
            kept,
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\
             [remote \"origin\"]\n\turl = https://example.test/x\n\
             [alias]\n\
             [diff \"x\"]\n\
             [user]\n\
             [include]\n\
             [Core]\n\tFSMonitor = true\n"
        );
        assert_eq!(
            dropped,
            [
                "core.fsmonitor",
                "an unusual line ([core] pager = evil)",
                "remote.uploadpack",
                "alias.st",
                "diff.textconv",
                "an unusual line (name = a \\)",
                "user.fsmonitor",
                "include.path",
                "Core.hooksPath",
            ]
        );
        // Settings no list of commands named: an allowlist takes them out.
        let unknown = "[gpg \"ssh\"]\n\tdefaultKeyCommand = evil\n[gc]\n\trecentObjectsHook = evil\n\
                       [some]\n\tfutureHook = evil\n";
        assert_eq!(
            clean_config(unknown),
            (
                "[gpg \"ssh\"]\n[gc]\n[some]\n".to_string(),
                vec![
                    "gpg.defaultKeyCommand".to_string(),
                    "gc.recentObjectsHook".to_string(),
                    "some.futureHook".to_string()
                ]
            )
        );
        // What git clone, submodule and worktree write stays whole.
        let clone = "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n\
                     \tlogallrefupdates = true\n\tworktree = ../../../m\n\
                     [extensions]\n\tworktreeConfig = true\n\
                     [remote \"origin\"]\n\turl = /tmp/src\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\
                     [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n\
                     [submodule \"m\"]\n\turl = /tmp/src\n\tactive = true\n";
        assert_eq!(clean_config(clone), (clone.to_string(), Vec::new()));
        // What git init writes stays whole.
        let init = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";
        assert_eq!(clean_config(init), (init.to_string(), Vec::new()));
    }
}
