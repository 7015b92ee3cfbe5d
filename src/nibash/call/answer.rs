//! A call's answer: what the call printed, cut to what matters when it is
//! long (the deciders, the summaries), the closing lines (changed files,
//! refusals, withheld variables), the seen rows counted; or the job it
//! became.

use std::sync::Arc;
use std::time::Duration;

use crate::broker_ctx::BrokerCtx;
use nib_files::context::ToolOutput;

use crate::nibash::{Nibash, cut};

use super::args::CallArgs;
use super::consume::{Consumer, OUTPUT_STOP, exec_refusals};
use super::seen_rows::record_seen;

/// How a one-call `nib sh` ended: `one_shot` (no server: nothing becomes
/// a job), `stopped` (still running at the timeout, so ended).
pub(super) struct OneShot {
    pub(super) one_shot: bool,
    pub(super) stopped: bool,
}

/// Builds the answer from what the call printed, and leaves a job running
/// when the call did not end (in a server).
pub(super) fn answer(
    ctx: &BrokerCtx,
    nib: &Arc<Nibash>,
    args: &CallArgs,
    consumer: Consumer,
    finished_jobs: String,
    started_at: crate::nibash::changes::Start,
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
    let (shaped, shown_whole) = cut_or_summarize(ctx, nib, args, &text, &bytes, code, &entry);
    out.push_str(&shaped);
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
    out.push_str(&crate::nibash::changes::report(
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

/// Long output cut to the rows that matter (the decider, the agent's
/// `expect`), or summarized when a summarizer answers; the whole output
/// goes to a log named in the first row. Returns the text and whether the
/// output is still shown whole (only a summary replaces it).
fn cut_or_summarize(
    ctx: &BrokerCtx,
    nib: &Nibash,
    args: &CallArgs,
    text: &str,
    bytes: &[u8],
    code: Option<i32>,
    call: &crate::nibash::jobs::Entry,
) -> (String, bool) {
    // nib's own commands (cat, head, grep …) already cut their rows to a
    // tool's answer: one cut, one numbering.
    let long = cut::is_long(text) && !cut::is_own_rows(text);
    let summarize = !ctx.config.model.summarizers.is_empty()
        && nib.summaries_on(&call.owner)
        && crate::nibash::summary::wanted(text);
    let mut out = String::new();
    let mut shown_whole = !long;
    if !(long || summarize) {
        return (out, shown_whole);
    }
    let name = format!("nibash-{}-{}", std::process::id(), call.id);
    let log = cut::save_log(&name, bytes).ok();
    let rows: Vec<&str> = text.lines().collect();
    let words = cut::expect_words(args.expect.as_deref().unwrap_or_default(), &rows);
    let extra = |row: &str| cut::has_word(row, &words);
    let mut keep = cut::pick(&rows, cut::Decider::of(ctx.config.model.decider), &extra);
    let whole_in = log
        .as_ref()
        .map(|p| format!(", whole in {}", p.display()))
        .unwrap_or_default();
    let summary = summarize.then(|| {
        crate::nibash::summary::summarize(
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
                crate::nibash::decide::add_windows(
                    &rows,
                    &mut keep,
                    &crate::nibash::decide::Purpose {
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
    (out, shown_whole)
}

/// Messages name `/dev/null` where the worker pointed a `2>/dev/null` at a
/// capture file of its own (`worker::discarded`): nib's internal paths never
/// show.
pub(super) fn hide_captures(text: String) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_paths_read_as_dev_null() {
        assert_eq!(
            hide_captures(
                "error: failed to redirect to /tmp/nib-confined-1-2/nib-stderr-31-0: x\n".into()
            ),
            "error: failed to redirect to /dev/null: x\n"
        );
        assert_eq!(hide_captures("plain\n".into()), "plain\n");
    }
}
