//! The stdio framing guard between the client and rmcp.
//!
//! rmcp drops a line it cannot decode without answering, which leaves a client
//! waiting. This guard reads stdin line by line and forwards only lines that
//! decode as client JSON-RPC messages; for any other line it answers itself:
//! `-32700` (parse error) for text that is not JSON, `-32600` (invalid request)
//! for JSON that is not a JSON-RPC message (with the request's id when it has
//! one), or a line over [`MAX_LINE`]. One writer task owns stdout, so rmcp's
//! messages and these answers never interleave, and stdout carries nothing else.
//! When stdin closes the forwarding pipe closes, rmcp ends its session, and the
//! writer drains what is left.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest line accepted from the client (an 8 MiB write, JSON-escaped, fits).
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// The ends rmcp reads from and writes to, and the task that owns stdout.
pub struct GuardedStdio {
    /// Validated client lines, for rmcp.
    pub reader: DuplexStream,
    /// rmcp's output.
    pub writer: DuplexStream,
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
    let (rmcp_reader, to_rmcp) = tokio::io::duplex(1 << 16);
    let (rmcp_writer, from_rmcp) = tokio::io::duplex(1 << 16);
    let (errors_tx, errors_rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(pump_input(input, to_rmcp, errors_tx));
    let output_done = tokio::spawn(pump_output(from_rmcp, errors_rx, output));
    GuardedStdio {
        reader: rmcp_reader,
        writer: rmcp_writer,
        output_done,
    }
}

/// What to do with one line from the client.
#[derive(Debug, PartialEq)]
enum Verdict {
    Forward,
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
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(_) => Verdict::Forward,
        Err(e) if id.is_null() => {
            // A notification (or a response) that cannot be read gets no answer by
            // JSON-RPC's rules; log it so the fault is visible.
            tracing::warn!("dropped an unreadable message without id: {e}");
            Verdict::Skip
        }
        Err(e) => Verdict::Answer(error_line(id, -32600, &format!("invalid request: {e}"))),
    }
}

async fn pump_input<R: AsyncRead + Unpin>(
    input: R,
    mut to_rmcp: DuplexStream,
    errors: mpsc::UnboundedSender<String>,
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
            return; // stdin closed
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
            Verdict::Forward => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if to_rmcp.write_all(&line).await.is_err() {
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

async fn pump_output<W: AsyncWrite + Unpin>(
    from_rmcp: DuplexStream,
    mut errors: mpsc::UnboundedReceiver<String>,
    mut output: W,
) {
    let mut lines = BufReader::new(from_rmcp);
    let mut buf = Vec::new();
    let mut rmcp_open = true;
    let mut errors_open = true;
    while rmcp_open || errors_open {
        tokio::select! {
            read = lines.read_until(b'\n', &mut buf), if rmcp_open => {
                match read {
                    Ok(0) | Err(_) => rmcp_open = false,
                    Ok(_) => {
                        if output.write_all(&buf).await.is_err() || output.flush().await.is_err() {
                            return;
                        }
                        buf.clear();
                    }
                }
            }
            msg = errors.recv(), if errors_open => {
                match msg {
                    None => errors_open = false,
                    Some(mut m) => {
                        m.push('\n');
                        if output.write_all(m.as_bytes()).await.is_err() || output.flush().await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_lines() {
        assert_eq!(judge(b"  \n"), Verdict::Skip);
        assert!(matches!(judge(b"not json"), Verdict::Answer(m) if m.contains("-32700")));
        assert!(matches!(judge(b"[1,2]"), Verdict::Answer(m) if m.contains("-32600")));
        assert!(matches!(
            judge(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":5}"#),
            Verdict::Answer(m) if m.contains("\"id\":7")
        ));
        assert_eq!(
            judge(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            Verdict::Forward
        );
    }
}
