//! `nib serve --http` attacked as a hostile agent would: one agent's token
//! and programs reaching for another agent's things. Each test plants a
//! canary (a token, a marker file) that must stay out of the attacker's
//! reach, through the built binary over real HTTP/1.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{isolated_env, nib_bin, project};

const ALICE: &str = "alice-secret-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";

/// A running `nib serve --http`.
struct Served {
    child: Child,
    addr: String,
    /// The folder that holds the token file (`tokens`).
    etc: PathBuf,
    /// What nib wrote to stderr (its first MiB).
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    _home: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts nib in `dir` with alice's and bob's tokens in `etc/tokens`, a
/// folder outside the project that programs may read (as `/etc` is), with
/// `env` on top (the sandbox's variables).
fn serve(dir: &Path, env: &[(&str, &str)]) -> Served {
    serve_under(&[], dir, env)
}

/// [`serve`], nib started by `wrapper` (a program and its arguments before
/// nib's path).
fn serve_under(wrapper: &[&str], dir: &Path, env: &[(&str, &str)]) -> Served {
    let home = tempfile::tempdir().unwrap();
    let etc = home.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let tokens = etc.join("tokens");
    std::fs::write(&tokens, format!("alice {ALICE}\nbob {BOB}\n")).unwrap();
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
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env("NIB_LOG", "warn");
    for (k, v) in isolated_env(home.path()) {
        cmd.env(k, v);
    }
    cmd.env("NIB_SANDBOX_BIND", &etc);
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
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = std::sync::Arc::clone(&stderr);
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut all = sink.lock().unwrap();
            if all.len() < 1 << 20 {
                all.push_str(&(line + "\n"));
            }
        }
    });
    Served {
        child,
        addr,
        etc,
        stderr,
        _home: home,
    }
}

/// One request (`Connection: close`): the status and the body.
fn request(addr: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!("POST /mcp HTTP/1.1\r\nConnection: close\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// A 2026-07-28 tools/call as the agent of `token`: the text of its answer
/// (or the whole body when it is not a tool result).
fn call(addr: &str, token: &str, tool: &str, args: Value) -> String {
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "red-team", "version": "1"}
        }}
    });
    let auth = format!("Bearer {token}");
    let (_, text) = request(
        addr,
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
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|m| {
            m["result"]["content"][0]["text"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or(text)
}

const SANDBOXES: &[&[(&str, &str)]] = &[
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

/// The token file holds every agent's token: bob's programs, and nib's own
/// commands in his nibash, read the folder it is in but never the file
/// (reading it would make bob alice).
#[test]
fn an_agents_programs_never_read_the_token_file() {
    for env in SANDBOXES {
        for attempt in 0..2 {
            let dir = project();
            let nib = serve(dir.path(), env);
            let tokens = nib.etc.join("tokens");
            let t = tokens.display();
            let text = call(
                &nib.addr,
                BOB,
                "nibash",
                json!({"command": format!(
                    "cat {t}; /bin/cat {t}; base64 {t}; sh -c 'while read a b; do echo $b; done < {t}'; ls {}",
                    nib.etc.display()
                )}),
            );
            assert!(
                text.contains("tokens"),
                "{env:?} #{attempt}: ls ran: {text}"
            );
            assert!(
                !text.contains(ALICE) && !text.contains("YWxpY2Ug"),
                "{env:?} #{attempt}: bob read alice's token: {text}"
            );
            let text = call(&nib.addr, BOB, "read", json!({"paths": [tokens]}));
            assert!(!text.contains(ALICE), "{env:?} #{attempt}: {text}");
        }
    }
}

/// The sandbox's private /tmp is named to each agent whose programs write
/// there, and over HTTP the note says the server's other agents share it
/// (every agent's calls are forked by one zygote; SECURITY.md). Before, the
/// first agent's call named it for the whole server, and as the session's
/// own: bob wrote there and was told nothing.
#[test]
fn each_agent_is_told_the_private_tmp_is_shared() {
    for env in SANDBOXES {
        let dir = project();
        let nib = serve(dir.path(), env);
        let write =
            |name: &str| json!({"command": format!("echo x > \"${{TMPDIR:-/tmp}}/{name}\"")});
        let shared = "the server's other agents' too";
        let alice = call(&nib.addr, ALICE, "nibash", write("alice-1"));
        assert!(alice.contains(shared), "{env:?}: alice: {alice}");
        let bob = call(&nib.addr, BOB, "nibash", write("bob-1"));
        assert!(bob.contains(shared), "{env:?}: bob: {bob}");
        // Once each.
        let again = call(&nib.addr, ALICE, "nibash", write("alice-2"));
        assert!(!again.contains("private /tmp"), "{env:?}: {again}");
    }
}

/// A 2026-07-28 tools/call from a client that can be asked (elicitation),
/// with `extra` params (a retry's requestState and inputResponses): the
/// JSON-RPC answer.
fn asking_call(addr: &str, token: &str, tool: &str, args: &Value, extra: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": args, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "red-team", "version": "1"}
    }});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params});
    let auth = format!("Bearer {token}");
    let (status, text) = request(
        addr,
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
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A host the person declined is not put to them again: a program that
/// tries it on every call cannot make every call a question. Another
/// agent's person is still asked (a decline is the agent's own).
#[test]
fn a_declined_host_is_not_asked_again() {
    for env in SANDBOXES {
        for attempt in 0..2 {
            let dir = project();
            let nib = serve(dir.path(), env);
            let args =
                json!({"command": "curl -s -m 5 http://nag-me.example/ -o /dev/null; echo tried"});
            let asked = asking_call(&nib.addr, BOB, "nibash", &args, json!({}));
            let result = &asked["result"];
            assert_eq!(
                result["resultType"], "input_required",
                "{env:?} #{attempt}: {asked}"
            );
            assert!(asked.to_string().contains("nag-me.example"), "{asked}");
            let state = result["requestState"].as_str().unwrap().to_string();
            let declined = asking_call(
                &nib.addr,
                BOB,
                "nibash",
                &args,
                json!({"requestState": state, "inputResponses": {"approve": {"action": "decline"}}}),
            );
            assert!(
                declined.to_string().contains("not allowed"),
                "{env:?} #{attempt}: {declined}"
            );
            for again in 0..3 {
                let next = asking_call(&nib.addr, BOB, "nibash", &args, json!({}));
                assert_eq!(
                    next["result"]["resultType"], "complete",
                    "{env:?} #{attempt}: bob's person is asked again about a declined host (call {again}): {next}"
                );
                let text = next["result"]["content"][0]["text"].as_str().unwrap_or("");
                assert!(
                    text.contains("tried") && text.contains("nag-me.example"),
                    "{env:?} #{attempt}: the refusal is named: {text}"
                );
            }
            let alice = asking_call(&nib.addr, ALICE, "nibash", &args, json!({}));
            assert_eq!(
                alice["result"]["resultType"], "input_required",
                "{env:?} #{attempt}: alice's person is still asked: {alice}"
            );
        }
    }
}

/// Reads one HTTP answer with a Content-Length body from a kept-alive
/// connection: its body.
fn read_answer(s: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => raw.push(byte[0]),
            _ => return String::from_utf8_lossy(&raw).to_string(),
        }
    }
    let head = String::from_utf8_lossy(&raw).to_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    let _ = s.read_exact(&mut body);
    String::from_utf8_lossy(&body).to_string()
}

/// Clients that open connections and send nothing never take the
/// descriptors nib's tools need, nor make nib spin: with nib allowed 256
/// descriptors and 400 idle connections held, a call on a connection opened
/// before them still runs a program and reads a file, and nib's log holds
/// no flood of failed accepts.
#[test]
fn idle_connections_never_starve_the_tools() {
    let wrapper = ["sh", "-c", "ulimit -n 256 && exec \"$0\" \"$@\""];
    for env in SANDBOXES {
        for attempt in 0..2 {
            let dir = project();
            std::fs::write(dir.path().join("f.txt"), "canary-line-5150\n").unwrap();
            let nib = serve_under(&wrapper, dir.path(), env);
            // A first call starts the sandbox's helpers (under Landlock +
            // seccomp, a first call made while the connections are held
            // fails: "no channel: Broken pipe", reported apart).
            let warm = call(&nib.addr, BOB, "nibash", json!({"command": "true"}));
            assert!(!warm.contains("nothing ran"), "{warm}");
            let mut kept = TcpStream::connect(&nib.addr).unwrap();
            kept.set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            let idle: Vec<TcpStream> = (0..400)
                .filter_map(|_| TcpStream::connect(&nib.addr).ok())
                .collect();
            std::thread::sleep(Duration::from_millis(1500));
            let body = json!({
                "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "nibash", "arguments": {"command": "cat f.txt; echo ran-$((6*7))"}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "red-team", "version": "1"}
                }}
            })
            .to_string();
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {BOB}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: nibash\r\nContent-Length: {}\r\n\r\n",
                nib.addr,
                body.len()
            );
            kept.write_all(head.as_bytes()).unwrap();
            kept.write_all(body.as_bytes()).unwrap();
            let answer = read_answer(&mut kept);
            drop(idle);
            assert!(
                answer.contains("canary-line-5150") && answer.contains("ran-42"),
                "{env:?} #{attempt}: the call on a kept connection failed: {answer}"
            );
            let floods = nib
                .stderr
                .lock()
                .unwrap()
                .matches("accepting a connection failed")
                .count();
            assert!(
                floods < 50,
                "{env:?} #{attempt}: nib spun on accept: {floods} lines"
            );
        }
    }
}
