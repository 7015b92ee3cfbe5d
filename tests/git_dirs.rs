//! Every git dir in the roots makes code run — the root's, a submodule's
//! under `.git/modules/`, a worktree's, a nested repository's `.git`
//! folder or file, a bare repository — so under NIB_SANDBOX=1, with
//! bubblewrap and with Landlock + seccomp alone, the file tools write none
//! of them without a person's approval and programs change none of their
//! config, hooks or `.git` files, while git itself still commits there.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::common::*;

const SANDBOXED: [&[(&str, &str)]; 2] = [
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

/// A root holding a repository with a submodule-style git dir under
/// `.git/modules/`, a linked worktree, a nested repository and a bare one;
/// returns the files that make code run, each of which exists.
fn repositories(root: &Path) -> Vec<PathBuf> {
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    std::fs::write(root.join(".gitignore"), "w/\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "first"]);
    std::fs::create_dir_all(root.join(".git/modules")).unwrap();
    git(
        root,
        &[
            "init",
            "-q",
            "--separate-git-dir",
            ".git/modules/sub",
            "sub",
        ],
    );
    git(
        &root.join("sub"),
        &["commit", "-q", "--allow-empty", "-m", "s"],
    );
    git(root, &["worktree", "add", "-q", "w"]);
    std::fs::create_dir_all(root.join("vendor/lib")).unwrap();
    git(&root.join("vendor/lib"), &["init", "-q"]);
    git(root, &["init", "-q", "--bare", "bare.git"]);
    let files: Vec<PathBuf> = [
        "vendor/lib/.git/config",
        "sub/.git",
        ".git/modules/sub/config",
        ".git/worktrees/w/commondir",
        "bare.git/config",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    for f in &files {
        assert!(f.is_file(), "{} was not made", f.display());
    }
    files
}

fn contents(files: &[PathBuf]) -> Vec<Option<Vec<u8>>> {
    files.iter().map(|f| std::fs::read(f).ok()).collect()
}

#[tokio::test]
async fn every_git_dir_in_the_roots_is_held_against_the_file_tools_and_programs() {
    for mode in SANDBOXED {
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        let files = repositories(&root);
        let before = contents(&files);
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::eliciting(Elicit::Decline),
            mode,
        )
        .await;
        // The file tools: each write is put to the user, who declines.
        for (f, old) in files.iter().zip(&before) {
            let rel = f.strip_prefix(&root).unwrap().display().to_string();
            let tag = expected_tag(old.as_deref().unwrap_or_default());
            let t = nib
                .err(
                    "write",
                    json!({"path": rel, "content": "[core]\n\tfsmonitor = touch /tmp/ran\n", "tag": tag}),
                )
                .await;
            assert!(
                t.contains("makes code run") && t.contains("was declined"),
                "{mode:?} {rel}: {t}"
            );
        }
        let t = nib
            .err(
                "write",
                json!({"path": "vendor/lib/.git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
            )
            .await;
        assert!(t.contains("was declined"), "{mode:?}: {t}");
        // Programs: appending, replacing, removing and renaming each.
        let mut script = String::new();
        for f in &files {
            let p = f.display();
            script.push_str(&format!(
                "printf '[core]\\n\\tfsmonitor = touch /tmp/ran\\n' >> '{p}'; \
                 sh -c 'echo x > \"$1\"' - '{p}'; /bin/rm -f '{p}'; /bin/mv '{p}' '{p}.moved'; "
            ));
        }
        script.push_str("git -C vendor/lib config core.fsmonitor 'touch /tmp/ran'; ");
        script.push_str(
            "mkdir -p vendor/lib/.git/hooks && echo x > vendor/lib/.git/hooks/pre-commit; ",
        );
        // What git must still do there: commit in the nested repository.
        script.push_str(
            "git -C vendor/lib -c user.name=M -c user.email=m@example.org commit -q --allow-empty -m n && echo COMMITTED",
        );
        let (out, _) = nib.call("nibash", json!({ "command": script })).await;
        assert_eq!(
            contents(&files),
            before,
            "{mode:?}: a git dir's file changed:\n{out}"
        );
        for f in &files {
            let moved = PathBuf::from(format!("{}.moved", f.display()));
            assert!(!moved.exists(), "{mode:?}: {} was renamed", f.display());
        }
        assert!(
            !root.join("vendor/lib/.git/hooks/pre-commit").exists(),
            "{mode:?}: a hook was made:\n{out}"
        );
        assert!(
            out.contains("COMMITTED"),
            "{mode:?}: git could not commit:\n{out}"
        );
        nib.stop().await;
    }
}
