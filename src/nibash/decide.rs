//! The `openrouter` decider (`NIB_DECIDER=openrouter`): the rows the
//! keyword decider keeps, plus windows of the rest that a decision model
//! rates as relevant to the call's `description` and `expect`.
//!
//! The model is asked over the OpenAI-compatible chat completions API with a
//! JSON-schema answer (`{"keep": [{"window", "why"}]}`) at
//! `NIB_DECIDER_URL`. Any failure — no key, the sandbox, a timeout, an
//! error status, an answer that does not parse — leaves the keyword rows
//! and a one-line note; the call's answer never waits past
//! `NIB_DECIDER_TIMEOUT`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::llm::Settings;
use crate::llm::cache::{Cache, key};
use crate::llm::client::{Chat, complete};

/// Rows in one window.
const WINDOW: usize = 20;
/// Windows offered at most (the first and last halves of this many).
const MAX_WINDOWS: usize = 60;
/// Characters of one row in the prompt.
const ROW_CHARS: usize = 160;

/// What the call was for.
pub struct Purpose<'a> {
    /// The command line.
    pub command: &'a str,
    /// The call's `description`.
    pub description: Option<&'a str>,
    /// The call's `expect`.
    pub expect: Option<&'a str>,
    /// Its exit status.
    pub code: Option<i32>,
}

/// The windows of rows outside `keep`: (first line, last line), 1-based.
pub fn windows(total: usize, keep: &BTreeSet<usize>) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    while line <= total {
        if keep.contains(&line) {
            line += 1;
            continue;
        }
        let start = line;
        while line <= total && !keep.contains(&line) && line - start < WINDOW {
            line += 1;
        }
        out.push((start, line - 1));
    }
    if out.len() > MAX_WINDOWS {
        let tail = out.split_off(out.len() - MAX_WINDOWS / 2);
        out.truncate(MAX_WINDOWS / 2);
        out.extend(tail);
    }
    out
}

fn prompt(rows: &[&str], windows: &[(usize, usize)], purpose: &Purpose<'_>) -> String {
    let mut p = format!("Command: {}\n", purpose.command);
    if let Some(d) = purpose.description {
        p.push_str(&format!("What the call is for: {d}\n"));
    }
    if let Some(e) = purpose.expect {
        p.push_str(&format!("What the caller looks for: {e}\n"));
    }
    if let Some(c) = purpose.code {
        p.push_str(&format!("Exit status: {c}\n"));
    }
    p.push_str("\nWindows of the output not shown yet:\n");
    for (i, (a, b)) in windows.iter().enumerate() {
        p.push_str(&format!("\n#{} (lines {a}-{b})\n", i + 1));
        for line in *a..=*b {
            let row: String = rows
                .get(line - 1)
                .copied()
                .unwrap_or_default()
                .chars()
                .take(ROW_CHARS)
                .collect();
            p.push_str(&row);
            p.push('\n');
        }
    }
    p
}

const SYSTEM: &str = "You help a developer read long command output. The lines that name errors \
and failures are already shown. From the numbered windows of the rest, pick the few a developer must \
also see for what the call is for (causes, the failing test's details, versions or settings that \
explain a failure); pick none when none matter. Answer only with the JSON asked for.";

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "keep": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "window": {"type": "integer"},
                        "why": {"type": "string"}
                    },
                    "required": ["window", "why"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["keep"],
        "additionalProperties": false
    })
}

/// The windows the answer keeps, with why; `None` when it does not parse.
fn read_answer(content: &str, count: usize) -> Option<Vec<(usize, String)>> {
    let v: Value = serde_json::from_str(content.trim()).ok()?;
    let keep = v.get("keep")?.as_array()?;
    let mut out = Vec::new();
    for k in keep {
        let w = usize::try_from(k.get("window")?.as_u64()?).ok()?;
        if (1..=count).contains(&w) {
            let why = k.get("why").and_then(Value::as_str).unwrap_or("").trim();
            out.push((w, why.to_string()));
        }
    }
    Some(out)
}

/// Adds the windows the model keeps to `keep` (the keyword decider's
/// rows); returns the note for the answer.
pub fn add_windows(
    rows: &[&str],
    keep: &mut BTreeSet<usize>,
    purpose: &Purpose<'_>,
    settings: &Settings,
    sandbox: bool,
) -> String {
    let failed = |why: String| {
        format!("[decider openrouter: {why}; the keyword decider's rows are shown]\n")
    };
    if !settings.may_reach(sandbox, &settings.decision_url) {
        return failed("off under NIB_SANDBOX=1 (NIB_DECIDER_SANDBOX=1 allows it)".into());
    }
    let loopback = crate::llm::is_loopback(&settings.decision_url);
    let key = settings.key().map(|(k, _)| k);
    if key.is_none() && !loopback {
        return failed(crate::llm::client::ModelError::NoKey.to_string());
    }
    let windows = windows(rows.len(), keep);
    if windows.is_empty() {
        return String::new();
    }
    let asked = prompt(rows, &windows, purpose);
    let cache = settings.cache.as_deref().and_then(Cache::open);
    let cache_key = key_for(&settings.decision_models, &asked);
    let cached = cache.as_ref().and_then(|c| c.get(&cache_key));
    let (model, content) = match cached {
        Some(c) => ("cached".to_string(), c),
        None => {
            let answer = complete(&Chat {
                url: &settings.decision_url,
                models: &settings.decision_models,
                key: key.as_deref(),
                messages: json!([
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": asked}
                ]),
                schema: Some(schema()),
                timeout: settings.decision_timeout,
            });
            match answer {
                Ok(a) => (a.model, a.content),
                Err(e) => return failed(e.to_string()),
            }
        }
    };
    let Some(picked) = read_answer(&content, windows.len()) else {
        return failed("its answer is not the JSON asked for".into());
    };
    if let Some(c) = &cache {
        c.put(&cache_key, &content);
    }
    let mut whys = Vec::new();
    for (w, why) in &picked {
        let (a, b) = windows[w - 1];
        keep.extend(a..=b);
        if !why.is_empty() {
            whys.push(format!("{a}-{b}: {why}"));
        }
    }
    let whys: String = whys.join("; ").chars().take(400).collect();
    format!(
        "[decider openrouter ({model}): {} of {} windows kept{}]\n",
        picked.len(),
        windows.len(),
        if whys.is_empty() {
            String::new()
        } else {
            format!(" — {whys}")
        }
    )
}

fn key_for(models: &[String], asked: &str) -> String {
    key("decision", models, SYSTEM, asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_the_rows_not_kept_in_pieces() {
        let keep: BTreeSet<usize> = [1, 2, 50].into_iter().collect();
        assert_eq!(
            windows(60, &keep),
            vec![(3, 22), (23, 42), (43, 49), (51, 60)]
        );
        let many = windows(10_000, &BTreeSet::new());
        assert_eq!(many.len(), MAX_WINDOWS);
        assert_eq!(many[0], (1, 20));
        assert_eq!(many[MAX_WINDOWS - 1], (9981, 10_000));
    }

    #[test]
    fn answers_are_read_strictly() {
        assert_eq!(
            read_answer(
                r#"{"keep": [{"window": 2, "why": "the cause"}, {"window": 9, "why": "x"}]}"#,
                3
            ),
            Some(vec![(2, "the cause".to_string())])
        );
        assert_eq!(read_answer("not json", 3), None);
        assert_eq!(read_answer(r#"{"other": 1}"#, 3), None);
    }
}
