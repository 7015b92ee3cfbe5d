//! The CLI verbs print exactly what the tools return.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::*;
use crate::read::VECTORS;

fn nib(dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (String, String, i32) {
    nib_with(dir, args, stdin, &[])
}

/// `nib ARGS` in `dir` with extra environment variables.
fn nib_with(
    dir: &std::path::Path,
    args: &[&str],
    stdin: Option<&str>,
    env: &[(&str, &std::path::Path)],
) -> (String, String, i32) {
    let mut child = nib_command()
        .args(args)
        .current_dir(dir)
        .env_remove("NIB_DIRECTORY")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nib");
    if let Some(input) = stdin {
        child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn read_prints_each_design_vector_tag() {
    let dir = project();
    for (name, bytes, _) in VECTORS {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    for (name, _, tag) in VECTORS {
        let (out, _, code) = nib(dir.path(), &["read", name], None);
        assert_eq!(code, 0);
        assert_eq!(out.lines().next(), Some(format!("[{name}#{tag}]").as_str()));
    }
}

#[test]
fn write_reads_stdin_and_exit_codes_follow_errors() {
    let dir = project();
    let (out, _, code) = nib(dir.path(), &["write", "x/a.txt"], Some("hello\n"));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with(&format!("[x/a.txt#{}]", expected_tag(b"hello\n"))),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x/a.txt")).unwrap(),
        "hello\n"
    );

    let (out, _, code) = nib(dir.path(), &["write", "x/a.txt"], Some("bye\n"));
    assert_eq!(code, 1, "overwriting without a tag is a tool error: {out}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x/a.txt")).unwrap(),
        "hello\n"
    );

    let tag = expected_tag(b"hello\n");
    let (_, _, code) = nib(
        dir.path(),
        &["write", "--tag", &tag, "x/a.txt"],
        Some("bye\n"),
    );
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x/a.txt")).unwrap(),
        "bye\n"
    );

    let (_, err, code) = nib(dir.path(), &["read"], None);
    assert_eq!(code, 2);
    assert!(err.contains("usage"), "{err}");
}

#[test]
fn version_and_project_directory() {
    let dir = project();
    let (out, _, code) = nib(dir.path(), &["--version"], None);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), format!("nib {}", env!("CARGO_PKG_VERSION")));

    std::fs::create_dir(dir.path().join("proj")).unwrap();
    std::fs::write(dir.path().join("proj/f.txt"), "in project\n").unwrap();
    let out = nib_command()
        .args(["read", "f.txt"])
        .current_dir("/")
        .env("NIB_DIRECTORY", dir.path().join("proj"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.starts_with("[f.txt#") && out.contains("1:in project"),
        "{out}"
    );
}

#[test]
fn grep_and_find_verbs() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "one\nneedle\nthree\n").unwrap();
    let (out, _, code) = nib(dir.path(), &["grep", "-C", "0", "needle"], None);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        format!(
            "1 match in 1 file\n\n[a.txt#{}]\n*2:needle\n",
            expected_tag(b"one\nneedle\nthree\n")
        )
    );
    let (out, _, code) = nib(dir.path(), &["find", "--glob", "*.txt"], None);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("1 file, by path\n\na.txt (3 lines, 17 B, "),
        "{out}"
    );
    // Nothing matched: exit 1, as grep and rg (with --json too).
    let (out, _, code) = nib(dir.path(), &["grep", "haystack"], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("no matches in 1 file"), "{out}");
    let (out, _, code) = nib(dir.path(), &["grep", "--json", "haystack"], None);
    assert_eq!(code, 1, "{out}");
    let (_, err, code) = nib(dir.path(), &["grep"], None);
    assert_eq!(code, 2);
    assert!(err.contains("PATTERN"), "{err}");
}

#[test]
fn doctor_reports_the_layers() {
    let dir = project();
    let (out, _, code) = nib(dir.path(), &["doctor"], None);
    assert_eq!(code, 0, "{out}");
    for line in [
        "bubblewrap: ",
        "Landlock ABI: ",
        "seccomp: ",
        "PID namespace: ",
        "mode: unconfined (NIB_SANDBOX=0)",
        "exec-time rules: ",
    ] {
        assert!(out.contains(line), "{line}: {out}");
    }
    // Unconfined where a layer could confine: doctor says how to turn it on.
    if out.contains("seccomp: yes") {
        assert!(
            out.contains("to confine programs: remove NIB_SANDBOX=0"),
            "{out}"
        );
    }
    // NIB_SANDBOX_BWRAP=0 names the mode without bubblewrap.
    let out = nib_command()
        .arg("doctor")
        .current_dir(dir.path())
        .env("NIB_SANDBOX", "1")
        .env("NIB_SANDBOX_BWRAP", "0")
        .output()
        .expect("spawn nib");
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.contains("mode: NIB_SANDBOX=1: Landlock ABI")
            && out.contains("(bubblewrap off: NIB_SANDBOX_BWRAP=0)"),
        "{out}"
    );
    assert!(!out.contains("to confine programs"), "{out}");
}

/// A verb's `--help` page says what it does and what each option means
/// (every verb has one: see below); a verb used wrongly shows its own usage,
/// not every verb's.
#[test]
fn each_verb_has_a_help_page_and_a_wrong_use_shows_its_own_usage() {
    let dir = project();
    let (out, _, _) = nib(dir.path(), &["edit", "--help"], None);
    assert!(
        out.contains("PUT N:") && out.contains("SUB N: OLD") && out.contains("REAPPLY"),
        "{out}"
    );
    let (out, _, _) = nib(dir.path(), &["grep", "--help"], None);
    assert!(
        out.contains("--replace R") && out.contains("1 when"),
        "{out}"
    );
    let (_, err, code) = nib(dir.path(), &["grep"], None);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("grep needs a PATTERN")
            && err.contains("  nib grep [-i]")
            && err.contains("nib grep --help")
            && !err.contains("nib setup [--user]"),
        "{err}"
    );
    // A tool's argument error names the flag the person typed.
    let (_, err, code) = nib(dir.path(), &["find", "--min-size", "lots"], None);
    assert_ne!(code, 0);
    assert!(
        err.contains("nib find: --min-size is a size") && !err.contains("minSize"),
        "{err}"
    );
    let (_, err, _) = nib(dir.path(), &["sh", "--timeout", "forever", "true"], None);
    assert!(err.starts_with("nib sh: --timeout is"), "{err}");
    // A word that is no verb still gets every verb's usage.
    let (_, err, code) = nib(dir.path(), &["frobnicate"], None);
    assert_eq!(code, 2);
    assert!(err.contains("nib setup [--user]"), "{err}");
}

#[test]
fn nib_is_its_own_worker_entry() {
    // The sandbox re-executes nib with the entry argument; a confined echo runs
    // and a write outside the root is refused.
    let dir = project();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let policy = nib_sandbox::Policy {
        confine: true,
        writable: vec![root.clone()],
        use_bwrap: nib_sandbox::bwrap_usable(),
        ..nib_sandbox::Policy::default()
    };
    let sandbox = nib_sandbox::Sandbox::new(&nib_bin(), policy);
    let w = sandbox
        .spawn(&["echo".into(), "confined".into()], &root, &[])
        .unwrap();
    let o = w.wait(Some(std::time::Duration::from_secs(20)));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "confined\n",
        "{:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    let target = outside.path().join("x");
    let w = sandbox
        .spawn(
            &[
                "sh".into(),
                "-c".into(),
                format!("echo x > {}", target.display()).into(),
            ],
            &root,
            &[],
        )
        .unwrap();
    let o = w.wait(Some(std::time::Duration::from_secs(20)));
    assert_ne!(o.code, Some(0));
    assert!(!target.exists());
}

#[test]
fn nib_sh_runs_one_call_and_exits_with_its_status_and_nib_shape_cuts_a_log() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(nib_bin());
        cmd.args(args)
            .current_dir(dir.path())
            .env_remove("NIB_DIRECTORY");
        for (k, v) in isolated_env(home.path()) {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let o = run(&["sh", "cat a.txt"]);
    let tag = expected_tag(b"one\ntwo\n");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("[a.txt#{tag}]\n1:one\n2:two\n")
    );
    assert_eq!(o.status.code(), Some(0));
    let o = run(&["sh", "echo out; exit 7"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n[exit 7]\n");
    assert_eq!(o.status.code(), Some(7));

    let log: String = (1..=1000)
        .map(|i| {
            if i == 600 {
                "FAILED test_x\n".to_string()
            } else {
                format!("ok {i}\n")
            }
        })
        .collect();
    std::fs::write(dir.path().join("build.log"), &log).unwrap();
    let o = run(&[
        "shape",
        "--log",
        "build.log",
        "--purpose",
        "which tests failed",
        "--exit",
        "1",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("1|ok 1\n") && text.contains("600|FAILED test_x\n"),
        "{text}"
    );
    // Passing rows around the failure are not its context.
    assert!(text.contains("read build.log:11-599 plain:true"), "{text}");
    assert!(text.ends_with("1000|ok 1000\n[exit 1]\n"), "{text}");
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn tokens_printed_by_one_verb_apply_in_the_next_process() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "old one\nkeep\nold two\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let run = |args: &[&str], stdin: Option<&str>| {
        let (out, _, code) = nib_with(dir.path(), args, stdin, &[("NIB_STATE_DIR", state.path())]);
        (out, code)
    };
    let (preview, _) = run(&["grep", "--replace", "new", "old", "."], None);
    let token = preview
        .split("REAPPLY ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_alphanumeric()).next())
        .unwrap_or_else(|| panic!("no token in {preview}"))
        .to_string();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "old one\nkeep\nold two\n",
        "a preview writes nothing"
    );
    let (out, code) = run(&["edit"], Some(&format!("REAPPLY {token}\n")));
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "new one\nkeep\nnew two\n",
        "{out}"
    );
    // Used up: a second REAPPLY is refused, and the answer ends its line.
    let (out, code) = run(&["edit"], Some(&format!("REAPPLY {token}\n")));
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("no refused edit has this token") && out.ends_with('\n'),
        "{out:?}"
    );
    // The token folder holds no file text.
    for e in std::fs::read_dir(state.path().join("cli-tokens"))
        .into_iter()
        .flatten()
    {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        assert!(!text.contains("keep"), "{text}");
    }
}

#[test]
fn json_answers_name_the_files_written_with_their_tags() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    let (out, _, code) = nib(dir.path(), &["read", "--json", "a.txt"], None);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["is_error"], false);
    let tag = expected_tag(b"one\ntwo\n");
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains(&format!("[a.txt#{tag}]"))
    );
    let patch = format!("[a.txt#{tag}]\nPUT 2:\n+TWO\n*** Add File: b.txt\n+bee\n");
    let (out, _, code) = nib(dir.path(), &["edit", "--json"], Some(&patch));
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let written: Vec<(String, String)> = v["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["path"].as_str().unwrap().into(),
                w["tag"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        written,
        [
            ("a.txt".to_string(), expected_tag(b"one\nTWO\n")),
            ("b.txt".to_string(), expected_tag(b"bee\n"))
        ]
    );
    // An error is an object too, with its status.
    let (out, _, code) = nib(
        dir.path(),
        &["edit", "--json"],
        Some("[a.txt#0000]\nPUT 1:\n+x\n"),
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((v["is_error"].as_bool(), code), (Some(true), 1), "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "one\nTWO\n"
    );
}

/// A command's output is the model's: to a terminal (a pty, through
/// `script`) its control bytes are written out; to a pipe they are the
/// bytes, as `cat` gives them.
#[test]
fn answers_to_a_terminal_show_control_bytes_and_pipes_get_them() {
    let dir = project();
    let command = r"printf 'title \033]0;owned\007 clear \033[2J clip \033]52;c;Y3VybA==\007\n'";
    let (piped, _, code) = nib(dir.path(), &["sh", command], None);
    assert_eq!(code, 0, "{piped}");
    assert!(piped.contains("\x1b]0;owned\x07"), "{piped:?}");
    let line = format!("{} sh \"{command}\"", nib_bin().display());
    let home = tempfile::tempdir().unwrap();
    let tty = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(dir.path())
        .env_remove("NIB_DIRECTORY")
        .envs(isolated_env(home.path()))
        .stdin(Stdio::null())
        .output()
        .expect("script runs");
    let shown = String::from_utf8_lossy(&tty.stdout).into_owned();
    assert!(
        !tty.stdout.iter().any(|b| *b == 0x1b || *b == 0x07),
        "control bytes reached the terminal: {shown:?}"
    );
    assert!(shown.contains("title \\x1b]0;owned\\x07"), "{shown:?}");
}

/// Every verb answers `--help` with its own usage (it answered "has no
/// option --help"); `skim` is a verb like the other tools.
#[test]
fn every_verb_prints_its_usage_for_help_and_skim_is_a_verb() {
    let dir = project();
    for verb in [
        "read",
        "write",
        "edit",
        "grep",
        "find",
        "sh",
        "skim",
        "shape",
        "undo",
        "doctor",
        "statusline",
        "setup",
        "hook",
    ] {
        for flag in ["--help", "-h"] {
            let (out, err, code) = nib(dir.path(), &[verb, flag], None);
            assert_eq!(code, 0, "nib {verb} {flag}: {out}{err}");
            // Its usage, then a page: what it does, what each option means.
            assert!(
                out.starts_with(&format!("usage:\n  nib {verb}")) && out.lines().count() > 4,
                "nib {verb} {flag}: {out}"
            );
        }
    }
    std::fs::write(
        dir.path().join("build.log"),
        "Compiling app\nerror[E0308]: mismatched types\n --> src/main.rs:3:5\nerror: could not compile `app`\n",
    )
    .unwrap();
    let (out, err, code) = nib(
        dir.path(),
        &["skim", "--expect", "did the build pass", "build.log"],
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("mismatched types"), "{out}");
}

/// `nib sh` keeps no server: `--background` is refused saying why, and at
/// `--timeout` the command is stopped (exit 124) — it did say a job
/// started, and the job died with the process. What the line leaves
/// running with `&` is waited for, as `bash -c` leaves it to finish.
#[test]
fn nib_sh_stops_at_its_timeout_and_refuses_background() {
    let dir = project();
    let (out, err, code) = nib(dir.path(), &["sh", "--background", "touch bg.txt"], None);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no --background"), "{err}");
    assert!(!dir.path().join("bg.txt").exists());

    let (out, err, code) = nib(
        dir.path(),
        &[
            "sh",
            "--timeout",
            "1",
            "echo started; sleep 3; touch late.txt",
        ],
        None,
    );
    assert_eq!(code, 124, "{out}{err}");
    assert!(
        out.starts_with("started\n") && out.contains("[stopped after 1s"),
        "{out}"
    );
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert!(
        !dir.path().join("late.txt").exists(),
        "the command went on after nib sh said it stopped"
    );

    let (out, err, code) = nib(
        dir.path(),
        &[
            "sh",
            "sh -c 'sleep 1; echo done > later.txt; exit 4' & echo fg",
        ],
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("fg\n"), "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("later.txt")).unwrap(),
        "done\n"
    );
}

/// Smaller defects of real use: a line range of a file over 8 MiB is read
/// (it was refused outright), write onto a binary file says it is binary
/// (it asked for a tag read cannot give), and an unknown `~NAME` is named
/// as such (it was only "no such file or folder").
#[test]
fn large_files_binary_files_and_unknown_names_get_clear_answers() {
    let dir = project();
    let mut log = String::new();
    let mut i = 0;
    while log.len() < 9 << 20 {
        i += 1;
        log.push_str(&format!("request {i} served in {} ms\n", i % 97));
    }
    std::fs::write(dir.path().join("server.log"), &log).unwrap();
    let (out, err, code) = nib(
        dir.path(),
        &["read", "server.log:100-102", "server.log:-1"],
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("100|request 100 served in 3 ms\n101|")
            && out.contains(&format!("{i}|request {i} served")),
        "{out}"
    );
    let png = [&b"\x89PNG\r\n\x1a\n"[..], &[0u8; 64]].concat();
    std::fs::write(dir.path().join("logo.png"), &png).unwrap();
    let (out, _, code) = nib(dir.path(), &["write", "logo.png"], Some("text\n"));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("is a PNG image") && !out.contains("pass the tag"),
        "{out}"
    );
    assert_eq!(std::fs::read(dir.path().join("logo.png")).unwrap(), png);
    let (out, _, code) = nib(dir.path(), &["read", "~time/DateUtils.java"], None);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("~time is not a name here"), "{out}");
}

/// `nib undo` puts nib's last change back, file by file, only where the file
/// still holds what nib wrote (a file nib made goes to the trash); `--list`
/// numbers the changes; an edit against the tag an undone change gave is
/// refused, not rebased.
#[test]
fn nib_undo_puts_back_what_nib_wrote_and_only_that() {
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let env: &[(&str, &std::path::Path)] = &[
        ("NIB_STATE_DIR", &home.path().join("state")),
        ("HOME", home.path()),
        ("XDG_DATA_HOME", &home.path().join("data")),
    ];
    let original = "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n";
    std::fs::write(dir.path().join("Cargo.toml"), original).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "keep\n").unwrap();
    let tag_of = |out: &str| out.split('#').nth(1).unwrap()[..4].to_string();
    let (out, _, _) = nib_with(dir.path(), &["read", "Cargo.toml", "notes.txt"], None, env);
    let tags: Vec<String> = out
        .lines()
        .filter(|l| l.starts_with('['))
        .map(tag_of)
        .collect();
    // One edit changes two files; a write makes a third.
    let patch = format!(
        "[Cargo.toml#{}]\nSUB 3: 0.1.0\n+0.2.0\n[notes.txt#{}]\nPUT 1:\n+changed by nib\n",
        tags[0], tags[1]
    );
    let (out, _, code) = nib_with(dir.path(), &["edit"], Some(&patch), env);
    assert_eq!(code, 0, "{out}");
    let edited_tag = tag_of(&out);
    let (out, _, code) = nib_with(dir.path(), &["write", "made.txt"], Some("by nib\n"), env);
    assert_eq!(code, 0, "{out}");
    let (list, _, _) = nib_with(dir.path(), &["undo", "--list"], None, env);
    assert!(
        list.starts_with("1: write ") && list.contains("made.txt") && list.contains("2: edit "),
        "{list}"
    );
    // Someone changes notes.txt after nib.
    std::fs::write(dir.path().join("notes.txt"), "changed by a person\n").unwrap();
    let (out, _, code) = nib_with(dir.path(), &["undo"], None, env);
    assert_eq!(code, 0, "{out}");
    assert!(!dir.path().join("made.txt").exists(), "{out}");
    let (out, _, code) = nib_with(dir.path(), &["undo"], None, env);
    assert_eq!(code, 1, "one file was left: {out}");
    assert!(
        out.contains("notes.txt: changed since nib wrote it"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("Cargo.toml")).unwrap(),
        original
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "changed by a person\n"
    );
    // The tag nib's edit gave is refused now, with the current rows.
    let patch = format!("[Cargo.toml#{edited_tag}]\nPUT 2:\n+name = \"other\"\n");
    let (out, _, code) = nib_with(dir.path(), &["edit"], Some(&patch), env);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("was put back by nib undo"), "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("Cargo.toml")).unwrap(),
        original
    );
}

/// `nib` with no verb serves MCP on stdin; typed at a terminal it says so
/// (and how to set it up) on stderr, where an MCP client's pipe gets
/// nothing extra.
#[test]
fn a_bare_nib_at_a_terminal_says_what_it_waits_for() {
    let dir = project();
    let exe = nib_bin();
    // util-linux's `script` gives nib a terminal as stdin.
    let Ok(out) = std::process::Command::new("script")
        .args(["-qec", &exe.display().to_string(), "/dev/null"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
    else {
        crate::common::skip("script (util-linux) is not installed");
        return;
    };
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("serving MCP on stdin") && said.contains("nib setup"),
        "{said}"
    );
    // From a pipe (an MCP client), stderr stays quiet.
    let (_, err, _) = nib(dir.path(), &[], Some(""));
    assert!(!err.contains("serving MCP"), "{err}");
}

/// Under the sandbox, a file a program writes to its temp folder goes to
/// nib's private /tmp: `nib sh` names it, and that it is removed with the
/// call (both sandbox modes; unconfined, nothing is said).
#[test]
fn nib_sh_names_what_went_to_the_private_tmp() {
    let dir = project();
    for env in [
        &[("NIB_SANDBOX", "1")][..],
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
    ] {
        let out = nib_command()
            .args(["sh", "echo hi > \"$TMPDIR/nib-note-test.txt\"; echo done"])
            .current_dir(dir.path())
            .envs(env.iter().copied())
            .output()
            .expect("spawn nib");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("done")
                && text.contains("nib-note-test.txt went to nib's private /tmp")
                && text.contains("removed when this nib sh ends"),
            "{env:?}: {text}"
        );
        // A call that writes nothing there says nothing of it.
        let out = nib_command()
            .args(["sh", "echo quiet"])
            .current_dir(dir.path())
            .envs(env.iter().copied())
            .output()
            .expect("spawn nib");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("private /tmp"), "{env:?}: {text}");
    }
    let (out, _, _) = nib(
        dir.path(),
        &[
            "sh",
            "echo hi > \"${TMPDIR:-/tmp}/nib-note-unconfined.txt\"",
        ],
        None,
    );
    assert!(!out.contains("private /tmp"), "{out}");
    let _ = std::fs::remove_file(std::env::temp_dir().join("nib-note-unconfined.txt"));
}

/// Each `nib` process starts afresh: a stale tag's refusal says so, not
/// that the person "was not shown" the version they just read.
#[test]
fn a_stale_tag_on_the_command_line_says_each_command_starts_afresh() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), "a\nb\n").unwrap();
    let (out, _, code) = nib(dir.path(), &["read", "f.txt"], None);
    assert_eq!(code, 0, "{out}");
    let old = expected_tag(b"a\nb\n");
    std::fs::write(dir.path().join("f.txt"), "a\nc\n").unwrap();
    let patch = format!("[f.txt#{old}]\nPUT 1:\n+x\n");
    for args in [&["edit"][..], &["edit", "--json"]] {
        let (out, _, code) = nib(dir.path(), args, Some(&patch));
        assert_eq!(code, 1, "{out}");
        assert!(!out.contains("you were not shown"), "{out}");
        assert!(
            out.contains(&format!(
                "each nib command starts afresh, keeping no earlier version to rebase #{old} onto"
            )),
            "{out}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "a\nc\n"
    );
}

/// A pattern that does not compile: its error quotes the pattern as typed
/// (not the matcher's `(?:…)` wrapper), the hint names `-F`, and the exit
/// status is 2 (an error), apart from 1 (nothing matched), as grep and rg.
#[test]
fn a_bad_pattern_names_the_flag_shows_no_wrapper_and_exits_2() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "call a(b)\n").unwrap();
    for pattern in ["a(", "(?<=a)("] {
        let (out, _, code) = nib(dir.path(), &["grep", pattern], None);
        assert_eq!(code, 2, "{pattern}: {out}");
        assert!(out.contains("does not compile"), "{out}");
        assert!(!out.contains("(?:"), "the wrapper is shown: {out}");
        assert!(!out.contains("literal: true"), "{out}");
        assert!(out.contains("hint: pass -F (--fixed-strings)"), "{out}");
        let (out, _, code) = nib(dir.path(), &["grep", "--json", pattern], None);
        assert_eq!(code, 2, "{out}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["exit"], 2, "{out}");
    }
    // The unclosed group is pointed at in the pattern as typed.
    let (out, _, _) = nib(dir.path(), &["grep", "a("], None);
    assert!(out.contains("    a(\n     ^\n"), "{out}");
    // PCRE2's offset counts in the pattern as typed (its end: 7).
    let (out, _, _) = nib(dir.path(), &["grep", "(?<=a)("], None);
    assert!(out.contains("at offset 7:"), "{out}");
    // The hint's advice works, and nothing matched is 1.
    let (out, _, code) = nib(dir.path(), &["grep", "-F", "a("], None);
    assert_eq!(code, 0, "{out}");
    let (out, _, code) = nib(dir.path(), &["grep", "--fixed-strings", "x("], None);
    assert_eq!(code, 1, "{out}");
    // Any other error is 2 as well: a path that is not there.
    let (out, _, code) = nib(dir.path(), &["grep", "call", "missing/"], None);
    assert_eq!(code, 2, "{out}");
}

/// Nothing to undo is not a failure: exit 0 and a plain sentence.
#[test]
fn nib_undo_with_nothing_recorded_exits_0_and_says_so() {
    let dir = project();
    let home = tempfile::tempdir().unwrap();
    let env: &[(&str, &std::path::Path)] = &[("NIB_STATE_DIR", &home.path().join("state"))];
    let (out, err, code) = nib_with(dir.path(), &["undo"], None, env);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "Nothing to undo: nib has recorded no change in this project, so nothing was changed.\n"
    );
    let (out, _, code) = nib_with(dir.path(), &["undo", "2"], None, env);
    assert_eq!(code, 0, "{out}");
}

/// An empty patch says that it is empty and what to send, with no blank
/// quoted line; nothing is written (exit 2).
#[test]
fn an_empty_patch_says_it_is_empty_and_what_to_send() {
    let dir = project();
    for input in ["", "\n", " \n\n"] {
        let (out, err, code) = nib(dir.path(), &["edit"], Some(input));
        assert_eq!(code, 2, "{out}{err}");
        assert_eq!(out, "");
        assert!(err.starts_with("nib edit: the patch is empty"), "{err:?}");
        assert!(
            err.contains("[src/app.rs#4DC5]\n  PUT 12:\n  +the new line 12\n"),
            "{err}"
        );
        assert!(
            !err.lines().any(|l| l.trim().is_empty()),
            "a blank line: {err:?}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// `nib setup` in isolated home and config folders.
fn setup_in(dir: &std::path::Path, home: &std::path::Path) -> (String, String, i32) {
    nib_with(
        dir,
        &["setup"],
        None,
        &[
            ("HOME", home),
            ("XDG_CONFIG_HOME", &home.join(".config")),
            ("XDG_DATA_HOME", &home.join(".local/share")),
            ("CLAUDE_CONFIG_DIR", &home.join(".claude")),
        ],
    )
}

/// Setup leads with what it did; OpenCode is named only in a project
/// that has OpenCode.
#[test]
fn setup_leads_with_what_it_did_and_names_opencode_only_where_it_is() {
    let home = tempfile::tempdir().unwrap();
    let dir = project();
    let (out, err, code) = setup_in(dir.path(), home.path());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("created "), "{out}");
    assert!(
        !out.contains("OpenCode") && !out.contains("warning:"),
        "{out}"
    );
    assert!(dir.path().join(".mcp.json").is_file());
    // A project with a .opencode folder and no opencode.json: the note,
    // after the files setup wrote.
    let dir = project();
    std::fs::create_dir(dir.path().join(".opencode")).unwrap();
    let (out, _, code) = setup_in(dir.path(), home.path());
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("created "), "{out}");
    let note = out.find("note: OpenCode:").expect(&out);
    assert!(out[..note].contains(".mcp.json"), "{out}");
}

/// In a checkout of nib's own sources setup refuses (exit 2), writes
/// nothing and says where to run it; a folder that only looks alike is
/// set up.
#[test]
fn setup_refuses_in_a_nib_checkout_and_says_where_to_run_it() {
    let home = tempfile::tempdir().unwrap();
    let dir = project();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[workspace]\nmembers = [\".\"]\n\n[package]\nname = \"nib\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("claude/.claude-plugin")).unwrap();
    let (out, err, code) = setup_in(dir.path(), home.path());
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("checkout of nib's own sources"), "{out}");
    assert!(out.contains("nothing was written"), "{out}");
    assert!(out.contains("NIB_DIRECTORY=PROJECT nib setup"), "{out}");
    assert!(!dir.path().join(".mcp.json").exists());
    assert!(!dir.path().join(".claude").exists());
    // The real checkout this test runs from is refused too.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (out, _, code) = nib_with(
        std::path::Path::new("/"),
        &["setup", "--dry-run"],
        None,
        &[("HOME", home.path()), ("NIB_DIRECTORY", root)],
    );
    assert_eq!(code, 2, "{out}");
    // Another package named nib, without nib's plugin folder: set up.
    std::fs::remove_dir_all(dir.path().join("claude")).unwrap();
    let (out, _, code) = setup_in(dir.path(), home.path());
    assert_eq!(code, 0, "{out}");
    assert!(dir.path().join(".mcp.json").is_file());
}

/// Over MCP too, an empty patch's refusal quotes no blank line.
#[tokio::test]
async fn an_empty_patch_over_mcp_quotes_no_blank_line() {
    let dir = project();
    let nib = start(Era::Modern, dir.path()).await;
    let (text, is_error) = nib
        .call("edit", serde_json::json!({"input": "\n \n"}))
        .await;
    assert!(is_error, "{text}");
    assert!(
        text.contains("line 1: the patch is empty\nhint: "),
        "{text:?}"
    );
    assert!(
        !text.lines().any(|l| !l.is_empty() && l.trim().is_empty()),
        "{text:?}"
    );
    nib.stop().await;
}
