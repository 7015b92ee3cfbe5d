//! `git` whose output goes straight to the model: the real git runs (in the
//! worker, so inside the sandbox, with the shell's folder and variables),
//! and what it printed is reshaped by [`crate::git`]. The anchors it printed
//! are reported as seen, and the whole output goes to the call's log.
//! Piped, redirected or captured, git runs as it is (the caller checks).

use std::io::Write;
use std::os::unix::process::ExitStatusExt;

use brush_core::{ExecutionContext, ExecutionResult};

use super::Se;
use crate::git::{self, Place, Plan};
use crate::nibash::channel::Event;

/// Runs git `plan.args` with stdout and stderr captured; its status and both.
fn run(ctx: &ExecutionContext<'_, Se>, plan: &Plan) -> Result<(i32, Vec<u8>, Vec<u8>), String> {
    let path = ctx
        .shell
        .find_first_executable_in_path("git")
        .ok_or("git: command not found")?;
    let mut cmd = brush_core::commands::compose_std_command(
        ctx,
        &path.to_string_lossy(),
        "git",
        &plan.args,
        false,
    )
    .map_err(|e| e.to_string())?;
    // git's messages in one language, so nib can read them.
    cmd.env("LC_ALL", "C");
    cmd.stdout(std::process::Stdio::piped());
    cmd.stderr(std::process::Stdio::piped());
    let out = cmd.output().map_err(|e| format!("git: {e}"))?;
    let code = out
        .status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(9));
    Ok((code, out.stdout, out.stderr))
}

/// The user's own email (`git config user.email`), for commit headers.
fn my_email(ctx: &ExecutionContext<'_, Se>) -> Option<String> {
    let plan = Plan {
        args: vec!["config".into(), "user.email".into()],
        shape: git::Shape::Quiet,
        dirs: Vec::new(),
    };
    let (code, out, _) = run(ctx, &plan).ok()?;
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

/// Runs `git argv[1..]` as `plan` says and prints the reshaped output.
pub fn reshaped(ctx: &ExecutionContext<'_, Se>, argv: &[String], plan: &Plan) -> ExecutionResult {
    let (code, out, err) = match run(ctx, plan) {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(ctx.stderr(), "{e}");
            return ExecutionResult::new(127);
        }
    };
    let out_text = String::from_utf8_lossy(&out);
    let err_text = String::from_utf8_lossy(&err);
    let cwd = ctx.shell.working_dir().to_path_buf();
    let place = Place::of(&cwd, plan);
    let shaped = super::own::with_tools(|tools, _| {
        git::reshape(tools, plan, &place, &out_text, &err_text, &|| my_email(ctx))
    });
    let shaped = match shaped {
        Ok(s) => s,
        Err(_) => {
            // Without the tools, git's own output.
            let _ = ctx.stdout().write_all(&out);
            let _ = ctx.stderr().write_all(&err);
            return ExecutionResult::new(u8::try_from(code).unwrap_or(1));
        }
    };
    for (path, tag, lines) in shaped.seen {
        super::send(&Event::Seen {
            path,
            tag: tag.to_string(),
            lines: ranges(lines),
        });
    }
    super::send(&Event::Whole {
        command: argv.join(" "),
        text: format!("{out_text}{err_text}"),
        named: shaped.cut,
    });
    let mut stdout = ctx.stdout();
    let _ = stdout.write_all(shaped.out.as_bytes());
    let _ = stdout.flush();
    let _ = ctx.stderr().write_all(shaped.err.as_bytes());
    ExecutionResult::new(u8::try_from(code).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers_become_inclusive_ranges() {
        assert_eq!(ranges(vec![5, 1, 2, 3, 9, 8]), vec![(1, 3), (5, 5), (8, 9)]);
    }
}
