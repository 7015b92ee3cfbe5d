//! `nib serve --http`: the built binary on 127.0.0.1 port 0, spoken to over
//! real HTTP/1.1 (a raw client on a TcpStream, so every header is the test's).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{header_tag, isolated_env, nib_bin, project};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";
const TEN: &str = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n";

/// A running `nib serve --http` and where it listens.
struct Served {
    child: Child,
    addr: String,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// The thread that copies stderr into `stderr`: done at its end.
    sink: std::thread::JoinHandle<()>,
    _home: tempfile::TempDir,
}

impl Served {
    /// Everything nib wrote on stderr after its address, once nib has
    /// exited and its stderr reached its end (at most 10 s later).
    fn stderr_to_end(&self) -> String {
        let start = Instant::now();
        while !self.sink.is_finished() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "nib's stderr stayed open"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts nib in `dir` with alice's and bob's tokens (in a file outside the project).
fn serve(dir: &Path, extra: &[&str]) -> Served {
    serve_with(dir, extra, &[])
}

/// [`serve`] with more environment (the sandbox's variables).
fn serve_with(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Served {
    serve_under(&[], dir, extra, env)
}

/// [`serve_with`], nib started by `wrapper` (a program and its arguments
/// before nib's path), e.g. under tests/fixtures/hostile_kernel.py.
fn serve_under(wrapper: &[&str], dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Served {
    let home = tempfile::tempdir().unwrap();
    let tokens = home.path().join("tokens");
    std::fs::write(&tokens, format!("# agents\nalice {ALICE}\nbob {BOB}\n")).unwrap();
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(nib_bin());
            c
        }
        None => Command::new(nib_bin()),
    };
    cmd.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .args(extra)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env("NIB_LOG", "warn");
    for (k, v) in isolated_env(home.path()) {
        cmd.env(k, v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut addr = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("listening on http://") {
            addr = rest.strip_suffix("/mcp").map(str::to_string);
            break;
        }
    }
    let addr = addr.expect("nib printed where it listens");
    assert!(!addr.ends_with(":0"), "port 0 picks a port: {addr}");
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = std::sync::Arc::clone(&stderr);
    let sink = std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            sink.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    Served {
        child,
        addr,
        stderr,
        sink,
        _home: home,
    }
}

/// One HTTP answer.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC answer, from a JSON body or an event stream's data lines.
    fn message(&self) -> Value {
        if let Ok(v) = serde_json::from_str::<Value>(&self.body) {
            return v;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC answer in {:?}", self.body))
    }

    /// A tool call's text and whether it is an error.
    fn tool_text(&self) -> (String, bool) {
        let m = self.message();
        let result = m.get("result").unwrap_or_else(|| panic!("no result: {m}"));
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        (text, result["isError"].as_bool().unwrap_or(false))
    }
}

/// Sends one request (`Connection: close`) and reads the whole answer.
fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) before it has read a large body.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        unchunk(rest)
    } else {
        rest.to_string()
    };
    Answer {
        status,
        headers,
        body,
    }
}

fn unchunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// The `_meta` of a 2026-07-28 request.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "http-test", "version": "1"}
    })
}

/// A 2026-07-28 tools/call without a session, as the agent of `token`.
fn modern_call(addr: &str, token: &str, tool: &str, args: Value) -> Answer {
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": modern_meta()}
    });
    let auth = format!("Bearer {token}");
    request(
        addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        body.to_string().as_bytes(),
    )
}

fn canary_call(addr: &str, headers: &[(&str, &str)]) -> Answer {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "nibash", "arguments": {"command": "touch canary"}, "_meta": modern_meta()}
    });
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "nibash"),
    ];
    all.extend_from_slice(headers);
    request(addr, "POST", "/mcp", &all, body.to_string().as_bytes())
}

#[test]
fn a_call_without_a_known_token_gets_401_and_never_runs() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    let wrong = format!("Bearer {ALICE}x");
    let short = format!("Bearer {}", &ALICE[..ALICE.len() - 1]);
    for headers in [
        vec![],
        vec![("Authorization", wrong.as_str())],
        vec![("Authorization", short.as_str())],
        vec![("X-Nib-Token", "nothing-like-a-token-at-all")],
        vec![("Authorization", "Basic YWxpY2U6eA==")],
    ] {
        let a = canary_call(&nib.addr, &headers);
        assert_eq!(a.status, 401, "{headers:?}: {}", a.body);
        assert_eq!(a.header("www-authenticate"), Some("Bearer"));
    }
    assert!(!dir.path().join("canary").exists(), "a refused call ran");
    // The canary can fire: the same call with a token (either header) runs.
    let bearer = format!("Bearer {ALICE}");
    let a = canary_call(&nib.addr, &[("Authorization", &bearer)]);
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(dir.path().join("canary").exists(), "{}", a.body);
    std::fs::remove_file(dir.path().join("canary")).unwrap();
    let a = canary_call(&nib.addr, &[("X-Nib-Token", BOB)]);
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(dir.path().join("canary").exists(), "{}", a.body);
    // One JSON line per request: agent, method, tool, status; never the command or a token.
    std::thread::sleep(Duration::from_millis(200));
    let log = nib.stderr.lock().unwrap().clone();
    let lines: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        lines.iter().any(|l| l["agent"] == "bob"
            && l["method"] == "tools/call"
            && l["tool"] == "nibash"
            && l["status"] == 200
            && l["ms"].is_u64()),
        "{log}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["status"] == 401 && l["agent"].is_null()),
        "{log}"
    );
    assert!(
        !log.contains("touch canary") && !log.contains(ALICE) && !log.contains(BOB),
        "{log}"
    );
}

#[test]
fn a_foreign_host_or_origin_is_refused() {
    let dir = project();
    let nib = serve(dir.path(), &["--allow-host", "nib.internal"]);
    let bearer = format!("Bearer {ALICE}");
    let a = canary_call(
        &nib.addr,
        &[("Authorization", &bearer), ("Host", "evil.example")],
    );
    assert!((400..500).contains(&a.status), "{} {}", a.status, a.body);
    let a = canary_call(
        &nib.addr,
        &[
            ("Authorization", &bearer),
            ("Origin", "http://evil.example"),
        ],
    );
    assert!((400..500).contains(&a.status), "{} {}", a.status, a.body);
    assert!(!dir.path().join("canary").exists(), "a refused call ran");
    // An allowed Host is served.
    let a = canary_call(
        &nib.addr,
        &[("Authorization", &bearer), ("Host", "nib.internal")],
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(dir.path().join("canary").exists());
}

#[test]
fn an_oversized_body_gets_413() {
    let dir = project();
    let nib = serve(dir.path(), &["--max-body", "65536"]);
    let big = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "write", "arguments": {"path": "big.txt", "content": "x".repeat(70_000)},
                   "_meta": modern_meta()}
    });
    let bearer = format!("Bearer {ALICE}");
    let a = request(
        &nib.addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
        ],
        big.to_string().as_bytes(),
    );
    assert_eq!(a.status, 413, "{}", a.body);
    assert!(!dir.path().join("big.txt").exists());
}

#[test]
fn health_and_readiness_need_no_token_and_say_nothing_more() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    for path in ["/healthz", "/readyz"] {
        let a = request(&nib.addr, "GET", path, &[], b"");
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        assert!(a.body.len() < 16, "{path}: {}", a.body);
    }
    // /mcp itself still needs a token.
    let a = request(&nib.addr, "GET", "/mcp", &[], b"");
    assert_eq!(a.status, 401);
}

#[test]
fn an_agent_keeps_its_seen_lines_between_sessionless_requests_and_others_cannot_use_them() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), TEN).unwrap();
    let nib = serve(dir.path(), &[]);
    let read = modern_call(&nib.addr, ALICE, "read", json!({"paths": ["f.txt"]}));
    assert_eq!(read.status, 200, "{}", read.body);
    let (text, err) = read.tool_text();
    assert!(!err, "{text}");
    let tag = header_tag(&text);
    let patch = format!("[f.txt#{tag}]\nPUT 3:\n+three\n");
    // A refusal shows the lines it names (the same patch again applies), so
    // each of bob's tries anchors on other lines.
    // Naming alice's session in _meta does not make bob alice.
    let body = json!({
        "jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "edit", "arguments": {"input": patch},
                   "_meta": {"sessionId": "http:alice",
                             "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {},
                             "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}
    });
    let a = request(
        &nib.addr,
        "POST",
        "/mcp",
        &[
            ("X-Nib-Token", BOB),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "edit"),
        ],
        body.to_string().as_bytes(),
    );
    let (text, err) = a.tool_text();
    assert!(err && text.contains("not seen"), "{text}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        TEN
    );
    // Bob never read the file: alice's seen lines do not let him edit.
    let a = modern_call(
        &nib.addr,
        BOB,
        "edit",
        json!({"input": format!("[f.txt#{tag}]\nPUT 5:\n+five\n")}),
    );
    let (text, err) = a.tool_text();
    assert!(err && text.contains("not seen"), "{text}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        TEN
    );
    // Alice edits in a new request from what she read in the last.
    let a = modern_call(&nib.addr, ALICE, "edit", json!({"input": patch}));
    let (text, err) = a.tool_text();
    assert!(!err, "{text}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        TEN.replace("l3\n", "three\n")
    );
}

/// Opens an older-era session as the agent of `bearer` (`Bearer TOKEN`):
/// `initialize` (2025-06-18), then `notifications/initialized`. Returns the
/// session's id.
fn open_session(addr: &str, bearer: &str) -> String {
    let base = [
        ("Authorization", bearer),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "old", "version": "1"}}
    });
    let a = request(addr, "POST", "/mcp", &base, init.to_string().as_bytes());
    assert_eq!(a.status, 200, "{}", a.body);
    let session = a
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    assert_eq!(a.message()["result"]["serverInfo"]["name"], "nib");
    let mut with_session = base.to_vec();
    with_session.push(("Mcp-Session-Id", &session));
    with_session.push(("MCP-Protocol-Version", "2025-06-18"));
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let a = request(
        addr,
        "POST",
        "/mcp",
        &with_session,
        done.to_string().as_bytes(),
    );
    assert!(a.status < 300, "{} {}", a.status, a.body);
    session
}

/// Bob's nibash call that would create `canary`, sent with alice's session
/// headers (`headers`, her credential first) and his own token in place of
/// hers.
fn bobs_call_in(addr: &str, headers: &[(&str, &str)]) -> Answer {
    let mut bobs = headers.to_vec();
    bobs[0] = ("X-Nib-Token", BOB);
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                      "params": {"name": "nibash", "arguments": {"command": "touch canary"}}});
    request(addr, "POST", "/mcp", &bobs, body.to_string().as_bytes())
}

#[test]
fn older_clients_initialize_and_keep_a_session() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), TEN).unwrap();
    let nib = serve(dir.path(), &[]);
    let bearer = format!("Bearer {ALICE}");
    let session = open_session(&nib.addr, &bearer);
    let with_session = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", &session),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let call = |id: u64, tool: &str, args: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": args}});
        request(
            &nib.addr,
            "POST",
            "/mcp",
            &with_session,
            body.to_string().as_bytes(),
        )
    };
    let (text, err) = call(2, "read", json!({"paths": ["f.txt"]})).tool_text();
    assert!(!err, "{text}");
    let tag = header_tag(&text);
    let (text, err) = call(
        3,
        "edit",
        json!({"input": format!("[f.txt#{tag}]\nPUT 3:\n+three\n")}),
    )
    .tool_text();
    assert!(!err, "{text}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        TEN.replace("l3\n", "three\n")
    );
    // Bob cannot ride alice's session: with his own token and her session
    // id he is answered as for an unknown session, and nothing runs.
    let a = bobs_call_in(&nib.addr, &with_session);
    assert_eq!(a.status, 404, "{}", a.body);
    assert!(!dir.path().join("canary").exists());
    // Bob cannot end it either; alice's DELETE ends it, answered 200 (the
    // session is over, not accepted for later), and the id is then unknown.
    let mut bobs = with_session;
    bobs[0] = ("X-Nib-Token", BOB);
    let a = request(&nib.addr, "DELETE", "/mcp", &bobs, b"");
    assert_eq!(a.status, 404, "{}", a.body);
    let a = request(&nib.addr, "DELETE", "/mcp", &with_session, b"");
    assert_eq!(a.status, 200, "{}", a.body);
    let a = call(5, "read", json!({"paths": ["f.txt"]}));
    assert_eq!(a.status, 404, "{}", a.body);
}

/// A DELETE rmcp refuses (another era's version header, a foreign Host)
/// ends nothing: the session stays its owner's, and another agent naming it
/// is still answered as for an unknown session. Before, the front forgot the
/// owner on any DELETE and bob's call then ran in alice's session.
#[test]
fn a_refused_delete_leaves_the_session_its_owners() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    let bearer = format!("Bearer {ALICE}");
    let session = open_session(&nib.addr, &bearer);
    let alices = |version: &'static str, host: &'static str| {
        let mut h = vec![
            ("Authorization", bearer.clone()),
            ("Content-Type", "application/json".into()),
            ("Accept", "application/json, text/event-stream".into()),
            ("Mcp-Session-Id", session.clone()),
            ("MCP-Protocol-Version", version.into()),
        ];
        if !host.is_empty() {
            h.push(("Host", host.into()));
        }
        h
    };
    for (version, host) in [("2026-07-28", ""), ("2025-06-18", "evil.example")] {
        let h = alices(version, host);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let a = request(&nib.addr, "DELETE", "/mcp", &h, b"");
        assert!(
            (400..500).contains(&a.status),
            "{version} {host}: {} {}",
            a.status,
            a.body
        );
        let hers = alices("2025-06-18", "");
        let hers: Vec<(&str, &str)> = hers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let a = bobs_call_in(&nib.addr, &hers);
        assert_eq!(a.status, 404, "after {version} {host}: {}", a.body);
        assert!(
            !dir.path().join("canary").exists(),
            "bob's call ran in alice's session after her refused DELETE ({version} {host})"
        );
    }
    // The session is still alice's.
    let h = alices("2025-06-18", "");
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "nibash", "arguments": {"command": "touch hers"}}});
    let a = request(&nib.addr, "POST", "/mcp", &h, body.to_string().as_bytes());
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(dir.path().join("hers").exists(), "{}", a.body);
}

/// Only a POST carries a body: a GET or DELETE to `/mcp` announcing one gets
/// 400 at once, without nib waiting for (and holding) it. Before, such
/// bodies took no call's place, and 200 connections each holding a 4 MiB
/// body on a GET grew nib from 16 to 830 MiB.
#[test]
fn a_body_on_a_get_or_delete_is_refused_before_it_is_read() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    for method in ["GET", "DELETE", "PUT"] {
        let mut s = TcpStream::connect(&nib.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // The body is announced and never sent.
        let head = format!(
            "{method} /mcp HTTP/1.1\r\nHost: {}\r\nX-Nib-Token: {ALICE}\r\n\
             Accept: text/event-stream\r\nContent-Length: 4194303\r\n\r\n",
            nib.addr
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut first = [0u8; 12];
        let got = s.read_exact(&mut first);
        assert!(
            got.is_ok(),
            "{method}: no answer while the body was held back"
        );
        assert_eq!(&first, b"HTTP/1.1 400", "{method}");
    }
}

/// `nibash_control`'s summaries switch is the agent's own: bob turning
/// summaries off leaves alice's long output summarized, and his is shown
/// whole. Before, the switch was the server's, so bob turned them off for
/// every agent (found by a red-team pass).
#[test]
fn one_agents_summaries_switch_leaves_anothers_on() {
    let mock = crate::deciders::Mock::start(false);
    let dir = project();
    let nib = serve_with(
        dir.path(),
        &[],
        &[
            ("NIB_DECIDER_SUMMARY", "ok-session"),
            ("NIB_DECIDER_SUMMARY_URL", mock.url.as_str()),
            ("NIB_DECIDER_KEY", "k"),
        ],
    );
    let (switched, err) = modern_call(
        &nib.addr,
        BOB,
        "nibash_control",
        json!({"summaries": false}),
    )
    .tool_text();
    assert!(!err && switched.contains("summaries off"), "{switched}");
    let long = json!({"command": "seq 1 300"});
    let (out, _) = modern_call(&nib.addr, ALICE, "nibash", long.clone()).tool_text();
    assert!(
        out.contains("<summary>Summary from ok-session."),
        "alice: {out}"
    );
    let (status, _) = modern_call(&nib.addr, ALICE, "nibash_status", json!({})).tool_text();
    assert!(status.contains("summaries: ok-session — on"), "{status}");
    let (out, _) = modern_call(&nib.addr, BOB, "nibash", long).tool_text();
    assert!(
        !out.contains("<summary>") && out.contains("\n299\n300\n"),
        "bob's is shown whole: {out}"
    );
}

/// One agent may hold 64 older-era sessions at once: its 65th
/// `initialize` gets 429 and opens nothing, another agent still opens
/// one, and once it ends a session it may open another. Before, an agent
/// could open sessions without bound (about 85 KB each, kept five
/// minutes).
#[test]
fn sessions_are_bounded_per_agent() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    let bobs = format!("Bearer {BOB}");
    let first = open_session(&nib.addr, &bobs);
    for _ in 1..64 {
        open_session(&nib.addr, &bobs);
    }
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "old", "version": "1"}}
    });
    let base = [
        ("Authorization", bobs.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let a = request(
        &nib.addr,
        "POST",
        "/mcp",
        &base,
        init.to_string().as_bytes(),
    );
    assert_eq!(a.status, 429, "{}", a.body);
    assert!(a.header("mcp-session-id").is_none(), "{:?}", a.headers);
    open_session(&nib.addr, &format!("Bearer {ALICE}"));
    let mut ending = base.to_vec();
    ending.push(("Mcp-Session-Id", &first));
    let a = request(&nib.addr, "DELETE", "/mcp", &ending, b"");
    assert_eq!(a.status, 200, "{}", a.body);
    open_session(&nib.addr, &bobs);
}

/// A request head of 100 KB gets 431 and runs nothing: what a connection
/// holds before its token is checked stays small (nib bounds hyper's buffer
/// at 32 KiB, where its default let each hold about 400 KiB: 6000
/// unfinished heads held 1 GB). A 20 KB head is served.
#[test]
fn a_long_request_head_is_refused() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    // Ten headers of 10 KB (hyper refuses more than 100 headers anyway).
    let pad = "x".repeat(10_000);
    let mut headers = vec![];
    let names: Vec<String> = (0..10).map(|i| format!("X-Pad-{i}")).collect();
    for name in &names {
        headers.push((name.as_str(), pad.as_str()));
    }
    let a = request(&nib.addr, "GET", "/healthz", &headers, b"");
    assert_eq!(a.status, 431, "{}", a.body);
    let a = request(&nib.addr, "GET", "/healthz", &headers[..2], b"");
    assert_eq!(a.status, 200, "{}", a.body);
}

#[test]
fn calls_at_once_are_bounded_per_agent_and_in_all() {
    let dir = project();
    let nib = serve(
        dir.path(),
        &["--max-calls-per-agent", "1", "--max-calls", "2"],
    );
    let slow = |token: &'static str| {
        let addr = nib.addr.clone();
        std::thread::spawn(move || {
            modern_call(
                &addr,
                token,
                "nibash",
                json!({"command": "sleep 1.5; echo slow"}),
            )
        })
    };
    let first = slow(ALICE);
    std::thread::sleep(Duration::from_millis(400));
    // Alice has one call running: her second waits its turn (503), bob's runs.
    let a = canary_call(&nib.addr, &[("X-Nib-Token", ALICE)]);
    assert_eq!(a.status, 503, "{}", a.body);
    assert!(a.header("retry-after").is_some());
    assert!(!dir.path().join("canary").exists());
    let second = slow(BOB);
    std::thread::sleep(Duration::from_millis(400));
    // Two calls run, the limit in all: nib is not ready for another.
    let r = request(&nib.addr, "GET", "/readyz", &[], b"");
    assert_eq!(r.status, 503, "busy: not ready for another call");
    assert_eq!(first.join().unwrap().status, 200);
    assert_eq!(second.join().unwrap().status, 200);
    let a = canary_call(&nib.addr, &[("X-Nib-Token", ALICE)]);
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(dir.path().join("canary").exists());
}

#[test]
fn sigterm_drains_and_exits_0() {
    let dir = project();
    let mut nib = serve(dir.path(), &["--grace", "10"]);
    // A call that is running when SIGTERM comes finishes.
    let addr = nib.addr.clone();
    let running = std::thread::spawn(move || {
        modern_call(
            &addr,
            ALICE,
            "nibash",
            json!({"command": "sleep 1; echo finished > done.txt; echo finished"}),
        )
    });
    std::thread::sleep(Duration::from_millis(400));
    let sent = Command::new("kill")
        .args(["-TERM", &nib.child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    std::thread::sleep(Duration::from_millis(200));
    // A new request during the drain gets 503, and the pod is not ready.
    let r = request(&nib.addr, "GET", "/readyz", &[], b"");
    assert_eq!(r.status, 503);
    let a = canary_call(&nib.addr, &[("X-Nib-Token", ALICE)]);
    assert_eq!(a.status, 503, "{}", a.body);
    assert!(a.header("retry-after").is_some());
    let answer = running.join().unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(dir.path().join("done.txt").exists(), "{}", answer.body);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = nib.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "nib did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    assert!(!dir.path().join("canary").exists());
    // A drain is not an error: stderr has the requests' lines and no error
    // (rmcp once logged the end of the front's own peer as one).
    let log = nib.stderr_to_end();
    assert!(
        log.lines().all(|l| !l.contains("ERROR")),
        "an error at a clean stop:\n{log}"
    );
}

#[test]
fn a_token_file_inside_the_project_is_refused() {
    let dir = project();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("alice {ALICE}\n")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(nib_bin());
    cmd.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .current_dir(dir.path())
        .stdin(Stdio::null());
    for (k, v) in isolated_env(home.path()) {
        cmd.env(k, v);
    }
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("nib served with a token file inside the project");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("inside the project") && !err.contains("listening"),
        "{err}"
    );
}

#[test]
fn under_the_sandbox_tokens_and_seen_lines_hold_the_same() {
    for env in [
        &[("NIB_SANDBOX", "1")][..],
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")][..],
    ] {
        let dir = project();
        std::fs::write(dir.path().join("f.txt"), TEN).unwrap();
        let nib = serve_with(dir.path(), &[], env);
        let wrong = format!("Bearer {BOB}x");
        let a = canary_call(&nib.addr, &[("Authorization", &wrong)]);
        assert_eq!(a.status, 401, "{env:?}");
        assert!(!dir.path().join("canary").exists(), "{env:?}");
        let a = canary_call(&nib.addr, &[("X-Nib-Token", BOB)]);
        assert_eq!(a.status, 200, "{env:?}: {}", a.body);
        assert!(dir.path().join("canary").exists(), "{env:?}: {}", a.body);
        let (text, err) =
            modern_call(&nib.addr, ALICE, "read", json!({"paths": ["f.txt"]})).tool_text();
        assert!(!err, "{env:?}: {text}");
        let patch = format!("[f.txt#{}]\nPUT 3:\n+three\n", header_tag(&text));
        let (text, err) = modern_call(&nib.addr, BOB, "edit", json!({"input": patch})).tool_text();
        assert!(err && text.contains("not seen"), "{env:?}: {text}");
        let (text, err) =
            modern_call(&nib.addr, ALICE, "edit", json!({"input": patch})).tool_text();
        assert!(!err, "{env:?}: {text}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
            TEN.replace("l3\n", "three\n"),
            "{env:?}"
        );
    }
}

/// The job number a nibash answer names (`%N`).
fn job_number(text: &str) -> String {
    let at = text
        .find('%')
        .unwrap_or_else(|| panic!("no job in {text:?}"));
    let digits: String = text[at + 1..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(!digits.is_empty(), "no job number in {text:?}");
    format!("%{digits}")
}

#[test]
fn agents_never_see_or_stop_each_others_jobs() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    // Alice's job prints a line at once, then leaves a marker after 3 s.
    let (text, err) = modern_call(
        &nib.addr,
        ALICE,
        "nibash",
        json!({"command": "echo alice-out-4711; sleep 3; touch marker-a", "background": true}),
    )
    .tool_text();
    assert!(!err, "{text}");
    let job = job_number(&text);
    let n = job.trim_start_matches('%').to_string();
    // Bob can neither show nor stop it, by either tool.
    let (text, err) =
        modern_call(&nib.addr, BOB, "nibash_status", json!({"view": job})).tool_text();
    assert!(err && text.contains("no call or job"), "{text}");
    let (text, err) =
        modern_call(&nib.addr, BOB, "nibash_control", json!({"stop": job})).tool_text();
    assert!(err && text.contains("nothing was stopped"), "{text}");
    let (text, err) = modern_call(&nib.addr, BOB, "nibash_status", json!({})).tool_text();
    assert!(!err, "{text}");
    assert!(
        !text.contains("alice-out-4711") && !text.contains("marker-a"),
        "bob's status shows alice's job: {text}"
    );
    let (text, _) =
        modern_call(&nib.addr, BOB, "nibash_status", json!({"format": "json"})).tool_text();
    assert!(!text.contains("marker-a"), "{text}");
    for command in [
        "jobs".to_string(),
        format!("kill {job}"),
        format!("kill %{n}; wait {job}"),
    ] {
        let (text, _) =
            modern_call(&nib.addr, BOB, "nibash", json!({"command": command})).tool_text();
        assert!(
            !text.contains("alice-out-4711")
                && !text.contains("marker-a")
                && !text.contains("killed"),
            "{command}: {text}"
        );
    }
    // Alice sees hers, named by her NAME in the usage table (not `main`).
    let (text, err) =
        modern_call(&nib.addr, ALICE, "nibash_status", json!({"view": job})).tool_text();
    assert!(!err && text.contains("alice-out-4711"), "{text}");
    let (text, _) = modern_call(&nib.addr, ALICE, "nibash_status", json!({})).tool_text();
    assert!(text.contains("marker-a"), "{text}");
    assert!(text.contains("alice nibash"), "{text}");
    assert!(
        !text.contains("bob nibash") && !text.contains("main nibash"),
        "{text}"
    );
    // Her job kept running and left its marker.
    let start = Instant::now();
    while !dir.path().join("marker-a").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "alice's job was stopped"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    // Its end is reported to alice's next call, never to bob's.
    let (text, _) = modern_call(&nib.addr, BOB, "nibash", json!({"command": "true"})).tool_text();
    assert!(!text.contains("marker-a"), "{text}");
    let (text, _) = modern_call(&nib.addr, ALICE, "nibash", json!({"command": "true"})).tool_text();
    assert!(text.contains("marker-a"), "{text}");
}

/// A 2026-07-28 tools/call from a client that can be asked (elicitation),
/// with `extra` params (a retry's requestState and inputResponses).
fn asking_call(addr: &str, token: &str, tool: &str, args: Value, extra: Value) -> Value {
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let mut params = json!({"name": tool, "arguments": args, "_meta": meta});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params});
    let auth = format!("Bearer {token}");
    let a = request(
        addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    a.message()
}

#[test]
fn approvals_travel_in_a_sealed_request_state_that_cannot_be_forged_altered_replayed_or_lent() {
    let dir = project();
    let nib = serve_with(dir.path(), &[], &[("NIB_SANDBOX", "1")]);
    let target = dir.path().join(".mcp.json");
    let args = json!({"path": ".mcp.json", "content": "{}\n"});
    let approve = json!({"approve": {"action": "accept", "content": {"approve": true}}});
    let retry = |state: &str| json!({"requestState": state, "inputResponses": approve});
    // A write that makes code run is put to the person: input_required.
    let asked = asking_call(&nib.addr, ALICE, "write", args.clone(), json!({}));
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    assert!(result["inputRequests"]["approve"].is_object(), "{asked}");
    let state = result["requestState"]
        .as_str()
        .expect("a request state")
        .to_string();
    assert!(!target.exists());
    let refused = |answer: &Value, what: &str| {
        assert!(
            answer["error"]["message"].as_str().is_some_and(
                |m| m.contains("requestState refused") && m.contains("nothing was written")
            ),
            "{what}: {answer}"
        );
        assert!(!target.exists(), "{what}: the write landed");
    };
    // A state of the client's making (the unsealed form nib used to take).
    let real = dir.path().canonicalize().unwrap().join(".mcp.json");
    let forged = format!("nib-approve-v1:{}", real.display());
    refused(
        &asking_call(&nib.addr, ALICE, "write", args.clone(), retry(&forged)),
        "forged",
    );
    // The real state with one character changed.
    let mut altered: Vec<char> = state.chars().collect();
    let at = altered.len() / 3;
    altered[at] = if altered[at] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    refused(
        &asking_call(&nib.addr, ALICE, "write", args.clone(), retry(&altered)),
        "altered",
    );
    // Another agent with alice's state, and alice with other arguments.
    refused(
        &asking_call(&nib.addr, BOB, "write", args.clone(), retry(&state)),
        "bob's use",
    );
    let evil = json!({"path": ".mcp.json", "content": "{\"mcpServers\": {}}\n"});
    refused(
        &asking_call(&nib.addr, ALICE, "write", evil, retry(&state)),
        "other arguments",
    );
    // The round trip itself works: alice's approval writes the file.
    let done = asking_call(&nib.addr, ALICE, "write", args.clone(), retry(&state));
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}\n");
    // Used once: the same retry again is refused and writes nothing.
    std::fs::remove_file(&target).unwrap();
    refused(
        &asking_call(&nib.addr, ALICE, "write", args.clone(), retry(&state)),
        "replayed",
    );
}

#[test]
fn readiness_follows_the_sandbox_and_health_does_not() {
    let sandboxed = [("NIB_SANDBOX", "1")];
    // A sandbox that starts programs (bubblewrap, or Landlock + seccomp alone): ready.
    let dir = project();
    for env in [
        &sandboxed[..],
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")][..],
    ] {
        let nib = serve_with(dir.path(), &[], env);
        let a = request(&nib.addr, "GET", "/readyz", &[], b"");
        assert_eq!(a.status, 200, "{env:?}: {}", a.body);
    }
    // One that cannot (no Landlock, no user namespaces, no mount, so not
    // even root's bubblewrap starts, nor Landlock + seccomp): not ready,
    // still alive, and saying no more.
    if std::env::consts::ARCH != "x86_64" || !Path::new("/usr/bin/python3").exists() {
        crate::common::skip("the stand-in filter needs x86_64 and /usr/bin/python3");
        return;
    }
    let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile_kernel.py");
    let helper = helper.to_str().unwrap();
    for env in [
        &sandboxed[..],
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")][..],
    ] {
        let nib = serve_under(
            &["/usr/bin/python3", helper, "--deny-mount", "--"],
            dir.path(),
            &[],
            env,
        );
        let a = request(&nib.addr, "GET", "/readyz", &[], b"");
        assert_eq!(a.status, 503, "{env:?}: {}", a.body);
        assert!(a.body.len() < 16, "{}", a.body);
        let a = request(&nib.addr, "GET", "/healthz", &[], b"");
        assert_eq!(a.status, 200, "{env:?}: {}", a.body);
        // Calls fail closed there too: the canary is not made.
        let a = canary_call(&nib.addr, &[("X-Nib-Token", ALICE)]);
        assert!(!dir.path().join("canary").exists(), "{env:?}: {}", a.body);
    }
}

#[test]
fn nib_help_lists_serve_and_serve_help_shows_its_options() {
    let dir = project();
    let run = |args: &[&str]| {
        let out = Command::new(nib_bin())
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "nib {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let help = run(&["--help"]);
    assert!(
        help.contains("  nib serve --http HOST:PORT --token-file FILE"),
        "{help}"
    );
    for flag in ["--help", "-h"] {
        let page = run(&["serve", flag]);
        assert!(page.starts_with("usage:\n  nib serve --http"), "{page}");
        for option in [
            "--token-file",
            "--allow-host",
            "--allow-origin",
            "--max-body",
            "--max-calls ",
            "--max-calls-per-agent",
            "--grace",
            "--session-idle",
            "X-Nib-Token",
        ] {
            assert!(page.contains(option), "{option}: {page}");
        }
    }
}

#[test]
fn the_log_line_names_agent_method_tool_status_and_ms_and_never_an_argument() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    const SECRET: &str = "sk-live-CANARY0123456789abcdef";
    let (text, err) = modern_call(
        &nib.addr,
        ALICE,
        "write",
        json!({"path": "creds.env", "content": format!("API_KEY={SECRET}\n")}),
    )
    .tool_text();
    assert!(!err, "{text}");
    let (text, err) = modern_call(
        &nib.addr,
        BOB,
        "nibash",
        json!({"command": format!("echo {SECRET} >/dev/null"), "description": SECRET}),
    )
    .tool_text();
    assert!(!err, "{text}");
    // A request whose token is a secret that is nobody's: 401, not logged either.
    let wrong = format!("Bearer {SECRET}");
    assert_eq!(
        canary_call(&nib.addr, &[("Authorization", &wrong)]).status,
        401
    );
    let start = Instant::now();
    let lines = loop {
        let log = nib.stderr.lock().unwrap().clone();
        let lines: Vec<Value> = log
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if lines.len() >= 3 || start.elapsed() > Duration::from_secs(10) {
            assert!(!log.contains(SECRET), "a secret reached stderr:\n{log}");
            assert!(!log.contains(ALICE) && !log.contains(BOB), "{log}");
            break lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for (agent, tool) in [("alice", "write"), ("bob", "nibash")] {
        assert!(
            lines.iter().any(|l| l["agent"] == agent
                && l["method"] == "tools/call"
                && l["tool"] == tool
                && l["status"] == 200
                && l["ms"].is_u64()),
            "{lines:?}"
        );
    }
    for l in &lines {
        let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["agent", "method", "tool", "status", "ms"], "{l}");
    }
    assert!(
        std::fs::read_to_string(dir.path().join("creds.env"))
            .unwrap()
            .contains(SECRET)
    );
}

/// The MCP Python SDK's python (target/mcp-venv, which .ci/run installs), if there.
fn sdk_python() -> Option<std::path::PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp-venv/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "from mcp.client.client import Client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    assert!(
        std::env::var_os("NIB_REQUIRE_THIRD_PARTY").is_none(),
        "the MCP Python SDK is not in target/mcp-venv; .ci/run installs it"
    );
    crate::common::skip("the MCP Python SDK is not in target/mcp-venv (.ci/run installs it)");
    None
}

/// A real client in both eras: the older one is asked over its session
/// (elicitation/create), the 2026-07-28 one through input_required and a
/// sealed requestState it echoes; an approval writes, a decline does not.
#[test]
fn a_real_client_is_asked_for_approval_in_both_eras() {
    let Some(python) = sdk_python() else { return };
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/http_client/approve_client.py");
    let dir = project();
    let nib = serve_with(dir.path(), &[], &[("NIB_SANDBOX", "1")]);
    let url = format!("http://{}/mcp", nib.addr);
    let target = dir.path().join(".mcp.json");
    for mode in ["legacy", "2026-07-28"] {
        for answer in ["decline", "accept"] {
            let _ = std::fs::remove_file(&target);
            let out = Command::new(&python)
                .arg(&script)
                .args([&url, mode, answer, ".mcp.json", "{}\n"])
                .env("NIB_TOKEN", ALICE)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout).into_owned();
            let what = format!(
                "{mode} {answer}: {said}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{what}");
            let v: Value = serde_json::from_str(said.trim()).expect(&what);
            assert_eq!(v["asked"], 1, "{what}");
            if answer == "accept" {
                assert_eq!(v["error"], false, "{what}");
                assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}\n", "{what}");
            } else {
                assert_eq!(v["error"], true, "{what}");
                assert!(!target.exists(), "{what}");
            }
        }
    }
}

#[test]
fn a_nibash_answer_names_its_own_changes_not_another_agents_edits() {
    let dir = project();
    std::fs::write(dir.path().join("bobs.txt"), TEN).unwrap();
    let nib = serve(dir.path(), &[]);
    // Bob reads and edits bobs.txt with nib's edit tool while alice's call
    // runs; her program writes mine.txt.
    let addr = nib.addr.clone();
    let bob = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        let (text, err) =
            modern_call(&addr, BOB, "read", json!({"paths": ["bobs.txt"]})).tool_text();
        assert!(!err, "{text}");
        let tag = header_tag(&text);
        let patch = format!("[bobs.txt#{tag}]\nPUT 3:\n+bob's three\n");
        let (text, err) = modern_call(&addr, BOB, "edit", json!({"input": patch})).tool_text();
        assert!(!err, "{text}");
    });
    let (text, err) = modern_call(
        &nib.addr,
        ALICE,
        "nibash",
        json!({"command": "sleep 3; echo made > mine.txt"}),
    )
    .tool_text();
    bob.join().unwrap();
    assert!(!err, "{text}");
    assert!(
        std::fs::read_to_string(dir.path().join("bobs.txt"))
            .unwrap()
            .contains("bob's three"),
        "bob's edit landed during alice's call"
    );
    assert!(text.contains("mine.txt"), "her own change is named: {text}");
    assert!(
        !text.contains("bobs.txt"),
        "bob's edit is named as alice's change: {text}"
    );
}

#[test]
fn a_nibash_answer_leaves_out_another_agents_edit_still_running() {
    // Bob's two-file edit puts bobs1.txt in place, then a failpoint holds
    // it for a minute before bobs2.txt, while alice's call runs: the file
    // holds bob's content and his call has not ended.
    let dir = project();
    let held = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bobs1.txt"), TEN).unwrap();
    std::fs::write(dir.path().join("bobs2.txt"), TEN).unwrap();
    let failpoint = format!(
        "edit-between-files:{}",
        held.path().join("paused").display()
    );
    let nib = serve_with(dir.path(), &[], &[("NIB_FAILPOINT", failpoint.as_str())]);
    let (text, err) = modern_call(
        &nib.addr,
        BOB,
        "read",
        json!({"paths": ["bobs1.txt", "bobs2.txt"]}),
    )
    .tool_text();
    assert!(!err, "{text}");
    let tags: Vec<String> = text.split("\n\n").map(header_tag).collect();
    let patch = format!(
        "[bobs1.txt#{}]\nPUT 3:\n+bob's three\n[bobs2.txt#{}]\nPUT 3:\n+bob's three\n",
        tags[0], tags[1]
    );
    let addr = nib.addr.clone();
    let alice = std::thread::spawn(move || {
        let command = "echo > started.txt; until grep -q three bobs1.txt; do sleep 0.05; done; echo made > mine.txt";
        modern_call(&addr, ALICE, "nibash", json!({ "command": command })).tool_text()
    });
    let started = std::time::Instant::now();
    while !dir.path().join("started.txt").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "alice's call never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Not joined: the failpoint holds bob's call until the server is gone.
    let addr = nib.addr.clone();
    std::thread::spawn(move || modern_call(&addr, BOB, "edit", json!({ "input": patch })));
    let (text, err) = alice.join().unwrap();
    assert!(!err, "{text}");
    assert!(text.contains("mine.txt"), "her own change is named: {text}");
    assert!(
        !text.contains("bobs1.txt"),
        "bob's running edit is named as alice's change: {text}"
    );
}

#[test]
fn a_call_missing_a_required_argument_is_a_tool_error_over_http() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    let a = modern_call(&nib.addr, ALICE, "read", json!({}));
    assert_eq!(a.status, 200, "{}", a.body);
    let (text, err) = a.tool_text();
    assert!(
        err && text.contains("\"paths\" is required") && text.contains("nothing was read"),
        "{text}"
    );
}

/// A sessionless request, as alice with the plain headers (answered by nib's
/// front) and as bob with a weighted `Accept` (which the front leaves to
/// rmcp's per-request service).
fn modern_both(addr: &str, method: &str, params: Value) -> (Answer, Answer) {
    let mut params = params;
    params["_meta"] = modern_meta();
    let body = json!({"jsonrpc": "2.0", "id": 11, "method": method, "params": params});
    let name = params["name"].as_str().unwrap_or("").to_string();
    let send = |token: &str, accept: &str| {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", accept),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ];
        if method == "tools/call" {
            headers.push(("Mcp-Name", &name));
        }
        request(addr, "POST", "/mcp", &headers, body.to_string().as_bytes())
    };
    (
        send(ALICE, "application/json, text/event-stream"),
        send(BOB, "application/json;q=1, text/event-stream"),
    )
}

/// Requests nib's front answers, each compared with rmcp's answer: the tool
/// list, a read of `f.txt`, reads with bad arguments, and `call`.
fn front_cases(call: Value) -> [(&'static str, Value); 5] {
    [
        ("tools/list", json!({})),
        (
            "tools/call",
            json!({"name": "read", "arguments": {"paths": ["f.txt"]}}),
        ),
        ("tools/call", json!({"name": "read", "arguments": {}})),
        ("tools/call", call),
        ("tools/call", json!({"name": "read"})),
    ]
}

#[test]
fn sessionless_answers_are_the_same_from_nibs_front_as_from_rmcp() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), TEN).unwrap();
    let nib = serve(dir.path(), &[]);
    let cases = front_cases(json!({"name": "no_such_tool", "arguments": {}}));
    for (method, params) in cases {
        let (front, rmcp) = modern_both(&nib.addr, method, params.clone());
        let what = format!("{method} {params}");
        assert_eq!(front.status, rmcp.status, "{what}: {}", front.body);
        assert_eq!(
            front.header("content-type"),
            rmcp.header("content-type"),
            "{what}"
        );
        assert_eq!(front.body, rmcp.body, "{what}");
        assert!(
            front.message().get("id").is_some(),
            "{what}: {}",
            front.body
        );
    }
}

/// A request in an older-era session: `token`'s headers with `accept`.
fn in_session(addr: &str, token: &str, session: &str, accept: &str, body: &Value) -> Answer {
    let bearer = format!("Bearer {token}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", accept),
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    request(addr, "POST", "/mcp", &headers, body.to_string().as_bytes())
}

/// The plain `Accept` (nib's front may answer) and a weighted one (only
/// rmcp answers).
const FRONT: &str = "application/json, text/event-stream";
const RMCP: &str = "application/json;q=1, text/event-stream";

/// A session's reads and tool list skip rmcp's session worker: nib's front
/// answers them in JSON with the message rmcp streams, only in the agent's
/// own session and only while rmcp has it; calls that may ask the client
/// (edit, nibash) still go through the session.
#[test]
fn a_sessions_reads_are_answered_by_nibs_front_with_rmcps_message() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), TEN).unwrap();
    let nib = serve(dir.path(), &[]);
    let session = open_session(&nib.addr, &format!("Bearer {ALICE}"));
    // Bob's session is answered by rmcp, so each answer is a first one.
    let bobs = open_session(&nib.addr, &format!("Bearer {BOB}"));
    let cases = front_cases(json!({"name": "grep", "arguments": {"pattern": "l1"}}));
    for (k, (method, params)) in cases.iter().enumerate() {
        let body = json!({"jsonrpc": "2.0", "id": 20 + k, "method": method, "params": params});
        let front = in_session(&nib.addr, ALICE, &session, FRONT, &body);
        let rmcp = in_session(&nib.addr, BOB, &bobs, RMCP, &body);
        let what = format!("{method} {params}");
        assert_eq!(
            (front.status, rmcp.status),
            (200, 200),
            "{what}: {}",
            front.body
        );
        assert_eq!(
            front.header("content-type"),
            Some("application/json"),
            "{what}"
        );
        assert_eq!(
            rmcp.header("content-type"),
            Some("text/event-stream"),
            "{what}"
        );
        assert_eq!(front.message(), rmcp.message(), "{what}");
    }
    // Calls that may ask the client mid-call stay on the session's stream.
    let tag = header_tag(
        &in_session(
            &nib.addr,
            ALICE,
            &session,
            FRONT,
            &json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call",
                "params": {"name": "read", "arguments": {"paths": ["f.txt"]}}}),
        )
        .tool_text()
        .0,
    );
    for (id, tool, args) in [
        (
            31,
            "edit",
            json!({"input": format!("[f.txt#{tag}]\nPUT 3:\n+three\n")}),
        ),
        (32, "nibash", json!({"command": "touch ran"})),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": args}});
        let a = in_session(&nib.addr, ALICE, &session, FRONT, &body);
        assert_eq!(
            a.header("content-type"),
            Some("text/event-stream"),
            "{tool}"
        );
        assert!(!a.tool_text().1, "{tool}: {}", a.body);
    }
    assert!(dir.path().join("ran").exists());
    // Bob naming alice's session reads nothing, whichever path would answer.
    let read = json!({"jsonrpc": "2.0", "id": 40, "method": "tools/call",
                      "params": {"name": "read", "arguments": {"paths": ["f.txt"]}}});
    for accept in [FRONT, RMCP] {
        let a = in_session(&nib.addr, BOB, &session, accept, &read);
        assert_eq!(a.status, 404, "{accept}: {}", a.body);
        assert!(!a.body.contains("three"), "{}", a.body);
    }
    // An ended session answers nothing.
    let bearer = format!("Bearer {ALICE}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let a = request(&nib.addr, "DELETE", "/mcp", &headers, b"");
    assert!(a.status < 300, "{} {}", a.status, a.body);
    let a = in_session(&nib.addr, ALICE, &session, FRONT, &read);
    assert_eq!(a.status, 404, "{}", a.body);
    assert!(!a.body.contains("three"), "{}", a.body);
}

/// The front's answers do not let a session idle out: with `--session-idle
/// 2`, a session used only for reads (which rmcp never sees) for longer
/// than that stays open, also when requests naming it that rmcp answers
/// without the session come between; an unused one ends.
#[test]
fn a_session_used_only_for_reads_is_not_ended_as_idle() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), TEN).unwrap();
    let nib = serve(dir.path(), &["--session-idle", "2"]);
    let bearer = format!("Bearer {ALICE}");
    let (used, unused) = (
        open_session(&nib.addr, &bearer),
        open_session(&nib.addr, &bearer),
    );
    let read = |session: &str, id: u64| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "read", "arguments": {"paths": ["f.txt"]}}});
        in_session(&nib.addr, ALICE, session, FRONT, &body)
    };
    // Just before each read, requests naming the session that rmcp answers
    // without it: a refused one (no SSE in Accept) and a sessionless one.
    let status = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "nibash_status", "arguments": {}}});
    let mut modern = status.clone();
    modern["params"]["_meta"] = modern_meta();
    let start = Instant::now();
    let mut id = 100;
    while start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(300));
        let a = in_session(&nib.addr, ALICE, &used, "application/json", &status);
        assert_eq!(a.status, 406, "{}", a.body);
        let headers = [
            ("Authorization", bearer.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", FRONT),
            ("Mcp-Session-Id", used.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "nibash_status"),
        ];
        let a = request(
            &nib.addr,
            "POST",
            "/mcp",
            &headers,
            modern.to_string().as_bytes(),
        );
        assert_eq!(a.status, 200, "{}", a.body);
        id += 1;
        let a = read(&used, id);
        assert_eq!(a.status, 200, "after {:?}: {}", start.elapsed(), a.body);
        assert_eq!(a.header("content-type"), Some("application/json"));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "nibash", "arguments": {"command": "touch still-open"}}});
    let a = in_session(&nib.addr, ALICE, &used, FRONT, &body);
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(dir.path().join("still-open").exists(), "{}", a.body);
    assert_eq!(
        read(&unused, 2).status,
        404,
        "an unused session outlived --session-idle"
    );
}

#[test]
fn a_client_that_goes_away_cancels_its_call_whichever_path_answers_it() {
    let dir = project();
    let nib = serve(dir.path(), &[]);
    // The plain headers (nib's front answers) and a weighted Accept (rmcp's
    // service answers): each call's client leaves, then one that stays.
    let paths = [
        ("front", "application/json, text/event-stream"),
        ("rmcp", "application/json;q=1, text/event-stream"),
    ];
    for (path, accept) in paths {
        for stays in [false, true] {
            let file = format!("{path}-{}", if stays { "stayed" } else { "left" });
            let body = json!({
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "nibash",
                           "arguments": {"command": format!("sleep 2 && touch {file}")},
                           "_meta": modern_meta()}
            })
            .to_string();
            let mut s = TcpStream::connect(&nib.addr).unwrap();
            write!(
                s,
                "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {ALICE}\r\n\
                 Content-Type: application/json\r\nAccept: {accept}\r\n\
                 MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: nibash\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                nib.addr,
                body.len()
            )
            .unwrap();
            if stays {
                let mut answer = String::new();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let _ = BufReader::new(s).read_line(&mut answer);
                assert!(answer.contains("200"), "{path}: {answer}");
            } else {
                std::thread::sleep(Duration::from_millis(700));
                drop(s);
            }
        }
    }
    std::thread::sleep(Duration::from_secs(3));
    for path in ["front", "rmcp"] {
        assert!(dir.path().join(format!("{path}-stayed")).exists(), "{path}");
        assert!(
            !dir.path().join(format!("{path}-left")).exists(),
            "{path}: the call ran on after its client left"
        );
    }
}
