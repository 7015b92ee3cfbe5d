//! Registering a repository's submodules for a sandboxed program: what
//! `git submodule init` writes to the git dir's config, written by the
//! broker because that config is read-only for programs (`runs_code`).
//!
//! The broker reads the repository's `.gitmodules` (which programs may
//! write, so it is read as the model's) and appends to `.git/config` only
//! `[submodule "NAME"]` with `url` and `active = true`, for each submodule
//! git would accept and that is not registered yet. Nothing else in
//! `.gitmodules` reaches the config: not `update` (a `!command` runs one),
//! not any other key. A name with a `..` component, a leading `/` or `-`,
//! quotes, backslashes or control characters is refused, as is a url that
//! starts with `-`, uses the `ext::` or `fd::` transport, or holds quotes,
//! backslashes or control characters. A relative url (`./x`, `../x`) is
//! resolved as git resolves it at init: against the url of the remote
//! `origin`, else against the repository's folder.
//!
//! The config is appended to in place (same inode): under bubblewrap or
//! the worker's own bind it is a read-only bind of that very file, which a
//! rename would leave showing the old content. What git then writes
//! (`.git/modules/NAME`) is where programs may write; the sweep
//! (`git_guard`) judges it, and keeps `submodule.*.url` and `.active`.

use std::io::Write;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use super::{FsError, Kind, Scope, beneath};

/// The largest `.gitmodules` or config read.
const LIMIT: u64 = 1 << 20;

/// How deep `--recursive` follows submodules that are already there.
const DEPTH: usize = 8;

/// What registering did, per submodule.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Registered {
    /// Names newly registered, as `NAME (PATH)`.
    pub added: Vec<String>,
    /// Submodules left out, each with the reason.
    pub refused: Vec<String>,
}

/// One `[submodule "NAME"]` of a `.gitmodules`, as read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Declared {
    name: String,
    path: Option<String>,
    url: Option<String>,
    /// Why the section cannot be used as it stands.
    odd: Option<String>,
}

/// Whether git would take `name` as a submodule's name, and it can be
/// written in a config subsection as it is.
pub fn name_is_valid(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['/', '-'])
        && !name
            .chars()
            .any(|c| c.is_control() || c == '"' || c == '\\')
        && !name.split('/').any(|part| part == "..")
}

/// Why `url` may not be registered, if it may not.
fn url_refusal(url: &str) -> Option<&'static str> {
    let lower = url.to_ascii_lowercase();
    if url.is_empty() {
        Some("it is empty")
    } else if url.starts_with('-') {
        Some("it starts with '-' (git would take it as an option)")
    } else if lower.starts_with("ext::") || lower.starts_with("fd::") {
        Some("the ext:: and fd:: transports run commands")
    } else if url.chars().any(|c| c.is_control() || c == '"' || c == '\\') {
        Some("it holds a quote, backslash or control character")
    } else {
        None
    }
}

/// The value of a `key = value` line, when it is of the plain form this
/// reading keeps (no quotes, backslashes or inline comments).
fn plain_value(v: &str) -> Result<String, &'static str> {
    let v = v.trim();
    if v.contains(['"', '\\', '#', ';']) {
        Err("a value with quotes, backslashes or comments")
    } else {
        Ok(v.to_string())
    }
}

/// The `[submodule "NAME"]` sections of a config-format text, in order
/// (a name seen twice is one entry, its keys merged as git does).
fn declared(text: &str) -> Vec<Declared> {
    let mut out: Vec<Declared> = Vec::new();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            continue;
        }
        if t.starts_with('[') {
            current = None;
            let Some(inner) = t.strip_suffix(']').map(|s| &s[1..]) else {
                continue;
            };
            let Some((section, sub)) = inner.split_once(' ') else {
                continue;
            };
            if !section.eq_ignore_ascii_case("submodule") {
                continue;
            }
            let sub = sub.trim();
            let name = sub
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .unwrap_or(sub);
            let odd = (!sub.starts_with('"') || !sub.ends_with('"') || sub.len() < 2)
                .then(|| "a section header of an unusual form".to_string());
            let i = match out.iter().position(|d| d.name == name) {
                Some(i) => i,
                None => {
                    out.push(Declared {
                        name: name.to_string(),
                        ..Declared::default()
                    });
                    out.len() - 1
                }
            };
            if let (Some(o), Some(d)) = (odd, out.get_mut(i)) {
                d.odd.get_or_insert(o);
            }
            current = Some(i);
            continue;
        }
        let Some(d) = current.and_then(|i| out.get_mut(i)) else {
            continue;
        };
        let (key, value) = t.split_once('=').unwrap_or((t, ""));
        let key = key.trim().to_ascii_lowercase();
        if key != "path" && key != "url" {
            continue;
        }
        match plain_value(value) {
            Ok(v) if key == "path" => d.path = Some(v),
            Ok(v) => d.url = Some(v),
            Err(why) => {
                d.odd.get_or_insert(format!("{key} is {why}"));
            }
        }
    }
    out
}

/// `remote.origin.url` of a config text, when plainly written.
fn origin_url(config: &str) -> Option<String> {
    let mut in_origin = false;
    let mut url = None;
    for line in config.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_origin = t.eq_ignore_ascii_case("[remote \"origin\"]");
            continue;
        }
        if in_origin
            && let Some((k, v)) = t.split_once('=')
            && k.trim().eq_ignore_ascii_case("url")
        {
            url = plain_value(v).ok();
        }
    }
    url
}

/// A relative url (`./x`, `../x`) resolved against `base` as git does at
/// init; any other url as it is. `None` when it climbs above the base or
/// the base is itself relative.
fn resolve(url: &str, base: &str) -> Option<String> {
    if !url.starts_with("./") && !url.starts_with("../") {
        return Some(url.to_string());
    }
    if base.starts_with('.') || base.is_empty() {
        return None;
    }
    let mut base = base.trim_end_matches('/').to_string();
    let mut rest = url;
    loop {
        if let Some(r) = rest.strip_prefix("./") {
            rest = r;
        } else if let Some(r) = rest.strip_prefix("../") {
            rest = r;
            // An scp-like base (`host:path`) with no folder left is not
            // followed: git's answer there depends on more than the text.
            let cut = base.rfind('/')?;
            base.truncate(cut);
            if base.is_empty() || base.ends_with(':') || base.ends_with('/') {
                return None;
            }
        } else {
            break;
        }
    }
    Some(format!("{base}/{rest}"))
}

/// Reads a small regular file beneath the roots.
fn read(scope: &Scope, path: &Path) -> Result<String, FsError> {
    let f = super::read_file(scope, path, LIMIT)?;
    Ok(String::from_utf8_lossy(&f.bytes).into_owned())
}

/// The git dir of the work tree `top`: `top/.git`, or where its `.git`
/// file points.
fn git_dir_of(scope: &Scope, top: &Path) -> Option<PathBuf> {
    let dot = top.join(".git");
    match super::stat(scope, &dot).ok()?.kind {
        Kind::Dir => Some(dot),
        Kind::File => {
            let text = read(scope, &dot).ok()?;
            let to = text.lines().next()?.strip_prefix("gitdir:")?.trim();
            Some(top.join(to))
        }
        Kind::Special(_) => None,
    }
}

/// Whether the submodule at `path` is one of `wanted` (paths relative to
/// the work tree; empty means all).
fn is_wanted(path: &str, wanted: &[String]) -> bool {
    wanted.is_empty()
        || wanted.iter().any(|w| {
            let w = w.trim_end_matches('/');
            w.is_empty() || w == "." || path == w || path.starts_with(&format!("{w}/"))
        })
}

/// Registers the submodules `.gitmodules` of the work tree `top` declares
/// at `wanted` (all when empty) that its config does not have a url for;
/// with `recursive`, then those of each wanted submodule already checked
/// out. Under any scope but the sandbox's nothing is done: programs write
/// the config themselves there.
pub fn register(scope: &Scope, top: &Path, wanted: &[String], recursive: bool) -> Registered {
    let mut done = Registered::default();
    if matches!(scope, Scope::Sandbox(_)) {
        register_in(scope, top, wanted, recursive, DEPTH, &mut done);
    }
    done
}

fn register_in(
    scope: &Scope,
    top: &Path,
    wanted: &[String],
    recursive: bool,
    depth: usize,
    done: &mut Registered,
) {
    let Ok(modules) = read(scope, &top.join(".gitmodules")) else {
        return;
    };
    // Only a git dir's config is appended to (a `.git` file may name any
    // folder beneath the roots).
    let Some(git_dir) = git_dir_of(scope, top).filter(|d| {
        super::stat(scope, &d.join("HEAD")).is_ok_and(|s| s.kind == Kind::File)
            && super::stat(scope, &d.join("refs")).is_ok_and(|s| s.kind == Kind::Dir)
    }) else {
        return;
    };
    let config_path = git_dir.join("config");
    let Ok(config) = read(scope, &config_path) else {
        return;
    };
    let known: Vec<String> = declared(&config)
        .into_iter()
        .filter(|d| d.url.is_some())
        .map(|d| d.name)
        .collect();
    let base = origin_url(&config).unwrap_or_else(|| top.display().to_string());
    let mut add = String::new();
    let mut added = Vec::new();
    let mut present = Vec::new();
    for d in declared(&modules) {
        let shown = nib_text::path_text::escape_control(&d.name);
        let Some(path) = d.path.clone() else {
            continue;
        };
        if !is_wanted(&path, wanted) {
            continue;
        }
        let why = if let Some(odd) = &d.odd {
            Some(odd.clone())
        } else if !name_is_valid(&d.name) {
            Some("git does not accept the name".to_string())
        } else {
            match d.url.as_deref().map(|u| (u, url_refusal(u))) {
                None => Some("it has no url".to_string()),
                Some((_, Some(why))) => Some(format!("its url is refused: {why}")),
                Some((u, None)) => match resolve(u, &base) {
                    None => Some(format!(
                        "its relative url {u} cannot be resolved against {base}"
                    )),
                    Some(r) => match url_refusal(&r) {
                        Some(why) => Some(format!("its url is refused: {why}")),
                        None => {
                            if !known.contains(&d.name) {
                                add.push_str(&format!(
                                    "[submodule \"{}\"]\n\turl = {r}\n\tactive = true\n",
                                    d.name
                                ));
                                added.push(format!("{} ({path})", d.name));
                            }
                            present.push(path.clone());
                            None
                        }
                    },
                },
            }
        };
        if let Some(why) = why {
            done.refused.push(format!(
                "submodule \"{shown}\" was not registered: {why}; nothing was written for it"
            ));
        }
    }
    if !add.is_empty() {
        if !config.is_empty() && !config.ends_with('\n') {
            add.insert(0, '\n');
        }
        match append(scope, &config_path, add.as_bytes()) {
            Ok(()) => done.added.extend(added),
            Err(e) => done.refused.push(format!(
                "the submodules of {} were not registered: {} could not be written ({e}); nothing was written",
                top.display(),
                config_path.display()
            )),
        }
    }
    if recursive && depth > 0 {
        for path in present {
            let inner = top.join(&path);
            if super::exists(scope, &inner.join(".git")) {
                register_in(scope, &inner, &[], true, depth - 1, done);
            }
        }
    }
}

/// Appends `bytes` to the regular file at `path` beneath the roots, in
/// place (the same inode), refusing a link or a file with other names.
fn append(scope: &Scope, path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    let Scope::Sandbox(roots) = scope else {
        return Err(FsError::Io(std::io::Error::other(
            "registering submodules is done only under the sandbox",
        )));
    };
    let (fd, _, _) = beneath::open(
        roots,
        path,
        OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = super::fstat(&fd)?;
    if st.kind != Kind::File || st.nlink != 1 {
        return Err(FsError::Io(std::io::Error::other(
            "it is not a regular file with one name",
        )));
    }
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}

/// A submodule's config whose `core.worktree` line the broker took out
/// for the length of a `git submodule update` ([`hide_worktrees`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    /// The config (`.git/modules/NAME/config`).
    pub config: PathBuf,
    /// Its bytes before.
    pub original: Vec<u8>,
    /// Its bytes without the line, as written.
    pub written: Vec<u8>,
}

/// The bytes of `config` without its `core.worktree` line, when there is
/// exactly one, in the plain form git writes (`worktree = VALUE`, no
/// quotes, backslashes or comments, the line before not continued) and
/// naming `worktree` from the git dir `git_dir`; otherwise none.
fn without_worktree(config: &[u8], git_dir: &Path, worktree: &Path) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(config).ok()?;
    let mut section = String::new();
    let mut found = None;
    let mut start = 0;
    let mut continued = false;
    for line in text.split_inclusive('\n') {
        let here = start;
        start += line.len();
        let t = line.trim();
        let was_continued = continued;
        continued = t.ends_with('\\');
        if let Some(h) = t.strip_prefix('[') {
            section = h
                .split(']')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            continue;
        }
        if section != "core" || was_continued {
            continue;
        }
        let Some((k, v)) = t.split_once('=') else {
            continue;
        };
        if !k.trim().eq_ignore_ascii_case("worktree") {
            continue;
        }
        let v = v.trim();
        if found.is_some()
            || v.is_empty()
            || v.contains(['"', '\\', ';', '#'])
            || v.chars().any(char::is_control)
        {
            return None;
        }
        let named = lexical(&git_dir.join(v));
        if named != lexical(worktree) {
            return None;
        }
        found = Some(here..start);
    }
    let r = found?;
    let mut out = config[..r.start].to_vec();
    out.extend_from_slice(&config[r.end..]);
    Some(out)
}

/// `path` with `.` left out and `..` taken lexically.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Before `git submodule update` in the work tree `top`: git (2.47)
/// rewrites `core.worktree` in the config of each submodule already
/// checked out whenever the setting is there (a new file renamed onto it,
/// which fails on the read-only bind), and writes nothing when it is not,
/// finding the work tree through the submodule's `.git` file as usual.
/// So for each of `paths` (relative to `top`) whose `.git` file names a
/// git dir below `top`'s git dir's `modules/`, whose config's only
/// `core.worktree` names that very submodule, that line is taken out in
/// place (same inode). The broker writes back each returned config's
/// original bytes when git is done ([`restore_worktrees`]). Nothing is
/// added to a config, so nothing a program wrote there gains anything.
/// With `recursive`, the same for the submodules each one's `.gitmodules`
/// declares, nested (git's `--recursive` updates those too). Under any
/// scope but the sandbox's nothing is done.
pub fn hide_worktrees(scope: &Scope, top: &Path, paths: &[String], recursive: bool) -> Vec<Hidden> {
    let mut hidden = Vec::new();
    if matches!(scope, Scope::Sandbox(_)) {
        hide_in(scope, top, paths, recursive, DEPTH, &mut hidden);
    }
    hidden
}

fn hide_in(
    scope: &Scope,
    top: &Path,
    paths: &[String],
    recursive: bool,
    depth: usize,
    hidden: &mut Vec<Hidden>,
) {
    let Some(own) = git_dir_of(scope, top) else {
        return;
    };
    let modules = lexical(&own.join("modules"));
    for path in paths {
        let work = lexical(&top.join(path));
        if !work.starts_with(top) {
            continue;
        }
        let Ok(Kind::File) = super::stat(scope, &work.join(".git")).map(|m| m.kind) else {
            continue;
        };
        let Some(git_dir) = git_dir_of(scope, &work).map(|d| lexical(&d)) else {
            continue;
        };
        if !git_dir.starts_with(&modules) || git_dir == modules {
            continue;
        }
        let config = git_dir.join("config");
        if let Ok(f) = super::read_file(scope, &config, LIMIT)
            && let Some(written) = without_worktree(&f.bytes, &git_dir, &work)
            && rewrite(scope, &config, &written).is_ok()
        {
            hidden.push(Hidden {
                config,
                original: f.bytes,
                written,
            });
        }
        if recursive && depth > 0 {
            let nested: Vec<String> = read(scope, &work.join(".gitmodules"))
                .map(|t| declared(&t).into_iter().filter_map(|d| d.path).collect())
                .unwrap_or_default();
            if !nested.is_empty() {
                hide_in(scope, &work, &nested, true, depth - 1, hidden);
            }
        }
    }
}

/// Writes back what [`hide_worktrees`] took out, where the config still
/// holds what it wrote; says what could not be.
pub fn restore_worktrees(scope: &Scope, hidden: &[Hidden]) -> Vec<String> {
    let mut failed = Vec::new();
    for h in hidden {
        let now = super::read_file(scope, &h.config, LIMIT).map(|f| f.bytes);
        if now.as_deref().ok() != Some(h.written.as_slice()) {
            continue;
        }
        if let Err(e) = rewrite(scope, &h.config, &h.original) {
            failed.push(format!(
                "{}: its core.worktree could not be written back ({e}); git finds the submodule's \
                 work tree through its .git file without it",
                h.config.display()
            ));
        }
    }
    failed
}

/// Replaces the content of the regular file at `path` beneath the roots
/// in place (the same inode), refusing a link or a file with other names.
fn rewrite(scope: &Scope, path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    let Scope::Sandbox(roots) = scope else {
        return Err(FsError::Io(std::io::Error::other(
            "a submodule's config is written back only under the sandbox",
        )));
    };
    let (fd, _, _) = beneath::open(
        roots,
        path,
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = super::fstat(&fd)?;
    if st.kind != Kind::File || st.nlink != 1 {
        return Err(FsError::Io(std::io::Error::other(
            "it is not a regular file with one name",
        )));
    }
    let mut f = std::fs::File::from(fd);
    f.set_len(0)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_git_refuses_are_refused() {
        assert!(name_is_valid("m"));
        assert!(name_is_valid("lib/m"));
        for bad in [
            "", "../x", "a/../b", "..", "/abs", "-x", "a\"b", "a\\b", "a\nb",
        ] {
            assert!(!name_is_valid(bad), "{bad:?}");
        }
    }

    #[test]
    fn urls_that_run_commands_are_refused() {
        assert_eq!(url_refusal("/tmp/src"), None);
        assert_eq!(url_refusal("https://example.com/x.git"), None);
        for bad in [
            "-uhelp",
            "ext::sh -c touch M",
            "EXT::x",
            "fd::3",
            "a\tb",
            "",
        ] {
            assert!(url_refusal(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn only_path_and_url_are_read_from_gitmodules() {
        let text = "[submodule \"m\"]\n\tpath = m\n\turl = ../src\n\tupdate = !touch X\n\
                    [core]\n\tfsmonitor = x\n[submodule \"q\"]\n\tpath = q\n\turl = \"x\"\n";
        let d = declared(text);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].path.as_deref(), Some("m"));
        assert_eq!(d[0].url.as_deref(), Some("../src"));
        assert_eq!(d[0].odd, None);
        assert!(d[1].odd.is_some());
    }

    #[test]
    fn relative_urls_resolve_as_git_does() {
        assert_eq!(resolve("../src", "/p/root").as_deref(), Some("/p/src"));
        assert_eq!(resolve("./sub", "/p/root").as_deref(), Some("/p/root/sub"));
        assert_eq!(
            resolve("../b.git", "https://h/o/a.git").as_deref(),
            Some("https://h/o/b.git")
        );
        assert_eq!(resolve("../b", "host:a").as_deref(), None);
        assert_eq!(resolve("../b", "../a"), None);
        assert_eq!(resolve("/abs", "/p").as_deref(), Some("/abs"));
    }

    #[test]
    fn wanted_paths_match_the_path_or_a_folder_above() {
        assert!(is_wanted("lib/m", &[]));
        assert!(is_wanted("lib/m", &["lib".into()]));
        assert!(is_wanted("lib/m", &["lib/m/".into()]));
        assert!(!is_wanted("lib/m", &["li".into()]));
    }

    #[test]
    fn only_a_plain_worktree_naming_the_submodule_is_taken_out() {
        let gd = Path::new("/p/.git/modules/m");
        let wt = Path::new("/p/m");
        let c =
            b"[core]\n\tbare = false\n\tworktree = ../../../m\n[remote \"origin\"]\n\turl = /u\n";
        assert_eq!(
            without_worktree(c, gd, wt).as_deref(),
            Some(&b"[core]\n\tbare = false\n[remote \"origin\"]\n\turl = /u\n"[..])
        );
        // Another folder, quotes, two of them, a continued line, none.
        for odd in [
            &b"[core]\n\tworktree = ../../../n\n"[..],
            b"[core]\n\tworktree = \"../../../m\"\n",
            b"[core]\n\tworktree = ../../../m\n\tworktree = ../../../m\n",
            b"[core]\n\tx = a \\\n\tworktree = ../../../m\n",
            b"[core]\n\tbare = false\n",
        ] {
            assert_eq!(
                without_worktree(odd, gd, wt),
                None,
                "{}",
                String::from_utf8_lossy(odd)
            );
        }
    }
}
