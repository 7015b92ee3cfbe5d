//! Languages: declarations, outlines, block ends, IMPORT and parse warnings
//! on realistic samples (tests/fixtures/lang), through the MCP server.

use std::path::Path;

use serde_json::json;

use crate::common::*;

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lang")
}

/// Copies the samples into a fresh project.
fn samples() -> tempfile::TempDir {
    let dir = project();
    for e in std::fs::read_dir(fixtures()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    dir
}

/// Each language: a declaration selector and the first and last rows it must print.
const DECLARATIONS: &[(&str, &str, &str, &str)] = &[
    (
        "Sample.java",
        "Repo.toString",
        "16:    @Override",
        "19:    }",
    ),
    (
        "Sample.java",
        "State",
        "25:    enum State { OPEN, DONE }",
        "25:    enum State { OPEN, DONE }",
    ),
    (
        "sample.kt",
        "Greeter.greet",
        "9:    fun greet(): String {",
        "11:    }",
    ),
    ("sample.ts", "login", "3:/** Logs a user in. */", "7:}"),
    (
        "sample.ts",
        "Auth.check",
        "16:  check(user: User): boolean {",
        "18:  }",
    ),
    (
        "sample.tsx",
        "Panel.render",
        "20:  render(items: string[]) {",
        "28:  }",
    ),
    (
        "sample.tsx",
        "Badge",
        "9:/** A label with a counter that goes up on click. */",
        "17:}",
    ),
    (
        "sample.js",
        "Counter.increment",
        "11:  increment() {",
        "13:  }",
    ),
    (
        "sample.go",
        "Start",
        "10:// Start starts the server.",
        "14:}",
    ),
    (
        "sample.py",
        "Engine.make",
        "10:    @staticmethod",
        "12:        return Engine(\"x\")",
    ),
    (
        "sample.rs",
        "Engine.new",
        "10:    /// Makes one.",
        "13:    }",
    ),
    ("sample.c", "add", "11:/* Adds. */", "14:}"),
    (
        "sample.cpp",
        "Widget.name",
        "9:    std::string name() const { return \"w\"; }",
        "9:    std::string name() const { return \"w\"; }",
    ),
    (
        "sample.zig",
        "Point.sum",
        "8:    pub fn sum(self: Point) i32 {",
        "10:    }",
    ),
];

#[tokio::test]
async fn declarations_print_with_their_comments_and_annotations() {
    let dir = samples();
    let nib = start(Era::Handshake, dir.path()).await;
    for (file, name, first, last) in DECLARATIONS {
        let t = nib
            .ok(
                "read",
                json!({"paths": [format!("{file}:{name}")], "full": true}),
            )
            .await;
        let rows: Vec<&str> = t.lines().skip(1).filter(|l| !l.starts_with('[')).collect();
        assert_eq!(rows.first().copied(), Some(*first), "{file}:{name}\n{t}");
        assert_eq!(rows.last().copied(), Some(*last), "{file}:{name}\n{t}");
    }
    let t = nib
        .ok(
            "read",
            json!({"paths": ["sample.rs:Run,main"], "full": true}),
        )
        .await;
    assert!(
        t.contains("16:pub trait Run {") && t.contains("20:fn main() {"),
        "{t}"
    );
    let t = nib.err("read", json!({"paths": ["sample.py:Engin"]})).await;
    assert!(t.contains("did you mean Engine"), "{t}");
    nib.stop().await;
}

#[tokio::test]
async fn block_ends_come_from_the_syntax_tree() {
    let dir = samples();
    // A signature over several lines: indentation alone would end the block at line 2.
    std::fs::write(
        dir.path().join("multi.rs"),
        "fn long(\n    a: u32,\n) -> u32 {\n    a\n}\nfn after() {}\n",
    )
    .unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    // Each: file, the line a block starts on, and the line it must end on.
    let cases: &[(&str, usize, usize)] = &[
        ("multi.rs", 1, 5),
        ("sample.go", 11, 14),
        ("sample.py", 7, 8),
        ("sample.c", 12, 14),
        ("sample.kt", 9, 11),
        ("sample.zig", 8, 10),
        ("Sample.java", 16, 19),
        ("sample.rs", 11, 13),
        ("sample.ts", 16, 18),
        ("sample.tsx", 10, 17),
        ("sample.js", 7, 9),
        ("sample.cpp", 14, 17),
    ];
    for (file, line, end) in cases {
        let before = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let t = nib.ok("read", json!({"paths": [file], "full": true})).await;
        let tag = header_tag(&t);
        nib.ok(
            "edit",
            json!({"input": format!("[{file}#{tag}]\nCUT {line}*\n")}),
        )
        .await;
        let after = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let want: String = before
            .lines()
            .enumerate()
            .filter(|(i, _)| *i + 1 < *line || *i + 1 > *end)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        assert_eq!(
            after, want,
            "{file}: CUT {line}* should remove lines {line}-{end}"
        );
    }
    nib.stop().await;
}

#[tokio::test]
async fn large_files_outline_from_the_tree_with_an_import_tree() {
    let dir = project();
    let mut src = String::from("package com.acme.big;\n\n");
    for i in 0..12 {
        src.push_str(&format!("import com.acme.pkg{}.Type{i};\n", i % 3));
    }
    src.push_str("\n/** Big. */\npublic class Big {\n");
    for i in 0..60 {
        src.push_str(&format!("    public int method{i}(int x) {{\n        int y = x + {i};\n        return y;\n    }}\n\n"));
    }
    src.push_str("}\n");
    std::fs::write(dir.path().join("Big.java"), &src).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib.ok("read", json!({"paths": ["Big.java"]})).await;
    assert!(t.contains("[imports 3-14: 12 of them]"), "{t}");
    assert!(
        t.contains("  com.acme.pkg0: Type0, Type3, Type6, Type9"),
        "{t}"
    );
    assert!(t.contains("\n1:package com.acme.big;"), "{t}");
    assert!(
        t.contains(":public class Big {") || t.contains(":/** Big. */"),
        "{t}"
    );
    assert!(t.contains(":    public int method59(int x) {"), "{t}");
    assert!(!t.contains("int y = x"), "bodies are left out: {t}");
    nib.stop().await;
}

#[tokio::test]
async fn imports_and_parse_warnings() {
    let dir = samples();
    let nib = start(Era::Handshake, dir.path()).await;
    let t = nib.ok("read", json!({"paths": ["sample.kt:1"]})).await;
    let tag = header_tag(&t);
    nib.ok("edit", json!({"input": format!("[sample.kt#{tag}]\nIMPORT kotlin.math.max, kotlin.collections.List, java.io.File\n")}))
        .await;
    let text = std::fs::read_to_string(dir.path().join("sample.kt")).unwrap();
    let imports: Vec<&str> = text.lines().filter(|l| l.starts_with("import ")).collect();
    assert_eq!(
        imports,
        vec![
            "import java.io.File",
            "import kotlin.collections.List",
            "import kotlin.math.max"
        ]
    );

    let t = nib
        .ok("read", json!({"paths": ["sample.rs"], "full": true}))
        .await;
    let tag = header_tag(&t);
    let out = nib
        .ok(
            "edit",
            json!({"input": format!("[sample.rs#{tag}]\nPUT 21:\n+    let _ = Engine::new(;\n")}),
        )
        .await;
    assert!(
        out.contains("no longer parses: the first error is on line 21"),
        "{out}"
    );
    assert!(
        std::fs::read_to_string(dir.path().join("sample.rs"))
            .unwrap()
            .contains("Engine::new(;"),
        "the edit still applies"
    );
    nib.stop().await;
}

#[tokio::test]
async fn a_java_class_used_without_an_import_warns_with_the_hunk() {
    let dir = project();
    let app = dir.path().join("src/com/acme/app");
    let util = dir.path().join("src/com/acme/util");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::create_dir_all(&util).unwrap();
    std::fs::write(
        util.join("Widget.java"),
        "package com.acme.util;\n\npublic class Widget {}\n",
    )
    .unwrap();
    std::fs::write(
        app.join("Helper.java"),
        "package com.acme.app;\n\nclass Helper {}\n",
    )
    .unwrap();
    std::fs::write(
        app.join("Service.java"),
        "package com.acme.app;\n\nimport java.util.List;\n\npublic class Service {\n    void run() {\n    }\n}\n",
    )
    .unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let path = "src/com/acme/app/Service.java";
    let t = nib.ok("read", json!({"paths": [path]})).await;
    let tag = header_tag(&t);
    let out = nib
        .ok(
            "edit",
            json!({"input": format!("[{path}#{tag}]\nPUT 6:\n+        List<Widget> ws = new ArrayList<>();\n+        Helper h = new Helper();\n")}),
        )
        .await;
    assert!(
        out.contains("IMPORT com.acme.util.Widget, java.util.ArrayList"),
        "{out}"
    );
    assert!(!out.contains("Helper is"), "same package: {out}");
    assert!(
        std::fs::read_to_string(app.join("Service.java"))
            .unwrap()
            .contains("List<Widget> ws"),
        "the edit applies"
    );

    // The hunk the warning gives fixes it; nothing is left to warn about.
    let t = nib.ok("read", json!({"paths": [path]})).await;
    let tag = header_tag(&t);
    let out = nib
        .ok(
            "edit",
            json!({"input": format!("[{path}#{tag}]\nIMPORT com.acme.util.Widget, java.util.ArrayList\n")}),
        )
        .await;
    assert!(!out.contains("without an import"), "{out}");
    let t = nib.ok("read", json!({"paths": [path], "full": true})).await;
    let tag = header_tag(&t);
    let n = t
        .lines()
        .find(|l| l.contains("Helper h"))
        .and_then(|l| l.split(':').next())
        .unwrap()
        .to_string();
    let out = nib
        .ok(
            "edit",
            json!({"input": format!("[{path}#{tag}]\nPUT {n}:\n+        Widget w = new Widget();\n")}),
        )
        .await;
    assert!(!out.contains("without an import"), "now imported: {out}");
    nib.stop().await;
}

#[tokio::test]
async fn each_language_outlines_from_the_tree() {
    let dir = samples();
    // Each: a file, a first-level member row the outline must print, and a
    // line inside a body it must leave out. 300 comment lines make each
    // sample long enough to be outlined.
    let cases: &[(&str, &str, usize)] = &[
        ("Sample.java", "21:    public List<Task> all() {", 22),
        ("sample.c", "12:int add(int a, int b) {", 13),
        ("sample.cpp", "6:class Widget {", 16),
        ("sample.go", "11:func (s *Server) Start() error {", 12),
        ("sample.js", "11:  increment() {", 8),
        ("sample.kt", "9:    fun greet(): String {", 10),
        ("sample.py", "7:    def __init__(self, name):", 8),
        ("sample.rs", "11:    pub fn new() -> Engine {", 12),
        ("sample.ts", "16:  check(user: User): boolean {", 5),
        ("sample.tsx", "20:  render(items: string[]) {", 11),
        ("sample.zig", "8:    pub fn sum(self: Point) i32 {", 9),
    ];
    for (file, _, _) in cases {
        let comment = if file.ends_with(".py") { "#" } else { "//" };
        let mut src = std::fs::read_to_string(dir.path().join(file)).unwrap();
        for i in 0..300 {
            src.push_str(&format!("{comment} padding {i}\n"));
        }
        std::fs::write(dir.path().join(file), src).unwrap();
    }
    let nib = start(Era::Handshake, dir.path()).await;
    for (file, member, body) in cases {
        let t = nib.ok("read", json!({"paths": [file]})).await;
        assert!(t.contains("[outline: "), "{file}: {t}");
        assert!(t.contains(&format!("\n{member}\n")), "{file}: {t}");
        assert!(!t.contains(&format!("\n{body}:")), "{file}: {t}");
    }
    nib.stop().await;
}

/// A Java outline shows each declaration's signature line, not the
/// annotation above it (`@Deprecated` hid `getYear`; a class showed as
/// its annotation): on java.util.Date, whose deprecated members are
/// annotated on lines of their own.
#[tokio::test]
async fn java_outlines_show_signatures_not_annotations_on_real_sources() {
    let dir = project();
    let Some(date) = jdk_source(dir.path(), "java.base/java/util/Date.java") else {
        return;
    };
    let text = std::fs::read_to_string(&date).unwrap();
    let nib = start(Era::Handshake, dir.path()).await;
    let outline = nib.ok("read", json!({"paths": ["Date.java"]})).await;
    let rows: Vec<(usize, &str)> = outline
        .lines()
        .filter_map(|l| {
            let (n, t) = l.split_once(':')?;
            Some((n.parse().ok()?, t))
        })
        .collect();
    assert!(rows.len() > 30, "{outline}");
    for (n, row) in &rows {
        assert!(
            !row.trim_start().starts_with('@'),
            "row {n} is an annotation:\n{outline}"
        );
    }
    // Every method the file marks deprecated on a line of its own is in
    // the outline by its signature, the line after the annotation.
    let lines: Vec<&str> = text.lines().collect();
    let mut checked = 0;
    for (i, l) in lines.iter().enumerate() {
        let next = lines.get(i + 1).map(|s| s.trim_start()).unwrap_or("");
        if l.trim() == "@Deprecated" && next.starts_with("public ") && next.contains('(') {
            assert!(
                rows.iter().any(|(n, _)| *n == i + 2),
                "line {} ({next}) is not in the outline:\n{outline}",
                i + 2
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} deprecated methods found");
    // Reading a method by name starts at its annotations.
    let get_year = nib
        .ok(
            "read",
            json!({"paths": ["Date.java:getYear"], "full": true}),
        )
        .await;
    let first_row = get_year.lines().nth(1).unwrap_or("");
    assert!(
        first_row.contains("/**") || first_row.contains('@'),
        "{get_year}"
    );
    nib.stop().await;
}

/// A cut outline's hint continues the outline (it returned raw source):
/// three large JDK files read at once share the output cap, so their
/// outlines are cut; the hint's form gives the rest of the outline.
#[tokio::test]
async fn a_cut_outline_continues_as_an_outline_on_real_sources() {
    let dir = project();
    let mut files = Vec::new();
    for member in [
        "java.desktop/java/awt/Component.java",
        "java.desktop/javax/swing/JTable.java",
        "java.base/java/util/concurrent/ConcurrentHashMap.java",
    ] {
        match jdk_source(dir.path(), member) {
            Some(p) => files.push(p.file_name().unwrap().to_string_lossy().into_owned()),
            None => return,
        }
    }
    let nib = start(Era::Handshake, dir.path()).await;
    let all = nib.ok("read", json!({"paths": files})).await;
    let hint = all
        .lines()
        .find(|l| l.starts_with("[outline cut at"))
        .unwrap_or_else(|| panic!("no outline was cut:\n{all}"));
    // "read Component.java:2965- with outline: true …"
    let range = hint
        .split("; read ")
        .nth(1)
        .and_then(|r| r.split(" with outline: true").next())
        .unwrap_or_else(|| panic!("{hint}"));
    let from: usize = range
        .rsplit(':')
        .next()
        .and_then(|n| n.trim_end_matches('-').parse().ok())
        .unwrap_or_else(|| panic!("{hint}"));
    let rest = nib
        .ok("read", json!({"paths": [range], "outline": true}))
        .await;
    let rows: Vec<usize> = rest
        .lines()
        .filter_map(|l| l.split_once(':')?.0.parse().ok())
        .collect();
    let path = range.rsplit_once(':').unwrap().0;
    let total = std::fs::read_to_string(dir.path().join(path))
        .unwrap()
        .lines()
        .count();
    assert!(rows.len() > 20, "{rest}");
    assert!(rows.iter().all(|&n| n >= from), "{rest}");
    assert!(
        rows.len() * 5 < total - from,
        "{} rows for {} lines: raw source, not an outline\n{rest}",
        rows.len(),
        total - from
    );
    nib.stop().await;
}
