//! read over MCP: tags, selectors, listings, plain, info, limits, refusals.

use serde_json::json;

use crate::common::*;

/// Every vector of DESIGN.md, as file bytes and the tag nib must print.
pub const VECTORS: &[(&str, &[u8], &str)] = &[
    ("empty.txt", b"", "5D05"),
    ("lf.ts", b"export const enabled = false;\n", "5B9D"),
    ("crlf.ts", b"export const enabled = false;\r\n", "5B9D"),
    (
        "bom.ts",
        b"\xEF\xBB\xBFexport const enabled = false;\n",
        "5B9D",
    ),
    ("nofinal.ts", b"export const enabled = false;", "B3E2"),
    ("greek.txt", b"alpha\nbeta\ngamma\n", "B6C1"),
    ("blanks.txt", b"a \nb\t\r\n\n  \n", "9422"),
    ("collide1.txt", b"line one 263\nline two 4471\n", "1D84"),
    ("collide2.txt", b"line one 410\nline two 6970\n", "1D84"),
];

#[tokio::test]
async fn every_design_vector_prints_its_tag_in_both_eras() {
    let dir = project();
    for (name, bytes, _) in VECTORS {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    for era in ERAS {
        let nib = start(era, dir.path()).await;
        for (name, bytes, tag) in VECTORS {
            assert_eq!(
                &expected_tag(bytes),
                tag,
                "the harness agrees with DESIGN.md"
            );
            let text = nib.ok("read", json!({"paths": [name]})).await;
            let first = text.lines().next().unwrap_or("");
            assert_eq!(first, format!("[{name}#{tag}]"), "{era:?}");
        }
        nib.stop().await;
    }
}

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

fn rows(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.starts_with('['))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn line_selectors() {
    let dir = project();
    std::fs::write(dir.path().join("n.txt"), numbered(30)).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let cases: &[(&str, &[usize])] = &[
        ("n.txt:5", &[5]),
        ("n.txt:5-7", &[5, 6, 7]),
        ("n.txt:5+2", &[5, 6]),
        ("n.txt:28-", &[28, 29, 30]),
        ("n.txt:-2", &[29, 30]),
        ("n.txt:1-2,29-30", &[1, 2, 29, 30]),
        ("n.txt:29-99", &[29, 30]),
    ];
    for (sel, want) in cases {
        let text = nib.ok("read", json!({"paths": [sel]})).await;
        let want: Vec<String> = want.iter().map(|i| format!("{i}:line {i}")).collect();
        assert_eq!(rows(&text), want, "{sel}");
        assert!(text.starts_with("[n.txt#"), "{sel}: {text}");
    }
    for bad in ["n.txt:31", "n.txt:9-3", "n.txt:0"] {
        let text = nib.err("read", json!({"paths": [bad]})).await;
        assert!(text.contains("Nothing was read"), "{bad}: {text}");
        assert!(text.contains("hint:"), "{bad}: {text}");
    }
    nib.stop().await;
}

#[tokio::test]
async fn lenient_arguments_are_accepted_with_notes() {
    let dir = project();
    std::fs::write(dir.path().join("n.txt"), numbered(30)).unwrap();
    let nib = start(Era::Modern, dir.path()).await;
    let text = nib
        .ok(
            "read",
            json!({"file_path": "n.txt", "offset": "10", "limit": 2}),
        )
        .await;
    assert_eq!(rows(&text), vec!["10:line 10", "11:line 11"]);
    assert!(text.contains("file_path"), "{text}");
    assert!(text.contains("offset"), "{text}");
    let text = nib.ok("read", json!({"paths": "[\"n.txt:1\"]"})).await;
    assert_eq!(rows(&text), vec!["1:line 1"]);
    assert!(text.contains("JSON string"), "{text}");
    let text = nib
        .ok(
            "read",
            json!({"paths": ["n.txt:1"], "maxLineLength": "3", "plain": "false"}),
        )
        .await;
    assert!(text.contains("[line 1, chars 1-3 of 6]|lin"), "{text}");
    nib.stop().await;
}

#[tokio::test]
async fn folders_are_listed() {
    let dir = project();
    std::fs::create_dir_all(dir.path().join("src/inner")).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.path().join("src/logo.png"), b"\x89PNG\r\n\x1a\n\0\0").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let text = nib.ok("read", json!({"paths": ["src"]})).await;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "[src/] 1 folder, 2 files");
    assert_eq!(lines[1], "inner/ (0 entries)");
    assert!(
        lines[2].starts_with("logo.png (image/png, 10 B, "),
        "{text}"
    );
    assert!(lines[3].starts_with("main.rs (1 line, 13 B, "), "{text}");
    nib.stop().await;
}

#[tokio::test]
async fn plain_and_info() {
    let dir = project();
    std::fs::write(
        dir.path().join("app.log"),
        "\u{1b}[31mred\u{1b}[0m\nsame\nsame\nsame\nend",
    )
    .unwrap();
    std::fs::write(dir.path().join("w.txt"), b"\xEF\xBB\xBFa\r\nbb\r\n").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let text = nib
        .ok("read", json!({"paths": ["app.log"], "plain": true}))
        .await;
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        vec![
            "==> app.log <==",
            "red",
            "same",
            "[the line above repeats 2 more times]",
            "end"
        ]
    );
    let text = nib
        .ok("read", json!({"paths": ["w.txt"], "info": true}))
        .await;
    let tag = expected_tag(b"\xEF\xBB\xBFa\r\nbb\r\n");
    assert!(
        text.starts_with(&format!(
            "[w.txt#{tag}] 2 lines, 10 B, longest line 2 chars, CRLF, BOM, modified "
        )),
        "{text}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn large_files_give_outlines_or_first_rows_and_lockfiles_are_skipped() {
    let dir = project();
    let mut code = String::from(
        "use std::io;\n\npub struct Engine {\n    cache: Vec<u8>,\n}\n\nimpl Engine {\n",
    );
    for i in 0..60 {
        code.push_str(&format!(
            "    pub fn step_{i}(&self) -> u32 {{\n        let x = {i};\n        x + 1\n    }}\n\n"
        ));
    }
    code.push_str("}\n\nfn main() {\n    println!(\"hi\");\n}\n");
    std::fs::write(dir.path().join("engine.rs"), &code).unwrap();
    std::fs::write(dir.path().join("data.csv"), numbered(700)).unwrap();
    std::fs::write(dir.path().join("Cargo.lock"), "x = 1\n".repeat(1000)).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;

    let text = nib.ok("read", json!({"paths": ["engine.rs"]})).await;
    assert!(text.contains("\n1:use std::io;\n"), "{text}");
    assert!(
        text.contains("\n3:pub struct Engine {\n4:    cache: Vec<u8>,\n"),
        "{text}"
    );
    assert!(
        text.contains("\n8:    pub fn step_0(&self) -> u32 {\n"),
        "{text}"
    );
    assert!(!text.contains("let x = 0;"), "bodies are left out: {text}");
    assert!(text.contains("fn main() {"), "{text}");
    assert!(text.contains("[outline: "), "{text}");

    let text = nib.ok("read", json!({"paths": ["data.csv"]})).await;
    assert!(text.contains("\n100:line 100\n"), "{text}");
    assert!(!text.contains("101:line 101"), "{text}");
    assert!(text.contains("data.csv:101-"), "{text}");

    let text = nib.ok("read", json!({"paths": ["Cargo.lock"]})).await;
    assert!(text.contains("skipped: a lockfile, 5.9 KiB"), "{text}");
    assert!(!text.contains("1:x = 1"), "{text}");
    let text = nib.ok("read", json!({"paths": ["Cargo.lock:1-2"]})).await;
    assert_eq!(rows(&text), vec!["1:x = 1", "2:x = 1"]);
    nib.stop().await;
}

#[tokio::test]
async fn the_output_cap_is_shared_fairly_between_files() {
    let dir = project();
    let wide: String = (1..=400)
        .map(|i| format!("{i:04} {}\n", "y".repeat(150)))
        .collect();
    std::fs::write(dir.path().join("a.txt"), &wide).unwrap();
    std::fs::write(dir.path().join("b.txt"), &wide).unwrap();
    std::fs::write(dir.path().join("small.txt"), "tiny\n").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let text = nib
        .ok(
            "read",
            json!({"paths": ["a.txt:1-400", "b.txt:1-400", "small.txt"]}),
        )
        .await;
    assert!(
        text.len() <= 40 * 1024 + 512,
        "output is {} bytes",
        text.len()
    );
    assert!(text.contains("[small.txt#"), "{text}");
    assert!(text.contains("1:tiny"));
    let cut_a = text.find("read a.txt:").is_some();
    let cut_b = text.find("read b.txt:").is_some();
    assert!(
        cut_a && cut_b,
        "both large files are cut with a continuation hint"
    );
    let count = |p: &str| {
        let start = text.find(&format!("[{p}#")).unwrap();
        text[start..]
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with('['))
            .count()
    };
    let (a, b) = (count("a.txt"), count("b.txt"));
    assert!(a.abs_diff(b) <= 2 && a > 100, "fair shares: {a} vs {b}");
    nib.stop().await;
}

#[tokio::test]
async fn refusals_say_what_happened_and_what_next() {
    let dir = project();
    std::fs::write(dir.path().join("doc.pdf"), b"%PDF-1.7\n...").unwrap();
    std::fs::write(dir.path().join("blob.bin"), b"ab\0cd").unwrap();
    let big = std::fs::File::create(dir.path().join("huge.txt")).unwrap();
    big.set_len(8 * 1024 * 1024 + 1).unwrap();
    std::fs::write(dir.path().join("main.rs"), "x\n").unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib.err("read", json!({"paths": ["doc.pdf"]})).await;
    assert!(
        t.contains("is a PDF") && t.contains("Nothing was read"),
        "{t}"
    );
    let t = nib.err("read", json!({"paths": ["blob.bin"]})).await;
    assert!(t.contains("binary"), "{t}");
    let t = nib.err("read", json!({"paths": ["huge.txt"]})).await;
    assert!(t.contains("over the 8 MiB limit"), "{t}");
    let t = nib.err("read", json!({"paths": ["mian.rs"]})).await;
    assert!(
        t.contains("no such file") && t.contains("did you mean main.rs?"),
        "{t}"
    );
    let t = nib
        .err("read", json!({"paths": ["main.rs:Engine.start"]}))
        .await;
    assert!(
        t.contains("no declaration named Engine.start") && t.contains("Nothing was read"),
        "{t}"
    );
    let t = nib.err("read", json!({"paths": ["main.rs:1-x"]})).await;
    assert!(t.contains("not a line range"), "{t}");
    // One good path among bad ones is not an error as a whole.
    let (t, is_error) = nib
        .call("read", json!({"paths": ["main.rs", "nope.txt"]}))
        .await;
    assert!(
        !is_error && t.contains("1:x") && t.contains("nope.txt: no such file"),
        "{t}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn fifos_are_refused_without_blocking() {
    let dir = project();
    let fifo = dir.path().join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib.err("read", json!({"paths": ["pipe"]})).await;
    assert!(t.contains("FIFO"), "{t}");
    nib.stop().await;
}

#[tokio::test]
async fn invalid_utf8_never_breaks_the_json() {
    let dir = project();
    std::fs::write(dir.path().join("latin1.txt"), b"caf\xE9\nok\n").unwrap();
    let nib = start(Era::Modern, dir.path()).await;
    let text = nib.ok("read", json!({"paths": ["latin1.txt"]})).await;
    assert!(text.contains("1:caf\u{FFFD}\n2:ok"), "{text}");
    // The tag is over the raw bytes (nothing to normalize in this file).
    let raw_tag = xxhash_rust::xxh32::xxh32(b"caf\xE9\nok\n", 0) & 0xFFFF;
    assert!(
        text.starts_with(&format!("[latin1.txt#{raw_tag:04X}]")),
        "{text}"
    );
    nib.stop().await;
}

/// Setext headings (`Title` over `=====`), as real changelogs write them
/// (the first 600 lines of the regex crate's CHANGELOG.md, vendored):
/// the outline of a long Markdown file shows each title's line.
#[tokio::test]
async fn a_real_changelog_outlines_by_its_setext_headings() {
    let dir = project();
    let text = include_str!("fixtures/markdown/regex-CHANGELOG.md");
    std::fs::write(dir.path().join("CHANGELOG.md"), text).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let out = nib.ok("read", json!({"paths": ["CHANGELOG.md"]})).await;
    assert!(out.contains("[outline: "), "{out}");
    let lines: Vec<&str> = text.lines().collect();
    let titles: Vec<usize> = (1..lines.len())
        .filter(|&i| lines[i].starts_with("===") && !lines[i - 1].trim().is_empty())
        .collect();
    assert!(titles.len() > 5, "the fixture has setext headings");
    for i in titles {
        let row = format!("\n{}:{}\n", i, lines[i - 1]);
        assert!(out.contains(&row), "{row:?} missing:\n{out}");
    }
    nib.stop().await;
}
