//! A tool verb run once: stdin read for write's content and edit's patch,
//! the call context built as a session would (kept names, earlier tokens),
//! the tool run, and its answer printed. Parsing the verb is `parse`'s; the
//! exit status and wording are `output`'s.

use crate::tools;
use nib_files::context::Ctx;
use nib_files::context::args::ArgError;
use nib_files::seen::Agent;
use nib_files::tools::FileRequest;
use nib_files::workspace::Workspace;
use nib_settings::Config;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use super::command::ToolCall;
use super::output::{cli_wording, exit_status, fail, json_answer};

/// Runs a tool verb and returns the process exit status.
pub fn run_tool(config: Config, mut call: ToolCall, as_json: bool) -> i32 {
    let name = call.name();
    // write's content and edit's patch come on stdin.
    let stdin_arg = match &mut call {
        ToolCall::File(FileRequest::Write(w)) => Some(&mut w.content),
        ToolCall::File(FileRequest::Edit(e)) => Some(&mut e.input),
        _ => None,
    };
    if let Some(arg) = stdin_arg {
        let mut content = Vec::new();
        if let Err(e) = std::io::stdin().read_to_end(&mut content) {
            return fail(&format!(
                "nib {name}: reading stdin: {e}; nothing was written"
            ));
        }
        match String::from_utf8(content) {
            // An empty patch is said plainly, with what to send.
            Ok(s) if name == "edit" && s.trim().is_empty() => {
                return fail(EMPTY_PATCH);
            }
            Ok(s) => *arg = s,
            Err(_) => {
                return fail(&format!(
                    "nib {name}: stdin is not UTF-8 text; nothing was written"
                ));
            }
        }
    }
    let workspace = Workspace::with_project_names(config.project_dir.clone(), false);
    // Names agents used in two sessions are the command line's too.
    workspace
        .update_names(|n| nib_files::names::load_kept(&config.state_dir, &config.project_dir, n));
    // Tokens an earlier `nib grep --replace` or refused `nib edit` printed.
    let mut first = Agent::default();
    crate::cli_tokens::load(&config.state_dir, &mut first.tokens);
    let loaded = crate::cli_tokens::names(&first.tokens);
    let agent = Mutex::new(first);
    let nibash = std::sync::Arc::default();
    let scope = match workspace.scope(config.sandbox, config.confirm_outside_roots) {
        Ok(s) => s,
        Err(e) => return fail(&format!("nib {name}: {e}; nothing was read or written")),
    };
    let settings = config.file_tools();
    let programs = crate::nibash::command_rules::JudgedPrograms(&config);
    let ctx = crate::broker_ctx::BrokerCtx {
        files: Ctx {
            workspace: &workspace,
            agent: &agent,
            settings: &settings,
            scope,
            enforce_seen: false,
            live: None,
            programs: &programs,
            placing: None,
        },
        config: &config,
    };
    let result = match call {
        ToolCall::File(request) => nib_files::tools::run_file_request(request, &ctx),
        ToolCall::Nibash(request) => tools::nibash::run(request, &ctx, &nibash, &Arc::from(""))
            .map_err(tools::CallError::Args),
        ToolCall::Skim(request) => {
            tools::nibash::skim(request, &ctx).map_err(tools::CallError::Args)
        }
        ToolCall::Refused(_, message) => Err(tools::CallError::Args(ArgError(message))),
    };
    if matches!(name, "edit" | "grep") {
        let agent = agent.lock().unwrap_or_else(|p| p.into_inner());
        crate::cli_tokens::save(&config.state_dir, &loaded, &agent.tokens);
    }
    let result = result.map(|mut out| {
        out.text = cli_wording(name, &out.text);
        out
    });
    if as_json && let Ok(out) = &result {
        let code = match &out.approval {
            Some(_) => 1,
            None => exit_status(name, out),
        };
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(json_answer(out, code).as_bytes());
        return code;
    }
    match result {
        // The command line cannot ask a person: a write that needs approval is refused.
        Ok(out) if out.approval.is_some() => {
            let text = out
                .approval
                .as_ref()
                .map(|r| r.refusal("cannot be asked for on the command line"))
                .unwrap_or_default();
            let mut stdout = std::io::stdout().lock();
            let tty = std::io::IsTerminal::is_terminal(&stdout);
            let _ = stdout.write_all(crate::terminal::for_stream(&text, tty).as_bytes());
            if !text.ends_with('\n') {
                let _ = stdout.write_all(b"\n");
            }
            1
        }
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // To a terminal the text is shown, its control characters
            // written out; to a pipe or a file it is the bytes.
            let tty = std::io::IsTerminal::is_terminal(&stdout);
            let _ = stdout.write_all(crate::terminal::for_stream(&out.text, tty).as_bytes());
            // Every answer ends its last line, errors and hints included.
            if !out.text.is_empty() && !out.text.ends_with('\n') {
                let _ = stdout.write_all(b"\n");
            }
            for (data, mime) in &out.images {
                let _ = writeln!(
                    stdout,
                    "[{mime} image content, {} bytes of base64, shown to MCP clients]",
                    data.len()
                );
            }
            let _ = stdout.flush();
            // `nib sh` exits with the command's status (a job still running: 0).
            exit_status(name, &out)
        }
        Err(e) => {
            let verb = if name == "nibash" { "sh" } else { name };
            fail(&format!("nib {verb}: {e}"))
        }
    }
}

/// What `nib edit` says when stdin holds no patch (exit 2).
const EMPTY_PATCH: &str = "\
nib edit: the patch is empty (stdin held nothing but blank lines); nothing was written.
Send a patch on stdin: each file's header as `nib read` printed it, then hunks that name its lines:
  [src/app.rs#4DC5]
  PUT 12:
  +the new line 12
or `REAPPLY TOKEN` from `nib grep --replace`; `nib edit --help` lists every form.";
