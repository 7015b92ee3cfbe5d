//! A system program run from one of the worker's builtins: its output
//! captured for the builtin to reshape ([`capture`]), and the builtin's
//! answer written with the status that wins ([`finish`]). Used by the
//! builtins that stand in front of `git`, `find` and `ls`.

use std::io::Write;

use brush_core::{ExecutionContext, ExecutionResult};

use super::link::Se;
use crate::channel::Reply;

/// Runs the system program `name args` with the shell's folder and exported
/// variables, stderr passed through; returns its status and stdout.
pub(crate) fn capture(
    ctx: &ExecutionContext<'_, Se>,
    name: &str,
    args: &[String],
) -> Result<(i32, Vec<u8>), String> {
    let path = ctx
        .shell
        .find_first_executable_in_path(name)
        .ok_or_else(|| format!("{name}: command not found"))?;
    let mut cmd =
        brush_core::commands::compose_std_command(ctx, &path.to_string_lossy(), name, args, false)
            .map_err(|e| e.to_string())?;
    cmd.stdout(std::process::Stdio::piped());
    let out = cmd.output().map_err(|e| format!("{name}: {e}"))?;
    use std::os::unix::process::ExitStatusExt;
    let code = out
        .status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(9));
    let _ = ctx.stderr().write_all(&out.stderr);
    Ok((code, out.stdout))
}

/// Writes `out` and the reply's errors; the program's status, else the reply's.
pub(crate) fn finish(
    ctx: &ExecutionContext<'_, Se>,
    code: i32,
    out: &str,
    r: &Reply,
) -> ExecutionResult {
    let _ = ctx.stdout().write_all(out.as_bytes());
    let _ = ctx.stderr().write_all(r.err.as_bytes());
    let code = if code != 0 { code } else { r.code };
    ExecutionResult::new(u8::try_from(code).unwrap_or(1))
}
