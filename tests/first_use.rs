//! First use as the README and docs/install.md tell it (issue 60, findings
//! 1, 2 and 8): the README's first screen gives two commands that work on
//! a fresh machine today and names the published routes as what a release
//! brings; no doc names a placeholder owner or promises a plugin with no nib
//! installed; the README names the variable that turns skips into
//! failures; a removed file is in the trash the uninstall section names;
//! and a nib, sandboxed or not, leaves nothing in `$TMPDIR` but the
//! stand-ins that section documents.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn doc(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap()
}

/// The Markdown files a new user reads: the README, docs/ and the plugin's.
fn user_docs() -> Vec<PathBuf> {
    let mut found = vec![repo().join("README.md")];
    let mut dirs = vec![repo().join("docs"), repo().join("claude")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && !p.ends_with("node_modules") {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                found.push(p);
            }
        }
    }
    found
}

#[test]
fn the_readme_opens_with_two_commands_that_work_today() {
    let readme = doc("README.md");
    let start = readme.find("```sh\n").expect("a first shell block") + 6;
    let len = readme[start..].find("```").unwrap();
    let first = &readme[start..start + len];
    assert!(
        first.contains("cargo install --path . --locked")
            && first.contains("cargo test --workspace"),
        "the first commands: {first}"
    );
    assert!(!first.contains("npm") && !first.contains("npx"), "{first}");
    // What nib is comes before them.
    assert!(readme[..start].contains("MCP server"), "{readme}");
    // npm and npx are named after them, as what a release brings.
    let npm = readme.find("npm install -g nib-mcp").unwrap();
    assert!(
        npm > start + len,
        "npm is named before the install that works"
    );
    let paragraph = &readme[readme[..npm].rfind("\n\n").unwrap()..npm];
    assert!(
        paragraph.contains("What a release brings") && paragraph.contains("nothing is published"),
        "{paragraph}"
    );
    // Skips are counted as passed; the README says what makes them failures.
    assert!(
        readme.contains("NIB_REQUIRE_THIRD_PARTY=1")
            && readme.contains("did not run what they test"),
        "the README does not name the skip list and NIB_REQUIRE_THIRD_PARTY"
    );
}

#[test]
fn the_docs_say_which_route_works_when_and_name_no_placeholder_owner() {
    for path in user_docs() {
        let text = std::fs::read_to_string(&path).unwrap();
        for stale in ["OWNER/", "with no nib installed"] {
            assert!(!text.contains(stale), "{} says {stale:?}", path.display());
        }
    }
    let install = doc("docs/install.md");
    assert!(
        install.contains("| [from source](#from-source-minutes) | today |"),
        "docs/install.md's table does not say the source install works today"
    );
    assert!(install.contains("Today nothing is published"), "{install}");
    assert!(doc("docs/claude-code.md").contains("cargo install --path . --locked"));
}

/// `nib ARGS` as a person's shell starts it: only PATH, HOME and `extra`.
fn nib_as_person(dir: &Path, home: &Path, args: &[&str], extra: &[(&str, &Path)]) -> String {
    let mut c = Command::new(nib_bin());
    c.args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home);
    for (k, v) in extra {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
    said.push_str(&String::from_utf8_lossy(&out.stderr));
    said
}

#[test]
fn a_removed_file_is_in_the_trash_install_md_names() {
    let install = doc("docs/install.md");
    assert!(
        install.contains("`$XDG_DATA_HOME/Trash` (`~/.local/share/Trash`)"),
        "docs/install.md's uninstall section names another trash"
    );
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let dir = t.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    std::fs::write(dir.join("b.txt"), "b\n").unwrap();
    // No XDG_DATA_HOME: ~/.local/share/Trash.
    let said = nib_as_person(&dir, &home, &["sh", "rm a.txt"], &[]);
    assert!(
        home.join(".local/share/Trash/files/a.txt").is_file(),
        "{said}"
    );
    // XDG_DATA_HOME set: $XDG_DATA_HOME/Trash.
    let data = t.path().join("data");
    let said = nib_as_person(
        &dir,
        &home,
        &["sh", "rm b.txt"],
        &[("XDG_DATA_HOME", &data)],
    );
    assert!(data.join("Trash/files/b.txt").is_file(), "{said}");
    assert!(!dir.join("a.txt").exists() && !dir.join("b.txt").exists());
}

/// What `tmp` holds besides `nib-hidden-UID/`, which docs/install.md says
/// is kept on purpose.
fn left_in(tmp: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    let uid = std::fs::metadata(tmp).unwrap().uid();
    let hidden = format!("nib-hidden-{uid}");
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| *n != hidden)
        .collect()
}

#[test]
fn a_nib_leaves_nothing_in_tmpdir_but_the_hidden_stand_ins() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let dir = t.path().join("project");
    let tmp = t.path().join("tmp");
    for d in [&home, &dir, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    let local = Path::new("127.0.0.1");
    let off = Path::new("0");
    // Under the sandbox a program's temporary folder is private (without
    // bubblewrap, a folder of the worker's in nib's $TMPDIR, which it must
    // remove however the session ends); unconfined it is nib's own, so
    // there the programs write nothing.
    let modes: [(&[(&str, &Path)], &str); 4] = [
        (&[], "echo hi > $TMPDIR/x; "),
        (&[("NIB_SANDBOX_BWRAP", off)], "echo hi > $TMPDIR/x; "),
        (&[("NIB_SANDBOX_NETWORK", local)], "echo hi > $TMPDIR/x; "),
        (&[("NIB_SANDBOX", off)], ""),
    ];
    for (mode, write) in modes {
        let mut env = vec![("TMPDIR", tmp.as_path())];
        env.extend_from_slice(mode);
        // A one-call nib sh.
        let line = format!("{write}echo started");
        let said = nib_as_person(&dir, &home, &["sh", &line], &env);
        assert!(said.contains("started"), "{mode:?}: {said}");
        assert!(left_in(&tmp).is_empty(), "{mode:?}: {:?}", left_in(&tmp));
        // An MCP session whose client closes stdin after a call.
        let mut c = Command::new(nib_bin());
        c.current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in &env {
            c.env(k, v);
        }
        let mut child = c.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "nibash", "arguments": {"command": format!("{write}echo made")}}});
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            &call.to_string(),
        ] {
            writeln!(stdin, "{line}").unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&out.stdout);
        assert!(out.contains("made"), "{mode:?}: {out}");
        assert!(left_in(&tmp).is_empty(), "{mode:?}: {:?}", left_in(&tmp));
    }
}

/// The package names of the workspace's members (the root's first), with
/// whether each library runs doc tests.
fn packages() -> Vec<(String, bool)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |dir: &Path| -> toml::Table {
        std::fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap()
    };
    let manifest = read(root);
    let mut dirs = vec![root.to_path_buf()];
    for m in manifest["workspace"]["members"].as_array().unwrap() {
        let m = m.as_str().unwrap();
        if m != "." {
            dirs.push(root.join(m));
        }
    }
    dirs.iter()
        .map(|d| {
            let t = read(d);
            let name = t["package"]["name"].as_str().unwrap().to_string();
            let has_lib = d.join("src/lib.rs").exists();
            let doctest = t
                .get("lib")
                .and_then(|l| l.get("doctest"))
                .and_then(toml::Value::as_bool)
                .unwrap_or(true);
            (name, has_lib && doctest)
        })
        .collect()
}

#[test]
fn the_skip_list_is_the_last_thing_cargo_test_prints() {
    // cargo test runs the test binaries in package-name order, the doc
    // tests after them all: the black-box run (the root package's one
    // test binary) comes last when the root's name sorts after every
    // member's and no library has doc tests to run.
    let all = packages();
    let (root, _) = &all[0];
    let before: Vec<&String> = all[1..]
        .iter()
        .map(|(n, _)| n)
        .filter(|n| *n > root)
        .collect();
    assert!(
        before.is_empty(),
        "{before:?} sort after the root package {root}: their tests run after the skip list"
    );
    let doctests: Vec<&String> = all.iter().filter(|(_, d)| *d).map(|(n, _)| n).collect();
    assert!(
        doctests.is_empty(),
        "{doctests:?} run doc tests after the skip list; set doctest = false in [lib]"
    );
}
