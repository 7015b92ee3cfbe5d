//! Command rules (nib.json) against bypass attempts: a canary program that
//! leaves a file when it runs is forbidden, and every attempt must leave no
//! file. The static check refuses before anything runs; with it switched
//! off (a test-only failpoint), the runtime layers must hold on their own —
//! the interpreter by name everywhere, the masked binary under bubblewrap.

use std::path::Path;

use serde_json::json;

use crate::common::*;

struct World {
    dir: tempfile::TempDir,
    path_env: String,
}

fn world() -> World {
    let dir = project();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("forbidden-tool");
    std::fs::write(
        &tool,
        format!("#!/bin/sh\ntouch '{}/canary'\n", dir.path().display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.path().join("nib.json"),
        r#"{"rules": [{"program": "forbidden-tool", "why": "use the tool's MCP server"},
                      {"program": "zenit-dev", "args": "^(build|test)( |$)", "why": "use zd_build"}]}"#,
    )
    .unwrap();
    let path_env = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    World { dir, path_env }
}

async fn start_in(w: &World, extra: &[(&str, &str)]) -> Nib {
    let mut env: Vec<(&str, &str)> = vec![("PATH", w.path_env.as_str())];
    env.extend_from_slice(extra);
    start_with(
        Era::Handshake,
        w.dir.path(),
        TestClient::new(Roots::Undeclared),
        &env,
    )
    .await
}

fn canary(dir: &Path) -> bool {
    dir.join("canary").exists()
}

/// Attempts the static check must refuse, in every mode.
const STATIC: &[&str] = &[
    "forbidden-tool",
    "'forbidden-tool'",
    "\"forbidden-tool\"",
    "forbid\\den-tool",
    "forbidden-to''ol",
    "./bin/forbidden-tool",
    "$PWD/bin/forbidden-tool",
    "x=forbidden-tool; $x",
    "x=forbidden; ${x}-tool",
    "$(echo forbidden-tool)",
    "`echo forbidden-tool`",
    "echo $(forbidden-tool)",
    "echo \"`forbidden-tool`\"",
    "cat <(forbidden-tool)",
    "echo ${v:-$(forbidden-tool)}",
    "echo $(( $(forbidden-tool) + 1 ))",
    "eval forbidden-tool",
    "c=forbidden-tool; eval \"$c\"",
    "bash -c forbidden-tool",
    "sh -c 'sh -c forbidden-tool'",
    "bash <<< forbidden-tool",
    "sh <<'EOF'\nforbidden-tool\nEOF",
    "echo forbidden-tool | sh",
    "env forbidden-tool",
    "env -i A=1 forbidden-tool",
    "env -S 'forbidden-tool x'",
    "echo x | xargs forbidden-tool",
    "find . -maxdepth 0 -exec forbidden-tool \\;",
    "timeout 5 forbidden-tool",
    "nice -n 5 forbidden-tool",
    "nohup forbidden-tool",
    "setsid forbidden-tool",
    "stdbuf -o0 forbidden-tool",
    "command forbidden-tool",
    "builtin forbidden-tool",
    "exec forbidden-tool",
    "time forbidden-tool",
    "sudo forbidden-tool",
    "doas forbidden-tool",
    "watch -n 1 forbidden-tool",
    "flock /tmp/nib-lock forbidden-tool",
    "flock /tmp/nib-lock -c forbidden-tool",
    "chroot / forbidden-tool",
    "f() { forbidden-tool; }; f",
    "shopt -s expand_aliases; alias t=forbidden-tool; t",
    "trap forbidden-tool EXIT",
    "PATH=./bin:$PATH forbidden-tool",
    "hash -p ./bin/forbidden-tool ls; ls",
    "zenit-dev build",
    "zenit-dev $(echo build)",
    "if true; then (forbidden-tool); fi",
    "echo 'unclosed",
];

/// Commands the rules must not block.
const ALLOWED: &[&str] = &[
    "git --version >/dev/null && echo ok",
    "git status 2>&1 | head -1",
    "echo forbidden-tool",
    "grep -c forbidden-tool nib.json",
    "zenit-dev status 2>/dev/null; echo ok",
    "ls bin | cat",
];

#[tokio::test]
async fn forbidden_programs_never_run_however_the_line_hides_them() {
    for mode in [&[][..], &[("NIB_SANDBOX", "1")][..]] {
        let w = world();
        let nib = start_in(&w, mode).await;
        for cmd in STATIC {
            let (text, is_error) = nib.call("nibash", json!({ "command": cmd })).await;
            assert!(
                is_error && text.contains("refused") && text.contains("[exit 126]"),
                "{mode:?} {cmd:?} was not refused:\n{text}"
            );
            assert!(!canary(w.dir.path()), "{mode:?} {cmd:?} ran the canary");
        }
        for cmd in ALLOWED {
            let (text, is_error) = nib.call("nibash", json!({ "command": cmd })).await;
            assert!(
                !is_error && !text.contains("refused"),
                "{mode:?} {cmd:?}:\n{text}"
            );
        }
        let why = nib
            .err("nibash", json!({"command": "forbidden-tool"}))
            .await;
        assert!(
            why.contains("rule 1") && why.contains("use the tool's MCP server"),
            "{why}"
        );
        let status = nib.ok("nibash_status", json!({})).await;
        assert!(
            status.contains("command rules:") && status.contains("nib.json"),
            "{status}"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn with_the_static_check_off_the_interpreter_still_refuses_by_name() {
    for mode in [&[][..], &[("NIB_SANDBOX", "1")][..]] {
        let w = world();
        let mut env = mode.to_vec();
        env.push(("NIB_FAILPOINT", "rules-static-off"));
        let nib = start_in(&w, &env).await;
        for cmd in [
            "forbidden-tool",
            "x=forbidden; ${x}-tool",
            "c=forbidden-tool; eval \"$c\"",
            "f() { forbidden-tool; }; f",
            "command forbidden-tool",
            "zenit-dev build",
        ] {
            let out = nib.call("nibash", json!({ "command": cmd })).await.0;
            assert!(
                out.contains("refused") && out.contains("126"),
                "{mode:?} {cmd:?}:\n{out}"
            );
            assert!(!canary(w.dir.path()), "{mode:?} {cmd:?} ran the canary");
        }
        let out = nib
            .call("nibash", json!({"command": "forbidden-tool; touch after"}))
            .await
            .0;
        assert!(out.contains("[exit 126]"), "{out}");
        assert!(
            !w.dir.path().join("after").exists(),
            "the call went on after a refusal"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn under_bubblewrap_paths_copies_symlinks_and_other_programs_get_nothing_to_run() {
    if !nib_sandbox::bwrap_usable() {
        eprintln!("bubblewrap is not usable here: the masked-binary layer is not tested");
        return;
    }
    let w = world();
    let nib = start_in(
        &w,
        &[("NIB_SANDBOX", "1"), ("NIB_FAILPOINT", "rules-static-off")],
    )
    .await;
    for cmd in [
        "./bin/forbidden-tool",
        "$PWD/bin/forbidden-tool",
        "cp bin/forbidden-tool renamed && chmod +x renamed && ./renamed",
        "ln -s \"$PWD/bin/forbidden-tool\" link && ./link",
        "awk 'BEGIN { system(\"forbidden-tool\") }'",
        "sh -c 'exec ./bin/forbidden-tool'",
    ] {
        let _ = nib.call("nibash", json!({ "command": cmd })).await;
        assert!(!canary(w.dir.path()), "{cmd:?} ran the canary");
    }
    nib.stop().await;
}
