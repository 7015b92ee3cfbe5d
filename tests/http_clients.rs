//! Real clients of `nib serve --http` (issue 61): Claude Code with the
//! `.mcp.json` entry `nib setup --http URL` writes, and the MCP Python SDK's
//! client in each mode it offers. Each makes an edit through nib over HTTP
//! and the test checks the bytes on disk; the server's request log says
//! which agent made it.
//!
//! Claude Code and the SDK are found where `.ci/run` installs them
//! (`target/claude-code`, `target/mcp-venv`); without them a test says so
//! and passes, unless `NIB_REQUIRE_THIRD_PARTY=1` (as in CI).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use nib_mock_model::{Mock, Script};
use serde_json::{Value, json};

use crate::claude_code::{claude, command};
use crate::clients::{Env as Place, env as place};
use crate::common::{isolated_env, nib_bin};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";

/// A running `nib serve --http` in a project.
struct Served {
    child: Child,
    url: String,
    log: Arc<Mutex<String>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// What nib wrote on stderr so far (one JSON line per request).
    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The log once `ready` holds of it (nib writes a request's line as it
    /// answers; the reader thread may lag behind the client), or after 10 s.
    fn wait_for(&self, ready: impl Fn(&str) -> bool) -> String {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let log = self.log();
            if ready(&log) || std::time::Instant::now() > until {
                return log;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Starts `nib serve --http 127.0.0.1:0` in `project`, its token file (alice
/// and bob) and state under `home`, outside the project.
fn serve(project: &Path, home: &Path) -> Served {
    serve_with(project, home, &[])
}

/// [`serve`] with more environment (the sandbox's variables).
fn serve_with(project: &Path, home: &Path, env: &[(&str, &str)]) -> Served {
    let tokens = home.join("nib-tokens");
    std::fs::write(&tokens, format!("alice {ALICE}\nbob {BOB}\n")).unwrap();
    let server_home = home.join("server");
    std::fs::create_dir_all(&server_home).unwrap();
    let mut cmd = Command::new(nib_bin());
    cmd.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .current_dir(project)
        .env_remove("NIB_DIRECTORY")
        .env("NIB_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in isolated_env(&server_home) {
        cmd.env(k, v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("listening on ").map(str::to_string))
        .expect("nib printed where it listens");
    let log = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            sink.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    Served { child, url, log }
}

/// The request log's lines for tools/call of `tool` by `agent` that nib answered 200.
fn calls(log: &str, agent: &str, tool: &str) -> usize {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["agent"] == json!(agent)
                && v["method"] == json!("tools/call")
                && v["tool"] == json!(tool)
                && v["status"] == json!(200)
        })
        .count()
}

fn output(mut c: Command) -> (String, String, i32) {
    let out = c.output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// `nib setup --http URL` in the place's project.
fn setup_http(p: &Place, url: &str) -> (String, i32) {
    let mut setup = command(&nib_bin(), p);
    setup.args(["setup", "--http", url]);
    let (out, err, code) = output(setup);
    (out + &err, code)
}

/// Every file beneath `dir`, with its text.
fn files_beneath(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            found.extend(files_beneath(&path));
        } else {
            found.push((
                path.clone(),
                std::fs::read_to_string(&path).unwrap_or_default(),
            ));
        }
    }
    found
}

#[test]
fn setup_http_writes_an_http_entry_whose_token_comes_from_the_environment() {
    let p = place();
    let url = "http://127.0.0.1:8765/mcp";
    let (out, code) = setup_http(&p, url);
    assert_eq!(code, 0, "{out}");
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(p.project.join(".mcp.json")).unwrap())
            .unwrap();
    assert_eq!(
        mcp["mcpServers"]["nib"],
        json!({
            "type": "http",
            "url": url,
            "headers": {"Authorization": "Bearer ${NIB_TOKEN}"},
            "alwaysLoad": true
        })
    );
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(p.project.join(".claude/settings.local.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(settings["enabledMcpjsonServers"], json!(["nib"]));
    assert!(
        settings.get("hooks").is_none() && settings.get("statusLine").is_none(),
        "no hooks or status line for a server elsewhere: {settings}"
    );
    assert!(
        out.contains("Bearer ${NIB_TOKEN}")
            && out.contains("not written into .mcp.json")
            && out.contains("NIB_TOKEN=... claude"),
        "setup says where the token comes from: {out}"
    );
    // A second run changes nothing; a stdio entry an earlier setup wrote
    // becomes the HTTP one, keeping a router's header.
    let (again, code) = setup_http(&p, url);
    assert_eq!(code, 0, "{again}");
    assert!(again.contains("nothing to change"), "{again}");
    std::fs::write(
        p.project.join(".mcp.json"),
        json!({"mcpServers": {
            "nib": {"type": "stdio", "command": "/opt/nib/bin/nib", "args": [], "env": {"NIB_SANDBOX": "0"}},
            "other": {"command": "other-server"}
        }})
        .to_string(),
    )
    .unwrap();
    let (_, code) = setup_http(&p, "https://nib.agents.svc.cluster.local:8765/mcp");
    assert_eq!(code, 0);
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(p.project.join(".mcp.json")).unwrap())
            .unwrap();
    assert_eq!(
        mcp["mcpServers"]["nib"],
        json!({
            "type": "http",
            "url": "https://nib.agents.svc.cluster.local:8765/mcp",
            "headers": {"Authorization": "Bearer ${NIB_TOKEN}"},
            "alwaysLoad": true
        })
    );
    assert_eq!(
        mcp["mcpServers"]["other"],
        json!({"command": "other-server"})
    );
    // A URL with a password in it, --user and --no-sandbox are refused, and nothing is written.
    let before = std::fs::read_to_string(p.project.join(".mcp.json")).unwrap();
    for args in [
        vec![
            "setup",
            "--http",
            "http://alice:secret-token@127.0.0.1:8765/mcp",
        ],
        vec!["setup", "--http", "ftp://127.0.0.1/mcp"],
        vec!["setup", "--user", "--http", url],
        vec!["setup", "--no-sandbox", "--http", url],
    ] {
        let mut c = command(&nib_bin(), &p);
        c.args(&args);
        let (out, err, code) = output(c);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(out.contains("nothing was written"), "{args:?}: {out}");
    }
    assert_eq!(
        std::fs::read_to_string(p.project.join(".mcp.json")).unwrap(),
        before
    );
    assert!(
        files_beneath(&p.project)
            .iter()
            .chain(files_beneath(&p.home).iter())
            .all(|(_, text)| !text.contains("secret-token")),
        "a refused URL's password was written somewhere"
    );
}

/// Claude Code, offline against the mock model, with the entry `nib setup
/// --http` wrote: with a wrong token in NIB_TOKEN nib answers 401, no tool
/// of nib's runs and the file stays as it was (the canary: the header is
/// what lets Claude Code in); with alice's token the read and the edit go
/// through nib over HTTP, as alice, and the file on disk changes as the
/// model asked. The token is in no file beneath the project.
#[test]
fn claude_code_edits_through_nib_over_http_with_the_entry_setup_wrote() {
    let Some(claude) = claude() else { return };
    let p = place();
    let original = "alpha\nbeta\ngamma\n";
    let notes = p.project.join("notes.txt");
    std::fs::write(&notes, original).unwrap();
    let served = serve(&p.project, &p.home);
    let (out, code) = setup_http(&p, &served.url);
    assert_eq!(code, 0, "{out}");
    let script = || {
        Script::parse(
            &json!({"steps": [
                {"tool": "mcp__nib__read", "input": {"paths": ["notes.txt"]}},
                {"tool": "mcp__nib__edit", "input": {"input": "[notes.txt#{{tag notes.txt}}]\nSUB 2: beta\n+delta\n"}},
                {"text": "Changed beta to delta."}
            ]})
            .to_string(),
        )
        .unwrap()
    };
    let ask = |mock: &Mock, token: &str| {
        let mut c = command(&claude, &p);
        c.args([
            "-p",
            "change beta to delta in notes.txt",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "mcp__nib",
        ])
        .env("ANTHROPIC_BASE_URL", mock.url())
        .env("ANTHROPIC_API_KEY", "sk-test-offline")
        .env("NIB_TOKEN", token);
        output(c)
    };

    let wrong = Mock::start(script(), None).unwrap();
    let (out, err, _) = ask(&wrong, "wrong-token-0123456789abcdef");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        original,
        "an edit went through with a wrong token: {out}\n{err}"
    );
    let log = served.wait_for(|log| log.contains("\"status\":401"));
    assert!(
        log.contains("\"status\":401")
            && calls(&log, "alice", "read") + calls(&log, "alice", "edit") == 0,
        "nib refused the wrong token: {log}"
    );

    let mock = Mock::start(script(), None).unwrap();
    let (out, err, code) = ask(&mock, ALICE);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(mock.steps_taken(), 3, "{out}\n{err}");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "alpha\ndelta\ngamma\n",
        "{out}\n{err}"
    );
    let log = served.wait_for(|log| calls(log, "alice", "edit") == 1);
    assert_eq!(calls(&log, "alice", "read"), 1, "{log}");
    assert_eq!(calls(&log, "alice", "edit"), 1, "{log}");
    let sent = serde_json::to_string(&mock.requests()).unwrap();
    assert!(sent.contains("mcp__nib__edit"), "nib's tools were offered");
    for (path, text) in files_beneath(&p.project) {
        assert!(!text.contains(ALICE), "{} holds the token", path.display());
    }
}

/// The MCP Python SDK's `Client` (target/mcp-venv, pinned in .ci/run), if installed.
fn python_sdk() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp-venv/bin/python");
    let has_client = python.exists()
        && Command::new(&python)
            .args(["-c", "from mcp.client.client import Client"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !has_client {
        assert!(
            std::env::var_os("NIB_REQUIRE_THIRD_PARTY").is_none(),
            "the MCP Python SDK (mcp >= 2, with mcp.client.client.Client) is not in target/mcp-venv; .ci/run installs it"
        );
        crate::common::skip(
            "the MCP Python SDK (mcp >= 2) is not installed in target/mcp-venv (.ci/run installs it)",
        );
        return None;
    }
    Some(python)
}

/// The Python SDK's client in each of its modes: `legacy` (initialize and a
/// session), `auto` (it probes server/discover and takes 2026-07-28) and
/// the version pinned, `2026-07-28` (sessionless, no probe), against nib
/// unconfined, under bubblewrap, and under Landlock + seccomp alone. Each
/// lists nib's tools, reads a file, edits it with the read's tag and shows
/// it with nibash, as alice: the file on disk changes, nibash prints the
/// new line, and nib's log names alice as the agent.
#[test]
fn the_python_sdk_reads_and_edits_over_http_in_each_of_its_modes() {
    let Some(python) = python_sdk() else { return };
    let client =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/http_client/sdk_client.py");
    for sandbox in [
        &[][..],
        &[("NIB_SANDBOX", "1")][..],
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")][..],
    ] {
        let p = place();
        let served = serve_with(&p.project, &p.home, sandbox);
        let run = |mode: &str, file: &str, new: &str| -> Value {
            let mut c = Command::new(&python);
            c.arg(&client)
                .args([served.url.as_str(), mode, file, new])
                .current_dir(&p.home)
                .env("NIB_TOKEN", ALICE);
            let (out, err, code) = output(c);
            assert_eq!(code, 0, "{sandbox:?} {mode}: {out}\n{err}");
            serde_json::from_str(out.trim())
                .unwrap_or_else(|e| panic!("{sandbox:?} {mode}: {e}: {out}\n{err}"))
        };
        // Each mode's first request: initialize (a session), server/discover
        // (the probe), or none (the version pinned, every request alone).
        for (n, (mode, version, handshake)) in [
            ("legacy", "2025-11-25", Some("initialize")),
            ("auto", "2026-07-28", Some("server/discover")),
            ("2026-07-28", "2026-07-28", None),
        ]
        .into_iter()
        .enumerate()
        {
            let what = format!("{sandbox:?} {mode}");
            let file = format!("{}.txt", mode.replace('-', "_"));
            std::fs::write(p.project.join(&file), "alpha\nbeta\ngamma\n").unwrap();
            let before = served.log().len();
            let answer = run(mode, &file, &format!("delta {mode}"));
            let log = served.wait_for(|log| calls(log, "alice", "nibash") == n + 1);
            let methods: Vec<Value> = log[before..]
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .map(|v| v["method"].clone())
                .collect();
            for h in ["initialize", "server/discover"] {
                assert_eq!(
                    methods.contains(&json!(h)),
                    handshake == Some(h),
                    "{what}: {methods:?}"
                );
            }
            assert_eq!(
                answer["protocol_version"],
                json!(version),
                "{what}: {answer}"
            );
            let tools = answer["tools"].as_array().unwrap();
            for t in ["read", "edit", "write", "grep", "nibash"] {
                assert!(
                    tools.contains(&json!(t)),
                    "{what}: {t} not listed: {answer}"
                );
            }
            assert_eq!(answer["edit_error"], json!(false), "{what}: {answer}");
            assert_eq!(
                std::fs::read_to_string(p.project.join(&file)).unwrap(),
                format!("alpha\ndelta {mode}\ngamma\n"),
                "{what}: {answer}"
            );
            assert!(
                answer["nibash"]
                    .as_str()
                    .is_some_and(|t| t.contains(&format!("delta {mode}"))),
                "{what}: {answer}"
            );
        }
        let log = served.log();
        assert_eq!(calls(&log, "alice", "edit"), 3, "{sandbox:?}: {log}");
    }
}
