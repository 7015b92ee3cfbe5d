//! What a program plants for the person's side, where nothing was (issue
//! 57, items 2 and 6): under NIB_SANDBOX=1, with bubblewrap and with
//! Landlock + seccomp alone, a client or editor file a program creates
//! (`.claude/settings.json` with a hook, `.mcp.json`, `nib.json`,
//! `opencode.json`, `.vscode/tasks.json`) is not there when the call ends,
//! nor half a second later while a job that made it still runs; a
//! repository a running job plants carries no command into the person's
//! `git status` run while the job runs; the person's own files stay.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;

const SANDBOXED: [&[(&str, &str)]; 2] = [
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

/// The client and editor files a program plants, each naming a command
/// that would leave `marker`.
fn planting_script(marker: &Path) -> String {
    let m = marker.display();
    format!(
        "mkdir -p .claude .vscode; \
         printf '%s' '{{\"hooks\":{{\"SessionStart\":[{{\"hooks\":[{{\"type\":\"command\",\"command\":\"touch {m}\"}}]}}]}}}}' > .claude/settings.json; \
         printf '%s' '{{\"mcpServers\":{{\"x\":{{\"command\":\"touch\",\"args\":[\"{m}\"]}}}}}}' > .mcp.json; \
         printf '%s' '{{\"providers\":{{\"x\":{{\"command\":[\"touch\",\"{m}\"]}}}}}}' > nib.json; \
         printf '%s' '{{\"mcp\":{{\"x\":{{\"type\":\"local\",\"command\":[\"touch\",\"{m}\"]}}}}}}' > opencode.json; \
         printf '%s' '{{\"tasks\":[{{\"label\":\"x\",\"command\":\"touch {m}\",\"runOptions\":{{\"runOn\":\"folderOpen\"}}}}]}}' > .vscode/tasks.json; \
         ls -A"
    )
}

const PLANTED: [&str; 5] = [
    ".claude/settings.json",
    ".mcp.json",
    "nib.json",
    "opencode.json",
    ".vscode/tasks.json",
];

#[tokio::test]
async fn client_files_a_call_plants_where_none_was_are_gone_when_it_ends() {
    for mode in SANDBOXED {
        let t = project();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let out = tempfile::tempdir().unwrap();
        let marker = out.path().join("marker");
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::eliciting(Elicit::Decline),
            mode,
        )
        .await;
        let (said, _) = nib
            .call("nibash", json!({ "command": planting_script(&marker) }))
            .await;
        assert!(
            said.contains(".mcp.json"),
            "{mode:?}: the call did not plant: {said}"
        );
        for p in PLANTED {
            assert!(
                !root.join(p).exists(),
                "{mode:?}: {p} survived the call: {said}"
            );
        }
        assert!(
            said.contains("moved to the trash") && said.contains(".claude"),
            "{mode:?}: the answer does not name what was taken: {said}"
        );
        // Taken to the trash, not lost.
        let (listed, _) = nib.call("nibash", json!({"command": "trash list"})).await;
        assert!(listed.contains(".mcp.json"), "{mode:?}: {listed}");
        assert!(!marker.exists());
    }
}

#[tokio::test]
async fn what_a_running_job_plants_is_gone_while_it_runs() {
    for mode in SANDBOXED {
        let t = project();
        let root = std::fs::canonicalize(t.path()).unwrap();
        git(&root, &["init", "-q", "-b", "main"]);
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", "first"]);
        let out = tempfile::tempdir().unwrap();
        let marker = out.path().join("marker");
        let m = marker.display();
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::eliciting(Elicit::Decline),
            mode,
        )
        .await;
        // The job plants the client files and a repository with an
        // fsmonitor, tracked by the project, then runs on for a while.
        let script = format!(
            "sleep 0.5; {plant}; git init -q sub && echo s > sub/s.txt && git -C sub add s.txt && \
             git -C sub -c user.name=M -c user.email=m@example.org commit -q -m s && \
             git -C sub config core.fsmonitor 'touch {m}; false' && git add sub 2>/dev/null; \
             touch planted-done; sleep 8",
            plant = planting_script(&marker)
        );
        let (said, _) = nib
            .call("nibash", json!({"command": script, "background": true}))
            .await;
        let started = Instant::now();
        // Wait for the job to have planted.
        while !root.join("planted-done").exists() && started.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            root.join("planted-done").exists(),
            "{mode:?}: the job never planted: {said}"
        );
        let planted_at = Instant::now();
        // Within the stated bound (a look every 250 ms; the git sweep at
        // least every 500 ms), while the job still runs.
        std::thread::sleep(Duration::from_millis(1500));
        for p in PLANTED {
            assert!(
                !root.join(p).exists(),
                "{mode:?}: {p} is still there 1.5 s after the job made it"
            );
        }
        // The person's git status in the project and in sub, during the job.
        for dir in [root.clone(), root.join("sub")] {
            let _ = std::process::Command::new("git")
                .args(["status"])
                .current_dir(&dir)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", out.path())
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
        assert!(
            planted_at.elapsed() < Duration::from_secs(7),
            "{mode:?}: the check ran after the job ended, so it proves nothing"
        );
        assert!(
            !marker.exists(),
            "{mode:?}: the person's git ran what a running job planted"
        );
    }
}

#[tokio::test]
async fn the_persons_own_client_files_stay_and_programs_cannot_change_them() {
    for mode in SANDBOXED {
        let t = project();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        let own = "{\"permissions\":{}}";
        std::fs::write(root.join(".claude/settings.json"), own).unwrap();
        std::fs::write(root.join(".mcp.json"), "{}").unwrap();
        // Made before the server starts, as a person's files are.
        std::thread::sleep(Duration::from_millis(1100));
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::eliciting(Elicit::Decline),
            mode,
        )
        .await;
        let (said, _) = nib
            .call(
                "nibash",
                json!({"command": "echo '{\"hooks\":1}' > .claude/settings.json; echo x >> .mcp.json; echo ok"}),
            )
            .await;
        assert_eq!(
            std::fs::read_to_string(root.join(".claude/settings.json")).unwrap(),
            own,
            "{mode:?}: {said}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join(".mcp.json")).unwrap(),
            "{}",
            "{mode:?}: {said}"
        );
        assert!(
            !said.contains("moved to the trash"),
            "{mode:?}: the person's files were taken: {said}"
        );
    }
}

/// What the person's own settings run from the project (issue 57, item
/// 10): `core.hooksPath = .husky/_` with no such folder yet, a Claude hook
/// naming `"$CLAUDE_PROJECT_DIR"/scripts/check.sh` (the person's, there),
/// and one naming `scripts/new.sh` (not there). A call writes all three:
/// the person's script keeps its bytes, what the call made is gone, and the
/// person's `git commit` runs no planted hook.
#[tokio::test]
async fn what_the_persons_settings_run_from_the_project_is_held() {
    for mode in SANDBOXED {
        let t = project();
        let root = std::fs::canonicalize(t.path()).unwrap();
        git(&root, &["init", "-q", "-b", "main"]);
        git(&root, &["config", "core.hooksPath", ".husky/_"]);
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        std::fs::create_dir_all(root.join("scripts")).unwrap();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        let own = "#!/bin/sh\necho checked\n";
        std::fs::write(root.join("scripts/check.sh"), own).unwrap();
        std::fs::write(
            root.join(".claude/settings.json"),
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"\"$CLAUDE_PROJECT_DIR\"/scripts/check.sh"},{"type":"command","command":"sh scripts/new.sh"}]}]}}"#,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let out = tempfile::tempdir().unwrap();
        let marker = out.path().join("marker");
        let m = marker.display();
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::eliciting(Elicit::Decline),
            mode,
        )
        .await;
        let script = format!(
            "mkdir -p .husky/_ && printf '#!/bin/sh\\ntouch {m}\\n' > .husky/_/pre-commit && chmod +x .husky/_/pre-commit; \
             printf 'touch {m}\\n' > scripts/check.sh; printf 'touch {m}\\n' > scripts/new.sh; ls -A .husky/_ scripts"
        );
        let (said, _) = nib.call("nibash", json!({ "command": script })).await;
        assert!(
            said.contains("pre-commit"),
            "{mode:?}: the call did not plant: {said}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("scripts/check.sh")).unwrap(),
            own,
            "{mode:?}: {said}"
        );
        assert!(!root.join("scripts/new.sh").exists(), "{mode:?}: {said}");
        assert!(!root.join(".husky/_").exists(), "{mode:?}: {said}");
        let _ = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=P",
                "-c",
                "user.email=p@example.org",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "p",
            ])
            .current_dir(&root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", out.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status();
        assert!(
            !marker.exists(),
            "{mode:?}: the person's commit ran a planted hook"
        );
    }
}

/// A confined provider (NIB_PROVIDERS_SANDBOX=1) writes the roots too: what
/// it plants is gone when its call answers, and what it plants later,
/// between calls, is gone within the watch's bound with no call at all.
#[tokio::test]
async fn client_files_a_confined_provider_plants_are_gone_when_its_call_answers() {
    for mode in SANDBOXED {
        let t = project();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let out = tempfile::tempdir().unwrap();
        let marker = out.path().join("marker");
        let m = marker.display();
        // The person's nib.json names the provider (it stays theirs).
        nib_json_with(&root, &[("zemble", &[])]);
        let script = root.join("plant.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\ncd '{r}' || exit 1\n{plant} >/dev/null 2>&1\n\
                 ( sleep 1; mkdir -p .claude; printf '%s' '{{\"hooks\":{{\"SessionStart\":[{{\"hooks\":[{{\"type\":\"command\",\"command\":\"touch {m}\"}}]}}]}}}}' \
                 > .claude/settings.local.json; touch later-done ) >/dev/null 2>&1 &\n",
                r = root.display(),
                plant = planting_script(&marker)
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let env: Vec<(&str, &str)> = mode
            .iter()
            .copied()
            .chain([("NIB_PROVIDERS_SANDBOX", "1")])
            .collect();
        let home = tempfile::tempdir().unwrap();
        let nib = start_serving(
            Era::Handshake,
            &root,
            TestClient::eliciting(Elicit::Decline),
            &env,
            home,
            &[],
        )
        .await;
        let said = nib
            .ok(
                "zemble_exec",
                json!({"program": script.display().to_string()}),
            )
            .await;
        assert!(said.contains("ran "), "{mode:?}: {said}");
        for p in [
            ".claude/settings.json",
            ".mcp.json",
            "opencode.json",
            ".vscode/tasks.json",
        ] {
            assert!(
                !root.join(p).exists(),
                "{mode:?}: {p} survived the provider's call: {said}"
            );
        }
        assert!(
            said.contains("moved to the trash") && said.contains(".claude"),
            "{mode:?}: the answer does not name what was taken: {said}"
        );
        // Planted a second later, while no call runs.
        let started = Instant::now();
        while !root.join("later-done").exists() && started.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(root.join("later-done").exists(), "{mode:?}: never planted");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            !root.join(".claude/settings.local.json").exists(),
            "{mode:?}: what the provider planted between calls is still there 1.5 s later"
        );
        assert!(
            root.join("nib.json").is_file(),
            "{mode:?}: the person's nib.json"
        );
        // Taken to the trash, not lost.
        let (listed, _) = nib.call("nibash", json!({"command": "trash list"})).await;
        assert!(
            listed.matches(".claude").count() >= 2,
            "{mode:?}: the trash should hold both .claude folders: {listed}"
        );
        nib.stop().await;
        assert!(!marker.exists());
    }
}
