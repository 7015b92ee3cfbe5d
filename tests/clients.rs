//! Client integration: `nib setup` in a temporary HOME and project, `nib hook`
//! fed recorded events, and seen lines told apart per agent, reset by
//! compaction, and kept across a server restart.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::*;

/// A temporary HOME and project folder (canonical paths).
pub struct Env {
    _dir: tempfile::TempDir,
    pub home: std::path::PathBuf,
    pub project: std::path::PathBuf,
}

pub fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let home = base.join("home");
    let project = base.join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    Env {
        _dir: dir,
        home,
        project,
    }
}

fn run(e: &Env, args: &[&str], stdin: &str) -> (String, i32) {
    run_with_path(e, args, stdin, std::env::var_os("PATH").unwrap_or_default())
}

fn run_with_path(e: &Env, args: &[&str], stdin: &str, path: std::ffi::OsString) -> (String, i32) {
    let mut child = Command::new(nib_bin())
        .args(args)
        .env("PATH", path)
        .current_dir(&e.project)
        .env("HOME", &e.home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_DATA_HOME")
        .env("NIB_STATE_DIR", e.home.join("state"))
        .env_remove("NIB_DIRECTORY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

fn json_file(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn setup_writes_exactly_what_each_client_needs_once() {
    let e = env();
    std::fs::write(e.project.join("opencode.json"), "{\"theme\": \"dark\"}\n").unwrap();
    let (out, code) = run(&e, &["setup", "--dry-run"], "");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("+++ ") && out.contains("nothing was written"),
        "{out}"
    );
    assert!(
        !e.project.join(".mcp.json").exists(),
        "--dry-run writes nothing"
    );
    assert_eq!(
        std::fs::read_to_string(e.project.join("opencode.json")).unwrap(),
        "{\"theme\": \"dark\"}\n"
    );

    let (out, code) = run(&e, &["setup"], "");
    assert_eq!(code, 0, "{out}");
    let nib = nib_bin().display().to_string();
    let hook = format!("{nib} hook");
    assert_eq!(
        json_file(&e.project.join(".mcp.json")),
        json!({"mcpServers": {"nib": {"type": "stdio", "command": nib, "args": [], "alwaysLoad": true}}})
    );
    assert!(
        out.contains("note: nib is named by its path"),
        "off PATH, the path is used and said why: {out}"
    );
    let group = |m: Option<&str>| {
        let mut g = json!({"hooks": [{"type": "command", "command": hook, "timeout": 5}]});
        if let Some(m) = m {
            g["matcher"] = json!(m);
        }
        g
    };
    assert_eq!(
        json_file(&e.project.join(".claude/settings.local.json")),
        json!({
            "enabledMcpjsonServers": ["nib"],
            "permissions": {"allow": ["mcp__nib__nibash_status"], "deny": ["Bash", "Grep", "Glob", "Edit", "Write"]},
            "statusLine": {"type": "command", "command": format!("{nib} statusline"), "refreshInterval": 1},
            "hooks": {
                "PreToolUse": [group(Some("Read")), group(Some("mcp__nib__.*"))],
                "PostToolUse": [group(Some("mcp__nib__edit|mcp__nib__write"))],
                "SessionStart": [group(None)],
                "PostCompact": [group(None)],
                "UserPromptSubmit": [group(None)]
            }
        })
    );
    assert_eq!(
        json_file(&e.project.join("opencode.json")),
        json!({
            "theme": "dark",
            "mcp": {"nib": {"type": "local", "command": [nib], "enabled": true, "codemode": false}},
            "permission": {"bash": "deny", "read": "deny", "grep": "deny", "glob": "deny", "edit": "deny"}
        })
    );
    // A second run changes nothing.
    let before: Vec<String> = [".mcp.json", ".claude/settings.local.json", "opencode.json"]
        .iter()
        .map(|f| std::fs::read_to_string(e.project.join(f)).unwrap())
        .collect();
    let (out, _) = run(&e, &["setup"], "");
    assert!(out.contains("nothing to change"), "{out}");
    let after: Vec<String> = [".mcp.json", ".claude/settings.local.json", "opencode.json"]
        .iter()
        .map(|f| std::fs::read_to_string(e.project.join(f)).unwrap())
        .collect();
    assert_eq!(before, after);
}

#[test]
fn setup_names_nib_on_path_and_updates_what_an_older_setup_wrote() {
    let e = env();
    // What an older setup wrote: an absolute path, no alwaysLoad.
    std::fs::write(
        e.project.join(".mcp.json"),
        r#"{"mcpServers": {"nib": {"type": "stdio", "command": "/old/place/nib", "args": []}, "other": {"command": "x"}}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(e.project.join(".claude")).unwrap();
    std::fs::write(
        e.project.join(".claude/settings.local.json"),
        r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "/old/place/nib hook", "timeout": 5}]}]}}"#,
    )
    .unwrap();
    let bin_dir = nib_bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let (out, code) = run_with_path(&e, &["setup"], "", path.clone());
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("note: nib is named by its path"), "{out}");
    let mcp = json_file(&e.project.join(".mcp.json"));
    assert_eq!(
        mcp["mcpServers"]["nib"],
        json!({"type": "stdio", "command": "nib", "args": [], "alwaysLoad": true})
    );
    assert_eq!(mcp["mcpServers"]["other"], json!({"command": "x"}));
    let settings = json_file(&e.project.join(".claude/settings.local.json"));
    let start = &settings["hooks"]["SessionStart"];
    assert_eq!(
        start,
        &json!([{"hooks": [{"type": "command", "command": "nib hook", "timeout": 5}]}]),
        "the old hook is updated, not doubled"
    );
    // Run again: nothing to change, and no word on OpenCode (said when
    // setup changed something, not on every run).
    let (out, _) = run_with_path(&e, &["setup"], "", path);
    assert!(out.contains("nothing to change"), "{out}");
    assert!(!out.contains("OpenCode"), "{out}");
}

#[test]
fn setup_keeps_what_is_there_and_leaves_non_json_alone() {
    let e = env();
    std::fs::create_dir_all(e.project.join(".claude")).unwrap();
    let jsonc = "// my settings\n{\"permissions\": {}}\n";
    std::fs::write(e.project.join(".claude/settings.local.json"), jsonc).unwrap();
    std::fs::write(
        e.project.join(".mcp.json"),
        "{\"mcpServers\": {\"other\": {\"command\": \"x\"}}}",
    )
    .unwrap();
    let (out, code) = run(&e, &["setup"], "");
    assert_eq!(code, 0);
    assert!(
        out.contains("not plain JSON") && out.contains("settings.local.json"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(e.project.join(".claude/settings.local.json")).unwrap(),
        jsonc
    );
    let mcp = json_file(&e.project.join(".mcp.json"));
    assert_eq!(mcp["mcpServers"]["other"]["command"], "x");
    assert!(mcp["mcpServers"]["nib"].is_object());
}

#[test]
fn setup_never_replaces_the_users_status_line() {
    let e = env();
    std::fs::create_dir_all(e.home.join(".claude")).unwrap();
    std::fs::write(
        e.home.join(".claude/settings.json"),
        r#"{"statusLine": {"type": "command", "command": "my-line"}}"#,
    )
    .unwrap();
    let (out, code) = run(&e, &["setup", "--user"], "");
    assert_eq!(code, 0, "{out}");
    let settings = json_file(&e.home.join(".claude/settings.json"));
    assert_eq!(settings["statusLine"]["command"], "my-line");
    // A project setup adds none.
    let (_, code) = run(&e, &["setup"], "");
    assert_eq!(code, 0);
    assert!(
        json_file(&e.project.join(".claude/settings.local.json"))
            .get("statusLine")
            .is_none()
    );
}

#[test]
fn setup_writes_a_status_line_that_refreshes_and_upgrades_its_own() {
    // A project setup where the person has no status line of their own.
    let e = env();
    let (out, code) = run(&e, &["setup"], "");
    assert_eq!(code, 0, "{out}");
    let line = &json_file(&e.project.join(".claude/settings.local.json"))["statusLine"];
    assert_eq!(line["refreshInterval"], 1, "{line}");
    assert!(
        line["command"].as_str().unwrap().ends_with(" statusline"),
        "{line}"
    );
    // nib's own line from an older setup gains the refresh; nothing else changes.
    let e = env();
    std::fs::create_dir_all(e.home.join(".claude")).unwrap();
    std::fs::write(
        e.home.join(".claude/settings.json"),
        r#"{"statusLine": {"type": "command", "command": "nib statusline", "padding": 1}}"#,
    )
    .unwrap();
    let (out, code) = run(&e, &["setup", "--user"], "");
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        json_file(&e.home.join(".claude/settings.json"))["statusLine"],
        json!({"type": "command", "command": "nib statusline", "padding": 1, "refreshInterval": 1})
    );
}

#[test]
fn setup_for_the_user_and_remembered_options() {
    let e = env();
    std::fs::create_dir_all(e.home.join(".config/opencode")).unwrap();
    std::fs::write(e.home.join(".config/opencode/opencode.json"), "{}").unwrap();
    let (out, code) = run(
        &e,
        &[
            "setup",
            "--user",
            "--provider",
            "zemble=zemble-mcp",
            "--decider",
            "fixed",
            "--summary=claude-p:haiku",
        ],
        "",
    );
    assert_eq!(code, 0, "{out}");
    let settings = json_file(&e.home.join(".claude/settings.json"));
    assert_eq!(
        settings["permissions"]["deny"],
        json!(["Bash", "Grep", "Glob", "Edit", "Write"])
    );
    assert!(settings.get("enabledMcpjsonServers").is_none());
    assert_eq!(
        settings["statusLine"],
        json!({"type": "command", "command": format!("{} statusline", nib_bin().display()), "refreshInterval": 1}),
        "the status line is installed for the user, refreshed every second"
    );
    assert!(json_file(&e.home.join(".claude.json"))["mcpServers"]["nib"].is_object());
    // The nib mod: a local marketplace, declared and enabled; its plugin is
    // the mod alone (the server and hooks are above).
    let mod_dir = e.home.join(".local/share/nib/claude-plugin");
    assert_eq!(
        settings["extraKnownMarketplaces"]["nib"],
        json!({"source": {"source": "directory", "path": mod_dir}})
    );
    assert_eq!(settings["enabledPlugins"]["nib@nib"], json!(true));
    let plugin = json_file(&mod_dir.join("plugin/.claude-plugin/plugin.json"));
    assert_eq!(plugin["name"], "nib");
    assert!(plugin.get("mcpServers").is_none(), "{plugin}");
    assert_eq!(
        json_file(&mod_dir.join("plugin/hooks/hooks.json")),
        json!({"modules": ["./register.tsx"]})
    );
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("claude/hooks/register.tsx");
    assert_eq!(
        std::fs::read_to_string(mod_dir.join("plugin/hooks/register.tsx")).unwrap(),
        std::fs::read_to_string(shipped).unwrap()
    );
    assert!(
        out.contains(&format!(
            "created {}",
            mod_dir.join("plugin/hooks/register.tsx").display()
        )),
        "{out}"
    );
    assert!(json_file(&e.home.join(".config/opencode/opencode.json"))["mcp"]["nib"].is_object());
    assert_eq!(
        json_file(&e.home.join(".config/nib/setup.json")),
        json!({"providers": {"zemble": "zemble-mcp"}, "decider": "fixed", "summary": "claude-p:haiku"})
    );
    let (_, code) = run(
        &e,
        &["setup", "--user", "--provider", "zemble=", "--decider="],
        "",
    );
    assert_eq!(code, 0);
    assert_eq!(
        json_file(&e.home.join(".config/nib/setup.json")),
        json!({"providers": {}, "summary": "claude-p:haiku"})
    );
    assert!(
        !e.project.join(".mcp.json").exists(),
        "--user leaves the project alone"
    );
}

#[test]
fn the_hook_answers_each_event() {
    let e = env();
    std::fs::write(e.project.join("a.rs"), "fn main() {}\n").unwrap();
    let file = e.project.join("a.rs").display().to_string();
    let read = json!({"hook_event_name": "PreToolUse", "session_id": "S1", "tool_name": "Read", "tool_use_id": "t0",
                      "tool_input": {"file_path": file}})
    .to_string();
    let (out, code) = run(&e, &["hook"], &read);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(
        v["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains("mcp__nib__read")
    );
    let (out, _) = run(&e, &["hook"], &read);
    assert_eq!(out, "", "the same Read goes through the second time");

    let tool =
        json!({"hook_event_name": "PreToolUse", "session_id": "S1", "tool_name": "mcp__nib__read",
                      "tool_use_id": "toolu_A", "agent_id": "sub-7", "tool_input": {}})
        .to_string();
    let (out, _) = run(&e, &["hook"], &tool);
    assert_eq!(out, "");
    let records: Vec<_> = std::fs::read_dir(e.home.join("state/hook/tool-use"))
        .unwrap()
        .collect();
    assert_eq!(records.len(), 1);
    let rec: Value =
        serde_json::from_slice(&std::fs::read(records[0].as_ref().unwrap().path()).unwrap())
            .unwrap();
    assert_eq!(rec, json!({"session": "S1", "agent": "sub-7"}));

    for (event, extra) in [
        ("UserPromptSubmit", json!({})),
        ("SessionStart", json!({"source": "compact"})),
    ] {
        let mut ev = json!({"hook_event_name": event, "session_id": "S1"});
        for (k, v) in extra.as_object().unwrap() {
            ev[k] = v.clone();
        }
        let (out, _) = run(&e, &["hook"], &ev.to_string());
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], event);
        assert!(
            v["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap()
                .contains("nib")
        );
    }
    assert_eq!(
        std::fs::read_dir(e.home.join("state/hook/reset"))
            .unwrap()
            .count(),
        1,
        "compaction marks a reset"
    );
    let (out, _) = run(
        &e,
        &["hook"],
        &json!({"hook_event_name": "PostCompact", "session_id": "S2"}).to_string(),
    );
    assert_eq!(out, "");
    assert_eq!(
        std::fs::read_dir(e.home.join("state/hook/reset"))
            .unwrap()
            .count(),
        2
    );
}

#[tokio::test]
async fn agents_are_told_apart_reset_by_compaction_and_kept_across_restarts() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), "a\nb\nc\n").unwrap();
    let (nib, state) = start_with_agents(
        dir.path(),
        &[
            ("m1", None),
            ("m2", None),
            ("s1", Some("sub")),
            ("s2", Some("sub")),
        ],
    )
    .await;
    // The subagent reads; the main agent has not: its edit is refused.
    let (t, _) = call_as(&nib, "s1", "read", json!({"paths": ["f.txt"]})).await;
    let tag = header_tag(&t);
    let (t, is_error) = call_as(
        &nib,
        "m1",
        "edit",
        json!({"input": format!("[f.txt#{tag}]\nPUT 2:\n+B\n")}),
    )
    .await;
    assert!(
        is_error && t.contains("not seen"),
        "the main agent did not see line 2: {t}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "a\nb\nc\n"
    );
    // The subagent's own edit goes through.
    let (t, is_error) = call_as(
        &nib,
        "s2",
        "edit",
        json!({"input": format!("[f.txt#{tag}]\nPUT 2:\n+B\n")}),
    )
    .await;
    assert!(!is_error, "{t}");
    let tag = header_tag(&t);

    // Compaction: what the session's agents saw stops counting.
    let out = Command::new(nib_bin())
        .arg("hook")
        .env("NIB_STATE_DIR", &state)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            c.stdin.as_mut().unwrap().write_all(
                json!({"hook_event_name": "PostCompact", "session_id": "S"})
                    .to_string()
                    .as_bytes(),
            )?;
            drop(c.stdin.take());
            c.wait()
        })
        .unwrap();
    assert!(out.success());
    std::thread::sleep(std::time::Duration::from_millis(20));
    hook_tool_use(&state, "s3", "S", Some("sub"));
    let (t, is_error) = call_as(
        &nib,
        "s3",
        "edit",
        json!({"input": format!("[f.txt#{tag}]\nPUT 3:\n+C\n")}),
    )
    .await;
    assert!(is_error && t.contains("not seen"), "after compaction: {t}");

    // Seen lines survive a restart (kept as hashes and line numbers).
    hook_tool_use(&state, "m3", "S", None);
    let (t, _) = call_as(&nib, "m3", "read", json!({"paths": ["f.txt"]})).await;
    let tag = header_tag(&t);
    let home = nib.home;
    let _ = nib.client.cancel().await;
    std::thread::sleep(std::time::Duration::from_millis(300));
    let saved = std::fs::read_dir(home.path().join("state/seen"))
        .unwrap()
        .count();
    assert!(saved >= 1, "agents were saved");
    for entry in std::fs::read_dir(home.path().join("state/seen")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!text.contains("\"a\\nB"), "no file text is saved: {text}");
    }
    let nib = start_in_home(
        Era::Handshake,
        dir.path(),
        TestClient::new(Roots::Undeclared),
        &[],
        home,
    )
    .await;
    hook_tool_use(&nib.home.path().join("state"), "m4", "S", None);
    let (t, is_error) = call_as(
        &nib,
        "m4",
        "edit",
        json!({"input": format!("[f.txt#{tag}]\nPUT 1:\n+A\n")}),
    )
    .await;
    assert!(!is_error, "seen lines were kept across the restart: {t}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "A\nB\nc\n"
    );
    nib.stop().await;
}

/// The rough edges a new user met (issue 36): created files say so; the
/// channel tip and the trust/`-p` hint come once, never with --dry-run;
/// OpenCode's absence is said with what to paste, opencode.jsonc is used,
/// a commented file gets what to paste; an allow rule the bare deny stops
/// is named; the note names the other nib PATH finds; --user names this
/// binary by its path whatever PATH has.
#[test]
fn setup_says_what_it_did_and_what_it_could_not() {
    let e = env();
    let (out, code) = run(&e, &["setup", "--dry-run"], "");
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("tip:") && !out.contains("next:"), "{out}");
    // Another nib first on PATH: the note names it.
    let other = e.home.join("bin");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("nib"), "#!/bin/sh\nexit 0\n").unwrap();
    let path = std::env::join_paths(
        std::iter::once(other.clone())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    std::fs::create_dir_all(e.project.join(".claude")).unwrap();
    std::fs::write(
        e.project.join(".claude/settings.local.json"),
        r#"{"permissions": {"allow": ["Bash(ls:*)", "Read"]}}"#,
    )
    .unwrap();
    // A project with OpenCode (its folder) but no opencode.json gets the note.
    std::fs::create_dir_all(e.project.join(".opencode")).unwrap();
    let (out, code) = run_with_path(&e, &["setup"], "", path.clone());
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "created {}",
            e.project.join(".mcp.json").display()
        )) && out.contains(&format!(
            "updated {}",
            e.project.join(".claude/settings.local.json").display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&other.join("nib").display().to_string()),
        "{out}"
    );
    assert!(out.contains("Bash(ls:*) stops working"), "{out}");
    assert!(
        out.contains("no opencode.json") && out.contains("\"mcp\""),
        "{out}"
    );
    assert!(
        out.contains("tip:")
            && out.contains("folder-trust")
            && out.contains("--allowedTools mcp__nib"),
        "{out}"
    );
    // Run again: the tip is not repeated.
    std::fs::write(e.project.join("opencode.jsonc"), "{}\n").unwrap();
    let (out, _) = run_with_path(&e, &["setup"], "", path.clone());
    assert!(!out.contains("tip:"), "{out}");
    assert!(
        json_file(&e.project.join("opencode.jsonc"))["mcp"]["nib"].is_object(),
        "{out}"
    );
    // A commented opencode.json is left alone with what to paste.
    std::fs::remove_file(e.project.join("opencode.jsonc")).unwrap();
    std::fs::write(e.project.join("opencode.json"), "// mine\n{}\n").unwrap();
    let (out, _) = run_with_path(&e, &["setup"], "", path.clone());
    assert!(
        out.contains("opencode.json is not plain JSON")
            && out.contains("add this to it by hand: {\"mcp\""),
        "{out}"
    );
    // --user with this nib on PATH still names it by its path.
    let bin_dir = nib_bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let (out, code) = run_with_path(&e, &["setup", "--user"], "", path);
    assert_eq!(code, 0, "{out}");
    let exe = std::fs::canonicalize(nib_bin())
        .unwrap()
        .display()
        .to_string();
    assert_eq!(
        json_file(&e.home.join(".claude.json"))["mcpServers"]["nib"]["command"],
        json!(exe)
    );
    let settings = json_file(&e.home.join(".claude/settings.json"));
    assert_eq!(
        settings["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        json!(format!("{exe} hook"))
    );
}

/// The reminder reaches the model once in a session's first request:
/// SessionStart carries it, the first prompt does not; later prompts do.
#[test]
fn the_reminder_is_not_sent_twice_in_the_first_request() {
    let e = env();
    let event = |name: &str| {
        json!({"hook_event_name": name, "session_id": "S9", "source": "startup"}).to_string()
    };
    let (start, _) = run(&e, &["hook"], &event("SessionStart"));
    assert!(start.contains("additionalContext"), "{start}");
    let (first, _) = run(&e, &["hook"], &event("UserPromptSubmit"));
    assert!(!first.contains("additionalContext"), "{first}");
    let (second, _) = run(&e, &["hook"], &event("UserPromptSubmit"));
    assert!(second.contains("additionalContext"), "{second}");
}

/// After nib's edit, the hook shows the person the change as a diff — a
/// message for the user, not context for the model — from what `nib undo`
/// keeps; other tools get nothing.
#[test]
fn the_hook_shows_nibs_edits_to_the_person_as_a_diff() {
    let e = env();
    std::fs::write(
        e.project.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    let (out, _) = run(&e, &["read", "Cargo.toml"], "");
    let tag = out.split('#').nth(1).unwrap()[..4].to_string();
    let (out, code) = run(
        &e,
        &["edit"],
        &format!("[Cargo.toml#{tag}]\nSUB 3: 0.1.0\n+0.2.0\n"),
    );
    assert_eq!(code, 0, "{out}");
    let event = |tool: &str| {
        json!({"hook_event_name": "PostToolUse", "session_id": "S", "tool_name": tool,
               "cwd": e.project, "tool_input": {}, "tool_response": {}})
        .to_string()
    };
    let (out, code) = run(&e, &["hook"], &event("mcp__nib__edit"));
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let msg = v["systemMessage"].as_str().unwrap();
    assert!(
        msg.contains("-version = \"0.1.0\"")
            && msg.contains("+version = \"0.2.0\"")
            && msg.contains("b/Cargo.toml"),
        "{msg}"
    );
    assert!(
        v.get("hookSpecificOutput").is_none(),
        "nothing for the model: {out}"
    );
    let (out, _) = run(&e, &["hook"], &event("mcp__nib__read"));
    assert_eq!(out, "");
    // The plugin's name for the same tool.
    let (out, _) = run(&e, &["hook"], &event("mcp__plugin_nib_nib__edit"));
    assert!(out.contains("+++ b/Cargo.toml"), "{out}");
    // With the nib mod enabled, the diff is drawn in the tool's row: the
    // hook does not repeat it.
    let (out, code) = run(&e, &["setup", "--user"], "");
    assert_eq!(code, 0, "{out}");
    let (out, _) = run(&e, &["hook"], &event("mcp__nib__edit"));
    assert_eq!(out, "");
}
