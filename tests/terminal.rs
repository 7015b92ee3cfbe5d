//! What the person sees of nib in Claude Code's real terminal UI: Claude
//! Code (pinned, as `claude_code.rs` finds it) runs interactively in tmux
//! against `nib-mock-model`, set up by `nib setup --user` in a fresh HOME,
//! and every assertion reads the screen (`tmux capture-pane`): the band
//! above the prompt names the running nibash call with a clock that moves,
//! the status line's clock moves too, an edit's change is on the screen in
//! the default (folded) view, and `/nib-undo` puts the bytes back.
//!
//! Waits are on what the screen shows, each bounded; a timeout fails with
//! the last screen. Without tmux or Claude Code the test says so and passes,
//! unless `NIB_REQUIRE_THIRD_PARTY=1` (as in CI).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nib_mock_model::{Mock, Script};
use serde_json::json;

use crate::clients::{Env as Place, env as place};
use crate::common::*;

/// A tmux server of the test's own, with one window running `argv`.
struct Screen {
    socket: String,
}

impl Screen {
    fn start(dir: &Path, env: &[(&str, String)], argv: &[String]) -> Screen {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let socket = format!(
            "nib-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut c = Command::new("tmux");
        c.args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", "140", "-y", "45", "-c"])
            .arg(dir);
        for (k, v) in env {
            c.arg("-e").arg(format!("{k}={v}"));
        }
        // Focus events on: without them Claude Code shows a notice where
        // a mod's toast goes.
        let status = c
            .args(argv)
            .args([";", "set", "-g", "focus-events", "on"])
            .status()
            .expect("tmux runs");
        assert!(status.success(), "tmux could not start {argv:?}");
        Screen { socket }
    }

    fn text(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until `seen` holds for the screen (checked every 200 ms);
    /// returns that screen, or fails with the last one after `bound`.
    fn wait_for(&self, what: &str, bound: Duration, seen: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + bound;
        loop {
            let screen = self.text();
            if seen(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < until,
                "waited {bound:?} for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Presses keys (tmux names: `Enter`, `Tab`, `C-x`), one at a time.
    fn keys(&self, keys: &[&str]) {
        for k in keys {
            Command::new("tmux")
                .args(["-L", &self.socket, "send-keys", "-t", "0", k])
                .status()
                .expect("tmux send-keys");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Types `text` at the prompt and presses Enter.
    fn type_line(&self, text: &str) {
        Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "0", "-l", text])
            .status()
            .expect("tmux send-keys");
        std::thread::sleep(Duration::from_millis(300));
        self.keys(&["Enter"]);
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

/// Whether this machine has what the test drives.
fn tools() -> Option<PathBuf> {
    let tmux = Command::new("tmux").arg("-V").output().is_ok();
    let claude = crate::claude_code::claude();
    if !tmux {
        assert!(
            std::env::var_os("NIB_REQUIRE_THIRD_PARTY").is_none(),
            "tmux is not installed (apt-get install tmux)"
        );
        crate::common::skip("tmux is not installed (apt-get install tmux)");
        return None;
    }
    claude
}

/// The screen's rows above the prompt box, and below it (where Claude Code
/// draws the status line).
fn above_and_below(screen: &str) -> (Vec<&str>, Vec<&str>) {
    let rows: Vec<&str> = screen.lines().collect();
    let borders: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.trim_start().starts_with("────"))
        .map(|(i, _)| i)
        .collect();
    match (borders.first(), borders.last()) {
        (Some(&top), Some(&bottom)) if top < bottom => {
            (rows[..top].to_vec(), rows[bottom + 1..].to_vec())
        }
        _ => (rows, Vec::new()),
    }
}

/// The clock `(Ns)` on the first row of `rows` that names the running
/// call.
fn clock(rows: &[&str], call: &str) -> Option<u64> {
    let row = rows
        .iter()
        .find(|r| r.contains("nib: running") && r.contains(call))?;
    let at = row.rfind("s)")?;
    let open = row[..at].rfind('(')?;
    row[open + 1..at].parse().ok()
}

/// A fresh HOME set up by `nib setup --user`, with Claude Code's first-run
/// questions answered as a person who already went through them
/// (onboarding done, the key approved, the folder trusted).
fn set_up() -> Place {
    let p = place();
    let setup = crate::claude_code::command(&nib_bin(), &p)
        .args(["setup", "--user"])
        .output()
        .unwrap();
    assert!(setup.status.success(), "{setup:?}");
    let state = p.home.join(".claude.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state).unwrap_or_else(|_| b"{}".to_vec())).unwrap();
    doc["hasCompletedOnboarding"] = json!(true);
    doc["theme"] = json!("dark");
    doc["customApiKeyResponses"] = json!({"approved": ["sk-test-offline"], "rejected": []});
    doc["projects"][p.project.to_string_lossy().as_ref()] = json!({"hasTrustDialogAccepted": true});
    std::fs::write(&state, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    p
}

/// Claude Code in tmux in `p`'s project against `mock`, at its prompt.
fn claude_at_prompt(claude: &Path, p: &Place, mock: &Mock) -> Screen {
    let env = [
        ("HOME", p.home.display().to_string()),
        ("DISABLE_AUTOUPDATER", "1".to_string()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
        ("ANTHROPIC_BASE_URL", mock.url()),
        ("ANTHROPIC_API_KEY", "sk-test-offline".to_string()),
        ("TERM", "xterm-256color".to_string()),
    ];
    let argv = [
        claude.display().to_string(),
        "--permission-mode".into(),
        "default".into(),
        "--allowedTools".into(),
        "mcp__nib".into(),
    ];
    let screen = Screen::start(&p.project, &env, &argv);
    screen.wait_for("Claude Code's prompt", Duration::from_secs(60), |s| {
        s.contains("nib: idle")
    });
    screen
}

#[test]
fn the_person_sees_the_running_call_its_clock_and_the_edits_change_and_undo_puts_it_back() {
    let Some(claude) = tools() else { return };
    let p = set_up();
    let original = "alpha\nbeta\ngamma\n";
    std::fs::write(p.project.join("notes.txt"), original).unwrap();
    let loop_line = "for i in $(seq 14); do echo tick $i; sleep 1; done";
    let script = Script::parse(
        &json!({"steps": [
            {"tool": "mcp__nib__nibash", "input": {"command": loop_line}},
            {"tool": "mcp__nib__read", "input": {"paths": ["notes.txt"]}},
            {"tool": "mcp__nib__edit", "input": {"patch": "[notes.txt#{{tag notes.txt}}]\nSUB 2: beta\n+delta\n"}},
            {"text": "Changed beta to delta."}
        ]})
        .to_string(),
    )
    .unwrap();
    let mock = Mock::start(script, None).unwrap();
    let screen = claude_at_prompt(&claude, &p, &mock);
    screen.type_line("run the loop, then change beta to delta in notes.txt");

    // The band above the prompt and the status line below it both name the
    // call while it runs, and both clocks move.
    let first = screen.wait_for(
        "the band and the status line naming the running call",
        Duration::from_secs(30),
        |s| {
            let (above, below) = above_and_below(s);
            clock(&above, "for i in").is_some() && clock(&below, "for i in").is_some()
        },
    );
    let (above, below) = above_and_below(&first);
    let (band0, line0) = (
        clock(&above, "for i in").unwrap_or(0),
        clock(&below, "for i in").unwrap_or(0),
    );
    screen.wait_for(
        "both clocks to move on while the call runs",
        Duration::from_secs(8),
        |s| {
            let (above, below) = above_and_below(s);
            clock(&above, "for i in").is_some_and(|b| b >= band0 + 2)
                && clock(&below, "for i in").is_some_and(|l| l >= line0 + 2)
        },
    );

    // Once the turn is over, the change is on the screen without expanding
    // anything: the file with +1 −1 and its lines.
    let done = screen.wait_for(
        "the turn's end with the edit's change shown",
        Duration::from_secs(60),
        |s| s.contains("Changed beta to delta.") && s.contains("notes.txt +1 −1"),
    );
    assert!(
        done.contains("-beta") && done.contains("+delta"),
        "the changed lines are not on the screen:\n{done}"
    );
    assert_eq!(
        std::fs::read_to_string(p.project.join("notes.txt")).unwrap(),
        "alpha\ndelta\ngamma\n"
    );
    // The band is gone once nothing runs; the status line says idle.
    let (above, _) = above_and_below(&done);
    assert!(
        !above.iter().any(|r| r.contains("nib: running")),
        "the band stayed after the call:\n{done}"
    );
    screen.wait_for(
        "the status line to say idle (it refreshes every second)",
        Duration::from_secs(10),
        |s| above_and_below(s).1.iter().any(|r| r.contains("nib: idle")),
    );

    // /nib-undo puts the bytes back and says so.
    screen.type_line("/nib-undo");
    screen.wait_for("/nib-undo's answer", Duration::from_secs(30), |s| {
        s.contains("put back as it was")
    });
    assert_eq!(
        std::fs::read_to_string(p.project.join("notes.txt")).unwrap(),
        original
    );
}

#[test]
fn a_jobs_end_raises_a_toast_and_stop_in_the_nibash_pane_ends_a_job() {
    let Some(claude) = tools() else { return };
    let p = set_up();
    let script = Script::parse(
        &json!({"steps": [
            {"tool": "mcp__nib__nibash", "input": {"command": "sleep 1; echo first-done", "background": true}},
            {"tool": "mcp__nib__nibash", "input": {"command": "sleep 10; touch late-canary", "background": true}},
            {"text": "Started two jobs."}
        ]})
        .to_string(),
    )
    .unwrap();
    let mock = Mock::start(script, None).unwrap();
    let screen = claude_at_prompt(&claude, &p, &mock);
    screen.type_line("start two jobs");
    let started = Instant::now();
    screen.wait_for(
        "the toast of the first job's end",
        Duration::from_secs(20),
        |s| s.contains("nib: job %1 exited 0"),
    );
    // The pane lists the jobs; the keyboard takes it (ctrl+x tab), Tab
    // reaches Stop, Enter presses it.
    screen.type_line("/nibash");
    screen.wait_for("the /nibash pane with Stop", Duration::from_secs(20), |s| {
        s.contains("[ Stop %2 ]")
    });
    screen.keys(&["C-x", "Tab", "Tab", "Enter"]);
    screen.wait_for("the second job stopped", Duration::from_secs(20), |s| {
        s.contains("%2 was killed")
    });
    // Its process is gone: the canary it would write 10 s after its start
    // never appears.
    let after = Duration::from_secs(12).saturating_sub(started.elapsed());
    std::thread::sleep(after);
    assert!(
        !p.project.join("late-canary").exists(),
        "the stopped job went on running; the screen:\n{}",
        screen.text()
    );
}

#[test]
fn restore_in_the_trash_pane_puts_a_removed_file_back() {
    let Some(claude) = tools() else { return };
    let p = set_up();
    std::fs::write(p.project.join("gone.txt"), "keep me\n").unwrap();
    let script = Script::parse(
        &json!({"steps": [
            {"tool": "mcp__nib__nibash", "input": {"command": "rm gone.txt"}},
            {"text": "Removed gone.txt."}
        ]})
        .to_string(),
    )
    .unwrap();
    let mock = Mock::start(script, None).unwrap();
    let screen = claude_at_prompt(&claude, &p, &mock);
    screen.type_line("remove gone.txt");
    screen.wait_for("the turn's end", Duration::from_secs(30), |s| {
        s.contains("Removed gone.txt.")
    });
    assert!(!p.project.join("gone.txt").exists(), "rm did not remove it");
    screen.type_line("/trash");
    screen.wait_for(
        "the /trash pane with Restore",
        Duration::from_secs(20),
        |s| s.contains("gone.txt") && s.contains("[ Restore"),
    );
    // The keyboard takes the pane (ctrl+x tab), Tab reaches Restore, Enter
    // presses it.
    screen.keys(&["C-x", "Tab", "Tab", "Enter"]);
    screen.wait_for(
        "the pane saying it restored",
        Duration::from_secs(20),
        |s| s.contains("restored gone.txt"),
    );
    assert_eq!(
        std::fs::read_to_string(p.project.join("gone.txt")).unwrap(),
        "keep me\n"
    );
}
