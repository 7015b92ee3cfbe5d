//! What the file tools print, as snapshots (`files/tests/snapshots/`): read,
//! grep, find, edit and write, their answers and their errors, called in
//! process through [`nib_files::tools::call_file_tool`] on a small project in
//! a temporary folder, confined beneath it as under `NIB_SANDBOX=1`. The
//! folder's path is written `[PROJECT]`, a file's age `[AGE]`. Nothing here
//! depends on the tree-sitter grammars, which are off when nib-files is
//! built alone and on in the workspace (declarations are read in the root
//! crate's tests). A change to what the model reads
//! fails here until its snapshot is accepted (`cargo insta review`), so each
//! such change is a stated one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nib_files::context::{Ctx, Programs};
use nib_files::seen::Agent;
use nib_files::tools::call_file_tool;
use nib_files::workspace::Workspace;
use nib_settings::FileTools;
use serde_json::{Value, json};

/// No program runs in these tests (read's `path@REV` would need git).
struct NoPrograms;

impl Programs for NoPrograms {
    fn sandbox(&self, _: &[PathBuf]) -> Result<nib_sandbox::Sandbox, String> {
        Err("these tests run no program".into())
    }
}

/// A project, the state folder beside it, and one agent's session over them.
struct Session {
    project: tempfile::TempDir,
    _state: tempfile::TempDir,
    project_dir: PathBuf,
    settings: FileTools,
    workspace: Workspace,
    agent: Mutex<Agent>,
}

impl Session {
    /// A session over a project holding `files` (path, text).
    fn new(files: &[(&str, &str)]) -> Session {
        let project = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = project.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let project_dir = std::fs::canonicalize(project.path()).unwrap();
        let settings = settings(state.path());
        Session {
            workspace: Workspace::new(project_dir.clone()),
            project_dir,
            project,
            _state: state,
            settings,
            agent: Mutex::default(),
        }
    }

    /// Calls `tool` and returns what the model would read: the text, with
    /// `error: ` in front when the call failed and the project's path as
    /// `[PROJECT]`.
    fn call(&self, tool: &str, args: Value) -> String {
        let ctx = Ctx {
            workspace: &self.workspace,
            agent: &self.agent,
            settings: &self.settings,
            scope: self.workspace.scope(true, false).unwrap(),
            enforce_seen: true,
            live: None,
            programs: &NoPrograms,
            placing: None,
        };
        let out = match call_file_tool(tool, args.as_object().cloned(), &ctx) {
            Ok(out) if out.is_error => format!("error: {}", out.text),
            Ok(out) => out.text,
            Err(e) => format!("call error: {e}"),
        };
        let dir = self.project_dir.display().to_string();
        let out = out.replace(&dir, "[PROJECT]");
        let age = regex::Regex::new(r"\b\d+(s|m|h|d) ago\b").unwrap();
        age.replace_all(&out, "[AGE]").into_owned()
    }

    /// The tag in the first `[PATH#TAG]` header of a read of `path`.
    fn tag(&self, path: &str) -> String {
        let text = self.call("read", json!({"paths": [path]}));
        let start = text.find('#').expect("a tag") + 1;
        let end = start + text[start..].find(']').expect("a header");
        text[start..end].to_string()
    }

    fn file(&self, path: &str) -> String {
        std::fs::read_to_string(self.project.path().join(path)).unwrap_or_default()
    }
}

/// The file tools' settings as `NIB_SANDBOX=1` gives them, with nothing
/// that runs programs.
fn settings(state: &Path) -> FileTools {
    FileTools {
        state_dir: state.to_path_buf(),
        failpoint: None,
        sandbox: true,
        programs: false,
    }
}

const LIB: &str = "\
//! A small library.

/// Adds two numbers.
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

/// Subtracts b from a.
pub fn sub(a: i32, b: i32) -> i32 {
    a - b
}
";

const NOTES: &str = "alpha\nbeta\ngamma\ndelta\nepsilon\n";

fn project() -> Session {
    Session::new(&[
        ("src/lib.rs", LIB),
        ("notes.txt", NOTES),
        ("docs/guide.md", "# Guide\n\nCall add, then sub.\n"),
    ])
}

#[test]
fn read_prints_anchored_rows_ranges_declarations_and_folders() {
    let s = project();
    insta::assert_snapshot!("read_file", s.call("read", json!({"paths": ["notes.txt"]})));
    insta::assert_snapshot!(
        "read_range",
        s.call("read", json!({"paths": ["src/lib.rs:3-6"]}))
    );
    insta::assert_snapshot!("read_folder", s.call("read", json!({"paths": ["."]})));
    insta::assert_snapshot!(
        "read_plain",
        s.call("read", json!({"paths": ["notes.txt"], "plain": true}))
    );
    // Read again, unchanged: the lines already seen fold into one row.
    insta::assert_snapshot!(
        "read_again",
        s.call("read", json!({"paths": ["notes.txt"]}))
    );
}

#[test]
fn read_errors_say_what_is_missing_and_what_next() {
    let s = project();
    insta::assert_snapshot!(
        "read_missing",
        s.call("read", json!({"paths": ["src/main.rs"]}))
    );
    insta::assert_snapshot!(
        "read_outside",
        s.call("read", json!({"paths": ["/etc/hostname"]}))
    );
    insta::assert_snapshot!(
        "read_bad_range",
        s.call("read", json!({"paths": ["notes.txt:9-12"]}))
    );
    insta::assert_snapshot!("read_bad_args", s.call("read", json!({"paths": 42})));
}

#[test]
fn grep_prints_counts_matches_and_context() {
    let s = project();
    insta::assert_snapshot!(
        "grep_matches",
        s.call("grep", json!({"pattern": "fn \\w+"}))
    );
    insta::assert_snapshot!(
        "grep_context",
        s.call(
            "grep",
            json!({"pattern": "gamma", "paths": ["notes.txt"], "context": 1})
        )
    );
    insta::assert_snapshot!("grep_none", s.call("grep", json!({"pattern": "zeta"})));
    insta::assert_snapshot!("grep_bad_pattern", s.call("grep", json!({"pattern": "("})));
}

#[test]
fn find_lists_paths() {
    let s = project();
    insta::assert_snapshot!("find_glob", s.call("find", json!({"pattern": "**/*.rs"})));
    insta::assert_snapshot!("find_all", s.call("find", json!({})));
    insta::assert_snapshot!("find_none", s.call("find", json!({"pattern": "*.py"})));
}

#[test]
fn edit_answers_with_the_new_rows_and_refuses_stale_or_unseen_anchors() {
    let s = project();
    let tag = s.tag("notes.txt");
    let done = s.call(
        "edit",
        json!({"input": format!("[notes.txt#{tag}]\nPUT 2:\n+BETA\n")}),
    );
    insta::assert_snapshot!("edit_set", done);
    assert_eq!(s.file("notes.txt"), "alpha\nBETA\ngamma\ndelta\nepsilon\n");

    // An edit with the old tag is rebased where the lines it names are
    // unchanged since; line 2 changed, so nothing is written.
    let stale = s.call(
        "edit",
        json!({"input": format!("[notes.txt#{tag}]\nPUT 2:\n+B2\n")}),
    );
    insta::assert_snapshot!("edit_stale_tag", stale);
    assert_eq!(s.file("notes.txt"), "alpha\nBETA\ngamma\ndelta\nepsilon\n");

    // src/lib.rs was never read: its lines are unseen.
    let unseen = s.call(
        "edit",
        json!({"input": "[src/lib.rs#0000]\nPUT 5:\n+    a * b\n"}),
    );
    insta::assert_snapshot!("edit_unseen", unseen);
    assert_eq!(s.file("src/lib.rs"), LIB);

    insta::assert_snapshot!("edit_garbled", s.call("edit", json!({"input": "hello"})));
}

#[test]
fn write_creates_and_refuses_to_overwrite_unread_files() {
    let s = project();
    insta::assert_snapshot!(
        "write_new",
        s.call(
            "write",
            json!({"path": "new/file.txt", "content": "one\ntwo\n"})
        )
    );
    assert_eq!(s.file("new/file.txt"), "one\ntwo\n");
    insta::assert_snapshot!(
        "write_over_unread",
        s.call("write", json!({"path": "notes.txt", "content": "gone\n"}))
    );
    assert_eq!(s.file("notes.txt"), NOTES);
}

#[test]
fn an_unknown_tool_names_the_real_ones() {
    let s = project();
    insta::assert_snapshot!("unknown_tool", s.call("frobnicate", json!({})));
}

#[test]
fn edits_that_cut_substitute_and_insert_and_a_write_over_a_read_file() {
    let s = project();
    let tag = s.tag("notes.txt");
    let done = s.call(
        "edit",
        json!({"input": format!("[notes.txt#{tag}]\nCUT 1\nSUB 3: gamma\n+GAMMA\nPUT >5:\n+zeta\n")}),
    );
    insta::assert_snapshot!("edit_cut_sub_insert", done);
    assert_eq!(s.file("notes.txt"), "beta\nGAMMA\ndelta\nepsilon\nzeta\n");
    let tag = s.tag("notes.txt");
    let written = s.call(
        "write",
        json!({"path": "notes.txt", "content": "one\n", "tag": tag}),
    );
    insta::assert_snapshot!("write_over_read", written);
    assert_eq!(s.file("notes.txt"), "one\n");
}

#[test]
fn read_selectors_for_the_end_and_facts() {
    let s = project();
    insta::assert_snapshot!(
        "read_last_lines",
        s.call("read", json!({"paths": ["notes.txt:-2"]}))
    );
    insta::assert_snapshot!(
        "read_info",
        s.call(
            "read",
            json!({"paths": ["notes.txt", "src/lib.rs"], "info": true})
        )
    );
}
