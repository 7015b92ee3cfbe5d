//! nibash's git, reshaped where its output reaches the model: real
//! repositories built here (two authors, a rename, a binary file, CRLF
//! lines, names with spaces and non-UTF-8 bytes, a merge conflict, a
//! detached HEAD, a submodule), snapshots of what the model gets, diffs whose
//! rows an edit can use without a read, and git's own bytes when piped —
//! with and without NIB_SANDBOX=1.

use std::path::Path;

use serde_json::json;

use crate::common::*;

const MODES: [&[(&str, &str)]; 2] = [&[("TZ", "UTC")], &[("TZ", "UTC"), ("NIB_SANDBOX", "1")]];

/// A repository with history by two authors and changes in the work tree.
fn repository(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "me@example.org"]);
    git(dir, &["config", "user.name", "Me"]);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("src/a.rs"), "fn a() {}\nfn b() {}\nfn c() {}\n").unwrap();
    std::fs::write(dir.join("src/crlf.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
    std::fs::write(dir.join("docs/with space.md"), "# Title\n").unwrap();
    std::fs::write(dir.join("old.txt"), "kept\n").unwrap();
    std::fs::write(dir.join("logo.png"), [0x89, b'P', b'N', b'G', 0, 1, 2]).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "First commit\n\nWith a body line."]);
    std::fs::write(
        dir.join("src/a.rs"),
        "fn a() {}\nfn b2() {}\nfn c() {}\nfn d() {}\n",
    )
    .unwrap();
    git(dir, &["mv", "old.txt", "src/new.txt"]);
    std::fs::write(dir.join("logo.png"), [0x89, b'P', b'N', b'G', 0, 9]).unwrap();
    git(dir, &["add", "-A"]);
    git_as(
        dir,
        "Other Person",
        "other@example.net",
        &["commit", "-qm", "Second: rename and b2"],
    );
    // The work tree: a modified CRLF file, a staged file, untracked ones.
    std::fs::write(dir.join("src/crlf.txt"), "one\r\nTWO\r\nthree\r\n").unwrap();
    std::fs::write(dir.join("src/b.rs"), "fn staged() {}\n").unwrap();
    git(dir, &["add", "src/b.rs"]);
    std::fs::write(dir.join("un tracked.txt"), "u\n").unwrap();
    use std::os::unix::ffi::OsStrExt;
    std::fs::write(
        dir.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")),
        "latin-1 name\n",
    )
    .unwrap();
}

/// src/a.rs on each side of the merge and rebase tests: line 1 on topic,
/// line 4 on main.
const TOPIC_A: &[u8] = b"fn topic() {}\nfn b2() {}\nfn c() {}\nfn d() {}\n";
const MAIN_A: &[u8] = b"fn a() {}\nfn b2() {}\nfn c() {}\nfn main_d() {}\n";

/// From the repository's first commits, a `topic` branch and `main` each
/// with one commit writing these files; `main` checked out.
fn two_sides(root: &Path, topic: &[(&str, &[u8])], main: &[(&str, &[u8])]) {
    git(root, &["stash", "-u", "-q"]);
    for (branch, files) in [("topic", topic), ("main", main)] {
        if branch == "topic" {
            git(root, &["checkout", "-q", "-b", "topic"]);
        } else {
            git(root, &["checkout", "-q", "main"]);
        }
        for (path, bytes) in files {
            std::fs::write(root.join(path), bytes).unwrap();
        }
        git(root, &["commit", "-qam", &format!("{branch} side")]);
    }
}

/// [`repository`] in a fresh project folder: the folder (kept while the
/// test runs) and its canonical path.
fn repository_here() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = project();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    repository(&root);
    (dir, root)
}

async fn sh(nib: &Nib, command: &str) -> String {
    nib.ok("nibash", json!({ "command": command })).await
}

#[tokio::test]
async fn git_views_are_reshaped_and_diff_rows_anchor_an_edit() {
    for env in MODES {
        let (_dir, root) = repository_here();
        let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), env).await;
        // Sandboxed or not, the model gets the same text.
        insta::assert_snapshot!("status", sh(&nib, "git status").await);
        insta::assert_snapshot!("status_short", sh(&nib, "git status -sb").await);
        insta::assert_snapshot!("log_stat", sh(&nib, "git log --stat").await);
        insta::assert_snapshot!("show_head", sh(&nib, "git show HEAD").await);
        insta::assert_snapshot!("ls_files", sh(&nib, "git ls-files").await);
        let diff = sh(&nib, "git diff").await;
        insta::assert_snapshot!("diff", diff);

        // Piped or redirected, git's own bytes.
        let raw = git(&root, &["status"]);
        assert_eq!(
            sh(&nib, "git status | cat").await.trim_end(),
            raw.trim_end()
        );
        sh(&nib, "git log --stat > log.txt").await;
        assert_eq!(
            std::fs::read_to_string(root.join("log.txt")).unwrap(),
            git(&root, &["log", "--stat"])
        );
        std::fs::remove_file(root.join("log.txt")).unwrap();

        // An edit straight from the diff's rows, with no read: line 2 of the
        // CRLF file was printed as an anchor, and its ending is kept.
        let tag = Nib::tag_in(&diff);
        assert!(diff.contains("+2:TWO"), "{diff}");
        nib.ok(
            "edit",
            json!({"input": format!("[src/crlf.txt#{tag}]\nPUT 2:\n+Two\n")}),
        )
        .await;
        assert_eq!(
            std::fs::read(root.join("src/crlf.txt")).unwrap(),
            b"one\r\nTwo\r\nthree\r\n"
        );
        // A failure is never hidden: git's error and status reach the answer.
        let (bad, _) = nib
            .call("nibash", json!({"command": "git show no-such-rev"}))
            .await;
        assert!(
            bad.contains("fatal:") && bad.contains("[exit 128]"),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn conflicts_detached_heads_and_submodules_stay_readable() {
    for env in MODES {
        let (_dir, root) = repository_here();
        // Both sides change line 1 of src/a.rs.
        two_sides(
            &root,
            &[("src/a.rs", b"fn topic() {}\n")],
            &[("src/a.rs", b"fn main_side() {}\n")],
        );
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::new(Roots::Undeclared),
            env,
        )
        .await;
        let (merge, _) = nib
            .call("nibash", json!({"command": "git merge topic"}))
            .await;
        assert!(
            merge.contains("CONFLICT (content): Merge conflict in src/a.rs"),
            "{merge}"
        );
        assert!(merge.contains("[exit 1]"), "{merge}");
        let status = sh(&nib, "git status").await;
        assert!(
            status.contains("Unmerged paths:\n  both modified: src/a.rs"),
            "{status}"
        );
        assert!(!status.contains("(use \"git"), "advice goes: {status}");
        sh(&nib, "git merge --abort").await;

        let detached = sh(&nib, "git checkout -q HEAD~1 && git status").await;
        assert!(detached.starts_with("HEAD detached at "), "{detached}");
        sh(&nib, "git checkout -q main").await;

        // A submodule's change is one entry like any other.
        let sub = root.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        git(&sub, &["init", "-q", "-b", "main"]);
        std::fs::write(sub.join("s.txt"), "s\n").unwrap();
        git(&sub, &["add", "-A"]);
        git(&sub, &["commit", "-qm", "sub"]);
        git(
            &root,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                "./sub",
                "sub",
            ],
        );
        std::fs::write(sub.join("s.txt"), "changed\n").unwrap();
        let status = sh(&nib, "git status").await;
        assert!(status.contains("sub (modified content)"), "{status}");
        assert!(status.contains("new file: .gitmodules, sub"), "{status}");
    }
}

#[tokio::test]
async fn merges_say_what_they_joined_and_listings_group_by_folder() {
    for env in MODES {
        let (_dir, root) = repository_here();
        // topic changes src/a.rs and docs; main changes src/a.rs's last
        // line and logo.png: both sides changed src/a.rs only.
        two_sides(
            &root,
            &[("src/a.rs", TOPIC_A), ("docs/with space.md", b"# Topic\n")],
            &[
                ("src/a.rs", MAIN_A),
                ("logo.png", &[0x89, b'P', b'N', b'G', 7]),
            ],
        );
        let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), env).await;

        let (ff, _) = nib
            .call("nibash", json!({"command": "git merge --ff-only topic"}))
            .await;
        assert!(
            ff.contains("[cannot fast-forward: since their merge base"),
            "{ff}"
        );
        assert!(
            ff.contains("this branch has 1 commit(s) and topic 1 more"),
            "{ff}"
        );

        let merged = sh(
            &nib,
            "git -c user.name=Me -c user.email=me@example.org merge -q --no-edit topic",
        )
        .await;
        assert!(
            merged.contains("[joined 1 incoming commit(s) with 1 of this branch's own; changed on both sides: src/a.rs]"),
            "{merged}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("src/a.rs")).unwrap(),
            "fn topic() {}\nfn b2() {}\nfn c() {}\nfn main_d() {}\n"
        );

        // find and ls through nibash: each folder once, folders marked.
        let found = sh(
            &nib,
            "find src docs -type f | sort > /dev/null; find src docs",
        )
        .await;
        assert_eq!(found, "docs/with space.md\nsrc/{a.rs, crlf.txt, new.txt}\n");
        let dirs = sh(&nib, "find . -path ./.git -prune -o -type d -print").await;
        assert_eq!(dirs, "./{docs/, src/}\n");
        let listed = sh(&nib, "ls src docs").await;
        assert!(listed.contains("src/{a.rs, crlf.txt, new.txt}"), "{listed}");
        assert!(listed.contains("docs/with space.md"), "{listed}");
        // Piped, the programs' own lines.
        assert_eq!(sh(&nib, "ls src | cat").await, "a.rs\ncrlf.txt\nnew.txt\n");

        // git-each: a nested repository and the top one, one line each when
        // that is all they print; rules on git hold for git-each.
        let nested = root.join("vendor/lib");
        std::fs::create_dir_all(&nested).unwrap();
        git(&nested, &["init", "-q", "-b", "trunk"]);
        std::fs::write(nested.join("x"), "x\n").unwrap();
        git(&nested, &["add", "x"]);
        git(&nested, &["commit", "-qm", "x"]);
        let each = sh(&nib, "git-each rev-parse --abbrev-ref HEAD").await;
        assert!(
            each.contains(".: main\n") && each.contains("vendor/lib: trunk\n"),
            "{each}"
        );
        let each = sh(&nib, "git-each status -sb").await;
        assert!(each.contains("vendor/lib: ## trunk\n"), "{each}");
    }
}

#[tokio::test]
async fn a_rule_on_git_holds_for_git_each() {
    let (_dir, root) = repository_here();
    std::fs::write(
        root.join("nib.json"),
        json!({"rules": [{"program": "git", "args": "^log", "why": "no history here"}]})
            .to_string(),
    )
    .unwrap();
    let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), &[]).await;
    let (text, _) = nib
        .call("nibash", json!({"command": "git-each log -1 > each.txt"}))
        .await;
    assert!(text.contains("no history here"), "{text}");
    assert!(
        !root.join("each.txt").exists(),
        "the refused call ran nothing"
    );
}

#[tokio::test]
async fn git_paths_are_shortened_with_named_directories() {
    let dir = project();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let deep = "src/main/java/com/example/platform/orm/workflow";
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(root.join(deep)).unwrap();
    std::fs::write(root.join(deep).join("Step.java"), "class Step {}\n").unwrap();
    std::fs::write(root.join(deep).join("Flow.java"), "class Flow {}\n").unwrap();
    std::fs::write(
        root.join("nib.json"),
        json!({"directories": {"wf": deep}}).to_string(),
    )
    .unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "start"]);
    std::fs::write(root.join(deep).join("Step.java"), "class Step { int n; }\n").unwrap();
    std::fs::write(root.join(deep).join("New.java"), "class New {}\n").unwrap();
    let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), &[]).await;
    let status = sh(&nib, "git status").await;
    assert!(status.contains("modified: ~wf/Step.java"), "{status}");
    assert!(status.contains("~wf/New.java"), "{status}");
    assert!(!status.contains(deep), "{status}");
    let files = sh(&nib, "git ls-files").await;
    assert!(files.contains("~wf/{Flow.java, Step.java}"), "{files}");
    let stat = sh(&nib, "git diff --stat").await;
    assert!(stat.contains("~wf/Step.java +1 -1"), "{stat}");
    let diff = sh(&nib, "git diff").await;
    assert!(diff.starts_with("[~wf/Step.java#"), "{diff}");
}

/// A diff's file: path, tag, and its anchor rows (line, text).
type FileAnchors = (String, String, Vec<(usize, String)>);

#[tokio::test]
async fn every_anchor_row_of_git_diff_takes_an_edit_without_a_read() {
    let (_dir, root) = repository_here();
    // Changes with several hunks in two more files.
    let long: String = (1..=40).map(|i| format!("line {i}\n")).collect();
    std::fs::write(root.join("src/long.txt"), &long).unwrap();
    git(&root, &["add", "src/long.txt"]);
    git(&root, &["commit", "-qm", "long"]);
    let changed = long
        .replace("line 3\n", "line three\n")
        .replace("line 20\n", "line 20\ninserted\n")
        .replace("line 38\n", "");
    std::fs::write(root.join("src/long.txt"), changed).unwrap();
    std::fs::write(
        root.join("src/a.rs"),
        "fn a() {}\nfn b2() {}\nfn c2() {}\nfn d() {}\n",
    )
    .unwrap();
    let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), &[]).await;
    let diff = sh(&nib, "git diff").await;
    // Each file's anchor rows, by header.
    let mut files: Vec<FileAnchors> = Vec::new();
    for line in diff.lines() {
        if let Some(h) = line.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            if let Some((path, tag)) = h.split_once('#') {
                files.push((path.to_string(), tag.to_string(), Vec::new()));
            }
            continue;
        }
        let row = line.strip_prefix('+').or_else(|| line.strip_prefix(' '));
        if let (Some(row), Some(f)) = (row, files.last_mut())
            && let Some((n, text)) = row.split_once(':')
            && let Ok(n) = n.parse::<usize>()
        {
            f.2.push((n, text.to_string()));
        }
    }
    assert_eq!(files.len(), 3, "{diff}");
    let mut rows = 0;
    for (path, tag, anchors) in &files {
        let mut patch = format!("[{path}#{tag}]\n");
        for (n, text) in anchors {
            patch.push_str(&format!("PUT {n}:\n+{text} ~checked\n"));
        }
        nib.ok("edit", json!({ "input": patch })).await;
        let now = std::fs::read_to_string(root.join(path)).unwrap();
        let now: Vec<&str> = now.lines().collect();
        for (n, text) in anchors {
            assert_eq!(now[n - 1], format!("{text} ~checked"), "{path}:{n}");
            rows += 1;
        }
    }
    assert!(rows >= 20, "{rows} anchor rows: {diff}");
}

#[tokio::test]
async fn a_rebase_that_both_sides_touched_names_the_file() {
    for env in MODES {
        let (_dir, root) = repository_here();
        two_sides(&root, &[("src/a.rs", TOPIC_A)], &[("src/a.rs", MAIN_A)]);
        git(&root, &["checkout", "-q", "topic"]);
        let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), env).await;
        let rebased = sh(
            &nib,
            "git -c user.name=Me -c user.email=me@example.org rebase main",
        )
        .await;
        assert!(
            rebased.contains("[joined 1 incoming commit(s) with 1 of this branch's own; changed on both sides: src/a.rs]"),
            "{rebased}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("src/a.rs")).unwrap(),
            "fn topic() {}\nfn b2() {}\nfn c() {}\nfn main_d() {}\n"
        );
        // A conflicting rebase stops and still says what it was joining.
        git(&root, &["checkout", "-q", "-b", "clash", "main~1"]);
        std::fs::write(
            root.join("src/a.rs"),
            "fn clash() {}\nfn b2() {}\nfn c() {}\nfn clash_d() {}\n",
        )
        .unwrap();
        git(&root, &["commit", "-qam", "clash side"]);
        let (stopped, _) = nib
            .call(
                "nibash",
                json!({"command": "git -c user.name=Me -c user.email=me@example.org rebase main"}),
            )
            .await;
        assert!(stopped.contains("CONFLICT"), "{stopped}");
        assert!(
            stopped.contains("changed on both sides: src/a.rs]"),
            "{stopped}"
        );
        assert!(stopped.contains("[exit 1]"), "{stopped}");
    }
}

/// A commit message's paragraphs keep the blank lines between them in
/// reshaped `git log` (the blank after the subject goes, as before).
#[tokio::test]
async fn log_keeps_the_blank_lines_between_a_messages_paragraphs() {
    let dir = project();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(
        dir.path(),
        &[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "subject",
            "-m",
            "para one\nline two",
            "-m",
            "para two",
        ],
    );
    let nib = start(Era::Handshake, dir.path()).await;
    let out = nib.ok("nibash", json!({"command": "git log -1"})).await;
    assert!(
        out.contains(" subject (") && out.contains("\n  para one\n  line two\n\n  para two\n"),
        "{out}"
    );
    nib.stop().await;
}

/// A commit shows the same local time in `read DIR@REV` and in nibash's
/// `git log` (read showed the commit's own zone: 10:00 against 05:00).
#[tokio::test]
async fn a_commit_shows_one_local_time_in_read_and_in_git_log() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    git(&root, &["add", "-A"]);
    let ok = std::process::Command::new("git")
        .args(["-c", "user.name=Far", "-c", "user.email=far@example.org"])
        .args(["commit", "-qm", "from far away"])
        .current_dir(&root)
        .env("GIT_AUTHOR_DATE", "2026-01-01T10:00:00+05:00")
        .env("GIT_COMMITTER_DATE", "2026-01-01T10:00:00+05:00")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let nib = start_with(
        Era::Handshake,
        &root,
        TestClient::new(Roots::Undeclared),
        &[("TZ", "UTC")],
    )
    .await;
    let read = nib.ok("read", json!({"paths": [".@HEAD"]})).await;
    let log = sh(&nib, "git log -1").await;
    assert!(read.contains("2026-01-01 05:00"), "{read}");
    assert!(log.contains("2026-01-01 05:00"), "{log}");
    nib.stop().await;
}
