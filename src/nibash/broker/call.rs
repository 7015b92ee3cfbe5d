//! One nibash call on the broker side.
//!
//! Start the worker (`nib __nibash`) confined by `nib-sandbox` with the
//! channel as fd 3 and stdout/stderr on one pipe; send the [`Request`]; then
//! one consumer takes everything that happens — output, channel events, the
//! worker's end — in order, from one queue fed by three small threads. The
//! call answers when the command line is done; at its timeout (or at once
//! for `background: true`) the consumer moves to a thread of its own and the
//! call stays as job `%N`.
//!
//! Seen rows the worker reports are checked against the file before they
//! count: the broker reads the file itself and compares the tag.

use crate::confinement::Confinement;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant, SystemTime};

use super::Nibash;
use super::cut;
use super::jobs::{Entry, ending_words};
use super::warm::Started;
use nib_files::context::{Ctx, ToolOutput};
use nib_files::fs::Scope;
use nib_files::workspace::Workspace;
use nib_shell::channel::{Ask, Channel, Event, Reply, Request, end_mark};
use nib_text::hashline::Tag;
use nib_text::text::Text;

/// The default timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest timeout.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// How long the answer waits for the rest of the output after the command
/// line is done (a process it left may still hold the pipe).
const DRAIN_GRACE: Duration = Duration::from_millis(300);
/// Output (kept and dropped) past which a call or job is stopped.
const OUTPUT_STOP: usize = 64 << 20;

/// How often a running call reports progress (when the client asked).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The last non-empty line of some output, for progress messages.
fn last_line(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(&output[output.len().saturating_sub(4096)..]);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}

/// What the agent asked to run.
#[derive(Clone, Debug)]
pub struct CallArgs {
    /// The command line.
    pub command: String,
    /// What it is for, in the agent's words.
    pub description: Option<String>,
    /// What the agent expects to learn (steers which rows of long output stay).
    pub expect: Option<String>,
    /// When it turns into a job.
    pub timeout: Duration,
    /// Start it as a job at once.
    pub background: bool,
}

enum Msg {
    Out(Vec<u8>),
    Eof,
    Event(Event),
    Exit(i32),
    /// The client cancelled the call: end its whole tree.
    Cancel,
    /// The worker's end mark: the call's output is all read.
    Mark,
}

/// Answers what a worker asks: trash and jobs.
struct Asker {
    scope: Scope,
    nib: Arc<Nibash>,
    workspace: Workspace,
    trashed: Vec<PathBuf>,
}

/// Whether `name` may name a folder (what `hash -d name=dir` accepts).
fn name_is_valid(name: &str) -> bool {
    nib_files::names::valid_name(name)
}

impl Asker {
    /// Whether `dir` is a folder the call's scope reaches (absolute, no
    /// control characters).
    fn is_folder(&self, dir: &Path) -> bool {
        dir.is_absolute()
            && !dir.to_string_lossy().chars().any(char::is_control)
            && nib_files::fs::stat(&self.scope, dir)
                .is_ok_and(|s| s.kind == nib_files::fs::Kind::Dir)
    }

    fn answer(&mut self, ask: Ask, deadline: Option<Instant>) -> Reply {
        match ask {
            Ask::Trash {
                paths,
                recursive,
                force,
            } => self.trash(&paths, recursive, force),
            Ask::TrashList => match nib_files::fs::trash::list_beneath(&self.workspace.roots()) {
                Ok(items) if items.is_empty() => Reply {
                    out: "the trash holds nothing from this project's roots\n".into(),
                    ..Reply::default()
                },
                Ok(items) => Reply {
                    out: items
                        .iter()
                        .map(|t| {
                            format!("{}  {}\n", t.deleted, self.workspace.display(&t.original))
                        })
                        .collect(),
                    ..Reply::default()
                },
                Err(e) => Reply {
                    err: format!("trash list: {e}\n"),
                    code: 1,
                    ..Reply::default()
                },
            },
            Ask::TrashRestore { path, force } => {
                match nib_files::fs::restore_entry(&self.scope, &path, force) {
                    Ok(()) => Reply {
                        out: format!("restored {}\n", self.workspace.display(&path)),
                        ..Reply::default()
                    },
                    Err(nib_files::fs::FsError::NotFound) => Reply {
                        err: format!(
                            "trash restore: {} is not in the trash (or its folder is gone); trash list shows what is\n",
                            self.workspace.display(&path)
                        ),
                        code: 1,
                        ..Reply::default()
                    },
                    Err(e) => Reply {
                        err: format!(
                            "trash restore: {}: {e}; nothing was restored\n",
                            self.workspace.display(&path)
                        ),
                        code: 1,
                        ..Reply::default()
                    },
                }
            }
            Ask::Jobs => Reply {
                out: self
                    .nib
                    .jobs
                    .jobs()
                    .iter()
                    .map(|e| {
                        let s = e.state();
                        format!(
                            "[%{}] {} {}s  {}\n",
                            e.id,
                            if s.ended() {
                                ending_words(&s)
                            } else {
                                "running".into()
                            },
                            e.age().as_secs(),
                            e.command
                        )
                    })
                    .collect(),
                ..Reply::default()
            },
            Ask::Wait { jobs } => self.wait(jobs, deadline),
            Ask::Kill { jobs, signal: _ } => {
                let mut r = Reply::default();
                for id in jobs {
                    match self.nib.jobs.get(id) {
                        Some(e) if e.kill() => r.out.push_str(&format!("[job %{id} killed]\n")),
                        Some(_) => r.out.push_str(&format!("[job %{id} had already ended]\n")),
                        None => {
                            r.err.push_str(&format!("kill: %{id}: no such job\n"));
                            r.code = 1;
                        }
                    }
                }
                r
            }
        }
    }

    fn trash(&mut self, paths: &[PathBuf], recursive: bool, force: bool) -> Reply {
        let mut r = Reply::default();
        for p in paths {
            match nib_files::fs::trash_entry(&self.scope, p, recursive) {
                Ok(()) => self.trashed.push(p.clone()),
                Err(nib_files::fs::FsError::NotFound) if force => {}
                Err(nib_files::fs::FsError::IsDirectory) => {
                    r.err.push_str(&format!(
                        "rm: cannot remove '{}': is a folder (rm -r moves it to the trash); nothing else changed\n",
                        self.workspace.display(p)
                    ));
                    r.code = 1;
                }
                Err(e) => {
                    r.err.push_str(&format!(
                        "rm: cannot remove '{}': {e}\n",
                        self.workspace.display(p)
                    ));
                    r.code = 1;
                }
            }
        }
        r
    }

    fn wait(&mut self, ids: Vec<u32>, deadline: Option<Instant>) -> Reply {
        let entries: Vec<Arc<Entry>> = if ids.is_empty() {
            self.nib.jobs.jobs()
        } else {
            let mut v = Vec::new();
            for id in &ids {
                match self.nib.jobs.get(*id) {
                    Some(e) => v.push(e),
                    None => {
                        return Reply {
                            err: format!("wait: %{id}: no such job (jobs lists them)\n"),
                            code: 127,
                            ..Reply::default()
                        };
                    }
                }
            }
            v
        };
        let mut r = Reply::default();
        for e in entries {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let ended = e.wait_for(left, |s| s.ended());
            let mut s = e.state();
            let from = s.shown.min(s.output.len());
            r.out.push_str(&String::from_utf8_lossy(&s.output[from..]));
            if !r.out.is_empty() && !r.out.ends_with('\n') {
                r.out.push('\n');
            }
            s.shown = s.output.len();
            if ended {
                s.reported = true;
                r.out.push_str(&format!(
                    "[job %{} {}: {}]\n",
                    e.id,
                    ending_words(&s),
                    e.command
                ));
                r.code = s.code().unwrap_or(0);
                drop(s);
                self.nib.jobs.remove(e.id);
            } else {
                r.out.push_str(&format!(
                    "[job %{} is still running after {}s: {}]\n",
                    e.id,
                    e.age().as_secs(),
                    e.command
                ));
                r.code = 0;
            }
        }
        r
    }
}

/// Rows a worker printed as anchors: path, tag, line ranges.
type SeenReport = (PathBuf, String, Vec<(usize, usize)>);

/// Takes everything a worker does, in order.
struct Consumer {
    entry: Arc<Entry>,
    rx: Receiver<Msg>,
    replies: Option<Channel>,
    asker: Asker,
    seen: Vec<SeenReport>,
    /// Whole outputs of reshaped commands: (command, text).
    wholes: Vec<(String, String)>,
    /// One of them left out something that matters.
    wholes_named: bool,
    done_at: Option<Instant>,
    cancelled: bool,
    /// Execs the call's tree was refused (while program rules exist).
    exec_log: Option<nib_sandbox::ExecLog>,
    /// How many of them the call's answer named (a job names the rest);
    /// `None` while the call has not answered.
    refusals_shown: Option<usize>,
    /// The paths programs could not change in this call (bound read-only):
    /// the sweep at the end leaves them alone.
    held: Vec<PathBuf>,
}

impl Consumer {
    /// Handles one message, waiting at most until `until`. Returns false when
    /// nothing more can come.
    fn step(&mut self, until: Option<Instant>, deadline: Option<Instant>) -> bool {
        let msg = match until {
            None => match self.rx.recv() {
                Ok(m) => m,
                Err(_) => return false,
            },
            Some(t) => match self
                .rx
                .recv_timeout(t.saturating_duration_since(Instant::now()))
            {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => return true,
                Err(RecvTimeoutError::Disconnected) => return false,
            },
        };
        self.handle(msg, deadline);
        true
    }

    fn handle(&mut self, msg: Msg, deadline: Option<Instant>) {
        self.take(msg, deadline);
        // The command line is done only when the worker said so on the
        // channel *and* its end mark came through the pipe: neither a
        // program's output nor a lone event can end a call. From then on
        // the answer waits (a short grace at most) for processes that still
        // hold the pipe to finish writing.
        if self.done_at.is_none() && self.entry.state().command_done() {
            self.done_at = Some(Instant::now());
        }
    }

    fn take(&mut self, msg: Msg, deadline: Option<Instant>) {
        match msg {
            Msg::Out(b) => {
                let mut over = false;
                self.entry.update(|s| {
                    s.append(&b);
                    over = s.output.len() + s.dropped > OUTPUT_STOP && !s.flooded;
                    if over {
                        s.flooded = true;
                    }
                });
                if over {
                    // A program that floods its output is stopped, as the
                    // sandbox stops one that passes its cap.
                    self.entry.kill();
                }
            }
            Msg::Eof => self.entry.update(|s| s.eof = true),
            Msg::Mark => self.entry.update(|s| s.marked = true),
            Msg::Exit(code) => {
                // A job's tree is gone: the execs refused after its call
                // answered end its output, before it counts as ended.
                if let (Some(shown), Some(log)) = (self.refusals_shown, &self.exec_log) {
                    let all = log.refusals();
                    let later = exec_refusals(all.get(shown..).unwrap_or_default());
                    if !later.is_empty() {
                        self.entry.update(|s| s.append(later.as_bytes()));
                    }
                }
                self.entry.record_exit(code)
            }
            Msg::Cancel => {
                self.cancelled = true;
                self.entry.kill();
            }
            Msg::Event(Event::Seen { path, tag, lines }) => self.seen.push((path, tag, lines)),
            Msg::Event(Event::Whole {
                command,
                text,
                named,
            }) => {
                self.wholes_named |= named;
                // Bounded like the call's own output.
                let kept: usize = self.wholes.iter().map(|(_, t)| t.len()).sum();
                if kept + text.len() <= OUTPUT_STOP {
                    self.wholes.push((command, text));
                }
            }
            Msg::Event(Event::Name { name, dir }) => {
                // Untrusted like every event: a name nib would accept from
                // `hash -d`, for a folder the call's scope can reach.
                if name_is_valid(&name) && self.asker.is_folder(&dir) {
                    // A conflict keeps the first definition; the worker
                    // already told the agent what it defined.
                    let _ = self.asker.workspace.define_name(
                        &name,
                        &dir,
                        nib_files::names::Source::Hash,
                    );
                }
            }
            Msg::Event(Event::Done {
                code,
                background,
                hidden,
                tmp_named,
            }) => {
                if tmp_named {
                    self.asker
                        .nib
                        .tmp_named
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                self.entry.update(|s| {
                    s.done = Some(code);
                    s.background = background;
                    s.hidden = hidden;
                });
            }
            Msg::Event(Event::Ask { id, ask }) => {
                let mut reply = self.asker.answer(ask, deadline);
                reply.id = id;
                if let Some(c) = &mut self.replies {
                    let _ = c.send(&reply);
                }
            }
        }
    }

    /// Runs until the worker ended and its output is read (a job's thread).
    fn finish(mut self) {
        while !self.entry.state().ended() {
            if !self.step(None, None) {
                break;
            }
        }
        // What the job left in git dirs for the person's git is taken out
        // now that it ended, and said in its output.
        let since = std::time::SystemTime::now() - self.entry.age();
        let swept = nib_files::fs::git_guard::sweep(&self.asker.scope, &self.held, since);
        if !swept.is_empty() {
            let mut s = self.entry.state();
            for line in swept {
                s.output.extend_from_slice(line.as_bytes());
                s.output.push(b'\n');
            }
        }
        // A client with nib's channel hears of the end at once.
        let text = {
            let s = self.entry.state();
            let output = String::from_utf8_lossy(&s.output);
            let rows: Vec<&str> = output.lines().collect();
            let last = rows[rows.len().saturating_sub(20)..].join("\n");
            format!(
                "[job %{} {}: {}]\n{last}{}",
                self.entry.id,
                ending_words(&s),
                self.entry.command,
                if last.is_empty() { "" } else { "\n" }
            )
        };
        self.asker.nib.announce(self.entry.id, text);
    }
}

/// How many bytes at the end of `held` could be the start of `mark`.
fn partial_mark(held: &[u8], mark: &[u8]) -> usize {
    (1..mark.len().min(held.len() + 1))
        .rev()
        .find(|&k| held.ends_with(&mark[..k]))
        .unwrap_or(0)
}

fn spawn_reader(mut pipe: std::io::PipeReader, tx: Sender<Msg>, mark: Vec<u8>) {
    super::threads::run(move || {
        let mut buf = vec![0u8; 64 * 1024];
        // Bytes held back because they may be the start of the mark.
        let mut held: Vec<u8> = Vec::new();
        let mut marked = false;
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    held.extend_from_slice(&buf[..n]);
                    if !marked && let Some(at) = memchr::memmem::find(&held, &mark) {
                        let after = held.split_off(at + mark.len());
                        held.truncate(at);
                        let before = std::mem::replace(&mut held, after);
                        marked = true;
                        if tx.send(Msg::Out(before)).is_err() || tx.send(Msg::Mark).is_err() {
                            break;
                        }
                    }
                    let keep = if marked {
                        0
                    } else {
                        partial_mark(&held, &mark)
                    };
                    // The bytes to pass on, without copying them again.
                    let rest = held.split_off(held.len() - keep);
                    let out = std::mem::replace(&mut held, rest);
                    if !out.is_empty() && tx.send(Msg::Out(out)).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if !held.is_empty() {
            let _ = tx.send(Msg::Out(held));
        }
        let _ = tx.send(Msg::Eof);
    });
}

/// Forwards the worker's events; the receiver hears when the channel closed.
fn spawn_events(mut chan: Channel, tx: Sender<Msg>) -> mpsc::Receiver<()> {
    let (closed_tx, closed) = mpsc::channel();
    super::threads::run(move || {
        while let Ok(Some(ev)) = chan.recv::<Event>() {
            if tx.send(Msg::Event(ev)).is_err() {
                break;
            }
        }
        let _ = closed_tx.send(());
    });
    closed
}

/// Reports the worker's end — after every event it sent (`events_closed`
/// hears when the channel is read to its end), so a call that ends with its
/// worker never loses a `Done` or a name still in the channel.
fn spawn_waiter(
    mut worker: super::warm::Process,
    entry: Arc<Entry>,
    tx: Sender<Msg>,
    events_closed: mpsc::Receiver<()>,
) {
    super::threads::run(move || {
        worker.wait_exited();
        entry.forget_killer();
        // The worker's end of the channel closed with it (no program holds
        // it); a descendant that kept it open only delays this briefly.
        let _ = events_closed.recv_timeout(Duration::from_secs(2));
        let status = worker.wait_blocking();
        // What bubblewrap said when it could not set the sandbox up.
        let said = worker.start_messages();
        if !said.is_empty() {
            let _ = tx.send(Msg::Out(said));
        }
        let code = status
            .map(|s| {
                use std::os::unix::process::ExitStatusExt;
                s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9))
            })
            .unwrap_or(1);
        let _ = tx.send(Msg::Exit(code));
    });
}

/// Runs one call and returns the tool's answer.
pub fn run(ctx: &Ctx, nib: &Arc<Nibash>, args: CallArgs) -> ToolOutput {
    let finished_jobs = nib.jobs.take_finished_report();
    let gate = match super::command_rules::gate(
        ctx.workspace.project_dir(),
        &args.command,
        ctx.config.failpoint.as_deref(),
        || crate::llm::judge::RuleJudge::from_settings(&ctx.config.model, ctx.config.sandbox).ok(),
    ) {
        Ok(g) => g,
        Err(super::command_rules::Refusal(message)) => {
            let mut out = ToolOutput::error(format!("{finished_jobs}{message}\n[exit 126]\n"));
            out.exit = Some(nib_command_rules::REFUSED_EXIT);
            return out;
        }
    };
    let super::command_rules::Gate {
        runtime,
        masked,
        judge,
    } = gate;
    let started_at = super::changes::start(ctx, nib);
    let call_start = Instant::now();
    // The pool of warm workers follows how many calls run at once.
    let _running = nib.warm.running();
    let entry = nib.jobs.start(&args.command, args.description.clone());
    let cwd = ctx.workspace.project_dir().to_path_buf();
    let names = ctx.workspace.names();
    let request = Request {
        command: args.command.clone(),
        cwd: cwd.clone(),
        names: names
            .list()
            .iter()
            .map(|n| (n.name.clone(), n.dir.clone()))
            .collect(),
        name_sources: names
            .list()
            .iter()
            .map(|n| (n.name.clone(), n.source.label().to_string()))
            .collect(),
        job: entry.id,
        mark: nib_files::fs::unique_id(),
        rules: runtime,
        private_tmp: None,
    };
    let started = match start_worker(
        ctx,
        &nib.warm,
        &nib.tmp_named,
        &request,
        &cwd,
        masked,
        judge,
    ) {
        Ok(s) => s,
        Err(e) => {
            nib.jobs.remove(entry.id);
            return ToolOutput::error(format!(
                "{finished_jobs}nibash: {e}; nothing ran.\nhint: run `nib doctor` to see which sandbox layers this machine offers\n"
            ));
        }
    };
    let ((worker, pipe, broker_side), refill, held) = started;
    let held_now = held.clone();
    entry.set_killer(worker.killer());
    let proxy_token = worker.proxy_token().map(str::to_string);
    let exec_log = worker.exec_log();
    let (tx, rx) = mpsc::channel();
    let replies = broker_side.sender().ok().and_then(|s| Channel::new(s).ok());
    spawn_reader(pipe, tx.clone(), end_mark(&request.mark));
    let events_closed = spawn_events(broker_side, tx.clone());
    let tx_cancel = tx.clone();
    spawn_waiter(worker, Arc::clone(&entry), tx, events_closed);
    let mut consumer = Consumer {
        entry: Arc::clone(&entry),
        rx,
        replies,
        asker: Asker {
            scope: ctx.scope.clone(),
            nib: Arc::clone(nib),
            workspace: Workspace::sharing_names(cwd.clone(), ctx.workspace),
            trashed: Vec::new(),
        },
        seen: Vec::new(),
        wholes: Vec::new(),
        wholes_named: false,
        done_at: None,
        cancelled: false,
        exec_log,
        refusals_shown: None,
        held,
    };
    if let Some(live) = ctx.live {
        let cancel = tx_cancel;
        live.on_cancel(Box::new(move || {
            let _ = cancel.send(Msg::Cancel);
        }));
    }
    let deadline = (!args.background).then(|| Instant::now() + args.timeout);
    let mut next_progress = Instant::now() + PROGRESS_EVERY;
    loop {
        let finished = {
            let s = entry.state();
            s.call_finished() || (consumer.cancelled && s.ended())
        };
        if finished {
            break;
        }
        let now = Instant::now();
        if !consumer.cancelled && deadline.is_none_or(|d| now >= d) {
            break;
        }
        if now >= next_progress {
            if let Some(live) = ctx.live {
                let last = last_line(&entry.state().output);
                live.progress(entry.age().as_secs_f64(), last);
            }
            next_progress = now + PROGRESS_EVERY;
        }
        if let Some(t) = consumer.done_at
            && now >= t + DRAIN_GRACE
        {
            break;
        }
        let mut until = deadline.map(|d| d.min(next_progress));
        if let Some(t) = consumer.done_at {
            until = until.map(|d| d.min(t + DRAIN_GRACE));
        }
        if consumer.cancelled {
            until = Some(now + Duration::from_millis(100));
        }
        if !consumer.step(until, deadline) {
            break;
        }
    }
    // A one-call `nib sh` keeps no server for jobs to outlive the call in:
    // what the line left running is waited for until the timeout, then
    // stopped (exit 124, as timeout(1) says it).
    let one_shot = ctx.live.is_none();
    let mut stopped = false;
    if one_shot && !consumer.cancelled {
        loop {
            let (ended, done) = {
                let s = entry.state();
                (s.ended(), s.command_done())
            };
            if ended || (done && !entry.state().background && consumer.done_at.is_some()) {
                break;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                stopped = entry.kill();
                let until = Instant::now() + Duration::from_secs(2);
                while !entry.state().ended() && Instant::now() < until {
                    if !consumer.step(Some(until), None) {
                        break;
                    }
                }
                break;
            }
            if !consumer.step(deadline, deadline) {
                break;
            }
        }
    }
    // Take what is already queued (output written just before the end).
    while let Ok(msg) = consumer.rx.try_recv() {
        consumer.handle(msg, deadline);
    }
    let mut out = answer(
        ctx,
        nib,
        &args,
        consumer,
        finished_jobs,
        started_at,
        OneShot { one_shot, stopped },
    );
    // What this call (or a job beside it) made in git dirs that the
    // person's own git would run is taken out before the answer.
    let since = nib
        .jobs
        .all()
        .iter()
        .map(|e| e.age())
        .fold(call_start.elapsed(), Duration::max);
    for line in nib_files::fs::git_guard::sweep(&ctx.scope, &held_now, SystemTime::now() - since) {
        out.text.push_str(&line);
        out.text.push('\n');
    }
    // The hosts the proxy refused this call's programs (not another's).
    if let (Some(token), Some(proxy)) = (proxy_token, crate::netproxy::current()) {
        out.network_refused = proxy.proxy.log().take_call(&token);
    }
    if let Some(r) = refill {
        nib.warm.refill(r.key, r.policy, r.cwd);
    }
    out
}

/// Starts the call's worker — the warm one when it was started for the same
/// configuration — and hands it the request. Without command rules, and in
/// a server (not a one-call `nib sh`), it also names the next warm worker
/// to start once the call has answered.
fn start_worker(
    ctx: &Ctx,
    warm: &super::warm::Warm,
    tmp_named: &std::sync::atomic::AtomicBool,
    request: &Request,
    cwd: &Path,
    masked: Vec<PathBuf>,
    judge: Option<Arc<super::exec_judge::ProgramJudge>>,
) -> Result<(Started, Option<Refill>, Vec<PathBuf>), String> {
    let mut policy = ctx.config.sandbox_policy(&ctx.workspace.roots());
    let held = policy.protected.clone();
    let plain = judge.is_none() && masked.is_empty() && ctx.config.warm;
    policy.masked = masked;
    let key = super::warm::key(&policy, cwd);
    let taken = match (plain, ctx.live.is_some()) {
        (true, true) => warm.take_or_start(&key, &policy, cwd),
        (true, false) => warm.take(&key),
        (false, _) => None,
    };
    let forked = taken
        .as_ref()
        .is_some_and(|(p, _, _)| matches!(p, super::warm::Process::Forked(_)));
    let mut started = match taken {
        Some(s) => s,
        None => {
            let mut sandbox = super::warm::sandbox(policy.clone())?;
            if let Some(judge) = judge {
                sandbox = sandbox.with_exec_judge(judge);
            }
            super::warm::start_with(sandbox, cwd)?
        }
    };
    // Under the sandbox the worker's /tmp is private: a forked worker's
    // is its zygote's, kept for the session's next calls; a started one's
    // goes with it.
    let mut request = request.clone();
    // The zygote's /tmp is named once a session; a worker's own, each call.
    let named = tmp_named.load(std::sync::atomic::Ordering::Relaxed);
    request.private_tmp = if !ctx.config.sandbox || (forked && named) {
        None
    } else if forked {
        Some(
            "it is kept for this session's later nibash calls, and goes when the session ends"
                .into(),
        )
    } else if ctx.live.is_none() {
        Some("it is removed when this nib sh ends".into())
    } else {
        Some("it is removed when this call ends".into())
    };
    started
        .2
        .send(&request)
        .map_err(|e| format!("no channel: {e}"))?;
    let refill = (plain && ctx.live.is_some()).then(|| Refill {
        key,
        policy,
        cwd: cwd.to_path_buf(),
    });
    Ok((started, refill, held))
}

/// The warm worker to start for the next call: after this call's answer,
/// so its start does not take the CPU from the call (on a 2-core machine
/// it delayed `true` by a millisecond; see [`super::warm::Warm::refill`]).
struct Refill {
    key: String,
    policy: nib_sandbox::Policy,
    cwd: PathBuf,
}

/// How a one-call `nib sh` ended: `one_shot` (no server: nothing becomes
/// a job), `stopped` (still running at the timeout, so ended).
struct OneShot {
    one_shot: bool,
    stopped: bool,
}

/// Builds the answer from what the call printed, and leaves a job running
/// when the call did not end (in a server).
fn answer(
    ctx: &Ctx,
    nib: &Arc<Nibash>,
    args: &CallArgs,
    consumer: Consumer,
    finished_jobs: String,
    started_at: super::changes::Start,
    how: OneShot,
) -> ToolOutput {
    let mut consumer = consumer;
    let entry = Arc::clone(&consumer.entry);
    // The refusals so far close this answer; a job names later ones.
    let refused = consumer
        .exec_log
        .as_ref()
        .map(nib_sandbox::ExecLog::refusals)
        .unwrap_or_default();
    consumer.refusals_shown = Some(refused.len());
    if consumer.cancelled {
        nib.jobs.remove(entry.id);
        return ToolOutput::error(format!(
            "{finished_jobs}nibash: the call was cancelled; its processes were ended\n"
        ));
    }
    let (bytes, code, is_job, hidden, dropped) = {
        let mut s = entry.state();
        // A command line that is done is answered, even when a leftover
        // process still holds the pipe after the grace.
        let is_job = (!(s.call_finished() || s.command_done()) || s.background) && !how.one_shot;
        s.is_job = is_job;
        let bytes = s.output.clone();
        s.shown = s.output.len();
        // Without a server the line's own status is the answer's, as
        // `bash -c` gives it, whatever its `&` jobs ended with.
        let code = if how.one_shot && s.background {
            s.done
        } else {
            s.code()
        };
        (bytes, code, is_job, s.hidden.clone(), s.dropped)
    };
    // The status line names a job as soon as its call answers: the answer
    // waits (briefly) for the status file to show it.
    entry.touch();
    if is_job {
        nib.jobs.changes.await_published(Duration::from_millis(300));
    }
    let text = hide_captures(String::from_utf8_lossy(&bytes).into_owned());
    let mut out = finished_jobs;
    // nib's own commands (cat, head, grep …) already cut their rows to a
    // tool's answer: one cut, one numbering.
    let long = cut::is_long(&text) && !cut::is_own_rows(&text);
    let summarize = !ctx.config.model.summarizers.is_empty()
        && !nib.summaries_off.load(std::sync::atomic::Ordering::Relaxed)
        && super::summary::wanted(&text);
    let mut shown_whole = !long;
    if long || summarize {
        let name = format!("nibash-{}-{}", std::process::id(), entry.id);
        let log = cut::save_log(&name, &bytes).ok();
        let rows: Vec<&str> = text.lines().collect();
        let words = cut::expect_words(args.expect.as_deref().unwrap_or_default(), &rows);
        let extra = |row: &str| cut::has_word(row, &words);
        let mut keep = cut::pick(&rows, cut::Decider::of(ctx.config.model.decider), &extra);
        let whole_in = log
            .as_ref()
            .map(|p| format!(", whole in {}", p.display()))
            .unwrap_or_default();
        let summary = summarize.then(|| {
            super::summary::summarize(
                ctx.config,
                &rows,
                &args.command,
                code,
                &keep,
                log.as_deref(),
            )
        });
        let summary_note = match &summary {
            Some(Err(why)) => {
                format!(
                    "[summary: no summarizer answered ({why}); the output is shown as without one]\n"
                )
            }
            _ => String::new(),
        };
        match summary {
            Some(Ok(s)) => {
                shown_whole = false;
                out.push_str(&format!(
                    "[output: {} lines, {} bytes; summarized by {}{whole_in}]\n",
                    rows.len(),
                    bytes.len(),
                    s.by
                ));
                out.push_str(&s.text);
            }
            _ if !long => out.push_str(&summary_note),
            _ => {
                let decided = if ctx.config.model.decider == crate::llm::DeciderKind::OpenRouter {
                    super::decide::add_windows(
                        &rows,
                        &mut keep,
                        &super::decide::Purpose {
                            command: &args.command,
                            description: args.description.as_deref(),
                            expect: args.expect.as_deref(),
                            code,
                        },
                        &ctx.config.model,
                        ctx.config.sandbox,
                    )
                } else {
                    String::new()
                };
                out.push_str(&format!(
                    "[output: {} lines, {} bytes; cut to {} rows{whole_in}]\n",
                    rows.len(),
                    bytes.len(),
                    keep.len(),
                ));
                out.push_str(&summary_note);
                out.push_str(&decided);
                out.push_str(&cut::render(&rows, &keep, log.as_deref()));
            }
        }
    }
    if shown_whole {
        out.push_str(&text);
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        record_seen(ctx, &consumer.seen, &text);
    }
    if !consumer.wholes.is_empty() {
        let mut whole = String::new();
        for (command, text) in consumer.wholes.drain(..) {
            whole.push_str(&format!("$ {command}\n{text}"));
        }
        let name = format!("nibash-{}-{}-whole", std::process::id(), entry.id);
        if let Ok(log) = cut::save_log(&name, whole.as_bytes())
            && consumer.wholes_named
        {
            out.push_str(&format!("[git's whole output: {}]\n", log.display()));
        }
    }
    if dropped > 0 {
        out.push_str(&format!("[{dropped} more bytes of output were not kept]\n"));
    }
    if entry.state().flooded {
        out.push_str(&format!(
            "[the output passed {} MiB and the command was stopped]\n",
            OUTPUT_STOP >> 20
        ));
    }
    out.push_str(&super::changes::report(
        ctx,
        nib,
        &started_at,
        &consumer.asker.trashed,
    ));
    if !consumer.asker.trashed.is_empty() {
        let names: Vec<String> = consumer
            .asker
            .trashed
            .iter()
            .map(|p| ctx.workspace.display(p))
            .collect();
        out.push_str(&format!(
            "[moved to the trash: {}; `trash restore PATH` puts one back]\n",
            names.join(", ")
        ));
    }
    let mut exit = None;
    if is_job {
        let why = if args.background {
            "started as a job".to_string()
        } else if entry.state().background {
            "left jobs running".to_string()
        } else {
            format!("still running after {}s", args.timeout.as_secs())
        };
        out.push_str(&format!(
            "[{why}: job %{id}; `wait %{id}` shows its output when it ends, `kill %{id}` stops it, nibash_status shows it now]\n",
            id = entry.id
        ));
        std::thread::spawn(move || consumer.finish());
    } else if how.stopped {
        nib.jobs.remove(entry.id);
        exit = Some(124);
        out.push_str(&format!(
            "[stopped after {}s, the timeout: nib sh keeps no server for a job to outlive it; exit 124 — \
             give it a longer --timeout, or run it through an MCP session, where it would go on as a job]\n",
            args.timeout.as_secs()
        ));
    } else {
        nib.jobs.remove(entry.id);
        exit = code;
        if let Some(h) = hidden {
            out.push_str(&format!("[{h}]\n"));
        } else if let Some(c) = code
            && c != 0
        {
            out.push_str(&format!("[exit {c}]\n"));
        }
    }
    out.push_str(&exec_refusals(&refused));
    let mut answer = ToolOutput::ok(out);
    answer.exit = exit;
    answer
}

/// Messages name `/dev/null` where the worker pointed a `2>/dev/null` at a
/// capture file of its own (`worker::discarded`): nib's internal paths never
/// show.
fn hide_captures(text: String) -> String {
    if !text.contains("nib-stderr-") {
        return text;
    }
    static CAPTURE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    match CAPTURE
        .get_or_init(|| regex::Regex::new(r"(/[^\s'\x22:]*)?/nib-stderr-[0-9]+-[0-9]+").ok())
    {
        Some(re) => re.replace_all(&text, "/dev/null").into_owned(),
        None => text,
    }
}

/// One closing line per exec the rules refused while the call ran.
fn exec_refusals(refusals: &[nib_sandbox::ExecRefusal]) -> String {
    let mut out = String::new();
    for r in refusals.iter().take(5) {
        out.push_str(&format!(
            "[exec refused: {} tried to run {}; {}. It failed with \"Permission denied\" and the call went on]\n",
            // The worker itself (brush) shows as nib's binary.
            if r.caller == "nib" { "nibash" } else { &r.caller },
            r.program.display(),
            r.why
        ));
    }
    if refusals.len() > 5 {
        out.push_str(&format!(
            "[{} more execs were refused by the rules]\n",
            refusals.len() - 5
        ));
    }
    out
}

/// Counts the rows nib's own commands printed as seen: for files whose
/// content still has the printed tag, and only the rows that really are in
/// the call's output (under a header with that tag and file name, with the
/// line's current text). A report of rows the model was not shown counts
/// for nothing, whoever sent it.
fn record_seen(ctx: &Ctx, seen: &[SeenReport], output: &str) {
    if seen.is_empty() {
        return;
    }
    let shown = ShownRows::of(output);
    for (path, tag, lines) in seen {
        let Some(tag) = Tag::parse(tag) else { continue };
        let Ok(file) = nib_files::fs::read_file(&ctx.scope, path, nib_files::context::TEXT_LIMIT)
        else {
            continue;
        };
        if Tag::of(&file.bytes) != tag {
            continue;
        }
        let text = Arc::new(Text::decode(&file.bytes));
        let proven = shown.lines_of(path, &tag.to_string(), &text, lines);
        if proven.is_empty() {
            continue;
        }
        ctx.with_seen(|s| s.record(path, tag, &text, proven));
    }
}

/// The anchored rows an output shows, by the header above them.
struct ShownRows<'a> {
    /// (tag, file name, line number, text).
    rows: std::collections::HashSet<(&'a str, &'a str, usize, &'a str)>,
}

impl<'a> ShownRows<'a> {
    fn of(output: &'a str) -> ShownRows<'a> {
        let mut rows = std::collections::HashSet::new();
        let mut header: Option<(&str, &str)> = None;
        for line in output.lines() {
            if let Some(h) = parse_header(line) {
                header = Some(h);
                continue;
            }
            let Some((tag, name)) = header else { continue };
            // grep marks its rows with `*` (a match) or a space (context),
            // git's diffs mark added rows with `+`.
            let row = line
                .strip_prefix('*')
                .or_else(|| line.strip_prefix(' '))
                .or_else(|| line.strip_prefix('+'))
                .unwrap_or(line);
            let Some((digits, text)) = row.split_once(':') else {
                continue;
            };
            if digits.is_empty()
                || digits.starts_with('0')
                || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                continue;
            }
            if let Ok(n) = digits.parse::<usize>() {
                rows.insert((tag, name, n, text));
            }
        }
        ShownRows { rows }
    }

    /// The claimed lines of `path` that the output shows with their text.
    fn lines_of(
        &self,
        path: &Path,
        tag: &str,
        text: &Text,
        claimed: &[(usize, usize)],
    ) -> Vec<usize> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = nib_text::path_text::escape_control(&name);
        let mut out: Vec<usize> = claimed
            .iter()
            .flat_map(|&(a, b)| a..=b.min(text.len()))
            .filter(|&k| {
                k >= 1
                    && text
                        .line(k)
                        .is_some_and(|line| self.rows.contains(&(tag, name.as_str(), k, line)))
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// `[PATH#TAG]` (maybe followed by a note): the tag and the path's last name.
fn parse_header(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('[')?;
    // The last `#XXXX]` ends the header (a path may hold `#` and `]`).
    let hash = rest.char_indices().rev().find_map(|(i, c)| {
        let tag = rest.get(i + 1..i + 5)?;
        (c == '#'
            && tag.bytes().all(|b| b.is_ascii_hexdigit())
            && rest.get(i + 5..i + 6) == Some("]"))
        .then_some(i)
    })?;
    let path = &rest[..hash];
    Some((
        &rest[hash + 1..hash + 5],
        path.rsplit('/').next().unwrap_or(path),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_paths_read_as_dev_null() {
        assert_eq!(
            hide_captures(
                "error: failed to redirect to /tmp/nib-worker-1-2/nib-stderr-31-0: x\n".into()
            ),
            "error: failed to redirect to /dev/null: x\n"
        );
        assert_eq!(hide_captures("plain\n".into()), "plain\n");
    }

    #[test]
    fn the_end_mark_splits_the_output_even_across_reads() {
        let mark = end_mark("t0k");
        assert_eq!(partial_mark(b"abc", &mark), 0);
        assert_eq!(partial_mark(b"abc\0nib", &mark), 4);
        let (r, mut w) = match std::io::pipe() {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        let (tx, rx) = mpsc::channel();
        let m2 = mark.clone();
        spawn_reader(r, tx, m2);
        use std::io::Write;
        let _ = w.write_all(b"before\n\0nib");
        std::thread::sleep(Duration::from_millis(50));
        let _ = w.write_all(&mark[4..]);
        let _ = w.write_all(b"after\n");
        drop(w);
        let mut seen = Vec::new();
        while let Ok(m) = rx.recv_timeout(Duration::from_secs(5)) {
            match m {
                Msg::Out(b) => seen.push(String::from_utf8_lossy(&b).into_owned()),
                Msg::Mark => seen.push("<mark>".into()),
                Msg::Eof => break,
                _ => {}
            }
        }
        let joined = seen.concat();
        assert_eq!(joined, "before\n<mark>after\n", "{seen:?}");
    }
}

/// Forged worker events (as a program that reached the channel, or a worker
/// gone wrong, could send them) cannot make the broker count lines as seen,
/// trash or name anything outside the roots, or end a call early.
#[cfg(test)]
mod forged {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A small deterministic generator, so every run tries the same cases.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn seen_reports_count_only_rows_the_output_shows() {
        let text = Text::decode(b"fn main() {\n    let a = 1;\n    a\n}\n\n// 3:x\n");
        let tag = "1A2B";
        let path = Path::new("/p/src/main.rs");
        let mut rng = Lcg(7);
        for _ in 0..2000 {
            let mut out = String::new();
            let mut truly = std::collections::BTreeSet::new();
            for _ in 0..rng.below(12) {
                let k = 1 + rng.below(text.len() as u64 + 2) as usize;
                let line = text.line(k).unwrap_or("ghost");
                match rng.below(8) {
                    0 => out.push_str(&format!("[src/main.rs#{tag}]\n")),
                    1 => out.push_str("[src/main.rs#FFFF]\n"),
                    2 => out.push_str(&format!("[src/other.rs#{tag}]\n")),
                    3 => out.push_str(&format!("{k}:{line} forged\n")),
                    4 => out.push_str(&format!("{k}|{line}\n")),
                    5 => out.push_str(&format!("0{k}:{line}\n")),
                    _ => {
                        let mark = ["", "*", " "][rng.below(3) as usize];
                        out.push_str(&format!("{mark}{k}:{line}\n"));
                    }
                }
            }
            // What a careful reader of `out` would count as shown.
            let mut header_ok = false;
            for l in out.lines() {
                if l.starts_with('[') {
                    header_ok = l == format!("[src/main.rs#{tag}]");
                    continue;
                }
                let row = l.trim_start_matches(['*', ' ']);
                if let Some((n, t)) = row.split_once(':')
                    && header_ok
                    && !n.starts_with('0')
                    && let Ok(n) = n.parse::<usize>()
                    && text.line(n) == Some(t)
                {
                    truly.insert(n);
                }
            }
            let claimed = [(1, text.len() + 5)];
            let got = ShownRows::of(&out).lines_of(path, tag, &text, &claimed);
            let got: std::collections::BTreeSet<usize> = got.into_iter().collect();
            assert_eq!(got, truly, "{out}");
        }
    }

    #[test]
    fn forged_marks_in_the_output_never_end_the_call() {
        let token = nib_files::fs::unique_id();
        let mark = end_mark(&token);
        let mut rng = Lcg(11);
        for round in 0..200 {
            let (r, mut w) = std::io::pipe().unwrap();
            let (tx, rx) = mpsc::channel();
            spawn_reader(r, tx, mark.clone());
            let mut sent = Vec::new();
            for _ in 0..rng.below(20) {
                let piece: Vec<u8> = match rng.below(5) {
                    0 => end_mark("forged-token"),
                    1 => mark[..1 + rng.below(mark.len() as u64 - 1) as usize].to_vec(),
                    2 => end_mark(&token[..token.len() - 1]),
                    3 => b"\0nib-end:".to_vec(),
                    _ => (0..rng.below(64)).map(|_| rng.below(256) as u8).collect(),
                };
                use std::io::Write;
                w.write_all(&piece).unwrap();
                sent.extend_from_slice(&piece);
            }
            drop(w);
            let mut got = Vec::new();
            let mut marked = false;
            loop {
                match rx.recv_timeout(Duration::from_secs(5)).unwrap() {
                    Msg::Out(b) => got.extend_from_slice(&b),
                    Msg::Mark => marked = true,
                    Msg::Eof => break,
                    _ => {}
                }
            }
            if sent.windows(mark.len()).any(|w| w == mark.as_slice()) {
                // The pieces happened to spell the real mark (a prefix of it
                // and a piece starting with its last byte): not a forgery.
                continue;
            }
            assert!(!marked, "round {round}: a forged mark ended the output");
            assert_eq!(got, sent, "round {round}: output bytes changed");
        }
    }

    #[test]
    fn forged_events_cannot_reach_outside_the_roots_or_end_the_call() {
        let base = tempfile::tempdir().unwrap();
        let base_path = std::fs::canonicalize(base.path()).unwrap();
        let root = base_path.join("root");
        let outside = base_path.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("canary"), "keep").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        let workspace = Workspace::new(root.clone());
        let scope = workspace.scope(true, false).unwrap();
        let nib = Arc::new(Nibash::default());
        let entry = nib.jobs.start("forged", None);
        let (_tx, rx) = mpsc::channel();
        let mut consumer = Consumer {
            entry: Arc::clone(&entry),
            rx,
            replies: None,
            asker: Asker {
                scope,
                nib: Arc::clone(&nib),
                workspace,
                trashed: Vec::new(),
            },
            seen: Vec::new(),
            wholes: Vec::new(),
            wholes_named: false,
            done_at: None,
            cancelled: false,
            exec_log: None,
            refusals_shown: None,
            held: Vec::new(),
        };
        let targets = [
            outside.join("canary"),
            root.join("out/canary"),
            root.join("../outside/canary"),
            PathBuf::from("../outside/canary"),
            outside.clone(),
            PathBuf::from("/"),
        ];
        let mut rng = Lcg(3);
        for i in 0..300 {
            let t = targets[rng.below(targets.len() as u64) as usize].clone();
            let event = match rng.below(5) {
                0 => Event::Ask {
                    id: i,
                    ask: Ask::Trash {
                        paths: vec![t],
                        recursive: rng.below(2) == 0,
                        force: rng.below(2) == 0,
                    },
                },
                1 => Event::Ask {
                    id: i,
                    ask: Ask::TrashRestore {
                        path: t,
                        force: true,
                    },
                },
                2 => Event::Name {
                    name: ["out", "../x", "a\nb", "-x", "ok"][rng.below(5) as usize].into(),
                    dir: t,
                },
                3 => Event::Done {
                    code: 0,
                    background: false,
                    hidden: None,
                    tmp_named: false,
                },
                _ => Event::Seen {
                    path: t,
                    tag: "0000".into(),
                    lines: vec![(1, 9)],
                },
            };
            consumer.handle(Msg::Event(event), None);
            consumer.handle(Msg::Out(end_mark("forged")), None);
            assert!(
                outside.join("canary").exists(),
                "a forged ask trashed the canary"
            );
            assert!(
                !entry.state().call_finished() && consumer.done_at.is_none(),
                "forged events ended the call"
            );
        }
        let names = consumer.asker.workspace.names();
        assert!(
            names.list().iter().all(|n| n.dir.starts_with(&root)),
            "a forged name points outside the roots: {names:?}"
        );
        // The worker's own end (its mark through the pipe) still ends it.
        consumer.handle(Msg::Mark, None);
        assert!(entry.state().command_done() && consumer.done_at.is_some());
    }
}
