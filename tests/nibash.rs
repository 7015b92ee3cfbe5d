//! nibash over MCP: nib's own commands and when they give way to the system
//! programs, seen rows as edit anchors, jobs across calls, timeouts that
//! become jobs, cancellation, the trash, failed cd, hidden failures, long
//! output, parallel calls, nibash_status and skim — unconfined and under
//! NIB_SANDBOX=1 alike.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::common::*;

/// The two ways nibash runs: plain, and confined.
const MODES: [&[(&str, &str)]; 2] = [&[], &[("NIB_SANDBOX", "1")]];

/// Every mode: plain, confined with bubblewrap, and confined by Landlock and
/// seccomp alone.
const EVERY_MODE: [&[(&str, &str)]; 3] = [
    &[],
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

async fn start_mode(dir: &Path, env: &[(&str, &str)]) -> Nib {
    start_with(Era::Handshake, dir, TestClient::new(Roots::Undeclared), env).await
}

async fn sh(nib: &Nib, command: &str) -> String {
    nib.ok("nibash", json!({ "command": command })).await
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

/// What the system program prints for a command line (the reference).
fn system(dir: &Path, command: &str) -> String {
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .output()
        .expect("bash runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn own_commands_print_anchored_rows_to_the_model_and_plain_text_elsewhere() {
    for env in MODES {
        let dir = project();
        std::fs::write(dir.path().join("a.txt"), lines(12)).unwrap();
        let tag = expected_tag(lines(12).as_bytes());
        let nib = start_mode(dir.path(), env).await;
        let header = format!("[a.txt#{tag}]");

        let cat = sh(&nib, "cat a.txt").await;
        assert!(
            cat.starts_with(&format!("{header}\n1:line 1\n")),
            "{env:?}\n{cat}"
        );
        assert!(cat.contains("12:line 12\n"), "{cat}");

        let head = sh(&nib, "head -n 3 a.txt").await;
        assert_eq!(
            head,
            format!("{header}\n1:line 1\n2:line 2\n3:line 3\n"),
            "{env:?}"
        );
        let tail = sh(&nib, "tail -2 a.txt").await;
        assert_eq!(tail, format!("{header}\n11:line 11\n12:line 12\n"));
        let sed = sh(&nib, "sed -n '4,5p' a.txt").await;
        assert_eq!(sed, format!("{header}\n4:line 4\n5:line 5\n"));
        let grep = sh(&nib, "grep -n 'line 1[01]' a.txt").await;
        assert!(
            grep.contains(&header) && grep.contains("*10:line 10") && grep.contains("*11:line 11"),
            "{grep}"
        );
        let rg = sh(&nib, "rg 'line 7$'").await;
        assert!(rg.contains(&header) && rg.contains("*7:line 7"), "{rg}");
        let wc = sh(&nib, "wc -l a.txt").await;
        assert_eq!(wc, format!("{header} 12 lines\n"));
        let cut = sh(&nib, "cut -c 1-4 a.txt").await;
        assert!(cut.starts_with(&format!("{header}\n1|line\n")), "{cut}");

        // Piped, redirected, inside $(…), or with an option nib does not know:
        // exactly what the system program prints.
        for cmd in [
            "cat a.txt | head -2",
            "head -n 3 a.txt | cat",
            "x=$(cat a.txt); echo \"$x\" | tail -1",
            "grep 'line 1' a.txt | wc -l",
            "sed -n '2p' a.txt | cat",
            "cat -A a.txt | head -1",
            "tail -c 8 a.txt",
            "cat a.txt > copy.txt; cat copy.txt | wc -c",
        ] {
            let ours = sh(&nib, cmd).await;
            // The list of changed files nib adds is not the program's output.
            let ours: String = ours
                .lines()
                .filter(|l| !l.starts_with("[changed: "))
                .map(|l| format!("{l}\n"))
                .collect();
            let theirs = system(dir.path(), cmd);
            assert_eq!(ours, theirs, "{env:?} {cmd}");
        }
        let copy = std::fs::read_to_string(dir.path().join("copy.txt")).unwrap();
        assert_eq!(copy, lines(12), "a redirected cat writes the plain file");

        let ty = sh(&nib, "type cat").await;
        assert!(
            ty.starts_with("cat is /") && !ty.contains("builtin"),
            "{ty}"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn rows_from_cat_are_edit_anchors_and_unseen_lines_are_not() {
    for env in MODES {
        let dir = project();
        std::fs::write(dir.path().join("a.txt"), lines(20)).unwrap();
        let nib = start_mode(dir.path(), env).await;
        let tag = expected_tag(lines(20).as_bytes());
        // Line 15 was never shown: refused.
        let refused = nib
            .err(
                "edit",
                json!({"input": format!("[a.txt#{tag}]\nPUT 15:\n+fifteen\n")}),
            )
            .await;
        assert!(refused.contains("not seen"), "{refused}");
        let shown = sh(&nib, "sed -n '14,16p' a.txt").await;
        assert!(shown.contains("15:line 15"), "{shown}");
        nib.ok(
            "edit",
            json!({"input": format!("[a.txt#{tag}]\nPUT 15:\n+fifteen\n")}),
        )
        .await;
        let after = std::fs::read_to_string(dir.path().join("a.txt")).unwrap();
        assert!(
            after.contains("line 14\nfifteen\nline 16\n"),
            "{env:?}\n{after}"
        );
        // Rows piped through the system program are not anchors.
        let tag2 = expected_tag(after.as_bytes());
        sh(&nib, "cat a.txt | sed -n '3p'").await;
        let refused = nib
            .err(
                "edit",
                json!({"input": format!("[a.txt#{tag2}]\nPUT 3:\n+three\n")}),
            )
            .await;
        assert!(refused.contains("not seen"), "{refused}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn jobs_carry_over_between_calls_and_wait_and_kill_work_on_them() {
    for env in MODES {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        let started = nib
            .ok(
                "nibash",
                json!({"command": "sleep 0.5; echo finished", "background": true}),
            )
            .await;
        let id = job_id(&started);
        let jobs = sh(&nib, "jobs").await;
        assert!(jobs.contains(&format!("[%{id}] running")), "{env:?} {jobs}");
        let waited = sh(&nib, &format!("wait %{id}")).await;
        assert!(
            waited.contains("finished") && waited.contains(&format!("[job %{id} exited 0")),
            "{waited}"
        );

        // `cmd &` also leaves a job; kill ends its whole tree before it writes.
        let started = sh(&nib, "(sleep 2; touch canary) & echo started").await;
        assert!(started.contains("started"), "{started}");
        let id = job_id(&started);
        let killed = sh(&nib, &format!("kill %{id}")).await;
        assert!(killed.contains(&format!("[job %{id} killed]")), "{killed}");
        std::thread::sleep(Duration::from_millis(2500));
        assert!(
            !dir.path().join("canary").exists(),
            "{env:?}: a killed job went on running"
        );
        nib.stop().await;
    }
}

fn job_id(text: &str) -> u32 {
    let at = text
        .find("job %")
        .unwrap_or_else(|| panic!("no job in {text}"));
    text[at + 5..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no job number in {text}"))
}

#[tokio::test]
async fn a_command_still_running_at_its_timeout_goes_on_as_a_job() {
    for env in MODES {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        let t = std::time::Instant::now();
        let out = nib
        .ok("nibash", json!({"command": "echo early; sleep 2; echo late > done.txt; echo late", "timeout": 1}))
        .await;
        assert!(
            t.elapsed() < Duration::from_millis(1900),
            "the call waited for the command"
        );
        assert!(
            out.contains("early") && out.contains("still running after 1s"),
            "{out}"
        );
        let id = job_id(&out);
        let waited = sh(&nib, &format!("wait %{id}")).await;
        assert!(
            waited.lines().any(|l| l == "late") && !waited.lines().any(|l| l == "early"),
            "wait shows only what was not shown yet: {waited}"
        );
        assert!(
            dir.path().join("done.txt").exists(),
            "the job was not stopped at the timeout"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_cancelled_call_ends_its_whole_process_tree() {
    for env in MODES {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        let params = rmcp::model::CallToolRequestParams::new("nibash".to_string()).with_arguments(
            json!({"command": "(sleep 1.5; touch canary) & sleep 1.5; touch canary2"})
                .as_object()
                .cloned()
                .unwrap(),
        );
        let handle = nib
            .client
            .send_cancellable_request(
                rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                    params,
                )),
                rmcp::service::PeerRequestOptions::no_options(),
            )
            .await
            .expect("request sent");
        tokio::time::sleep(Duration::from_millis(400)).await;
        handle
            .cancel(Some("test".into()))
            .await
            .expect("cancel sent");
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert!(
            !dir.path().join("canary").exists(),
            "a background process outlived the cancel"
        );
        assert!(
            !dir.path().join("canary2").exists(),
            "the command outlived the cancel"
        );
        // The server still serves.
        assert_eq!(sh(&nib, "echo alive").await, "alive\n");
        nib.stop().await;
    }
}

/// Calls are forked by the session's zygote: what a call leaves running is
/// ended by its call init when the call ends, and by the zygote when the
/// call init itself is killed (here by the call's own program) — in every
/// mode. Each canary would appear three seconds after its call started
/// (a call here takes well under a second).
#[tokio::test]
async fn what_a_forked_call_leaves_ends_with_it_even_when_its_init_is_killed() {
    let modes = EVERY_MODE;
    // With cgroups (root) and without (an ordinary user's case: the call
    // init and the zygote are then all that ends the leftovers).
    let cgroups = [true, false];
    for (env, with_cgroups) in modes.iter().flat_map(|m| cgroups.map(|c| (*m, c))) {
        let dir = project();
        let nib = if with_cgroups {
            start_mode(dir.path(), env).await
        } else {
            start_without_cgroups(dir.path(), env).await
        };
        let ended = sh(&nib, "(setsid sh -c 'sleep 3; touch canary1' &); echo left").await;
        assert!(ended.contains("left"), "{env:?} {ended}");
        // The worker's parent is its call init. A program of the call
        // cannot kill it where the call is confined (the call's Landlock
        // domain scopes signals, issue 58); the broker's kill, from
        // outside, can: killed here as the broker would.
        let refused = sh(&nib, "sh -c \"kill -9 $PPID\"; echo still here").await;
        let confined = env.contains(&("NIB_SANDBOX", "1"));
        if confined {
            assert!(refused.contains("still here"), "{env:?}: {refused}");
        }
        let call = {
            let params = rmcp::model::CallToolRequestParams::new("nibash").with_arguments(
                json!({"command": "(setsid sh -c 'sleep 3; touch canary2' &); sleep 5"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            );
            let peer = nib.client.peer().clone();
            tokio::spawn(async move { peer.call_tool(params).await })
        };
        let root = nib.pid.expect("pid");
        let init = {
            let started = std::time::Instant::now();
            loop {
                if let Some(init) = call_init_running(root, b"sleep\x005") {
                    break init;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "{env:?}: the call's sleep never started"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let _ = std::process::Command::new("kill")
            .args(["-9", &init.to_string()])
            .status();
        let killed = format!("{:?}", call.await);
        std::thread::sleep(Duration::from_millis(4000));
        for canary in ["canary1", "canary2"] {
            assert!(
                !dir.path().join(canary).exists(),
                "{env:?} cgroups {with_cgroups}: {canary} was written after its call ended ({killed})"
            );
        }
        // The session goes on, with workers forked afresh.
        let alive = sh(&nib, "echo alive").await;
        assert!(alive.starts_with("alive\n"), "{env:?}: {alive}");
        nib.stop().await;
    }
}

/// In an MCP session under the sandbox, the call that writes to the
/// private /tmp names it once, and the file is there for the next call
/// (the session's zygote keeps its /tmp); a call that only reads it says
/// nothing more.
#[tokio::test]
async fn the_session_names_its_private_tmp_once_and_keeps_it_for_later_calls() {
    for env in [
        &[("NIB_SANDBOX", "1")][..],
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
    ] {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        let wrote = sh(&nib, "echo kept > \"$TMPDIR/later.txt\"; echo wrote").await;
        assert!(
            wrote.contains("later.txt went to nib's private /tmp")
                && wrote.contains("kept for this session's later nibash calls"),
            "{env:?}: {wrote}"
        );
        let read = sh(&nib, "cat \"$TMPDIR/later.txt\" | tr a-z A-Z").await;
        assert!(read.contains("KEPT"), "{env:?}: {read}");
        assert!(!read.contains("private /tmp"), "{env:?}: {read}");
        // Named once a session: a later write there says nothing more.
        let again = sh(&nib, "echo more > \"$TMPDIR/second.txt\"; echo again").await;
        assert!(!again.contains("private /tmp"), "{env:?}: {again}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn rm_moves_files_to_the_trash_and_trash_restore_puts_them_back() {
    for env in MODES {
        let dir = project();
        std::fs::write(dir.path().join("a.txt"), "keep me\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.txt"), "b\n").unwrap();
        let nib = start_mode(dir.path(), env).await;
        let out = sh(&nib, "rm a.txt && rm -r sub && ls").await;
        assert!(
            out.contains("moved to the trash: a.txt, sub"),
            "{env:?} {out}"
        );
        assert!(!dir.path().join("a.txt").exists() && !dir.path().join("sub").exists());
        assert_eq!(
            std::fs::read_to_string(nib.trash_files().join("a.txt")).unwrap(),
            "keep me\n"
        );
        let refused = nib
            .call("nibash", json!({"command": "rm nothing-here"}))
            .await
            .0;
        assert!(
            refused.contains("cannot remove") && refused.contains("[exit 1]"),
            "{refused}"
        );
        let listed = sh(&nib, "trash list").await;
        assert!(
            listed.contains("a.txt") && listed.contains("sub"),
            "{listed}"
        );
        let restored = sh(&nib, "trash restore a.txt").await;
        assert!(restored.contains("restored a.txt"), "{restored}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "keep me\n"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_failed_cd_ends_the_call_unless_the_command_line_handles_it() {
    for env in MODES {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        let out = nib
            .call("nibash", json!({"command": "cd nowhere; touch canary"}))
            .await
            .0;
        assert!(out.contains("nowhere") && out.contains("[exit 1]"), "{out}");
        assert!(
            !dir.path().join("canary").exists(),
            "{env:?}: ran on after a failed cd"
        );
        sh(
            &nib,
            "cd nowhere || touch handled; if cd nowhere2; then :; fi; touch after",
        )
        .await;
        assert!(dir.path().join("handled").exists() && dir.path().join("after").exists());
        nib.stop().await;
    }
}

#[tokio::test]
async fn failures_the_exit_status_hides_are_named() {
    let dir = project();
    for env in MODES {
        let nib = start_mode(dir.path(), env).await;
        let out = nib
            .call("nibash", json!({"command": "cat missing.txt 2>/dev/null"}))
            .await
            .0;
        let named = "cat exited 1, its stderr discarded: \"cat: missing.txt: No such file or directory\"]\n";
        assert_eq!(out, format!("[exit 1; {named}"), "{env:?}");
        let out = sh(&nib, "cat missing.txt 2>/dev/null || echo handled; tmp=$(mktemp); echo ok > $tmp; cat $tmp | cat").await;
        // Under the sandbox the temp file is named once (nib's private /tmp).
        let out: String = out
            .lines()
            .filter(|l| !l.starts_with("[sandbox: ") || !l.contains("private /tmp"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            out, "handled\nok\n",
            "{env:?}: the temp folder is writable, and a failure the script handles is its own"
        );
        // A status of 0 does not hide a failure whose stderr was discarded
        // and whose status nothing tested.
        for line in [
            "cat missing.txt 2>/dev/null; true",
            "cat missing.txt 2>/dev/null | wc -l",
        ] {
            let out = sh(&nib, line).await;
            assert!(
                out.ends_with(&format!("[exit 0; {named}")),
                "{env:?} {line:?}:\n{out}"
            );
        }
        // One the script tests is not named, as bash says nothing of it.
        for line in [
            "cat missing.txt 2>/dev/null || true",
            "if cat missing.txt 2>/dev/null; then echo y; else echo n; fi",
        ] {
            let out = sh(&nib, line).await;
            assert!(
                !out.contains("stderr discarded"),
                "{env:?} {line:?}:\n{out}"
            );
        }
        // Statuses are what they would have been: `$?`, `set -e`, `if`.
        let out = sh(&nib, "cat missing.txt 2>/dev/null; echo \"status $?\"").await;
        assert!(out.starts_with("status 1\n"), "{out}");
        let out = sh(&nib, "set -e; cat missing.txt 2>/dev/null; echo no").await;
        assert!(!out.contains("no\n") && out.contains("[exit 1"), "{out}");
        // A background job's failure is named when the job ends.
        let started = nib
            .ok(
                "nibash",
                // The job outlives the call's answer (a bare `cat &` may
                // end before the worker looks for running jobs).
                json!({"command": "{ sleep 0.5; cat missing.txt 2>/dev/null; } &"}),
            )
            .await;
        let id = job_id(&started);
        let waited = sh(&nib, &format!("wait %{id}")).await;
        assert!(
            waited.contains(&format!("[exit 0; {named}")),
            "{env:?}:\n{started}\n{waited}"
        );
        let out = sh(&nib, "ls . 2>/dev/null >/dev/null; echo fine").await;
        assert_eq!(out, "fine\n", "a command that succeeded is not named");
        nib.stop().await;
    }
    let nib = start_mode(dir.path(), &[]).await;
    let out = sh(&nib, "false | true").await;
    assert!(
        out.contains("[exit 0, but an earlier pipeline stage failed: stage 1 exited 1]"),
        "{out}"
    );
    let out = nib.call("nibash", json!({"command": "exit 3"})).await.0;
    assert!(out.ends_with("[exit 3]\n"), "{out}");
    nib.stop().await;
}

#[tokio::test]
async fn long_output_is_cut_to_the_rows_that_matter_and_saved_whole() {
    for env in MODES {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        let out = sh(&nib, "for i in $(seq 1 1000); do if [ $i = 500 ]; then echo \"error: step $i broke\"; else echo \"step $i\"; fi; done").await;
        assert!(
            out.contains("1|step 1\n") && out.contains("10|step 10\n"),
            "{out}"
        );
        assert!(!out.contains("|step 11\n"), "{out}");
        assert!(
            out.contains("497|step 497\n500|error: step 500 broke\n")
                || out.contains("500|error: step 500 broke\n"),
            "{out}"
        );
        assert!(out.contains("1000|step 1000\n"), "{out}");
        let log = out
            .split("whole in ")
            .nth(1)
            .and_then(|s| s.split(']').next())
            .unwrap_or_else(|| panic!("no log named in {out}"));
        let saved = std::fs::read_to_string(log).unwrap();
        assert_eq!(saved.lines().count(), 1000);
        assert_eq!(saved.lines().nth(499), Some("error: step 500 broke"));
        assert!(out.lines().count() < 200, "{}", out.lines().count());
        nib.stop().await;
    }
}

#[tokio::test]
async fn calls_start_afresh_and_run_in_parallel_without_sharing_state() {
    for env in MODES {
        let dir = project();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let nib = start_mode(dir.path(), env).await;
        sh(&nib, "cd sub; export NIB_T=1; f() { echo f; }").await;
        let out = sh(&nib, "pwd; echo \"t=$NIB_T\"; type f 2>&1 | head -1").await;
        let project_dir = std::fs::canonicalize(dir.path()).unwrap();
        assert!(
            out.starts_with(&format!("{}\nt=\n", project_dir.display())),
            "{env:?} {out}"
        );
        let t = std::time::Instant::now();
        let (a, b) = tokio::join!(
            sh(&nib, "x=one; sleep 0.8; echo \"x=$x\""),
            sh(&nib, "sleep 0.8; echo \"x=$x\"")
        );
        assert_eq!((a.as_str(), b.as_str()), ("x=one\n", "x=\n"));
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "the calls ran one after the other"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn seconds_count_from_the_calls_start_though_its_shell_was_made_before() {
    for env in EVERY_MODE {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        // The first call leaves a warm worker, whose shell is made at once.
        sh(&nib, "true").await;
        tokio::time::sleep(Duration::from_millis(2200)).await;
        let out = sh(&nib, "echo $SECONDS; sleep 1.1; echo $SECONDS").await;
        assert_eq!(out, "0\n1\n", "{env:?}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn confined_programs_cannot_write_outside_the_roots() {
    let dir = project();
    let outside = tempfile::tempdir().unwrap();
    let canary = outside.path().join("canary");
    let nib = start_mode(dir.path(), &[("NIB_SANDBOX", "1")]).await;
    let out = nib
        .call(
            "nibash",
            json!({"command": format!("touch {} ; echo done", canary.display())}),
        )
        .await
        .0;
    assert!(out.contains("done"), "{out}");
    assert!(
        !canary.exists(),
        "a sandboxed program wrote outside the roots"
    );
    let out = nib
        .call("nibash", json!({"command": format!("rm -f {}/x; rm {}", outside.path().display(), outside.path().join("keep").display())}))
        .await
        .0;
    assert!(
        out.contains("outside the roots") || out.contains("No such file"),
        "{out}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn named_directories_carry_over_and_status_lists_jobs_and_layers() {
    let dir = project();
    std::fs::create_dir(dir.path().join("deep")).unwrap();
    let nib = start_mode(dir.path(), &[]).await;
    sh(&nib, "hash -d deep=deep").await;
    let listed = sh(&nib, "hash -d").await;
    assert!(
        listed.contains("hash -d deep=") && listed.contains("/deep"),
        "{listed}"
    );
    let started = nib
        .ok("nibash", json!({"command": "echo working; sleep 2", "background": true, "description": "a slow one"}))
        .await;
    let id = job_id(&started);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = nib.ok("nibash_status", json!({})).await;
    assert!(status.contains("sandbox: unconfined"), "{status}");
    // What each tool returned to this agent, in characters.
    assert!(
        status.contains("characters returned this session: ")
            && status.contains("  main nibash: ")
            && status.contains(" calls\n"),
        "{status}"
    );
    assert!(
        status.contains(&format!("%{id} running (job)")) && status.contains("(a slow one)"),
        "{status}"
    );
    assert!(status.contains("  | working"), "{status}");
    let view = nib
        .ok("nibash_status", json!({"view": format!("%{id}")}))
        .await;
    assert!(view.contains("working"), "{view}");
    nib.stop().await;
}

#[tokio::test]
async fn skim_reads_a_test_log_for_what_failed_then_only_what_is_new() {
    let dir = project();
    let mut log = String::new();
    for i in 0..600 {
        log.push_str(&format!("test case_{i} ... ok\n"));
    }
    log.push_str(
        "---- case_x stdout ----\nthread 'case_x' panicked at src/lib.rs:3:5:\nexpected 2, got 3\n",
    );
    log.push_str("test result: FAILED. 600 passed; 1 failed\n");
    std::fs::write(dir.path().join("test.log"), &log).unwrap();
    let nib = start_mode(dir.path(), &[]).await;
    let out = nib
        .ok(
            "skim",
            json!({"paths": ["test.log"], "expect": "which tests failed and why"}),
        )
        .await;
    assert!(
        out.contains("failed: the rows below") && out.contains("|expected 2, got 3"),
        "{out}"
    );
    assert!(
        !out.contains("[test.log#"),
        "skim rows are never anchors: {out}"
    );
    let again = nib
        .ok(
            "skim",
            json!({"paths": ["test.log"], "expect": "which tests failed and why"}),
        )
        .await;
    assert!(again.contains("no lines added"), "{again}");
    nib.stop().await;
}

#[tokio::test]
async fn a_file_a_program_puts_back_to_an_older_tools_write_is_listed() {
    // Tools' writes just before a call may be the roots' watcher's news in
    // it, but only the newest write to a file explains its content.
    for env in MODES {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        nib.ok("write", json!({"path": "f.txt", "content": "b\n"}))
            .await;
        let tag = expected_tag(b"b\n");
        nib.ok(
            "write",
            json!({"path": "f.txt", "content": "c\n", "tag": tag}),
        )
        .await;
        let out = sh(&nib, "printf 'b\\n' > f.txt").await;
        let tag = expected_tag(b"b\n");
        assert!(out.contains(&format!("f.txt#{tag}")), "{env:?}\n{out}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_file_a_program_puts_back_to_a_tools_write_after_changing_it_is_listed() {
    // The tool's write just before the calls, a program's change the first
    // call lists, then the tool's content put back by the next: a change.
    for env in MODES {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        nib.ok("write", json!({"path": "f.txt", "content": "a\n"}))
            .await;
        let first = sh(&nib, "printf 'y\\n' > f.txt").await;
        assert!(
            first.contains(&format!("f.txt#{}", expected_tag(b"y\n"))),
            "{env:?}\n{first}"
        );
        let back = sh(&nib, "printf 'a\\n' > f.txt").await;
        let tag = expected_tag(b"a\n");
        assert!(back.contains(&format!("f.txt#{tag}")), "{env:?}\n{back}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_file_removed_and_made_again_in_one_call_is_listed() {
    for env in MODES {
        let dir = project();
        std::fs::write(dir.path().join("f.txt"), "old\n").unwrap();
        let nib = start_mode(dir.path(), env).await;
        let out = sh(&nib, "rm f.txt; printf 'new\\n' > f.txt").await;
        let tag = expected_tag(b"new\n");
        assert!(out.contains(&format!("f.txt#{tag}")), "{env:?}\n{out}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn changed_files_are_listed_with_tags_and_small_changes_to_seen_files_print_as_rows() {
    for env in MODES {
        let dir = project();
        std::fs::write(dir.path().join("a.txt"), lines(30)).unwrap();
        let nib = start_mode(dir.path(), env).await;
        sh(&nib, "cat a.txt").await;
        let out = sh(
            &nib,
            "sed -i 's/^line 3$/LINE 3/' a.txt; echo fresh > new.txt",
        )
        .await;
        let a = std::fs::read(dir.path().join("a.txt")).unwrap();
        let a_tag = expected_tag(&a);
        let new_tag = expected_tag(b"fresh\n");
        assert!(
            out.contains(&format!("[changed: a.txt#{a_tag}, new.txt#{new_tag}]")),
            "{env:?}\n{out}"
        );
        assert!(
            out.contains(&format!(
                "[a.txt#{a_tag}] changed since you saw it:\n3:LINE 3\n"
            )),
            "{out}"
        );
        // The printed row is an anchor now.
        nib.ok(
            "edit",
            json!({"input": format!("[a.txt#{a_tag}]\nPUT 3:\n+three\n")}),
        )
        .await;
        let quiet = sh(&nib, "true").await;
        assert_eq!(quiet, "", "nothing changed, nothing listed");
        nib.stop().await;
    }
}

#[tokio::test]
async fn jobs_that_ended_are_reported_at_the_next_call() {
    let dir = project();
    let nib = start_mode(dir.path(), &[]).await;
    let started = nib
        .ok(
            "nibash",
            // The output comes after the answer (a loaded machine could
            // otherwise print it in the answer itself, leaving none unread).
            json!({"command": "sleep 0.3; echo bg-output", "background": true}),
        )
        .await;
    let id = job_id(&started);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let next = sh(&nib, "echo next").await;
    assert!(
        next.starts_with(&format!("[job %{id} exited 0: sleep 0.3; echo bg-output; "))
            && next.contains("wait %"),
        "{next}"
    );
    let waited = sh(&nib, &format!("wait %{id}")).await;
    assert!(waited.contains("bg-output"), "{waited}");
    let later = sh(&nib, "echo later").await;
    assert_eq!(later, "later\n", "a job is reported once");
    nib.stop().await;
}

/// A line that leaves `cmd &` running is a job whose status is the
/// command's, as `wait` gives it in bash (it was reported as `exited 0`),
/// and `wait %N` still gives that status once the end was reported.
#[tokio::test]
async fn a_background_commands_status_is_its_jobs_and_wait_gives_it_after_the_report() {
    for env in MODES {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        let started = sh(&nib, "sh -c 'sleep 1; exit 4' &").await;
        let id = job_id(&started);
        tokio::time::sleep(Duration::from_millis(1600)).await;
        let next = sh(&nib, "echo next").await;
        assert!(
            next.starts_with(&format!("[job %{id} exited 4: ")),
            "{env:?} {next}"
        );
        let waited = sh(&nib, &format!("wait %{id}; echo \"status $?\"")).await;
        assert!(waited.ends_with("status 4\n"), "{env:?} {waited}");
        let listed = sh(&nib, "jobs; echo listed").await;
        assert_eq!(listed, "listed\n", "{env:?}: an ended job is listed again");
        nib.stop().await;
    }
}

#[tokio::test]
async fn git_rm_git_clean_and_find_delete_move_files_to_the_trash() {
    for env in MODES {
        let dir = project();
        let p = dir.path();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
                .args(args)
                .current_dir(p)
                .output()
                .expect("git runs")
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(p.join("tracked.txt"), "tracked\n").unwrap();
        git(&["add", "tracked.txt"]);
        git(&["commit", "-qm", "init"]);
        std::fs::write(p.join("untracked.txt"), "u\n").unwrap();
        std::fs::create_dir(p.join("build")).unwrap();
        std::fs::write(p.join("build/out.o"), "o\n").unwrap();
        std::fs::write(p.join("notes.tmp"), "n\n").unwrap();
        let nib = start_mode(p, env).await;
        let out = sh(&nib, "git rm -q tracked.txt && git status --short").await;
        assert!(out.contains("D  tracked.txt"), "{env:?} {out}");
        let out = sh(&nib, "find . -name '*.tmp' -delete").await;
        assert!(out.contains("moved to the trash: notes.tmp"), "{out}");
        let out = sh(&nib, "git clean -fd").await;
        assert!(
            out.contains("Removing untracked.txt") && out.contains("Removing build/"),
            "{out}"
        );
        for gone in ["tracked.txt", "untracked.txt", "build", "notes.tmp"] {
            assert!(!p.join(gone).exists(), "{gone} is still there");
            assert!(
                nib.trash_files().join(gone).exists(),
                "{gone} is not in the trash"
            );
        }
        nib.stop().await;
    }
}

#[tokio::test]
async fn dollar_bang_is_the_calls_job_spec_and_named_directories_expand() {
    for env in MODES {
        let dir = project();
        std::fs::create_dir_all(dir.path().join("deep/er")).unwrap();
        std::fs::write(dir.path().join("deep/er/x.txt"), "x\n").unwrap();
        let nib = start_mode(dir.path(), env).await;
        // Within the call: wait and kill take it.
        let t = std::time::Instant::now();
        let out = sh(&nib, "sleep 0.2 & echo \"got $!\"; wait $!; echo \"waited $?\"; sleep 30 & kill $!; wait; echo killed").await;
        assert!(
            out.contains("got %") && out.contains("waited 0") && out.contains("killed"),
            "{env:?} {out}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "kill $! did not end the job"
        );
        // Across calls: the spec printed is the job's.
        let out = sh(&nib, "sleep 0.3 & echo \"spec $!\"").await;
        let spec = out
            .split("spec ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or_else(|| panic!("{out}"))
            .to_string();
        assert_eq!(format!("%{}", job_id(&out)), spec, "{out}");
        let waited = sh(&nib, &format!("wait {spec}")).await;
        assert!(waited.contains("exited 0"), "{waited}");
        // Named directories, unquoted at the start of a word.
        sh(&nib, "hash -d er=deep/er").await;
        let out = sh(&nib, "ls ~er/x.txt; echo '~er'").await;
        let real = std::fs::canonicalize(dir.path())
            .unwrap()
            .join("deep/er/x.txt");
        assert_eq!(out, format!("{}\n~er\n", real.display()), "{env:?}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_long_call_reports_progress_with_its_latest_line() {
    use rmcp::model::RequestParamsMeta;
    let dir = project();
    let nib = start_mode(dir.path(), &[]).await;
    let mut params = rmcp::model::CallToolRequestParams::new("nibash".to_string()).with_arguments(
        json!({"command": "echo first-step; sleep 1.5; echo done"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    params.set_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::Number(7),
    ));
    let r = nib
        .client
        .call_tool(params)
        .await
        .expect("the call answers");
    assert_eq!(without_unconfined_notice(text_of(&r)), "first-step\ndone\n");
    let progress = nib.handler.progress.lock().unwrap().clone();
    assert!(progress.iter().any(|m| m == "first-step"), "{progress:?}");
    nib.stop().await;
}

#[tokio::test]
async fn grep_family_options_print_rows_and_unknown_ones_fall_back() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\na.b\nGamma\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "nothing\n").unwrap();
    let nib = start_mode(dir.path(), &[]).await;
    let tag = expected_tag(b"alpha\nbeta\na.b\nGamma\n");
    let out = sh(&nib, "egrep 'alpha|beta' a.txt").await;
    assert!(
        out.contains(&format!("[a.txt#{tag}]"))
            && out.contains("*1:alpha")
            && out.contains("*2:beta"),
        "{out}"
    );
    let out = sh(&nib, "fgrep a.b a.txt").await;
    assert!(out.contains("*3:a.b") && !out.contains("*1:alpha"), "{out}");
    let out = sh(&nib, "grep -i gamma a.txt").await;
    assert!(out.contains("*4:Gamma"), "{out}");
    let out = sh(&nib, "grep -rl alpha .").await;
    assert!(out.contains("a.txt") && !out.contains("b.txt"), "{out}");
    let out = sh(&nib, "rg -w beta").await;
    assert!(out.contains("*2:beta"), "{out}");
    let out = sh(&nib, "wc -w a.txt b.txt").await;
    assert!(
        out.contains("4 words") && out.contains("total 5 words"),
        "{out}"
    );
    let out = sh(&nib, "grep -c a a.txt").await;
    assert!(out.contains("a.txt (4)"), "{out}");
    // Options nib does not print rows for: the system program's own output.
    for cmd in ["grep -v beta a.txt", "grep -o 'a.' a.txt", "wc -L a.txt"] {
        let ours = sh(&nib, cmd).await;
        assert_eq!(ours, system(dir.path(), cmd), "{cmd}");
    }
    let none = nib
        .call("nibash", json!({"command": "grep zzz a.txt"}))
        .await
        .0;
    assert!(
        none.contains("[exit 1]"),
        "grep with no match exits 1: {none}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn a_command_flooding_its_output_is_stopped() {
    let dir = project();
    let nib = start_mode(dir.path(), &[]).await;
    let t = std::time::Instant::now();
    let out = nib
        .call("nibash", json!({"command": "yes", "timeout": 60}))
        .await
        .0;
    assert!(
        out.contains("the command was stopped"),
        "{}",
        &out[out.len().saturating_sub(400)..]
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t.elapsed()
    );
    assert!(
        out.len() < 64 * 1024,
        "the answer is cut: {} bytes",
        out.len()
    );
    nib.stop().await;
}

/// A command line is the model's: its control bytes (a clipboard write, a
/// title, a screen clear) reach the user's terminal written out, never raw.
#[tokio::test]
async fn the_status_line_shows_a_command_lines_control_bytes_never_sends_them() {
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let nib = start_in_home(
        Era::Handshake,
        dir.path(),
        TestClient::new(Roots::Undeclared),
        &[],
        home,
    )
    .await;
    let command = "sleep 30 # \x1b]52;c;Y3VybCBldmls\x07\x1b]0;owned\x07\x1b[2J\u{9b}2J";
    let started = nib
        .ok("nibash", json!({"command": command, "background": true}))
        .await;
    let id = job_id(&started);
    let mut bytes = Vec::new();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let out = std::process::Command::new(nib_bin())
            .arg("statusline")
            .current_dir(dir.path())
            .env("NIB_STATE_DIR", &state)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        bytes = out.stdout;
        if String::from_utf8_lossy(&bytes).contains(&format!("%{id} sleep 30")) {
            break;
        }
    }
    let line = String::from_utf8_lossy(&bytes).into_owned();
    assert!(line.contains(&format!("%{id} sleep 30")), "{line}");
    assert!(
        !bytes.iter().any(|b| *b == 0x1b || *b == 0x07) && !line.contains('\u{9b}'),
        "control bytes reached the terminal: {line:?}"
    );
    assert!(line.contains("\\x1b]52;c;"), "{line}");
    nib.stop().await;
}

#[tokio::test]
async fn the_status_line_names_running_calls_and_jobs_and_forgets_a_server_that_ended() {
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let nib = start_in_home(
        Era::Handshake,
        dir.path(),
        TestClient::new(Roots::Undeclared),
        &[],
        home,
    )
    .await;
    let statusline = || {
        let mut child = std::process::Command::new(nib_bin())
            .arg("statusline")
            .current_dir("/")
            .env("NIB_STATE_DIR", &state)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        let input = json!({"workspace": {"current_dir": dir.path()}}).to_string();
        child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        drop(child.stdin.take());
        String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned()
    };
    assert_eq!(statusline().trim(), "nib: idle");
    let started = nib
        .ok("nibash", json!({"command": "sleep 30", "background": true}))
        .await;
    let id = job_id(&started);
    // As soon as the call that started it has answered (it said idle for
    // about a second).
    let at_once = statusline();
    assert!(
        at_once.contains(&format!("%{id} sleep 30")),
        "right after the call answered: {at_once}"
    );
    let mut line = String::new();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        line = statusline();
        if line.contains(&format!("%{id} sleep 30")) {
            break;
        }
    }
    assert!(
        line.starts_with("nib: 1 job %") && line.contains(&format!("%{id} sleep 30")),
        "{line}"
    );
    // A call the agent waits for is named as running, beside the job.
    let (answer, seen) = tokio::join!(
        nib.call("nibash", json!({"command": "sleep 2.5; echo slept"})),
        async {
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(150)).await;
                let l = statusline();
                if l.contains("running sleep 2.5; echo slept") {
                    return l;
                }
            }
            statusline()
        }
    );
    assert!(answer.0.contains("slept"), "{answer:?}");
    assert!(
        seen.starts_with("nib: running sleep 2.5; echo slept (")
            && seen.contains(&format!("; 1 job %{id} sleep 30")),
        "{seen}"
    );
    nib.stop().await;
    // The server is gone: its file is removed (or ignored as dead).
    let mut after = String::new();
    for _ in 0..20 {
        after = statusline();
        if after.trim() == "nib: idle" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(after.trim(), "nib: idle");
}

#[tokio::test]
async fn a_job_that_ends_is_announced_to_a_client_with_the_channel_and_to_no_other() {
    // (declared by the client, NIB_CHANNEL=1): either turns it on.
    for (declared, env) in [(true, false), (false, true), (false, false)] {
        let dir = project();
        let mut client = TestClient::new(Roots::Undeclared);
        client.channel = declared;
        let heard = client.custom.clone();
        let env: &[(&str, &str)] = if env { &[("NIB_CHANNEL", "1")] } else { &[] };
        let nib = start_with(Era::Handshake, dir.path(), client, env).await;
        let declared = declared || !env.is_empty();
        let started = nib
            .ok(
                "nibash",
                json!({"command": "sleep 0.3; echo finished-now; exit 4", "background": true}),
            )
            .await;
        let id = job_id(&started);
        let mut got = Vec::new();
        for _ in 0..25 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            got = heard.lock().unwrap().clone();
            if !got.is_empty() {
                break;
            }
        }
        if declared {
            assert!(
                got.iter()
                    .any(|n| n.starts_with("notifications/claude/channel")
                        && n.contains(&format!("[job %{id} exited 4"))
                        && n.contains("finished-now")),
                "{got:?}"
            );
        } else {
            assert!(got.is_empty(), "a client without the channel heard {got:?}");
        }
        nib.stop().await;
    }
}

#[tokio::test]
async fn changed_files_are_grouped_by_folder_and_big_folders_folded() {
    let dir = project();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    let nib = start_mode(dir.path(), &[]).await;
    let out = sh(
        &nib,
        "mkdir -p gen && for i in 1 2 3 4 5 6 7 8 9 10; do echo $i > gen/f$i.txt; done; echo a > src/a.rs; echo b > src/b.rs; echo t > top.txt",
    )
    .await;
    let line = out
        .lines()
        .find(|l| l.starts_with("[changed: "))
        .unwrap_or_default()
        .to_string();
    let tag = |rel: &str| expected_tag(&std::fs::read(dir.path().join(rel)).unwrap());
    assert!(
        line.contains(&format!(
            "src/{{a.rs#{}, b.rs#{}}}",
            tag("src/a.rs"),
            tag("src/b.rs")
        )) || line.contains(&format!(
            "src/{{b.rs#{}, a.rs#{}}}",
            tag("src/b.rs"),
            tag("src/a.rs")
        )),
        "{out}"
    );
    assert!(
        line.contains(&format!("top.txt#{}", tag("top.txt"))),
        "{out}"
    );
    assert!(
        line.contains("gen/ (10 files)") && !line.contains("f1.txt"),
        "{out}"
    );
    assert!(!line.contains(" more"), "{out}");
    nib.stop().await;
}

/// The worker waits for the programs a line did not wait for (process
/// substitutions) without taking their status from brush, which waits for
/// them too: one call in about 25 printed "No child processes" before.
#[tokio::test]
async fn process_substitutions_end_without_a_lost_child() {
    let dir = project();
    let nib = start(Era::Handshake, dir.path()).await;
    for i in 0..100 {
        let out = sh(&nib, "cp <(echo hi) >(cat)").await;
        assert!(
            out.starts_with("hi\n") && !out.contains("No child processes"),
            "call {i}: {out}"
        );
    }
    nib.stop().await;
}

/// What a killed broker left running in its pids cgroup is ended by the
/// next broker's sweep (a bubblewrap child left waiting mid-start held its
/// broker's pipes for an hour), and the cgroup is removed.
#[tokio::test]
async fn what_a_gone_broker_left_in_its_cgroup_is_ended_by_the_next_broker() {
    let Some(cgroups) = nib_sandbox::pids_cgroup_root() else {
        use std::os::unix::fs::MetadataExt;
        let uid = std::fs::metadata("/proc/self").map(|m| m.uid());
        assert_ne!(uid.ok(), Some(0), "root has a pids cgroup here");
        return;
    };
    // A broker that is gone: a process that ran and ended.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let left = cgroups.join(format!("nib-{gone_pid}-0"));
    std::fs::create_dir(&left).unwrap();
    let mut leftover = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(left.join("cgroup.procs"), leftover.id().to_string()).unwrap();
    let dir = project();
    let nib = start_with(
        Era::Handshake,
        dir.path(),
        TestClient::new(Roots::Undeclared),
        &[],
    )
    .await;
    nib.ok("nibash", json!({"command": "true"})).await;
    let mut ended = None;
    for _ in 0..50 {
        ended = leftover.try_wait().unwrap();
        if ended.is_some() && !left.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = leftover.kill();
    let _ = leftover.wait();
    let still_there = left.exists();
    let _ = std::fs::remove_dir(&left);
    nib.stop().await;
    assert!(ended.is_some(), "the leftover process still runs");
    assert!(!still_there, "the gone broker's cgroup is still there");
}

/// `timeout` is a number in the schema (text like `90s` is taken too): a
/// number gets no note about leniency.
#[tokio::test]
async fn a_numeric_timeout_is_taken_without_a_note() {
    let dir = project();
    let nib = start_mode(dir.path(), &[]).await;
    for timeout in [json!(5), json!("5s")] {
        let out = nib
            .ok("nibash", json!({"command": "echo ran", "timeout": timeout}))
            .await;
        assert!(out.contains("ran"), "{out}");
        assert!(!out.contains("as a string"), "{timeout}: {out}");
    }
    nib.stop().await;
}

/// `find .` and `ls -R` write each folder once: a folder whose entries are
/// listed is not listed again as an entry of its parent.
#[tokio::test]
async fn find_and_ls_r_write_each_folder_once() {
    let dir = project();
    let icons = dir.path().join("assets/img/iconset");
    std::fs::create_dir_all(&icons).unwrap();
    for f in ["a.png", "b.png", "c.png"] {
        std::fs::write(icons.join(f), "x").unwrap();
    }
    std::fs::write(dir.path().join("assets/x.css"), "x").unwrap();
    let nib = start_mode(dir.path(), &[]).await;
    for command in ["find .", "ls -R"] {
        let out = sh(&nib, command).await;
        assert!(
            out.contains("assets/img/iconset/{a.png, b.png, c.png}"),
            "{command}: {out}"
        );
        for folder in ["./assets/\n", "assets/img/iconset/\n", "assets/{img/"] {
            assert!(
                !out.contains(folder),
                "{command}: {folder:?} again in:\n{out}"
            );
        }
    }
    nib.stop().await;
}

/// nibash `cat` of a large real file is cut once, by read's output cap,
/// with file line numbers and read's own hint (it was cut twice, giving
/// rows like `9|8:import sys`), and its rows count as seen for an edit.
#[tokio::test]
async fn cat_of_a_large_file_is_cut_once_with_one_numbering() {
    let dir = project();
    let Some(file) = jdk_source(dir.path(), "java.desktop/java/awt/Component.java") else {
        return;
    };
    let lines = std::fs::read_to_string(&file).unwrap().lines().count();
    assert!(lines > 3000);
    let nib = start_mode(dir.path(), &[]).await;
    let out = sh(&nib, "cat Component.java").await;
    let first = out.lines().next().unwrap_or("");
    assert!(
        first.starts_with("[Component.java#") && first.ends_with(']'),
        "{first}"
    );
    assert!(
        !out.lines().any(|l| {
            let (n, rest) = l.split_once('|').unwrap_or(("", ""));
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && rest.contains(':')
        }),
        "rows were numbered twice:\n{}",
        &out[..out.len().min(2000)]
    );
    assert!(
        out.contains("[cut at the 40 KiB output limit after line")
            && out.contains("read Component.java:"),
        "{}",
        &out[out.len().saturating_sub(500)..]
    );
    // The rows shown are anchors: an edit on one of them is taken.
    let tag = first
        .trim_start_matches("[Component.java#")
        .trim_end_matches(']');
    nib.ok(
        "edit",
        json!({"input": format!("[Component.java#{tag}]\nPUT 30:\n+// edited\n")}),
    )
    .await;
    nib.stop().await;
}

/// A long `git diff` cut by the decider keeps, for every row it keeps,
/// the `[PATH#TAG]` header of the file the row is from (kept rows did not
/// say which file they were in). Real sources, a real repository.
#[tokio::test]
async fn a_cut_git_diff_keeps_each_kept_rows_file_header() {
    let dir = project();
    let p = dir.path();
    let mut names = Vec::new();
    for member in [
        "java.desktop/java/awt/Component.java",
        "java.desktop/javax/swing/JTable.java",
        "java.base/java/util/concurrent/ConcurrentHashMap.java",
    ] {
        match jdk_source(p, member) {
            Some(f) => names.push(f.file_name().unwrap().to_string_lossy().into_owned()),
            None => return,
        }
    }
    git(p, &["init", "-q", "-b", "main"]);
    git(p, &["add", "-A"]);
    git(p, &["commit", "-qm", "jdk sources"]);
    for name in &names {
        let text = std::fs::read_to_string(p.join(name)).unwrap();
        std::fs::write(
            p.join(name),
            text.replace("        return ", "        return /* checked */ "),
        )
        .unwrap();
    }
    let nib = start_mode(p, &[]).await;
    let out = sh(&nib, "git diff").await;
    let log = out
        .lines()
        .next()
        .and_then(|l| l.split(", whole in ").nth(1))
        .map(|l| l.trim_end_matches(']'))
        .unwrap_or_else(|| panic!("the diff was not cut:\n{}", &out[..out.len().min(1000)]));
    let whole = std::fs::read_to_string(log).unwrap();
    let mut file_of = Vec::new();
    let mut current = String::new();
    for l in whole.lines() {
        if l.starts_with('[') && l.contains(".java#") {
            current = l.to_string();
        }
        file_of.push(current.clone());
    }
    let mut shown_header = String::new();
    let mut checked = 0;
    for l in out.lines().skip(1) {
        let Some((n, row)) = l.split_once('|') else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else {
            continue;
        };
        if row.starts_with('[') && row.contains(".java#") {
            shown_header = row.to_string();
            continue;
        }
        assert_eq!(
            shown_header,
            file_of[n - 1],
            "row {n} ({row}) is shown under the wrong header"
        );
        checked += 1;
    }
    assert!(checked > 50, "{out}");
    nib.stop().await;
}

/// A failure whose stderr was discarded is named in the closing line only
/// when the script leaves it unhandled: one the script tests (`if`, `!`,
/// `||`, `while`) is the script's to handle, as bash says nothing of it.
#[tokio::test]
async fn a_discarded_failure_the_script_tests_is_not_named() {
    let dir = project();
    let nib = start_mode(dir.path(), &[]).await;
    for handled in [
        "if ! grep -q zzz missing.txt 2>/dev/null; then echo missing; fi",
        "grep -q zzz missing.txt 2>/dev/null || echo missing",
        "while grep -q zzz missing.txt 2>/dev/null; do :; done; echo missing",
        "if cat missing.txt 2>/dev/null; then :; else echo missing; fi",
    ] {
        let out = sh(&nib, handled).await;
        assert_eq!(out, "missing\n", "{handled}");
    }
    let out = sh(&nib, "cat missing.txt 2>/dev/null; echo after").await;
    assert!(
        out.starts_with("after\n") && out.contains("cat exited 1, its stderr discarded"),
        "{out}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn the_status_as_json_names_calls_trash_names_usage_and_seen_lines_and_stops_a_job() {
    let dir = project();
    std::fs::write(dir.path().join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    let nib = start_mode(dir.path(), &[]).await;
    nib.ok("read", json!({"paths": ["notes.txt:2"]})).await;
    sh(&nib, "echo gone > old.txt; rm old.txt").await;
    let started = nib
        .ok(
            "nibash",
            json!({"command": "echo begun; sleep 3; touch canary", "background": true}),
        )
        .await;
    let id = job_id(&started);
    let text = nib.ok("nibash_status", json!({"format": "json"})).await;
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let call = doc["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no call {id} in {doc}"));
    assert_eq!(call["state"], "job", "{doc}");
    assert_eq!(call["command"], "echo begun; sleep 3; touch canary");
    assert!(
        doc["trash"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["path"].as_str().is_some_and(|p| p.ends_with("old.txt"))),
        "{doc}"
    );
    let seen = doc["seen"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "notes.txt")
        .cloned()
        .unwrap_or_else(|| panic!("notes.txt not seen in {doc}"));
    assert_eq!(seen["seen"], json!([[2, 2]]), "{doc}");
    assert_eq!(seen["lines"], 3);
    assert!(
        doc["usage"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["tool"] == "nibash" && u["chars"].as_u64() > Some(0)),
        "{doc}"
    );
    assert!(doc["names"].is_array(), "{doc}");
    // Stopping the job ends it before it writes.
    let stopped = nib
        .ok("nibash_control", json!({"stop": format!("%{id}")}))
        .await;
    assert!(stopped.contains(&format!("stopped %{id}")), "{stopped}");
    std::thread::sleep(Duration::from_millis(3500));
    assert!(!dir.path().join("canary").exists(), "a stopped job went on");
    let again = nib.call("nibash_control", json!({"stop": "%999"})).await;
    assert!(
        again.1 && again.0.contains("nothing was stopped"),
        "{again:?}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn the_trash_names_only_what_came_from_the_roots_in_every_mode() {
    let modes = EVERY_MODE;
    for env in modes {
        let dir = project();
        std::fs::write(dir.path().join("mine.txt"), "mine\n").unwrap();
        let nib = start_mode(dir.path(), env).await;
        sh(&nib, "rm mine.txt").await;
        // Another project's file, trashed by the same user: its name is the canary.
        let info = nib.trash_files().with_file_name("info");
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(
            info.join("canary-plan.txt.trashinfo"),
            "[Trash Info]\nPath=/srv/other-project/canary-plan.txt\nDeletionDate=2026-12-01T10:00:00\n",
        )
        .unwrap();
        let listed = sh(&nib, "trash list").await;
        assert!(listed.contains("mine.txt"), "{env:?} {listed}");
        assert!(!listed.contains("canary-plan"), "{env:?} {listed}");
        let status = nib.ok("nibash_status", json!({"format": "json"})).await;
        assert!(status.contains("mine.txt"), "{env:?} {status}");
        assert!(!status.contains("canary-plan"), "{env:?} {status}");
        nib.stop().await;
    }
}

/// Reads nibash_status until its warm-worker line says `want` are ready
/// (or 20 s pass); returns the last line seen.
async fn wait_for_warm(nib: &Nib, want: usize) -> String {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, _) = nib.call("nibash_status", json!({})).await;
        let line = status
            .lines()
            .find(|l| l.starts_with("warm workers:"))
            .unwrap_or("")
            .to_string();
        if line.starts_with(&format!("warm workers: {want} ready"))
            || std::time::Instant::now() > until
        {
            return line;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `n` nibash calls at once, as a turn's parallel tool calls come; each must
/// answer its own.
async fn burst(nib: &Nib, n: usize, mode: &[(&str, &str)]) {
    let calls = (0..n).map(|i| nib.call("nibash", json!({"command": format!("echo burst {i}")})));
    for (i, (text, _)) in futures::future::join_all(calls).await.iter().enumerate() {
        assert!(text.contains(&format!("burst {i}")), "{mode:?}: {text}");
    }
}

#[tokio::test]
async fn warm_workers_are_ready_before_the_first_call_and_follow_a_burst() {
    for mode in EVERY_MODE {
        let dir = project();
        let nib = start_with(
            Era::Handshake,
            dir.path(),
            TestClient::new(Roots::Undeclared),
            mode,
        )
        .await;
        // One is started with the session, before any call.
        let line = wait_for_warm(&nib, 1).await;
        assert!(
            line.starts_with("warm workers: 1 ready"),
            "{mode:?}: {line}"
        );
        // A turn's eight calls at once (more than the four once kept):
        // afterwards eight are ready.
        burst(&nib, 8, mode).await;
        let line = wait_for_warm(&nib, 8).await;
        assert!(
            line.starts_with("warm workers: 8 ready"),
            "{mode:?}: {line}"
        );
        nib.stop().await;
    }
}

/// Under a low open-file limit the pool keeps to its share of the broker's
/// descriptors: a burst of eight leaves four ready, not eight, and the
/// broker stays far from the limit (each ready worker holds seven).
#[tokio::test]
async fn warm_workers_keep_to_their_share_of_a_low_descriptor_limit() {
    for mode in EVERY_MODE {
        let dir = project();
        let nib = start_mode(dir.path(), mode).await;
        let pid = nib.pid.expect("the broker's pid");
        let limited = std::process::Command::new("prlimit")
            .args(["--pid", &pid.to_string(), "--nofile=256:256"])
            .status()
            .expect("prlimit runs");
        assert!(limited.success(), "{mode:?}");
        burst(&nib, 8, mode).await;
        wait_for_warm(&nib, 4).await;
        // Given time to start more, it does not.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let line = wait_for_warm(&nib, 4).await;
        assert!(
            line.starts_with("warm workers: 4 ready") && line.contains("at most 4,"),
            "{mode:?}: {line}"
        );
        let held = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
        assert!(
            held < 128,
            "{mode:?}: the broker holds {held} of 256 descriptors"
        );
        nib.stop().await;
    }
}

/// The call init (host pid) of the call whose program runs with command
/// line `program` (its arguments joined by NUL) under `root`: the parent
/// of the nearest `__nibash` ancestor of that program.
fn call_init_running(root: u32, program: &[u8]) -> Option<u32> {
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 2..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let cmdline = |pid: u32| std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let found = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| cmdline(*pid).strip_suffix(b"\0") == Some(program))?;
    let mut at = found;
    let mut chain = Vec::new();
    while let Some(p) = parent(at) {
        if p <= 1 {
            return None;
        }
        chain.push(p);
        if p == root {
            break;
        }
        at = p;
    }
    if chain.last() != Some(&root) {
        return None;
    }
    let worker = chain
        .iter()
        .position(|p| cmdline(*p).split(|b| *b == 0).any(|a| a == b"__nibash"))?;
    chain.get(worker + 1).copied()
}

/// The session's zygote: a descendant of `root` run as `nib __nibash
/// --zygote` whose parent is not (its call inits and workers keep its
/// command line); the newest, when a zygote was replaced.
fn zygote_of(root: u32) -> Option<u32> {
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 2..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let zygote_line = |pid: u32| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
            let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            args.windows(2)
                .any(|w| w[0] == b"__nibash" && w[1] == b"--zygote")
        })
    };
    let descends = |mut pid: u32| {
        while let Some(p) = parent(pid) {
            if p == root {
                return true;
            }
            if p <= 1 {
                return false;
            }
            pid = p;
        }
        false
    };
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| zygote_line(*pid) && !parent(*pid).is_some_and(zygote_line))
        .filter(|pid| descends(*pid))
        .max()
}

/// Issue 58: `kill -STOP` on the zygote once hung nibash for the rest of
/// the session (a fork request waited without bound, holding a lock, and a
/// call's timeout started only once it had a worker). Now a zygote that
/// does not answer is let go and another forks the call: every later call
/// answers within its timeout, in every mode.
#[tokio::test]
async fn a_stopped_zygote_does_not_hang_later_calls() {
    let modes = EVERY_MODE;
    for env in modes {
        let dir = project();
        let nib = start_mode(dir.path(), env).await;
        let warm = sh(&nib, "echo warm").await;
        assert!(warm.starts_with("warm\n"), "{env:?}: {warm}");
        let zygote = zygote_of(nib.pid.expect("pid")).expect("the session's zygote");
        let stopped = std::process::Command::new("kill")
            .args(["-STOP", &zygote.to_string()])
            .status()
            .unwrap();
        assert!(stopped.success());
        for i in 0..4 {
            let asked = std::time::Instant::now();
            let answer = tokio::time::timeout(
                Duration::from_secs(8),
                nib.call(
                    "nibash",
                    json!({"command": format!("echo after{i}"), "timeout": 5}),
                ),
            )
            .await;
            let took = asked.elapsed();
            let (text, _) = answer.unwrap_or_else(|_| {
                panic!("{env:?}: call {i} after the zygote stopped got no answer in 8 s")
            });
            assert!(
                took < Duration::from_secs(6),
                "{env:?}: call {i} took {took:?} ({text})"
            );
            assert!(
                text.contains(&format!("after{i}")),
                "{env:?}: call {i}: {text}"
            );
        }
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &zygote.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
        nib.stop().await;
    }
}

/// What a call's program tries on every other nibash process it can see:
/// take its fds (pidfd_getfd), read its memory (/proc/PID/mem at a mapped
/// address, process_vm_readv) and stop it (SIGSTOP, undone at once with
/// SIGCONT); then it reads the environment of every other process it sees,
/// nib's or a program's (another call's proxy token); a line for each that
/// worked. Its own worker (the nearest `__nibash` ancestor) is left out:
/// it is the call's own.
const REACH: &str = r#"
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def parent(pid):
    s = open(f"/proc/{pid}/stat").read()
    return int(s[s.rfind(")") + 2:].split()[1])
def nibash(pid):
    try:
        return b"__nibash" in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return False
own, p = None, os.getpid()
while p > 1 and own is None:
    p = parent(p)
    if nibash(p):
        own = p
seen = 0
for d in os.listdir("/proc"):
    if not d.isdigit() or int(d) in (os.getpid(), own) or not nibash(int(d)):
        continue
    pid = int(d)
    seen += 1
    pidfd = libc.syscall(434, pid, 0)
    if pidfd >= 0:
        for fd in range(256):
            got = libc.syscall(438, pidfd, fd, 0)
            if got >= 0:
                print(f"REACHED {pid}: fd {fd} taken")
                os.close(got)
                break
    try:
        start = int(open(f"/proc/{pid}/maps").readline().split("-")[0], 16)
        with open(f"/proc/{pid}/mem", "rb") as m:
            m.seek(start)
            if m.read(8):
                print(f"REACHED {pid}: memory read")
    except OSError:
        pass
    buf = ctypes.create_string_buffer(8)
    class Iov(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    local = Iov(ctypes.cast(buf, ctypes.c_void_p), 8)
    try:
        remote = Iov(start, 8)
        if libc.syscall(310, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
            print(f"REACHED {pid}: process_vm_readv")
    except NameError:
        pass
    try:
        os.kill(pid, signal.SIGSTOP)
        os.kill(pid, signal.SIGCONT)
        print(f"REACHED {pid}: stopped")
    except OSError:
        pass
# Every other process's environment, nib's or a program's (the job's
# sleep holds that call's own token): none is readable.
for d in os.listdir("/proc"):
    if not d.isdigit() or int(d) in (os.getpid(), own):
        continue
    try:
        env = open(f"/proc/{d}/environ", "rb").read().split(b"\0")
    except OSError:
        continue
    theirs = [e for e in env if e.startswith(b"HTTP_PROXY=")]
    if theirs and theirs[0].decode() != "HTTP_PROXY=" + os.environ.get("HTTP_PROXY", ""):
        print(f"REACHED {d}: another call's proxy token")
print(f"looked at {seen}")
print("own token", "yes" if "@" in os.environ.get("HTTP_PROXY", "") else "no")
"#;

/// Issue 58: a call's programs cannot reach the zygote, a call init or
/// another call's worker (a background job's, still running): no fd taken
/// (the zygote's control socket carries every call's fork and proxy
/// token), no memory read, no signal — so no forged answer can reach the
/// client — and no other process's environment read (nib's processes hold
/// the zygote's proxy token, the job's programs their call's), under
/// bubblewrap and with Landlock + seccomp alone, as root.
#[tokio::test]
async fn a_call_cannot_reach_the_zygote_or_another_calls_worker() {
    // With a host allowed, each call's worker holds its own proxy token
    // (in its environment and on the zygote's control socket): another
    // call's token is a canary too.
    let modes: [&[(&str, &str)]; 2] = [
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_NETWORK", "127.0.0.1")],
        &[
            ("NIB_SANDBOX", "1"),
            ("NIB_SANDBOX_BWRAP", "0"),
            ("NIB_SANDBOX_NETWORK", "127.0.0.1"),
        ],
    ];
    for env in modes {
        let dir = project();
        std::fs::write(dir.path().join("reach.py"), REACH).unwrap();
        let nib = start_mode(dir.path(), env).await;
        // Another call, still running as a job.
        let job = nib
            .ok(
                "nibash",
                json!({"command": "sleep 20; echo job", "timeout": 1}),
            )
            .await;
        assert!(job.contains("job %"), "{env:?}: {job}");
        let out = sh(&nib, "python3 reach.py").await;
        let looked: usize = out
            .lines()
            .find_map(|l| l.strip_prefix("looked at "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{env:?}: the probe did not run: {out}"));
        // The zygote, two call inits and the job's worker at least.
        assert!(looked >= 4, "{env:?}: saw only {looked} processes: {out}");
        assert!(
            out.contains("own token yes"),
            "{env:?}: no token to guard: {out}"
        );
        let reached: Vec<&str> = out.lines().filter(|l| l.starts_with("REACHED")).collect();
        assert!(reached.is_empty(), "{env:?}: {out}");
        // The session goes on, answered by its own workers.
        let alive = sh(&nib, "echo alive").await;
        assert!(alive.starts_with("alive\n"), "{env:?}: {alive}");
        nib.stop().await;
    }
}

/// Renames and links into another folder work in every mode: a Landlock
/// layer that does not grant reparenting denies it (EXDEV), even one that
/// handles nothing of the file system, like the call's own domain nested in
/// the zygote's (before: `mv a/x b/` and rustc's metadata failed in every
/// sandboxed call).
#[tokio::test]
async fn files_move_and_link_between_folders_in_every_mode() {
    for mode in [
        &[("NIB_SANDBOX", "0")][..],
        &[("NIB_SANDBOX", "1")][..],
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")][..],
    ] {
        let dir = project();
        let nib = start_with(
            Era::Handshake,
            dir.path(),
            TestClient::new(Roots::Undeclared),
            mode,
        )
        .await;
        let out = nib
            .ok(
                "nibash",
                json!({"command": "mkdir -p a b && echo x > a/f && mv a/f b/f && ln b/f a/g && echo done"}),
            )
            .await;
        assert!(out.contains("done"), "{mode:?}: {out}");
        assert!(dir.path().join("b/f").exists() && dir.path().join("a/g").exists());
    }
}
