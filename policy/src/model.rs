//! The decision model that judges `rule` entries: an interface, and a client
//! for an OpenAI-compatible chat completions endpoint over plain HTTP (a
//! local gateway or proxy; TLS is not built in). Without a configured model
//! the `rule` entries are skipped, as the spec says, and nibash_status says so.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// What the model decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The command line keeps the rule.
    Allow,
    /// It breaks the rule, for this reason.
    Deny(String),
}

/// Judges whether a command line keeps a rule.
pub trait DecisionModel {
    /// `rule`: the rule's text; `command`: the whole line; `programs`: the
    /// programs the line runs, as the extractor found them.
    fn judge(&self, rule: &str, command: &str, programs: &[String]) -> Result<Decision, String>;
}

/// A chat completions endpoint (`POST {url}` with `{"model", "messages"}`).
#[derive(Clone, Debug)]
pub struct ChatModel {
    /// `http://host:port/path`.
    pub url: String,
    /// The model id sent.
    pub model: String,
    /// A bearer token, if the endpoint needs one.
    pub key: Option<String>,
    /// How long a decision may take.
    pub timeout: Duration,
}

/// The model from the environment: `NIB_RULES_MODEL_URL` (required),
/// `NIB_RULES_MODEL`, `NIB_RULES_MODEL_KEY`, `NIB_DECIDER_TIMEOUT` (ms).
pub fn from_env() -> Option<ChatModel> {
    let url = std::env::var("NIB_RULES_MODEL_URL")
        .ok()
        .filter(|u| !u.is_empty())?;
    Some(ChatModel {
        url,
        model: std::env::var("NIB_RULES_MODEL").unwrap_or_else(|_| "default".into()),
        key: std::env::var("NIB_RULES_MODEL_KEY")
            .ok()
            .filter(|k| !k.is_empty()),
        timeout: Duration::from_millis(
            std::env::var("NIB_DECIDER_TIMEOUT")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(30_000),
        ),
    })
}

const SYSTEM: &str = "You decide whether a shell command line breaks a rule set by the project. \
Reply with exactly ALLOW, or with DENY: followed by one short sentence saying why.";

/// Reads the model's reply text as a decision (anything but a clear ALLOW denies).
pub fn parse_reply(content: &str) -> Decision {
    let t = content.trim();
    if t.eq_ignore_ascii_case("allow") || t.to_ascii_uppercase().starts_with("ALLOW") {
        return Decision::Allow;
    }
    let reason = t
        .strip_prefix("DENY:")
        .or_else(|| t.strip_prefix("DENY"))
        .unwrap_or(t)
        .trim();
    Decision::Deny(if reason.is_empty() {
        "it breaks the rule".into()
    } else {
        reason.to_string()
    })
}

fn split_url(url: &str) -> Result<(String, String), String> {
    if url.starts_with("https://") {
        return Err(format!(
            "{url}: https is not built in; point NIB_RULES_MODEL_URL at a plain-HTTP gateway (for example one on 127.0.0.1)"
        ));
    }
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: not an http:// URL"))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let host = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    Ok((host, path.to_string()))
}

impl DecisionModel for ChatModel {
    fn judge(&self, rule: &str, command: &str, programs: &[String]) -> Result<Decision, String> {
        let (host, path) = split_url(&self.url)?;
        let body = serde_json::json!({
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": format!(
                    "Rule: {rule}\nCommand line: {command}\nPrograms it runs: {}",
                    programs.join(", ")
                )}
            ]
        })
        .to_string();
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&host)
            .map_err(|e| format!("{host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host}: no address"))?;
        let mut s =
            TcpStream::connect_timeout(&addr, self.timeout).map_err(|e| format!("{host}: {e}"))?;
        let _ = s.set_read_timeout(Some(self.timeout));
        let _ = s.set_write_timeout(Some(self.timeout));
        let auth = self
            .key
            .as_ref()
            .map(|k| format!("Authorization: Bearer {k}\r\n"))
            .unwrap_or_default();
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{auth}Connection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut reader = BufReader::new(s);
        let mut status = String::new();
        reader.read_line(&mut status).map_err(|e| e.to_string())?;
        let code: u16 = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("not an HTTP answer: {}", status.trim()))?;
        let mut length: Option<usize> = None;
        let mut chunked = false;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                break;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().ok();
            }
            if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        let mut raw = Vec::new();
        match length {
            Some(n) if !chunked => {
                raw.resize(n.min(1 << 20), 0);
                reader.read_exact(&mut raw).map_err(|e| e.to_string())?;
            }
            _ => {
                reader
                    .take(1 << 20)
                    .read_to_end(&mut raw)
                    .map_err(|e| e.to_string())?;
                if chunked {
                    raw = dechunk(&raw);
                }
            }
        }
        if code != 200 {
            return Err(format!("the model answered HTTP {code}"));
        }
        let v: serde_json::Value = serde_json::from_slice(&raw)
            .map_err(|e| format!("the model's answer is not JSON: {e}"))?;
        let content = v["choices"][0]["message"]["content"]
            .as_str()
            .ok_or("the model's answer has no choices[0].message.content")?;
        Ok(parse_reply(content))
    }
}

fn dechunk(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = raw;
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&rest[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .unwrap_or(0);
        rest = &rest[eol + 2..];
        if size == 0 || size > rest.len() {
            break;
        }
        out.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn fake(reply: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let l = match TcpListener::bind("127.0.0.1:0") {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
        let h = std::thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else {
                return String::new();
            };
            let mut buf = vec![0u8; 65536];
            let n = s.read(&mut buf).unwrap_or(0);
            let body = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": reply}}]}).to_string();
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        (format!("http://127.0.0.1:{port}/v1/chat/completions"), h)
    }

    fn model(url: String) -> ChatModel {
        ChatModel {
            url,
            model: "m".into(),
            key: Some("k".into()),
            timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn a_loopback_endpoint_is_asked_and_its_answer_read() {
        let (url, h) = fake("DENY: it runs the whole suite");
        let d = model(url).judge("No full suites.", "make test", &["make".into()]);
        assert_eq!(d, Ok(Decision::Deny("it runs the whole suite".into())));
        let request = h.join().unwrap_or_default();
        assert!(
            request.starts_with("POST /v1/chat/completions HTTP/1.1"),
            "{request}"
        );
        assert!(
            request.contains("Authorization: Bearer k") && request.contains("make test"),
            "{request}"
        );
        let (url, _h) = fake("ALLOW");
        assert_eq!(model(url).judge("r", "ls", &[]), Ok(Decision::Allow));
    }

    #[test]
    fn https_and_silence_are_errors() {
        assert!(model("https://x/y".into()).judge("r", "c", &[]).is_err());
        assert_eq!(parse_reply("maybe?"), Decision::Deny("maybe?".into()));
    }
}
