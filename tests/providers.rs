//! Providers end to end: nib started with other MCP servers (the test
//! provider built from `examples/nib-test-provider.rs`, and a third-party
//! server), their tools offered as `NAME_TOOL`, locations as anchored rows
//! an edit can use at once, the provider's confinement, and every way a
//! provider can misbehave while nib's own tools keep working.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use crate::common::{
    self, ERAS, Era, Nib, Roots, TestClient, nib_json_with, provider_in, test_provider,
};

fn project_with_code() -> tempfile::TempDir {
    let dir = common::project();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "// the library\npub fn needle() -> u32 {\n    41\n}\n\npub fn other() {}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "# demo\n\ncall needle()\n").unwrap();
    dir
}

async fn tool_names(nib: &Nib) -> Vec<String> {
    nib.client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

async fn serve(era: Era, dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Nib {
    serve_as(era, dir, TestClient::new(Roots::Undeclared), env, args).await
}

/// nib with this client (to read what it received afterwards).
async fn serve_as(
    era: Era,
    dir: &Path,
    client: TestClient,
    env: &[(&str, &str)],
    args: &[&str],
) -> Nib {
    let home = tempfile::tempdir().unwrap();
    common::start_serving(era, dir, client, env, home, args).await
}

/// `zemble=PATH` of the test provider, for `--provider`.
fn zemble() -> String {
    format!("zemble={}", test_provider().display())
}

#[tokio::test]
async fn a_providers_tools_are_offered_and_its_locations_are_rows_an_edit_can_use() {
    for era in ERAS {
        let dir = project_with_code();
        let nib = serve(era, dir.path(), &[], &["--provider", &zemble()]).await;
        let tools = nib.client.list_all_tools().await.unwrap();
        let search = tools
            .iter()
            .find(|t| t.name == "zemble_search")
            .unwrap_or_else(|| panic!("{era:?}: zemble_search not offered: {tools:?}"));
        assert!(
            search
                .input_schema
                .get("properties")
                .and_then(|p| p.get("query"))
                .is_some(),
            "the provider's schema is kept: {:?}",
            search.input_schema
        );
        assert!(
            tools.iter().any(|t| t.name == "read"),
            "nib's own tools stay"
        );

        let text = nib.ok("zemble_search", json!({"query": "needle"})).await;
        assert!(
            text.starts_with("2 lines hold \"needle\"."),
            "{era:?}: {text}"
        );
        let tag = common::expected_tag(&std::fs::read(dir.path().join("src/lib.rs")).unwrap());
        assert!(
            text.contains(&format!("[src/lib.rs#{tag}]"))
                && text.contains("2:pub fn needle() -> u32 {"),
            "{era:?}: the location as an anchored row of the file as it is: {text}"
        );
        assert!(
            text.contains("[README.md#") && text.contains("3:call needle()"),
            "{text}"
        );
        assert!(
            text.contains("(zemble on src/lib.rs: 2: holds"),
            "the provider's note: {text}"
        );

        // No read: the rows the provider's answer printed are anchors.
        let patch = format!("[src/lib.rs#{tag}]\nSUB 2: u32\n+u64\n");
        let edited = nib.ok("edit", json!({"patch": patch})).await;
        assert!(!edited.contains("not seen"), "{edited}");
        assert!(
            std::fs::read_to_string(dir.path().join("src/lib.rs"))
                .unwrap()
                .contains("pub fn needle() -> u64 {"),
            "{era:?}: {edited}"
        );

        // Locations written only as path:N in the text are found too.
        let text = nib
            .ok("zemble_search_text", json!({"query": "other"}))
            .await;
        assert!(text.contains("- src/lib.rs:6"), "{text}");
        assert!(text.contains("6:pub fn other() {}"), "{era:?}: {text}");

        // Progress passes through; the provider sees nib's roots.
        let text = nib.ok("zemble_slow", json!({"ms": "300"})).await;
        assert!(text.contains("done waiting"), "{text}");
        let text = nib.ok("zemble_roots", json!({})).await;
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert!(
            text.contains(&format!("file://{}", root.display())),
            "{text}"
        );

        let status = nib.ok("nibash_status", json!({})).await;
        assert!(
            status.contains("provider zemble (--provider: ") && status.contains("running, 9 tools"),
            "{status}"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn progress_from_a_provider_reaches_the_client() {
    let dir = project_with_code();
    let client = TestClient::new(Roots::Undeclared);
    let nib = serve_as(
        Era::Handshake,
        dir.path(),
        client.clone(),
        &[],
        &["--provider", &zemble()],
    )
    .await;
    // rmcp's client sends a progress token with every request.
    let answer = nib.ok("zemble_slow", json!({"ms": "300"})).await;
    assert!(answer.contains("done waiting"), "{answer}");
    let seen = client.progress.lock().unwrap().clone();
    assert!(
        seen.iter().any(|m| m == "step 2"),
        "the provider's progress messages: {seen:?}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn cancelling_a_call_cancels_it_at_the_provider() {
    let dir = project_with_code();
    let nib = serve(Era::Handshake, dir.path(), &[], &["--provider", &zemble()]).await;
    let mark = dir.path().join("cancelled-mark");
    let params = rmcp::model::CallToolRequestParams::new("zemble_slow").with_arguments(
        json!({"ms": "9000", "mark": mark.display().to_string()})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = nib
        .client
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    handle
        .cancel(Some("the test changed its mind".into()))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !mark.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the provider never saw the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The provider still answers afterwards.
    let text = nib.ok("zemble_search", json!({"query": "needle"})).await;
    assert!(text.contains("2:pub fn needle()"), "{text}");
    nib.stop().await;
}

#[tokio::test]
async fn nib_json_program_rules_hold_for_a_providers_programs_in_every_mode() {
    for env in [
        vec![],
        vec![("NIB_SANDBOX", "1"), ("NIB_PROVIDERS_SANDBOX", "1")],
        vec![
            ("NIB_SANDBOX", "1"),
            ("NIB_PROVIDERS_SANDBOX", "1"),
            ("NIB_SANDBOX_BWRAP", "0"),
        ],
    ] {
        let dir = project_with_code();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let canary = dir.path().join("canary");
        let tool = bin.join("forbidden-tool");
        std::fs::write(&tool, format!("#!/bin/sh\ntouch '{}'\n", canary.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let provider = provider_in(dir.path()).display().to_string();
        std::fs::write(
            dir.path().join("nib.json"),
            serde_json::to_string(&json!({
                "rules": [{"program": "forbidden-tool", "why": "use the tool's MCP server"}],
                "providers": {"zemble": {"command": [provider]}}
            }))
            .unwrap(),
        )
        .unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut all_env = env.clone();
        all_env.push(("PATH", path.as_str()));
        let nib = serve(Era::Handshake, dir.path(), &all_env, &[]).await;
        let said = nib
            .ok(
                "zemble_exec",
                json!({"program": tool.display().to_string()}),
            )
            .await;
        assert!(
            !canary.exists(),
            "{env:?}: the forbidden program ran: {said}"
        );
        assert!(said.contains("could not run"), "{env:?}: {said}");
        let said = nib.ok("zemble_exec", json!({"program": "true"})).await;
        assert!(said.contains("ran true: exit status: 0"), "{env:?}: {said}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn under_the_sandbox_a_provider_holds_a_brokered_secrets_placeholder() {
    const REAL: &str = "ghp_ProviderCanary0123456789abcdefXY";
    for bwrap in ["1", "0"] {
        let dir = project_with_code();
        nib_json_with(dir.path(), &[("zemble", &[])]);
        let env = [
            ("NIB_SANDBOX", "1"),
            ("NIB_PROVIDERS_SANDBOX", "1"),
            ("NIB_SANDBOX_BWRAP", bwrap),
            ("NIB_SANDBOX_NETWORK", "127.0.0.1"),
            ("NIB_SANDBOX_SECRETS", "GH_TOKEN@127.0.0.1"),
            ("GH_TOKEN", REAL),
        ];
        let nib = serve(Era::Handshake, dir.path(), &env, &[]).await;
        let said = nib.ok("zemble_env", json!({"name": "GH_TOKEN"})).await;
        assert!(!said.contains(REAL), "bwrap={bwrap}: {said}");
        assert!(
            said.contains("ghp_"),
            "bwrap={bwrap}: no placeholder: {said}"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn under_the_sandbox_a_provider_is_confined_to_the_roots() {
    let outside = tempfile::tempdir().unwrap();
    let canary = outside.path().join("provider-canary");
    for bwrap in ["1", "0"] {
        let dir = project_with_code();
        nib_json_with(dir.path(), &[("zemble", &[])]);
        let env = [
            ("NIB_SANDBOX", "1"),
            ("NIB_PROVIDERS_SANDBOX", "1"),
            ("NIB_SANDBOX_BWRAP", bwrap),
        ];
        let nib = serve(Era::Handshake, dir.path(), &env, &[]).await;
        let said = nib
            .ok(
                "zemble_touch",
                json!({"path": canary.display().to_string()}),
            )
            .await;
        assert!(
            !canary.exists(),
            "bwrap={bwrap}: a provider wrote outside the roots ({said})"
        );
        let inside = dir.path().join("made-by-provider");
        let said = nib
            .ok(
                "zemble_touch",
                json!({"path": inside.display().to_string()}),
            )
            .await;
        assert!(
            inside.exists(),
            "bwrap={bwrap}: inside the roots it may write: {said}"
        );

        // A location outside the roots is dropped with a note; the rest shown.
        let text = nib.ok("zemble_outside", json!({})).await;
        assert!(text.contains("[README.md#"), "{text}");
        assert!(
            text.contains("zemble: location dropped: /etc/hostname:1"),
            "bwrap={bwrap}: {text}"
        );
        assert!(
            !text.contains("\n1:") || !text.contains("[/etc/hostname#"),
            "{text}"
        );
        nib.stop().await;
    }

    // Without NIB_PROVIDERS_SANDBOX, a sandboxed nib starts none and says so.
    let dir = project_with_code();
    nib_json_with(dir.path(), &[("zemble", &[])]);
    let nib = serve(Era::Handshake, dir.path(), &[("NIB_SANDBOX", "1")], &[]).await;
    let names = tool_names(&nib).await;
    assert!(!names.iter().any(|n| n.starts_with("zemble_")), "{names:?}");
    let status = nib.ok("nibash_status", json!({})).await;
    assert!(
        status.contains("provider zemble (nib.json: ")
            && status.contains(
                "off, left off: NIB_SANDBOX=1 runs providers only with NIB_PROVIDERS_SANDBOX=1"
            ),
        "{status}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn a_misbehaving_provider_gets_a_clear_error_and_everything_else_keeps_working() {
    let dir = project_with_code();
    nib_json_with(
        dir.path(),
        &[
            ("good", &["--more-tools", "1500"]),
            ("crash", &["--crash-on-call"]),
            ("atstart", &["--crash-at-start"]),
            ("hang", &["--hang"]),
            ("junk", &["--raw", "junk"]),
            ("malformed", &["--raw", "malformed"]),
            ("flood", &["--raw", "flood"]),
            ("huge", &["--raw", "huge"]),
            ("late", &["--late", "4000"]),
        ],
    );
    let client = TestClient::new(Roots::Undeclared);
    let nib = serve_as(
        Era::Handshake,
        dir.path(),
        client.clone(),
        &[("NIB_PROVIDER_TIMEOUT_MS", "2500")],
        &[],
    )
    .await;
    let names = tool_names(&nib).await;
    for offered in [
        "good_search",
        "crash_search",
        "hang_search",
        "junk_search",
        "flood_search",
    ] {
        assert!(
            names.iter().any(|n| n == offered),
            "{offered} missing: {names:?}"
        );
    }
    assert!(
        !names.iter().any(|n| n.starts_with("atstart_")),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("late_")),
        "a provider still starting after the first list's wait is left for later: {names:?}"
    );

    // Fails to start: named, with its exit and its stderr.
    let err = nib.err("atstart_search", json!({"query": "x"})).await;
    assert!(
        err.contains("provider atstart is not running") && err.contains("cannot start, as asked"),
        "{err}"
    );

    // Crashes: restarted once, then reported.
    let err = nib.err("crash_search", json!({"query": "x"})).await;
    assert!(
        err.contains("provider crash broke off the call") && err.contains("crashing as asked"),
        "{err}"
    );
    assert!(err.contains("restarted; run the call again"), "{err}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let err = nib.err("crash_search", json!({"query": "x"})).await;
    assert!(err.contains("provider crash broke off the call"), "{err}");
    assert!(err.contains("it is stopped"), "{err}");
    let err = nib.err("crash_search", json!({"query": "x"})).await;
    assert!(
        err.contains("provider crash is not running (stopped: ended again after a restart"),
        "{err}"
    );

    // Hangs: the timeout.
    let err = nib.err("hang_search", json!({"query": "x"})).await;
    assert!(
        err.contains("provider hang gave no answer within 2 s"),
        "{err}"
    );

    // Non-protocol bytes instead of an answer: the timeout names them.
    let err = nib.err("junk_search", json!({})).await;
    assert!(
        err.contains("provider junk gave no answer")
            && err.contains("1 line that is not MCP to stdout (first: \"this is not json"),
        "{err}"
    );

    // A result that is not a tool result.
    let err = nib.err("malformed_search", json!({})).await;
    assert!(err.contains("provider malformed"), "{err}");

    // A flood of text is cut; a message past the line limit is dropped.
    let text = nib.ok("flood_search", json!({})).await;
    assert!(
        text.len() < 20_000
            && text.contains("[cut: flood's text was 2148 KiB; the first 16 KiB are shown]"),
        "{} bytes: {}",
        text.len(),
        &text[text.len().saturating_sub(300)..]
    );
    let err = nib.err("huge_search", json!({})).await;
    assert!(err.contains("provider huge gave no answer"), "{err}");

    // A provider whose tools change, and one that started late, are announced.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let names = tool_names(&nib).await;
        if names.iter().any(|n| n == "good_extra") && names.iter().any(|n| n == "late_search") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never listed: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(client.tools_changed.load(Ordering::SeqCst) >= 2);
    let text = nib.ok("late_search", json!({"query": "needle"})).await;
    assert!(text.contains("[src/lib.rs#"), "{text}");

    // Every other tool still works, and the status names each state.
    let text = nib.ok("good_search", json!({"query": "needle"})).await;
    assert!(text.contains("2:pub fn needle()"), "{text}");
    let text = nib.ok("read", json!({"paths": ["README.md"]})).await;
    assert!(text.contains("1:# demo"), "{text}");
    let status = nib.ok("nibash_status", json!({})).await;
    for line in [
        "provider good (nib.json: ",
        "provider atstart (nib.json: ",
        "stopped: did not start: ",
        "provider crash (nib.json: ",
        "stopped: ended again after a restart",
    ] {
        assert!(status.contains(line), "{line:?} missing:\n{status}");
    }
    nib.stop().await;
}

/// A third-party MCP server (the reference `mcp-server-time`, from PyPI) as
/// a provider, through a script that ignores the `nib-provider` argument.
#[tokio::test]
async fn a_third_party_server_works_as_a_provider() {
    let server = std::env::var_os("MCP_TIME_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp-venv/bin/mcp-server-time")
        });
    if !server.exists() {
        assert!(
            std::env::var_os("NIB_REQUIRE_THIRD_PARTY").is_none(),
            "{} is missing; .ci/run installs it (python3 -m venv target/mcp-venv; target/mcp-venv/bin/pip install mcp-server-time)",
            server.display()
        );
        crate::common::skip(&format!(
            "{} is not installed (.ci/run installs it)",
            server.display()
        ));
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers/time.sh");
    for era in ERAS {
        let dir = project_with_code();
        let arg = format!("time={}", script.display());
        let server_env = server.display().to_string();
        let nib = serve(
            era,
            dir.path(),
            &[("MCP_TIME_SERVER", server_env.as_str())],
            &["--provider", &arg],
        )
        .await;
        // The first list waits 3 s for a provider still starting; one that
        // starts later (a Python server on a busy machine) is announced
        // with list_changed, and a client lists again, as here.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut names = tool_names(&nib).await;
        while !names.iter().any(|n| n == "time_get_current_time") {
            assert!(std::time::Instant::now() < until, "{era:?}: {names:?}");
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            names = tool_names(&nib).await;
        }
        let text = nib
            .ok("time_get_current_time", json!({"timezone": "UTC"}))
            .await;
        assert!(
            text.contains("\"timezone\"") && text.contains("UTC"),
            "{text}"
        );
        let err = nib
            .err(
                "time_convert_time",
                json!({"source_timezone": "Nowhere/None"}),
            )
            .await;
        assert!(err.contains("time_convert_time"), "{err}");
        nib.stop().await;
    }
}
