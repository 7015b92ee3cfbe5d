//! `git submodule init` and `git submodule update --init` inside the
//! sandbox: registering a submodule writes `submodule.NAME.url` and
//! `.active` to the git dir's config, which is read-only for programs, so
//! before git runs the worker asks the broker to register them
//! ([`Ask::RegisterSubmodules`]; the broker writes only those two keys,
//! `nib_files::fs::submodules`). git then finds them registered and writes
//! the rest (`.git/modules/NAME`, the checkout) where programs may write.
//!
//! Only the command line given to nibash's `git` is recognised: the
//! global options that keep git in a repository nib can name (`-C`, `-c`
//! and the pathspec and pager switches), then `submodule [--quiet]` and
//! `init` or `update … --init …`. Anything else runs as it is.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use brush_core::ExecutionContext;

use super::link::{Se, ask};
use crate::channel::Ask;

/// What a recognised command line registers.
#[derive(Debug, PartialEq, Eq)]
struct Wanted {
    /// The folder git starts in (`-C` applied).
    dir: PathBuf,
    /// The paths named, as given (relative to `dir`).
    paths: Vec<String>,
    /// `--recursive`.
    recursive: bool,
}

/// The `git submodule update` options that take the next word as value.
const UPDATE_WITH_VALUE: &[&str] = &["--reference", "--depth", "-j", "--jobs", "--filter"];

/// Global options that change nothing about which repository git reads.
const PLAIN_GLOBAL: &[&str] = &[
    "--no-pager",
    "-P",
    "-p",
    "--paginate",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
];

/// The registration `git ARGS` (started in `cwd`) needs, if it is
/// `git submodule init` or `git submodule update --init`.
fn wanted(cwd: &Path, args: &[String]) -> Option<Wanted> {
    parsed(cwd, args).and_then(|(w, init, _)| init.then_some(w))
}

/// The submodules `git ARGS` updates, if it is `git submodule update`
/// (with `--init` or not).
fn updated(cwd: &Path, args: &[String]) -> Option<Wanted> {
    parsed(cwd, args).and_then(|(w, _, update)| update.then_some(w))
}

/// A recognised `git submodule init|update` line: what it names, whether
/// it registers (`init`, `--init`) and whether it updates.
fn parsed(cwd: &Path, args: &[String]) -> Option<(Wanted, bool, bool)> {
    let mut dir = cwd.to_path_buf();
    let mut i = 0;
    loop {
        let a = args.get(i)?.as_str();
        match a {
            "-C" => {
                dir = dir.join(args.get(i + 1)?);
                i += 2;
            }
            "-c" => i += 2,
            _ if PLAIN_GLOBAL.contains(&a) => i += 1,
            "submodule" => break,
            // `git pull --recurse-submodules` ends with `git submodule
            // update` of every submodule.
            "pull" => {
                let recurse = args.get(i + 1..).unwrap_or_default().iter().any(|a| {
                    matches!(
                        a.as_str(),
                        "--recurse-submodules"
                            | "--recurse-submodules=yes"
                            | "--recurse-submodules=true"
                            | "--recurse-submodules=on-demand"
                    )
                });
                let wanted = Wanted {
                    dir,
                    paths: Vec::new(),
                    recursive: true,
                };
                return recurse.then_some((wanted, false, true));
            }
            _ => return None,
        }
    }
    i += 1;
    while matches!(args.get(i).map(String::as_str), Some("-q" | "--quiet")) {
        i += 1;
    }
    let sub = args.get(i)?.as_str();
    let rest = args.get(i + 1..).unwrap_or_default();
    let mut paths = Vec::new();
    let mut init = sub == "init";
    let mut recursive = false;
    if sub != "init" && sub != "update" {
        return None;
    }
    let mut j = 0;
    let mut after_dashes = false;
    while let Some(a) = rest.get(j) {
        j += 1;
        if after_dashes || !a.starts_with('-') {
            paths.push(a.clone());
        } else if a == "--" {
            after_dashes = true;
        } else if a == "--init" {
            init = true;
        } else if a == "--recursive" {
            recursive = true;
        } else if sub == "update" && UPDATE_WITH_VALUE.contains(&a.as_str()) {
            j += 1;
        }
    }
    Some((
        Wanted {
            dir,
            paths,
            recursive,
        },
        init,
        sub == "update",
    ))
}

/// `path` without `.` and with `..` taken lexically.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// The gitlinks (submodules) of `git ls-files --stage -z` output that are
/// `named` or below a folder named (all when none is).
fn gitlinks(listed: &[u8], named: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for entry in listed.split(|b| *b == 0) {
        let entry = String::from_utf8_lossy(entry);
        let Some((meta, path)) = entry.split_once('\t') else {
            continue;
        };
        if !meta.starts_with("160000 ") {
            continue;
        }
        let wanted = named.is_empty()
            || named.iter().any(|n| {
                let n = n.trim_end_matches('/');
                n.is_empty() || path == n || path.starts_with(&format!("{n}/"))
            });
        if wanted && !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    out
}

/// Before `git ARGS` runs: when it updates submodules, asks the broker to
/// take out the `core.worktree` git would rewrite in the configs of those
/// already checked out (read-only here; see
/// `nib_files::fs::submodules::hide_worktrees`). Returns whether it asked:
/// then [`restore`] once git is done.
pub fn hide(ctx: &ExecutionContext<'_, Se>, args: &[String]) -> bool {
    let Some(w) = updated(ctx.shell.working_dir(), args) else {
        return false;
    };
    let Some((top, paths)) = submodules_named(ctx, &w) else {
        return false;
    };
    let _ = ask(Ask::HideWorktrees {
        top,
        paths,
        recursive: w.recursive,
    });
    true
}

/// After a `git submodule update` [`hide`] asked for: the broker writes
/// back what it took out, and what it could not is said on `stderr`.
pub fn restore(mut stderr: impl Write) {
    let r = ask(Ask::RestoreWorktrees);
    let _ = stderr.write_all(r.err.as_bytes());
}

/// Before `git ARGS` runs: when it registers submodules, asks the broker
/// to register them (the config is read-only here) and prints what the
/// broker left out. git runs afterwards in any case and says the rest.
pub fn register(ctx: &ExecutionContext<'_, Se>, args: &[String]) {
    let Some(w) = wanted(ctx.shell.working_dir(), args) else {
        return;
    };
    let Some((top, paths)) = submodules_named(ctx, &w) else {
        return;
    };
    let r = ask(Ask::RegisterSubmodules {
        top,
        paths,
        recursive: w.recursive,
    });
    let _ = ctx.stderr().write_all(r.err.as_bytes());
}

/// The work tree `w` names and the gitlinks (submodules) in it that it
/// names, as git takes them; none when git would refuse the line itself.
fn submodules_named(ctx: &ExecutionContext<'_, Se>, w: &Wanted) -> Option<(PathBuf, Vec<String>)> {
    let Ok(dir) = std::fs::canonicalize(&w.dir) else {
        return None;
    };
    let top = match super::git::run(
        ctx,
        &[
            "-C".into(),
            dir.display().to_string(),
            "rev-parse".into(),
            "--show-toplevel".into(),
        ],
    ) {
        Ok((0, out, _)) => PathBuf::from(String::from_utf8_lossy(&out).trim_end_matches('\n')),
        _ => return None,
    };
    let named: Vec<String> = w
        .paths
        .iter()
        .filter_map(|p| {
            let abs = normal(&dir.join(p));
            abs.strip_prefix(&top)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        })
        .collect();
    if named.len() < w.paths.len() {
        // A path outside the work tree: git refuses it itself.
        return None;
    }
    // As git: only submodules the index records (gitlinks) are registered.
    let Ok((0, listed, _)) = super::git::run(
        ctx,
        &[
            "-C".into(),
            top.display().to_string(),
            "ls-files".into(),
            "--stage".into(),
            "-z".into(),
        ],
    ) else {
        return None;
    };
    let paths = gitlinks(&listed, &named);
    (!paths.is_empty()).then_some((top, paths))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn init_and_update_init_are_recognised() {
        let cwd = Path::new("/p");
        let got = |s: &str| wanted(cwd, &words(s));
        assert_eq!(
            got("submodule init"),
            Some(Wanted {
                dir: "/p".into(),
                paths: vec![],
                recursive: false
            })
        );
        assert_eq!(
            got(
                "-C sub -c protocol.file.allow=always submodule -q update --init --recursive --depth 1 -- a b"
            ),
            Some(Wanted {
                dir: "/p/sub".into(),
                paths: vec!["a".into(), "b".into()],
                recursive: true
            })
        );
        assert_eq!(got("submodule update"), None);
        assert_eq!(
            updated(cwd, &words("submodule update -- m")),
            Some(Wanted {
                dir: "/p".into(),
                paths: vec!["m".into()],
                recursive: false
            })
        );
        assert_eq!(updated(cwd, &words("submodule init")), None);
        assert!(updated(cwd, &words("-C c pull -q --recurse-submodules")).is_some());
        assert_eq!(updated(cwd, &words("pull --recurse-submodules=no")), None);
        assert_eq!(wanted(cwd, &words("pull --recurse-submodules")), None);
        assert_eq!(got("submodule status"), None);
        assert_eq!(got("--git-dir=/x submodule init"), None);
        assert_eq!(got("status"), None);
    }

    #[test]
    fn only_gitlinks_named_are_registered() {
        let listed = b"100644 aa 0\ta.txt\x00160000 bb 0\tlib/m\x00160000 cc 0\tn\x00";
        assert_eq!(gitlinks(listed, &[]), vec!["lib/m", "n"]);
        assert_eq!(gitlinks(listed, &["lib".into()]), vec!["lib/m"]);
        assert_eq!(gitlinks(listed, &["a.txt".into()]), Vec::<String>::new());
    }
}
