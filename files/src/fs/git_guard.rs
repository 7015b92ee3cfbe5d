//! What programs leave in git dirs for the person's own git.
//!
//! Under `NIB_SANDBOX=1` the git dirs found before a call are held
//! (`runs_code`: their config and hooks read-only, the folder itself
//! pinned), but a call may make a *new* repository — `git init sub`, a
//! commit, `core.fsmonitor` in `sub/.git/config`, `git add sub` — and the
//! person's next `git status` in the project (which looks inside a tracked
//! nested repository) or in `sub` would run the model's command with the
//! person's full authority. So after each call (and when a job ends) the
//! broker sweeps the roots for git dirs that were not held during it, and
//! neutralizes what in them makes git run a command: the config keeps only
//! lines that are plainly settings that run nothing, hooks go, and the
//! originals go to the user's trash (restorable by the person), named in
//! the answer.
//!
//! The sweep keeps each root's folders with their modification times, so
//! after the first walk a call costs a `stat` per folder and a listing of
//! the folders whose entries changed. This module decides and neutralizes;
//! `runs_code` says what is a git dir, `trash` keeps what was taken out.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{Mode, OFlags};

use super::{FsError, Root, Scope, beneath};

/// The most folders one root's sweep keeps track of (about 150 bytes
/// each): past it, folders are not walked into (SECURITY.md's residual).
const FOLDERS_KEPT: usize = 200_000;

/// Settings that make git run a command (or read settings from elsewhere),
/// as `section.key` with the subsection left out, lowercase; `*` for every
/// key of a section.
const RUNS_COMMANDS: &[&str] = &[
    "core.fsmonitor",
    "core.hookspath",
    "core.sshcommand",
    "core.pager",
    "core.editor",
    "core.askpass",
    "core.gitproxy",
    "core.alternaterefscommand",
    "core.attributesfile",
    "sequence.editor",
    "diff.external",
    "diff.command",
    "diff.textconv",
    "merge.driver",
    "filter.clean",
    "filter.smudge",
    "filter.process",
    "credential.helper",
    "gpg.program",
    "interactive.difffilter",
    "web.browser",
    "browser.cmd",
    "browser.path",
    "man.cmd",
    "man.path",
    "difftool.cmd",
    "difftool.path",
    "mergetool.cmd",
    "mergetool.path",
    "remote.uploadpack",
    "remote.receivepack",
    "remote.vcs",
    "remote.proxy",
    "submodule.update",
    "uploadpack.packobjectshook",
    "imap.tunnel",
    "tar.command",
    "trailer.command",
    "trailer.cmd",
    "guitool.cmd",
    "gc.auto",
    "include.*",
    "includeif.*",
    "alias.*",
    "pager.*",
    "protocol.*",
    "sendemail.*",
];

/// Whether `section.key` (subsection removed) runs a command.
fn runs_a_command(section: &str, key: &str) -> bool {
    let section = section.to_ascii_lowercase();
    let key = key.to_ascii_lowercase();
    RUNS_COMMANDS.iter().any(|rule| {
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
            Some((key, value))
                if !section.is_empty()
                    && (!runs_a_command(&section, &key)
                        || (section.eq_ignore_ascii_case("core")
                            && key.eq_ignore_ascii_case("fsmonitor")
                            && is_boolean(value))) =>
            {
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
/// inode), and the git dirs found.
#[derive(Default)]
struct Seen {
    folders: HashMap<PathBuf, (i128, u64)>,
    git_dirs: HashSet<PathBuf>,
}

static SEEN: Mutex<Option<HashMap<PathBuf, Seen>>> = Mutex::new(None);

fn stamp(m: &std::fs::Metadata) -> (i128, u64) {
    (
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        m.ino(),
    )
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
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let p = e.path();
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
                    if let Ok(entries) = std::fs::read_dir(&dir) {
                        for e in entries.flatten() {
                            let p = e.path();
                            if e.file_type().is_ok_and(|t| t.is_dir())
                                && !seen.folders.contains_key(&p)
                            {
                                walk_into(seen, &p);
                            }
                        }
                    }
                }
            }
            _ => {
                seen.folders.remove(&dir);
                seen.git_dirs.remove(&dir);
            }
        }
    }
    // A folder that became a git dir without its own entries changing
    // (objects and refs made first, HEAD written last changes it anyway).
    seen.git_dirs.retain(|d| is_git_dir(d));
}

/// Walks `roots` once so that the first call's sweep only looks at what
/// changed (run beside the session's start, not on a call's path).
pub fn prime(roots: &[PathBuf]) {
    let mut guard = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let all = guard.get_or_insert_with(HashMap::new);
    for root in roots {
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
        let seen = all.entry(root.clone()).or_default();
        if seen.folders.is_empty() {
            walk_into(seen, &root);
        }
    }
}

/// Sweeps the roots of a sandbox `scope` for git dirs and neutralizes what
/// in them runs a command and was made or changed since `since` (the start
/// of the call, or of the oldest job that ran beside it: a file's change
/// time, which no program can set back, tells), but for the `held` paths
/// (bound read-only for the call's programs: the person's own config and
/// hooks, which may change beside a long job); returns one line per git
/// dir changed, for the answer. A person's own repository, made or
/// configured outside a call, is left alone.
pub fn sweep(scope: &Scope, held: &[PathBuf], since: std::time::SystemTime) -> Vec<String> {
    let Scope::Sandbox(open_roots) = scope else {
        return Vec::new();
    };
    let roots: Vec<PathBuf> = open_roots.iter().map(|r| r.path.clone()).collect();
    // Change times are kept at the kernel's tick: a second of margin.
    let since = since
        .checked_sub(std::time::Duration::from_secs(1))
        .unwrap_or(since);
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let mut guard = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let all = guard.get_or_insert_with(HashMap::new);
    let mut found = Vec::new();
    for root in &roots {
        let seen = all.entry(root.clone()).or_default();
        refresh(seen, root);
        found.extend(seen.git_dirs.iter().cloned());
    }
    drop(guard);
    // Submodules' and worktrees' git dirs live inside another git dir,
    // which the walk does not enter: a call may make one there.
    let mut inner = Vec::new();
    let mut stack = found.clone();
    while let Some(dir) = stack.pop() {
        for below in ["modules", "worktrees"] {
            let more = super::runs_code::git_dirs_below(&dir.join(below), 0);
            stack.extend(more.iter().cloned());
            inner.extend(more);
        }
    }
    found.extend(inner);
    found.sort();
    found.dedup();
    let mut lines = Vec::new();
    for dir in found {
        if let Some(line) = neutralize(scope, open_roots, held, &dir, since) {
            lines.push(line);
        }
    }
    lines
}

/// Moves the entry at `path` to the trash, its folder resolved beneath the
/// roots (a folder swapped for a symlink by a program still running cannot
/// send nib elsewhere), the entry itself never followed.
fn to_trash(roots: &[Root], path: &Path) -> Result<(), FsError> {
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

/// Takes out of one git dir what runs a command and changed at or after
/// `since` (ns): its config's settings that do (the whole file to the
/// trash, the kept lines written back) and its hooks (each to the trash).
/// `None` when there was nothing.
fn neutralize(
    scope: &Scope,
    roots: &[Root],
    held: &[PathBuf],
    dir: &Path,
    since: i128,
) -> Option<String> {
    let mut what = Vec::new();
    for name in ["config", "config.worktree"] {
        let path = dir.join(name);
        if held.contains(&path) {
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
    let hooks = dir.join("hooks");
    match std::fs::symlink_metadata(&hooks) {
        _ if held.contains(&hooks) => {}
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
             [user]\n\tfsmonitor = evil\n\
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
                "include.path",
                "Core.hooksPath",
            ]
        );
        // What git init writes stays whole.
        let init = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";
        assert_eq!(clean_config(init), (init.to_string(), Vec::new()));
    }
}
