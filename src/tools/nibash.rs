//! The shell tools' arguments and answers: `nibash` (run a command line),
//! `nibash_status` (what runs, the sandbox in force; reads only),
//! `nibash_control` (stop a job, restore a trashed path, switch summaries)
//! and `skim` (a long file read for a question). The work is in
//! `crate::nibash`.

use crate::confinement::Confinement;
use std::sync::Arc;
use std::time::Duration;

use crate::broker_ctx::BrokerCtx;
use crate::nibash::Nibash;
use crate::nibash::call::{self, CallArgs};
use crate::nibash::jobs::{Owner, ending_words};
use nib_files::context::ToolOutput;
use nib_files::context::args::{ArgError, Args};

/// Reads a `timeout` value ([`parse_timeout`]); `name` is what the caller
/// calls it in the error (`"timeout"` in a tool call, `--timeout` on the
/// command line).
pub fn timeout_arg(text: &str, name: &str) -> Result<Duration, ArgError> {
    parse_timeout(text).ok_or_else(|| {
        ArgError(format!(
            "{name} is seconds (at most 600), or milliseconds when over 600, or text like 90s or 5m; not \"{text}\""
        ))
    })
}

/// Reads a timeout: seconds, or milliseconds when over 600 (as other
/// agents' shell tools take), or text such as `90s`, `5m`, `1500ms`.
pub fn parse_timeout(v: &str) -> Option<Duration> {
    let v = v.trim();
    let (num, unit) = match v.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => (&v[..i], v[i..].trim()),
        None => (v, ""),
    };
    let n: f64 = num.parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    let secs = match unit {
        "" if n > 600.0 => n / 1000.0,
        "" | "s" | "sec" | "secs" => n,
        "ms" => n / 1000.0,
        "m" | "min" | "mins" => n * 60.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs).min(call::MAX_TIMEOUT))
}

/// One `nibash` call: what the MCP server's arguments are parsed into and
/// what `nib sh` parses its flags into. Its arguments are the `nibash`
/// schema's, taken leniently ([`Args`]): aliases (`cmd`,
/// `run_in_background`), `timeout` as a number or text, booleans as text,
/// each slip noted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NibashRequest {
    /// The command line.
    pub command: String,
    /// What it is for, in a few words.
    pub description: Option<String>,
    /// What the caller wants to learn from it.
    pub expect: Option<String>,
    /// When it turns into a job.
    pub timeout: Duration,
    /// Start it as a job at once.
    pub background: bool,
    /// What the lenient parse took or ignored, printed under the answer.
    pub notes: Vec<String>,
}

impl NibashRequest {
    /// A call of `command` with the defaults.
    pub fn new(command: String) -> NibashRequest {
        NibashRequest {
            command,
            description: None,
            expect: None,
            timeout: call::DEFAULT_TIMEOUT,
            background: false,
            notes: Vec::new(),
        }
    }

    /// Takes a `nibash` call's arguments apart.
    pub fn from_args(mut args: Args) -> Result<NibashRequest, ArgError> {
        args.alias("cmd", "command");
        args.alias("run_in_background", "background");
        let mut request = NibashRequest::new(args.required_string("command")?);
        request.description = args.string("description")?;
        request.expect = args.string("expect")?;
        if let Some(t) = args.number_or_text("timeout")? {
            request.timeout = timeout_arg(&t, "\"timeout\"")?;
        }
        request.background = args.bool("background")?.unwrap_or(false);
        request.notes = args.finish();
        Ok(request)
    }
}

/// One `skim` call: what the MCP server's arguments are parsed into and
/// what `nib skim` parses its flags into. Its arguments are the `skim`
/// schema's, taken leniently ([`Args`]): aliases (`path`, `file_path`),
/// a list as JSON text or one string, each slip noted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkimRequest {
    /// The files to skim.
    pub paths: Vec<String>,
    /// What to look for.
    pub expect: String,
    /// What the lenient parse took or ignored, printed under the answer.
    pub notes: Vec<String>,
}

/// What skim looks for when `expect` is absent.
const SKIM_EXPECT: &str = "did it pass; if not, what failed and why";

impl SkimRequest {
    /// A skim of `paths` for the default question.
    pub fn new(paths: Vec<String>) -> SkimRequest {
        SkimRequest {
            paths,
            expect: SKIM_EXPECT.into(),
            notes: Vec::new(),
        }
    }

    /// Takes a `skim` call's arguments apart.
    pub fn from_args(mut args: Args) -> Result<SkimRequest, ArgError> {
        args.alias("path", "paths");
        args.alias("file_path", "paths");
        let mut request = SkimRequest::new(args.string_list("paths")?.unwrap_or_default());
        if let Some(expect) = args.string("expect")? {
            request.expect = expect;
        }
        request.notes = args.finish();
        Ok(request)
    }
}

/// Runs `nibash` as `owner` (whose jobs its `jobs`, `wait` and `kill` reach).
pub fn run(
    request: NibashRequest,
    ctx: &BrokerCtx,
    shell: &Arc<Nibash>,
    owner: &Owner,
) -> Result<ToolOutput, ArgError> {
    let NibashRequest {
        command,
        description,
        expect,
        timeout,
        background,
        notes,
    } = request;
    if !ctx.config.shell {
        return Ok(ToolOutput::error(
            "nibash is off (NIB_SHELL=0); nothing ran.\nhint: start nib without NIB_SHELL=0 to use the shell\n".into(),
        ));
    }
    let mut out = call::run(
        ctx,
        shell,
        owner,
        CallArgs {
            command: command.clone(),
            description,
            expect,
            timeout,
            background,
        },
    );
    // Hosts the proxy refused this call's programs, once each (the proxy
    // keeps a bounded number of bounded names; at most a few are named).
    for (host, why) in out.network_refused.iter().take(REFUSED_SHOWN) {
        out.text.push_str(&format!(
            "[network: blocked {} — {why}]\n",
            nib_text::path_text::escape_control(host)
        ));
    }
    if out.network_refused.len() > REFUSED_SHOWN {
        out.text.push_str(&format!(
            "[network: {} more hosts were blocked; nibash_status lists them]\n",
            out.network_refused.len() - REFUSED_SHOWN
        ));
    }
    // A failed lookup or connection the proxy did not explain: why.
    if ctx.config.sandbox
        && ctx.config.confined_mode().is_ok()
        && let Some(note) =
            crate::nibash::network_why::note(ctx.config, &out.text, !out.network_refused.is_empty())
    {
        out.text.push_str(&note);
        out.text.push('\n');
    }
    if let Some(note) = crate::netproxy::ignored_allow_note() {
        out.text.push_str(&note);
        out.text.push('\n');
    }
    // Unconfined by the person's choice: said once, in the first answer
    // (on stderr for a one-call `nib sh`, whose stdout is the command's).
    if !ctx.config.sandbox
        && let Some(note) = ctx.config.first_answer_note()
    {
        if ctx.live.is_none() {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "{}", crate::terminal::visible(&note));
        } else {
            out.text.push_str(&note);
            out.text.push('\n');
        }
    }
    // Lines about what the sandbox kept back only where it is in force:
    // a refused call claims no limit.
    if ctx.config.sandbox && ctx.config.confined_mode().is_ok() {
        if let Some(note) = ctx.config.first_answer_note() {
            out.text.push_str(&note);
            out.text.push('\n');
        }
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let lines = crate::nibash::withheld::notes(
            &command,
            &out.text,
            ctx.workspace.project_dir(),
            home.as_deref(),
            &ctx.config.reads(),
            &ctx.workspace.roots(),
            &ctx.config.withheld_vars(),
        );
        for line in lines {
            out.text.push_str(&line);
            out.text.push('\n');
        }
    }
    nib_files::context::push_notes(&mut out.text, &notes);
    Ok(out)
}

/// Hosts a call's answer names as blocked, at most (each name is at most
/// 255 bytes: the closing lines stay within a few KiB).
const REFUSED_SHOWN: usize = 8;

/// The network line of nibash_status: the mode, and with the proxy the
/// hosts reached and refused in this session.
fn network_status(ctx: &BrokerCtx) -> String {
    let mode = ctx.config.network_mode();
    match crate::netproxy::current().filter(|_| mode.starts_with("network through")) {
        Some(r) => {
            let log = r.proxy.log();
            let list = |v: Vec<String>| {
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join(", ")
                }
            };
            format!(
                "{mode}; reached {}; blocked {}",
                list(log.reached()),
                list(
                    log.blocked()
                        .into_iter()
                        .map(|(h, why)| format!("{h} ({why})"))
                        .collect()
                )
            )
        }
        None => mode,
    }
}

/// The arguments that moved from `nibash_status` to `nibash_control`: the
/// status only reads, and what stops a job, writes a file back or switches
/// the session is in a tool whose annotations say so.
const MOVED_TO_CONTROL: [&str; 3] = ["stop", "restore", "summaries"];

/// Runs `nibash_status` for `owner`: reads only. Only its own calls and
/// jobs are listed or shown, and only its own rows of the usage table.
pub fn status(
    mut args: Args,
    ctx: &BrokerCtx,
    shell: &Arc<Nibash>,
    owner: &Owner,
) -> Result<ToolOutput, ArgError> {
    let moved: Vec<&str> = MOVED_TO_CONTROL
        .into_iter()
        .filter(|k| args.has(k))
        .collect();
    if !moved.is_empty() {
        return Ok(ToolOutput::error(format!(
            "nibash_status only reads; {} is nibash_control's now (nibash_control {{\"stop\": \"%3\"}}); nothing was stopped, restored or switched\n",
            moved.join(", ")
        )));
    }
    let tail = args.usize("tail")?.unwrap_or(5);
    let view = args.string("view")?;
    let format = args.string("format")?;
    let notes = args.finish();
    let json = match format.as_deref() {
        None | Some("text") => false,
        Some("json") => true,
        Some(other) => {
            return Err(ArgError(format!(
                "\"format\" is text or json, not {other:?}; nothing was changed"
            )));
        }
    };
    let mut out = String::new();
    let nib = shell;
    if json {
        return Ok(ToolOutput::ok(
            status_json(ctx, nib, owner, tail).to_string(),
        ));
    }
    if let Some(v) = view {
        let id: Option<u32> = v.trim_start_matches('%').parse().ok();
        let Some(e) = id.and_then(|id| nib.jobs.get(owner, id)) else {
            return Ok(ToolOutput::error(format!(
                "no call or job {v}; nibash_status without view lists them\n"
            )));
        };
        let s = e.state();
        out.push_str(&format!(
            "%{} {} {}s: {}\n",
            e.id,
            ending_words(&s),
            e.age().as_secs(),
            cut_line(&e.command)
        ));
        let text = String::from_utf8_lossy(&s.output).into_owned();
        out.push_str(&crate::nibash::cut::shape(
            &text,
            crate::nibash::cut::Decider::Keywords,
            None,
        ));
        nib_files::context::push_notes(&mut out, &notes);
        return Ok(ToolOutput::ok(out));
    }
    out.push_str(&session_lines(ctx, nib, owner));
    out.push_str(&calls_lines(nib, owner, tail));
    nib_files::context::push_notes(&mut out, &notes);
    Ok(ToolOutput::ok(out))
}

/// Runs `nibash_control` for `owner`: stops one of its jobs (`stop: %N`),
/// puts a trashed path back (`restore: PATH`), switches summaries for the
/// session (`summaries`). Each says what it did, or that nothing was done.
pub fn control(
    mut args: Args,
    ctx: &BrokerCtx,
    shell: &Arc<Nibash>,
    owner: &Owner,
) -> Result<ToolOutput, ArgError> {
    let stop = args.string("stop")?;
    let restore = args.string("restore")?;
    let summaries = args.bool("summaries")?;
    let notes = args.finish();
    if stop.is_none() && restore.is_none() && summaries.is_none() {
        return Ok(ToolOutput::error(
            "nibash_control needs stop (a job, %3), restore (a trashed path) or summaries (true or false); nothing was changed.\nhint: nibash_status lists the jobs; `trash list` in nibash lists the trash\n".to_string(),
        ));
    }
    let mut out = String::new();
    if let Some(v) = stop {
        let id: Option<u32> = v.trim_start_matches('%').parse().ok();
        let Some(e) = id.and_then(|id| shell.jobs.get(owner, id)) else {
            return Ok(ToolOutput::error(format!(
                "no call or job {v}; nothing was stopped. nibash_status lists them\n"
            )));
        };
        if e.kill() {
            out.push_str(&format!("stopped %{}: {}\n", e.id, e.command));
        } else {
            out.push_str(&format!(
                "%{} had already ended; nothing was stopped\n",
                e.id
            ));
        }
    }
    if let Some(path) = restore {
        let p = ctx.workspace.resolve(&path);
        match nib_files::fs::restore_entry(&ctx.scope, &p, false) {
            Ok(()) => out.push_str(&format!("restored {}\n", ctx.workspace.display(&p))),
            Err(e) => {
                return Ok(ToolOutput::error(format!(
                    "{out}{}: {e}; nothing was restored.\nhint: `trash list` in nibash shows what the trash holds\n",
                    ctx.workspace.display(&p)
                )));
            }
        }
    }
    if let Some(on) = summaries {
        shell.set_summaries(owner, on);
        out.push_str(if on {
            "summaries on for this session\n"
        } else {
            "summaries off for this session\n"
        });
    }
    nib_files::context::push_notes(&mut out, &notes);
    Ok(ToolOutput::ok(out))
}

/// The session's lines of nibash_status: the sandbox and network in force,
/// the read policy, brokered secrets, command rules, summaries, named
/// folders, providers, warm workers and usage.
fn session_lines(ctx: &BrokerCtx, nib: &Nibash, owner: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "sandbox: {}; {}\n",
        ctx.config.sandbox_mode(),
        network_status(ctx)
    ));
    out.push_str(&ctx.config.read_policy_text());
    out.push_str(&ctx.config.brokered_text());
    out.push_str(&crate::nibash::command_rules::describe(
        ctx.workspace.project_dir(),
        ctx.config,
    ));
    out.push('\n');
    out.push_str(&crate::nibash::summary::describe(
        &ctx.config.model,
        ctx.config.sandbox,
        !nib.summaries_on(owner),
    ));
    out.push_str(
        &ctx.workspace
            .names()
            .describe(|p| nib_text::path_text::escape_control(&p.to_string_lossy())),
    );
    if let Some(f) = nib
        .provider_status
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
    {
        out.push_str(&f());
    }
    let (ready, kib) = nib.warm.report();
    out.push_str(&format!(
        "warm workers: {ready} ready ({:.1} MiB with their zygote, shared pages counted once; at most {}, following how many calls run at once)\n",
        kib as f64 / 1024.0,
        crate::nibash::warm::most_ready()
    ));
    out.push_str(&usage(&own_usage(nib, owner)));
    out
}

/// One line per call and job, with the last `tail` lines of each (under a
/// budget shared by all).
fn calls_lines(nib: &Nibash, owner: &str, tail: usize) -> String {
    let mut out = String::new();
    let entries = nib.jobs.all_of(owner);
    let mut budget = TailBudget::default();
    if entries.is_empty() {
        out.push_str("no calls or jobs are running\n");
    }
    for e in entries {
        let s = e.state();
        let what = if s.ended() {
            ending_words(&s)
        } else if s.is_job {
            "running (job)".into()
        } else {
            "running".into()
        };
        out.push_str(&format!(
            "%{} {what} {}s: {}{}\n",
            e.id,
            e.age().as_secs(),
            cut_line(&e.command),
            e.description
                .as_ref()
                .map(|d| format!("  ({})", cut_line(d)))
                .unwrap_or_default()
        ));
        for l in budget.take(tail_lines(&s.output, tail)) {
            out.push_str(&format!("  | {l}\n"));
        }
    }
    out
}

/// The most of a call's output the status looks at for its last lines.
const TAIL_WINDOW: usize = 64 * 1024;
/// The most lines of one call's tail, the most characters of one line (or
/// command) shown, and the most bytes of tails in one status: what a
/// program prints is the program's to choose, and the status is polled
/// (the mod asks every 2 s).
const TAIL_LINES: usize = 50;
const LINE_SHOWN: usize = 400;
const TAILS_TOTAL: usize = 128 * 1024;

/// A line cut to [`LINE_SHOWN`] characters, marked when cut.
fn cut_line(line: &str) -> String {
    match line.char_indices().nth(LINE_SHOWN) {
        Some((end, _)) => format!("{}… [{} bytes]", &line[..end], line.len()),
        None => line.to_string(),
    }
}

/// The last `n` lines (at most [`TAIL_LINES`]) of a call's output, read
/// from its last [`TAIL_WINDOW`] bytes only, each cut to [`LINE_SHOWN`].
fn tail_lines(output: &[u8], n: usize) -> Vec<String> {
    let n = n.min(TAIL_LINES);
    if n == 0 {
        return Vec::new();
    }
    let window = &output[output.len().saturating_sub(TAIL_WINDOW)..];
    let text = String::from_utf8_lossy(window);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| cut_line(l))
        .collect()
}

/// What is left of [`TAILS_TOTAL`] for one status.
struct TailBudget(usize);

impl Default for TailBudget {
    fn default() -> TailBudget {
        TailBudget(TAILS_TOTAL)
    }
}

impl TailBudget {
    /// The lines that fit what is left, from the newest back.
    fn take(&mut self, lines: Vec<String>) -> Vec<String> {
        let mut kept = Vec::new();
        for l in lines.into_iter().rev() {
            if l.len() + 1 > self.0 {
                break;
            }
            self.0 -= l.len() + 1;
            kept.push(l);
        }
        kept.reverse();
        kept
    }
}

/// The status as one JSON document, for a client's own interface (the
/// Claude Code mod draws its band and panes from it): calls and jobs with
/// their last lines, the trash, the names, the characters returned per
/// agent and tool, and the lines the calling agent has seen per file.
fn status_json(ctx: &BrokerCtx, nib: &Nibash, owner: &str, tail: usize) -> serde_json::Value {
    use serde_json::json;
    let mut budget = TailBudget::default();
    let calls: Vec<_> = nib
        .jobs
        .all_of(owner)
        .iter()
        .map(|e| {
            let s = e.state();
            let lines = budget.take(tail_lines(&s.output, tail));
            let state = if s.ended() {
                "ended"
            } else if s.is_job {
                "job"
            } else {
                "running"
            };
            json!({
                "id": e.id,
                "command": cut_line(&e.command),
                "description": e.description.as_deref().map(cut_line),
                "seconds": e.age().as_secs(),
                "state": state,
                "ending": s.ended().then(|| ending_words(&s)),
                "tail": lines,
            })
        })
        .collect();
    let trash: Vec<_> = nib_files::fs::trash::list_beneath(&ctx.workspace.roots())
        .unwrap_or_default()
        .iter()
        .rev()
        .map(|t| {
            json!({
                "path": ctx.workspace.display(&t.original),
                "deleted": t.deleted,
            })
        })
        .collect();
    let names: Vec<_> = ctx
        .workspace
        .names()
        .list()
        .iter()
        .map(|n| {
            json!({
                "name": n.name,
                "dir": ctx.workspace.display(&n.dir),
                "source": n.source.label(),
            })
        })
        .collect();
    let usage: Vec<_> = own_usage(nib, owner)
        .iter()
        .map(|((agent, tool), (calls, chars))| {
            json!({"agent": agent, "tool": tool, "calls": calls, "chars": chars})
        })
        .collect();
    let seen: Vec<_> = ctx.with_seen(|seen| {
        let mut files = Vec::new();
        let mut last: Option<&std::path::Path> = None;
        for (path, version) in seen.all_versions() {
            // The newest version of each file.
            if last == Some(path) {
                continue;
            }
            last = Some(path);
            files.push(json!({
                "path": ctx.workspace.display(path),
                "tag": version.tag.to_string(),
                "lines": version.text.lines.len(),
                "seen": version.seen.ranges(),
            }));
        }
        files
    });
    json!({
        // What a client runs for nib's command-line verbs (`nib undo`).
        "exe": std::env::current_exe().ok(),
        "project": ctx.workspace.project_dir(),
        "sandbox": ctx.config.sandbox_mode().to_string(),
        "calls": calls,
        "trash": trash,
        "names": names,
        "usage": usage,
        "seen": seen,
    })
}

/// Runs `skim`.
pub fn skim(request: SkimRequest, ctx: &BrokerCtx) -> Result<ToolOutput, ArgError> {
    let SkimRequest {
        paths,
        expect,
        notes,
    } = request;
    if paths.is_empty() {
        return Err(ArgError(
            "\"paths\" names the files to skim (logs, test reports)".into(),
        ));
    }
    let mut out = String::new();
    let mut failed = 0;
    for p in &paths {
        let path = ctx.workspace.resolve(p);
        let shown = ctx.workspace.display(&path);
        match nib_files::fs::read_file(&ctx.scope, &path, nib_files::context::TEXT_LIMIT) {
            Ok(f) => {
                let text = String::from_utf8_lossy(&f.bytes);
                let canonical = nib_files::fs::canonical(&path).unwrap_or(path.clone());
                let part = ctx.with_agent(|a| {
                    crate::nibash::skim::skim(&mut a.skims, &canonical, &shown, &text, &expect)
                });
                out.push_str(&part);
            }
            Err(e) => {
                failed += 1;
                out.push_str(&format!("[{shown}: {e}; not skimmed]\n"));
            }
        }
    }
    nib_files::context::push_notes(&mut out, &notes);
    Ok(if failed == paths.len() {
        ToolOutput::error(out)
    } else {
        ToolOutput::ok(out)
    })
}

/// Characters returned per agent and tool this session (what an agent's
/// context paid for each), biggest first.
/// The usage rows `owner` may see: all of them for the stdio client (its
/// subagents are one client's), an HTTP agent only its own (labelled by its
/// NAME: a server serves either stdio or HTTP, never both).
fn own_usage(nib: &Nibash, owner: &str) -> crate::nibash::Usage {
    let all = nib.usage.lock().unwrap_or_else(|p| p.into_inner());
    all.iter()
        .filter(|((agent, _), _)| owner.is_empty() || agent == owner)
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

fn usage(u: &crate::nibash::Usage) -> String {
    if u.is_empty() {
        return String::new();
    }
    let mut rows: Vec<_> = u.iter().collect();
    rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(b.0)));
    let total: u64 = rows.iter().map(|(_, (_, c))| c).sum();
    let mut out = format!("characters returned this session: {total}\n");
    for ((agent, tool), (calls, chars)) in rows {
        out.push_str(&format!(
            "  {agent} {tool}: {chars} in {calls} call{}\n",
            if *calls == 1 { "" } else { "s" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_read_as_seconds_or_milliseconds_and_are_capped() {
        assert_eq!(parse_timeout("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_timeout("120000"), Some(Duration::from_secs(120)));
        assert_eq!(parse_timeout("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_timeout("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_timeout("3600"), Some(Duration::from_millis(3600)));
        assert_eq!(parse_timeout("60m"), Some(call::MAX_TIMEOUT));
        assert_eq!(parse_timeout("soon"), None);
    }
}
