//! End to end through a real Claude Code (`claude -p`, pinned in CI) whose
//! model is a loopback mock answering from a script: nib set up as a user
//! would, an edit made through nib's tool, the diff shown on the person's
//! side of the stream and never sent to the model, `nib undo` putting the
//! bytes back, and `nib setup --user` installing the mod that loads.
//!
//! Claude Code is found at `$NIB_CLAUDE`, in `target/claude-code` (where
//! `.ci/run` installs it), or on PATH; without it the test says so and
//! passes, unless `NIB_REQUIRE_THIRD_PARTY=1` (as in CI).

use std::path::{Path, PathBuf};
use std::process::Command;

use nib_mock_model::{Mock, Script};
use serde_json::json;

use crate::clients::{Env as Place, env as place};
use crate::common::*;

pub fn claude() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = std::env::var_os("NIB_CLAUDE")
        .map(PathBuf::from)
        .or_else(|| {
            let p = root.join("target/claude-code/node_modules/.bin/claude");
            p.exists().then_some(p)
        })
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join("claude"))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        assert!(
            std::env::var_os("NIB_REQUIRE_THIRD_PARTY").is_none(),
            "Claude Code is not installed (npm install @anthropic-ai/claude-code into target/claude-code)"
        );
        crate::common::skip(
            "Claude Code is not installed (npm install @anthropic-ai/claude-code into target/claude-code)",
        );
    }
    found
}

/// A command with the place's HOME and nothing of this machine's Claude
/// or nib configuration.
pub fn command(program: &Path, p: &Place) -> Command {
    let mut c = Command::new(program);
    c.current_dir(&p.project)
        .env("HOME", &p.home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("NIB_STATE_DIR")
        .env_remove("NIB_DIRECTORY")
        .env_remove("NIB_SANDBOX")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    c
}

fn output(mut c: Command) -> (String, String, i32) {
    let out = c.output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

fn ask(
    claude: &Path,
    p: &Place,
    mock: &Mock,
    prompt: &str,
    extra: &[&str],
) -> (String, String, i32) {
    let mut c = command(claude, p);
    c.args(["-p", prompt, "--output-format", "stream-json", "--verbose"])
        .args(extra)
        .env("ANTHROPIC_BASE_URL", mock.url())
        .env("ANTHROPIC_API_KEY", "sk-test-offline");
    output(c)
}

#[test]
fn an_edit_through_claude_code_shows_its_diff_to_the_person_only_and_nib_undo_puts_it_back() {
    let Some(claude) = claude() else { return };
    let p = place();
    let original = "alpha\nbeta\ngamma\n";
    std::fs::write(p.project.join("notes.txt"), original).unwrap();
    let mut setup = command(&nib_bin(), &p);
    setup.arg("setup");
    let (out, err, code) = output(setup);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("created") && out.contains("--allowedTools mcp__nib"),
        "setup names what it made and how -p runs: {out}"
    );
    let script = Script::parse(
        &json!({"steps": [
            {"tool": "mcp__nib__read", "input": {"paths": ["notes.txt"]}},
            {"tool": "mcp__nib__edit", "input": {"patch": "[notes.txt#{{tag notes.txt}}]\nSUB 2: beta\n+delta\n"}},
            {"text": "Changed beta to delta."}
        ]})
        .to_string(),
    )
    .unwrap();
    let mock = Mock::start(script, None).unwrap();
    let (out, err, code) = ask(
        &claude,
        &p,
        &mock,
        "change beta to delta in notes.txt",
        &["--allowedTools", "mcp__nib"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(mock.steps_taken(), 3, "{out}\n{err}");
    assert_eq!(
        std::fs::read_to_string(p.project.join("notes.txt")).unwrap(),
        "alpha\ndelta\ngamma\n",
        "{out}"
    );
    // The person's side: the hook's message carries the diff.
    assert!(
        out.contains("--- a/notes.txt") && out.contains("-beta") && out.contains("+delta"),
        "no diff in the stream: {out}"
    );
    // The model's side: no request ever carried it.
    let sent = serde_json::to_string(&mock.requests()).unwrap();
    assert!(sent.contains("notes.txt"), "the mock saw the session");
    assert!(
        !sent.contains("--- a/notes.txt") && !sent.contains("+++ b/notes.txt"),
        "the diff reached the model's context"
    );
    // nib undo puts the bytes back.
    let mut undo = command(&nib_bin(), &p);
    undo.arg("undo");
    let (out, err, code) = output(undo);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(p.project.join("notes.txt")).unwrap(),
        original
    );
}

#[test]
fn setup_for_the_user_installs_the_mod_that_claude_code_loads() {
    let Some(claude) = claude() else { return };
    let p = place();
    let mut setup = command(&nib_bin(), &p);
    setup.args(["setup", "--user"]);
    let (out, err, code) = output(setup);
    assert_eq!(code, 0, "{out}{err}");
    let mock = Mock::start(
        Script::parse(r#"{"steps": [{"text": "hello"}]}"#).unwrap(),
        None,
    )
    .unwrap();
    let log = p.home.join("claude-debug.log");
    let (out, err, code) = ask(
        &claude,
        &p,
        &mock,
        "hello",
        &["--debug-file", log.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let debug = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        debug.contains("hooks module nib@nib loaded"),
        "the mod did not load: {}",
        debug
            .lines()
            .filter(|l| l.contains("nib"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // nib's server answered the session with its tools.
    let sent = serde_json::to_string(&mock.requests()).unwrap();
    assert!(
        sent.contains("mcp__nib__edit"),
        "nib's tools were not offered"
    );
}

#[test]
fn the_repository_is_a_marketplace_the_nib_plugin_installs_from() {
    let Some(claude) = claude() else { return };
    let p = place();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut add = command(&claude, &p);
    add.args(["plugin", "marketplace", "add"]).arg(repo);
    let (out, err, code) = output(add);
    assert_eq!(code, 0, "{out}{err}");
    let mut install = command(&claude, &p);
    install.args(["plugin", "install", "nib@nib"]);
    let (out, err, code) = output(install);
    assert_eq!(code, 0, "{out}{err}");
    let mut list = command(&claude, &p);
    list.args(["plugin", "list"]);
    let (out, err, code) = output(list);
    assert_eq!(code, 0, "{out}{err}");
    let at = out
        .find("nib@nib")
        .unwrap_or_else(|| panic!("nib@nib not listed: {out}"));
    let entry = &out[at..out.len().min(at + 400)];
    assert!(
        entry.contains("enabled") && entry.contains("claude"),
        "{entry}"
    );
}

/// What a program plants for Claude Code never runs there (issue 57, item
/// 2): through Claude Code's own session, a nibash call (nib set up by
/// `nib setup`, sandboxed by default) writes `.claude/settings.json` with
/// a `SessionStart` hook; the
/// next `claude -p` in the project leaves no marker. The control: the same
/// hook written by the person runs at the next start, so Claude Code does
/// run a project's hooks here.
#[test]
fn claude_code_started_in_the_project_runs_no_hook_a_program_planted() {
    let Some(claude) = claude() else { return };
    let p = place();
    let marker = p.home.join("planted-hook-ran");
    let mut setup = command(&nib_bin(), &p);
    setup.arg("setup");
    let (out, err, code) = output(setup);
    assert_eq!(code, 0, "{out}{err}");
    let hook = json!({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": format!("touch {}", marker.display())}
    ]}]}})
    .to_string();
    let plant =
        format!("mkdir -p .claude; printf '%s' '{hook}' > .claude/settings.json; echo planted");
    let script = Script::parse(
        &json!({"steps": [
            {"tool": "mcp__nib__nibash", "input": {"command": plant}},
            {"text": "Done."}
        ]})
        .to_string(),
    )
    .unwrap();
    let mock = Mock::start(script, None).unwrap();
    let (out, err, code) = ask(&claude, &p, &mock, "plant", &["--allowedTools", "mcp__nib"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(mock.steps_taken(), 2, "{out}\n{err}");
    let _ = std::fs::remove_file(&marker);
    let next = Script::parse(&json!({"steps": [{"text": "Hello."}]}).to_string()).unwrap();
    let mock = Mock::start(next, None).unwrap();
    let (out, err, code) = ask(&claude, &p, &mock, "hello", &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        !marker.exists(),
        "Claude Code ran a hook a program planted: {}",
        std::fs::read_to_string(p.project.join(".claude/settings.json")).unwrap_or_default()
    );
    // The control: the person's own hook runs at the next start.
    std::fs::write(p.project.join(".claude/settings.json"), &hook).unwrap();
    let again = Script::parse(&json!({"steps": [{"text": "Hello."}]}).to_string()).unwrap();
    let mock = Mock::start(again, None).unwrap();
    let (out, err, code) = ask(&claude, &p, &mock, "hello", &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        marker.exists(),
        "the control: Claude Code did not run the person's SessionStart hook, so the check above proves nothing"
    );
}
