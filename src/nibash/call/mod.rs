//! One nibash call on the broker side.
//!
//! Start the worker (`nib __nibash`) confined by `nib-sandbox` with the
//! channel as fd 3 and stdout/stderr on one pipe; send the [`Request`]; then
//! one consumer ([`consume`]) takes everything that happens — output,
//! channel events, the worker's end — in order, from one queue fed by three
//! small threads, answering the worker's asks ([`asks`]). The call answers
//! ([`answer`]) when the command line is done; at its timeout (or at once
//! for `background: true`) the consumer moves to a thread of its own and the
//! call stays as job `%N`.
//!
//! Seen rows the worker reports are checked against the file before they
//! count ([`seen_rows`]): the broker reads the file itself and compares the
//! tag.

mod answer;
mod args;
mod asks;
mod consume;
mod seen_rows;
pub(crate) mod watch;

pub use args::{CallArgs, DEFAULT_TIMEOUT, MAX_TIMEOUT};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self};
use std::time::{Duration, Instant, SystemTime};

use crate::broker_ctx::BrokerCtx;
use nib_files::context::ToolOutput;
use nib_files::workspace::Workspace;
use nib_shell::channel::{Channel, Request, RuntimeRule, end_mark};

use crate::confinement::Confinement;
use crate::nibash::Nibash;
use crate::nibash::jobs::Owner;
use crate::nibash::warm::Started;

use answer::{OneShot, answer};
use asks::Asker;
use consume::{Consumer, Msg, spawn_events, spawn_reader, spawn_waiter};

/// Runs one call of `owner`'s and returns the tool's answer.
pub fn run(ctx: &BrokerCtx, nib: &Arc<Nibash>, owner: &Owner, args: CallArgs) -> ToolOutput {
    let finished_jobs = nib.jobs.take_finished_report(owner);
    let gate = match crate::nibash::command_rules::gate(
        ctx.workspace.project_dir(),
        &args.command,
        ctx.config.failpoint.as_deref(),
        || crate::llm::judge::RuleJudge::from_settings(&ctx.config.model, ctx.config.sandbox).ok(),
    ) {
        Ok(g) => g,
        Err(crate::nibash::command_rules::Refusal(message)) => {
            let mut out = ToolOutput::error(format!("{finished_jobs}{message}\n[exit 126]\n"));
            out.exit = Some(nib_command_rules::REFUSED_EXIT);
            return out;
        }
    };
    let crate::nibash::command_rules::Gate {
        runtime,
        masked,
        judge,
    } = gate;
    let started_at = crate::nibash::changes::start(ctx, nib);
    // The git dirs there before the call, for the sweep after it.
    nib_files::fs::git_guard::before_call(&ctx.scope);
    let call_start = Instant::now();
    // The pool of warm workers follows how many calls run at once.
    let _running = nib.warm.running();
    let entry = nib
        .jobs
        .start(owner, &args.command, args.description.clone());
    let cwd = ctx.workspace.project_dir().to_path_buf();
    let request = request_for(ctx, &args, entry.id, runtime);
    let started = match start_worker(
        ctx,
        &nib.warm,
        TmpNote {
            given: nib.tmp_named(owner),
            http_agent: !owner.is_empty(),
        },
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
    watch::watch(&entry, &ctx.scope, &held_now);
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
            owner: Arc::clone(owner),
            workspace: Workspace::sharing_names(cwd.clone(), ctx.workspace),
            trashed: Vec::new(),
            hidden: Vec::new(),
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
    consumer.until_answer(ctx.live, deadline);
    // A one-call `nib sh` keeps no server for jobs to outlive the call in:
    // what the line left running is waited for until the timeout, then
    // stopped (exit 124, as timeout(1) says it).
    let one_shot = ctx.live.is_none();
    let stopped = one_shot && !consumer.cancelled && consumer.until_all_ended(deadline);
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
    let since = SystemTime::now() - since;
    let swept = nib_files::fs::git_guard::sweep(&ctx.scope, &held_now, since);
    for line in swept
        .into_iter()
        .chain(nib_files::fs::planted::sweep(&ctx.scope, &held_now, since))
    {
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

/// The request the worker runs: the command line in the project folder,
/// with the session's named folders, the call's job number, its end mark
/// and the runtime command rules.
fn request_for(ctx: &BrokerCtx, args: &CallArgs, job: u32, rules: Vec<RuntimeRule>) -> Request {
    let names = ctx.workspace.names();
    Request {
        command: args.command.clone(),
        cwd: ctx.workspace.project_dir().to_path_buf(),
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
        job,
        mark: nib_files::fs::unique_id(),
        rules,
        private_tmp: None,
    }
}

/// Whether a call names the zygote's private /tmp to its agent.
struct TmpNote {
    /// A call of the agent's has named it already.
    given: bool,
    /// The agent is an HTTP client's: the zygote is every agent's.
    http_agent: bool,
}

/// Starts the call's worker — the warm one when it was started for the same
/// configuration — and hands it the request. Without command rules, and in
/// a server (not a one-call `nib sh`), it also names the next warm worker
/// to start once the call has answered.
fn start_worker(
    ctx: &BrokerCtx,
    warm: &crate::nibash::warm::Warm,
    tmp: TmpNote,
    request: &Request,
    cwd: &Path,
    masked: Vec<PathBuf>,
    judge: Option<Arc<crate::nibash::exec_judge::ProgramJudge>>,
) -> Result<(Started, Option<Refill>, Vec<PathBuf>), String> {
    let mut policy = ctx.config.sandbox_policy(&ctx.workspace.roots());
    let held = policy.protected.clone();
    let plain = judge.is_none() && masked.is_empty() && ctx.config.warm;
    policy.masked = masked;
    let key = crate::nibash::warm::key(&policy, cwd);
    let taken = match (plain, ctx.live.is_some()) {
        (true, true) => warm.take_or_start(&key, &policy, cwd),
        (true, false) => warm.take(&key),
        (false, _) => None,
    };
    let forked = taken
        .as_ref()
        .is_some_and(|(p, _, _)| matches!(p, crate::nibash::warm::Process::Forked(_)));
    let mut started = match taken {
        Some(s) => s,
        None => {
            let mut sandbox = crate::nibash::warm::sandbox(policy.clone())?;
            if let Some(judge) = judge {
                sandbox = sandbox.with_exec_judge(judge);
            }
            crate::nibash::warm::start_with(sandbox, cwd)?
        }
    };
    // Under the sandbox the worker's /tmp is private: a forked worker's
    // is its zygote's, kept for the session's next calls; a started one's
    // goes with it.
    let mut request = request.clone();
    // The zygote's /tmp is named once to each agent; a worker's own, each
    // call. Over HTTP every agent's calls are forked by the one zygote.
    request.private_tmp = if !ctx.config.sandbox || (forked && tmp.given) {
        None
    } else if forked && tmp.http_agent {
        Some(
            "it is kept for later nibash calls, the server's other agents' too (they share it), and goes when the server stops"
                .into(),
        )
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
/// it delayed `true` by a millisecond; see [`crate::nibash::warm::Warm::refill`]).
struct Refill {
    key: String,
    policy: nib_sandbox::Policy,
    cwd: PathBuf,
}
