//! grep and find over MCP: rows, options, paging, ignore rules, edits from
//! grep rows, replace tokens, big inputs.

use serde_json::json;

use crate::common::*;

fn w(dir: &std::path::Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn git_init(dir: &std::path::Path) {
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        // Without git, a bare .git folder still marks a repository for the ignore rules.
        std::fs::create_dir_all(dir.join(".git")).unwrap();
    }
}

const LOGIN: &str = "import { session } from \"./session\"\nexport function login(user: User) {\n  const token = session.create(user)\n  return token\n}\n";

#[tokio::test]
async fn rows_counts_and_edits_straight_from_grep() {
    let dir = project();
    w(dir.path(), "src/login.ts", LOGIN);
    w(dir.path(), "src/other.ts", "const a = 1\nlogin(a)\n");
    for era in ERAS {
        let nib = start(era, dir.path()).await;
        let t = nib.ok("grep", json!({"pattern": "login"})).await;
        assert!(t.starts_with("2 matches in 2 files\n"), "{era:?}: {t}");
        let tag = expected_tag(LOGIN.as_bytes());
        assert!(
            t.contains(&format!(
                "[src/login.ts#{tag}]\n 1:import {{ session }} from \"./session\"\n*2:export function login(user: User) {{\n 3:  const token = session.create(user)\n"
            )),
            "{era:?}: {t}"
        );
        assert!(t.contains("\n 1:const a = 1\n*2:login(a)\n"), "{t}");
        nib.stop().await;
    }
    // Rows grep printed are anchors: edit line 3 without a read.
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib.ok("grep", json!({"pattern": "function login"})).await;
    let tag = header_tag(&t);
    nib.ok("edit", json!({"input": format!("[src/login.ts#{tag}]\nPUT 3:\n+  const token = session.open(user)\n")})).await;
    assert!(
        std::fs::read_to_string(dir.path().join("src/login.ts"))
            .unwrap()
            .contains("session.open")
    );
    // A line grep did not print is not an anchor.
    let t = nib
        .ok("grep", json!({"pattern": "a = 1", "before": 0, "after": 0}))
        .await;
    let tag = header_tag(&t);
    let t = nib
        .err(
            "edit",
            json!({"input": format!("[src/other.ts#{tag}]\nPUT 2:\n+login(b)\n")}),
        )
        .await;
    assert!(t.contains("not seen"), "{t}");
    nib.stop().await;
}

#[tokio::test]
async fn ignore_rules_hidden_files_and_nested_repositories() {
    let dir = project();
    git_init(dir.path());
    w(dir.path(), ".gitignore", "build/\nvendor/\n*.log\n");
    w(dir.path(), "src/a.txt", "needle in src\n");
    w(dir.path(), "build/out.txt", "needle in build\n");
    w(dir.path(), "app.log", "needle in log\n");
    w(dir.path(), ".hidden/h.txt", "needle hidden\n");
    w(dir.path(), ".git/needle.txt", "needle in .git\n");
    git_init(&dir.path().join("vendor/lib"));
    w(dir.path(), "vendor/lib/.gitignore", "*.tmp\n");
    w(dir.path(), "vendor/lib/v.txt", "needle vendored\n");
    w(dir.path(), "vendor/lib/x.tmp", "needle tmp\n");
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib
        .ok("grep", json!({"pattern": "needle", "mode": "files"}))
        .await;
    let listed: Vec<&str> = t
        .lines()
        .skip(2)
        .take_while(|l| !l.starts_with('['))
        .collect();
    assert_eq!(
        listed,
        vec![".hidden/h.txt", "src/a.txt", "vendor/lib/v.txt"],
        "{t}"
    );
    let t = nib
        .ok(
            "grep",
            json!({"pattern": "needle", "mode": "files", "noIgnore": true}),
        )
        .await;
    for f in ["build/out.txt", "app.log", "vendor/lib/x.tmp"] {
        assert!(t.contains(f), "noIgnore finds {f}: {t}");
    }
    assert!(!t.contains(".git/needle.txt"), "{t}");
    let t = nib
        .ok("grep", json!({"pattern": "needle", "paths": ["build"]}))
        .await;
    assert!(
        t.contains("*1:needle in build"),
        "a named path is searched: {t}"
    );
    let t = nib.ok("grep", json!({"pattern": "needle in log"})).await;
    assert!(
        t.starts_with("no matches") && t.contains("ignored files match: app.log (1)"),
        "{t}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn options_filter_and_shape_the_rows() {
    let dir = project();
    w(
        dir.path(),
        "a.rs",
        "Alpha\nbeta.gamma\nbetaXgamma\nx\ny\nz\nAlpha again\n",
    );
    w(dir.path(), "b_test.rs", "alpha\n");
    w(dir.path(), "c.ts", "alpha\n");
    let nib = start(Era::Modern, dir.path()).await;
    let t = nib
        .ok(
            "grep",
            json!({"pattern": "alpha", "ignoreCase": "true", "mode": "count"}),
        )
        .await;
    assert!(
        t.contains("a.rs (2)") && t.contains("b_test.rs (1)") && t.contains("c.ts (1)"),
        "{t}"
    );
    let t = nib.ok("grep", json!({"pattern": "alpha", "ignoreCase": true, "glob": ["*.rs", "!*_test.rs"], "mode": "files"})).await;
    assert!(
        t.contains("a.rs") && !t.contains("b_test") && !t.contains("c.ts"),
        "{t}"
    );
    let t = nib
        .ok(
            "grep",
            json!({"pattern": "beta.gamma", "literal": true, "before": 0, "after": 0}),
        )
        .await;
    assert!(
        t.starts_with("1 match in 1 file") && t.contains("*2:beta.gamma"),
        "{t}"
    );
    let t = nib
        .ok("grep", json!({"pattern": "^x$", "before": 2, "after": 0}))
        .await;
    assert!(t.contains(" 2:beta.gamma\n 3:betaXgamma\n*4:x\n"), "{t}");
    let t = nib
        .ok("grep", json!({"pattern": "Alpha", "paths": ["a.rs:5-7"]}))
        .await;
    assert!(
        t.starts_with("1 match") && t.contains("*7:Alpha again"),
        "{t}"
    );
    let t = nib
        .ok(
            "grep",
            json!({"pattern": "beta", "maxLineLength": 4, "before": 0, "after": 0}),
        )
        .await;
    assert!(t.contains("*[line 2, chars 1-4 of 10]|beta"), "{t}");
    let t = nib.ok("grep", json!({"pattern": "Alpha(?= again)"})).await;
    assert!(t.contains("*7:Alpha again") && t.contains("PCRE2"), "{t}");
    let e = nib
        .err("grep", json!({"pattern": "x", "mode": "lines"}))
        .await;
    assert!(e.contains("mode"), "{e}");
    let t = nib.err("grep", json!({"pattern": "(unclosed"})).await;
    assert!(
        t.contains("does not compile") && t.contains("literal: true"),
        "{t}"
    );
    let huge = "a{1000}{1000}{1000}";
    let t = nib.err("grep", json!({"pattern": huge})).await;
    assert!(t.contains("does not compile"), "size limit: {t}");
    nib.stop().await;
}

#[tokio::test]
async fn pages_hold_20_files_and_20_matches_per_file() {
    let dir = project();
    for i in 0..25 {
        w(dir.path(), &format!("f{i:02}.txt"), &"hit\n".repeat(25));
    }
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib
        .ok("grep", json!({"pattern": "hit", "before": 0, "after": 0}))
        .await;
    assert!(t.starts_with("625 matches in 25 files"), "{t}");
    assert_eq!(
        t.lines()
            .filter(|l| l.starts_with("[f") && l.contains('#'))
            .count(),
        20,
        "{t}"
    );
    assert!(
        t.contains("[files 1-20 of 25; skip: 20 for the next page]"),
        "{t}"
    );
    assert!(t.contains("[20 of 25 matches in this file shown"), "{t}");
    let t = nib
        .ok(
            "grep",
            json!({"pattern": "hit", "skip": 20, "before": 0, "after": 0}),
        )
        .await;
    assert!(
        t.contains("[f20.txt#") && t.contains("[f24.txt#") && !t.contains("[f19.txt#"),
        "{t}"
    );
    w(dir.path(), "single/one.txt", &"hit\n".repeat(150));
    let t = nib
        .ok(
            "grep",
            json!({"pattern": "hit", "paths": ["single"], "before": 0, "after": 0}),
        )
        .await;
    assert_eq!(t.lines().filter(|l| l.starts_with('*')).count(), 100, "{t}");
    nib.stop().await;
}

#[tokio::test]
async fn context_budget_goes_to_definitions_first() {
    let dir = project();
    let mut text = String::new();
    for i in 0..30 {
        text.push_str(&format!("// filler {i}\nuse_widget({i});\n// filler\n"));
    }
    text.push_str("// before def\nfn widget() {\n// after def\n");
    w(dir.path(), "w.rs", &text);
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib.ok("grep", json!({"pattern": "widget"})).await;
    let context_rows = t.lines().filter(|l| l.starts_with(' ')).count();
    assert!(context_rows <= 40, "{context_rows} context rows: {t}");
    assert!(
        t.contains(" 91:// before def\n*92:fn widget() {\n 93:// after def"),
        "the definition got its context: {t}"
    );
    assert!(
        t.contains("[context past the page's 40-row budget: read w.rs:"),
        "{t}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn replace_previews_and_reapply_applies_exactly_those_lines() {
    let dir = project();
    w(dir.path(), "r.txt", "key=1\nother\nkey=2\n");
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib
        .ok(
            "grep",
            json!({"pattern": r"key=(\d)", "replace": "value=$1"}),
        )
        .await;
    assert!(
        t.contains("*1:key=1\n>1|value=1\n") && t.contains(">3|value=2"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("r.txt")).unwrap(),
        "key=1\nother\nkey=2\n",
        "a preview writes nothing"
    );
    let token = t
        .split("REAPPLY ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    nib.ok("edit", json!({"input": format!("REAPPLY {token}")}))
        .await;
    assert_eq!(
        std::fs::read_to_string(dir.path().join("r.txt")).unwrap(),
        "value=1\nother\nvalue=2\n"
    );

    // A previewed line that changed since is refused, and nothing is written.
    w(dir.path(), "s.txt", "key=1\nkey=2\n");
    let t = nib
        .ok(
            "grep",
            json!({"pattern": r"key=(\d)", "paths": ["s.txt"], "replace": "v$1"}),
        )
        .await;
    let token = t
        .split("REAPPLY ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    w(dir.path(), "s.txt", "key=1\nkey=22\n");
    let t = nib
        .err("edit", json!({"input": format!("REAPPLY {token}")}))
        .await;
    assert!(t.contains("changed"), "{t}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("s.txt")).unwrap(),
        "key=1\nkey=22\n"
    );
    nib.stop().await;
}

#[tokio::test]
async fn big_files_and_huge_lines_stay_bounded() {
    let dir = project();
    // Over 8 MiB: rows print as N|TEXT, not anchors.
    let mut big = String::with_capacity(9 << 20);
    while big.len() < (8 << 20) + 1000 {
        big.push_str("filler line of text that is not interesting at all\n");
    }
    big.push_str("needle at the end\n");
    w(dir.path(), "big.txt", &big);
    // One line over the 16 MiB line limit.
    let mut huge = "x".repeat(17 << 20);
    huge.push_str(" needle\n");
    w(dir.path(), "huge.txt", &huge);
    w(dir.path(), "small.txt", "needle\n");
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib
        .ok(
            "grep",
            json!({"pattern": "needle", "before": 0, "after": 0}),
        )
        .await;
    assert!(
        t.contains("[big.txt]\n*") && t.contains("|needle at the end"),
        "{t}"
    );
    assert!(t.contains("over 8 MiB"), "{t}");
    assert!(t.contains("*1:needle"), "{t}");
    assert!(
        t.len() < 64 * 1024,
        "the answer stays small: {} bytes",
        t.len()
    );
    // The server still answers.
    nib.ok("read", json!({"paths": ["small.txt"]})).await;
    nib.stop().await;
}

#[tokio::test]
async fn find_lists_filters_sorts_and_pages() {
    let dir = project();
    w(dir.path(), "src/engine.ts", &"x\n".repeat(30));
    w(dir.path(), "src/util.ts", "y\n");
    w(dir.path(), "README.md", &"# r\n".repeat(300));
    std::fs::create_dir_all(dir.path().join("assets")).unwrap();
    std::fs::write(dir.path().join("assets/logo.png"), b"\x89PNG\r\n\x1a\n\0\0").unwrap();
    let nib = start(Era::Modern, dir.path()).await;
    let t = nib.ok("find", json!({})).await;
    assert!(t.starts_with("4 files, by path\n"), "{t}");
    assert!(t.contains("\nREADME.md (300 lines, 1.2 KiB, "), "{t}");
    assert!(
        t.contains("\nsrc/\n  engine.ts (30 lines, 60 B, ")
            && t.contains("\n  util.ts (1 line, 2 B, "),
        "{t}"
    );
    assert!(t.contains("\nassets/\n  logo.png (image/png, "), "{t}");
    let t = nib.ok("find", json!({"sort": "size"})).await;
    let order: Vec<&str> = t
        .lines()
        .skip(2)
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        order,
        vec![
            "README.md",
            "src/engine.ts",
            "assets/logo.png",
            "src/util.ts"
        ],
        "{t}"
    );
    let t = nib
        .ok("find", json!({"glob": "*.ts", "minSize": "10"}))
        .await;
    assert!(
        t.starts_with("1 file") && t.contains("engine.ts") && !t.contains("util.ts"),
        "{t}"
    );
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3 * 86400);
    std::fs::File::options()
        .write(true)
        .open(dir.path().join("src/util.ts"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let t = nib.ok("find", json!({"newer": "1h"})).await;
    assert!(t.starts_with("3 files") && !t.contains("util.ts"), "{t}");
    let e = nib.err("find", json!({"minSize": "lots"})).await;
    assert!(e.contains("minSize"), "{e}");

    for i in 0..230 {
        w(dir.path(), &format!("many/d{}/f{i}.txt", i % 3), "z\n");
    }
    let t = nib.ok("find", json!({"paths": ["many"]})).await;
    assert!(t.starts_with("230 files"), "{t}");
    assert!(
        t.contains("many/d0/ (77 files, ") && t.contains("pass skip: 0"),
        "folders instead: {t}"
    );
    let t = nib.ok("find", json!({"paths": ["many"], "skip": 0})).await;
    assert!(
        t.contains("[files 1-200 of 230; skip: 200 for the next page]"),
        "{t}"
    );
    assert_eq!(
        t.matches("many/d0/\n").count(),
        1,
        "a folder is printed once: {t}"
    );
    nib.stop().await;
}

/// A replacement naming a group the pattern lacks (`$chain`) would turn it
/// into nothing silently: the answer says so and how to write it.
#[tokio::test]
async fn a_replacement_naming_a_missing_group_is_named() {
    let dir = project();
    w(dir.path(), "r.txt", "a.b()\n");
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib
        .ok(
            "grep",
            json!({"pattern": r"(\w+)\.b", "replace": "$chain.$1"}),
        )
        .await;
    assert!(t.contains(">1|.a()"), "{t}");
    assert!(
        t.contains("names $chain, a group the pattern does not have") && t.contains("$$"),
        "{t}"
    );
    let t = nib
        .ok(
            "grep",
            json!({"pattern": r"(\w+)\.b", "replace": "$$x.${1}z"}),
        )
        .await;
    assert!(
        t.contains(">1|$x.az()") && !t.contains("does not have"),
        "{t}"
    );
    nib.stop().await;
}
