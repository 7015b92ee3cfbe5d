//! The arguments after the program name, read into a [`Command`]: each
//! verb's flags into the tool's typed request, as the MCP server parses a
//! client's arguments. A flag's value the tool cannot use becomes a
//! [`ToolCall::Refused`] (the tool's own reader words it); what is run, and
//! how it prints, is `run`'s and the other verbs' rooms'.

use crate::tools;
use crate::tools::nibash::{NibashRequest, SkimRequest};
use nib_files::context::args::ArgError;
use nib_files::tools::FileRequest;
use nib_files::tools::edit::EditRequest;
use nib_files::tools::find::{self, FindRequest, Sort};
use nib_files::tools::grep::{GrepRequest, Mode};
use nib_files::tools::read::ReadRequest;
use nib_files::tools::write::WriteRequest;

use super::command::{Command, ToolCall, UsageError};
use super::shape::Shape;
use super::usage::{USAGE, help_page, verb_usage};

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
