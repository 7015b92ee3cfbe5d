//! ARCHITECTURE.md against the tree: every repository path it names exists,
//! every workspace crate is named, and the rules it sets for itself hold
//! (its layers are checked by `tests/layers.rs`).
//!
//! What counts as a path: a span in backticks with no spaces, made of
//! letters, digits and `_ . / -`, that holds a `/` or ends in a source or
//! document extension (`.rs`, `.md`, `.toml`, `.ts`, `.tsx`, `.sh`,
//! `.py`), and a Markdown link's target that is not a URL. Each is read
//! from the repository's root; one ending in `/` must be a folder. Names of
//! files outside the repository (`nib.json`, `~/.claude/settings.json`,
//! `/proc/PID/environ`) are not paths here: a leading `~`, `/` or `$`, or a
//! `.json` name without a `/`, is left alone.

use std::collections::BTreeSet;
use std::path::Path;

const EXTENSIONS: &[&str] = &[".rs", ".md", ".toml", ".ts", ".tsx", ".sh", ".py"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The spans in backticks, outside fenced blocks.
fn code_spans(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            out.push(inside.to_string());
        }
    }
    out
}

/// The targets of Markdown links (`[text](target)`) that are not URLs or
/// anchors, without their `#fragment`.
fn link_targets(doc: &str) -> Vec<String> {
    doc.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|t| !t.contains("://") && !t.starts_with('#') && !t.starts_with("mailto:"))
        .map(|t| t.split('#').next().unwrap_or("").to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Whether a span in backticks names a repository path (see the module doc).
fn looks_like_path(span: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    !span.is_empty()
        && span.chars().all(allowed)
        && !span.starts_with(['/', '-'])
        && !span.starts_with("..")
        && (span.contains('/') || EXTENSIONS.iter().any(|x| span.ends_with(x)))
}

/// The paths `doc` names that do not exist in the repository at `root`.
fn missing_paths(doc: &str, root: &Path) -> Vec<String> {
    let mut named: BTreeSet<String> = code_spans(doc)
        .into_iter()
        .filter(|s| looks_like_path(s))
        .collect();
    named.extend(link_targets(doc));
    named
        .into_iter()
        .filter(|p| {
            let at = root.join(p.trim_end_matches('/'));
            if p.ends_with('/') {
                !at.is_dir()
            } else {
                !at.exists()
            }
        })
        .collect()
}

/// The workspace's crates by package name: the root's and its members'.
fn workspace_crates(root: &Path) -> Vec<String> {
    let manifest: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let members = manifest["workspace"]["members"].as_array().unwrap();
    members
        .iter()
        .map(|m| {
            let dir = root.join(m.as_str().unwrap());
            let crate_manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))
                .unwrap()
                .parse()
                .unwrap();
            crate_manifest["package"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn every_path_architecture_md_names_exists() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let missing = missing_paths(&doc, root());
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist (from the repository's root):\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_workspace_crate_is_named_in_architecture_md() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let spans: BTreeSet<String> = code_spans(&doc).into_iter().collect();
    let unnamed: Vec<String> = workspace_crates(root())
        .into_iter()
        .filter(|c| !spans.contains(c))
        .collect();
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md does not name these workspace crates (in backticks): {unnamed:?}"
    );
}

#[test]
fn the_check_reads_paths_as_the_module_doc_says() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/tools")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "").unwrap();
    let doc = "\
`src/lib.rs` and `src/tools/` exist; `src/gone.rs`, `state.rs` and `src/lib.rs/` do not.
`nib.json`, `~/.claude/settings.json`, `/proc/PID/environ`, `tools::call`, `path@REV`
and `NAME_TOOL` are not repository paths. [a link](src/missing.md#part), [web](https://x.y/z).
```
`src/in_a_fence.rs`
```
";
    assert_eq!(
        missing_paths(doc, dir.path()),
        vec!["src/gone.rs", "src/lib.rs/", "src/missing.md", "state.rs"]
    );
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// ARCHITECTURE.md: "Only `nib` knows MCP" — no crate beneath the broker
/// depends on rmcp.
#[test]
fn no_crate_beneath_the_broker_depends_on_rmcp() {
    for folder in ["shell", "files", "text", "sandbox", "command_rules"] {
        let manifest: toml::Table = std::fs::read_to_string(root().join(folder).join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        for table in ["dependencies", "dev-dependencies"] {
            let deps = manifest.get(table).and_then(toml::Value::as_table);
            assert!(
                deps.is_none_or(|d| !d.contains_key("rmcp")),
                "{folder}/Cargo.toml's {table} name rmcp; only the broker (nib) may know MCP"
            );
        }
    }
}

/// ARCHITECTURE.md: every program the broker starts goes through
/// `nib-sandbox` — nothing in `src/` starts a process itself.
#[test]
fn the_broker_starts_programs_only_through_the_sandbox() {
    let mut found = Vec::new();
    for file in rust_files(&root().join("src")) {
        let text = std::fs::read_to_string(&file).unwrap();
        for needle in [
            "std::process::Command",
            "tokio::process",
            "process::Command::new",
        ] {
            if text.contains(needle) {
                found.push(format!("{}: {needle}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the broker starts a process outside nib-sandbox:\n{}",
        found.join("\n")
    );
}
