//! Summaries of long output (`NIB_DECIDER_SUMMARY`): output over
//! [`SUMMARY_ROWS`] lines or [`SUMMARY_BYTES`] gets a `<summary>` of at most
//! three sentences, then the log lines it points at as `N|TEXT` rows, and
//! for a failed call its last [`FAILED_TAIL`] lines.
//!
//! Summarizers are tried in order of preference, within
//! `NIB_DECIDER_SUMMARY_TIMEOUT` in all: a model id at the chat endpoint,
//! `claude-p:MODEL` (`claude -p` with no tools and no MCP servers), or
//! `opencode:PROVIDER/MODEL` (`opencode run` with a data folder of its
//! own). The programs run in nib's sandbox, in a temporary folder that is
//! all they may write. When none answers, the call is shaped by the
//! decider as before, with a note.

use crate::confinement::Confinement;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::llm::cache::{Cache, key};
use crate::llm::client::{Chat, complete};
use crate::llm::{Settings, Summarizer};
use nib_settings::Config;

/// Lines over which output is summarized.
pub const SUMMARY_ROWS: usize = 150;
/// Bytes over which output is summarized.
pub const SUMMARY_BYTES: usize = 12 * 1024;
/// Lines of a failed call shown after the summary.
pub const FAILED_TAIL: usize = 20;
/// Lines the summary may point at.
const MAX_POINTED: usize = 20;
/// Bytes of output put in the prompt (beyond it: the decider's rows).
const PROMPT_BYTES: usize = 48 * 1024;
/// Sentences a summary keeps.
const SENTENCES: usize = 3;

/// Whether output is long enough to summarize.
pub fn wanted(text: &str) -> bool {
    text.len() > SUMMARY_BYTES || text.lines().count() > SUMMARY_ROWS
}

const ASK: &str = "Summarize this command output for a developer in at most three sentences: \
what ran, whether it worked, and what failed and why. Then, on a last line of its own, write LINES: \
followed by the numbers (or ranges like 40-45) of at most 20 lines a developer must read, as \
numbered below.";

/// The prompt: the command, its status, and the output as `N|TEXT`
/// (the rows `fallback` keeps when it is too long).
fn prompt(rows: &[&str], command: &str, code: Option<i32>, fallback: &BTreeSet<usize>) -> String {
    let mut p = format!(
        "{ASK}\n\nCommand: {command}\nExit status: {}\n\n",
        code.map_or("none (still running or killed)".into(), |c| c.to_string())
    );
    let whole: usize = rows.iter().map(|r| r.len() + 8).sum();
    for (i, row) in rows.iter().enumerate() {
        let n = i + 1;
        if whole > PROMPT_BYTES && !fallback.contains(&n) {
            continue;
        }
        let row: String = row.chars().take(300).collect();
        p.push_str(&format!("{n}|{row}\n"));
    }
    p
}

/// The summary's sentences and the lines it points at.
pub fn read_reply(reply: &str, total: usize) -> Option<(String, BTreeSet<usize>)> {
    let mut text = reply.trim();
    let mut lines = BTreeSet::new();
    if let Some(at) = text.rfind("LINES:") {
        for part in text[at + 6..].split([',', ' ', '\n']) {
            let part = part.trim().trim_end_matches('.');
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.parse::<usize>().ok(), b.parse::<usize>().ok()),
                None => (part.parse().ok(), part.parse().ok()),
            };
            if let (Some(a), Some(b)) = (a, b)
                && a >= 1
                && b >= a
            {
                lines.extend((a..=b.min(total)).take(MAX_POINTED));
            }
        }
        text = text[..at].trim();
    }
    let text = text
        .trim_start_matches("<summary>")
        .trim_end_matches("</summary>")
        .trim();
    if text.is_empty() {
        return None;
    }
    // At most three sentences, and no more than a short paragraph.
    let mut kept = String::new();
    let mut sentences = 0;
    for piece in text.split_inclusive(". ") {
        kept.push_str(piece);
        sentences += 1;
        if sentences == SENTENCES {
            break;
        }
    }
    let kept: String = kept.trim().replace('\n', " ").chars().take(700).collect();
    let lines = lines.into_iter().take(MAX_POINTED).collect();
    Some((kept, lines))
}

/// What a summarizer made: the rendered part of the answer.
pub struct Summary {
    /// `<summary>…</summary>` and the rows.
    pub text: String,
    /// Which summarizer answered.
    pub by: String,
}

/// The summary of `rows` by the first summarizer that answers; else the
/// note that says why none did.
pub fn summarize(
    config: &Config,
    rows: &[&str],
    command: &str,
    code: Option<i32>,
    fallback: &BTreeSet<usize>,
    log: Option<&Path>,
) -> Result<Summary, String> {
    let settings = &config.model;
    let asked = prompt(rows, command, code, fallback);
    let deadline = Instant::now() + settings.summary_timeout;
    let cache = settings.cache.as_deref().and_then(Cache::open);
    let mut failures = Vec::new();
    for s in &settings.summarizers {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            failures.push(format!(
                "{}: no time left of {} ms",
                s.label(),
                settings.summary_timeout.as_millis()
            ));
            break;
        }
        let cache_key = key("summary", &[s.label()], ASK, &asked);
        let reply = match cache.as_ref().and_then(|c| c.get(&cache_key)) {
            Some(r) => Ok(r),
            None => ask(config, s, &asked, left),
        };
        match reply {
            Ok(r) => match read_reply(&r, rows.len()) {
                Some((sentences, pointed)) => {
                    if let Some(c) = &cache {
                        c.put(&cache_key, &r);
                    }
                    return Ok(render(rows, &sentences, pointed, code, log, &s.label()));
                }
                None => failures.push(format!("{}: an empty summary", s.label())),
            },
            Err(e) => failures.push(format!("{}: {e}", s.label())),
        }
    }
    Err(failures.join("; "))
}

fn render(
    rows: &[&str],
    sentences: &str,
    mut keep: BTreeSet<usize>,
    code: Option<i32>,
    log: Option<&Path>,
    by: &str,
) -> Summary {
    if code != Some(0) {
        keep.extend(rows.len().saturating_sub(FAILED_TAIL) + 1..=rows.len());
    }
    let mut text = format!("<summary>{sentences}</summary>\n");
    text.push_str(&super::cut::render(rows, &keep, log));
    Summary {
        text,
        by: by.to_string(),
    }
}

fn ask(config: &Config, s: &Summarizer, asked: &str, left: Duration) -> Result<String, String> {
    let settings = &config.model;
    match s {
        Summarizer::Chat(model) => {
            if !settings.may_reach(config.sandbox, &settings.summary_url) {
                return Err("off under NIB_SANDBOX=1 (NIB_DECIDER_SANDBOX=1 allows it)".into());
            }
            let key = settings.key().map(|(k, _)| k);
            if key.is_none() && !crate::llm::is_loopback(&settings.summary_url) {
                return Err(crate::llm::client::ModelError::NoKey.to_string());
            }
            complete(&Chat {
                url: &settings.summary_url,
                models: std::slice::from_ref(model),
                key: key.as_deref(),
                messages: json!([{"role": "user", "content": asked}]),
                schema: None,
                timeout: left,
            })
            .map(|a| a.content)
            .map_err(|e| e.to_string())
        }
        Summarizer::ClaudeP(model) => {
            let argv = [
                "claude",
                "-p",
                "--model",
                model,
                "--tools",
                "",
                "--strict-mcp-config",
                "--output-format",
                "text",
                asked,
            ];
            run_program(config, &argv, &[], left)
        }
        Summarizer::OpenCode(model) => {
            let argv = [settings.opencode.as_str(), "run", "-m", model, asked];
            run_program(config, &argv, &["opencode"], left)
        }
    }
}

/// Runs a summarizer program in the sandbox: its working folder a new
/// temporary one (all it may write), the network only where model calls
/// may leave the machine; `own_data` names programs that get their own
/// `XDG_DATA_HOME` there (with the user's login for them copied in).
fn run_program(
    config: &Config,
    argv: &[&str],
    own_data: &[&str],
    left: Duration,
) -> Result<String, String> {
    if !config.model.may_run_model_programs(config.sandbox) {
        return Err("off under NIB_SANDBOX=1 (NIB_DECIDER_SANDBOX=1 allows it)".into());
    }
    let tmp = tempdir().map_err(|e| format!("no temporary folder: {e}"))?;
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    if let Some(name) = own_data.first() {
        let data = tmp.path.join("data");
        let _ = std::fs::create_dir_all(data.join(name));
        if let Some(user_data) = std::env::var_os("XDG_DATA_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/share")))
        {
            let _ = std::fs::copy(
                user_data.join(name).join("auth.json"),
                data.join(name).join("auth.json"),
            );
        }
        env.push(("XDG_DATA_HOME".into(), data.into_os_string()));
    }
    let mut policy = config.sandbox_policy(std::slice::from_ref(&tmp.path));
    policy.network = true;
    policy.proxy = None;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find nib's own binary: {e}"))?;
    let sandbox = nib_sandbox::Sandbox::new(&nib_sandbox::entry_beside(&exe), policy);
    let program: Vec<OsString> = argv.iter().map(OsString::from).collect();
    let worker = sandbox
        .spawn(&program, &tmp.path, &env)
        .map_err(|e| e.to_string())?;
    let out = worker.wait(Some(left));
    if out.timed_out {
        return Err(format!("no answer within {} ms", left.as_millis()));
    }
    if out.code != Some(0) {
        let first = String::from_utf8_lossy(&out.stderr)
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect::<String>();
        return Err(format!(
            "{} exited {}{}",
            argv[0],
            out.code.map_or("by a signal".into(), |c| c.to_string()),
            if first.is_empty() {
                String::new()
            } else {
                format!(": {first:?}")
            }
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A temporary folder removed when dropped.
struct TempDir {
    path: std::path::PathBuf,
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn tempdir() -> std::io::Result<TempDir> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "nib-summary-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&path)?;
    Ok(TempDir { path })
}

/// One line for nibash_status: the summarizers and whether they are on.
pub fn describe(settings: &Settings, sandbox: bool, off_for_session: bool) -> String {
    let decider = match settings.decider {
        crate::llm::DeciderKind::Fixed => "fixed".to_string(),
        crate::llm::DeciderKind::Keywords => "keywords".to_string(),
        crate::llm::DeciderKind::OpenRouter => {
            if settings.may_reach(sandbox, &settings.decision_url) {
                format!("openrouter ({})", settings.decision_models.join(", "))
            } else {
                "openrouter, off under NIB_SANDBOX=1 (NIB_DECIDER_SANDBOX=1 allows it; keywords meanwhile)"
                    .to_string()
            }
        }
    };
    let summaries = if settings.summarizers.is_empty() {
        "none (NIB_DECIDER_SUMMARY)".to_string()
    } else {
        let names: Vec<String> = settings.summarizers.iter().map(Summarizer::label).collect();
        let state = if sandbox && !settings.decider_sandbox {
            "off under NIB_SANDBOX=1 (NIB_DECIDER_SANDBOX=1 allows them)"
        } else if off_for_session {
            "off for this session (nibash_control {\"summaries\": true} turns them on)"
        } else {
            "on"
        };
        format!("{} — {state}", names.join(", "))
    };
    format!("long output: decider {decider}; summaries: {summaries}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_give_sentences_and_lines() {
        let (s, lines) = read_reply(
            "The build failed. Two tests broke. The linker could not find zlib. Extra words.\nLINES: 12, 40-42, 999",
            100,
        )
        .unwrap();
        assert_eq!(
            s,
            "The build failed. Two tests broke. The linker could not find zlib."
        );
        assert_eq!(lines.into_iter().collect::<Vec<_>>(), vec![12, 40, 41, 42]);
        assert!(read_reply("LINES: 3", 10).is_none());
        let (s, lines) = read_reply("<summary>All passed.</summary>", 10).unwrap();
        assert_eq!((s.as_str(), lines.len()), ("All passed.", 0));
    }

    #[test]
    fn long_output_is_wanted_by_rows_or_bytes() {
        assert!(!wanted(&"x\n".repeat(150)));
        assert!(wanted(&"x\n".repeat(151)));
        assert!(wanted(&"y".repeat(12 * 1024 + 1)));
    }
}
