//! A loopback stand-in for a model's Messages API (the shape Claude Code and
//! OpenCode's Anthropic provider speak), answering from a script: the real
//! clients run end to end with no key and no network, in nib's tests and in
//! the task benchmark's replay mode.
//!
//! What it owns: HTTP on 127.0.0.1 (one request per connection), the
//! script's order, the answer's wire shape (a JSON message, or the
//! server-sent events of a streamed one), and a log of every request body
//! so a test can read what the model was sent. What it leaves to its
//! callers: which client runs, and what the script says.
//!
//! A request that offers tools is a turn of an agent's loop and takes the
//! script's next step; one that offers none (a client's side request: a
//! title, a summary) is answered with a short text and takes no step.

#![deny(missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One answer of the script: an optional text, then an optional tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// What the model says first.
    pub text: Option<String>,
    /// A tool call: its name and input. `{{tag PATH}}` in an input string
    /// becomes the tag the last tool result printed for PATH (`[PATH#TAG]`).
    pub tool: Option<(String, Value)>,
}

/// The steps, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Script {
    /// The steps; each request is answered by the next one.
    pub steps: Vec<Step>,
}

/// Why a script could not be read.
#[derive(Debug)]
pub struct ScriptError(String);

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScriptError {}

impl Script {
    /// Reads `{"steps": [{"text": "…"}, {"tool": "NAME", "input": {…}}, …]}`.
    pub fn parse(text: &str) -> Result<Script, ScriptError> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            ScriptError(format!(
                "the script is not JSON ({e}); fix it and start again"
            ))
        })?;
        let Some(steps) = value.get("steps").and_then(Value::as_array) else {
            return Err(ScriptError(
                "the script has no \"steps\" list; write {\"steps\": [{\"text\": \"…\"}, {\"tool\": NAME, \"input\": {…}}]}".into(),
            ));
        };
        let mut out = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            let text = s.get("text").and_then(Value::as_str).map(str::to_owned);
            let tool = match s.get("tool") {
                None => None,
                Some(Value::String(name)) => Some((
                    name.clone(),
                    s.get("input").cloned().unwrap_or_else(|| json!({})),
                )),
                Some(_) => {
                    return Err(ScriptError(format!(
                        "step {}: \"tool\" must be a tool's name (a string)",
                        i + 1
                    )));
                }
            };
            if text.is_none() && tool.is_none() {
                return Err(ScriptError(format!(
                    "step {}: a step needs a \"text\", a \"tool\", or both",
                    i + 1
                )));
            }
            out.push(Step { text, tool });
        }
        Ok(Script { steps: out })
    }

    /// Reads a script file.
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScriptError(format!("cannot read {}: {e}", path.display())))?;
        Script::parse(&text)
    }
}

/// A running mock: its address, and what it was sent.
pub struct Mock {
    /// The loopback port it listens on.
    pub port: u16,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    next: usize,
    steps: Vec<Step>,
    requests: Vec<Value>,
    log: Option<PathBuf>,
    ids: u64,
}

impl Mock {
    /// Listens on a free loopback port and serves on a thread of its own
    /// until the process ends. Every request body is also appended to `log`
    /// (one JSON object a line) when given.
    pub fn start(script: Script, log: Option<PathBuf>) -> std::io::Result<Mock> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        Mock::serve(listener, script, log)
    }

    /// Serves on a listener the caller bound.
    pub fn serve(
        listener: TcpListener,
        script: Script,
        log: Option<PathBuf>,
    ) -> std::io::Result<Mock> {
        let port = listener.local_addr()?.port();
        let state = Arc::new(Mutex::new(State {
            steps: script.steps,
            log,
            ..State::default()
        }));
        let shared = Arc::clone(&state);
        std::thread::Builder::new()
            .name("mock-model".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    let state = Arc::clone(&shared);
                    let _ = std::thread::Builder::new()
                        .name("mock-model-conn".into())
                        .spawn(move || {
                            let _ = handle(stream, &state);
                        });
                }
            })?;
        Ok(Mock { port, state })
    }

    /// The base URL a client is given (`ANTHROPIC_BASE_URL`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.state).requests.clone()
    }

    /// How many of the script's steps were answered.
    pub fn steps_taken(&self) -> usize {
        lock(&self.state).next
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

fn read_request(stream: &TcpStream) -> std::io::Result<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "content-length" {
                length = value.parse().unwrap_or(0);
            } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            if n == 0 {
                let mut end = String::new();
                let _ = reader.read_line(&mut end);
                break;
            }
            let mut chunk = vec![0; n];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk);
            let mut crlf = [0; 2];
            reader.read_exact(&mut crlf)?;
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    Ok(Request { method, path, body })
}

fn handle(mut stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let request = read_request(&stream)?;
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let route = request.path.split('?').next().unwrap_or_default();
    if request.method != "POST" {
        return respond(&mut stream, "application/json", b"{}");
    }
    if route.ends_with("/count_tokens") {
        let n = request.body.len() / 4;
        return respond(
            &mut stream,
            "application/json",
            json!({"input_tokens": n}).to_string().as_bytes(),
        );
    }
    if !route.ends_with("/messages") {
        return respond(&mut stream, "application/json", b"{}");
    }
    let (step, id) = {
        let mut s = lock(state);
        s.requests.push(body.clone());
        if let Some(log) = &s.log
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
        {
            let _ = writeln!(f, "{}", json!({"path": request.path, "body": body}));
        }
        s.ids += 1;
        let offers_tools = body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        let step = if offers_tools {
            let step = s.steps.get(s.next).cloned();
            if step.is_some() {
                s.next += 1;
            }
            step.unwrap_or(Step {
                text: Some("(the script has no more steps)".into()),
                tool: None,
            })
        } else {
            Step {
                text: Some("ok".into()),
                tool: None,
            }
        };
        (step, s.ids)
    };
    let message = answer(&step, id, &body, request.body.len());
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        respond(
            &mut stream,
            "text/event-stream",
            events(&message).as_bytes(),
        )
    } else {
        respond(
            &mut stream,
            "application/json",
            message.to_string().as_bytes(),
        )
    }
}

fn respond(stream: &mut TcpStream, kind: &str, body: &[u8]) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    stream.flush()
}

/// The message a step answers with.
fn answer(step: &Step, id: u64, request: &Value, request_bytes: usize) -> Value {
    let mut content = Vec::new();
    if let Some(text) = &step.text {
        content.push(json!({"type": "text", "text": text}));
    }
    if let Some((name, input)) = &step.tool {
        let input = fill(input, &tool_results(request));
        content.push(json!({"type": "tool_use", "id": format!("toolu_mock{id:04}"), "name": name, "input": input}));
    }
    let output_tokens = content
        .iter()
        .map(|c| c.to_string().len() / 4)
        .sum::<usize>()
        .max(1);
    json!({
        "id": format!("msg_mock{id:04}"),
        "type": "message",
        "role": "assistant",
        "model": request.get("model").cloned().unwrap_or_else(|| json!("mock")),
        "content": content,
        "stop_reason": if step.tool.is_some() { "tool_use" } else { "end_turn" },
        "stop_sequence": null,
        "usage": {"input_tokens": (request_bytes / 4).max(1), "output_tokens": output_tokens},
    })
}

/// The text of every tool result in the request, oldest first.
fn tool_results(request: &Value) -> String {
    let mut out = String::new();
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for m in &messages {
        let Some(blocks) = m.get("content").and_then(Value::as_array) else {
            continue;
        };
        for b in blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        {
            match b.get("content") {
                Some(Value::String(s)) => out.push_str(s),
                Some(Value::Array(parts)) => {
                    for p in parts {
                        if let Some(t) = p.get("text").and_then(Value::as_str) {
                            out.push_str(t);
                            out.push('\n');
                        }
                    }
                }
                _ => {}
            }
            out.push('\n');
        }
    }
    out
}

/// Replaces `{{tag PATH}}` in every string of `input` with the last tag
/// `results` printed for PATH.
fn fill(input: &Value, results: &str) -> Value {
    match input {
        Value::String(s) => Value::String(fill_text(s, results)),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, results)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, results)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn fill_text(text: &str, results: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{tag ") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 6..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let path = after[..end].trim();
        out.push_str(&last_tag(results, path).unwrap_or_else(|| "0000".into()));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

fn last_tag(results: &str, path: &str) -> Option<String> {
    let needle = format!("{path}#");
    let at = results.rfind(&needle)?;
    let tag: String = results[at + needle.len()..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    (!tag.is_empty()).then_some(tag)
}

/// A message as the server-sent events of a streamed answer.
fn events(message: &Value) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    event(
        "message_start",
        json!({"type": "message_start", "message": start}),
    );
    let blocks = message
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (index, block) in blocks.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let mut head = block.clone();
                head["input"] = json!({});
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": head}),
                );
                let input = block
                    .get("input")
                    .cloned()
                    .unwrap_or_else(|| json!({}))
                    .to_string();
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": input}}),
                );
            }
            _ => {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
                );
                let text = block.get("text").cloned().unwrap_or_else(|| json!(""));
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
                );
            }
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null}, "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_reads_text_and_tool_steps_and_refuses_empty_ones() {
        let s = Script::parse(
            r#"{"steps":[{"text":"hi"},{"tool":"mcp__nib__read","input":{"paths":["a"]}}]}"#,
        );
        assert_eq!(
            s.ok(),
            Some(Script {
                steps: vec![
                    Step {
                        text: Some("hi".into()),
                        tool: None
                    },
                    Step {
                        text: None,
                        tool: Some(("mcp__nib__read".into(), json!({"paths": ["a"]})))
                    },
                ]
            })
        );
        let e = Script::parse(r#"{"steps":[{}]}"#)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("step 1: a step needs a \"text\", a \"tool\", or both")
        );
    }

    #[test]
    fn tags_come_from_the_last_result_that_printed_the_path() {
        let request = json!({"messages": [
            {"role": "user", "content": [{"type": "tool_result", "content": "[a.txt#1A2B]\n1:x"}]},
            {"role": "user", "content": [{"type": "tool_result", "content": [{"type": "text", "text": "[a.txt#FFEE]\n1:y"}]}]},
        ]});
        let filled = fill(
            &json!({"patch": "[a.txt#{{tag a.txt}}]\n1: z", "n": 3}),
            &tool_results(&request),
        );
        assert_eq!(filled, json!({"patch": "[a.txt#FFEE]\n1: z", "n": 3}));
        assert_eq!(fill_text("{{tag b.txt}}", "[a.txt#1]"), "0000");
    }

    #[test]
    fn a_streamed_answer_is_events_a_client_can_put_back_together() {
        let m = answer(
            &Step {
                text: Some("ok".into()),
                tool: Some(("t".into(), json!({"k": 1}))),
            },
            1,
            &json!({"model": "m"}),
            40,
        );
        let e = events(&m);
        let names: Vec<&str> = e
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert!(e.contains(r#""partial_json":"{\"k\":1}""#), "{e}");
        assert_eq!(m["stop_reason"], "tool_use");
    }

    #[test]
    fn requests_with_tools_take_steps_and_side_requests_do_not()
    -> Result<(), Box<dyn std::error::Error>> {
        let mock = Mock::start(Script::parse(r#"{"steps":[{"text":"first"}]}"#)?, None)?;
        let post = |body: &str| -> Result<String, std::io::Error> {
            let mut s = TcpStream::connect(("127.0.0.1", mock.port))?;
            write!(
                s,
                "POST /v1/messages?beta=true HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )?;
            let mut out = String::new();
            s.read_to_string(&mut out)?;
            Ok(out)
        };
        assert!(post(r#"{"messages":[]}"#)?.contains(r#""text":"ok""#));
        assert_eq!(mock.steps_taken(), 0);
        assert!(post(r#"{"tools":[{"name":"x"}],"messages":[]}"#)?.contains(r#""text":"first""#));
        assert!(post(r#"{"tools":[{"name":"x"}],"messages":[]}"#)?.contains("no more steps"));
        assert_eq!(mock.requests().len(), 3);
        Ok(())
    }
}
