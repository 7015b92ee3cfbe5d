//! The worker side of nibash: what runs inside the sandbox for one call.
//!
//! `nib __nibash` is started by the broker through `nib-sandbox` with the
//! channel as fd 3. It builds a brush shell that starts afresh in the
//! project directory while it waits for the [`Request`] (a warm worker waits
//! long), registers nib's own commands
//! ([`own`]), the builtins that need the broker ([`builtins`]) and the deletes
//! that go to the trash ([`deletes`]), runs the
//! command line and reports [`Event::Done`]. Everything it starts inherits the
//! worker's confinement; it never touches the user's authority itself, it
//! asks the broker (trash, jobs of earlier calls).
//!
//! One worker runs one call, so the channel is a process-wide handle.

pub mod builtins;
pub mod deletes;
pub mod discarded;
pub mod git;
mod link;
pub mod listing;
pub mod own;
pub mod submodules;
pub mod system;
pub mod words;

use std::collections::HashMap;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;

use brush_builtins::BuiltinSet;
use brush_core::builtins::{CommandExecuteFunc, Registration};
use brush_core::{ProfileLoadBehavior, RcLoadBehavior, Shell, SourceInfo};

use super::channel::{Channel, Event, Request};

pub use super::channel::{NIBASH_ARG, ZYGOTE_ARG};
pub use link::Se;
use link::{FATAL, request, send, take_fatal_signal, to_model};

fn registration(f: CommandExecuteFunc<Se>) -> Registration<Se> {
    Registration {
        execute_func: f,
        content_func: |name, _, _| Ok(format!("{name}: nib's own command (see the nibash tool)\n")),
        disabled: false,
        special_builtin: false,
        declaration_builtin: false,
    }
}

/// The builtins of a nibash shell: brush's, with nib's own commands and the
/// broker-backed ones in place.
fn builtins() -> HashMap<String, Registration<Se>> {
    let mut m = brush_builtins::default_builtins::<Se>(BuiltinSet::BashMode);
    for name in own::NAMES {
        m.insert((*name).to_string(), registration(own::run));
    }
    for (name, f) in builtins::builtins() {
        m.insert(name.to_string(), registration(f));
    }
    m.insert("git".into(), registration(deletes::git));
    m.insert(discarded::BUILTIN.into(), registration(discarded_status));
    m.insert("find".into(), registration(deletes::find));
    m.insert("ls".into(), registration(ls));
    m.insert("git-each".into(), registration(git::each));
    m
}

/// Registers the programs `rules` forbid as builtins that refuse: they
/// answer first, whatever else is registered.
fn forbid(shell: &mut Shell<Se>, rules: &[super::channel::RuntimeRule]) {
    for rule in rules {
        for p in &rule.programs {
            shell.register_builtin(p.clone(), registration(forbidden));
        }
    }
}

/// `ls`: grouped by folder when its output goes to the model.
fn ls(
    ctx: brush_core::ExecutionContext<'_, Se>,
    args: Vec<brush_core::commands::CommandArg>,
) -> own::Answer<'_> {
    Box::pin(async move {
        let to_model = to_model(&ctx);
        let argv: Vec<String> = args.iter().map(ToString::to_string).collect();
        if to_model && let Some(done) = listing::ls(&ctx, argv.get(1..).unwrap_or_default()) {
            return Ok(done);
        }
        own::system(ctx, args).await
    })
}

/// `__nib_discarded N STATUS TESTED`: a command whose stderr went to a
/// capture ended with STATUS (TESTED 1: the script tests it); returns it
/// unchanged.
fn discarded_status(
    _ctx: brush_core::ExecutionContext<'_, Se>,
    args: Vec<brush_core::commands::CommandArg>,
) -> own::Answer<'_> {
    Box::pin(async move {
        let n = |i: usize| args.get(i).and_then(|a| a.to_string().parse::<i32>().ok());
        let status = n(2).unwrap_or(0);
        if let Some(index) = n(1).and_then(|i| usize::try_from(i).ok()) {
            discarded::record(index, status, n(3) == Some(1));
        }
        Ok(brush_core::ExecutionResult::new(
            u8::try_from(status & 0xff).unwrap_or(1),
        ))
    })
}

/// A program a rule forbids, started by name (however the name was built).
fn forbidden(
    ctx: brush_core::ExecutionContext<'_, Se>,
    args: Vec<brush_core::commands::CommandArg>,
) -> own::Answer<'_> {
    Box::pin(async move {
        use std::io::Write;
        let name = ctx.command_name.clone();
        let words: Vec<String> = args.iter().skip(1).map(ToString::to_string).collect();
        let joined = words.join(" ");
        let rule = request().and_then(|r| {
            r.rules.iter().find(|rule| {
                rule.programs.contains(&name)
                    && rule.args.as_deref().is_none_or(|re| {
                        // A rule whose regex does not compile refuses (fail closed).
                        regex::Regex::new(re).map_or(true, |re| re.is_match(&joined))
                    })
            })
        });
        match rule {
            Some(rule) => {
                let _ = writeln!(ctx.stderr(), "nibash: {}", rule.message);
                let mut r = brush_core::ExecutionResult::new(126);
                r.next_control_flow = brush_core::ExecutionControlFlow::ExitShell;
                Ok(r)
            }
            None => own::system(ctx, args).await,
        }
    })
}

/// When the call's request came: `$SECONDS` counts from it, as bash's
/// counts from `bash -c`'s start (the shell is made before the request).
static CALL_START: OnceLock<std::time::Instant> = OnceLock::new();

/// `$SECONDS`: whole seconds since the request came. Assigning to it does
/// nothing, as in brush.
fn seconds_variable() -> brush_core::ShellVariable {
    brush_core::ShellVariable::new(brush_core::ShellValue::Dynamic {
        getter: |_| {
            CALL_START
                .get()
                .map_or(0, |t| t.elapsed().as_secs())
                .to_string()
                .into()
        },
        setter: |_| (),
    })
}

/// Builds a nibash shell that starts in `cwd`, before its request: the
/// call adds what depends on the request ([`prepare`]).
pub async fn shell(cwd: &std::path::Path) -> Result<Shell<Se>, brush_core::Error> {
    let mut shell = Shell::builder()
        .builtins(builtins())
        .working_dir(cwd.to_path_buf())
        // `$0` as `bash -c` shows it: `$0 -c …` and re-exec idioms start bash.
        .shell_name("bash".to_string())
        .command_string_mode(true)
        .no_editing(true)
        // A pipeline's last stage runs in the shell, so `… | read v` sets v.
        .enable_shopt_option("lastpipe")
        .profile(ProfileLoadBehavior::Skip)
        .rc(RcLoadBehavior::Skip)
        .build()
        .await?;
    shell.env_mut().set_global("SECONDS", seconds_variable())?;
    Ok(shell)
}

/// Makes a shell built ahead ready for `req`: the shell itself when it
/// starts in the request's folder, else a new one; with the request's
/// forbidden programs in place.
async fn prepare(ready: Option<Shell<Se>>, req: &Request) -> Result<Shell<Se>, brush_core::Error> {
    let mut shell = match ready {
        Some(s) if s.working_dir() == req.cwd => s,
        _ => shell(&req.cwd).await?,
    };
    forbid(&mut shell, &req.rules);
    Ok(shell)
}

/// Parses and runs `true` in a shell of its own, which is then dropped: a
/// worker that waits for its request (a warm one) does it, so the call does
/// not pay for the first touch of the parser's and the interpreter's code
/// (page faults: about a quarter of a millisecond for `true`).
async fn rehearse(cwd: &std::path::Path) {
    let Ok(mut shell) = shell(cwd).await else {
        return;
    };
    let params = shell.default_exec_params();
    if let Ok(program) = shell.parse_string("true".to_string()) {
        let _ = shell.run_program(program, &params).await;
    }
}

/// Runs the request's command line; returns its exit status and whether
/// jobs it started with `&` still run.
async fn run(ready: Option<Shell<Se>>, req: &Request) -> (i32, bool, Option<String>) {
    let mut shell = match prepare(ready, req).await {
        Ok(s) => s,
        Err(e) => {
            complain(&format!("nibash: cannot start the shell: {e}"));
            return (125, false, None);
        }
    };
    let params = shell.default_exec_params();
    let mut captures = discarded::Captures::new(&std::env::temp_dir(), &req.mark);
    // Taken before anything runs, so they never end the worker unseen: a
    // handler of our own notes one at once (tokio's chains to it), and
    // tokio's wakes the call while it waits for a program.
    catch_fatal_signals();
    let mut fatal = FatalSignals::new();
    let mut signalled = None;
    if let Some(why) = nib_command_rules::extract::parser_trap(&req.command) {
        // brush-parser panics or runs out of memory on such text.
        complain(&format!("nibash: {why}; nothing ran"));
        return (2, false, None);
    }
    let result = match shell.parse_string(req.command.clone()) {
        Ok(mut program) => {
            captures.rewrite(&mut program);
            nib_command_rules::ast::walk(
                &mut program,
                &mut words::Words {
                    job: req.job,
                    names: &req.names,
                },
            );
            // Run as `bash -c` runs its string: a top-level frame (LINENO,
            // BASH_SOURCE, `caller`), then the EXIT trap however it ended.
            shell.start_command_string_mode();
            let result = tokio::select! {
                r = shell.run_program(program, &params) => r,
                s = fatal.next() => {
                    signalled = Some(s);
                    Ok(brush_core::ExecutionResult::new(0))
                }
            };
            let _ = shell.end_command_string_mode();
            result
        }
        // A parse error is reported as bash would.
        Err(_) => {
            let source = SourceInfo::from("nibash");
            shell
                .run_string(req.command.clone(), &source, &params)
                .await
        }
    };
    // `$?` in the EXIT trap: the line's status, or after a fatal signal the
    // status of the last command that ran (as in bash).
    let mut trap_status = None;
    let received = take_received_signal();
    if let Some(s) = take_fatal_signal() {
        signalled = Some(s);
        trap_status = Some(0);
    } else if signalled.is_none() {
        signalled = received;
    }
    if signalled.is_some() && trap_status.is_none() {
        trap_status = Some(i32::from(shell.last_exit_status()));
    }
    let mut code = match result {
        // A fatal signal (`kill $$`) ends the line as it ends bash: 128+N,
        // after the EXIT trap.
        _ if signalled.is_some() => 128 + signalled.unwrap_or(0),
        Ok(r) => i32::from(u8::from(r.exit_code)),
        Err(e) => {
            complain(&format!("nibash: {e}"));
            1
        }
    };
    // The EXIT trap runs on every way the command line ends (its end,
    // `exit`, `set -e`); `$?` in it is the line's status, and `exit` in it
    // sets the call's.
    if let Some(status) = run_exit_trap(&mut shell, trap_status.unwrap_or(code)).await {
        code = status;
    }
    let hidden = captures
        .report(code)
        .or_else(|| hidden_failure(&shell, code));
    // The job the line left is the call's: its status is the last
    // background command's, as `wait $!` would give it in bash.
    let mut last_job: Option<(usize, i32)> = None;
    let mut note = |id: usize, r: &brush_core::ExecutionResult| {
        if last_job.is_none_or(|(seen, _)| id > seen) {
            last_job = Some((id, i32::from(u8::from(r.exit_code))));
        }
    };
    if let Ok(ended) = shell.jobs_mut().poll() {
        for (job, result) in &ended {
            if let Ok(r) = result {
                note(job.id, r);
            }
        }
    }
    let background = !shell.jobs().jobs.is_empty();
    if background {
        // The broker answers the call now; the worker stays as the job.
        write_end_mark(req);
        send(&Event::Done {
            code,
            background,
            hidden: hidden.clone(),
            tmp_named: false,
        });
        for job in shell.jobs_mut().jobs.iter_mut() {
            if let Ok(r) = job.wait().await {
                note(job.id, &r);
            }
        }
        let _ = shell.jobs_mut().wait_all().await;
        // Background commands that failed with their stderr discarded are
        // named at the end of the job's output.
        if let Some(later) = captures.report(code).filter(|h| Some(h) != hidden.as_ref()) {
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "[{later}]");
            let _ = out.flush();
        }
    }
    let code = match last_job {
        Some((_, status)) if background => status,
        _ => code,
    };
    (code, background, hidden)
}

/// A fatal signal another process sent the shell, noted by the handler.
static RECEIVED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn note_received(signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    RECEIVED.store(signal, std::sync::atomic::Ordering::SeqCst);
}

/// Takes the fatal signals, so one that arrives while the line runs ends it
/// as it ends bash — when the running command is done, then the EXIT trap,
/// then 128+N — instead of killing the worker on the spot. Programs the
/// shell starts get the default actions back at exec.
#[allow(unsafe_code)]
fn catch_fatal_signals() {
    for signal in FATAL {
        // SAFETY: sigaction with a zeroed struct whose handler is a plain
        // `extern "C"` function that only stores to an atomic; the struct
        // lives across the call.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note_received as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// tokio's view of the same signals: it wakes the call while it waits.
struct FatalSignals(Vec<(i32, tokio::signal::unix::Signal)>);

impl FatalSignals {
    fn new() -> FatalSignals {
        use tokio::signal::unix::{SignalKind, signal};
        FatalSignals(
            FATAL
                .into_iter()
                .filter_map(|n| signal(SignalKind::from_raw(n)).ok().map(|s| (n, s)))
                .collect(),
        )
    }

    /// The next of them to arrive (never, when none could be taken).
    async fn next(&mut self) -> i32 {
        let signals = &mut self.0;
        std::future::poll_fn(move |cx| {
            for (n, s) in signals.iter_mut() {
                if let std::task::Poll::Ready(Some(())) = s.poll_recv(cx) {
                    return std::task::Poll::Ready(*n);
                }
            }
            std::task::Poll::Pending
        })
        .await
    }
}

fn take_received_signal() -> Option<i32> {
    match RECEIVED.swap(0, std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Runs the EXIT trap, if one is set, with `$?` the command line's status;
/// returns the status an `exit` in it chose.
async fn run_exit_trap(shell: &mut Shell<Se>, code: i32) -> Option<i32> {
    use brush_core::traps::TrapSignal;
    let handler = shell.traps().get_handler(TrapSignal::Exit).cloned()?;
    // Once only, as in bash (an `exit` inside does not run it again).
    shell.traps_mut().remove_handlers(TrapSignal::Exit);
    shell.set_last_exit_status(u8::try_from(code & 0xff).unwrap_or(1));
    let params = shell.default_exec_params();
    let result = shell
        .run_string(handler.command, &handler.source_info, &params)
        .await
        .ok()?;
    matches!(
        result.next_control_flow,
        brush_core::ExecutionControlFlow::ExitShell
    )
    .then(|| i32::from(u8::from(result.exit_code)))
}

/// The entries of the sandbox's private temp folder and their times, when
/// the worker's temp folder is that (see [`name_private_tmp`]).
fn private_tmp_entries(req: &Request) -> Vec<(std::ffi::OsString, std::time::SystemTime)> {
    if req.private_tmp.is_none() {
        return Vec::new();
    }
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir();
    // Only the folder's own file system: a root under /tmp is bound into
    // bubblewrap's /tmp, and its changes are the project's.
    let Ok(device) = std::fs::metadata(&dir).map(|m| m.dev()) else {
        return Vec::new();
    };
    std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let m = std::fs::symlink_metadata(e.path()).ok()?;
                    (m.dev() == device).then_some((e.file_name(), m.modified().ok()?))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Names what the call made or changed in the sandbox's private temp
/// folder (what it holds now against `before`), which the host's `/tmp`
/// does not show: a program writing `/tmp/x` under the sandbox otherwise
/// succeeds with no word of where `x` went.
fn name_private_tmp(req: &Request, before: &[(std::ffi::OsString, std::time::SystemTime)]) -> bool {
    let Some(fate) = &req.private_tmp else {
        return false;
    };
    let dir = std::env::temp_dir();
    let mut names: Vec<String> = private_tmp_entries(req)
        .into_iter()
        .filter(|entry| !before.contains(entry))
        .map(|(name, _)| dir.join(name).display().to_string())
        .collect();
    if names.is_empty() {
        return false;
    }
    names.sort();
    let more = names.len().saturating_sub(3);
    names.truncate(3);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "[sandbox: {}{more} went to nib's private /tmp, which the host's /tmp does not show; {fate}]",
        names.join(", ")
    );
    let _ = out.flush();
    true
}

/// Marks the end of the call's own output in the pipe (see `channel::end_mark`).
fn write_end_mark(req: &Request) {
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = out.flush();
    let _ = out.write_all(&super::channel::end_mark(&req.mark));
    let _ = out.flush();
}

/// A failure the exit status hides: an earlier stage of the last pipeline.
fn hidden_failure(shell: &Shell<Se>, code: i32) -> Option<String> {
    let statuses = shell.last_pipeline_statuses();
    if statuses.len() < 2 {
        return None;
    }
    let failed: Vec<String> = statuses[..statuses.len() - 1]
        .iter()
        .enumerate()
        .filter(|(_, s)| **s != 0)
        .map(|(i, s)| format!("stage {} exited {s}", i + 1))
        .collect();
    (!failed.is_empty()).then(|| {
        format!(
            "exit {code}, but an earlier pipeline stage failed: {}",
            failed.join(", ")
        )
    })
}

/// Reaps this process's children until none is left or `bound` has passed
/// (a child that never ends is then ended with the call, as before).
#[allow(unsafe_code)]
fn drain_children(bound: std::time::Duration) {
    let until = std::time::Instant::now() + bound;
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a valid pointer to a local; WNOHANG never blocks.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r > 0 {
            continue;
        }
        if r < 0 || std::time::Instant::now() >= until {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Closes the worker's stdout and stderr once the call's output is done: the
/// broker answers when the pipe's end is read, and need not wait for this
/// process's exit (its runtime and address space torn down) to read it.
#[allow(unsafe_code)]
fn release_output() {
    // SAFETY: close takes plain integers; stdout and stderr were flushed
    // and nothing in this process writes to them after the call's end.
    unsafe {
        libc::close(1);
        libc::close(2);
    }
}

/// Writes a line to the worker's stderr (which the broker shows).
fn complain(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// `nib __nibash`: the worker entry. Never returns.
#[allow(unsafe_code)]
pub fn main() -> ! {
    // The channel is the worker's alone: it moves from fd 3 (where the
    // sandbox put it) to a close-on-exec fd, so no program this call starts,
    // however it is started, inherits it.
    // SAFETY: fcntl and close take plain integers; the sandbox hands the
    // channel to the worker as fd 3 and nothing else in this process owns it.
    let fd = unsafe { libc::fcntl(3, libc::F_DUPFD_CLOEXEC, 64) };
    if fd < 0 {
        complain(&format!(
            "nibash: no channel to the broker: {}",
            std::io::Error::last_os_error()
        ));
        std::process::exit(125)
    }
    // SAFETY: fd 3 is ours (see above) and is not used after this.
    unsafe { libc::close(3) };
    // SAFETY: `fd` was just made by fcntl and nothing else owns it.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    let mut channel = match Channel::new(stream) {
        Ok(c) => c,
        Err(e) => {
            complain(&format!("nibash: no channel to the broker: {e}"));
            std::process::exit(125)
        }
    };
    // The runtime and the shell are made while the worker waits for its
    // request (a warm worker waits long before its call comes).
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            complain(&format!("nibash: cannot start: {e}"));
            std::process::exit(125)
        }
    };
    // A shell that cannot be made here is made again for the request, which
    // then says why.
    let cwd = std::env::current_dir().ok();
    let ready = cwd
        .as_ref()
        .and_then(|cwd| runtime.block_on(shell(cwd)).ok());
    if let Some(cwd) = cwd.filter(|_| !channel.has_message()) {
        runtime.block_on(rehearse(&cwd));
    }
    let req: Request = match channel.recv() {
        Ok(Some(r)) => r,
        Ok(None) => std::process::exit(125),
        Err(e) => {
            complain(&format!("nibash: bad request from the broker: {e}"));
            std::process::exit(125)
        }
    };
    let _ = CALL_START.set(std::time::Instant::now());
    let tmp_before = private_tmp_entries(&req);
    link::connect(channel, req.clone());
    let (code, background, hidden) = runtime.block_on(run(ready, &req));
    if !background {
        // Processes the line started and did not wait for (process
        // substitutions) finish writing before the end mark: their output
        // is the call's, as it would be under `bash -c`. brush's tasks wait
        // for them (and pass on what they print), so those tasks end first;
        // only then are leftovers reaped here. Reaping while a task still
        // waited took `>(cat)`'s status from it ("No child processes", about
        // one call in 25, seen with strace); ending the tasks instead lost
        // what they had not passed on yet.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while runtime.metrics().num_alive_tasks() > 0 && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if runtime.metrics().num_alive_tasks() == 0 {
            drain_children(until.saturating_duration_since(std::time::Instant::now()));
        }
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    if !background {
        let tmp_named = name_private_tmp(&req, &tmp_before);
        write_end_mark(&req);
        send(&Event::Done {
            code,
            background: false,
            hidden,
            tmp_named,
        });
        release_output();
    }
    std::process::exit(code)
}
