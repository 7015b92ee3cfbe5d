//! read, completed: versions and diffs, git revisions, SQLite, images,
//! unchanged-line collapse.

use base64::Engine;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn changes_since_a_version_and_unknown_tags() {
    let dir = project();
    std::fs::write(dir.path().join("f.txt"), "a\nb\nc\nd\n").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib.ok("read", json!({"paths": ["f.txt"]})).await;
    let v1 = header_tag(&t);
    std::fs::write(dir.path().join("f.txt"), "a\nB\nc\nd\ne\n").unwrap();
    let t = nib
        .ok("read", json!({"paths": [format!("f.txt#{v1}")]}))
        .await;
    assert!(t.contains(" 1:a\n-|b\n+2:B\n 3:c\n 4:d\n+5:e\n"), "{t}");
    assert!(t.contains(&format!("[changes since #{v1}]")), "{t}");
    // Those rows are anchors: edit line 5 at once.
    let cur = header_tag(&t);
    nib.ok(
        "edit",
        json!({"input": format!("[f.txt#{cur}]\nPUT 5:\n+E\n")}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "a\nB\nc\nd\nE\n"
    );
    let t = nib.err("read", json!({"paths": ["f.txt#0BAD"]})).await;
    assert!(
        t.contains("last 4 versions") && t.contains(&format!("#{v1}")),
        "{t}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn unchanged_lines_collapse_and_full_prints_them() {
    let dir = project();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("f.txt"), &text).unwrap();
    let nib = start(Era::Modern, dir.path()).await;
    nib.ok("read", json!({"paths": ["f.txt"]})).await;
    std::fs::write(
        dir.path().join("f.txt"),
        text.replace("line 5\n", "line five\n"),
    )
    .unwrap();
    let t = nib.ok("read", json!({"paths": ["f.txt"]})).await;
    assert!(t.contains("[lines 1-4 unchanged since you saw them]\n5:line five\n[lines 6-10 unchanged since you saw them]"), "{t}");
    let t = nib
        .ok("read", json!({"paths": ["f.txt"], "collapse": false}))
        .await;
    assert!(t.contains("\n1~line 1\n"), "{t}");
    let t = nib
        .ok("read", json!({"paths": ["f.txt"], "full": true}))
        .await;
    assert!(
        t.contains("\n1:line 1\n") && !t.contains("unchanged since"),
        "{t}"
    );
    // Collapsed lines still count as seen: a fresh agent edits a collapsed line.
    let nib2 = start(Era::Handshake, dir.path()).await;
    nib2.ok("read", json!({"paths": ["f.txt"]})).await;
    let t = nib2.ok("read", json!({"paths": ["f.txt"]})).await;
    assert!(
        t.contains("[lines 1-10 unchanged since you saw them]"),
        "{t}"
    );
    nib2.ok(
        "edit",
        json!({"input": format!("[f.txt#{}]\nPUT 8:\n+eight\n", header_tag(&t))}),
    )
    .await;
    nib.stop().await;
    nib2.stop().await;
}

#[tokio::test]
async fn git_revisions_and_diffs() {
    let dir = project();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("f.txt"), "a\nb\nc\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-qm", "first"]);
    git(d, &["checkout", "-qb", "topic"]);
    std::fs::write(d.join("f.txt"), "a\nB\nc\nd\n").unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/n.txt"), "new\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-qm", "second change"]);
    for era in ERAS {
        let nib = start(era, d).await;
        let t = nib.ok("read", json!({"paths": ["f.txt@HEAD~1"]})).await;
        assert!(
            t.contains("[f.txt@HEAD~1]") && t.contains("\n1|a\n2|b\n3|c\n"),
            "{era:?}: {t}"
        );
        let t = nib.ok("read", json!({"paths": [".@HEAD"]})).await;
        assert!(
            t.contains("second change") && t.contains("-|b\n+2:B"),
            "{era:?}: {t}"
        );
        let t = nib.ok("read", json!({"paths": [".@main...topic"]})).await;
        let files = t.find("f.txt (+2 -1)").unwrap();
        let diff = t.find("[f.txt#").unwrap();
        assert!(files < diff, "the folder's files come first: {t}");
        assert!(
            t.contains("sub/n.txt (+1 -0)") && t.contains("+1:new"),
            "{t}"
        );
        let t = nib
            .ok("read", json!({"paths": [".@main..topic:f.txt"]}))
            .await;
        assert!(t.contains("+4:d") && !t.contains("n.txt"), "{t}");
        // Diff rows are anchors of the current file: edit line 4 without a read.
        let tag = header_tag(&t[t.find("[f.txt#").unwrap()..]);
        let e = nib
            .ok(
                "edit",
                json!({"input": format!("[f.txt#{tag}]\nPUT 4:\n+D\n")}),
            )
            .await;
        assert!(e.contains("[line 4 as you sent it]"), "{e}");
        std::fs::write(d.join("f.txt"), "a\nB\nc\nd\n").unwrap();
        let t = nib
            .err("read", json!({"paths": ["f.txt@no-such-rev"]}))
            .await;
        assert!(
            t.contains("no-such-rev") && t.contains("Nothing was read"),
            "{t}"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn sqlite_tables_rows_queries_and_refused_writes() {
    let dir = project();
    let db = dir.path().join("app.db");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, email TEXT); CREATE TABLE empty(x);")
            .unwrap();
        for i in 1..=30 {
            c.execute(
                "INSERT INTO users(name, email) VALUES (?1, ?2)",
                (format!("u{i}"), format!("u{i}@x")),
            )
            .unwrap();
        }
    }
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib.ok("read", json!({"paths": ["app.db"]})).await;
    assert!(
        t.contains("SQLite database, 2 tables")
            && t.contains("users (30 rows): id INTEGER, name TEXT, email TEXT")
            && t.contains("empty (0 rows): x"),
        "{t}"
    );
    let t = nib.ok("read", json!({"paths": ["app.db:users"]})).await;
    assert!(
        t.contains("id | name | email\n1 | u1 | u1@x\n") && t.contains("30 | u30 | u30@x"),
        "{t}"
    );
    let t = nib.ok("read", json!({"paths": ["app.db:users:-15"]})).await;
    assert!(
        t.contains("the last 15 rows") && t.contains("\n16 | u16") && !t.contains("\n15 | u15"),
        "{t}"
    );
    let t = nib
        .ok(
            "read",
            json!({"paths": ["app.db:SELECT name FROM users WHERE id IN (2, 3) ORDER BY id"]}),
        )
        .await;
    assert!(t.contains("name\nu2\nu3\n"), "{t}");
    for write in [
        "DELETE FROM users",
        "UPDATE users SET name = 'x'",
        "DROP TABLE users",
        "INSERT INTO users(name) VALUES ('z')",
    ] {
        let t = nib
            .err("read", json!({"paths": [format!("app.db:{write}")]}))
            .await;
        assert!(
            t.contains("would write") && t.contains("unchanged"),
            "{write}: {t}"
        );
    }
    let c = rusqlite::Connection::open(&db).unwrap();
    let (n, names): (i64, String) = c
        .query_row("SELECT count(*), group_concat(name) FROM users", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(n, 30, "the database is unchanged");
    assert!(!names.contains('x') && !names.contains('z'));
    nib.stop().await;
}

fn encode(img: &image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

#[tokio::test]
async fn images_are_sent_scaled_to_what_a_model_sees() {
    let dir = project();
    let big = image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(3000, 2000, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
    }));
    let small = image::DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(
        40,
        30,
        image::Rgba([1, 2, 3, 255]),
    ));
    std::fs::write(
        dir.path().join("big.png"),
        encode(&big, image::ImageFormat::Png),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("big.jpg"),
        encode(&big, image::ImageFormat::Jpeg),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("small.gif"),
        encode(&small, image::ImageFormat::Gif),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("small.webp"),
        encode(&small, image::ImageFormat::WebP),
    )
    .unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    for (name, mime, w, h) in [
        ("big.png", "image/png", None, None),
        ("big.jpg", "image/jpeg", None, None),
        ("small.gif", "image/gif", Some(40), Some(30)),
        ("small.webp", "image/webp", Some(40), Some(30)),
    ] {
        let r = nib
            .try_call("read", json!({"paths": [name]}))
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{name}: {}", text_of(&r));
        let img = r
            .content
            .iter()
            .find_map(|c| c.as_image())
            .unwrap_or_else(|| panic!("{name}: no image"));
        assert_eq!(img.mime_type, mime, "{name}");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&img.data)
            .unwrap();
        let decoded = image::load_from_memory(&bytes).unwrap();
        let (dw, dh) = (decoded.width(), decoded.height());
        assert!(
            dw.max(dh) <= 1568 && u64::from(dw) * u64::from(dh) <= 1_150_000,
            "{name}: {dw}x{dh}"
        );
        if let (Some(w), Some(h)) = (w, h) {
            assert_eq!((dw, dh), (w, h), "{name}: a small image is sent as it is");
        } else {
            assert!(
                dw > 1000,
                "{name}: scaled down, not to a thumbnail: {dw}x{dh}"
            );
            assert!(
                text_of(&r).contains("3000×2000, sent at"),
                "{}",
                text_of(&r)
            );
        }
    }
    std::fs::write(dir.path().join("doc.pdf"), b"%PDF-1.4\n").unwrap();
    let t = nib.err("read", json!({"paths": ["doc.pdf"]})).await;
    assert!(t.contains("PDF"), "{t}");
    nib.stop().await;
}

/// A selector after a revision reads that version's lines or
/// declarations: `FILE@REV:1-2`, `FILE@REV:NAME` (a function gone since).
#[tokio::test]
async fn a_selector_after_a_revision_reads_that_versions_lines_and_declarations() {
    let dir = project();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(
        root.join("lib.rs"),
        "use std::io;\n\npub fn old_one() -> u32 {\n    1\n}\n\npub fn kept() -> u32 {\n    2\n}\n",
    )
    .unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "first"]);
    std::fs::write(root.join("lib.rs"), "pub fn kept() -> u32 {\n    3\n}\n").unwrap();
    git(root, &["commit", "-qam", "second"]);
    let nib = start(Era::Handshake, root).await;
    let lines = nib
        .ok("read", json!({"paths": ["lib.rs@HEAD~1:1-2"]}))
        .await;
    assert!(lines.contains("1|use std::io;\n2|\n"), "{lines}");
    assert!(!lines.contains("old_one"), "{lines}");
    let decl = nib
        .ok("read", json!({"paths": ["lib.rs@HEAD~1:old_one"]}))
        .await;
    assert!(
        decl.contains("3|pub fn old_one() -> u32 {\n4|    1\n5|}\n"),
        "{decl}"
    );
    assert!(!decl.contains("kept"), "{decl}");
    let (missing, _) = nib
        .call("read", json!({"paths": ["lib.rs@HEAD~1:olde_one"]}))
        .await;
    assert!(
        missing.contains("no declaration named olde_one"),
        "{missing}"
    );
    nib.stop().await;
}
