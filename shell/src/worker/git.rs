//! `git` whose output goes straight to the model: the real git runs (in the
//! worker, so inside the sandbox, with the shell's folder and variables),
//! and what it printed is reshaped by [`nib_files::git`]. The anchors it printed
//! are reported as seen, and the whole output goes to the call's log.
//! Piped, redirected or captured, git runs as it is (the caller checks).

use std::io::Write;
use std::os::unix::process::ExitStatusExt;

use std::path::{Path, PathBuf};

use brush_core::commands::CommandArg;
use brush_core::{ExecutionContext, ExecutionResult};

use super::link::Se;
use crate::channel::Event;
use nib_files::git::{self, Place, Plan};

/// A git command with the shell's folder and exported variables, stdout
/// and stderr piped, messages in one language so nib can read them.
fn command(
    ctx: &ExecutionContext<'_, Se>,
    args: &[String],
) -> Result<std::process::Command, String> {
    let path = ctx
        .shell
        .find_first_executable_in_path("git")
        .ok_or("git: command not found")?;
    let mut cmd =
        brush_core::commands::compose_std_command(ctx, &path.to_string_lossy(), "git", args, false)
            .map_err(|e| e.to_string())?;
    cmd.env("LC_ALL", "C");
    cmd.stdin(std::process::Stdio::null());
    cmd.stdout(std::process::Stdio::piped());
    cmd.stderr(std::process::Stdio::piped());
    Ok(cmd)
}

/// A finished git: its status, stdout and stderr.
type Ran = (i32, Vec<u8>, Vec<u8>);

fn status_of(out: &std::process::Output) -> i32 {
    out.status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(9))
}

/// Runs git `args` to the end.
pub(super) fn run(ctx: &ExecutionContext<'_, Se>, args: &[String]) -> Result<Ran, String> {
    let out = command(ctx, args)?
        .output()
        .map_err(|e| format!("git: {e}"))?;
    Ok((status_of(&out), out.stdout, out.stderr))
}

/// The user's own email (`git config user.email`), for commit headers.
fn my_email(ctx: &ExecutionContext<'_, Se>) -> Option<String> {
    let (code, out, _) = run(ctx, &["config".into(), "user.email".into()]).ok()?;
    let email = String::from_utf8_lossy(&out).trim().to_string();
    (code == 0 && !email.is_empty()).then_some(email)
}

/// Inclusive ranges of sorted line numbers.
fn ranges(mut lines: Vec<usize>) -> Vec<(usize, usize)> {
    lines.sort_unstable();
    lines.dedup();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for n in lines {
        match out.last_mut() {
            Some((_, end)) if *end + 1 == n => *end = n,
            _ => out.push((n, n)),
        }
    }
    out
}

/// What git printed, reshaped for the model, as (stdout, stderr); the
/// anchors it printed are reported as seen and the whole output is sent for
/// the call's log.
fn shape(
    ctx: &ExecutionContext<'_, Se>,
    command: &str,
    plan: &Plan,
    place: &Place,
    (out, err): (&[u8], &[u8]),
) -> (String, String) {
    let out_text = String::from_utf8_lossy(out);
    let err_text = String::from_utf8_lossy(err);
    let shaped = super::own::with_tools(|tools, _| {
        git::reshape(tools, plan, place, &out_text, &err_text, &|| my_email(ctx))
    });
    let Ok(shaped) = shaped else {
        // Without the tools, git's own output.
        return (out_text.into_owned(), err_text.into_owned());
    };
    for (path, tag, lines) in shaped.seen {
        super::link::send(&Event::Seen {
            path,
            tag: tag.to_string(),
            lines: ranges(lines),
        });
    }
    super::link::send(&Event::Whole {
        command: command.to_string(),
        text: format!("{out_text}{err_text}"),
        named: shaped.cut,
    });
    (shaped.out, shaped.err)
}

/// Runs `git argv[1..]` as `plan` says and prints the reshaped output.
pub fn reshaped(ctx: &ExecutionContext<'_, Se>, argv: &[String], plan: &Plan) -> ExecutionResult {
    let joins = matches!(plan.sub.as_str(), "merge" | "rebase" | "pull");
    let before = if joins {
        line(ctx, plan, &["rev-parse", "-q", "--verify", "HEAD"])
    } else {
        None
    };
    let (code, out, err) = match run(ctx, &plan.args) {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(ctx.stderr(), "{e}");
            return ExecutionResult::new(127);
        }
    };
    let place = Place::of(ctx.shell.working_dir(), plan);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&err)
    );
    let (mut out, err) = shape(ctx, &argv.join(" "), plan, &place, (&out, &err));
    if let Some(old) = before
        && let Some(note) = joined(ctx, plan, &old, &said)
    {
        out.push_str(&note);
    }
    let mut stdout = ctx.stdout();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();
    let _ = ctx.stderr().write_all(err.as_bytes());
    ExecutionResult::new(u8::try_from(code).unwrap_or(1))
}

/// Runs git `args` in the plan's folder.
fn run_in(ctx: &ExecutionContext<'_, Se>, plan: &Plan, args: &[&str]) -> Option<Ran> {
    let mut a: Vec<String> = plan
        .dirs
        .iter()
        .flat_map(|d| ["-C".to_string(), d.clone()])
        .collect();
    a.extend(args.iter().map(|s| s.to_string()));
    run(ctx, &a).ok()
}

/// Whether git `args` exits 0 in the plan's folder.
fn succeeds(ctx: &ExecutionContext<'_, Se>, plan: &Plan, args: &[&str]) -> bool {
    run_in(ctx, plan, args).is_some_and(|(code, _, _)| code == 0)
}

/// git's one line of output (trimmed) in the plan's folder, when it succeeds.
fn line(ctx: &ExecutionContext<'_, Se>, plan: &Plan, args: &[&str]) -> Option<String> {
    let (code, out, _) = run_in(ctx, plan, args)?;
    let text = String::from_utf8_lossy(&out).trim().to_string();
    (code == 0 && !text.is_empty()).then_some(text)
}

/// The first word of a merge, rebase or pull that names a commit (skipping
/// options and the values of those that take one).
fn named_commit(operands: &[String]) -> Option<&str> {
    const WITH_VALUE: &[&str] = &[
        "--onto",
        "-m",
        "-s",
        "--strategy",
        "-X",
        "--strategy-option",
        "-F",
        "--file",
        "--exec",
        "-x",
    ];
    let mut i = 0;
    while let Some(a) = operands.get(i) {
        if WITH_VALUE.contains(&a.as_str()) {
            i += 2;
            continue;
        }
        if !a.starts_with('-') {
            return Some(a);
        }
        i += 1;
    }
    None
}

/// After a merge, rebase or pull that started at `old`: a note naming the
/// files both sides changed when it joined incoming commits with the
/// branch's own, or how the branches diverged when it could not
/// fast-forward; `None` for a fast-forward or nothing to do.
fn joined(ctx: &ExecutionContext<'_, Se>, plan: &Plan, old: &str, said: &str) -> Option<String> {
    let git = |args: &[&str]| line(ctx, plan, args);
    let upstream = || match plan.sub.as_str() {
        "pull" => "FETCH_HEAD".to_string(),
        _ => named_commit(&plan.operands).unwrap_or("@{u}").to_string(),
    };
    if said.contains("Not possible to fast-forward") {
        let other = upstream();
        let base = git(&["merge-base", old, &other])?;
        let counts = git(&[
            "rev-list",
            "--left-right",
            "--count",
            &format!("{old}...{other}"),
        ])?;
        let (mine, theirs) = counts.split_once(char::is_whitespace)?;
        return Some(format!(
            "[cannot fast-forward: since their merge base {} this branch has {mine} commit(s) and {other} {} more]\n",
            &base[..base.len().min(10)],
            theirs.trim()
        ));
    }
    let head = git(&["rev-parse", "-q", "--verify", "HEAD"])?;
    // What came in: a merge in progress, a merge commit just made, a rebase
    // in progress or one that rewrote the branch.
    let incoming = if let Some(m) = git(&["rev-parse", "-q", "--verify", "MERGE_HEAD"]) {
        m
    } else if head != old
        && git(&["rev-parse", "-q", "--verify", "HEAD^1"]).as_deref() == Some(old)
        && let Some(m) = git(&["rev-parse", "-q", "--verify", "HEAD^2"])
    {
        m
    } else if let Some(onto) =
        git(&["rev-parse", "--git-path", "rebase-merge/onto"]).and_then(|p| {
            std::fs::read_to_string(Place::of(ctx.shell.working_dir(), plan).cwd.join(p)).ok()
        })
    {
        onto.trim().to_string()
    } else if head != old && !succeeds(ctx, plan, &["merge-base", "--is-ancestor", old, &head]) {
        git(&["rev-parse", "-q", "--verify", &upstream()])?
    } else {
        return None;
    };
    let base = git(&["merge-base", old, &incoming])?;
    if base == incoming || base == old {
        return None;
    }
    let names = |to: &str| -> Vec<String> {
        git(&["diff", "--name-only", &base, to])
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default()
    };
    let own = names(old);
    let both: Vec<String> = names(&incoming)
        .into_iter()
        .filter(|f| own.contains(f))
        .collect();
    let count = |range: String| git(&["rev-list", "--count", &range]).unwrap_or_default();
    Some(format!(
        "[joined {} incoming commit(s) with {} of this branch's own; changed on both sides: {}]\n",
        count(format!("{base}..{incoming}")),
        count(format!("{base}..{old}")),
        if both.is_empty() {
            "none".to_string()
        } else {
            nib_text::by_folder::group(&both).join(", ")
        }
    ))
}

/// The repositories at and below `dir`: folders holding a `.git`, found by
/// a walk that skips what git ignores (nested repositories included), in
/// path order.
fn repositories(dir: &Path) -> Vec<PathBuf> {
    const MAX_ENTRIES: usize = 200_000;
    let mut repos = Vec::new();
    let walk = ignore::WalkBuilder::new(dir)
        .hidden(false)
        .follow_links(false)
        .max_depth(Some(8))
        .filter_entry(|e| e.file_name() != ".git" && e.file_name() != "node_modules")
        .build();
    for entry in walk.flatten().take(MAX_ENTRIES) {
        if entry.file_type().is_some_and(|t| t.is_dir()) && entry.path().join(".git").exists() {
            repos.push(entry.into_path());
        }
    }
    repos.sort();
    repos
}

/// The repository's base for `{base}`: `base` in its nib.json, else
/// `origin/HEAD`.
fn base_of(repo: &Path) -> String {
    std::fs::read(repo.join("nib.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("base").and_then(|b| b.as_str()).map(str::to_string))
        .unwrap_or_else(|| "origin/HEAD".to_string())
}

/// `git-each ARGS`: git ARGS in every repository at and below the current
/// folder, several at once; each repository's output under `==> NAME <==`,
/// or `NAME: LINE` when it is one line.
pub fn each(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> super::own::Answer<'_> {
    Box::pin(async move {
        let argv: Vec<String> = args.iter().map(ToString::to_string).collect();
        let rest = argv.get(1..).unwrap_or_default();
        if rest.is_empty() {
            let _ = writeln!(
                ctx.stderr(),
                "git-each: usage: git-each GIT-ARGS… (runs git in every repository below this folder)"
            );
            return Ok(ExecutionResult::new(2));
        }
        let cwd = ctx.shell.working_dir().to_path_buf();
        let to_model = super::link::to_model(&ctx);
        let repos = repositories(&cwd);
        if repos.is_empty() {
            let _ = writeln!(
                ctx.stderr(),
                "git-each: no repository at or below {}",
                cwd.display()
            );
            return Ok(ExecutionResult::new(1));
        }
        let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut results: Vec<(PathBuf, Vec<String>, Result<Ran, String>)> = Vec::new();
        for chunk in repos.chunks(jobs) {
            let mut running = Vec::new();
            for repo in chunk {
                let base = base_of(repo);
                let mut a = vec!["-C".to_string(), repo.display().to_string()];
                a.extend(rest.iter().map(|x| x.replace("{base}", &base)));
                let child =
                    command(&ctx, &a).and_then(|mut c| c.spawn().map_err(|e| format!("git: {e}")));
                running.push((repo.clone(), a, child));
            }
            for (repo, a, child) in running {
                let ran = child.and_then(|c| {
                    c.wait_with_output()
                        .map(|o| (status_of(&o), o.stdout, o.stderr))
                        .map_err(|e| format!("git: {e}"))
                });
                results.push((repo, a, ran));
            }
        }
        let mut status = 0;
        let mut text = String::new();
        for (repo, a, ran) in results {
            let name = match repo.strip_prefix(&cwd) {
                Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
                Ok(r) => r.display().to_string(),
                Err(_) => repo.display().to_string(),
            };
            let (code, out, err) = match ran {
                Ok(r) => r,
                Err(e) => (127, Vec::new(), format!("{e}\n").into_bytes()),
            };
            if status == 0 {
                status = code;
            }
            let plan = git::plan(&a).filter(|_| to_model);
            let (out, err) = match &plan {
                Some(plan) => {
                    let place = Place::of(&cwd, plan);
                    shape(
                        &ctx,
                        &format!("git {}", a.join(" ")),
                        plan,
                        &place,
                        (&out, &err),
                    )
                }
                None => (
                    String::from_utf8_lossy(&out).into_owned(),
                    String::from_utf8_lossy(&err).into_owned(),
                ),
            };
            let both = format!("{out}{err}");
            let failed = if code == 0 {
                String::new()
            } else {
                format!(" [exit {code}]")
            };
            match both.trim_end_matches('\n').lines().count() {
                0 => text.push_str(&format!("{name}: (no output){failed}\n")),
                1 => text.push_str(&format!("{name}: {}{failed}\n", both.trim_end())),
                _ => {
                    text.push_str(&format!("==> {name} <=={failed}\n{both}"));
                    if !both.ends_with('\n') {
                        text.push('\n');
                    }
                }
            }
        }
        let mut stdout = ctx.stdout();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
        Ok(ExecutionResult::new(u8::try_from(status).unwrap_or(1)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers_become_inclusive_ranges() {
        assert_eq!(ranges(vec![5, 1, 2, 3, 9, 8]), vec![(1, 3), (5, 5), (8, 9)]);
    }
}
