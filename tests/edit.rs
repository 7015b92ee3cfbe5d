//! edit over MCP: seen lines and tokens, stale tags, collisions, SUB
//! relocation, file operations, all-or-nothing sections, the crash journal.

use std::time::Duration;

use serde_json::json;

use crate::common::*;

const TEN: &str = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n";

fn content(nib: &Nib, name: &str) -> String {
    std::fs::read_to_string(nib.path(name)).unwrap()
}

#[tokio::test]
async fn edit_from_read_rows_in_both_eras() {
    let dir = project();
    for era in ERAS {
        let name = format!("{era:?}.txt");
        std::fs::write(dir.path().join(&name), TEN).unwrap();
        let nib = start(era, dir.path()).await;
        let read = nib.ok("read", json!({"paths": [name]})).await;
        let tag = header_tag(&read);
        let out = nib
            .ok(
                "edit",
                json!({"input": format!("[{name}#{tag}]\nPUT 3:\n+three\n")}),
            )
            .await;
        let want = TEN.replace("l3\n", "three\n");
        assert_eq!(content(&nib, &name), want, "{era:?}");
        assert_eq!(header_tag(&out), expected_tag(want.as_bytes()), "{out}");
        assert!(
            out.contains("\n2:l2\n[line 3 as you sent it]\n4:l4\n"),
            "{out}"
        );
        // A second edit straight from the answer's tag and rows.
        let tag2 = header_tag(&out);
        nib.ok(
            "edit",
            json!({"input": format!("[{name}#{tag2}]\nCUT 4\n")}),
        )
        .await;
        assert_eq!(content(&nib, &name), want.replace("l4\n", ""));
        nib.stop().await;
    }
}

#[tokio::test]
async fn unseen_lines_are_refused_with_a_token_that_applies_unchanged() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), TEN).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let read = nib.ok("read", json!({"paths": ["f.txt:1-3"]})).await;
    let tag = header_tag(&read);
    let patch = format!("[f.txt#{tag}]\nPUT 8:\n+eight\n");
    let t = nib.err("edit", json!({"input": patch})).await;
    assert!(
        t.contains("not seen") && t.contains("8:l8") && t.contains("nothing was written"),
        "{t}"
    );
    assert_eq!(content(&nib, "f.txt"), TEN, "refused: file unchanged");
    let token = t
        .split("REAPPLY ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .trim()
        .to_string();
    nib.ok("edit", json!({"input": format!("REAPPLY {token}")}))
        .await;
    assert_eq!(content(&nib, "f.txt"), TEN.replace("l8", "eight"));
    // The token is spent.
    let t = nib
        .err("edit", json!({"input": format!("REAPPLY {token}")}))
        .await;
    assert!(t.contains("no refused edit has this token"), "{t}");
    nib.stop().await;
}

#[tokio::test]
async fn sending_the_same_patch_again_applies_it_and_a_check_counts_as_seen() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), TEN).unwrap();
    let nib = start(Era::Modern, dir.path()).await;
    let read = nib.ok("read", json!({"paths": ["f.txt:1"]})).await;
    let tag = header_tag(&read);
    let patch = format!("[f.txt#{tag}]\nCUT 9\n");
    nib.err("edit", json!({"input": patch.clone()})).await;
    assert_eq!(content(&nib, "f.txt"), TEN);
    nib.ok("edit", json!({"input": patch})).await;
    assert_eq!(content(&nib, "f.txt"), TEN.replace("l9\n", ""));

    std::fs::write(dir.path().join("g.txt"), TEN).unwrap();
    let read = nib.ok("read", json!({"paths": ["g.txt:1"]})).await;
    let tag = header_tag(&read);
    let t = nib
        .ok(
            "edit",
            json!({"input": format!("[g.txt#{tag}]\nPUT 5:\n~l5\n+five\n")}),
        )
        .await;
    assert!(t.contains("[line 5 as you sent it]"), "{t}");
    let t = nib
        .err(
            "edit",
            json!({"input": format!("[g.txt#{}]\nPUT 7:\n~wrong\n+x\n", header_tag(&t))}),
        )
        .await;
    assert!(
        t.contains("does not match \"wrong\"") && t.contains("7:l7"),
        "{t}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn a_stale_tag_is_rebased_when_its_lines_are_unchanged_and_refused_otherwise() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), TEN).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let read = nib.ok("read", json!({"paths": ["f.txt"]})).await;
    let old_tag = header_tag(&read);
    // Someone else inserts two lines at the top.
    let changed = format!("new a\nnew b\n{TEN}");
    std::fs::write(dir.path().join("f.txt"), &changed).unwrap();
    let t = nib
        .ok(
            "edit",
            json!({"input": format!("[f.txt#{old_tag}]\nPUT 5:\n+five\n")}),
        )
        .await;
    assert!(t.contains("rebased"), "{t}");
    assert_eq!(content(&nib, "f.txt"), changed.replace("l5\n", "five\n"));

    // The line the edit anchors on changed: refused, nothing written, current rows shown.
    let now = content(&nib, "f.txt");
    std::fs::write(
        dir.path().join("f.txt"),
        now.replace("l7\n", "seven (theirs)\n"),
    )
    .unwrap();
    let before = content(&nib, "f.txt");
    let t = nib
        .err(
            "edit",
            json!({"input": format!("[f.txt#{old_tag}]\nPUT 7:\n+mine\n")}),
        )
        .await;
    assert!(
        t.contains("changed since") && t.contains("seven (theirs)"),
        "{t}"
    );
    assert_eq!(content(&nib, "f.txt"), before);

    // A tag never shown is refused with the current content.
    let t = nib
        .err("edit", json!({"input": "[f.txt#0000]\nPUT 1:\n+x\n"}))
        .await;
    assert!(t.contains("stale") && t.contains("1:new a"), "{t}");
    assert_eq!(content(&nib, "f.txt"), before);
    nib.stop().await;
}

#[tokio::test]
async fn stale_tag_with_collision_is_refused() {
    let dir = project();
    let a = "line one 263\nline two 4471\n";
    let b = "line one 410\nline two 6970\n";
    let nib = start(Era::Handshake, dir.path()).await;
    nib.ok("write", json!({"path": "c.txt", "content": a}))
        .await;
    std::fs::write(dir.path().join("c.txt"), b).unwrap();
    let t = nib
        .err("edit", json!({"input": "[c.txt#1D84]\nPUT 1:\n+mine\n"}))
        .await;
    assert!(t.contains("collision"), "{t}");
    assert_eq!(content(&nib, "c.txt"), b);
    nib.stop().await;
}

#[tokio::test]
async fn sub_applies_nearby_and_asks_before_applying_further_away() {
    let dir = project();
    std::fs::write(dir.path().join("s.txt"), TEN).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let tag = header_tag(&nib.ok("read", json!({"paths": ["s.txt"]})).await);
    let t = nib
        .ok(
            "edit",
            json!({"input": format!("[s.txt#{tag}]\nSUB 4: l6\n+six\n")}),
        )
        .await;
    assert!(t.contains("is on line 6, not 4; applied there"), "{t}");
    assert!(t.contains("\n6:six\n"), "{t}");
    let tag = header_tag(&t);
    let patch = format!("[s.txt#{tag}]\nSUB 1: l9\n+nine\n");
    let t = nib.err("edit", json!({"input": patch.clone()})).await;
    assert!(
        t.contains("it is on line 9") && t.contains("send the same patch again"),
        "{t}"
    );
    assert!(content(&nib, "s.txt").contains("l9"));
    nib.ok("edit", json!({"input": patch})).await;
    assert!(content(&nib, "s.txt").contains("nine") && !content(&nib, "s.txt").contains("l9"));
    nib.stop().await;
}

/// The tolerance applies the nearest occurrence within 2 lines even when
/// OLD also occurs further away (it was refused as "not once in the file").
#[tokio::test]
async fn sub_takes_the_nearest_occurrence_though_it_occurs_again_further_away() {
    let dir = project();
    let text = "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\nserde = \"1\"\n\n[dev-dependencies]\nversion-sync = \"0.9\"\n";
    std::fs::write(dir.path().join("Cargo.toml"), text).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let tag = header_tag(&nib.ok("read", json!({"paths": ["Cargo.toml"]})).await);
    let t = nib
        .ok(
            "edit",
            json!({"input": format!("[Cargo.toml#{tag}]\nSUB 2: version\n+release\n")}),
        )
        .await;
    assert!(t.contains("is on line 3, not 2; applied there"), "{t}");
    assert_eq!(
        content(&nib, "Cargo.toml"),
        text.replace("version = ", "release = ")
    );
    nib.stop().await;
}

#[tokio::test]
async fn rem_mv_cp_and_add_file() {
    let dir = project();
    std::fs::write(dir.path().join("dead.txt"), "bye\n").unwrap();
    std::fs::write(dir.path().join("old.txt"), "a\nb\n").unwrap();
    std::fs::write(dir.path().join("src.txt"), "x\ny\n").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let read = nib
        .ok("read", json!({"paths": ["dead.txt", "old.txt", "src.txt"]}))
        .await;
    let tags: Vec<String> = read.split("\n\n").map(header_tag).collect();
    let patch = format!(
        "[dead.txt#{}]\nREM\n[old.txt#{}]\nPUT 2:\n+B\nMV moved/new.txt\n[src.txt#{}]\nPUT 1:\n+X\nCP copy.txt\n*** Add File: made/fresh.txt\n+hello\n+world\n",
        tags[0], tags[1], tags[2]
    );
    let t = nib.ok("edit", json!({"input": patch})).await;
    assert!(t.contains("[dead.txt] moved to the trash"), "{t}");
    assert!(
        t.contains("(moved from old.txt)") && t.contains("(copied from src.txt)"),
        "{t}"
    );
    assert!(!nib.path("dead.txt").exists());
    assert_eq!(
        std::fs::read_to_string(nib.trash_files().join("dead.txt")).unwrap(),
        "bye\n"
    );
    assert!(!nib.path("old.txt").exists());
    assert_eq!(content(&nib, "moved/new.txt"), "a\nB\n");
    assert_eq!(
        content(&nib, "src.txt"),
        "x\ny\n",
        "CP leaves the original as it was"
    );
    assert_eq!(content(&nib, "copy.txt"), "X\ny\n");
    assert_eq!(content(&nib, "made/fresh.txt"), "hello\nworld\n");
    // The new file's rows count as seen: edit it at once.
    let tag = expected_tag(b"hello\nworld\n");
    nib.ok(
        "edit",
        json!({"input": format!("[made/fresh.txt#{tag}]\nPUT 2:\n+there\n")}),
    )
    .await;
    assert_eq!(content(&nib, "made/fresh.txt"), "hello\nthere\n");
    let t = nib
        .err("edit", json!({"input": "*** Add File: copy.txt\n+x\n"}))
        .await;
    assert!(t.contains("already exists"), "{t}");
    nib.stop().await;
}

#[tokio::test]
async fn one_bad_section_means_nothing_is_written() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), TEN).unwrap();
    std::fs::write(dir.path().join("b.txt"), TEN).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let read = nib.ok("read", json!({"paths": ["a.txt", "b.txt"]})).await;
    let tags: Vec<String> = read.split("\n\n").map(header_tag).collect();
    let patch = format!(
        "[a.txt#{}]\nPUT 1:\n+A\n[b.txt#{}]\nPUT 99:\n+B\n*** Add File: c.txt\n+c\n",
        tags[0], tags[1]
    );
    let t = nib.err("edit", json!({"input": patch})).await;
    assert!(
        t.contains("past the end") && t.contains("nothing was written"),
        "{t}"
    );
    assert_eq!(content(&nib, "a.txt"), TEN);
    assert!(!nib.path("c.txt").exists());
    let t = nib
        .err(
            "edit",
            json!({"input": format!("[a.txt#{}]\nPUT 2.=4:\n+x\nPUT 3:\n+y\n", tags[0])}),
        )
        .await;
    assert!(t.contains("touch the same lines"), "{t}");
    nib.stop().await;
}

#[tokio::test]
async fn malformed_patches_quote_the_line_and_show_the_form() {
    let dir = project();
    std::fs::write(dir.path().join("a.java"), "class A {}\n").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib
        .err("edit", json!({"input": "[a.txt#1234]\nPUT 3\n+x\n"}))
        .await;
    assert!(
        t.contains("line 2") && t.contains("PUT 3") && t.contains("hint:"),
        "{t}"
    );
    let t = nib
        .err("edit", json!({"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** End Patch\n"}))
        .await;
    assert!(t.contains("apply_patch") && t.contains("[PATH#TAG]"), "{t}");
    let t = nib
        .err(
            "edit",
            json!({"input": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y\n"}),
        )
        .await;
    assert!(t.contains("unified diff"), "{t}");
    let tag = expected_tag(b"class A {}\n");
    // IMPORT adds Java and Kotlin imports; elsewhere it is refused, writing nothing.
    let t = nib
        .ok(
            "edit",
            json!({"input": format!("[a.java#{tag}]\nIMPORT java.util.List\n")}),
        )
        .await;
    assert!(t.contains("1:import java.util.List;"), "{t}");
    assert_eq!(
        content(&nib, "a.java"),
        "import java.util.List;\nclass A {}\n"
    );
    std::fs::write(nib.path("notes.txt"), "x\n").unwrap();
    let t = nib
        .err(
            "edit",
            json!({"input": format!("[notes.txt#{}]\nIMPORT java.util.List\n", expected_tag(b"x\n"))}),
        )
        .await;
    assert!(t.contains("not a Java or Kotlin file"), "{t}");
    assert_eq!(content(&nib, "notes.txt"), "x\n");
    nib.stop().await;
}

#[tokio::test]
async fn warnings_leave_the_edit_applied() {
    let dir = project();
    std::fs::write(dir.path().join("c.json"), "{\n  \"a\": 1,\n  \"b\": 2\n}\n").unwrap();
    std::fs::write(dir.path().join("f.rs"), "fn a() {\n    x();\n}\n").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let read = nib.ok("read", json!({"paths": ["c.json", "f.rs"]})).await;
    let tags: Vec<String> = read.split("\n\n").map(header_tag).collect();
    let t = nib
        .ok(
            "edit",
            json!({"input": format!("[c.json#{}]\nPUT 3:\n+  \"a\": 3\n", tags[0])}),
        )
        .await;
    assert!(t.contains("repeated"), "{t}");
    let t = nib
        .ok(
            "edit",
            json!({"input": format!("[f.rs#{}]\nPUT 2:\n+    x();\n+    if y {{\n", tags[1])}),
        )
        .await;
    assert!(t.contains("brackets no longer balance"), "{t}");
    assert!(content(&nib, "f.rs").contains("if y {"));
    let t = nib
        .ok(
            "edit",
            json!({"input": format!("[f.rs#{}]\nPUT 2.=3:\n+    z();\n", header_tag(&t))}),
        )
        .await;
    assert!(t.contains("one line off") || t.contains("brackets"), "{t}");
    nib.stop().await;
}

#[tokio::test]
async fn a_multi_file_edit_killed_between_files_is_completed_at_the_next_start() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "old a\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "old b\n").unwrap();
    let marker = dir.path().join(".paused");
    let failpoint = format!("edit-between-files:{}", marker.display());
    let nib = start_with(
        Era::Handshake,
        dir.path(),
        TestClient::new(Roots::Undeclared),
        &[("NIB_FAILPOINT", failpoint.as_str())],
    )
    .await;
    let read = nib.ok("read", json!({"paths": ["a.txt", "b.txt"]})).await;
    let tags: Vec<String> = read.split("\n\n").map(header_tag).collect();
    let patch = format!(
        "[a.txt#{}]\nPUT 1:\n+new a\n[b.txt#{}]\nPUT 1:\n+new b\n",
        tags[0], tags[1]
    );
    let call = {
        let params = rmcp::model::CallToolRequestParams::new("edit")
            .with_arguments(json!({"input": patch}).as_object().cloned().unwrap());
        let peer = nib.client.peer().clone();
        tokio::spawn(async move { peer.call_tool(params).await })
    };
    let started = std::time::Instant::now();
    while !marker.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the edit never reached the failpoint"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Half-way: the first file is written, the second is not.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "new a\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
        "old b\n"
    );
    let pid = nib.pid.expect("pid");
    assert!(
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let _ = call.await;
    // The next nib to start completes the edit from the journal.
    let mut cmd = std::process::Command::new(nib_bin());
    cmd.args(["read", "b.txt"])
        .current_dir(dir.path())
        .env_remove("NIB_DIRECTORY");
    for (k, v) in isolated_env(nib.home.path()) {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1:new b"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "new a\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
        "new b\n"
    );
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".nib-"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[tokio::test]
async fn moves_copies_and_edits_keep_every_line_ending_byte_for_byte() {
    // LF, CRLF and lone CR mixed, a byte that is not UTF-8, no final newline.
    let mixed: &[u8] = b"one\r\ntwo\nthree\rfour\xff\r\nfive\nsix";
    let dir = project();
    for name in ["mv.txt", "cp.txt", "edit.txt", "mvedit.txt", "rem.txt"] {
        std::fs::write(dir.path().join(name), mixed).unwrap();
    }
    let nib = start(Era::Handshake, dir.path()).await;
    let read = nib
        .ok(
            "read",
            json!({"paths": ["mv.txt", "cp.txt", "edit.txt", "mvedit.txt"]}),
        )
        .await;
    let tag = header_tag(&read);
    // MV and CP without hunks: the same bytes.
    nib.ok(
        "edit",
        json!({"input": format!("[mv.txt#{tag}]\nMV moved.txt\n[cp.txt#{tag}]\nCP copied.txt\n")}),
    )
    .await;
    assert_eq!(std::fs::read(nib.path("moved.txt")).unwrap(), mixed);
    assert_eq!(std::fs::read(nib.path("copied.txt")).unwrap(), mixed);
    assert_eq!(std::fs::read(nib.path("cp.txt")).unwrap(), mixed);
    // With hunks: untouched lines keep their own endings, a replaced line
    // keeps its ending, an inserted row takes the ending of the line before.
    nib.ok(
        "edit",
        json!({"input": format!("[edit.txt#{tag}]\nPUT 2:\n+TWO\nPUT >5:\n+five and a half\n")}),
    )
    .await;
    let mut bytes = std::fs::read(nib.path("edit.txt")).unwrap();
    // The invalid byte is the one thing an edit of the text cannot keep.
    bytes = String::from_utf8_lossy(&bytes)
        .replace('\u{FFFD}', "\u{FF}")
        .into_bytes();
    let want = "one\r\nTWO\nthree\rfour\u{FF}\r\nfive\nfive and a half\nsix";
    assert_eq!(String::from_utf8_lossy(&bytes), want);
    nib.ok(
        "edit",
        json!({"input": format!("[mvedit.txt#{tag}]\nPUT 1:\n+ONE\nMV moved-edited.txt\n")}),
    )
    .await;
    let got = std::fs::read(nib.path("moved-edited.txt")).unwrap();
    assert!(
        got.starts_with(b"ONE\r\ntwo\nthree\rfour") && got.ends_with(b"\r\nfive\nsix"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    // REM and a restore from the trash: the same bytes.
    let read = nib.ok("read", json!({"paths": ["rem.txt"]})).await;
    let tag = header_tag(&read);
    nib.ok("edit", json!({"input": format!("[rem.txt#{tag}]\nREM\n")}))
        .await;
    nib.ok("nibash", json!({"command": "trash restore rem.txt"}))
        .await;
    assert_eq!(std::fs::read(nib.path("rem.txt")).unwrap(), mixed);
}

/// `PUT N:` with no `+` rows once deleted line N without a word: it is
/// refused, naming `CUT N`, and the file stays as it was.
#[tokio::test]
async fn a_put_without_rows_is_refused_and_names_cut() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let read = nib.ok("read", json!({"paths": ["a.txt"]})).await;
    let tag = Nib::tag_in(&read);
    let t = nib
        .err("edit", json!({"input": format!("[a.txt#{tag}]\nPUT 2:\n")}))
        .await;
    assert!(t.contains("no + rows") && t.contains("CUT 2"), "{t}");
    assert_eq!(content(&nib, "a.txt"), "one\ntwo\nthree\n");
    nib.ok("edit", json!({"input": format!("[a.txt#{tag}]\nCUT 2\n")}))
        .await;
    assert_eq!(content(&nib, "a.txt"), "one\nthree\n");
    nib.stop().await;
}

/// A server spoken to over raw JSON lines (fast enough for many runs).
struct Raw {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Raw {
    fn start(dir: &std::path::Path, home: &std::path::Path, env: &[(&str, &str)]) -> Raw {
        let mut cmd = std::process::Command::new(nib_bin());
        cmd.current_dir(dir)
            .env_remove("NIB_DIRECTORY")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        for (k, v) in isolated_env(home) {
            cmd.env(k, v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut raw = Raw { child, out };
        raw.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "crash", "version": "1"}}}),
        );
        raw.answer(0);
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    fn send(&mut self, msg: serde_json::Value) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        let _ = writeln!(stdin, "{msg}");
        let _ = stdin.flush();
    }

    fn ask(&mut self, id: u64, name: &str, args: serde_json::Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}}));
    }

    /// The text of answer `id`.
    fn answer(&mut self, id: u64) -> String {
        use std::io::BufRead;
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "nib ended");
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if msg["id"] == json!(id) {
                return msg["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
            }
        }
    }
}

/// The processes other than this one with an fd open on `file` (as
/// `/proc/PID/fd` shows it, e.g. `pipe:[123]`).
fn holders_of(file: &std::path::Path) -> Vec<u32> {
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten()
                    .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == file))
            })
        })
        .collect()
}

/// Issue 58: SIGKILL at a random moment of a three-file edit, then a new
/// server at once (initialize, one read, stdin closed): the files are all
/// old or all new, and no journal or temp file is left, in every mode. The
/// kill points spread over one uncrashed edit's duration, measured first.
#[test]
fn a_multi_file_edit_killed_at_random_moments_is_whole_after_an_immediate_restart() {
    const RUNS: usize = 150;
    let modes: [&[(&str, &str)]; 3] = [
        &[],
        &[("NIB_SANDBOX", "1")],
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
    ];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let started = std::time::Instant::now();
    let mut spans = [Duration::ZERO; 3];
    let mut outcomes = [0usize; 4];
    let mut lingered = Duration::ZERO;
    for run in 0..RUNS + modes.len() {
        let mode = run % modes.len();
        let env = modes[mode];
        let (dir, home) = (project(), project());
        for f in ["a", "b", "c"] {
            std::fs::write(dir.path().join(format!("{f}.txt")), format!("old {f}\n")).unwrap();
        }
        let mut nib = Raw::start(dir.path(), home.path(), env);
        nib.ask(1, "read", json!({"paths": ["a.txt", "b.txt", "c.txt"]}));
        let read = nib.answer(1);
        let patch: String = ["a", "b", "c"]
            .iter()
            .zip(read.split("\n\n"))
            .map(|(f, block)| format!("[{f}.txt#{}]\nPUT 1:\n+new {f}\n", header_tag(block)))
            .collect();
        let asked = std::time::Instant::now();
        nib.ask(2, "edit", json!({"input": patch}));
        if run < modes.len() {
            // The first run of each mode measures an edit, uncrashed.
            let answer = nib.answer(2);
            spans[mode] = asked.elapsed();
            assert!(!answer.contains("error"), "{answer}");
            let _ = nib.child.kill();
            let _ = nib.child.wait();
            continue;
        }
        let span = spans[mode].as_micros() as u64 * 13 / 10 + 1;
        std::thread::sleep(Duration::from_micros(next() % span));
        let stdin = std::fs::read_link(format!("/proc/{}/fd/0", nib.child.id())).unwrap();
        nib.child.kill().unwrap();
        nib.child.wait().unwrap();
        // No child of the dead server holds its fds (its stdin stands for
        // them all) for longer than an exec takes.
        let killed = std::time::Instant::now();
        while !holders_of(&stdin).is_empty() {
            assert!(
                killed.elapsed() < Duration::from_secs(1),
                "run {run} (mode {env:?}): processes {:?} still hold the dead server's fds",
                holders_of(&stdin)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        lingered = lingered.max(killed.elapsed());
        // A new server at once, as a client restarting it would.
        let mut again = Raw::start(dir.path(), home.path(), env);
        again.ask(1, "read", json!({"paths": ["a.txt"]}));
        again.answer(1);
        drop(again.child.stdin.take());
        again.child.wait().unwrap();
        let new = ["a", "b", "c"]
            .iter()
            .filter(|f| {
                std::fs::read_to_string(dir.path().join(format!("{f}.txt")))
                    .unwrap()
                    .starts_with("new")
            })
            .count();
        outcomes[new] += 1;
        let journal: Vec<String> = std::fs::read_dir(home.path().join("state/journal"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let temps: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".nib-"))
            .collect();
        assert!(
            (new == 0 || new == 3) && journal.is_empty() && temps.is_empty(),
            "run {run} (mode {env:?}, seed {seed}): {new} of 3 files new, journal {journal:?}, temp files {temps:?}"
        );
    }
    eprintln!(
        "{RUNS} random kills in {:?} (edit spans {spans:?}): {} rolled back, {} completed; a dead server's fds were held at most {lingered:?} after it was reaped",
        started.elapsed(),
        outcomes[0],
        outcomes[3]
    );
}
