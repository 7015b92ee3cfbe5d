//! The protocol: both eras, annotations, errors that keep the server serving,
//! stdout hygiene, exit on stdin close, roots.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

#[tokio::test]
async fn both_eras_list_annotated_tools() {
    let dir = project();
    for era in ERAS {
        let nib = start(era, dir.path()).await;
        let tools = nib.client.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            vec![
                "read",
                "grep",
                "find",
                "edit",
                "write",
                "nibash",
                "nibash_status",
                "nibash_control",
                "skim"
            ],
            "{era:?}"
        );
        for t in &tools {
            let a = t.annotations.as_ref().expect("annotations");
            let read_only = matches!(
                t.name.as_ref(),
                "read" | "grep" | "find" | "nibash_status" | "skim"
            );
            assert_eq!(a.read_only_hint, Some(read_only), "{era:?} {}", t.name);
            assert_eq!(a.destructive_hint, Some(!read_only), "{era:?} {}", t.name);
            assert_eq!(a.idempotent_hint, Some(read_only), "{era:?} {}", t.name);
        }
        nib.stop().await;
    }
}

#[tokio::test]
async fn nib_shell_0_offers_no_shell_tools() {
    let dir = project();
    let nib = start_with(
        Era::Handshake,
        dir.path(),
        TestClient::new(Roots::Undeclared),
        &[("NIB_SHELL", "0")],
    )
    .await;
    let tools = nib.client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, vec!["read", "grep", "find", "edit", "write"]);
    let text = nib.err("nibash", json!({"command": "touch canary"})).await;
    assert!(text.contains("NIB_SHELL=0"), "{text}");
    assert!(
        !dir.path().join("canary").exists(),
        "nothing may run with the shell off"
    );
    nib.stop().await;
}

/// An unknown tool is a protocol error; arguments a tool cannot use (a
/// required one missing, one of the wrong type) are the tool's error, a
/// result with isError the model reads (as the 2025-11-25 revision asks),
/// naming the argument and the next step.
#[tokio::test]
async fn bad_calls_are_errors_and_the_server_keeps_serving() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "keep\n").unwrap();
    for era in ERAS {
        let nib = start(era, dir.path()).await;
        let e = nib.try_call("frobnicate", json!({})).await.unwrap_err();
        assert!(e.contains("unknown tool"), "{era:?}: {e}");
        for (tool, args, named) in [
            ("read", json!({}), "\"paths\" is required"),
            ("read", json!({"paths": 42}), "paths"),
            ("write", json!({"content": "x"}), "\"path\" is required"),
            (
                "write",
                json!({"path": "a.txt", "content": ["x"]}),
                "content",
            ),
            ("nibash", json!({}), "\"command\" is required"),
        ] {
            let text = nib.err(tool, args.clone()).await;
            assert!(
                text.contains(named)
                    && text.contains("nothing was read or written")
                    && text.contains("hint:"),
                "{era:?} {tool} {args}: {text}"
            );
        }
        // Still serving, and nothing changed on disk.
        let text = nib.ok("read", json!({"paths": ["a.txt"]})).await;
        assert!(text.contains("1:keep"), "{era:?}: {text}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "keep\n"
        );
        nib.stop().await;
    }
}

/// A raw client: lines in, lines out.
struct Raw {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Raw {
    fn start(dir: &std::path::Path) -> Raw {
        let mut child = nib_command()
            .current_dir(dir)
            .env_remove("NIB_DIRECTORY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nib");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        Raw { child, out }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("read stdout");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[test]
fn malformed_lines_get_json_rpc_errors_and_stdout_stays_protocol_only() {
    let dir = project();
    let mut raw = Raw::start(dir.path());
    raw.send(INIT);
    let init = raw.recv();
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["serverInfo"]["name"], "nib");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    raw.send("this is not json");
    let e = raw.recv();
    assert_eq!(e["error"]["code"], -32700);
    assert_eq!(e["id"], Value::Null);

    raw.send(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":5}"#);
    let e = raw.recv();
    assert_eq!(e["error"]["code"], -32600);
    assert_eq!(e["id"], 7);

    raw.send("[1, 2]");
    assert_eq!(raw.recv()["error"]["code"], -32600);

    // A cancel for a request that already finished is ignored quietly.
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);

    raw.send(r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#);
    let list = raw.recv();
    assert_eq!(list["id"], 8, "the server still answers: {list}");
    assert_eq!(list["result"]["tools"].as_array().map(Vec::len), Some(9));
}

#[test]
fn exits_promptly_when_stdin_closes() {
    let dir = project();
    let mut raw = Raw::start(dir.path());
    raw.send(INIT);
    raw.recv();
    drop(raw.child.stdin.take());
    let started = Instant::now();
    loop {
        if let Some(status) = raw.child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "nib still running 5 s after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Nothing but protocol messages was written.
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut raw.out, &mut rest).unwrap();
    assert!(
        rest.trim().is_empty(),
        "unexpected stdout after exit: {rest:?}"
    );
}

#[test]
fn exits_when_stdin_closes_before_any_message() {
    let dir = project();
    let mut raw = Raw::start(dir.path());
    drop(raw.child.stdin.take());
    let started = Instant::now();
    while raw.child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "nib still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_client_without_roots_is_never_asked_for_them() {
    let dir = project();
    for era in ERAS {
        let client = TestClient::new(Roots::Undeclared);
        let nib = start_with(era, dir.path(), client, &[]).await;
        nib.ok("read", json!({"paths": ["."]})).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(nib.handler.roots_calls(), 0, "{era:?}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_client_with_roots_is_asked_once_in_either_era() {
    let dir = project();
    for era in ERAS {
        let client = TestClient::new(Roots::Answer(vec!["file:///tmp".into()]));
        let nib = start_with(era, dir.path(), client, &[]).await;
        let text = nib.ok("read", json!({"paths": ["."]})).await;
        assert!(text.starts_with("[./]"), "{era:?}: {text}");
        nib.ok("read", json!({"paths": ["."]})).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(nib.handler.roots_calls(), 1, "{era:?}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_client_that_never_answers_roots_does_not_block_tools() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let client = TestClient::new(Roots::Hang);
    let nib = start_with(
        Era::Handshake,
        dir.path(),
        client,
        &[("NIB_ROOTS_TIMEOUT_MS", "300")],
    )
    .await;
    let text = nib.ok("read", json!({"paths": ["a.txt"]})).await;
    assert!(text.contains("1:x"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text = nib.ok("read", json!({"paths": ["a.txt"]})).await;
    assert!(text.contains("1:x"));
    nib.stop().await;
}

/// A small JSON Schema (2020-12) checker for the keywords MCP's published
/// schema uses: `$ref` into `$defs`, `type`, `properties`, `required`,
/// `const`, `enum`, `items`, `anyOf`, `additionalProperties`, `minimum`,
/// `maximum`, `maxItems`. Returns the first mismatch as a path and a reason.
fn check(root: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return Ok(()); // `true` / `{}`-like schemas accept anything
    };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        let target = root["$defs"]
            .get(name)
            .ok_or_else(|| format!("{at}: unknown $ref {r}"))?;
        check(root, target, v, at)?;
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(x) => vec![x.as_str()],
            Value::Array(xs) => xs.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let fits = |ty: &str| match ty {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
            "number" => v.is_number(),
            _ => true,
        };
        if !types.is_empty() && !types.iter().any(|ty| fits(ty)) {
            return Err(format!("{at}: expected {types:?}, got {v}"));
        }
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        return Err(format!("{at}: expected {c}, got {v}"));
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(v)
    {
        return Err(format!("{at}: {v} is not one of {options:?}"));
    }
    if let Some(Value::Array(options)) = s.get("anyOf") {
        let errors: Vec<String> = options
            .iter()
            .filter_map(|o| check(root, o, v, at).err())
            .collect();
        if errors.len() == options.len() {
            return Err(format!(
                "{at}: matches none of anyOf: {}",
                errors.join(" | ")
            ));
        }
    }
    if let Some(n) = v.as_f64() {
        if s.get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
        {
            return Err(format!("{at}: {n} is below the minimum"));
        }
        if s.get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n > m)
        {
            return Err(format!("{at}: {n} is above the maximum"));
        }
    }
    if let Some(items) = v.as_array() {
        if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            return Err(format!("{at}: more than {max} items"));
        }
        if let Some(item_schema) = s.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(root, item_schema, item, &format!("{at}[{i}]"))?;
            }
        }
    }
    if let Some(obj) = v.as_object() {
        if let Some(Value::Array(required)) = s.get("required") {
            for r in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    return Err(format!("{at}: missing required \"{r}\""));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(root, ps, val, &format!("{at}.{k}"))?,
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(format!("{at}: unexpected property \"{k}\""));
                    }
                    Some(extra) => check(root, extra, val, &format!("{at}.{k}"))?,
                    None => {}
                },
            }
        }
    }
    Ok(())
}

#[test]
fn modern_era_results_match_the_published_schema() {
    let schema: Value = serde_json::from_str(include_str!("fixtures/mcp-schema/2026-07-28.json"))
        .expect("the schema parses");
    let def = |name: &str| json!({"$ref": format!("#/$defs/{name}")});
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut raw = Raw::start(dir.path());
    let meta = |caps: Value| {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "schema-check", "version": "1"}
        })
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "server/discover",
            json!({"_meta": meta(json!({}))}),
            "DiscoverResultResponse",
        ),
        (
            "tools/list",
            json!({"_meta": meta(json!({}))}),
            "ListToolsResultResponse",
        ),
        // 2026-07-28 removed `ping` (its changelog, item 5): method not found.
        (
            "ping",
            json!({"_meta": meta(json!({}))}),
            "JSONRPCErrorResponse",
        ),
        (
            "tools/call",
            json!({"name": "read", "arguments": {"paths": ["a.txt"]}, "_meta": meta(json!({}))}),
            "CallToolResultResponse",
        ),
        (
            "tools/call",
            json!({"name": "read", "arguments": {"paths": ["missing.txt"]}, "_meta": meta(json!({}))}),
            "CallToolResultResponse",
        ),
        (
            "tools/call",
            json!({"name": "nibash_status", "arguments": {}, "_meta": meta(json!({}))}),
            "CallToolResultResponse",
        ),
        (
            // A client that declared roots and sent none: nib asks for them.
            "tools/call",
            json!({"name": "read", "arguments": {"paths": ["a.txt"]}, "_meta": meta(json!({"roots": {}}))}),
            "CallToolResultResponse",
        ),
        (
            "tools/call",
            json!({"name": "no_such_tool", "arguments": {}, "_meta": meta(json!({}))}),
            "JSONRPCErrorResponse",
        ),
    ];
    let mut failures = Vec::new();
    for (i, (method, params, def_name)) in cases.iter().enumerate() {
        let id = i + 1;
        raw.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        let answer = raw.recv();
        if *method == "ping" && answer["error"]["code"] != -32601 {
            failures.push(format!("ping is no method in 2026-07-28: {answer}"));
        }
        if let Err(e) = check(&schema, &def(def_name), &answer, "$") {
            failures.push(format!("{method} → {def_name}: {e}\n  {answer}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every message sent before stdin closes gets its answer, or a JSON-RPC
/// error, before nib exits (issue 60): 100 runs over every message kind
/// (a request before `initialize`, a line that is not JSON, a request that
/// is not valid, two 2026-07-28 requests without `_meta`, a handshake and a
/// call, a notification, which gets none), each piped whole and stdin
/// closed at once; a call still running after the stated grace gets an
/// error saying so.
#[test]
fn every_request_is_answered_before_nib_exits_on_a_closed_stdin() {
    let dir = project();
    let modern = |id: u32, method: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}}).to_string()
    };
    let kinds: Vec<(&str, Vec<String>, Vec<Value>)> = vec![
        (
            "ping before initialize",
            vec![r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#.into()],
            vec![json!(7)],
        ),
        ("not JSON", vec!["not json at all".into()], vec![Value::Null]),
        (
            "invalid request",
            vec![r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":5}"#.into()],
            vec![json!(9)],
        ),
        (
            "two modern requests without _meta",
            vec![modern(1, "tools/list"), modern(2, "tools/list")],
            vec![json!(1), json!(2)],
        ),
        (
            "handshake and a call",
            vec![
                INIT.into(),
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nibash","arguments":{"command":"echo hi"}}}"#.into(),
            ],
            vec![json!(1), json!(3)],
        ),
        (
            "a notification only",
            vec![r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into()],
            vec![],
        ),
    ];
    let run = |lines: &[String]| -> (Vec<Value>, Duration) {
        let started = Instant::now();
        let mut child = nib_command()
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for l in lines {
            writeln!(stdin, "{l}").unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "exit status {}", out.status);
        let text = String::from_utf8(out.stdout).unwrap();
        let answers = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("stdout holds only JSON lines"))
            .collect();
        (answers, started.elapsed())
    };
    for i in 0..100 {
        let (what, lines, ids) = &kinds[i % kinds.len()];
        let (answers, _) = run(lines);
        let got: Vec<Value> = answers.iter().map(|a| a["id"].clone()).collect();
        assert_eq!(&got, ids, "run {i}, {what}: {answers:?}");
    }
    // A call still running when stdin closes: an error after the grace.
    let (answers, took) = run(&[
        INIT.into(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nibash","arguments":{"command":"sleep 30"}}}"#.into(),
    ]);
    let last = answers.last().unwrap();
    assert_eq!(last["id"], json!(4), "{answers:?}");
    let message = last["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("closed stdin") && message.contains("5 s"),
        "{last}"
    );
    assert!(took < Duration::from_secs(20), "nib took {took:?} to exit");
}
