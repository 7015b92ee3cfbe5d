//! nib's own `cat`, `head`, `tail`, `sed -n`, `cut -c`, `wc` and the grep
//! family (`grep`, `egrep`, `fgrep`, `rg`), inside the worker.
//!
//! Each one prints `[PATH#TAG]` blocks of anchored rows — through the read
//! and grep tools, so the rows are exactly theirs — when its output goes
//! straight to the model and nib understands every option given. Otherwise
//! (piped, redirected, inside `$(…)`, reading stdin, an option nib does not
//! know, a missing file, a log) the system program of the same name runs, so
//! scripts see the behaviour they expect. Rows printed count as seen: the
//! lines are reported to the broker, which checks them against the file.
//!
//! This file owns the builtin entry, the fall back to the system program
//! and the choice of reader for a command line; the [`Call`] it becomes and
//! which files nib may show as rows (not logs, not binary) are `call`'s. A
//! command line is read by `lines` (`cat`, `head`,
//! `tail`, `sed -n`, `cut -c`, `wc`) or `grep` (the grep family and `rg`);
//! `answer` runs the call with the file tools in this process and reports
//! the rows shown as seen.

mod answer;
mod call;
mod grep;
mod lines;

use std::path::Path;
use std::pin::Pin;

use brush_core::commands::{CommandArg, ShellForCommand, SimpleCommand};
use brush_core::{ExecutionContext, ExecutionResult};

use super::link::Se;

pub use answer::{answer, with_tools};
pub use call::{Call, WcWhat, is_log};

/// The commands nib answers itself when it can.
pub const NAMES: &[&str] = &[
    "cat", "head", "tail", "grep", "egrep", "fgrep", "rg", "sed", "cut", "wc",
];

pub(crate) type Answer<'a> = Pin<
    Box<dyn std::future::Future<Output = Result<ExecutionResult, brush_core::Error>> + Send + 'a>,
>;

/// The builtin entry for every name in [`NAMES`].
pub fn run(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let argv: Vec<String> = args.iter().map(ToString::to_string).collect();
        let to_model = super::link::to_model(&ctx);
        if to_model {
            let cwd = ctx.shell.working_dir().to_path_buf();
            let name = ctx.command_name.clone();
            if let Some(call) = plan(&name, argv.get(1..).unwrap_or_default(), &cwd) {
                let (text, code) = answer(&call);
                use std::io::Write;
                let mut out = ctx.stdout();
                out.write_all(text.as_bytes())?;
                out.flush()?;
                return Ok(ExecutionResult::new(code));
            }
        }
        system(ctx, args).await
    })
}

/// Runs the system program named like the command, with the same arguments.
pub async fn system(
    ctx: ExecutionContext<'_, Se>,
    args: Vec<CommandArg>,
) -> Result<ExecutionResult, brush_core::Error> {
    let name = ctx.command_name.clone();
    let Some(path) = ctx.shell.find_first_executable_in_path_using_cache(&name) else {
        use std::io::Write;
        let _ = writeln!(ctx.stderr(), "nibash: {name}: command not found");
        return Ok(ExecutionResult::new(127));
    };
    let mut cmd = SimpleCommand::new(
        ShellForCommand::ParentShell(ctx.shell),
        ctx.params,
        path.to_string_lossy().into_owned(),
        args,
    );
    cmd.argv0 = Some(name);
    cmd.use_functions = false;
    let spawned = cmd.execute().await?;
    let waited = spawned.wait().await?;
    Ok(waited.into())
}

/// Plans nib's answer for `name args…`, or `None` when the system program
/// must run (an option nib does not know, stdin, a file it should not show
/// as rows).
pub fn plan(name: &str, args: &[String], cwd: &Path) -> Option<Call> {
    match name {
        "cat" => lines::plan_cat(args, cwd),
        "head" | "tail" => lines::plan_head_tail(name == "head", args, cwd),
        "sed" => lines::plan_sed(args, cwd),
        "cut" => lines::plan_cut(args, cwd),
        "wc" => lines::plan_wc(args, cwd),
        "grep" | "egrep" | "fgrep" => grep::plan_grep(name, args, cwd),
        "rg" => grep::plan_rg(args, cwd),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nib_files::tools::grep::Mode;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("tempdir: {e}"),
        };
        for (name, body) in files {
            let p = d.path().join(name);
            if let Some(parent) = p.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            let _ = std::fs::write(p, body);
        }
        d
    }

    #[test]
    fn line_commands_become_read_selectors() {
        let d = dir_with(&[("a.txt", "1\n2\n3\n4\n5\n")]);
        let c = d.path();
        let p = c.join("a.txt").display().to_string();
        let sel = |s: &str| Some(Call::Read(vec![format!("{p}:{s}")]));
        assert_eq!(plan("cat", &strings(&["a.txt"]), c), sel("1-5"));
        assert_eq!(plan("head", &strings(&["-n", "2", "a.txt"]), c), sel("1-2"));
        assert_eq!(plan("head", &strings(&["-3", "a.txt"]), c), sel("1-3"));
        assert_eq!(
            plan("head", &strings(&["-n", "-2", "a.txt"]), c),
            sel("1-3")
        );
        assert_eq!(
            plan("head", &strings(&["-n", "50", "a.txt"]), c),
            sel("1-5")
        );
        assert_eq!(plan("tail", &strings(&["-n", "2", "a.txt"]), c), sel("4-5"));
        assert_eq!(
            plan("tail", &strings(&["-n", "+4", "a.txt"]), c),
            sel("4-5")
        );
        assert_eq!(
            plan("sed", &strings(&["-n", "2,4p", "a.txt"]), c),
            sel("2-4")
        );
        assert_eq!(plan("sed", &strings(&["-n", "3p", "a.txt"]), c), sel("3-3"));
        assert_eq!(
            plan("sed", &strings(&["-n", "2,$p", "a.txt"]), c),
            sel("2-5")
        );
    }

    #[test]
    fn unknown_options_stdin_and_logs_fall_back_to_the_system_program() {
        let d = dir_with(&[
            ("a.txt", "x\n"),
            ("build.log", "x\n"),
            ("logs/t.txt", "x\n"),
        ]);
        let c = d.path();
        assert_eq!(plan("cat", &strings(&["-A", "a.txt"]), c), None);
        assert_eq!(plan("cat", &strings(&[]), c), None);
        assert_eq!(plan("cat", &strings(&["-"]), c), None);
        assert_eq!(plan("cat", &strings(&["missing.txt"]), c), None);
        assert_eq!(plan("cat", &strings(&["build.log"]), c), None);
        assert_eq!(plan("cat", &strings(&["logs/t.txt"]), c), None);
        assert_eq!(plan("head", &strings(&["-c", "5", "a.txt"]), c), None);
        assert_eq!(plan("tail", &strings(&["-f", "a.txt"]), c), None);
        assert_eq!(plan("sed", &strings(&["s/x/y/", "a.txt"]), c), None);
        assert_eq!(plan("sed", &strings(&["-n", "/x/p", "a.txt"]), c), None);
        assert_eq!(plan("grep", &strings(&["-v", "x", "a.txt"]), c), None);
        assert_eq!(
            plan("grep", &strings(&["x"]), c),
            None,
            "grep without files reads stdin"
        );
        assert_eq!(
            plan("grep", &strings(&["x", "."]), c),
            None,
            "a folder without -r"
        );
        assert_eq!(plan("wc", &strings(&["-L", "a.txt"]), c), None);
    }

    #[test]
    fn files_in_a_log_folder_are_logs_unless_git_tracks_them() {
        let d = dir_with(&[("logs/run.txt", "x\n"), ("logs/kept.txt", "x\n")]);
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(d.path())
                .output()
                .is_ok_and(|o| o.status.success())
        };
        assert!(
            is_log(&d.path().join("logs/run.txt")),
            "no repository: a log"
        );
        if git(&["init", "-q"]) && git(&["add", "logs/kept.txt"]) {
            assert!(
                !is_log(&d.path().join("logs/kept.txt")),
                "tracked: not a log"
            );
            assert!(is_log(&d.path().join("logs/run.txt")), "untracked: a log");
        }
    }

    #[test]
    fn grep_options_map_onto_the_grep_tool() {
        let d = dir_with(&[("a.txt", "x\n")]);
        let c = d.path();
        let Some(Call::Grep(m)) = plan("grep", &strings(&["-rni", "-C2", "a\\|b", "."]), c) else {
            panic!("grep -rni was not planned");
        };
        assert_eq!(m.pattern, "a|b");
        assert!(m.ignore_case);
        assert_eq!((m.before, m.after), (2, 2));
        let Some(Call::Grep(m)) = plan("grep", &strings(&["-lw", "-F", "a.b", "a.txt"]), c) else {
            panic!("grep -lw -F was not planned");
        };
        assert_eq!(m.pattern, r"\b(?:a\.b)\b");
        assert_eq!(m.mode, Mode::Files);
        let Some(Call::Grep(m)) = plan("rg", &strings(&["-g", "*.rs", "fn (a|b)"]), c) else {
            panic!("rg was not planned");
        };
        assert_eq!(m.globs, ["*.rs"]);
        assert_eq!(m.pattern, "fn (a|b)");
    }
}
