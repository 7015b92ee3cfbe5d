//! The sandbox is on unless the person turns it off (issue 60): a nib
//! started with no `NIB_SANDBOX` at all — as setup, the plugin and npx
//! start it, and as a pod starts `nib serve --http` — confines programs and
//! the file tools; `NIB_SANDBOX=0` runs
//! them unconfined and the session's first nibash answer, `nibash_status`
//! and `nib doctor` say so; `nib setup --no-sandbox` writes the opt-out and
//! a plain `nib setup` takes it out again.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::*;

/// A home with a credential, and a canary file outside the project.
struct World {
    _t: tempfile::TempDir,
    home: std::path::PathBuf,
    project: std::path::PathBuf,
    key: std::path::PathBuf,
}

const SECRET: &str = "CANARY-KEY-6f1e";

fn world() -> World {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    let home = base.join("home");
    let project = base.join("project");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let key = home.join(".ssh/id_ed25519");
    std::fs::write(&key, SECRET).unwrap();
    std::fs::write(project.join("a.txt"), "a\n").unwrap();
    World {
        _t: t,
        home,
        project,
        key,
    }
}

/// `nib ARGS` as a person's shell starts it: no NIB_ variable but `extra`.
fn nib_as_person(w: &World, args: &[&str], extra: &[(&str, &str)]) -> (String, i32) {
    let mut c = Command::new(nib_bin());
    c.args(args)
        .current_dir(&w.project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &w.home)
        .env("NIB_STATE_DIR", w.home.join("state"));
    for (k, v) in extra {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
    said.push_str(&String::from_utf8_lossy(&out.stderr));
    (said, out.status.code().unwrap_or(-1))
}

#[test]
fn without_nib_sandbox_programs_are_confined_and_with_0_they_are_not() {
    let w = world();
    let key = w.key.display().to_string();
    let outside = w.home.join("written-by-a-program");
    let line = format!("cat {key}; /bin/cat {key}; echo x > {}", outside.display());
    // Both confined modes: bubblewrap, and Landlock + seccomp alone.
    for mode in [&[][..], &[("NIB_SANDBOX_BWRAP", "0")][..]] {
        let (said, _) = nib_as_person(&w, &["sh", &line], mode);
        assert!(
            !said.contains(SECRET),
            "{mode:?}: the default let a program read the key: {said}"
        );
        assert!(
            !outside.exists(),
            "{mode:?}: the default let a program write outside: {said}"
        );
        let (doctor, code) = nib_as_person(&w, &["doctor"], mode);
        assert_eq!(code, 0, "{mode:?}: {doctor}");
        assert!(!doctor.contains("unconfined"), "{mode:?}: {doctor}");
    }
    // The control: NIB_SANDBOX=0 is the way out, and it is said.
    let (said, _) = nib_as_person(&w, &["sh", &line], &[("NIB_SANDBOX", "0")]);
    assert!(
        said.contains(SECRET),
        "NIB_SANDBOX=0 should run unconfined: {said}"
    );
    assert!(
        said.contains("[sandbox: off (NIB_SANDBOX=0)"),
        "the answer does not say the sandbox is off: {said}"
    );
    assert!(outside.exists());
    let (doctor, _) = nib_as_person(&w, &["doctor"], &[("NIB_SANDBOX", "0")]);
    assert!(doctor.contains("unconfined (NIB_SANDBOX=0)"), "{doctor}");
}

#[tokio::test]
async fn an_mcp_server_started_with_no_setting_is_sandboxed() {
    let w = world();
    let key = w.key.display().to_string();
    // `start_with` runs unconfined unless told; take NIB_SANDBOX away so
    // nib sees no setting at all, as a client's plain entry starts it.
    let nib = start_with(
        Era::Handshake,
        &w.project,
        TestClient::new(Roots::Undeclared),
        &[("HOME", &w.home.display().to_string()), ("NIB_SANDBOX", "")],
    )
    .await;
    let (said, _) = nib
        .call("nibash", json!({"command": format!("cat {key}")}))
        .await;
    assert!(!said.contains(SECRET), "{said}");
    let (read, _) = nib.call("read", json!({"paths": [key]})).await;
    assert!(
        !read.contains(SECRET),
        "the read tool reached outside the project: {read}"
    );
    let (status, _) = nib.call("nibash_status", json!({})).await;
    assert!(!status.contains("unconfined"), "{status}");
    // Unconfined on request: the first answer says so, once.
    let nib = start_with(
        Era::Modern,
        &w.project,
        TestClient::new(Roots::Undeclared),
        &[
            ("HOME", &w.home.display().to_string()),
            ("NIB_SANDBOX", "0"),
        ],
    )
    .await;
    let (first, _) = nib
        .call_whole("nibash", json!({"command": "echo one"}))
        .await;
    assert!(first.contains("[sandbox: off (NIB_SANDBOX=0)"), "{first}");
    let (second, _) = nib
        .call_whole("nibash", json!({"command": "echo two"}))
        .await;
    assert!(!second.contains("[sandbox: off"), "said twice: {second}");
    let (status, _) = nib.call("nibash_status", json!({})).await;
    assert!(status.contains("unconfined (NIB_SANDBOX=0)"), "{status}");
}

fn mcp_entry(project: &Path) -> Value {
    let text = std::fs::read_to_string(project.join(".mcp.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["mcpServers"]["nib"].clone()
}

#[test]
fn setup_writes_the_opt_out_only_when_asked_and_takes_it_out_again() {
    let w = world();
    let (said, code) = nib_as_person(&w, &["setup"], &[]);
    assert_eq!(code, 0, "{said}");
    assert!(
        mcp_entry(&w.project).get("env").is_none(),
        "{}",
        mcp_entry(&w.project)
    );
    assert!(!said.contains("unconfined"), "{said}");
    let (said, code) = nib_as_person(&w, &["setup", "--no-sandbox"], &[]);
    assert_eq!(code, 0, "{said}");
    assert_eq!(mcp_entry(&w.project)["env"]["NIB_SANDBOX"], json!("0"));
    // What it did first, then that programs now run unconfined and the way back.
    assert!(said.starts_with("updated "), "{said}");
    assert!(
        said.contains(
            "note: --no-sandbox: nib's server entry sets NIB_SANDBOX=0, so programs run unconfined"
        ) && said.contains("nib setup without --no-sandbox takes it out"),
        "{said}"
    );
    let (said, code) = nib_as_person(&w, &["setup"], &[]);
    assert_eq!(code, 0, "{said}");
    assert!(!said.contains("unconfined"), "{said}");
    assert!(
        mcp_entry(&w.project).get("env").is_none(),
        "{}",
        mcp_entry(&w.project)
    );
}

/// One 2026-07-28 `tools/call` of nibash over HTTP, the answer's body.
fn http_nibash(addr: &str, token: &str, command: &str) -> String {
    use std::io::{Read as _, Write as _};
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "nibash", "arguments": {"command": command},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: nibash\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// `nib serve --http` started with no NIB_SANDBOX (a pod's plain command)
/// confines programs too; NIB_SANDBOX=0 is the way out there as well.
#[test]
fn an_http_server_started_with_no_setting_is_sandboxed() {
    use std::io::BufRead as _;
    let w = world();
    let key = w.key.display().to_string();
    let token = "0123456789abcdef0123456789abcdef";
    let tokens = w.home.join("tokens");
    std::fs::write(&tokens, format!("alice {token}\n")).unwrap();
    let line = format!("cat {key}; /bin/cat {key}");
    let modes: [&[(&str, &str)]; 3] = [&[], &[("NIB_SANDBOX_BWRAP", "0")], &[("NIB_SANDBOX", "0")]];
    for mode in modes {
        let mut c = Command::new(nib_bin());
        c.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
            .arg(&tokens)
            .current_dir(&w.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &w.home)
            .env("NIB_STATE_DIR", w.home.join("state"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for (k, v) in mode {
            c.env(k, v);
        }
        let mut child = c.spawn().unwrap();
        // Kept open until nib is stopped: its later log lines have a reader.
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                l.strip_prefix("listening on http://")
                    .and_then(|r| r.strip_suffix("/mcp"))
                    .map(str::to_string)
            })
            .expect("nib serve --http said where it listens");
        let said = http_nibash(&addr, token, &line);
        let _ = child.kill();
        let _ = child.wait();
        drop(lines);
        assert!(said.contains("\"jsonrpc\""), "{mode:?}: {said}");
        if mode == [("NIB_SANDBOX", "0")] {
            assert!(said.contains(SECRET), "the control read nothing: {said}");
        } else {
            assert!(
                !said.contains(SECRET),
                "{mode:?}: the default let a program read the key over HTTP: {said}"
            );
        }
    }
}
