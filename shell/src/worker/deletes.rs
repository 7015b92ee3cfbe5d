//! `git rm`, `git clean` and `find … -delete`, inside the worker: the
//! programs decide what goes (git's index, git's own rules, find's
//! expression), and the files go to the trash through the broker instead of
//! being unlinked.
//!
//! - `git rm ARGS` runs `git rm --cached ARGS` (the index changes as usual)
//!   and then trashes the files git named.
//! - `git clean ARGS` runs `git clean -n ARGS` (what git would remove) and
//!   trashes that.
//! - `find ARGS -delete` runs find with `-delete` turned into `-print0`
//!   (depth first, as -delete implies) and trashes each path; a folder only
//!   when it is empty by then, as -delete does.
//!
//! Everything else about git and find is the system program's, except what
//! goes straight to the model: git's views ([`super::git`]) and find's
//! paths ([`super::listing`]).

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use brush_core::commands::CommandArg;
use brush_core::{ExecutionContext, ExecutionResult};

use super::link::{Se, ask};
use super::own::Answer;
use super::system::{capture, finish};
use crate::channel::{Ask, Reply};

fn strings(args: &[CommandArg]) -> Vec<String> {
    args.iter().map(ToString::to_string).collect()
}

fn trash(paths: Vec<PathBuf>, recursive: bool) -> Reply {
    if paths.is_empty() {
        return Reply::default();
    }
    ask(Ask::Trash {
        paths,
        recursive,
        force: true,
    })
}

/// `git …`: `rm` and `clean` trash what they would delete.
pub fn git(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let argv = strings(&args);
        let rest = argv.get(1..).unwrap_or_default();
        match rest.first().map(String::as_str) {
            Some("rm")
                if !rest
                    .iter()
                    .any(|a| a == "--cached" || a == "-n" || a == "--dry-run") =>
            {
                git_rm(&ctx, rest)
            }
            Some("clean")
                if !rest.iter().any(|a| {
                    a == "-n" || a == "--dry-run" || a == "-i" || a == "--interactive"
                }) =>
            {
                git_clean(&ctx, rest)
            }
            _ => {
                super::submodules::register(&ctx, rest);
                let hidden = super::submodules::hide(&ctx, rest);
                let to_model = super::link::to_model(&ctx);
                let stderr = ctx.stderr();
                let ran = match nib_files::git::plan(rest).filter(|_| to_model) {
                    Some(plan) => Ok(super::git::reshaped(&ctx, &argv, &plan)),
                    None => super::own::system(ctx, args).await,
                };
                if hidden {
                    super::submodules::restore(stderr);
                }
                ran
            }
        }
    })
}

/// Runs git; its stdout when it succeeded, else the status to return.
fn git_ok(ctx: &ExecutionContext<'_, Se>, args: &[String]) -> Result<Vec<u8>, ExecutionResult> {
    match capture(ctx, "git", args) {
        Ok((0, out)) => Ok(out),
        Ok((code, _)) => Err(ExecutionResult::new(u8::try_from(code).unwrap_or(1))),
        Err(e) => {
            let _ = writeln!(ctx.stderr(), "{e}");
            Err(ExecutionResult::new(1))
        }
    }
}

fn toplevel(ctx: &ExecutionContext<'_, Se>) -> Option<PathBuf> {
    let (code, out) = capture(ctx, "git", &["rev-parse".into(), "--show-toplevel".into()]).ok()?;
    (code == 0).then(|| PathBuf::from(String::from_utf8_lossy(&out).trim()))
}

fn git_rm(
    ctx: &ExecutionContext<'_, Se>,
    rest: &[String],
) -> Result<ExecutionResult, brush_core::Error> {
    let mut a = vec!["rm".to_string(), "--cached".to_string()];
    a.extend(
        rest[1..]
            .iter()
            .filter(|x| *x != "-q" && *x != "--quiet")
            .cloned(),
    );
    let quiet = rest.iter().any(|x| x == "-q" || x == "--quiet");
    let out = match git_ok(ctx, &a) {
        Ok(out) => out,
        Err(failed) => return Ok(failed),
    };
    let top = toplevel(ctx).unwrap_or_else(|| ctx.shell.working_dir().to_path_buf());
    let text = String::from_utf8_lossy(&out).into_owned();
    let paths: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.strip_prefix("rm '").and_then(|r| r.strip_suffix('\'')))
        .map(|p| top.join(p))
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    let r = trash(paths, false);
    Ok(finish(ctx, 0, if quiet { "" } else { &text }, &r))
}

fn git_clean(
    ctx: &ExecutionContext<'_, Se>,
    rest: &[String],
) -> Result<ExecutionResult, brush_core::Error> {
    let mut a = vec!["clean".to_string(), "-n".to_string()];
    for x in &rest[1..] {
        match x.as_str() {
            "-f" | "--force" | "-q" | "--quiet" => {}
            // Combined short flags: keep all but f and q.
            s if s.starts_with('-') && !s.starts_with("--") && s.len() > 2 => {
                let kept: String = s[1..].chars().filter(|c| *c != 'f' && *c != 'q').collect();
                if !kept.is_empty() {
                    a.push(format!("-{kept}"));
                }
            }
            _ => a.push(x.clone()),
        }
    }
    let out = match git_ok(ctx, &a) {
        Ok(out) => out,
        Err(failed) => return Ok(failed),
    };
    let cwd = ctx.shell.working_dir().to_path_buf();
    let text = String::from_utf8_lossy(&out).into_owned();
    let mut shown = String::new();
    let mut paths = Vec::new();
    for l in text.lines() {
        if let Some(p) = l.strip_prefix("Would remove ") {
            shown.push_str(&format!("Removing {p}\n"));
            paths.push(cwd.join(p.trim_end_matches('/')));
        }
    }
    let quiet = rest.iter().any(|x| x == "-q" || x == "--quiet");
    let r = trash(paths, true);
    Ok(finish(ctx, 0, if quiet { "" } else { &shown }, &r))
}

/// `find … -delete`: what find would delete goes to the trash.
pub fn find(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let argv = strings(&args);
        let rest = argv.get(1..).unwrap_or_default();
        if !rest.iter().any(|a| a == "-delete") {
            let to_model = super::link::to_model(&ctx);
            if to_model && super::listing::lists_paths(rest) {
                return Ok(super::listing::find(&ctx, rest));
            }
            return super::own::system(ctx, args).await;
        }
        // -depth goes after the starting points, before the expression.
        let first_expr = rest
            .iter()
            .position(|a| a.starts_with('-') || a == "(" || a == "!")
            .unwrap_or(rest.len());
        let mut a: Vec<String> = rest[..first_expr].to_vec();
        a.push("-depth".into());
        a.extend(rest[first_expr..].iter().map(|x| {
            if x == "-delete" {
                "-print0".to_string()
            } else {
                x.clone()
            }
        }));
        let (code, out) = match capture(&ctx, "find", &a) {
            Ok(r) => r,
            Err(e) => {
                let _ = writeln!(ctx.stderr(), "{e}");
                return Ok(ExecutionResult::new(1));
            }
        };
        let cwd = ctx.shell.working_dir().to_path_buf();
        let mut err = Reply::default();
        for raw in out.split(|b| *b == 0).filter(|p| !p.is_empty()) {
            let p = cwd.join(std::ffi::OsStr::from_bytes(raw));
            if p == cwd || raw == b"." {
                continue;
            }
            let is_dir = p.symlink_metadata().is_ok_and(|m| m.is_dir());
            if is_dir && std::fs::read_dir(&p).is_ok_and(|mut d| d.next().is_some()) {
                err.err.push_str(&format!(
                    "find: cannot delete '{}': Directory not empty\n",
                    String::from_utf8_lossy(raw)
                ));
                err.code = 1;
                continue;
            }
            let r = trash(vec![p], is_dir);
            err.err.push_str(&r.err);
            err.code = err.code.max(r.code);
        }
        Ok(finish(&ctx, code, "", &err))
    })
}
