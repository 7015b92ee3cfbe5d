//! A provider for nib's tests: an MCP server on stdio (rmcp's) whose
//! `search` tool answers with prose and locations, and whose flags make it
//! misbehave in each way a provider can.
//!
//! Roots are deprecated in rmcp (SEP-2577) but nib answers them; the
//! `roots` tool shows what it answered.
//!
//! `nib-test-provider [FLAG…] [nib-provider]`
//! - (none): `search {query}` finds lines holding `query` in the files of
//!   the working folder (and one level below), answering with
//!   `structuredContent.locations`; `search_text` answers the same with
//!   `path:N` in its text only; `outside` names `/etc/hostname:1`;
//!   `touch {path}` creates a file and says whether it could; `slow {ms,
//!   mark}` sends progress, then answers (writing `mark` when cancelled);
//!   `roots` lists the roots nib gave it; `exec {program}` runs a program;
//!   `read {path}` answers with a file's text; `env {name}` with a variable.
//! - `--crash-on-call`: any call ends the process (exit 3, after a stderr line).
//! - `--crash-at-start`: a stderr line, exit 4, before the handshake.
//! - `--hang`: calls are never answered.
//! - `--late MS`: waits before answering the handshake.
//! - `--more-tools MS`: adds a tool `extra` after MS and says the list changed.
//! - `--raw junk|malformed|huge|flood`: a hand-written server whose calls
//!   are answered with text that is not JSON, a result that is not a tool
//!   result, a 12 MiB line, or a 2 MiB text.

#![allow(deprecated)]

use std::borrow::Cow;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct Provider {
    crash_on_call: bool,
    hang: bool,
    extra: Arc<AtomicBool>,
}

fn tool(name: &'static str, description: &'static str, props: Value) -> Tool {
    let schema = json!({"type": "object", "properties": props});
    let Value::Object(map) = schema else {
        unreachable!("an object literal")
    };
    Tool::new(name, description, Arc::new(map))
}

/// Lines holding `query` in the files of `dir` and one level below.
fn find(dir: &Path, query: &str) -> Vec<(String, usize, String)> {
    let mut files: Vec<PathBuf> = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            {
                continue;
            }
            if let Ok(inner) = std::fs::read_dir(&p) {
                files.extend(inner.flatten().map(|e| e.path()).filter(|p| p.is_file()));
            }
        } else {
            files.push(p);
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if line.contains(query) {
                let rel = f.strip_prefix(dir).unwrap_or(&f).display().to_string();
                out.push((rel, i + 1, line.trim().to_string()));
            }
        }
    }
    out
}

fn arg<'a>(params: &'a CallToolRequestParams, key: &str) -> &'a str {
    params
        .arguments
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl ServerHandler for Provider {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let q = json!({"query": {"type": "string"}});
        let mut tools = vec![
            tool("search", "Finds lines holding a text.", q.clone()),
            tool("search_text", "Finds lines, locations in the text.", q),
            tool("outside", "Names a file outside the project.", json!({})),
            tool(
                "touch",
                "Creates a file.",
                json!({"path": {"type": "string"}}),
            ),
            tool(
                "slow",
                "Waits, with progress.",
                json!({"ms": {"type": "string"}}),
            ),
            tool("roots", "Lists the roots.", json!({})),
            tool(
                "exec",
                "Runs a program.",
                json!({"program": {"type": "string"}}),
            ),
            tool("read", "Reads a file.", json!({"path": {"type": "string"}})),
            tool(
                "env",
                "Shows an environment variable.",
                json!({"name": {"type": "string"}}),
            ),
        ];
        if self.extra.load(Ordering::SeqCst) {
            tools.push(tool("extra", "Appeared later.", json!({})));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.answer(params, context).await.map(Into::into)
    }
}

impl Provider {
    async fn answer(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if self.crash_on_call {
            eprintln!("test provider: crashing as asked");
            std::process::exit(3);
        }
        if self.hang {
            std::future::pending::<()>().await;
        }
        let here = std::env::current_dir().unwrap_or_default();
        let name: Cow<str> = params.name.clone();
        match name.as_ref() {
            "search" => {
                let hits = find(&here, arg(&params, "query"));
                let locations: Vec<Value> = hits
                    .iter()
                    .map(|(p, n, text)| json!({"path": p, "line": n, "endLine": n, "note": format!("holds {text:?}")}))
                    .collect();
                let mut r = CallToolResult::success(vec![ContentBlock::text(format!(
                    "{} lines hold {:?}.",
                    hits.len(),
                    arg(&params, "query")
                ))]);
                r.structured_content = Some(json!({"locations": locations}));
                Ok(r)
            }
            "search_text" => {
                let hits = find(&here, arg(&params, "query"));
                let text: Vec<String> = hits.iter().map(|(p, n, _)| format!("- {p}:{n}")).collect();
                Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                    "Found at:\n{}",
                    text.join("\n")
                ))]))
            }
            "outside" => {
                let mut r = CallToolResult::success(vec![ContentBlock::text("Two places.")]);
                r.structured_content = Some(json!({"locations": [
                    {"path": "/etc/hostname", "line": 1},
                    {"path": "README.md", "line": 1}
                ]}));
                Ok(r)
            }
            "touch" => {
                let path = arg(&params, "path");
                let said = match std::fs::write(path, b"written by the provider\n") {
                    Ok(()) => format!("created {path}"),
                    Err(e) => format!("could not create {path}: {e}"),
                };
                Ok(CallToolResult::success(vec![ContentBlock::text(said)]))
            }
            "slow" => {
                let ms: u64 = arg(&params, "ms").parse().unwrap_or(300);
                let mark = arg(&params, "mark");
                let token = context.meta.get_progress_token();
                for step in 1..=3u32 {
                    tokio::select! {
                        _ = tokio::time::sleep(std::time::Duration::from_millis(ms / 3)) => {}
                        _ = context.ct.cancelled() => {
                            if !mark.is_empty() {
                                let _ = std::fs::write(mark, b"cancelled\n");
                            }
                            return Ok(CallToolResult::success(vec![ContentBlock::text("cancelled")]));
                        }
                    }
                    if let Some(t) = &token {
                        let p =
                            rmcp::model::ProgressNotificationParam::new(t.clone(), f64::from(step))
                                .with_message(format!("step {step}"));
                        let _ = context.peer.notify_progress(p).await;
                    }
                }
                Ok(CallToolResult::success(vec![ContentBlock::text(
                    "done waiting",
                )]))
            }
            "roots" => {
                #[allow(deprecated)]
                let roots = context.peer.list_roots().await;
                let text = match roots {
                    Ok(r) => r
                        .roots
                        .iter()
                        .map(|r| r.uri.clone())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    Err(e) => format!("no roots: {e}"),
                };
                Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
            }
            "exec" => {
                let program = arg(&params, "program");
                let said = match std::process::Command::new(program).status() {
                    Ok(s) => format!("ran {program}: {s}"),
                    Err(e) => format!("could not run {program}: {e}"),
                };
                Ok(CallToolResult::success(vec![ContentBlock::text(said)]))
            }
            "read" => {
                let path = arg(&params, "path");
                let said = match std::fs::read_to_string(path) {
                    Ok(text) => format!("read {path}: {text}"),
                    Err(e) => format!("could not read {path}: {e}"),
                };
                Ok(CallToolResult::success(vec![ContentBlock::text(said)]))
            }
            "env" => {
                let name = arg(&params, "name");
                let said = match std::env::var(name) {
                    Ok(value) => format!("{name}={value}"),
                    Err(_) => format!("{name} is not set"),
                };
                Ok(CallToolResult::success(vec![ContentBlock::text(said)]))
            }
            "extra" => Ok(CallToolResult::success(vec![ContentBlock::text("extra")])),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

/// A server written by hand: a correct handshake and tool list, then
/// calls answered the way `how` says.
fn raw(how: &str) {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = msg.get("id").cloned();
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let answer = match method {
            "initialize" => {
                json!({"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "0"}})
            }
            "tools/list" => {
                json!({"tools": [{"name": "search", "inputSchema": {"type": "object"}}]})
            }
            "tools/call" => match how {
                "junk" => {
                    let _ = writeln!(out, "this is not json, and no answer follows");
                    let _ = out.flush();
                    continue;
                }
                "malformed" => json!({"content": "a string where a list belongs", "isError": "no"}),
                "huge" => {
                    let big = "x".repeat(12 << 20);
                    json!({"content": [{"type": "text", "text": big}]})
                }
                "flood" => {
                    let big = "flood line\n".repeat(200_000);
                    json!({"content": [{"type": "text", "text": big}]})
                }
                _ => json!({}),
            },
            _ => continue,
        };
        if let Some(id) = id {
            let _ = writeln!(
                out,
                "{}",
                json!({"jsonrpc": "2.0", "id": id, "result": answer})
            );
            let _ = out.flush();
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let value = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if flag("--crash-at-start") {
        eprintln!("test provider: cannot start, as asked");
        std::process::exit(4);
    }
    if let Some(how) = value("--raw") {
        raw(&how);
        return;
    }
    if let Some(ms) = value("--late").and_then(|v| v.parse().ok()) {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    let provider = Provider {
        crash_on_call: flag("--crash-on-call"),
        hang: flag("--hang"),
        extra: Arc::default(),
    };
    let extra = Arc::clone(&provider.extra);
    let Ok(running) = provider
        .serve((tokio::io::stdin(), tokio::io::stdout()))
        .await
    else {
        return;
    };
    if let Some(ms) = value("--more-tools").and_then(|v| v.parse().ok()) {
        let peer = running.peer().clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            extra.store(true, Ordering::SeqCst);
            let _ = peer.notify_tool_list_changed().await;
        });
    }
    let _ = running.waiting().await;
}
