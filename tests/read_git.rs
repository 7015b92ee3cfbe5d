//! The git that `read PATH@REV` runs, held to the line the sandbox holds,
//! in every mode (unconfined, bubblewrap, Landlock + seccomp alone): a
//! revision is never taken as an option (`--output=FILE` writes nothing,
//! in the root or outside it), and commands the repository's own
//! configuration names (a textconv driver) never run.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::common::*;

const MODES: [&[(&str, &str)]; 3] = [
    &[],
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

/// A repository of two commits changing `a.txt`.
fn repository(root: &Path) {
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.txt"), "one\ntwo\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "first"]);
    std::fs::write(root.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    git(root, &["commit", "-qam", "second"]);
}

#[tokio::test]
async fn a_revision_is_never_taken_as_an_option_in_every_mode() {
    for mode in MODES {
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        repository(&root);
        let outside = tempfile::tempdir().unwrap();
        let targets = [
            root.join("made-by-git"),
            root.join("nib.json"),
            outside.path().join("made-by-git"),
        ];
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::new(Roots::Undeclared),
            mode,
        )
        .await;
        let mut answers = String::new();
        let mut forms = Vec::new();
        for t in &targets {
            let t = t.display();
            forms.extend([
                format!(".@--output={t}"),
                format!("a.txt@--output={t}"),
                format!(".@--output={t}..HEAD"),
                format!(".@HEAD~1...--output={t}"),
                format!(".@--output={t}:a.txt"),
            ]);
        }
        forms.push(format!(".@--output={}", root.join("a.txt").display()));
        for form in &forms {
            let (text, _) = nib.call("read", json!({ "paths": [form] })).await;
            answers.push_str(&text);
        }
        for t in &targets {
            assert!(
                !t.exists(),
                "{mode:?}: git wrote {}:\n{answers}",
                t.display()
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "one\ntwo\nthree\n",
            "{mode:?}: a.txt was replaced:\n{answers}"
        );
        assert!(
            answers.contains("is not a revision (it would be taken as an option)"),
            "{mode:?}: {answers}"
        );
        // A revision still reads.
        let old = nib.ok("read", json!({ "paths": ["a.txt@HEAD~1"] })).await;
        assert!(old.contains("1|one\n2|two\n"), "{mode:?}: {old}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn commands_the_repository_configures_never_run_in_every_mode() {
    for mode in MODES {
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        repository(&root);
        // A textconv driver and an external diff, as a model could write
        // them with the write tool: each would leave a marker.
        let marker = root.join("driver-ran");
        let config = root.join(".git/config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "[diff \"x\"]\n\ttextconv = touch {m}; cat\n[diff]\n\texternal = touch {m}; true\n[core]\n\tfsmonitor = touch {m}; true\n\tpager = touch {m}; cat\n",
            m = marker.display()
        ));
        std::fs::write(&config, text).unwrap();
        std::fs::write(root.join(".gitattributes"), "* diff=x\n").unwrap();
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::new(Roots::Undeclared),
            mode,
        )
        .await;
        let mut answers = String::new();
        for form in [
            "a.txt@HEAD~1..HEAD",
            ".@HEAD~1..HEAD",
            ".@HEAD",
            "a.txt@HEAD~1",
        ] {
            let (text, _) = nib.call("read", json!({ "paths": [form] })).await;
            answers.push_str(&text);
        }
        assert!(
            !marker.exists(),
            "{mode:?}: a command from the repository's config ran:\n{answers}"
        );
        // The diff is still there, as git's own text.
        assert!(answers.contains("three"), "{mode:?}: {answers}");
        nib.stop().await;
    }
}

/// A `git` first on PATH that leaves a marker, then runs the real one.
fn marking_git(root: &Path, marker: &Path) -> String {
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .expect("sh runs")
            .stdout,
    )
    .unwrap();
    let bin = root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("git");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ntouch '{}'\nexec '{}' \"$@\"\n",
            marker.display(),
            real.trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

/// The answer to one `read` of `form` by a nib started for it in `root`.
async fn read_in_a_new_nib(root: &Path, env: &[(&str, &str)], form: &str) -> String {
    let nib = start_with(
        Era::Handshake,
        root,
        TestClient::new(Roots::Undeclared),
        env,
    )
    .await;
    let (text, _) = nib.call("read", json!({ "paths": [form] })).await;
    nib.stop().await;
    text
}

/// read's git is a program like any other: with NIB_SHELL=0 nib runs none,
/// and nib.json's program rules refuse it at exec — in every mode. The
/// canary is a `git` first on PATH that leaves a marker when it runs.
#[tokio::test]
async fn no_git_runs_for_a_revision_when_the_shell_is_off_or_nib_json_forbids_git() {
    for mode in MODES {
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        repository(&root);
        let marker = root.join("git-ran");
        let path = marking_git(&root, &marker);
        let mut env: Vec<(&str, &str)> = mode.to_vec();
        env.push(("PATH", &path));
        let mut shell_off = env.clone();
        shell_off.push(("NIB_SHELL", "0"));

        // The control: the marking git is the one read runs.
        let old = read_in_a_new_nib(&root, &env, "a.txt@HEAD~1").await;
        assert!(old.contains("1|one"), "{mode:?}: {old}");
        assert!(marker.exists(), "{mode:?}: the marking git did not run");
        std::fs::remove_file(&marker).unwrap();

        let off = read_in_a_new_nib(&root, &shell_off, "a.txt@HEAD~1").await;
        assert!(
            !marker.exists(),
            "{mode:?}: git ran with NIB_SHELL=0: {off}"
        );
        assert!(off.contains("NIB_SHELL=0"), "{mode:?}: {off}");

        std::fs::write(
            root.join("nib.json"),
            json!({"rules": [{"program": "git", "why": "no git here"}]}).to_string(),
        )
        .unwrap();
        let refused = read_in_a_new_nib(&root, &env, "a.txt@HEAD~1").await;
        assert!(
            !marker.exists(),
            "{mode:?}: git ran past nib.json's rules: {refused}"
        );
        assert!(!refused.contains("1|one"), "{mode:?}: {refused}");
    }
}

/// Under NIB_SANDBOX=1 read's git reads no repository outside the roots,
/// whether a `.git` file leads there or an object store borrows from it
/// (`git clone --shared`), even where the sandbox may read it
/// (NIB_SANDBOX_BIND); unconfined, both read (the control).
#[tokio::test]
async fn a_repository_outside_the_roots_is_not_read_under_the_sandbox() {
    let outside = tempfile::tempdir().unwrap();
    let elsewhere = std::fs::canonicalize(outside.path()).unwrap().join("repo");
    std::fs::create_dir(&elsewhere).unwrap();
    git(&elsewhere, &["init", "-q", "-b", "main"]);
    std::fs::write(elsewhere.join("secret.txt"), "OUTSIDE-CANARY\n").unwrap();
    git(&elsewhere, &["add", "-A"]);
    git(&elsewhere, &["commit", "-qm", "secret"]);
    let bind = elsewhere.display().to_string();
    for mode in MODES {
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(
            root.join("sub/.git"),
            format!("gitdir: {}/.git\n", elsewhere.display()),
        )
        .unwrap();
        git(&root, &["clone", "-q", "--shared", &bind, "borrow"]);
        let mut env: Vec<(&str, &str)> = mode.to_vec();
        env.push(("NIB_SANDBOX_BIND", &bind));
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::new(Roots::Undeclared),
            &env,
        )
        .await;
        let mut answers = String::new();
        for form in [
            "sub@HEAD",
            "sub@HEAD:secret.txt",
            "borrow/secret.txt@HEAD",
            "borrow@HEAD",
        ] {
            let (text, _) = nib.call("read", json!({ "paths": [form] })).await;
            if mode.is_empty() {
                assert!(text.contains("OUTSIDE-CANARY"), "{form}: {text}");
            }
            answers.push_str(&text);
        }
        if !mode.is_empty() {
            assert!(
                !answers.contains("OUTSIDE-CANARY"),
                "{mode:?}: a repository outside the roots was read:\n{answers}"
            );
            assert!(
                answers.contains("lies outside the roots"),
                "{mode:?}: {answers}"
            );
            assert!(
                answers.contains("objects/info/alternates"),
                "{mode:?}: {answers}"
            );
        }
        nib.stop().await;
    }
}
