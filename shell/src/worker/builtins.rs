//! Builtins that change brush's behaviour to nibash's, inside the worker:
//!
//! - `cd`, `pushd`, `popd`: a failure ends the call unless the command line
//!   handles it (`if`, `&&`, `||`), as under `set -e`.
//! - `rm`, `unlink`, `trash`: deletes go to the user's trash, which the
//!   broker performs after its own path checks (the trash is outside the roots).
//! - `jobs`, `wait`, `kill`: `%N` names a job of an earlier call, which the
//!   broker holds; the shell's own jobs (started in this call) work as in bash.
//! - `hash -d`: named directories, kept by the broker across calls.
//! - `type`: nib's own commands name the system program they stand for.

use std::io::Write;
use std::path::PathBuf;

use brush_core::builtins::CommandExecuteFunc;
use brush_core::commands::CommandArg;
use brush_core::{ExecutionContext, ExecutionControlFlow, ExecutionResult};

use super::link::{Se, ask, original, send};
use super::own::Answer;
use crate::channel::{Ask, Event, Reply};

/// The builtins this module provides, by name.
pub fn builtins() -> Vec<(&'static str, CommandExecuteFunc<Se>)> {
    vec![
        ("cd", directory_change),
        ("pushd", directory_change),
        ("popd", directory_change),
        ("rm", remove),
        ("unlink", remove),
        ("trash", trash),
        ("jobs", job_control),
        ("wait", job_control),
        ("kill", job_control),
        ("hash", hash),
        ("type", type_),
        ("command", type_),
        ("enable", enable),
        ("compgen", compgen),
    ]
}

/// Whether a builtin is nib's own plumbing, never shown to a script.
fn internal(name: &str) -> bool {
    name.starts_with("__nib_")
}

/// `compgen`: brush's, with nib's own plumbing (`__nib_discarded`) left out
/// of what it lists.
fn compgen(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        use std::io::{Read, Seek};
        let Ok(fd) = rustix::fs::memfd_create("nib-compgen", rustix::fs::MemfdFlags::CLOEXEC)
        else {
            return call_original(ctx, args).await;
        };
        let mut listed = std::fs::File::from(fd);
        let Ok(copy) = listed.try_clone() else {
            return call_original(ctx, args).await;
        };
        let mut params = ctx.params.clone();
        params.set_fd(1, brush_core::openfiles::OpenFile::File(copy));
        let inner = ExecutionContext {
            shell: ctx.shell,
            command_name: ctx.command_name.clone(),
            params,
        };
        // Asked for builtins only (`-b`, `-A builtin`): nib's stand-ins for
        // programs are not bash builtins either.
        let argv = strings(&args);
        let builtins_only = argv.iter().skip(1).any(|a| a == "-b")
            || argv.windows(2).any(|w| w[0] == "-A" && w[1] == "builtin");
        let other_actions = argv.iter().skip(1).any(|a| {
            a.starts_with('-') && a.len() > 1 && a != "-b" && a != "-A" && !a.starts_with("-A")
        }) || argv.windows(2).any(|w| w[0] == "-A" && w[1] != "builtin");
        let result = call_original(inner, args).await?;
        let mut text = String::new();
        if listed.rewind().is_ok() {
            let _ = listed.read_to_string(&mut text);
        }
        let mut out = ctx.stdout();
        let stand_in = |l: &str| builtins_only && !other_actions && STAND_INS.contains(&l);
        for line in text.lines().filter(|l| !internal(l) && !stand_in(l)) {
            let _ = writeln!(out, "{line}");
        }
        Ok(result)
    })
}

fn strings(args: &[CommandArg]) -> Vec<String> {
    args.iter().map(ToString::to_string).collect()
}

async fn call_original(
    ctx: ExecutionContext<'_, Se>,
    args: Vec<CommandArg>,
) -> Result<ExecutionResult, brush_core::Error> {
    match original(&ctx.command_name) {
        Some(f) => f(ctx, args).await,
        None => super::own::system(ctx, args).await,
    }
}

fn directory_change(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let handled = ctx.params.suppress_errexit;
        let name = ctx.command_name.clone();
        let target = args.get(1).map(ToString::to_string).unwrap_or_default();
        let mut err = ctx.stderr();
        let mut result = match call_original(ctx, args).await {
            Ok(r) => r,
            Err(e) => {
                let why = match e.as_io_error() {
                    Some(io) if io.kind() == std::io::ErrorKind::NotFound => {
                        "No such file or directory".to_string()
                    }
                    Some(io) if io.kind() == std::io::ErrorKind::NotADirectory => {
                        "Not a directory".to_string()
                    }
                    Some(io) if io.kind() == std::io::ErrorKind::PermissionDenied => {
                        "Permission denied".to_string()
                    }
                    _ => e.to_string(),
                };
                let _ = writeln!(err, "{name}: {target}: {why}");
                ExecutionResult::new(1)
            }
        };
        if !result.is_success() && !handled {
            // As under set -e: a failed cd that nothing checks ends the call,
            // so later commands do not run in the wrong folder.
            let _ = writeln!(
                err,
                "[nibash: the call ends here: {name} failed and the command line does not handle it (use if, && or ||)]"
            );
            result.next_control_flow = ExecutionControlFlow::ExitShell;
        }
        Ok(result)
    })
}

fn reply(ctx: &ExecutionContext<'_, Se>, r: &Reply) -> ExecutionResult {
    if !r.out.is_empty() {
        let _ = ctx.stdout().write_all(r.out.as_bytes());
    }
    if !r.err.is_empty() {
        let _ = ctx.stderr().write_all(r.err.as_bytes());
    }
    ExecutionResult::new(u8::try_from(r.code).unwrap_or(1))
}

/// `rm [-rRfdv] [--] PATH…` and `unlink PATH`.
fn remove(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let argv = strings(&args);
        let (mut recursive, mut force) = (false, false);
        let mut paths: Vec<PathBuf> = Vec::new();
        let mut options_done = ctx.command_name == "unlink";
        for a in argv.iter().skip(1) {
            if !options_done && a == "--" {
                options_done = true;
            } else if !options_done && a.starts_with('-') && a.len() > 1 {
                for f in a[1..].chars() {
                    match f {
                        'r' | 'R' => recursive = true,
                        'f' => force = true,
                        'd' | 'v' | 'i' | 'I' => {}
                        _ if a.starts_with("--") => {}
                        _ => {
                            let _ = writeln!(
                                ctx.stderr(),
                                "{}: unknown option -{f}; nothing was removed",
                                ctx.command_name
                            );
                            return Ok(ExecutionResult::new(1));
                        }
                    }
                }
                if a == "--recursive" {
                    recursive = true;
                } else if a == "--force" {
                    force = true;
                }
            } else {
                paths.push(ctx.shell.absolute_path(a));
            }
        }
        if paths.is_empty() {
            if force {
                return Ok(ExecutionResult::success());
            }
            let _ = writeln!(ctx.stderr(), "{}: missing operand", ctx.command_name);
            return Ok(ExecutionResult::new(1));
        }
        let r = ask(Ask::Trash {
            paths,
            recursive,
            force,
        });
        Ok(reply(&ctx, &r))
    })
}

/// `trash list` and `trash restore [-f] PATH`.
fn trash(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let argv = strings(&args);
        let r = match argv.get(1).map(String::as_str) {
            None | Some("list") => ask(Ask::TrashList),
            Some("restore") => {
                let force = argv.iter().any(|a| a == "-f");
                match argv.iter().skip(2).find(|a| *a != "-f") {
                    Some(p) => ask(Ask::TrashRestore {
                        path: ctx.shell.absolute_path(p),
                        force,
                    }),
                    None => Reply {
                        err: "trash restore: which path? usage: trash restore [-f] PATH\n".into(),
                        code: 2,
                        ..Reply::default()
                    },
                }
            }
            Some(other) => Reply {
                err: format!(
                    "trash: unknown verb {other}; use trash list or trash restore [-f] PATH\n"
                ),
                code: 2,
                ..Reply::default()
            },
        };
        Ok(reply(&ctx, &r))
    })
}

/// `%N` arguments that name jobs of earlier calls (no job of this shell has
/// that number). This call's own number (what `$!` gives) means its latest
/// job and is turned into `%+`.
fn broker_jobs(ctx: &mut ExecutionContext<'_, Se>, args: &mut [CommandArg]) -> Vec<u32> {
    let own = super::link::request().map(|r| r.job);
    let mut ids = Vec::new();
    for a in args.iter_mut().skip(1) {
        let text = a.to_string();
        if let Some(n) = text.strip_prefix('%').and_then(|n| n.parse::<u32>().ok())
            && ctx.shell.jobs_mut().resolve_job_spec(&text).is_none()
        {
            if Some(n) == own {
                *a = CommandArg::String("%+".into());
            } else {
                ids.push(n);
            }
        }
    }
    ids
}

fn job_control(mut ctx: ExecutionContext<'_, Se>, mut args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let theirs = broker_jobs(&mut ctx, &mut args);
        let argv = strings(&args);
        let own_jobs = !ctx.shell.jobs().jobs.is_empty();
        let job_args = argv.iter().skip(1).filter(|a| !a.starts_with('-')).count();
        match ctx.command_name.as_str() {
            "jobs" => {
                let mut code = 0;
                if own_jobs {
                    code = u8::from(
                        call_original(ctx_reborrow(&mut ctx), args.clone())
                            .await?
                            .exit_code,
                    );
                }
                let r = ask(Ask::Jobs);
                let rc = reply(&ctx, &r);
                Ok(ExecutionResult::new(code.max(u8::from(rc.exit_code))))
            }
            "wait"
                if theirs.is_empty()
                    && job_args > 0
                    && argv.iter().skip(1).all(|a| {
                        a.starts_with('%') && ctx.shell.jobs_mut().resolve_job_spec(a).is_some()
                    }) =>
            {
                // Jobs of this call: wait for each and, as bash does, take
                // the status of the last one (brush's `wait %N` drops it).
                let mut status = ExecutionResult::success();
                for spec in argv.iter().skip(1) {
                    if let Some(job) = ctx.shell.jobs_mut().resolve_job_spec(spec) {
                        status = ExecutionResult::new(u8::from(job.wait().await?.exit_code));
                    }
                }
                Ok(status)
            }
            "wait" if !theirs.is_empty() || (job_args == 0 && !own_jobs) => {
                let r = ask(Ask::Wait { jobs: theirs });
                Ok(reply(&ctx, &r))
            }
            "kill" if !theirs.is_empty() => {
                let signal = kill_signal(&argv);
                let r = ask(Ask::Kill {
                    jobs: theirs,
                    signal,
                });
                Ok(reply(&ctx, &r))
            }
            "kill" if kills_self(&argv).is_some() => {
                // `kill $$` with a signal that ends bash: bash dies at once
                // (after its EXIT trap) with 128+N. The worker's own process
                // is this shell, so end the command line the same way.
                let signal = kills_self(&argv).unwrap_or(libc::SIGTERM);
                super::link::note_fatal_signal(signal);
                let mut r = ExecutionResult::new(u8::try_from(128 + signal).unwrap_or(255));
                r.next_control_flow = brush_core::ExecutionControlFlow::ExitShell;
                Ok(r)
            }
            "kill" if argv.get(1).is_some_and(|a| a == "-0" || a == "-s0") => {
                // `kill -0 PID…`: whether each process exists and may be
                // signalled (brush's kill does not know signal 0).
                let mut code = 0;
                for a in argv.iter().skip(2) {
                    let ok = if a.starts_with('%') {
                        // `$!` is a job spec in nibash: a job of this call.
                        ctx.shell.jobs_mut().resolve_job_spec(a).is_some()
                    } else {
                        a.parse::<i32>().is_ok_and(may_signal)
                    };
                    if !ok {
                        let _ = writeln!(ctx.stderr(), "kill: ({a}) - No such process");
                        code = 1;
                    }
                }
                Ok(ExecutionResult::new(code))
            }
            "kill"
                if argv.iter().skip(1).any(|a| {
                    a.starts_with('%') && ctx.shell.jobs_mut().resolve_job_spec(a).is_some()
                }) =>
            {
                // brush runs `cmd &` as a task of the shell and signals jobs
                // through process groups, which a non-interactive shell does
                // not make: end the processes the call's jobs started (every
                // descendant of the shell, as only jobs run beside a builtin).
                let signal = kill_signal(&argv);
                // A job started just before may not have started its program
                // yet: look again for a while. And a child signalled between
                // its fork and its exec runs the shell's own handler and
                // loses the signal: whoever has exec'd since is signalled
                // again.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                let mut pause = std::time::Duration::from_millis(2);
                let mut forks = signal_descendants(signal);
                let mut n = forks.len();
                while n == 0 && std::time::Instant::now() < deadline {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_millis(50));
                    forks = signal_descendants(signal);
                    n = forks.len();
                }
                let own = std::fs::read_link("/proc/self/exe").ok();
                forks.retain(|s| s.exe == own);
                while !forks.is_empty() && std::time::Instant::now() < deadline {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    forks.retain(|s| {
                        match std::fs::read_link(format!("/proc/{}/exe", s.host_pid)) {
                            Ok(exe) if Some(&exe) == own.as_ref() => true,
                            Ok(_) => {
                                // SAFETY: kill(2) with plain integers: a descendant read from /proc.
                                #[allow(unsafe_code)]
                                let _ = unsafe { libc::kill(s.pid, signal) };
                                false
                            }
                            Err(_) => false,
                        }
                    });
                }
                if n == 0 {
                    let _ = writeln!(ctx.stderr(), "kill: the job has no process left to signal");
                    return Ok(ExecutionResult::new(1));
                }
                Ok(ExecutionResult::success())
            }
            _ => call_original(ctx, args).await,
        }
    })
}

/// A descendant that was sent a signal: its pid in /proc and in our
/// namespace, and its program when it was signalled.
struct Signalled {
    host_pid: u32,
    pid: i32,
    exe: Option<std::path::PathBuf>,
}

/// Sends `signal` to every descendant of this process; returns them.
fn signal_descendants(signal: i32) -> Vec<Signalled> {
    // Our pid as the mounted /proc numbers it (outside bubblewrap the worker
    // has its own PID namespace but sees the host's /proc).
    let Some(me) = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str().and_then(|s| s.parse::<u32>().ok()))
    else {
        return Vec::new();
    };
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The parent pid is the second field after the command's closing parenthesis.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut tree = vec![me];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    let mut sent = Vec::new();
    for host_pid in tree.into_iter().skip(1) {
        // kill(2) takes the pid of our own namespace: the last NSpid entry.
        let pid = std::fs::read_to_string(format!("/proc/{host_pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("NSpid:"))
                    .and_then(|v| v.split_whitespace().last().map(str::to_string))
            })
            .and_then(|v| v.parse::<i32>().ok());
        let Some(pid) = pid else { continue };
        let exe = std::fs::read_link(format!("/proc/{host_pid}/exe")).ok();
        // SAFETY: kill(2) with plain integers; the pids are this shell's own
        // descendants, read from /proc just now.
        #[allow(unsafe_code)]
        let sent_one = unsafe { libc::kill(pid, signal) } == 0;
        if sent_one {
            sent.push(Signalled { host_pid, pid, exe });
        }
    }
    sent
}

fn ctx_reborrow<'a>(ctx: &'a mut ExecutionContext<'_, Se>) -> ExecutionContext<'a, Se> {
    ExecutionContext {
        shell: ctx.shell,
        command_name: ctx.command_name.clone(),
        params: ctx.params.clone(),
    }
}

/// The signal of `kill [-SIG | -s SIG | -n N] PID…` when its only target is
/// this shell and the signal is one that ends bash after its EXIT trap.
fn kills_self(argv: &[String]) -> Option<i32> {
    let mut signal = libc::SIGTERM;
    let mut targets = Vec::new();
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-s" | "-n" => signal = signal_number(it.next()?)?,
            "--" => targets.extend(it.by_ref().cloned()),
            _ if a.starts_with('-') && targets.is_empty() => signal = signal_number(&a[1..])?,
            _ => targets.push(a.clone()),
        }
    }
    let me = std::process::id().to_string();
    (!targets.is_empty()
        && targets.iter().all(|t| *t == me)
        && super::link::FATAL.contains(&signal))
    .then_some(signal)
}

/// Whether process `pid` exists and this shell may signal it (`kill -0`).
#[allow(unsafe_code)]
fn may_signal(pid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 sends nothing; it takes plain integers.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// The signal `kill -SIG …` names (default TERM).
fn kill_signal(argv: &[String]) -> i32 {
    argv.iter()
        .skip(1)
        .find_map(|a| a.strip_prefix('-'))
        .and_then(signal_number)
        .unwrap_or(libc::SIGTERM)
}

fn signal_number(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse() {
        return Some(n);
    }
    let name = s.strip_prefix("SIG").unwrap_or(s);
    Some(match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "KILL" => libc::SIGKILL,
        "TERM" => libc::SIGTERM,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "STOP" => libc::SIGSTOP,
        "CONT" => libc::SIGCONT,
        _ => return None,
    })
}

/// `hash -d [name=dir]…`; other uses of hash are brush's.
fn hash(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let argv = strings(&args);
        if argv.get(1).map(String::as_str) != Some("-d") {
            return call_original(ctx, args).await;
        }
        let defs = &argv[2..];
        if defs.iter().any(|d| !d.contains('=')) {
            // `hash -d NAME`: bash's meaning (forget a remembered command).
            return call_original(ctx, args).await;
        }
        if defs.is_empty() {
            let names = super::link::request()
                .map(|r| r.names.clone())
                .unwrap_or_default();
            let mut out = ctx.stdout();
            for (name, dir) in names {
                let _ = writeln!(out, "hash -d {name}={}", dir.display());
            }
            return Ok(ExecutionResult::success());
        }
        // The broker's table, to say at once what it would refuse (it
        // checks again: the worker is not trusted).
        let sources = super::link::request()
            .map(|r| r.name_sources.clone())
            .unwrap_or_default();
        let mut table = nib_files::names::Names::from_pairs(
            super::link::request()
                .map(|r| &r.names)
                .into_iter()
                .flatten(),
            &sources,
        );
        for d in defs {
            let Some((name, dir)) = d.split_once('=') else {
                let _ = writeln!(ctx.stderr(), "hash -d: {d}: expected name=dir");
                return Ok(ExecutionResult::new(1));
            };
            let dir = ctx.shell.absolute_path(dir);
            if name.is_empty() || !dir.is_dir() {
                let _ = writeln!(
                    ctx.stderr(),
                    "hash -d: {}: not a folder; no name was defined",
                    dir.display()
                );
                return Ok(ExecutionResult::new(1));
            }
            if let Err(why) = table.define(name, &dir, nib_files::names::Source::Hash) {
                let _ = writeln!(ctx.stderr(), "hash -d: {why}");
                return Ok(ExecutionResult::new(1));
            }
            send(&Event::Name {
                name: name.to_string(),
                dir,
            });
        }
        Ok(ExecutionResult::success())
    })
}

/// `enable`: nib's stand-ins are not shell builtins to scripts that ask
/// (bash has none of that name); everything else is brush's.
fn enable(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let argv = strings(&args);
        let (flags, names): (Vec<&String>, Vec<&String>) =
            argv.iter().skip(1).partition(|a| a.starts_with('-'));
        let letters: String = flags.iter().flat_map(|f| f.chars().skip(1)).collect();
        if !letters.chars().all(|c| "anps".contains(c)) {
            return call_original(ctx, args).await;
        }
        let hidden = |n: &str| {
            STAND_INS.contains(&n)
                || internal(n)
                || super::link::request().is_some_and(|r| {
                    r.rules
                        .iter()
                        .any(|rule| rule.programs.iter().any(|p| p == n))
                })
        };
        if !names.is_empty() {
            if names.iter().all(|n| !hidden(n)) {
                return call_original(ctx, args).await;
            }
            let mut code = 0;
            for n in names {
                if hidden(n) {
                    let _ = writeln!(ctx.stderr(), "enable: {n}: not a shell builtin");
                    code = 1;
                }
            }
            return Ok(ExecutionResult::new(code));
        }
        let mut listed: Vec<(&String, bool, bool)> = ctx
            .shell
            .builtins()
            .iter()
            .filter(|(name, _)| !hidden(name))
            .map(|(name, reg)| (name, reg.disabled, reg.special_builtin))
            .collect();
        listed.sort();
        let mut out = ctx.stdout();
        for (name, disabled, special) in listed {
            if (letters.contains('n') && !disabled)
                || (letters.contains('a') && !letters.contains('n') && disabled)
                || (letters.contains('s') && !special)
            {
                continue;
            }
            let prefix = if disabled { "-n " } else { "" };
            let _ = writeln!(out, "enable {prefix}{name}");
        }
        Ok(ExecutionResult::success())
    })
}

/// Builtins that stand in for a system program of the same name.
const STAND_INS: &[&str] = &[
    "cat", "head", "tail", "grep", "egrep", "fgrep", "rg", "sed", "cut", "wc", "rm", "unlink",
    "git", "find", "ls",
];

/// `type` and `command -v/-V`: nib's stand-ins are described as the system
/// program they stand in for (a path on PATH, kind `file`), so scripts that
/// take a program's path from them work as under bash; other names go to
/// brush's own builtin.
fn type_(mut ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let argv = strings(&args);
        let is_command = ctx.command_name == "command";
        if is_command && let Some(at) = standard_run(&argv) {
            return command_standard(ctx, args, at).await;
        }
        let (flags, names): (Vec<&String>, Vec<&String>) = argv
            .iter()
            .skip(1)
            .partition(|a| a.starts_with('-') && a.len() > 1);
        let letters: String = flags.iter().flat_map(|f| f.chars().skip(1)).collect();
        let known = if is_command { "vVp" } else { "tpPaf" };
        if names.is_empty()
            || !names.iter().any(|n| STAND_INS.contains(&n.as_str()))
            || !letters.chars().all(|c| known.contains(c))
            || (is_command && !letters.contains('v') && !letters.contains('V'))
        {
            return call_original(ctx, args).await;
        }
        let mut code = 0;
        for n in names {
            if !STAND_INS.contains(&n.as_str()) {
                let mut one: Vec<CommandArg> = vec![args[0].clone()];
                one.extend(flags.iter().map(|f| CommandArg::String((*f).clone())));
                one.push(CommandArg::String(n.clone()));
                let r = call_original(ctx_reborrow(&mut ctx), one).await?;
                if u8::from(r.exit_code) != 0 {
                    code = 1;
                }
                continue;
            }
            let hashed = ctx.shell.program_location_cache().get(n.as_str());
            let paths: Vec<std::path::PathBuf> = if is_command && letters.contains('p') {
                standard_program(n).into_iter().collect()
            } else if letters.contains('a') {
                ctx.shell.find_executables_in_path(n).collect()
            } else {
                // The hashed path when there is one; looking does not hash
                // (bash hashes a program when it runs it).
                hashed
                    .clone()
                    .or_else(|| ctx.shell.find_first_executable_in_path(n))
                    .into_iter()
                    .collect()
            };
            if paths.is_empty() {
                if !letters.contains('t') && !letters.contains('p') && !letters.contains('v') {
                    let _ = writeln!(ctx.stderr(), "{}: {n}: not found", ctx.command_name);
                }
                code = 1;
                continue;
            }
            for p in paths {
                let line = if letters.contains('t') {
                    "file".to_string()
                } else if is_command && letters.contains('V') {
                    if hashed.as_ref() == Some(&p) && !letters.contains('p') {
                        format!("{n} is hashed ({})", p.display())
                    } else {
                        format!("{n} is {}", p.display())
                    }
                } else if letters.contains('v') || letters.contains('p') || letters.contains('P') {
                    p.display().to_string()
                } else if hashed.as_ref() == Some(&p) && !letters.contains('a') {
                    format!("{n} is hashed ({})", p.display())
                } else {
                    format!("{n} is {}", p.display())
                };
                let _ = writeln!(ctx.stdout(), "{line}");
            }
        }
        Ok(ExecutionResult::new(code))
    })
}

/// The system program `name` on the standard PATH (confstr's `_CS_PATH`,
/// `/bin:/usr/bin` on glibc), as bash's `command -p` looks for it.
fn standard_program(name: &str) -> Option<PathBuf> {
    let dirs = brush_core::sys::fs::get_default_standard_utils_paths();
    brush_core::pathsearch::search_for_executable(dirs.iter(), name).next()
}

/// Where the command word of `command -p [-p…] [--] NAME ARGS…` is, when
/// NAME is one of nib's stand-ins and the command is to run (no `-v`/`-V`).
fn standard_run(argv: &[String]) -> Option<usize> {
    let mut at = 1;
    let mut standard = false;
    while let Some(a) = argv.get(at) {
        if a == "--" {
            at += 1;
            break;
        }
        if !a.starts_with('-') || a.len() < 2 {
            break;
        }
        if !a.chars().skip(1).all(|c| c == 'p') {
            return None;
        }
        standard = true;
        at += 1;
    }
    let name = argv.get(at)?;
    (standard && STAND_INS.contains(&name.as_str())).then_some(at)
}

/// `command -p NAME ARGS…` for a stand-in: NAME is looked for on the
/// standard PATH, whatever PATH holds, as bash does. Where PATH finds the
/// same program, nib's stand-in runs (its answer is the same program's);
/// otherwise the standard one runs, or the command is not found (127).
async fn command_standard(
    ctx: ExecutionContext<'_, Se>,
    args: Vec<CommandArg>,
    at: usize,
) -> Result<ExecutionResult, brush_core::Error> {
    let words: Vec<CommandArg> = args.get(at..).unwrap_or_default().to_vec();
    let name = words.first().map(ToString::to_string).unwrap_or_default();
    let Some(standard) = standard_program(&name) else {
        let _ = writeln!(ctx.stderr(), "nibash: {name}: command not found");
        return Ok(ExecutionResult::new(127));
    };
    let on_path = ctx.shell.find_first_executable_in_path(&name);
    let same = on_path
        .is_some_and(|p| std::fs::canonicalize(&p).ok() == std::fs::canonicalize(&standard).ok());
    let (command, argv0) = if same {
        (name.clone(), None)
    } else {
        (standard.to_string_lossy().into_owned(), Some(name))
    };
    let mut cmd = brush_core::commands::SimpleCommand::new(
        brush_core::commands::ShellForCommand::ParentShell(ctx.shell),
        ctx.params,
        command,
        words,
    );
    cmd.argv0 = argv0;
    cmd.use_functions = false;
    let spawned = cmd.execute().await?;
    let waited = spawned.wait().await?;
    Ok(waited.into())
}
