//! Command-line verbs: every tool is also `nib VERB`, printing exactly what the
//! tool returns, so people and CI bots can use nib without an MCP client.
//!
//! Exit status: 0 on success, 1 when the tool reports an error, 2 for a usage
//! error; `nib grep` 0 for a match, 1 for none, 2 for any error; `nib sh` the
//! command's; `nib undo` 0 when nothing is recorded (docs/cli.md has every
//! verb's). The MCP server is `nib` with no arguments (see `main`).

use crate::confinement::Confinement;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::tools;
use crate::tools::nibash::{NibashRequest, SkimRequest};
use nib_files::config::Config;
use nib_files::context::Ctx;
use nib_files::context::args::ArgError;
use nib_files::seen::Agent;
use nib_files::tools::FileRequest;
use nib_files::tools::edit::EditRequest;
use nib_files::tools::find::{self, FindRequest, Sort};
use nib_files::tools::grep::{GrepRequest, Mode};
use nib_files::tools::read::ReadRequest;
use nib_files::tools::write::WriteRequest;
use nib_files::workspace::Workspace;

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// Serve MCP on stdio, with the providers named by `--provider NAME=PROGRAM`.
    Serve(Vec<(String, String)>),
    /// Serve MCP over streamable HTTP (`nib serve --http ADDR --token-file FILE`).
    ServeHttp(crate::serve_http::Options),
    /// Print the version.
    Version,
    /// Print usage.
    Help,
    /// Print one verb's usage.
    HelpFor(String),
    /// Report what the sandbox can apply here.
    Doctor,
    /// Answer a Claude Code hook event from stdin.
    Hook,
    /// One line about the project's running nibash calls and jobs.
    Statusline,
    /// Register nib with the clients.
    Setup(crate::setup::SetupArgs),
    /// Run a tool verb; `json`: print the answer as one JSON object.
    Tool {
        /// The call.
        call: ToolCall,
        /// `--json` was given.
        json: bool,
    },
    /// Shape a saved log as nibash would show it.
    Shape(Shape),
    /// Put a change of nib's back (`None`: list them).
    Undo(Option<usize>),
    /// `nib undo --diff`: the newest change as a diff.
    UndoDiff,
}

/// A tool verb's call: the tool's typed request, as the MCP server parses
/// a client's arguments into it.
#[derive(Debug, PartialEq, Eq)]
pub enum ToolCall {
    /// read, grep, find, edit or write.
    File(FileRequest),
    /// `nib sh`: the nibash tool.
    Nibash(NibashRequest),
    /// `nib skim`.
    Skim(SkimRequest),
    /// A flag's value the tool cannot use (`--mode lots`): the tool and
    /// what is wrong, naming the flag; nothing runs.
    Refused(&'static str, String),
}

impl ToolCall {
    /// The tool's name.
    pub fn name(&self) -> &'static str {
        match self {
            ToolCall::File(r) => r.name(),
            ToolCall::Nibash(_) => "nibash",
            ToolCall::Skim(_) => "skim",
            ToolCall::Refused(name, _) => name,
        }
    }
}

/// Usage text.
pub const USAGE: &str = "\
nib: hashline file tools for coding agents, as an MCP server or on the command line

usage:
  nib [--provider NAME=PROGRAM]...    serve MCP on stdio (for a client such as Claude Code),
                                      offering each provider's tools as NAME_TOOL
  nib serve --http HOST:PORT --token-file FILE [OPTIONS]
                                      serve MCP over streamable HTTP to agents, each with a
                                      token of FILE (nib serve --help; docs/http.md)
  nib read [--plain] [--info] [--outline] [--max-line-length N] PATH[:SELECTOR]...
  nib write [--tag TAG] PATH          content on stdin
  nib edit                            a patch on stdin (see the edit tool)
  nib grep [-i] [-F] [-A N] [-B N] [-C N] [--glob G]... [--mode files|count]
           [--no-ignore] [--skip N] [--replace R] PATTERN [PATH[:SELECTOR]...]
  nib find [--glob G]... [--min-size S] [--newer AGE] [--sort path|size|modified]
           [--no-ignore] [--skip N] [PATH...]
  nib sh [--timeout T] [--expect TEXT] 'COMMAND'
                                      run one nibash call; at the timeout the command is
                                      stopped (exit 124): jobs end with this process
  nib skim [--expect TEXT] PATH...    read long logs and reports for what TEXT asks
  nib shape --log PATH --purpose TEXT [--exit N] [--command TEXT]
                                      print what nibash would show of a saved log
  nib undo [--list | --diff] [N]      put back nib's last change in this project (or change N
                                      of the list), file by file, where files still hold it;
                                      --diff shows the newest change as a diff
  nib doctor                          which sandbox layers this machine offers
  nib statusline                      one line about the project's running nibash calls and jobs
  nib setup [--user] [--dry-run] [--no-sandbox] [--provider NAME=PROGRAM] [--decider KIND]
            [--summary LIST] [--opencode PROGRAM] [--http URL]
                                      register nib with Claude Code and OpenCode
  nib hook                            answer a Claude Code hook event (stdin)
  nib --version

The project directory is $NIB_DIRECTORY, else the working directory.
";

/// A command line that cannot be used: what is wrong, then the usage to
/// follow (the verb's own when a verb was named, else every verb's).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, UsageError> {
    parse_args(args).map_err(|UsageError(message)| {
        let verb = args.first().and_then(|v| verb_usage(v).map(|u| (v, u)));
        UsageError(match verb {
            Some((v, usage)) => format!(
                "{message}\n\n{usage}\n`nib {v} --help` explains it; `nib --help` lists every verb.\n"
            ),
            None => format!("{message}\n\n{USAGE}"),
        })
    })
}

fn parse_args(args: &[String]) -> Result<Command, UsageError> {
    let Some(first) = args.first() else {
        return Ok(Command::Serve(Vec::new()));
    };
    if first == "--provider" || first.starts_with("--provider=") {
        return parse_serve(args);
    }
    // `--json` after a tool verb: the answer as one JSON object.
    let json = matches!(
        first.as_str(),
        "read" | "write" | "grep" | "find" | "sh" | "edit" | "skim"
    ) && args[1..].iter().any(|a| a == "--json");
    if json {
        let rest: Vec<String> = args.iter().filter(|a| *a != "--json").cloned().collect();
        return match parse_args(&rest)? {
            Command::Tool { call, .. } => Ok(Command::Tool { call, json: true }),
            other => Ok(other),
        };
    }
    let rest = &args[1..];
    if rest.iter().any(|a| a == "--help" || a == "-h")
        && let Some(page) = help_page(first)
    {
        return Ok(Command::HelpFor(page));
    }
    match first.as_str() {
        "--version" | "-V" | "version" => Ok(Command::Version),
        "doctor" => Ok(Command::Doctor),
        "hook" => Ok(Command::Hook),
        "statusline" => Ok(Command::Statusline),
        "setup" => parse_setup(rest),
        "serve" => crate::serve_http::parse(rest)
            .map(Command::ServeHttp)
            .map_err(UsageError),
        "--help" | "-h" | "help" => Ok(Command::Help),
        "read" => parse_read(rest),
        "write" => parse_write(rest),
        "grep" => parse_grep(rest),
        "find" => parse_find(rest),
        "sh" => parse_sh(rest),
        "skim" => parse_skim(rest),
        "shape" => parse_shape(rest),
        "undo" => match rest {
            [] => Ok(Command::Undo(Some(1))),
            [flag] if flag == "--list" || flag == "-l" => Ok(Command::Undo(None)),
            [flag] if flag == "--diff" => Ok(Command::UndoDiff),
            [n] => n
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .map(|n| Command::Undo(Some(n)))
                .ok_or_else(|| {
                    UsageError(format!(
                        "undo takes --list, --diff or a change's number; got \"{n}\""
                    ))
                }),
            _ => Err(UsageError(
                "undo takes --list, --diff or one change's number".into(),
            )),
        },
        "edit" => match rest.first() {
            None => Ok(file_tool(FileRequest::Edit(EditRequest::default()))),
            Some(extra) => Err(UsageError(format!(
                "edit reads its patch from stdin; got \"{extra}\""
            ))),
        },
        other => Err(UsageError(format!("unknown command \"{other}\""))),
    }
}

/// `nib --provider NAME=PROGRAM [--provider …]`: serve with providers.
fn parse_serve(args: &[String]) -> Result<Command, UsageError> {
    let mut providers = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let spec = match a.strip_prefix("--provider=") {
            Some(v) => v.to_string(),
            None if a == "--provider" => value(&mut it, "--provider")?.clone(),
            None => {
                return Err(UsageError(format!(
                    "serving takes only --provider NAME=PROGRAM; got \"{a}\""
                )));
            }
        };
        match spec.split_once('=') {
            Some((name, program)) if !name.is_empty() && !program.is_empty() => {
                providers.push((name.to_string(), program.to_string()));
            }
            _ => {
                return Err(UsageError(format!(
                    "--provider takes NAME=PROGRAM; got \"{spec}\""
                )));
            }
        }
    }
    Ok(Command::Serve(providers))
}

/// `nib sh [--timeout T] [--background] 'COMMAND'`.
fn parse_sh(rest: &[String]) -> Result<Command, UsageError> {
    let mut it = rest.iter();
    let (mut command, mut timeout, mut expect) = (None, None, None);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--timeout" => timeout = Some(value(&mut it, "--timeout")?),
            "--background" => {
                return Err(UsageError(
                    "sh has no --background: nib sh keeps no server, so a job it started would end \
                     with this process; run the command in the foreground, with your own shell's `&`, \
                     or through an MCP session, where jobs outlive the call"
                        .into(),
                ));
            }
            "--expect" => expect = Some(value(&mut it, "--expect")?.clone()),
            _ if command.is_none() => command = Some(a.clone()),
            extra => {
                return Err(UsageError(format!(
                    "sh takes one command line (quote it); got also \"{extra}\""
                )));
            }
        }
    }
    let command = command.ok_or_else(|| UsageError("sh needs a COMMAND".into()))?;
    let mut request = NibashRequest::new(command);
    request.expect = expect;
    if let Some(t) = timeout {
        match tools::nibash::timeout_arg(t, "--timeout") {
            Ok(t) => request.timeout = t,
            Err(e) => return Ok(refused("nibash", e)),
        }
    }
    Ok(Command::Tool {
        call: ToolCall::Nibash(request),
        json: false,
    })
}

/// `nib skim [--expect TEXT] PATH...`.
fn parse_skim(rest: &[String]) -> Result<Command, UsageError> {
    let mut request = SkimRequest::new(Vec::new());
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--expect" => request.expect = value(&mut it, "--expect")?.clone(),
            "--" => request.paths.extend(it.by_ref().cloned()),
            flag if flag.starts_with("--") => {
                return Err(UsageError(format!("skim has no option {flag}")));
            }
            path => request.paths.push(path.to_string()),
        }
    }
    if request.paths.is_empty() {
        return Err(UsageError("skim needs at least one PATH".into()));
    }
    Ok(Command::Tool {
        call: ToolCall::Skim(request),
        json: false,
    })
}

/// A tool verb whose flag's value the tool cannot use: the command line
/// parsed, and `nib VERB` says what is wrong, naming the flag (exit 2).
fn refused(verb: &'static str, error: ArgError) -> Command {
    Command::Tool {
        call: ToolCall::Refused(verb, error.0),
        json: false,
    }
}

/// A file tool verb's typed request.
fn file_tool(request: FileRequest) -> Command {
    Command::Tool {
        call: ToolCall::File(request),
        json: false,
    }
}

/// `nib VERB --help`: the verb's usage, then what it does and what each
/// option means; `None` for a word that is not a verb.
pub fn help_page(verb: &str) -> Option<String> {
    // serve's page is its own usage, every option with its default.
    if verb == "serve" {
        return Some(format!("usage:\n  {}", crate::serve_http::USAGE));
    }
    let usage = verb_usage(verb)?;
    let details = match verb {
        "read" => {
            "\
Prints each file as a [PATH#TAG] header (TAG: 4 hex digits, a hash of the whole file) and
N:TEXT rows; the numbers are what `nib edit` names.

  PATH:SELECTOR   lines: 10, 10-40, 10+5, 100- (to the end), -20 (the last 20), 1-5,30-35;
                  in parsed languages a declaration: PATH:login, PATH:Type.member
  PATH#TAG        what changed since that version; PATH@REV the file at a git revision
  --plain         lines without numbers or tag, no size cap
  --info          one line of facts per file: lines, size, longest line, endings, age
  --outline       the declarations with their line ranges, whatever the size
  --max-line-length N   cut longer lines (the row says so)
  --json          the answer as one JSON object (text, is_error, exit, written)
"
        }
        "write" => {
            "\
Writes stdin to PATH. A new file (and its folders) is created; an existing one is replaced only
with --tag, its current tag from `nib read`, so a file changed since is never overwritten. CRLF
endings, a BOM and the file's mode are kept. Prints the new [PATH#TAG].
"
        }
        "edit" => {
            "\
Applies a patch from stdin. Each file starts with its header as `nib read` printed it,
[PATH#TAG], then hunks that name lines by number:

  PUT N: / PUT N.=M:      replace line N (or N to M) with the + rows below
  PUT <N: / PUT >N:       insert the + rows before / after line N (PUT >$: appends)
  CUT N / CUT N.=M        delete the lines
  SUB N: OLD              replace OLD on line N with the + rows
  REM / MV DEST / CP DEST the file itself: to the trash, moved, copied
  *** Add File: PATH      a new file, its lines as + rows

A stale tag (the file changed since that read) is refused with the current rows (exit 1, nothing
written): each nib command starts afresh, with no earlier version to rebase onto (an MCP session
rebases when the lines named are unchanged). An empty patch exits 2, saying what to send. `REAPPLY TOKEN` on stdin applies a preview `nib grep --replace` printed.
--json prints the answer as JSON, `written` naming each file with its new tag.
"
        }
        "grep" => {
            "\
Searches file contents (ripgrep's engine) under PATHs (default: the project) and prints
[PATH#TAG] blocks: *N:TEXT for a match, N:TEXT for context. Exit 0 when something matched, 1 when
nothing did, 2 on an error (a pattern that does not compile, a usage error), as grep and rg.

  -i / -F             ignore case / the pattern is plain text
  -A N / -B N / -C N  context rows after / before / around each match (default 1)
  --glob G            only files whose names match G (*.rs); !G leaves them out; repeatable
  --mode files|count  list the matching files, or count matches per file
  --no-ignore         search files .gitignore would skip
  --skip N            the next page (20 files a page)
  --replace R         preview replacing each match with R ($1, ${name}); writes nothing and
                      prints a REAPPLY token that `nib edit` applies
  PATH:SELECTOR       search only those lines (app.log:1100-1250)
"
        }
        "find" => {
            "\
Lists the files grep would search, with line counts, sizes and ages.

  --glob G            only names matching G; repeatable
  --min-size S        at least S bytes (20k, 1.5M)
  --newer AGE         changed within AGE (30m, 2h, 3d)
  --sort path|size|modified
  --no-ignore         list files .gitignore would skip
  --skip N            the next page (200 files a page)
"
        }
        "sh" => {
            "\
Runs COMMAND as one nibash call (a bash interpreter whose own cat, grep, head … print anchored
rows), in the project folder, confined as the server's calls are (NIB_SANDBOX=1 for the sandbox).
Exits with the command's status. Nothing outlives it: at --timeout (default 120s) the command is
stopped and nib sh exits 124.

  --timeout T         30s, 5m …
  --expect TEXT       what you look for in a long output; it steers which rows are kept
"
        }
        "skim" => {
            "\
Reads long logs and reports (test runs, builds) and prints what answers --expect: the failures,
their messages and where they are, with the rest counted.
"
        }
        "shape" => {
            "\
Prints what nibash would show of a saved log of a command (for tuning and tests): --purpose says
what the reader wants, --exit the command's status, --command the command line.
"
        }
        "undo" => {
            "\
Puts back nib's last change in this project (or change N of --list), file by file, only where a
file still holds what nib wrote; a file changed since is named and left alone, a file nib made goes
to the trash. Exit 0 when it was put back or nothing is recorded (it says so), 1 when a file was
left. --diff prints the newest change as a diff (exit 2 when there is none).
"
        }
        "doctor" => {
            "\
Says which sandbox layers this machine offers (bubblewrap, Landlock, seccomp, namespaces,
cgroups) and what the sandbox applies. The sandbox is on unless nib runs with NIB_SANDBOX=0
(`nib setup --no-sandbox` writes that); then doctor says programs run unconfined.
"
        }
        "statusline" => {
            "\
Prints one line about the project's running nibash calls and jobs, for Claude Code's statusLine
(`nib setup --user` installs it when you have none). Reads the JSON Claude Code sends on stdin.
"
        }
        "setup" => {
            "\
Registers nib with Claude Code (and OpenCode where the project has an opencode.json): run it in
your project's folder, or with --user for every project. Only what is missing is added; a second
run changes nothing.

  --user              every project (the Claude config folder and ~/.claude.json), with the mod
  --dry-run           print the changes as diffs; write nothing
  --no-sandbox        run nib with NIB_SANDBOX=0 (programs unconfined); without it the sandbox,
                      nib's default, holds (and a 0 an earlier --no-sandbox wrote is taken out)
  --provider NAME=PROGRAM, --decider KIND, --summary LIST, --opencode PROGRAM
                      kept in ~/.config/nib/setup.json for later starts; an empty value clears one
  --http URL          nib's entry in .mcp.json reaches a `nib serve --http` at URL (type http),
                      with `Authorization: Bearer ${NIB_TOKEN}`: Claude Code takes the agent's
                      token from NIB_TOKEN, so it is never written into .mcp.json; no hooks
"
        }
        "hook" => {
            "\
Answers one Claude Code hook event given as JSON on stdin (what `nib setup` installs). Not for
people.
"
        }
        _ => "",
    };
    Some(if details.is_empty() {
        usage
    } else {
        format!("{usage}\n{details}")
    })
}

/// One verb's lines of [`USAGE`] (its synopsis and the lines that continue
/// it), or `None` for a word that is not a verb.
pub fn verb_usage(verb: &str) -> Option<String> {
    let head = format!("  nib {verb}");
    let mut lines = USAGE.lines().skip_while(|l| {
        !(l.starts_with(&head) && l[head.len()..].chars().next().is_none_or(|c| c == ' '))
    });
    let first = lines.next()?;
    let mut out = format!("usage:\n{first}\n");
    for l in lines.take_while(|l| l.starts_with("    ") && !l.trim().is_empty()) {
        out.push_str(l);
        out.push('\n');
    }
    Some(out)
}

/// `nib shape --log PATH --purpose TEXT [--exit N] [--command TEXT]`.
fn parse_shape(rest: &[String]) -> Result<Command, UsageError> {
    let mut shape = Shape::default();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--log" => shape.log = value(&mut it, "--log")?.into(),
            "--purpose" => shape.purpose = value(&mut it, "--purpose")?.clone(),
            "--exit" => {
                shape.exit = Some(
                    value(&mut it, "--exit")?
                        .parse()
                        .map_err(|_| UsageError("--exit needs a number".into()))?,
                )
            }
            "--command" => shape.command = Some(value(&mut it, "--command")?.clone()),
            other => return Err(UsageError(format!("shape has no option {other}"))),
        }
    }
    if shape.log.as_os_str().is_empty() {
        return Err(UsageError("shape needs --log PATH".into()));
    }
    Ok(Command::Shape(shape))
}

/// What `nib shape` shapes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// The saved log.
    pub log: std::path::PathBuf,
    /// What the run was for (steers which rows stay).
    pub purpose: String,
    /// Its exit status.
    pub exit: Option<i32>,
    /// The command that wrote it.
    pub command: Option<String>,
}

/// Prints what nibash would show of a saved log; returns the exit status.
pub fn shape(s: &Shape) -> u8 {
    let bytes = match std::fs::read(&s.log) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "nib shape: {}: {e}; nothing was shaped",
                s.log.display()
            );
            return 1;
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    let rows: Vec<&str> = text.lines().collect();
    let words = crate::nibash::cut::expect_words(&s.purpose, &rows);
    let mut out = String::new();
    if let Some(c) = &s.command {
        out.push_str(&format!("$ {c}\n"));
    }
    if crate::nibash::cut::is_long(&text) {
        let extra = |row: &str| crate::nibash::cut::has_word(row, &words);
        // The keyword or fixed rows the configured decider starts from
        // (environment, then setup.json); the model's windows are for calls.
        let decider = crate::llm::Settings::from_env(&nib_files::config::config_dir()).decider;
        let keep =
            crate::nibash::cut::pick(&rows, crate::nibash::cut::Decider::of(decider), &extra);
        out.push_str(&crate::nibash::cut::render(&rows, &keep, Some(&s.log)));
    } else {
        out.push_str(&text);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if let Some(c) = s.exit.filter(|c| *c != 0) {
        out.push_str(&format!("[exit {c}]\n"));
    }
    let stdout = std::io::stdout();
    let out = crate::terminal::for_stream(&out, std::io::IsTerminal::is_terminal(&stdout));
    let _ = stdout.lock().write_all(out.as_bytes());
    0
}

fn parse_read(rest: &[String]) -> Result<Command, UsageError> {
    let mut request = ReadRequest::default();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--plain" => request.options.plain = true,
            "--info" => request.options.info = true,
            "--outline" => request.options.outline = true,
            "--max-line-length" => {
                let n = it
                    .next()
                    .and_then(|v| v.parse::<usize>().ok())
                    .ok_or_else(|| UsageError("--max-line-length needs a number".into()))?;
                request.max_line_length(n);
            }
            "--" => request.paths.extend(it.by_ref().cloned()),
            flag if flag.starts_with("--") => {
                return Err(UsageError(format!("read has no option {flag}")));
            }
            path => request.paths.push(path.to_string()),
        }
    }
    if request.paths.is_empty() {
        return Err(UsageError("read needs at least one PATH".into()));
    }
    Ok(file_tool(FileRequest::Read(request)))
}

fn parse_setup(rest: &[String]) -> Result<Command, UsageError> {
    let mut args = crate::setup::SetupArgs::default();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") && f != "--provider" => {
                (f.to_string(), Some(v.to_string()))
            }
            _ => (a.clone(), None),
        };
        let take = |it: &mut std::slice::Iter<'_, String>| -> Result<String, UsageError> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => value(it, &flag).cloned(),
            }
        };
        match flag.as_str() {
            "--user" => args.user = true,
            "--dry-run" => args.dry_run = true,
            "--no-sandbox" => args.no_sandbox = true,
            "--decider" => args.decider = Some(take(&mut it)?),
            "--summary" => args.summary = Some(take(&mut it)?),
            "--opencode" => args.opencode = Some(take(&mut it)?),
            "--http" => args.http = Some(take(&mut it)?),
            "--provider" => {
                let v = value(&mut it, "--provider")?;
                let (name, program) = v.split_once('=').ok_or_else(|| {
                    UsageError("--provider takes NAME=PROGRAM (NAME= clears it)".into())
                })?;
                args.providers.push((name.to_string(), program.to_string()));
            }
            other => return Err(UsageError(format!("setup has no option {other}"))),
        }
    }
    Ok(Command::Setup(args))
}

/// Takes the value after a flag.
fn value<'a>(it: &mut std::slice::Iter<'a, String>, flag: &str) -> Result<&'a String, UsageError> {
    it.next()
        .ok_or_else(|| UsageError(format!("{flag} needs a value")))
}

fn number(it: &mut std::slice::Iter<'_, String>, flag: &str) -> Result<usize, UsageError> {
    value(it, flag)?
        .parse()
        .map_err(|_| UsageError(format!("{flag} needs a number")))
}

fn parse_grep(rest: &[String]) -> Result<Command, UsageError> {
    let mut request = GrepRequest::new(String::new());
    let mut mode = None;
    let mut positional = Vec::new();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-i" | "--ignore-case" => request.ignore_case = true,
            "-F" | "--literal" | "--fixed-strings" => request.literal = true,
            "-A" | "--after" => request.after = number(&mut it, a)?,
            "-B" | "--before" => request.before = number(&mut it, a)?,
            "-C" | "--context" => {
                let n = number(&mut it, a)?;
                request.before = n;
                request.after = n;
            }
            "--glob" | "-g" => request.globs.push(value(&mut it, a)?.clone()),
            "--mode" => mode = Some(value(&mut it, a)?),
            "--no-ignore" => request.no_ignore = true,
            "--skip" => request.skip = number(&mut it, a)?,
            "--replace" | "-r" => request.replace = Some(value(&mut it, a)?.clone()),
            "--max-line-length" => request.max_line_length = number(&mut it, a)?,
            "--" => positional.extend(it.by_ref().cloned()),
            flag if flag.starts_with('-') && flag.len() > 1 && positional.is_empty() => {
                return Err(UsageError(format!("grep has no option {flag}")));
            }
            other => positional.push(other.to_string()),
        }
    }
    let mut positional = positional.into_iter();
    request.pattern = positional
        .next()
        .ok_or_else(|| UsageError("grep needs a PATTERN".into()))?;
    request.paths = positional.collect();
    if let Some(mode) = mode {
        match Mode::parse(mode, "--mode") {
            Ok(m) => request.mode = m,
            Err(e) => return Ok(refused("grep", e)),
        }
    }
    Ok(file_tool(FileRequest::Grep(request)))
}

fn parse_find(rest: &[String]) -> Result<Command, UsageError> {
    let mut request = FindRequest::default();
    let (mut min_size, mut newer, mut sort) = (None, None, None);
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--glob" | "-g" => request.globs.push(value(&mut it, a)?.clone()),
            "--min-size" => min_size = Some(value(&mut it, a)?),
            "--newer" => newer = Some(value(&mut it, a)?),
            "--sort" => sort = Some(value(&mut it, a)?),
            "--no-ignore" => request.no_ignore = true,
            "--skip" => request.skip = Some(number(&mut it, a)?),
            flag if flag.starts_with("--") => {
                return Err(UsageError(format!("find has no option {flag}")));
            }
            p => request.paths.push(p.to_string()),
        }
    }
    // Checked in the tool's order, each error naming the flag typed.
    let checked = (|| {
        if let Some(s) = min_size {
            request.min_size = Some(find::min_size_arg(s, "--min-size")?);
        }
        if let Some(s) = newer {
            request.newer = Some(find::newer_arg(s, "--newer")?);
        }
        if let Some(s) = sort {
            request.sort = Sort::parse(s, "--sort")?;
        }
        Ok(())
    })();
    match checked {
        Ok(()) => Ok(file_tool(FileRequest::Find(request))),
        Err(e) => Ok(refused("find", e)),
    }
}

fn parse_write(rest: &[String]) -> Result<Command, UsageError> {
    let mut request = WriteRequest::default();
    let mut path = None;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--tag" => {
                let t = it
                    .next()
                    .ok_or_else(|| UsageError("--tag needs a value".into()))?;
                request.tag = Some(t.clone());
            }
            flag if flag.starts_with("--") => {
                return Err(UsageError(format!("write has no option {flag}")));
            }
            p if path.is_none() => path = Some(p.to_string()),
            extra => {
                return Err(UsageError(format!(
                    "write takes one PATH; got also \"{extra}\""
                )));
            }
        }
    }
    request.path = path.ok_or_else(|| UsageError("write needs a PATH".into()))?;
    Ok(file_tool(FileRequest::Write(request)))
}

/// Prints the sandbox layers this machine offers — each tried once, with
/// a fixed configuration — and what NIB_SANDBOX=1 applies; no line names a
/// limit that is not in force. Exit status 1 when NIB_SANDBOX=1 and no
/// confined mode holds (programs are refused).
pub fn doctor(config: &Config) -> i32 {
    let layers = nib_sandbox::probe();
    let tried = nib_sandbox::trial();
    let policy = config.sandbox_policy(std::slice::from_ref(&config.project_dir));
    let mut out = String::from("nib doctor: sandbox layers on this machine, each tried once\n");
    let bwrap = nib_sandbox::trusted_usable(std::slice::from_ref(&config.project_dir));
    out.push_str(&match &bwrap {
        Ok(path) => format!(
            "bubblewrap: yes ({} started with --proc, --dev and a worker's namespaces)\n",
            path.display()
        ),
        Err(why) => format!("bubblewrap: no ({why})\n"),
    });
    out.push_str(&match &tried.landlock {
        Ok(abi) => format!("Landlock ABI: {abi} (fully enforced, checked)\n"),
        Err(why) => format!("Landlock ABI: none ({why})\n"),
    });
    out.push_str(&match &tried.seccomp {
        Ok(()) => "seccomp: yes (filter installed, checked)\n".to_string(),
        Err(why) => format!("seccomp: no ({why})\n"),
    });
    let yes = |b: bool| if b { "yes" } else { "no" };
    out.push_str(&format!(
        "PID namespace: {}\npids cgroup: {}\nmemory cgroup: {}\n",
        yes(layers.pid_namespace),
        yes(layers.pids_cgroup),
        yes(layers.memory_cgroup)
    ));
    // The worker entry is a helper the broker starts: it must lie outside
    // every root, or confined programs are refused.
    let entry = std::env::current_exe()
        .map_err(|e| format!("cannot find nib's own binary: {e}"))
        .and_then(|exe| {
            let entry = nib_sandbox::entry_beside(&exe);
            nib_sandbox::trusted_entry(&entry, std::slice::from_ref(&config.project_dir))
                .map(|()| entry)
        });
    match &entry {
        Ok(path) => out.push_str(&format!(
            "worker entry: {} (outside the roots)\n",
            path.display()
        )),
        // Under NIB_SANDBOX=1 the mode line says it.
        Err(why) if !config.sandbox => {
            out.push_str(&format!("worker entry (under NIB_SANDBOX=1): {why}\n"))
        }
        Err(_) => {}
    }
    let mode = config
        .confined_mode()
        .and_then(|m| entry.as_ref().map(|_| m).map_err(|why| why.clone()));
    let in_force = if !config.sandbox {
        format!(
            "mode: {} — programs run in their own session, with empty stdin, fds 0-2, a scrubbed environment and limits; their tree ends with the call",
            config.sandbox_mode()
        )
    } else if let Err(why) = &mode {
        format!("mode: {why}")
    } else {
        format!(
            "mode: {}; {}; writable: {}",
            config.sandbox_mode(),
            config.network_mode(),
            policy
                .writable
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    out.push_str(&in_force);
    out.push('\n');
    if !config.sandbox || mode.is_ok() {
        out.push_str(&config.read_policy_text());
        out.push_str(&config.brokered_text());
    }
    out.push_str(&match &tried.exec_notify {
        Ok(()) => "exec-time rules: while nib.json has program rules, every exec of a nibash call is checked by the file it runs (seccomp user notification, in every mode)\n".to_string(),
        Err(why) => format!(
            "exec-time rules: cannot be enforced here (seccomp user notification is refused: {why}); while nib.json has program rules, programs are refused\n"
        ),
    });
    if !config.sandbox && mode.is_ok() {
        out.push_str("to confine programs: remove NIB_SANDBOX=0 from nib's environment (Claude Code: the \"env\" of nib's entry in .mcp.json or ~/.claude.json; `nib setup` without --no-sandbox takes it out); the sandbox is nib's default, docs/sandbox.md says what it holds\n");
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(crate::terminal::visible(&out).as_bytes());
    i32::from(config.sandbox && mode.is_err())
}

/// The answer as one JSON object for scripts: the text, whether it is an
/// error, the exit status of a command (`sh`), the files written with their
/// new tags.
fn json_answer(out: &nib_files::context::ToolOutput, code: i32) -> String {
    let written: Vec<Value> = out
        .written
        .iter()
        .map(|(path, tag)| json!({"path": path, "tag": tag}))
        .collect();
    let mut v = json!({
        "text": out.text,
        "is_error": out.is_error,
        "exit": code,
        "written": written,
    });
    if let Some(req) = &out.approval {
        v["needs_approval"] = json!(req.place);
    }
    format!("{v}\n")
}

/// `nib undo`: lists nib's recorded changes, or puts one back; returns the
/// exit status (1 when a file could not be put back).
pub fn undo(config: &Config, which: Option<usize>) -> i32 {
    let workspace = Workspace::with_project_names(config.project_dir.clone(), false);
    let shown = |p: &std::path::Path| workspace.display(p);
    let stdout = std::io::stdout();
    let tty = std::io::IsTerminal::is_terminal(&stdout);
    let (text, code) = match which {
        None => (
            nib_files::undo::list(&config.state_dir, &config.project_dir, shown),
            0,
        ),
        // Nothing recorded is not a failure: there is nothing to put back.
        Some(_) if nib_files::undo::count(&config.state_dir, &config.project_dir) == 0 => (
            "Nothing to undo: nib has recorded no change in this project, so nothing was changed.\n"
                .to_string(),
            0,
        ),
        Some(n) => {
            let (text, all) = nib_files::undo::revert(
                &config.state_dir,
                &config.project_dir,
                &undo_floor(config),
                n,
                shown,
            );
            (text, i32::from(!all))
        }
    };
    let _ = stdout
        .lock()
        .write_all(crate::terminal::for_stream(&text, tty).as_bytes());
    code
}

/// The confinement `nib undo` adds of its own environment to the one each
/// change recorded (the stricter of the two applies).
pub fn undo_floor(config: &Config) -> nib_files::undo::Confinement {
    nib_files::undo::Confinement {
        sandbox: config.sandbox,
        confirm: config.confirm_outside_roots,
        roots: vec![config.project_dir.clone()],
    }
}

/// `nib undo --diff`: the newest change as a unified diff (files changed
/// since nib wrote them left out); exit 2 with a line on stderr when there
/// is none to show.
pub fn undo_diff(config: &Config) -> i32 {
    match nib_files::undo::latest_diff(
        &config.state_dir,
        &config.project_dir,
        &undo_floor(config),
        None,
        std::time::Duration::MAX,
    ) {
        Some(diff) => {
            let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
            let _ = std::io::stdout()
                .lock()
                .write_all(crate::terminal::for_stream(&diff, tty).as_bytes());
            0
        }
        None => fail("nib undo --diff: no change of nib's whose files still hold what it wrote"),
    }
}

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
    let ctx = Ctx {
        workspace: &workspace,
        agent: &agent,
        config: &config,
        scope,
        enforce_seen: false,
        live: None,
        programs: &crate::nibash::command_rules::JudgedPrograms,
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

/// The exit status of a tool's answer: `nib sh` the command's, `nib grep`
/// 0 for a match, 1 for none and 2 for an error (as grep and rg), every
/// other verb 1 for an error.
fn exit_status(name: &str, out: &nib_files::context::ToolOutput) -> i32 {
    match (out.exit, name) {
        (Some(code), _) => code.clamp(0, 255),
        (None, "grep") if out.is_error => 2,
        (None, _) => i32::from(out.is_error),
    }
}

/// A tool's answer in the command line's words, where the tool's own speak
/// to a model in an MCP session: a bad pattern's hint names `-F`, and a
/// stale tag's refusal says that each command starts afresh (an MCP session
/// remembers the versions it showed; a command keeps none).
fn cli_wording(name: &str, text: &str) -> String {
    match name {
        "grep" => text.replace(
            nib_files::tools::grep::LITERAL_HINT,
            "hint: pass -F (--fixed-strings) to search for the text as written",
        ),
        "edit" => {
            let mut out = String::with_capacity(text.len());
            let mut rest = text;
            while let Some(at) = rest.find(nib_files::tools::edit::NOT_SHOWN) {
                let after = &rest[at + nib_files::tools::edit::NOT_SHOWN.len()..];
                let tag_len = after
                    .bytes()
                    .take(4)
                    .take_while(u8::is_ascii_hexdigit)
                    .count();
                let (tag, tail) = after.split_at(tag_len);
                out.push_str(&rest[..at]);
                out.push_str(&format!(
                    "and each nib command starts afresh, keeping no earlier version to rebase #{tag} onto"
                ));
                rest = tail;
            }
            out.push_str(rest);
            out
        }
        _ => text.to_string(),
    }
}

fn fail(message: &str) -> i32 {
    let mut stderr = std::io::stderr().lock();
    let tty = std::io::IsTerminal::is_terminal(&stderr);
    let _ = writeln!(stderr, "{}", crate::terminal::for_stream(message, tty));
    2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn argument_errors_name_the_flag_the_person_typed() {
        let refusal = |args: &[&str]| match parse(&s(args)) {
            Ok(Command::Tool {
                call: ToolCall::Refused(_, message),
                ..
            }) => message,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(
            refusal(&["find", "--min-size", "lots"]),
            r#"--min-size is a size such as 20k or 1.5M, not "lots""#
        );
        assert!(refusal(&["find", "--sort", "name"]).starts_with("--sort is path, size"));
        assert!(refusal(&["find", "--newer", "soon"]).starts_with("--newer is an age"));
        assert!(refusal(&["grep", "--mode", "lines", "x"]).starts_with("--mode is \"files\""));
        assert!(
            refusal(&["sh", "--timeout", "forever", "true"]).starts_with("--timeout is seconds")
        );
    }

    #[test]
    fn parses_verbs() {
        assert_eq!(parse(&[]).unwrap(), Command::Serve(Vec::new()));
        assert_eq!(
            parse(&[
                "--provider".into(),
                "z=zemble".into(),
                "--provider=y=/bin/y".into()
            ])
            .unwrap(),
            Command::Serve(vec![
                ("z".into(), "zemble".into()),
                ("y".into(), "/bin/y".into())
            ])
        );
        assert!(parse(&["--provider".into(), "noequals".into()]).is_err());
        assert_eq!(parse(&s(&["--version"])).unwrap(), Command::Version);
        let mut read = ReadRequest::new(s(&["a:1-2", "b"]));
        read.options.plain = true;
        assert_eq!(
            parse(&s(&["read", "--plain", "a:1-2", "b"])).unwrap(),
            file_tool(FileRequest::Read(read))
        );
        assert!(parse(&s(&["read"])).is_err());
        assert!(parse(&s(&["write", "a", "b"])).is_err());
        assert!(parse(&s(&["frobnicate"])).is_err());
    }
}
