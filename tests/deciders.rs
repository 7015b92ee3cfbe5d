//! Model deciders and summarizers end to end, against a loopback
//! OpenAI-compatible mock (`tests/fixtures/models/mock.py`, plain HTTP and
//! HTTPS with a self-signed certificate) and fake `claude` and `opencode`
//! programs: the `openrouter` decider and its fallbacks, the key order,
//! retries and models in order, the cache, the sandbox switch, summaries
//! by each kind of summarizer, and the session switch.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, Era, Roots, TestClient};

/// The mock server, killed when dropped.
pub(crate) struct Mock {
    child: Child,
    pub(crate) url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
    cert: Option<PathBuf>,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Mock {
    pub(crate) fn start(tls: bool) -> Mock {
        let dir = tempfile::tempdir().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/models/mock.py");
        let port_file = dir.path().join("port");
        let log = dir.path().join("requests.jsonl");
        let mut cmd = Command::new("python3");
        cmd.arg(&script).arg(&port_file).arg(&log);
        let mut cert = None;
        if tls {
            // rustls refuses a CA certificate as the server's own.
            common::self_signed_cert(dir.path(), &["basicConstraints=critical,CA:FALSE"]);
            cmd.arg(dir.path().join("cert.pem"))
                .arg(dir.path().join("key.pem"));
            cert = Some(dir.path().join("cert.pem"));
        }
        let child = cmd.spawn().expect("python3 (CI installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p;
            }
            assert!(Instant::now() < deadline, "the mock server did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        let scheme = if tls { "https" } else { "http" };
        Mock {
            child,
            url: format!("{scheme}://127.0.0.1:{port}/api/v1/chat/completions"),
            log,
            _dir: dir,
            cert,
        }
    }

    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// A long output whose only failure is at its end.
const LONG_FAILURE: &str =
    "for i in $(seq 1 500); do echo \"line $i\"; done; echo 'error: boom'; exit 1";

/// `nib sh COMMAND` in `dir` with `env` (and a home of its own); its stdout.
fn sh(dir: &Path, home: &Path, env: &[(&str, &str)], command: &str) -> (String, Duration) {
    let mut cmd = Command::new(common::nib_bin());
    cmd.args(["sh", command]).current_dir(dir);
    for var in [
        "NIB_DECIDER",
        "NIB_DECIDER_KEY",
        "OPENROUTER_API_KEY",
        "NIB_DECIDER_SUMMARY",
        "NIB_SANDBOX",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in common::isolated_env(home) {
        cmd.env(k, v);
    }
    cmd.env("HOME", home);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let out = cmd.output().expect("run nib sh");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn the_openrouter_decider_keeps_what_the_model_picks_and_falls_back_on_any_failure() {
    let mock = Mock::start(false);
    let dir = common::project();
    let home = tempfile::tempdir().unwrap();
    let run = |model: &str, extra: &[(&str, &str)]| {
        let mut env = vec![
            ("NIB_DECIDER", "openrouter"),
            ("NIB_DECIDER_URL", mock.url.as_str()),
            ("NIB_DECIDER_MODEL", model),
            ("NIB_DECIDER_KEY", "sk-test-secret"),
            ("NIB_DECIDER_TIMEOUT", "1500"),
        ];
        env.extend_from_slice(extra);
        sh(dir.path(), home.path(), &env, LONG_FAILURE)
    };

    let (out, _) = run("ok-decider", &[]);
    assert!(
        out.contains("[decider openrouter (ok-decider): 1 of ") && out.contains("11-30: the cause"),
        "{out}"
    );
    assert!(
        out.contains("11|line 11") && out.contains("30|line 30"),
        "{out}"
    );
    assert!(!out.contains("31|line 31"), "only the window picked: {out}");
    assert!(out.contains("error: boom"), "the keyword rows stay: {out}");
    assert!(!out.contains("sk-test-secret"), "the key never shows");
    let asked = mock.requests();
    let last = asked.last().unwrap();
    assert_eq!(last["auth"], "Bearer sk-test-secret");
    assert_eq!(last["body"]["response_format"]["type"], "json_schema");
    assert_eq!(
        last["body"]["provider"]["zdr"], true,
        "zero data retention asked for"
    );

    for (model, said) in [
        ("garbage-a", "the answer is not a chat completion"),
        ("badjson-a", "its answer is not the JSON asked for"),
        ("fail-a", "answered 500"),
        ("refuse-a", "the answer is not a chat completion"),
    ] {
        let (out, _) = run(model, &[]);
        assert!(
            out.contains("[decider openrouter: ")
                && out.contains(said)
                && out.contains("keyword decider's rows are shown"),
            "{model}: {out}"
        );
        assert!(
            out.contains("error: boom") && !out.contains("11|line 11"),
            "{out}"
        );
    }
    let (out, took) = run("slow-a", &[]);
    assert!(
        out.contains("[decider openrouter: no answer within 1500 ms"),
        "{out}"
    );
    assert!(took < Duration::from_secs(4), "the answer waited {took:?}");

    // 429 twice, then an answer; a failing model, then the next one.
    let before = mock.requests().len();
    let (out, _) = run("limited-a", &[]);
    assert!(
        out.contains("[decider openrouter (limited-a): 1 of"),
        "{out}"
    );
    assert_eq!(mock.requests().len() - before, 3, "two retries");
    let (out, _) = run("fail-b,ok-b", &[("NIB_DECIDER_TIMEOUT", "10000")]);
    assert!(out.contains("[decider openrouter (ok-b): 1 of"), "{out}");

    // The cache: the same output asked about twice costs one request.
    let cache = home.path().join("cache");
    let cache_env = [("NIB_DECIDER_CACHE", cache.to_str().unwrap())];
    let before = mock.requests().len();
    let (first, _) = run("ok-cached", &cache_env);
    let (second, _) = run("ok-cached", &cache_env);
    assert_eq!(mock.requests().len() - before, 1, "{second}");
    assert!(
        first.contains("(ok-cached)") && second.contains("(cached)"),
        "{second}"
    );

    // Under NIB_SANDBOX=1 nothing is asked unless NIB_DECIDER_SANDBOX=1.
    let before = mock.requests().len();
    let (out, _) = run("ok-sandboxed", &[("NIB_SANDBOX", "1")]);
    assert!(
        out.contains("[decider openrouter: off under NIB_SANDBOX=1"),
        "{out}"
    );
    assert_eq!(mock.requests().len(), before);
    let (out, _) = run(
        "ok-sandboxed",
        &[("NIB_SANDBOX", "1"), ("NIB_DECIDER_SANDBOX", "1")],
    );
    assert!(out.contains("[decider openrouter (ok-sandboxed)"), "{out}");
}

#[test]
fn the_key_comes_from_the_variables_then_the_key_file_then_opencodes_login() {
    let mock = Mock::start(false);
    let dir = common::project();
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config/nib");
    let data = home.path().join("data/opencode");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(config.join("openrouter-key"), "key-from-file\n").unwrap();
    std::fs::write(
        data.join("auth.json"),
        r#"{"openrouter": {"type": "api", "key": "key-from-opencode"}}"#,
    )
    .unwrap();
    let ask = |env: &[(&str, &str)]| {
        let mut all = vec![
            ("NIB_DECIDER", "openrouter"),
            ("NIB_DECIDER_URL", mock.url.as_str()),
            ("NIB_DECIDER_MODEL", "ok-key"),
        ];
        all.extend_from_slice(env);
        sh(dir.path(), home.path(), &all, LONG_FAILURE);
        mock.requests().last().unwrap()["auth"].clone()
    };
    assert_eq!(
        ask(&[("NIB_DECIDER_KEY", "a"), ("OPENROUTER_API_KEY", "b")]),
        "Bearer a"
    );
    assert_eq!(ask(&[("OPENROUTER_API_KEY", "b")]), "Bearer b");
    assert_eq!(ask(&[]), "Bearer key-from-file");
    std::fs::remove_file(config.join("openrouter-key")).unwrap();
    assert_eq!(ask(&[]), "Bearer key-from-opencode");
}

#[test]
fn https_endpoints_are_trusted_through_ssl_cert_file() {
    let mock = Mock::start(true);
    let dir = common::project();
    let home = tempfile::tempdir().unwrap();
    let cert = mock.cert.clone().unwrap();
    let base = [
        ("NIB_DECIDER", "openrouter"),
        ("NIB_DECIDER_URL", mock.url.as_str()),
        ("NIB_DECIDER_MODEL", "ok-tls"),
        ("NIB_DECIDER_KEY", "k"),
    ];
    let mut env = base.to_vec();
    env.push(("SSL_CERT_FILE", cert.to_str().unwrap()));
    let (out, _) = sh(dir.path(), home.path(), &env, LONG_FAILURE);
    assert!(out.contains("[decider openrouter (ok-tls): 1 of"), "{out}");
    // Without the certificate the server is not trusted, and nothing breaks.
    let mut env = base.to_vec();
    env.push(("SSL_CERT_FILE", "/nonexistent.pem"));
    let (out, _) = sh(dir.path(), home.path(), &env, LONG_FAILURE);
    assert!(out.contains("[decider openrouter: 127.0.0.1:"), "{out}");
    assert!(out.contains("error: boom"), "{out}");
}

/// A fake program on PATH that records its arguments, working folder and
/// `XDG_DATA_HOME` in `record`, and answers like a summarizer.
fn fake_program(bin: &Path, name: &str, record: &Path) -> PathBuf {
    let path = bin.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n{{ for a in \"$@\"; do printf '<%s>' \"$a\" | head -c 200; done; echo; pwd; echo \"data=$XDG_DATA_HOME\"; \
             [ -n \"$XDG_DATA_HOME\" ] && cat \"$XDG_DATA_HOME/opencode/auth.json\" 2>/dev/null; echo; }} > '{}'\n\
             echo 'Summary from {name}. Line three matters.'\necho 'LINES: 3'\n",
            record.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn summaries_come_from_the_first_summarizer_that_answers() {
    let mock = Mock::start(false);
    let dir = common::project();
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = home.path().join("record");
    fake_program(&bin, "claude", &record);
    let opencode = fake_program(&bin, "my-opencode", &record);
    std::fs::create_dir_all(home.path().join("data/opencode")).unwrap();
    std::fs::write(
        home.path().join("data/opencode/auth.json"),
        r#"{"openrouter": {"key": "stored"}}"#,
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |summary: &str, command: &str| {
        sh(
            dir.path(),
            home.path(),
            &[
                ("NIB_DECIDER_SUMMARY", summary),
                ("NIB_DECIDER_SUMMARY_URL", mock.url.as_str()),
                ("NIB_DECIDER_KEY", "k"),
                ("NIB_DECIDER_OPENCODE", opencode.to_str().unwrap()),
                ("PATH", path.as_str()),
            ],
            command,
        )
        .0
    };

    // A chat model; a failed call also shows its last 20 lines.
    let out = run("fail-sum,ok-sum", LONG_FAILURE);
    assert!(
        out.contains("summarized by ok-sum")
            && out.contains(
                "<summary>Summary from ok-sum. The command printed many lines. It failed at the end.</summary>"
            ),
        "{out}"
    );
    assert!(out.contains("\n3|line 3\n"), "the line it points at: {out}");
    assert!(
        out.contains("501|error: boom") && out.contains("482|line 482"),
        "{out}"
    );
    assert!(
        !out.contains("481|line 481"),
        "only the last 20 lines: {out}"
    );
    // Output between 150 and 400 lines is summarized too; a passing call
    // shows only what the summary points at.
    let out = run("ok-sum", "seq 1 200");
    assert!(
        out.contains("<summary>") && out.contains("\n3|3\n"),
        "{out}"
    );
    assert!(!out.contains("200|200"), "{out}");

    // claude -p, with no tools and no MCP servers, in a folder of its own.
    let out = run("claude-p:haiku", LONG_FAILURE);
    assert!(
        out.contains("summarized by claude-p:haiku")
            && out.contains("<summary>Summary from claude. Line three matters.</summary>"),
        "{out}"
    );
    let seen = std::fs::read_to_string(&record).unwrap();
    assert!(
        seen.starts_with(
            "<-p><--model><haiku><--tools><><--strict-mcp-config><--output-format><text><"
        ),
        "{seen}"
    );
    let cwd = seen.lines().nth(1).unwrap_or_default();
    assert!(
        !cwd.starts_with(
            &std::fs::canonicalize(dir.path())
                .unwrap()
                .display()
                .to_string()
        ),
        "not in the project: {cwd}"
    );

    // opencode run, with a data folder of its own holding the login.
    let out = run("opencode:openrouter/some-model", LONG_FAILURE);
    assert!(
        out.contains("summarized by opencode:openrouter/some-model"),
        "{out}"
    );
    let seen = std::fs::read_to_string(&record).unwrap();
    assert!(
        seen.starts_with("<run><-m><openrouter/some-model><"),
        "{seen}"
    );
    assert!(
        seen.contains("data=/")
            && !seen.contains(&format!("data={}", home.path().join("data").display())),
        "an isolated data folder: {seen}"
    );
    assert!(seen.contains("\"stored\""), "the login copied in: {seen}");

    // What `nib setup --summary` keeps is read when the variable is unset.
    let elsewhere = common::project();
    let mut setup = Command::new(common::nib_bin());
    setup
        .args(["setup", "--summary", "ok-kept", "--decider", "openrouter"])
        .current_dir(elsewhere.path())
        .env("HOME", home.path());
    for (k, v) in common::isolated_env(home.path()) {
        setup.env(k, v);
    }
    assert!(setup.output().unwrap().status.success());
    let (out, _) = sh(
        dir.path(),
        home.path(),
        &[
            ("NIB_DECIDER_SUMMARY_URL", mock.url.as_str()),
            ("NIB_DECIDER_KEY", "k"),
        ],
        LONG_FAILURE,
    );
    assert!(out.contains("summarized by ok-kept"), "{out}");

    // None answers: the decider's rows, with a note.
    let out = run("fail-sum", LONG_FAILURE);
    assert!(
        out.contains("[summary: no summarizer answered (fail-sum: 127.0.0.1:")
            && out.contains("cut to "),
        "{out}"
    );
}

#[tokio::test]
async fn summaries_can_be_turned_off_and_on_for_the_session() {
    let mock = Mock::start(false);
    let dir = common::project();
    let env = [
        ("NIB_DECIDER_SUMMARY", "ok-session"),
        ("NIB_DECIDER_SUMMARY_URL", mock.url.as_str()),
        ("NIB_DECIDER_KEY", "k"),
    ];
    let nib = common::start_with(
        Era::Handshake,
        dir.path(),
        TestClient::new(Roots::Undeclared),
        &env,
    )
    .await;
    let long = json!({"command": "seq 1 300"});
    let out = nib.ok("nibash", long.clone()).await;
    assert!(out.contains("<summary>Summary from ok-session."), "{out}");
    let switched = nib.ok("nibash_control", json!({"summaries": false})).await;
    assert!(
        switched.contains("summaries off for this session"),
        "{switched}"
    );
    let status = nib.ok("nibash_status", json!({})).await;
    assert!(
        status.contains("summaries: ok-session — off for this session"),
        "{status}"
    );
    let out = nib.ok("nibash", long.clone()).await;
    assert!(
        !out.contains("<summary>") && out.contains("\n299\n300\n"),
        "shown whole, as without summaries: {out}"
    );
    nib.ok("nibash_control", json!({"summaries": true})).await;
    let out = nib.ok("nibash", long).await;
    assert!(out.contains("<summary>"), "{out}");
    nib.stop().await;

    // Under NIB_SANDBOX=1 they are off unless NIB_DECIDER_SANDBOX=1.
    let mut sandboxed = env.to_vec();
    sandboxed.push(("NIB_SANDBOX", "1"));
    let nib = common::start_with(
        Era::Handshake,
        dir.path(),
        TestClient::new(Roots::Undeclared),
        &sandboxed,
    )
    .await;
    let status = nib.ok("nibash_status", json!({})).await;
    assert!(
        status.contains("summaries: ok-session — off under NIB_SANDBOX=1"),
        "{status}"
    );
    let before = mock.requests().len();
    let out = nib.ok("nibash", json!({"command": "seq 1 300"})).await;
    assert!(!out.contains("<summary>"), "{out}");
    assert_eq!(mock.requests().len(), before, "nothing left the machine");
    nib.stop().await;
}
