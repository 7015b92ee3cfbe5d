//! The red team's findings (issue 45), each as a canary: an attacker that
//! controls the model works under `NIB_SANDBOX=1` (bubblewrap, and
//! Landlock + seccomp alone) through the MCP tools and nibash, then the
//! person runs their own `git` and nib's CLI (`nib undo`, `--diff`, the
//! hook) from an environment without the sandbox, as the Claude Code mod
//! does. What must hold: no marker from the person's git, files outside
//! the roots and files that make code run keep their bytes, the person's
//! commands end in bounded time and memory, and everything a program can
//! make nib keep or print stays under its cap.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;

const MODES: [&[(&str, &str)]; 2] = [
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

/// A project that is a git repository with one commit, canonical.
fn repository() -> (tempfile::TempDir, PathBuf) {
    let t = project();
    let root = std::fs::canonicalize(t.path()).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "first"]);
    (t, root)
}

/// The person's own git, as they would run it in a terminal (no sandbox,
/// their configuration); its success does not matter, only what it ran.
fn person_git(dir: &Path, args: &[&str]) {
    let _ = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// `nib ARGS` run by the person (the mod, a terminal): no `NIB_SANDBOX`,
/// the server's state folder; ended after 20 s. Returns stdout, stderr,
/// the exit code, and whether it ended by itself in time.
fn person_nib(
    dir: &Path,
    home: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> (String, String, i32, bool) {
    let mut cmd = Command::new(nib_bin());
    cmd.args(args)
        .current_dir(dir)
        .env_remove("NIB_DIRECTORY")
        .env_remove("NIB_SANDBOX")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in isolated_env(home) {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn nib");
    if let Some(input) = stdin {
        let _ = child.stdin.as_mut().unwrap().write_all(input.as_bytes());
    }
    drop(child.stdin.take());
    let until = Instant::now() + Duration::from_secs(20);
    let mut in_time = true;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            in_time = false;
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
        in_time,
    )
}

async fn sh(nib: &Nib, command: &str) -> String {
    nib.call("nibash", json!({ "command": command })).await.0
}

/// Writes `content` to `rel` through the write tool (reading it first for
/// its tag when it exists); returns the answer.
async fn write(nib: &Nib, rel: &str, content: &str) -> String {
    let mut args = json!({"path": rel, "content": content});
    if nib.path(rel).exists() {
        let read = nib.ok("read", json!({"path": rel})).await;
        args["tag"] = json!(Nib::tag_in(&read));
    }
    nib.ok("write", args).await
}

/// A folder outside every root, for markers and canaries.
fn outside() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = std::fs::canonicalize(t.path()).unwrap();
    (t, p)
}

/// nib in `root` under `mode`, declining every approval it asks for.
async fn declining(root: &Path, mode: &[(&str, &str)]) -> Nib {
    start_with(
        Era::Handshake,
        root,
        TestClient::eliciting(Elicit::Decline),
        mode,
    )
    .await
}

/// The person's own `git status` and `git checkout` in `dir` ran nothing
/// the model wrote: the marker it would leave is absent.
fn persons_git_runs_nothing(dir: &Path, marker: &Path, mode: &[(&str, &str)]) {
    person_git(dir, &["status"]);
    person_git(dir, &["checkout", "-q", "-b", "person"]);
    assert!(
        !marker.exists(),
        "{mode:?}: the person's git ran the model's command"
    );
}

#[tokio::test]
async fn undo_writes_nothing_that_makes_code_run_and_nothing_outside_the_roots() {
    for mode in MODES {
        let (_t, root) = repository();
        let (_o, out) = outside();
        let marker = out.join("marker");
        let git_config = std::fs::read_to_string(root.join(".git/config")).unwrap();
        let nib = declining(&root, mode).await;
        let home = nib.home.path().to_path_buf();

        // 1. cfg/config: the git config plus fsmonitor, then its exact bytes;
        // cfg becomes a link to .git.
        let evil = git_config.replace(
            "[core]\n",
            &format!("[core]\n\tfsmonitor = touch {}\n", marker.display()),
        );
        write(&nib, "cfg/config", &evil).await;
        write(&nib, "cfg/config", &git_config).await;
        // 2. a.txt: written by nib with the canary's bytes, then a link to
        // the canary outside; d/new.txt removed by nib, then d a link out.
        std::fs::write(out.join("bashrc"), "the person's own\n").unwrap();
        write(&nib, "a.txt", "the person's own\n").await;
        write(&nib, "d/new.txt", "n\n").await;
        let read = nib.ok("read", json!({"path": "d/new.txt"})).await;
        let rem = format!("[d/new.txt#{}]\nREM\n", Nib::tag_in(&read));
        nib.ok("edit", json!({"input": rem})).await;
        // A REM undone through h -> .git/hooks.
        write(
            &nib,
            "h/post-checkout",
            &format!("#!/bin/sh\ntouch {}\n", marker.display()),
        )
        .await;
        let read = nib.ok("read", json!({"path": "h/post-checkout"})).await;
        let rem = format!("[h/post-checkout#{}]\nREM\n", Nib::tag_in(&read));
        nib.ok("edit", json!({"input": rem})).await;
        // And one through m -> . (.mcp.json).
        write(&nib, "m/.mcp.json", "{\"mcpServers\":{}}\n").await;
        let read = nib.ok("read", json!({"path": "m/.mcp.json"})).await;
        let rem = format!("[m/.mcp.json#{}]\nREM\n", Nib::tag_in(&read));
        nib.ok("edit", json!({"input": rem})).await;
        let swapped = sh(
            &nib,
            &format!(
                "rm -r cfg && ln -s .git cfg && rm a.txt && ln -s {o}/bashrc a.txt && rmdir d && ln -s {o} d \
                 && rmdir h && ln -s .git/hooks h && rmdir m && ln -s . m && ls -l cfg a.txt d h m",
                o = out.display()
            ),
        )
        .await;
        assert!(swapped.contains("cfg -> .git"), "{swapped}");

        // The person undoes every change, from an environment without the
        // sandbox (as the mod runs it); each change is newest first.
        for _ in 0..10 {
            person_nib(&root, &home, &["undo"], None);
        }
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            git_config,
            "{mode:?}"
        );
        assert!(!root.join(".git/hooks/post-checkout").exists(), "{mode:?}");
        assert!(!root.join(".mcp.json").exists(), "{mode:?}");
        assert_eq!(
            std::fs::read_to_string(out.join("bashrc")).unwrap(),
            "the person's own\n",
            "{mode:?}"
        );
        assert!(!out.join("new.txt").exists(), "{mode:?}");
        persons_git_runs_nothing(&root, &marker, mode);
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_trash_restore_never_lands_in_a_git_dir_through_a_linked_folder() {
    for mode in MODES {
        let (_t, root) = repository();
        let (_o, out) = outside();
        let marker = out.join("marker");
        let git_config = std::fs::read_to_string(root.join(".git/config")).unwrap();
        std::fs::create_dir_all(root.join("h")).unwrap();
        std::fs::create_dir_all(root.join("c")).unwrap();
        std::fs::write(
            root.join("h/post-checkout"),
            format!("#!/bin/sh\ntouch {}\n", marker.display()),
        )
        .unwrap();
        Command::new("chmod")
            .args(["755", "h/post-checkout"])
            .current_dir(&root)
            .status()
            .unwrap();
        std::fs::write(
            root.join("c/config"),
            format!("[core]\n\tfsmonitor = touch {}\n", marker.display()),
        )
        .unwrap();
        let nib = declining(&root, mode).await;
        let done = sh(
            &nib,
            "rm h/post-checkout c/config && rmdir h c && ln -s .git/hooks h && ln -s .git c && echo swapped",
        )
        .await;
        assert!(done.contains("swapped"), "{done}");
        let restored = sh(
            &nib,
            "trash restore -f h/post-checkout; trash restore -f c/config; true",
        )
        .await;
        let (status, _) = nib
            .call("nibash_control", json!({"restore": "h/post-checkout"}))
            .await;
        let (status2, _) = nib
            .call("nibash_control", json!({"restore": "c/config"}))
            .await;
        assert!(
            !root.join(".git/hooks/post-checkout").exists(),
            "{mode:?}: {restored}\n{status}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            git_config,
            "{mode:?}: {restored}\n{status2}"
        );
        // A repository made and removed in one call is never brought back.
        let made = sh(
            &nib,
            &format!(
                "git init -q r && git -C r config core.fsmonitor 'touch {m}' && rm -r r && trash restore r; true",
                m = marker.display()
            ),
        )
        .await;
        let (status, _) = nib.call("nibash_control", json!({"restore": "r"})).await;
        assert!(!root.join("r").exists(), "{mode:?}: {made}\n{status}");
        persons_git_runs_nothing(&root, &marker, mode);
        nib.stop().await;
    }
}

#[tokio::test]
async fn the_git_folder_cannot_be_swapped_and_a_new_repository_carries_no_commands() {
    for mode in MODES {
        let (_t, root) = repository();
        let (_o, out) = outside();
        let marker = out.join("marker");
        let git_config = std::fs::read_to_string(root.join(".git/config")).unwrap();
        // A repository without a hooks folder: nothing to bind read-only.
        std::fs::remove_dir_all(root.join(".git/hooks")).unwrap();
        let nib = declining(&root, mode).await;
        let hooked = sh(
            &nib,
            &format!(
                "mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch {m}\\n' > .git/hooks/post-checkout \
                 && chmod +x .git/hooks/post-checkout; echo hooked",
                m = marker.display()
            ),
        )
        .await;
        person_git(&root, &["checkout", "-q", "-b", "hooked"]);
        assert!(
            !marker.exists(),
            "{mode:?}: a hook made in a missing hooks folder ran: {hooked}"
        );
        // 4. The git folder renamed aside and replaced by a copy.
        let swap = sh(
            &nib,
            &format!(
                "cp -a .git .gitx && git config -f .gitx/config core.fsmonitor 'touch {m}' \
                 && mv .git .git-old && mv .gitx .git; echo status $?",
                m = marker.display()
            ),
        )
        .await;
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            git_config,
            "{mode:?}: {swap}"
        );
        assert!(!root.join(".git-old").exists(), "{mode:?}: {swap}");
        // 5. A new repository, committed and added, with fsmonitor and a hook.
        let made = sh(
            &nib,
            &format!(
                "git init -q sub && cd sub && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x \
                 && git config core.fsmonitor 'touch {m}' && git config alias.st '!touch {m}' \
                 && printf '#!/bin/sh\\ntouch {m}\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout \
                 && cd .. && git add sub && echo made",
                m = marker.display()
            ),
        )
        .await;
        assert!(made.contains("made"), "{mode:?}: {made}");
        // A submodule-style git dir made inside the root's own .git.
        let sub = sh(
            &nib,
            &format!(
                "mkdir -p .git/modules && git init -q --separate-git-dir .git/modules/m m && cd m \
                 && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x \
                 && git config core.fsmonitor 'touch {m}' && cd .. && git add m && echo sub",
                m = marker.display()
            ),
        )
        .await;
        assert!(
            sub.contains("sub") && sub.contains("modules/m"),
            "{mode:?}: the answer names what was taken out: {sub}"
        );
        assert!(
            made.contains("[git: ")
                && made.contains("core.fsmonitor")
                && made.contains("post-checkout"),
            "{mode:?}: the answer names what was taken out: {made}"
        );
        person_git(&root, &["status"]);
        person_git(&root.join("sub"), &["status"]);
        person_git(&root.join("sub"), &["st"]);
        person_git(&root.join("sub"), &["checkout", "-q", "-b", "other"]);
        assert!(
            !marker.exists(),
            "{mode:?}: the person's git ran the model's command"
        );
        // What was taken out is in the trash for the person.
        let trashed = std::fs::read_dir(nib.trash_files()).unwrap().count();
        assert!(trashed >= 2, "{mode:?}");
        // A repository still works for programs: a commit in the root.
        let commit = sh(
            &nib,
            "git -c user.name=a -c user.email=a@b commit -q --allow-empty -m y && echo committed",
        )
        .await;
        assert!(commit.contains("committed"), "{mode:?}: {commit}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_credential_file_made_between_two_calls_stays_unread() {
    for mode in MODES {
        let dir = project();
        let home = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(home.path()).unwrap();
        std::fs::create_dir_all(h.join(".cargo/bin")).unwrap();
        let hide = h.join("secret-later.txt");
        let mut env = mode.to_vec();
        let (h_s, hide_s) = (h.display().to_string(), hide.display().to_string());
        env.push(("HOME", &h_s));
        env.push(("NIB_SANDBOX_HIDE", &hide_s));
        let nib = start_with(
            Era::Handshake,
            dir.path(),
            TestClient::new(Roots::Undeclared),
            &env,
        )
        .await;
        // Calls that leave a warm worker ready, made before the file exists.
        for _ in 0..2 {
            sh(&nib, "true").await;
        }
        std::thread::sleep(Duration::from_millis(1500));
        std::fs::write(
            h.join(".cargo/credentials.toml"),
            "token = \"CANARY-CARGO\"\n",
        )
        .unwrap();
        let out = sh(
            &nib,
            &format!("cat {h_s}/.cargo/credentials.toml; cat ~/.cargo/credentials.toml; ls -la {h_s}/.cargo; true"),
        )
        .await;
        assert!(!out.contains("CANARY-CARGO"), "{mode:?}: {out}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn the_persons_diff_and_hook_end_in_time_on_a_fifo_or_a_device() {
    for mode in MODES {
        let (_t, root) = repository();
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::new(Roots::Undeclared),
            mode,
        )
        .await;
        let home = nib.home.path().to_path_buf();
        write(&nib, "a.txt", "b\n").await;
        let (diff, _, code, in_time) = person_nib(&root, &home, &["undo", "--diff"], None);
        assert!(
            in_time && code == 0 && diff.contains("+b"),
            "{mode:?}: {diff}"
        );
        let hook_event = json!({
            "hook_event_name": "PostToolUse",
            "tool_name": "mcp__nib__write",
            "cwd": root,
            "session_id": "s",
        })
        .to_string();
        for swap in [
            "rm a.txt && mkfifo a.txt && echo swapped",
            "rm a.txt && ln -s /dev/zero a.txt && echo swapped",
        ] {
            let done = sh(&nib, swap).await;
            assert!(done.contains("swapped"), "{mode:?}: {done}");
            let (_, err, _, in_time) = person_nib(&root, &home, &["undo", "--diff"], None);
            assert!(in_time, "{mode:?} {swap}: nib undo --diff hung: {err}");
            let (_, err, _, in_time) = person_nib(&root, &home, &["hook"], Some(&hook_event));
            assert!(in_time, "{mode:?} {swap}: nib hook hung: {err}");
            let (out, _, _, in_time) = person_nib(&root, &home, &["undo"], None);
            assert!(in_time, "{mode:?} {swap}: nib undo hung: {out}");
            let _ = std::fs::remove_file(root.join("a.txt"));
            write(&nib, "a.txt", "c\n").await;
        }
        nib.stop().await;
    }
}

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn floods_of_refused_hosts_and_long_job_lines_stay_under_their_caps() {
    for mode in MODES {
        let dir = project();
        let mut env = mode.to_vec();
        env.push(("NIB_SANDBOX_NETWORK", "listed.test"));
        let nib = start_with(
            Era::Handshake,
            dir.path(),
            TestClient::new(Roots::Undeclared),
            &env,
        )
        .await;
        let pid = nib.pid.unwrap();
        std::fs::write(
            dir.path().join("flood.py"),
            r#"
import base64, os, socket, sys, urllib.parse
p = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{p.username}:{p.password}".encode()).decode()
n = int(sys.argv[1])
for i in range(n):
    s = socket.create_connection((p.hostname, p.port))
    host = f"h{i}-" + "a" * 14000 + ".test"
    s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
    s.recv(100)
    s.close()
print("flooded", n)
"#,
        )
        .unwrap();
        sh(&nib, "true").await;
        let before = rss_kib(pid);
        let (answer, _) = nib
            .call(
                "nibash",
                json!({"command": "python3 flood.py 3000", "timeout": 300}),
            )
            .await;
        assert!(
            answer.contains("flooded 3000"),
            "{mode:?}: {}",
            &answer[..answer.len().min(2000)]
        );
        assert!(
            answer.len() < 64 * 1024,
            "{mode:?}: the answer is {} bytes",
            answer.len()
        );
        let grown = rss_kib(pid).saturating_sub(before);
        assert!(
            grown < 32 * 1024,
            "{mode:?}: the server grew by {grown} KiB"
        );
        // Jobs each printing one 16 MiB line: the status stays small.
        for _ in 0..3 {
            nib.call(
                "nibash",
                json!({"command": "python3 -c \"import sys,time; sys.stdout.write('x'*16000000); sys.stdout.flush(); time.sleep(60)\"", "background": true}),
            )
            .await;
        }
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, _) = nib
                .call("nibash_status", json!({"format": "json", "tail": 1000}))
                .await;
            let (text, _) = nib.call("nibash_status", json!({"tail": 1000})).await;
            assert!(
                status.len() < 1 << 20,
                "{mode:?}: json status {} bytes",
                status.len()
            );
            assert!(
                text.len() < 1 << 20,
                "{mode:?}: status {} bytes",
                text.len()
            );
            if status.matches("xxxxxxxxxx").count() >= 3 || Instant::now() > until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        nib.stop().await;
    }
}

/// Issue 58, finding 3: a job started before credential files exist (or
/// before one is replaced by a rename over it) never reads them — not
/// `~/.cargo/credentials.toml`, `~/.m2/settings.xml`,
/// `~/.gradle/gradle.properties`, `~/.sbt/.credentials`, a
/// `NIB_SANDBOX_HIDE` path in a readable folder, nor a replaced
/// `~/.cargo/credentials`. The job waits for a marker the test leaves
/// after making the files, then tries nib's own `cat` and the system's.
#[tokio::test]
async fn credential_files_made_while_a_job_runs_stay_unread_by_the_job() {
    for mode in MODES {
        let dir = project();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        // Outside /tmp: under bubblewrap Landlock grants the private /tmp
        // whole, with whatever is mounted beneath it (SECURITY.md).
        std::fs::create_dir_all("/srv").unwrap();
        let home = tempfile::tempdir_in("/srv").unwrap();
        let h = std::fs::canonicalize(home.path()).unwrap();
        for folder in [".cargo/bin", ".m2", ".gradle", ".sbt"] {
            std::fs::create_dir_all(h.join(folder)).unwrap();
        }
        // One that exists at the start, covered by a stand-in under
        // bubblewrap; the person then replaces it by a rename.
        std::fs::write(h.join(".cargo/credentials"), "old\n").unwrap();
        let hide = h.join(".cargo/later-secret.txt");
        let (h_s, hide_s) = (h.display().to_string(), hide.display().to_string());
        let mut env = mode.to_vec();
        env.push(("HOME", &h_s));
        env.push(("NIB_SANDBOX_HIDE", &hide_s));
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::new(Roots::Undeclared),
            &env,
        )
        .await;
        let later = [
            (h.join(".cargo/credentials.toml"), "CANARY-JOB-CARGO"),
            (h.join(".m2/settings.xml"), "CANARY-JOB-M2"),
            (h.join(".gradle/gradle.properties"), "CANARY-JOB-GRADLE"),
            (h.join(".sbt/.credentials"), "CANARY-JOB-SBT"),
            (hide.clone(), "CANARY-JOB-HIDE"),
            (h.join(".cargo/credentials"), "CANARY-JOB-REPLACED"),
        ];
        let files: Vec<String> = later
            .iter()
            .map(|(p, _)| format!("'{}'", p.display()))
            .collect();
        let files = files.join(" ");
        let command = format!(
            "while [ ! -e ready ]; do sleep 0.1; done; cat {files}; /bin/cat {files}; echo job-done"
        );
        let started = nib
            .ok("nibash", json!({"command": command, "background": true}))
            .await;
        let at = started
            .find("job %")
            .unwrap_or_else(|| panic!("{mode:?}: no job in {started}"));
        let id: String = started[at + 5..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        for (p, text) in &later {
            let fresh = p.with_extension("new");
            std::fs::write(&fresh, format!("{text}\n")).unwrap();
            std::fs::rename(&fresh, p).unwrap();
        }
        std::fs::write(root.join("ready"), "").unwrap();
        let out = sh(&nib, &format!("wait %{id}")).await;
        assert!(out.contains("job-done"), "{mode:?}: the job ran: {out}");
        for (p, text) in &later {
            assert!(
                !out.contains(text),
                "{mode:?}: the job read {}:\n{out}",
                p.display()
            );
        }
        nib.stop().await;
    }
}
