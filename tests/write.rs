//! write over MCP: create, overwrite by tag, keep line endings, BOM and mode,
//! refuse what would lose data, warn on broken syntax.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn creates_files_with_parents_and_answers_with_tag_and_map() {
    let dir = project();
    for era in ERAS {
        let nib = start(era, dir.path()).await;
        let name = format!("{era:?}/deep/new.rs");
        let content = "fn a() {\n    1\n}\n\nfn b() {}\n";
        let text = nib
            .ok("write", json!({"path": name, "content": content}))
            .await;
        assert_eq!(
            header_tag(&text),
            expected_tag(content.as_bytes()),
            "{text}"
        );
        assert!(text.contains("[created: 5 lines]"), "{text}");
        assert!(text.contains("\n1~fn a() {\n"), "{text}");
        assert!(text.contains("\n5~fn b() {}\n"), "{text}");
        assert_eq!(std::fs::read_to_string(nib.path(&name)).unwrap(), content);
        nib.stop().await;
    }
}

#[tokio::test]
async fn overwriting_needs_the_current_tag() {
    let dir = project();
    std::fs::write(dir.path().join("a.txt"), "old\n").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;

    let t = nib
        .err("write", json!({"path": "a.txt", "content": "new\n"}))
        .await;
    assert!(
        t.contains("needs its current tag") && t.contains("Nothing was written"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "old\n"
    );

    let stale = expected_tag(b"older\n");
    let t = nib
        .err(
            "write",
            json!({"path": "a.txt", "content": "new\n", "tag": stale}),
        )
        .await;
    assert!(
        t.contains("stale") && t.contains("Nothing was written"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "old\n"
    );

    let t = nib
        .err(
            "write",
            json!({"path": "a.txt", "content": "new\n", "tag": "zz"}),
        )
        .await;
    assert!(t.contains("not a tag"), "{t}");

    let read = nib.ok("read", json!({"paths": ["a.txt"]})).await;
    let tag = header_tag(&read);
    let t = nib
        .ok(
            "write",
            json!({"path": "a.txt", "content": "new\n", "tag": format!("#{tag}")}),
        )
        .await;
    assert!(t.contains("[replaced 1 lines with 1 line]"), "{t}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "new\n"
    );
    nib.stop().await;
}

#[tokio::test]
async fn keeps_crlf_bom_and_mode() {
    let dir = project();
    let p = dir.path().join("win.sh");
    let old = b"\xEF\xBB\xBFecho a\r\necho b\r\n";
    std::fs::write(&p, old).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
    let nib = start(Era::Modern, dir.path()).await;
    nib.ok(
        "write",
        json!({"path": "win.sh", "content": "echo c\necho d\n", "tag": expected_tag(old)}),
    )
    .await;
    assert_eq!(
        std::fs::read(&p).unwrap(),
        b"\xEF\xBB\xBFecho c\r\necho d\r\n"
    );
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o751
    );
    nib.stop().await;
}

#[tokio::test]
async fn written_lines_count_as_seen_and_a_tag_collision_is_refused() {
    // The DESIGN.md pair shares tag 1D84. The agent writes (and so sees) the
    // first text; the file then changes behind its back to the second. A write
    // with tag 1D84 must not pass for the version the agent saw.
    let dir = project();
    let a = "line one 263\nline two 4471\n";
    let b = "line one 410\nline two 6970\n";
    assert_eq!(expected_tag(a.as_bytes()), expected_tag(b.as_bytes()));
    let nib = start(Era::Handshake, dir.path()).await;
    nib.ok("write", json!({"path": "c.txt", "content": a}))
        .await;
    std::fs::write(dir.path().join("c.txt"), b).unwrap();
    let t = nib
        .err(
            "write",
            json!({"path": "c.txt", "content": "mine\n", "tag": "1D84"}),
        )
        .await;
    assert!(
        t.contains("collision") && t.contains("Nothing was written"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("c.txt")).unwrap(),
        b
    );
    nib.stop().await;
}

#[tokio::test]
async fn refuses_folders_hardlinks_and_fifos_without_changing_anything() {
    let dir = project();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("h1"), "shared\n").unwrap();
    std::fs::hard_link(dir.path().join("h1"), dir.path().join("h2")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(dir.path().join("pipe"))
            .status()
            .unwrap()
            .success()
    );
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib
        .err("write", json!({"path": "sub", "content": "x"}))
        .await;
    assert!(
        t.contains("is a folder") && t.contains("Nothing was written"),
        "{t}"
    );
    assert!(dir.path().join("sub").is_dir());
    let tag = expected_tag(b"shared\n");
    let t = nib
        .err("write", json!({"path": "h1", "content": "x\n", "tag": tag}))
        .await;
    assert!(t.contains("hard links"), "{t}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("h2")).unwrap(),
        "shared\n"
    );
    let t = nib
        .err("write", json!({"path": "pipe", "content": "x"}))
        .await;
    assert!(t.contains("FIFO"), "{t}");
    nib.stop().await;
}

#[tokio::test]
async fn broken_json_yaml_toml_is_written_with_a_warning() {
    let dir = project();
    let nib = start(Era::Handshake, dir.path()).await;
    let cases = [
        ("c.json", "{\n  \"a\": 1,\n}\n", "JSON", 3),
        ("c.yaml", "a: 1\nb: [1, 2\nc: 3\n", "YAML", 3),
        ("c.toml", "a = 1\nb = \n", "TOML", 2),
    ];
    for (name, content, kind, line) in cases {
        let t = nib
            .ok("write", json!({"path": name, "content": content}))
            .await;
        assert!(
            t.contains(&format!("this {kind} no longer parses: line {line}:")),
            "{name}: {t}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(name)).unwrap(),
            content
        );
    }
    // A file that was already broken gets no warning for staying broken.
    let tag = expected_tag(b"{\n  \"a\": 1,\n}\n");
    let t = nib
        .ok(
            "write",
            json!({"path": "c.json", "content": "{,}\n", "tag": tag}),
        )
        .await;
    assert!(!t.contains("no longer parses"), "{t}");
    nib.stop().await;
}
