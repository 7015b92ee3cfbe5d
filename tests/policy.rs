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

/// The three modes every exec-time guarantee must hold in.
const MODES: [&[(&str, &str)]; 3] = [
    &[],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
    &[("NIB_SANDBOX", "1")],
];

/// A project with the canary program, a Makefile, scripts, a copy and a
/// git repository, for the runtime layers.
fn exec_world() -> World {
    let w = world();
    let d = w.dir.path();
    use std::os::unix::fs::PermissionsExt;
    let exe = |p: &Path, text: &str| {
        std::fs::write(p, text).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    std::fs::write(
        d.join("Makefile"),
        "all:\n\tforbidden-tool\nok:\n\t@echo made-ok\n",
    )
    .unwrap();
    std::fs::write(d.join("script.sh"), "forbidden-tool\n").unwrap();
    std::fs::write(d.join("env.sh"), "forbidden-tool\n").unwrap();
    std::fs::create_dir(d.join("other")).unwrap();
    exe(&d.join("other/ls"), "#!/bin/sh\nforbidden-tool\n");
    // A copy made before the call, under another name, outside PATH.
    std::fs::copy(d.join("bin/forbidden-tool"), d.join("copied")).unwrap();
    std::fs::set_permissions(d.join("copied"), std::fs::Permissions::from_mode(0o755)).unwrap();
    exe(
        &d.join("bin/zenit-dev"),
        &format!("#!/bin/sh\ntouch '{}/zenit-$1'\n", d.display()),
    );
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(d)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(d.join("tracked.txt"), "one\n").unwrap();
    git(&["add", "Makefile", "tracked.txt"]);
    git(&[
        "-c",
        "user.email=t@t",
        "-c",
        "user.name=t",
        "commit",
        "-qm",
        "one",
    ]);
    w
}

/// Every way the issue found to start a forbidden program without naming it
/// to nibash. The static check is off (a test-only failpoint): the
/// interpreter and the exec-time layer must hold on their own.
const AT_EXEC: &[&str] = &[
    "python3 -c 'import os; os.system(\"forbidden-tool\")'",
    "perl -e 'exec \"forbidden-tool\"'",
    "make -s all",
    "awk 'BEGIN { system(\"forbidden-tool\") }'",
    "echo forbidden-tool | sed e",
    "tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec=forbidden-tool nib.json",
    "rg --pre forbidden-tool rules nib.json",
    "echo x | xargs sh -c forbidden-tool",
    "sh script.sh",
    "BASH_ENV=env.sh bash -c true",
    "git -c alias.t='!forbidden-tool' t",
    "git -c core.fsmonitor=forbidden-tool status",
    "git -c core.sshCommand=forbidden-tool ls-remote ssh://nib.invalid/x",
    "echo changed >> tracked.txt; git -c diff.external=forbidden-tool diff",
    "ln -s \"$PWD/bin/forbidden-tool\" link && ./link",
    "ln bin/forbidden-tool hard && ./hard",
    "PATH=./other:$PATH ls",
    "./copied",
    "cp bin/forbidden-tool renamed && chmod +x renamed && ./renamed",
    "python3 -c 'import os; os.execv(\"./copied\", [\"x\"])'",
    "python3 -c 'import os; fd = os.open(\"./copied\", os.O_RDONLY); os.execve(fd, [\"x\"], {})'",
    "python3 -c 'import subprocess; subprocess.run([\"zenit-dev\", \"build\"])'",
];

#[tokio::test]
async fn forbidden_programs_are_refused_at_exec_in_every_mode() {
    for mode in MODES {
        if mode.len() == 1 && !nib_sandbox::bwrap_usable() {
            eprintln!("bubblewrap is not usable here: the bubblewrap mode is not tested");
            continue;
        }
        let w = exec_world();
        let mut env = mode.to_vec();
        env.push(("NIB_FAILPOINT", "rules-static-off"));
        let nib = start_in(&w, &env).await;
        for cmd in AT_EXEC {
            let program = cmd.split_whitespace().next().unwrap_or_default();
            if program.contains('=') || program.starts_with("./") || program == "echo" {
                // a shell line: nothing to look for
            } else if which(program).is_none() {
                eprintln!("{program} is not installed: {cmd:?} is not tried");
                continue;
            }
            let (text, _) = nib.call("nibash", json!({ "command": cmd })).await;
            let d = w.dir.path();
            assert!(
                !canary(d) && !d.join("zenit-build").exists(),
                "{mode:?} {cmd:?} ran the forbidden program:\n{text}"
            );
            // Under bubblewrap a masked program may fail before any exec
            // (a shell or git finds `/dev/null` there and gives up itself).
            let masked_first = mode.len() == 1;
            assert!(
                masked_first
                    || (text.contains("[exec refused: ") && text.contains("nib.json, rule ")),
                "{mode:?} {cmd:?}: no closing line names the rule:\n{text}"
            );
        }
        // The closing line names the rule, its why and the program that tried.
        let text = nib
            .ok(
                "nibash",
                json!({"command": "python3 -c 'import os; print(\"status\", os.system(\"./copied\"))'; echo went-on"}),
            )
            .await;
        let last = text.lines().last().unwrap_or_default();
        assert!(
            text.contains("went-on")
                && last.starts_with("[exec refused: sh tried to run ./copied; ")
                && last.contains("rule 1 (program forbidden-tool): use the tool's MCP server"),
            "{mode:?}:\n{text}"
        );
        // A job names the execs refused after its call answered.
        let started = nib
            .ok(
                "nibash",
                json!({"command": "sleep 0.3; ./copied; echo job-went-on", "background": true}),
            )
            .await;
        let id: String = started
            .split("job %")
            .nth(1)
            .unwrap_or_default()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let waited = nib
            .ok("nibash", json!({"command": format!("wait %{id}")}))
            .await;
        assert!(
            waited.contains("job-went-on")
                && waited.contains("[exec refused: nibash tried to run ./copied; "),
            "{mode:?}:\n{started}\n{waited}"
        );
        assert!(!canary(w.dir.path()), "{mode:?}: the job ran the copy");
        // Allowed programs still run, started by the same programs.
        for (cmd, want) in [
            ("git status --short | head -3; echo git-ok", "git-ok"),
            ("make -s ok", "made-ok"),
            (
                "python3 -c 'import subprocess; subprocess.run([\"zenit-dev\", \"status\"])' && ls zenit-status",
                "zenit-status",
            ),
        ] {
            let text = nib.ok("nibash", json!({ "command": cmd })).await;
            assert!(
                text.contains(want) && !text.contains("exec refused"),
                "{mode:?} {cmd:?}:\n{text}"
            );
        }
        nib.stop().await;
    }
}

#[tokio::test]
async fn programs_get_only_fds_0_to_2_and_cannot_reach_the_channel() {
    for mode in MODES {
        if mode.len() == 1 && !nib_sandbox::bwrap_usable() {
            continue;
        }
        let w = world();
        let nib = start_in(&w, mode).await;
        // With and without program rules (the exec filter's listener must
        // not leak either).
        for rules in [true, false] {
            if !rules {
                std::fs::remove_file(w.dir.path().join("nib.json")).unwrap();
            }
            let text = nib
                .ok(
                    "nibash",
                    json!({"command": "python3 -c 'import os\nextra = []\nfor fd in range(3, 1024):\n    try:\n        os.fstat(fd)\n        extra.append(fd)\n    except OSError:\n        pass\nprint(\"extra fds:\", extra)' | cat; sh -c 'echo forged >&3' 2>&1 | cat; echo still-running"}),
                )
                .await;
            assert!(
                text.contains("extra fds: []") && text.contains("still-running"),
                "{mode:?} rules {rules}:\n{text}"
            );
        }
        nib.stop().await;
    }
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}
