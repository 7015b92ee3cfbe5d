//! `find` and `ls` whose output goes straight to the model: the system
//! program runs as asked, and its paths print grouped by folder
//! (`src/{a.rs, b.rs, sub/}`), folders marked with a `/`. Output formats of
//! their own (`-printf`, `-exec`, `ls -l` …) and anything piped, redirected
//! or captured stay the program's (the callers check).

use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use brush_core::{ExecutionContext, ExecutionResult};

use super::link::Se;
use super::system::{capture, finish};
use crate::channel::Reply;

/// Grouped paths, one group per line.
fn grouped(paths: &[String]) -> String {
    let mut text = nib_text::by_folder::group(paths).join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    text
}

/// Whether find's expression only prints paths, one per line (no other
/// action, no output format of its own).
pub fn lists_paths(args: &[String]) -> bool {
    const ACTIONS: &[&str] = &[
        "-print0", "-printf", "-fprint", "-fprint0", "-fprintf", "-exec", "-execdir", "-ok",
        "-okdir", "-ls", "-fls", "-delete",
    ];
    !args.iter().any(|a| ACTIONS.contains(&a.as_str()))
}

/// `find …` whose output goes to the model: the paths grouped by folder,
/// folders marked with a `/`; find's exit status and errors as they are.
pub fn find(ctx: &ExecutionContext<'_, Se>, args: &[String]) -> ExecutionResult {
    let (code, out) = match capture(ctx, "find", args) {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(ctx.stderr(), "{e}");
            return ExecutionResult::new(1);
        }
    };
    let cwd = ctx.shell.working_dir().to_path_buf();
    // A starting point prints as the folder of the group lines under it.
    let starts: Vec<&[u8]> = args
        .iter()
        .take_while(|a| !a.starts_with('-') && *a != "(" && *a != "!")
        .map(|a| a.as_bytes())
        .collect();
    let starts = if starts.is_empty() {
        vec![&b"."[..]]
    } else {
        starts
    };
    let lines: Vec<&[u8]> = out
        .split(|b| *b == b'\n')
        .filter(|p| !p.is_empty())
        .collect();
    let has_below = |p: &[u8]| {
        let p = p.strip_suffix(b"/").unwrap_or(p);
        lines
            .iter()
            .any(|l| l.len() > p.len() + 1 && l.starts_with(p) && l[p.len()] == b'/')
    };
    let paths: Vec<String> = lines
        .iter()
        .filter(|p| !(starts.contains(p) && has_below(p)))
        .map(|raw| {
            let shown = String::from_utf8_lossy(raw).into_owned();
            let is_dir = cwd
                .join(std::ffi::OsStr::from_bytes(raw))
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir());
            if is_dir && !shown.ends_with('/') {
                format!("{shown}/")
            } else {
                shown
            }
        })
        .collect();
    // Sorted, so each folder's names read in order whatever the file
    // system's order was.
    let mut paths = paths;
    paths.sort();
    finish(ctx, code, &grouped(&paths), &Reply::default())
}

/// Whether nib knows every option of `ls ARGS` (those that only choose
/// which names are listed).
fn plain_ls(args: &[String]) -> bool {
    args.iter().take_while(|a| *a != "--").all(|a| {
        matches!(a.as_str(), "--all" | "--almost-all" | "--recursive")
            || !a.starts_with('-')
            || (a.len() > 1
                && a[1..]
                    .chars()
                    .all(|c| matches!(c, 'a' | 'A' | '1' | 'R' | 'p')))
    })
}

/// `ls ARGS` to the model: each folder's names after it in braces.
pub fn ls(ctx: &ExecutionContext<'_, Se>, args: &[String]) -> Option<ExecutionResult> {
    if !plain_ls(args) {
        return None;
    }
    let mut run = vec!["-1".to_string(), "-p".to_string()];
    run.extend(args.iter().cloned());
    let (code, out) = match capture(ctx, "ls", &run) {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(ctx.stderr(), "{e}");
            return Some(ExecutionResult::new(1));
        }
    };
    let text = String::from_utf8_lossy(&out);
    let operands: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with('-') || a.as_str() == "-")
        .collect();
    // One folder named, no section headers: its names under it.
    let mut folder: Option<String> = match operands.as_slice() {
        [one] if !text.lines().any(|l| l.ends_with(':')) => {
            Some(one.trim_end_matches('/').to_string())
        }
        _ => None,
    }
    .filter(|f| ctx.shell.working_dir().join(f).is_dir());
    let mut paths: Vec<String> = Vec::new();
    // A section header whose folder has listed nothing yet.
    let mut empty: Option<String> = None;
    for line in text.lines() {
        if line.is_empty() {
            folder = None;
            continue;
        }
        if let Some(dir) = line.strip_suffix(':') {
            if let Some(e) = empty.take() {
                paths.push(format!("{e}/ (empty)"));
            }
            let dir = dir.trim_end_matches('/').to_string();
            empty = Some(dir.clone());
            folder = Some(dir);
            continue;
        }
        empty = None;
        paths.push(match &folder {
            Some(f) => format!("{f}/{line}"),
            None => line.to_string(),
        });
    }
    if let Some(e) = empty {
        paths.push(format!("{e}/ (empty)"));
    }
    Some(finish(ctx, code, &grouped(&paths), &Reply::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn only_listings_are_grouped() {
        assert!(lists_paths(&s(&[".", "-name", "*.rs"])));
        assert!(!lists_paths(&s(&[".", "-printf", "%p"])));
        assert!(!lists_paths(&s(&[".", "-exec", "cat", "{}", ";"])));
        assert!(plain_ls(&s(&["-aR", "src", "docs"])));
        assert!(!plain_ls(&s(&["-l", "src"])));
        assert!(!plain_ls(&s(&["--color=always"])));
    }
}
