//! The stdio framing guard between the client and rmcp.
//!
//! rmcp drops a line it cannot decode without answering, which leaves a client
//! waiting. This guard reads stdin line by line and hands rmcp only lines that
//! decode as client JSON-RPC messages, decoded (rmcp's transport takes
//! messages, so each line is decoded once); for any other line it answers itself:
//! `-32700` (parse error) for text that is not JSON, `-32600` (invalid request)
//! for JSON that is not a JSON-RPC message (with the request's id when it has
//! one), or a line over [`MAX_LINE`]. One writer task owns stdout, so rmcp's
//! messages and these answers never interleave, and stdout carries nothing else.
//! When stdin closes, every request already forwarded still gets its
//! answer: the message stream to rmcp stays open until each has been
//! written, for at most [`CLOSING_GRACE`]; a request still running then
//! gets a JSON-RPC error saying so (and rmcp's late answer to it is
//! dropped), the stream ends, rmcp ends its session, and the writer drains
//! what is left.

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc as messages;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest line accepted from the client (an 8 MiB write, JSON-escaped, fits).
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// How long requests still running when stdin closes may take to answer
/// before each gets an error instead (docs/protocol.md states it).
pub const CLOSING_GRACE: Duration = Duration::from_secs(5);

/// The requests forwarded to rmcp and not answered yet (ids as JSON text),
/// and those the guard answered itself at the close (rmcp's late answers
/// to them are dropped, so no id is answered twice).
#[derive(Default)]
struct Pending {
    open: Mutex<HashSet<String>>,
    abandoned: Mutex<HashSet<String>>,
    answered: tokio::sync::Notify,
}

impl Pending {
    fn lock(m: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes an answer about to be written; false when it must be dropped.
    fn answer(&self, id: &str) -> bool {
        if Self::lock(&self.abandoned).contains(id) {
            return false;
        }
        if Self::lock(&self.open).remove(id) {
            self.answered.notify_one();
        }
        true
    }
}

fn id_key(id: &rmcp::model::RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

/// rmcp's transport (messages in, messages out), and the task that owns stdout.
pub struct GuardedStdio {
    /// rmcp's answers and notifications, for the writer.
    pub sink: messages::UnboundedSender<ServerJsonRpcMessage>,
    /// The client's messages, decoded once, for rmcp.
    pub stream: messages::UnboundedReceiver<ClientJsonRpcMessage>,
    /// Ends after rmcp closed its output and every pending line was written.
    pub output_done: JoinHandle<()>,
}

/// Starts the guard on the real stdin and stdout.
pub fn start() -> GuardedStdio {
    let (input, output) = rmcp::transport::stdio_pipes();
    start_on(input, output)
}

/// Starts the guard on any byte streams (tests use pipes).
pub fn start_on<R, W>(input: R, output: W) -> GuardedStdio
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, stream) = messages::unbounded();
    let (sink, from_rmcp) = messages::unbounded();
    let (errors_tx, errors_rx) = mpsc::unbounded_channel::<String>();
    let pending = Arc::new(Pending::default());
    tokio::spawn(pump_input(input, to_rmcp, errors_tx, Arc::clone(&pending)));
    let output_done = tokio::spawn(pump_output(from_rmcp, errors_rx, output, pending));
    GuardedStdio {
        sink,
        stream,
        output_done,
    }
}

/// Lines written to the client so far, for work that should wait until an
/// answer is out (a warm worker's start would take the CPU from it).
static WRITTEN: (Mutex<u64>, Condvar) = (Mutex::new(0), Condvar::new());

/// How many lines have been written to the client.
pub fn lines_written() -> u64 {
    *WRITTEN.0.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until more than `seen` lines have been written, or `bound` has
/// passed (the HTTP front counts each answer it sends as one line).
pub fn wait_for_line_after(seen: u64, bound: Duration) {
    let until = Instant::now() + bound;
    let mut n = WRITTEN.0.lock().unwrap_or_else(|p| p.into_inner());
    while *n <= seen {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        n = match WRITTEN.1.wait_timeout(n, left) {
            Ok((n, _)) => n,
            Err(p) => p.into_inner().0,
        };
    }
}

/// Counts an answer another transport has sent (the HTTP front's), as a
/// line written here, so what waits for one ([`wait_for_line_after`]: a
/// warm worker's refill) does not wait out its bound.
pub fn note_answer_sent() {
    note_line_written();
}

fn note_line_written() {
    *WRITTEN.0.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    WRITTEN.1.notify_all();
}

/// What to do with one line from the client.
#[derive(Debug)]
enum Verdict {
    /// A message for rmcp, decoded (once: rmcp does not decode it again).
    Forward(Box<ClientJsonRpcMessage>),
    Skip,
    Answer(String),
}

fn error_line(id: Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

fn judge(line: &[u8]) -> Verdict {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    // The usual case first: a message rmcp can take, decoded straight from
    // the line. Only a line that is not one is looked at again, to answer it.
    let decode_error = match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        Ok(message) => return Verdict::Forward(Box::new(message)),
        Err(e) => e,
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Verdict::Answer(error_line(
                Value::Null,
                -32700,
                &format!(
                    "parse error: the line is not JSON ({e}); send one JSON-RPC message per line"
                ),
            ));
        }
    };
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    if !value.is_object() {
        return Verdict::Answer(error_line(
            Value::Null,
            -32600,
            "invalid request: a message must be a JSON object (batches are not supported)",
        ));
    }
    if id.is_null() {
        // A notification (or a response) that cannot be read gets no answer by
        // JSON-RPC's rules; log it so the fault is visible.
        tracing::warn!("dropped an unreadable message without id: {decode_error}");
        return Verdict::Skip;
    }
    Verdict::Answer(error_line(
        id,
        -32600,
        &format!("invalid request: {decode_error}"),
    ))
}

async fn pump_input<R: AsyncRead + Unpin>(
    input: R,
    to_rmcp: messages::UnboundedSender<ClientJsonRpcMessage>,
    errors: mpsc::UnboundedSender<String>,
    pending: Arc<Pending>,
) {
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut too_long = false;
        // Read one line, keeping at most MAX_LINE bytes of it.
        loop {
            let buf = match reader.fill_buf().await {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!("reading stdin: {e}");
                    finish_pending(&pending, &errors).await;
                    return;
                }
            };
            if buf.is_empty() {
                break;
            }
            let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..=i], true),
                None => (buf, false),
            };
            let n = chunk.len();
            if line.len() + n <= MAX_LINE {
                line.extend_from_slice(chunk);
            } else {
                too_long = true;
            }
            reader.consume(n);
            if done {
                break;
            }
        }
        if line.is_empty() && !too_long {
            // stdin closed: what was asked is answered before the stream ends.
            finish_pending(&pending, &errors).await;
            return;
        }
        let verdict = if too_long {
            Verdict::Answer(error_line(
                Value::Null,
                -32600,
                &format!("invalid request: the message is over {MAX_LINE} bytes"),
            ))
        } else {
            judge(&line)
        };
        match verdict {
            Verdict::Forward(message) => {
                if let ClientJsonRpcMessage::Request(r) = message.as_ref() {
                    Pending::lock(&pending.open).insert(id_key(&r.id));
                }
                if to_rmcp.unbounded_send(*message).is_err() {
                    return;
                }
            }
            Verdict::Skip => {}
            Verdict::Answer(msg) => {
                if errors.send(msg).is_err() {
                    return;
                }
            }
        }
    }
}

/// Waits until every forwarded request was answered, for at most
/// [`CLOSING_GRACE`]; then answers the rest with an error itself.
async fn finish_pending(pending: &Pending, errors: &mpsc::UnboundedSender<String>) {
    let until = tokio::time::Instant::now() + CLOSING_GRACE;
    loop {
        let notified = pending.answered.notified();
        if Pending::lock(&pending.open).is_empty() {
            return;
        }
        if tokio::time::timeout_at(until, notified).await.is_err() {
            break;
        }
    }
    let left: Vec<String> = Pending::lock(&pending.open).drain().collect();
    let mut abandoned = Pending::lock(&pending.abandoned);
    for key in left {
        let id: Value = serde_json::from_str(&key).unwrap_or(Value::Null);
        let _ = errors.send(error_line(
            id,
            -32603,
            &format!(
                "the client closed stdin while this request was still running after {} s; \
                 it was abandoned and nothing more of it is sent (a nibash call may have run \
                 part of its command line; files an edit or write finished are written)",
                CLOSING_GRACE.as_secs()
            ),
        ));
        abandoned.insert(key);
    }
}

/// The id of an answer rmcp sends (a response or an error).
fn answer_id(m: &ServerJsonRpcMessage) -> Option<String> {
    match m {
        ServerJsonRpcMessage::Response(r) => Some(id_key(&r.id)),
        ServerJsonRpcMessage::Error(e) => e.id.as_ref().map(id_key),
        _ => None,
    }
}

async fn pump_output<W: AsyncWrite + Unpin>(
    mut from_rmcp: messages::UnboundedReceiver<ServerJsonRpcMessage>,
    mut errors: mpsc::UnboundedReceiver<String>,
    mut output: W,
    pending: Arc<Pending>,
) {
    use futures::StreamExt;
    let mut rmcp_open = true;
    let mut errors_open = true;
    while rmcp_open || errors_open {
        let line = tokio::select! {
            message = from_rmcp.next(), if rmcp_open => match message {
                None => {
                    rmcp_open = false;
                    continue;
                }
                Some(m) if answer_id(&m).is_some_and(|id| !pending.answer(&id)) => continue,
                Some(m) => match serde_json::to_vec(&m) {
                    Ok(line) => line,
                    Err(e) => {
                        // rmcp's own types always encode; say so if one did not.
                        tracing::error!("an answer could not be encoded: {e}");
                        continue;
                    }
                },
            },
            message = errors.recv(), if errors_open => match message {
                None => {
                    errors_open = false;
                    continue;
                }
                Some(m) => m.into_bytes(),
            },
        };
        let mut line = line;
        line.push(b'\n');
        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
            return;
        }
        note_line_written();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_lines() {
        assert!(matches!(judge(b"  \n"), Verdict::Skip));
        assert!(matches!(judge(b"not json"), Verdict::Answer(m) if m.contains("-32700")));
        assert!(matches!(judge(b"[1,2]"), Verdict::Answer(m) if m.contains("-32600")));
        assert!(matches!(
            judge(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":5}"#),
            Verdict::Answer(m) if m.contains("\"id\":7")
        ));
        assert!(matches!(
            judge(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            Verdict::Forward(_)
        ));
    }
}
