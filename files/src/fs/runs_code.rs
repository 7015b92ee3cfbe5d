//! Which files inside a root make code run when something reads them: the
//! configuration of the agent clients and of nib itself, and every git
//! directory — the root's, a submodule's under `.git/modules/`, a
//! worktree's under `.git/worktrees/`, a nested repository's `.git` (a
//! folder, or a file naming its git dir), a bare repository. A git dir's
//! `config` can name a command (`core.fsmonitor`, a diff driver) that the
//! user's own next `git status` runs outside any sandbox.
//!
//! This module decides, and keeps only the last walk of each root
//! ([`protected_for_programs_kept`]). [`write_needs_approval`]
//! classifies a write of the file tools (approval under the sandbox,
//! `super::write_target`), [`makes_code_run`] what nibash's `rm` and
//! `trash restore` refuse; [`protected_for_programs`] lists what
//! programs may only read (bubblewrap binds it read-only, and so does the
//! worker's own mount namespace with Landlock alone — `nib_sandbox`).

use std::path::{Component, Path, PathBuf};

/// The entries at the top of every root that an agent client, an editor or
/// nib itself reads and may run code from: nib's providers, MCP servers,
/// Claude Code's and OpenCode's settings (hooks, plugins), VS Code's tasks.
/// One list for the file tools (a write needs approval) and for programs
/// (held read-only when it exists; taken to the trash when a program makes
/// it, `super::planted`).
pub const CLIENT_FILES: &[&str] = &[
    "nib.json",
    ".mcp.json",
    "opencode.json",
    "opencode.jsonc",
    ".claude",
    ".opencode",
    ".vscode",
];

/// Paths of every root that programs may not change: they make code run.
const IN_EVERY_ROOT: &[&str] = &[".git/hooks", ".git/config"];

/// The files of a git dir that name commands or lead to another git dir.
const OF_A_GIT_DIR: &[&str] = &["config", "config.worktree", "hooks", "commondir", "gitdir"];

/// The most entries the search for nested repositories visits in a root:
/// past it, repositories deeper in the walk are protected from the file
/// tools (by name) but not found for programs.
const WALK_LIMIT: usize = 200_000;

/// Whether a path relative to its root names a file that makes code run:
/// a [`CLIENT_FILES`] entry at the root or anything inside one, and in
/// a git dir named `.git` at any depth (submodules' and worktrees' below
/// it included) the `.git` entry itself, hooks, `config`,
/// `config.worktree` and the files leading to other git dirs.
pub fn makes_code_run(rel: &Path) -> bool {
    let p = parts(rel);
    let p: Vec<&str> = p.iter().map(String::as_str).collect();
    let in_git = p.iter().enumerate().any(|(k, c)| {
        *c == ".git"
            && match p.get(k + 1..) {
                None | Some([]) => true,
                Some(rest) => {
                    rest.contains(&"hooks")
                        || rest.last().is_some_and(|last| OF_A_GIT_DIR.contains(last))
                }
            }
    });
    in_git || p.first().is_some_and(|first| CLIENT_FILES.contains(first))
}

/// Whether a write of the file tools to `rel` under `root` needs a
/// person's approval under the sandbox: it makes code run, or it lands
/// anywhere in a git dir (named `.git` at any depth, or known by its
/// content) — the file tools have no business there.
pub fn write_needs_approval(root: &Path, rel: &Path) -> bool {
    makes_code_run(rel)
        || parts(rel).iter().any(|c| c == ".git")
        || in_a_git_dir(root, rel)
        || included_by_the_root(root, rel)
}

/// Whether `rel` is a file the root's own git config includes (directly
/// or through another included file): git reads its settings as the
/// repository's.
fn included_by_the_root(root: &Path, rel: &Path) -> bool {
    let target = root.join(rel);
    ["config", "config.worktree"]
        .iter()
        .flat_map(|name| included_files(&root.join(".git").join(name)))
        .any(|f| f == target)
}

/// The files a git config includes (`include.path`, `includeIf.*.path`),
/// followed through the files they include, a few levels deep: relative
/// paths are taken from the including file's folder, `~/` from `HOME`.
/// Only files that exist are listed, resolved.
pub(crate) fn included_files(config: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    let mut stack = vec![(config.to_path_buf(), 0usize)];
    while let Some((file, depth)) = stack.pop() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for target in include_paths(&text) {
            let path = match target.strip_prefix("~/") {
                Some(rest) => match std::env::var_os("HOME") {
                    Some(home) => PathBuf::from(home).join(rest),
                    None => continue,
                },
                None => match file.parent() {
                    Some(dir) => dir.join(&target),
                    None => continue,
                },
            };
            let Ok(real) = std::fs::canonicalize(&path) else {
                continue;
            };
            if !found.contains(&real) && depth < 10 {
                found.push(real.clone());
                stack.push((real, depth + 1));
            }
        }
    }
    found
}

/// The values of `path` in a config's `[include]` and `[includeIf …]`
/// sections (a key may follow its header on the same line; quotes taken
/// off).
fn include_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_include = false;
    for line in text.lines() {
        let mut t = line.trim();
        if let Some(rest) = t.strip_prefix('[') {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect::<String>()
                .to_ascii_lowercase();
            in_include = name == "include" || name == "includeif";
            t = match rest.find(']') {
                Some(end) => rest[end + 1..].trim(),
                None => "",
            };
        }
        if !in_include {
            continue;
        }
        if let Some((key, value)) = t.split_once('=')
            && key.trim().eq_ignore_ascii_case("path")
        {
            let value = value.trim().trim_matches('"').trim();
            if !value.is_empty() {
                out.push(value.to_string());
            }
        }
    }
    out
}

fn parts(rel: &Path) -> Vec<String> {
    rel.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// Whether `dir` is a git directory by its content, as git tells one:
/// a `HEAD` file beside an object store (or a `commondir` leading to one)
/// and `refs`.
fn is_git_dir(dir: &Path) -> bool {
    dir.join("HEAD").is_file()
        && (dir.join("objects").is_dir() || dir.join("commondir").is_file())
        && dir.join("refs").is_dir()
}

/// The common dir a git dir's `commondir` file names (relative to it).
fn common_dir(dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dir.join("commondir")).ok()?;
    let target = text.lines().next()?.trim();
    (!target.is_empty())
        .then(|| std::fs::canonicalize(dir.join(target)).ok())
        .flatten()
}

/// Whether the write to `rel` under `root` lands in a git directory not
/// named `.git` (a bare repository, a git dir a `.git` file names).
fn in_a_git_dir(root: &Path, rel: &Path) -> bool {
    let mut dir = root.to_path_buf();
    let mut parts = rel.components().peekable();
    while let Some(c) = parts.next() {
        if parts.peek().is_none() {
            break;
        }
        let Component::Normal(name) = c else { continue };
        dir.push(name);
        if is_git_dir(&dir) {
            return true;
        }
    }
    false
}

/// What programs may only read in `root`: [`IN_EVERY_ROOT`], and for every
/// git dir found — the root's, its submodules' and worktrees', nested
/// repositories' (a walk that honours ignore files, so a repository in an
/// ignored folder is not found) — its `config`, `config.worktree`, hooks
/// and the files leading to other git dirs, and each nested `.git` file.
/// Only paths that exist are listed.
pub fn protected_for_programs(root: &Path) -> ForPrograms {
    let mut out: Vec<PathBuf> = IN_EVERY_ROOT
        .iter()
        .chain(CLIENT_FILES)
        .map(|p| root.join(p))
        .collect();
    let mut pinned: Vec<PathBuf> = Vec::new();
    // Git dirs are not descended into: `.git` entries are found beside
    // each folder the walk enters, other git dirs by their content as the
    // walk meets them (the filter keeps them aside).
    let by_content = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = std::sync::Arc::clone(&by_content);
    let walk = ignore::WalkBuilder::new(root)
        .hidden(false)
        .parents(false)
        .follow_links(false)
        .filter_entry(move |e| {
            if e.depth() == 0 {
                return true;
            }
            if e.file_name() == ".git" {
                return false;
            }
            if e.file_type().is_some_and(|t| t.is_dir()) && is_git_dir(e.path()) {
                if let Ok(mut k) = kept.lock() {
                    k.push(e.path().to_path_buf());
                }
                return false;
            }
            true
        })
        .build();
    let mut git_dirs = Vec::new();
    let mut dot_git_files: Vec<PathBuf> = Vec::new();
    for (visited, entry) in walk.flatten().enumerate() {
        if visited >= WALK_LIMIT {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_dir()) {
            continue;
        }
        let dot_git = entry.path().join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(m) if m.is_dir() => git_dirs.push(dot_git),
            Ok(m) if m.is_file() => {
                dot_git_files.push(dot_git.clone());
                out.push(dot_git);
            }
            _ => {}
        }
    }
    if let Ok(mut k) = by_content.lock() {
        git_dirs.append(&mut k);
    }
    let mut included: Vec<PathBuf> = Vec::new();
    while let Some(dir) = git_dirs.pop() {
        if pinned.contains(&dir) {
            continue;
        }
        out.extend(OF_A_GIT_DIR.iter().map(|f| dir.join(f)));
        // The files its config includes, when they are in the root: git
        // reads their settings as the repository's.
        for name in ["config", "config.worktree"] {
            included.extend(
                included_files(&dir.join(name))
                    .into_iter()
                    .filter(|f| f.starts_with(root) && f.is_file()),
            );
        }
        for below in ["modules", "worktrees"] {
            git_dirs.extend(git_dirs_below(&dir.join(below), 0));
        }
        // The common dir a worktree's git dir reads its config and hooks
        // from, when it is in the root.
        if let Some(common) = common_dir(&dir).filter(|c| c.starts_with(root)) {
            git_dirs.push(common);
        }
        pinned.push(dir);
    }
    out.extend(included.iter().cloned());
    // What the person's own settings run from the root (a hooks path, a
    // script a Claude hook names, a local MCP server's file).
    out.extend(super::settings_targets::of_root(root));
    out.retain(|p| std::fs::symlink_metadata(p).is_ok());
    out.sort();
    out.dedup();
    // Every folder between the root and a git dir is pinned too: renaming
    // `vendor` aside and putting a copy of `vendor/lib` with another
    // config in its place would otherwise go around the git dir's pin.
    let ancestors: Vec<PathBuf> = pinned
        .iter()
        .chain(&dot_git_files)
        .chain(&included)
        .flat_map(|d| {
            d.ancestors()
                .skip(1)
                .take_while(|a| a.starts_with(root) && *a != root)
                .map(Path::to_path_buf)
                .collect::<Vec<_>>()
        })
        .collect();
    pinned.extend(ancestors);
    // Outer folders before the ones inside them (`vendor` before
    // `vendor/lib/.git`): a bind over the outer one would hide the inner.
    pinned.retain(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()));
    pinned.sort();
    pinned.dedup();
    ForPrograms {
        read_only: out,
        git_dirs: pinned,
    }
}

/// What programs may not change in a root: the files that make code run
/// (read-only), and the git dirs that hold them with every folder between
/// the root and them (pinned in place: a git dir, or a folder above it,
/// renamed aside and replaced by a copy with a new config would otherwise
/// go around the read-only files).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForPrograms {
    /// Files and folders programs may only read.
    pub read_only: Vec<PathBuf>,
    /// Git dirs, and the folders between the root and them (or a `.git`
    /// file), that programs may write in but not rename, replace or remove.
    pub git_dirs: Vec<PathBuf>,
}

/// A root's last walk: its list, when it ended and how long it took, and
/// whether a new walk is under way.
struct Walk {
    list: ForPrograms,
    ended: std::time::Instant,
    took: std::time::Duration,
    walking: bool,
}

/// Walks of a root start at most this many times their own length apart,
/// so walking takes at most a tenth of a core however often calls come.
const WALK_SPACING: u32 = 10;

/// The last walk of each root.
static KEPT: std::sync::Mutex<Option<std::collections::HashMap<PathBuf, Walk>>> =
    std::sync::Mutex::new(None);

/// [`protected_for_programs`] timed, and kept as `root`'s last walk.
fn walk_and_keep(root: &Path) -> ForPrograms {
    let start = std::time::Instant::now();
    let list = protected_for_programs(root);
    let walk = Walk {
        list: list.clone(),
        ended: std::time::Instant::now(),
        took: start.elapsed(),
        walking: false,
    };
    if let Ok(mut k) = KEPT.lock() {
        k.get_or_insert_with(Default::default)
            .insert(root.to_path_buf(), walk);
    }
    list
}

/// [`protected_for_programs`] without its walk on the caller's time: the
/// first call for a root walks; later ones get the last walk's list at
/// once and start a new walk beside the call (one at a time per root, and
/// [`WALK_SPACING`] times the last walk's length after it), so the list is
/// one call old, or a tenth of a second on a small root. A walk of a large
/// root took 390 ms (130,000 files), of a small one 9 ms.
pub fn protected_for_programs_kept(root: &Path) -> ForPrograms {
    let mut kept = match KEPT.lock() {
        Ok(k) => k,
        Err(_) => return protected_for_programs(root),
    };
    let Some(last) = kept.get_or_insert_with(Default::default).get_mut(root) else {
        drop(kept);
        return walk_and_keep(root);
    };
    let list = last.list.clone();
    if !last.walking && last.ended.elapsed() >= last.took * WALK_SPACING {
        last.walking = true;
        let root = root.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("nib-git-dirs".into())
            .spawn(move || walk_and_keep(&root));
        if spawned.is_err() {
            last.walking = false;
        }
    }
    list
}

/// The git dirs in `dir` (`.git/modules` or `.git/worktrees`): a submodule's
/// name may hold slashes, so folders that are not git dirs are looked into,
/// a few levels deep.
pub(crate) fn git_dirs_below(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let p = e.path();
        if is_git_dir(&p) {
            found.push(p);
        } else if depth < 4 {
            found.extend(git_dirs_below(&p, depth + 1));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_run_code_are_recognised_by_name() {
        for p in [
            ".git/hooks/pre-commit",
            ".git/config",
            ".git",
            ".git/modules/lib/config",
            ".git/modules/a/b/hooks/post-checkout",
            ".git/worktrees/w/commondir",
            "vendor/lib/.git",
            "vendor/lib/.git/config",
            "nib.json",
            ".mcp.json",
            ".claude/settings.local.json",
            ".claude/notes.md",
            ".vscode/tasks.json",
            "opencode.json",
            "opencode.jsonc",
            ".opencode/plugin/run.ts",
        ] {
            assert!(makes_code_run(Path::new(p)), "{p}");
        }
        for p in [
            "src/nib.json",
            ".gitignore",
            ".git/HEAD",
            ".git/index.lock",
            "docs/.claude/settings.json",
            "config",
        ] {
            assert!(!makes_code_run(Path::new(p)), "{p}");
        }
        let root = Path::new("/nonexistent-root");
        assert!(write_needs_approval(root, Path::new(".git/HEAD")));
        assert!(write_needs_approval(root, Path::new("a/.git/objects/x")));
        assert!(!write_needs_approval(root, Path::new("src/main.rs")));
    }

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn every_git_dir_of_a_root_is_found_for_programs() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        git(&root, &["init", "-q"]);
        std::fs::create_dir_all(root.join("vendor/lib")).unwrap();
        git(&root.join("vendor/lib"), &["init", "-q"]);
        std::fs::create_dir_all(root.join(".git/modules/a/b/objects")).unwrap();
        std::fs::create_dir_all(root.join(".git/modules/a/b/refs")).unwrap();
        std::fs::write(root.join(".git/modules/a/b/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join(".git/modules/a/b/config"), "").unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/.git"), "gitdir: ../.git/modules/a/b\n").unwrap();
        // An ignored folder is not walked.
        std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
        std::fs::create_dir_all(root.join("ignored/repo")).unwrap();
        git(&root.join("ignored/repo"), &["init", "-q"]);
        let found = protected_for_programs(&root).read_only;
        for p in [
            ".git/config",
            ".git/hooks",
            "vendor/lib/.git/config",
            "vendor/lib/.git/hooks",
            ".git/modules/a/b/config",
            "sub/.git",
        ] {
            assert!(found.contains(&root.join(p)), "{p}: {found:?}");
        }
        assert!(
            !found.iter().any(|p| p.starts_with(root.join("ignored"))),
            "{found:?}"
        );
        assert!(found.iter().all(|p| p.exists()), "{found:?}");
        // A git dir known by its content, not its name.
        git(&root, &["init", "-q", "--bare", "bare"]);
        let again = protected_for_programs(&root);
        assert!(again.read_only.contains(&root.join("bare/config")));
        // The git dirs themselves are pinned, and every folder between the
        // root and each of them (or a `.git` file), outer before inner.
        assert_eq!(
            again.git_dirs,
            [
                root.join(".git"),
                root.join(".git/modules"),
                root.join(".git/modules/a"),
                root.join(".git/modules/a/b"),
                root.join("bare"),
                root.join("sub"),
                root.join("vendor"),
                root.join("vendor/lib"),
                root.join("vendor/lib/.git"),
            ]
        );
        assert!(write_needs_approval(&root, Path::new("bare/config")));
        // A file the root's config includes is held like the config.
        std::fs::create_dir_all(root.join("conf")).unwrap();
        std::fs::write(root.join("conf/team.gitconfig"), "[user]\n").unwrap();
        std::fs::write(
            root.join(".git/config"),
            "[core]\n\tbare = false\n[include] path = \"../conf/team.gitconfig\"\n",
        )
        .unwrap();
        let held = protected_for_programs(&root);
        assert!(held.read_only.contains(&root.join("conf/team.gitconfig")));
        assert!(held.git_dirs.contains(&root.join("conf")));
        assert!(write_needs_approval(
            &root,
            Path::new("conf/team.gitconfig")
        ));
        assert!(write_needs_approval(
            &root,
            Path::new("bare/objects/info/alternates")
        ));
        assert!(!write_needs_approval(&root, Path::new("vendor/x.txt")));
    }
}
