//! Git revisions, through the git program: `path@REV` (a file at a revision;
//! a folder gives the commit and its diff), `path@A...B` and `path@A..B` (the
//! diff between them, a folder's files first), `.@A...B:FILE` (one file).
//!
//! The git program, not a library: it is on every machine that has a
//! repository, reads every revision syntax, and runs confined like any
//! other program under NIB_SANDBOX=1 (through `nib-sandbox`, with a timeout
//! and an output cap), with nib.json's program rules judged at every exec;
//! with NIB_SHELL=0 nib runs no program, so no revision is read. Under
//! NIB_SANDBOX=1 a repository whose git dir or object store lies outside
//! the roots is not read. The revision is the model's and so is the
//! repository: a revision is never an option (`--end-of-options`, and a
//! side starting with `-` refused), and no command the repository's
//! configuration names runs (textconv, external diff, fsmonitor, pager,
//! hooks).
//! Diffs print as rows of the current file where its lines still exist
//! (anchors), `N|TEXT` where they do not, and `-|TEXT` for removed lines.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::context::Ctx;
use crate::fs::{self, Kind};

use nib_text::blocks::{Block, Row};
use nib_text::text::Text;

/// How long one git command may run.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why `rev` cannot be handed to git, if it cannot: each side of a range
/// must be a revision, never something git would take as an option.
fn refused_revision(rev: &str) -> Option<String> {
    let sides = rev.split("...").flat_map(|s| s.split(".."));
    for side in sides {
        if side.starts_with('-') {
            return Some(format!(
                "{side:?} is not a revision (it would be taken as an option)"
            ));
        }
        if side.chars().any(char::is_control) {
            return Some("a revision holds no control characters".into());
        }
    }
    None
}

/// Runs git in `cwd` (confined like any program under the sandbox) and returns its stdout.
fn git(ctx: &Ctx, cwd: &Path, args: &[&str]) -> Result<String, String> {
    let mut argv: Vec<OsString> = vec!["git".into(), "--no-pager".into()];
    for setting in crate::git::NEUTRAL_CONFIG {
        argv.push("-c".into());
        argv.push(setting.into());
    }
    argv.extend(args.iter().map(OsString::from));
    let sandbox = ctx.programs.sandbox(&ctx.workspace.roots())?;
    let env = [(OsString::from("LC_ALL"), OsString::from("C"))];
    let started = std::time::SystemTime::now();
    let worker = sandbox.spawn(&argv, cwd, &env).map_err(|e| e.to_string())?;
    let out = worker.wait(Some(GIT_TIMEOUT));
    // git confined may still write the roots (a driver a repository names):
    // what it made that would run code for the person goes, as after a
    // nibash call, and nib's log says so.
    let held = &sandbox.policy().protected;
    for line in crate::fs::git_guard::sweep(&ctx.scope, held, started)
        .into_iter()
        .chain(crate::fs::planted::sweep(&ctx.scope, held, started))
    {
        tracing::warn!("read's git: {line}");
    }
    if out.timed_out {
        return Err(format!(
            "git {} took over {} s and was stopped",
            args.join(" "),
            GIT_TIMEOUT.as_secs()
        ));
    }
    if out.code != Some(0) {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            err.trim().trim_end_matches('.')
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Under NIB_SANDBOX=1, why the repository `cwd` belongs to may not be
/// read, if it may not: its git dir, its common dir and every object store
/// it borrows from (`objects/info/alternates`, followed a few levels) must
/// lie in the roots, since a `.git` file or an alternates line is text the
/// model can write and would otherwise lead git to any repository the
/// sandbox lets it read.
fn outside_the_roots(ctx: &Ctx, cwd: &Path) -> Option<String> {
    let dirs = match git(
        ctx,
        cwd,
        &[
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
        ],
    ) {
        Ok(d) => d,
        Err(e) => return Some(e),
    };
    let roots: Vec<PathBuf> = ctx
        .workspace
        .roots()
        .iter()
        .map(|r| fs::canonical(r).unwrap_or_else(|_| r.clone()))
        .collect();
    let inside = |p: &Path| fs::canonical(p).is_ok_and(|p| roots.iter().any(|r| p.starts_with(r)));
    let mut stores: Vec<PathBuf> = Vec::new();
    for dir in dirs.lines().filter(|l| !l.is_empty()).map(PathBuf::from) {
        if !inside(&dir) {
            return Some(format!(
                "its git directory {} lies outside the roots, and under NIB_SANDBOX=1 nib reads no repository there",
                dir.display()
            ));
        }
        stores.push(dir.join("objects"));
    }
    let mut seen = 0;
    while let Some(store) = stores.pop() {
        seen += 1;
        if seen > 16 {
            return Some("its object stores borrow from each other too deeply".into());
        }
        // Read beneath the roots (the scope refuses a link leading out).
        let file = store.join("info/alternates");
        let list = match fs::read_file(&ctx.scope, &file, 64 * 1024) {
            Ok(f) => String::from_utf8_lossy(&f.bytes).into_owned(),
            Err(fs::FsError::NotFound | fs::FsError::NotADirectory) => continue,
            Err(e) => {
                return Some(format!(
                    "{} {e}, and under NIB_SANDBOX=1 nib reads no repository it cannot check",
                    file.display()
                ));
            }
        };
        for line in list.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let other = store.join(line.trim_matches('"'));
            if !inside(&other) {
                return Some(format!(
                    "it borrows objects from {} (objects/info/alternates), outside the roots, and under NIB_SANDBOX=1 nib reads no repository there",
                    other.display()
                ));
            }
            stores.push(other);
        }
    }
    None
}

/// The lines `spec` selects in a file's old version: line ranges
/// (`1-5`, `-20`) or declarations by name (`parse`, `Type.member`).
fn selected(
    path: &Path,
    spec: &str,
    bytes: &[u8],
    text: &Text,
) -> Result<Vec<(usize, usize)>, String> {
    let mut notes = Vec::new();
    match super::selector::parse_lines(spec, &mut notes) {
        Ok(Some(ranges)) => {
            return super::selector::resolve(&ranges, text.len()).map_err(|e| e.to_string());
        }
        Err(e) if !super::selector::looks_like_name(spec) => return Err(e.to_string()),
        _ => {}
    }
    let Some(lang) = nib_text::lang::Lang::of(path) else {
        return Err(format!(
            "\":{spec}\" is neither a line range nor a declaration nib finds in this kind of file"
        ));
    };
    super::selector::declaration_spans(lang, spec, bytes).map_err(|e| match &e.hint {
        Some(h) => format!("{e} at that revision ({h})"),
        None => format!("{e} at that revision"),
    })
}

/// The blocks for `path@rev`.
pub fn revision(ctx: &Ctx, path: &Path, rev: &str) -> Vec<Block> {
    let shown = ctx.workspace.display(path);
    let (rev, file) = match rev.split_once(':') {
        Some((r, f)) if !f.is_empty() => (r, Some(f)),
        _ => (rev, None),
    };
    let is_dir = fs::stat(&ctx.scope, path)
        .map(|s| s.kind == Kind::Dir)
        .unwrap_or(false);
    let (cwd, spec) = if is_dir {
        (path.to_path_buf(), file.unwrap_or(".").to_string())
    } else {
        let parent = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        (parent, name)
    };
    let fail = |e: String| {
        vec![Block::failure(format!(
            "{shown}@{rev}: {e}. Nothing was read.\nhint: check the revision with nibash's git log, or read {shown}"
        ))]
    };
    if !ctx.settings.programs {
        return fail("NIB_SHELL=0: nib runs no program, and revisions are read through git".into());
    }
    if let Some(why) = refused_revision(rev) {
        return fail(why);
    }
    if ctx.settings.sandbox
        && let Some(why) = outside_the_roots(ctx, &cwd)
    {
        return fail(why);
    }
    if rev.contains("..") {
        return range_blocks(ctx, &shown, rev, &cwd, &spec, is_dir && file.is_none())
            .unwrap_or_else(fail);
    }
    if !is_dir {
        return file_at(ctx, path, &shown, rev, file, &cwd, &spec).unwrap_or_else(fail);
    }
    commit_blocks(ctx, &shown, rev, &cwd, &spec).unwrap_or_else(fail)
}

/// `PATH@A..B`: the diff between two revisions, after the list of changed
/// files when a whole folder is asked (`list_files`).
fn range_blocks(
    ctx: &Ctx,
    shown: &str,
    rev: &str,
    cwd: &Path,
    spec: &str,
    list_files: bool,
) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    if list_files {
        match git(
            ctx,
            cwd,
            &[
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                "--relative",
                "--numstat",
                "--end-of-options",
                rev,
                "--",
                spec,
            ],
        ) {
            Ok(list) => {
                let rows: Vec<Row> = list
                    .lines()
                    .filter_map(|l| {
                        let mut p = l.split('\t');
                        let (a, d, f) = (p.next()?, p.next()?, p.next()?);
                        Some(Row::plain(format!("{f} (+{a} -{d})")))
                    })
                    .collect();
                blocks.push(Block {
                    head: format!(
                        "[{shown}@{rev}] {} changed file{}",
                        rows.len(),
                        if rows.len() == 1 { "" } else { "s" }
                    ),
                    rows,
                    ..Block::default()
                });
            }
            Err(e) => return Err(e),
        }
    }
    match git(
        ctx,
        cwd,
        &[
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--relative",
            "-U1",
            "--end-of-options",
            rev,
            "--",
            spec,
        ],
    ) {
        Ok(diff) => {
            blocks.extend(crate::git::diff::blocks(ctx, cwd, &diff));
            Ok(blocks)
        }
        Err(e) => Err(e),
    }
}

/// `FILE@REV` (and `FILE@REV:SPEC`): that version's lines, or the lines
/// and declarations SPEC selects.
fn file_at(
    ctx: &Ctx,
    path: &Path,
    shown: &str,
    rev: &str,
    file: Option<&str>,
    cwd: &Path,
    spec: &str,
) -> Result<Vec<Block>, String> {
    let object = format!("{rev}:./{spec}");
    match git(
        ctx,
        cwd,
        &["show", "--no-textconv", "--end-of-options", &object],
    ) {
        Ok(content) => {
            let text = Text::decode(content.as_bytes());
            // `FILE@REV:SPEC`: lines or declarations of that version.
            let spans = match file {
                None => vec![(1, text.len())],
                Some(spec) => selected(path, spec, content.as_bytes(), &text)?,
            };
            let rows = spans
                .iter()
                .flat_map(|&(a, b)| a..=b.min(text.len()))
                .map(|n| Row::plain(format!("{n}|{}", text.line(n).unwrap_or(""))))
                .collect();
            Ok(vec![Block {
                head: format!(
                    "[{shown}@{}] {} lines (an old version: its rows are not anchors)",
                    file.map_or(rev.to_string(), |f| format!("{rev}:{f}")),
                    text.len()
                ),
                rows,
                shown_path: shown.to_string(),
                total_lines: text.len(),
                ..Block::default()
            }])
        }
        Err(e) => Err(e),
    }
}

/// `FOLDER@REV`: the commit's header and its diff under the folder.
fn commit_blocks(
    ctx: &Ctx,
    shown: &str,
    rev: &str,
    cwd: &Path,
    spec: &str,
) -> Result<Vec<Block>, String> {
    let header = git(
        ctx,
        cwd,
        &[
            "show",
            "-s",
            "--format=%h %an <%ae> %ad%n%s",
            "--date=format-local:%Y-%m-%d %H:%M",
            "--end-of-options",
            rev,
        ],
    )?;
    let mut blocks = vec![Block {
        head: format!("[{shown}@{rev}] {}", header.lines().next().unwrap_or("")),
        rows: header
            .lines()
            .skip(1)
            .map(|l| Row::plain(l.to_string()))
            .collect(),
        ..Block::default()
    }];
    match git(
        ctx,
        cwd,
        &[
            "show",
            "--no-ext-diff",
            "--no-textconv",
            "--relative",
            "-U1",
            "--format=",
            "--end-of-options",
            rev,
            "--",
            spec,
        ],
    ) {
        Ok(diff) => blocks.extend(crate::git::diff::blocks(ctx, cwd, &diff)),
        Err(e) => return Err(e),
    }
    Ok(blocks)
}
