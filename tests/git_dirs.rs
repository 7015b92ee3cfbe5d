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

/// The person's own git in `dir`, outside any sandbox, with a plain
/// environment and `config` as their global configuration; its success
/// does not matter, only what it ran.
fn persons_git(dir: &Path, config: &Path, args: &[&str]) {
    let _ = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("GIT_CONFIG_GLOBAL", config)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// A repository with one commit, canonical; a folder outside it for the
/// marker a planted command would leave, and the person's global config
/// (signing commits with ssh, as where relevant).
fn person_setup() -> (
    tempfile::TempDir,
    PathBuf,
    tempfile::TempDir,
    PathBuf,
    PathBuf,
) {
    let t = project();
    let root = std::fs::canonicalize(t.path()).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "first"]);
    let o = tempfile::tempdir().unwrap();
    let out = std::fs::canonicalize(o.path()).unwrap();
    let global = out.join("gitconfig");
    std::fs::write(
        &global,
        "[user]\n\tname = P\n\temail = p@example.org\n[gpg]\n\tformat = ssh\n[commit]\n\tgpgsign = true\n",
    )
    .unwrap();
    let marker = out.join("marker");
    (t, root, o, global, marker)
}

async fn sandboxed(root: &Path, mode: &[(&str, &str)]) -> Nib {
    start_with(
        Era::Handshake,
        root,
        TestClient::eliciting(Elicit::Decline),
        mode,
    )
    .await
}

async fn sh(nib: &Nib, command: &str) -> String {
    nib.call("nibash", json!({ "command": command })).await.0
}

/// The person's `git status`, `git commit` (signed with ssh) and `git
/// checkout` in `dir` leave no marker.
fn persons_git_runs_nothing(dir: &Path, global: &Path, marker: &Path, what: &str) {
    persons_git(dir, global, &["status"]);
    persons_git(dir, global, &["commit", "-q", "--allow-empty", "-m", "p"]);
    persons_git(dir, global, &["checkout", "-q", "-b", "person"]);
    assert!(
        !marker.exists(),
        "{what}: the person's git ran the model's command"
    );
}

#[tokio::test]
async fn a_commondir_planted_in_the_git_folder_leads_the_persons_git_to_no_command() {
    for mode in SANDBOXED {
        let (_t, root, _o, global, marker) = person_setup();
        let nib = sandboxed(&root, mode).await;
        let out = sh(
            &nib,
            &format!(
                "mkdir -p .git/c && cp -a .git/objects .git/refs .git/HEAD .git/c/ && cp .git/config .git/c/config \
                 && printf '\\tfsmonitor = touch {m}\\n' >> .git/c/config && printf 'c\\n' > .git/commondir \
                 && mkdir -p .git/c/hooks && printf '#!/bin/sh\\ntouch {m}\\n' > .git/c/hooks/post-checkout \
                 && chmod +x .git/c/hooks/post-checkout; echo planted",
                m = marker.display()
            ),
        )
        .await;
        assert!(out.contains("planted"), "{mode:?}: {out}");
        persons_git_runs_nothing(&root, &global, &marker, &format!("{mode:?}: {out}"));
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_git_dir_made_across_two_calls_from_old_files_is_judged_whole() {
    for mode in SANDBOXED {
        let (_t, root, _o, global, marker) = person_setup();
        let nib = sandboxed(&root, mode).await;
        let first = sh(
            &nib,
            &format!(
                "mkdir -p sub/.git/hooks && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tfsmonitor = touch {m}\\n' > sub/.git/config \
                 && printf '#!/bin/sh\\ntouch {m}\\n' > sub/.git/hooks/post-checkout && chmod +x sub/.git/hooks/post-checkout; echo one",
                m = marker.display()
            ),
        )
        .await;
        // The files are older than the call that makes a repository of them.
        std::thread::sleep(std::time::Duration::from_millis(2500));
        let second = sh(
            &nib,
            "cd sub && printf 'ref: refs/heads/main\\n' > .git/HEAD && mkdir -p .git/objects .git/refs/heads \
             && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && cd .. && git add sub; echo two",
        )
        .await;
        assert!(second.contains("two"), "{mode:?}: {first}\n{second}");
        persons_git(&root, &global, &["status"]);
        persons_git(
            &root.join("sub"),
            &global,
            &["checkout", "-q", "-b", "person"],
        );
        persons_git(&root.join("sub"), &global, &["status"]);
        assert!(
            !marker.exists(),
            "{mode:?}: the person's git ran the model's command: {first}\n{second}"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_folder_above_a_nested_repository_cannot_be_swapped_for_a_planted_copy() {
    for mode in SANDBOXED {
        let (_t, root, _o, global, marker) = person_setup();
        std::fs::create_dir_all(root.join("vendor/lib")).unwrap();
        git(&root.join("vendor/lib"), &["init", "-q", "-b", "main"]);
        git(
            &root.join("vendor/lib"),
            &["commit", "-q", "--allow-empty", "-m", "l"],
        );
        let config = std::fs::read(root.join("vendor/lib/.git/config")).unwrap();
        let nib = sandboxed(&root, mode).await;
        let out = sh(
            &nib,
            &format!(
                "mkdir -p x && cp -a vendor x/ && git -C x/vendor/lib config core.fsmonitor 'touch {m}' \
                 && mv vendor vendor-old; mv x/vendor vendor; echo swapped $?",
                m = marker.display()
            ),
        )
        .await;
        assert_eq!(
            std::fs::read(root.join("vendor/lib/.git/config")).unwrap(),
            config,
            "{mode:?}: {out}"
        );
        assert!(!root.join("vendor-old").exists(), "{mode:?}: {out}");
        persons_git_runs_nothing(
            &root.join("vendor/lib"),
            &global,
            &marker,
            &format!("{mode:?}: {out}"),
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn settings_no_blocklist_named_are_taken_out_of_a_new_repository() {
    for mode in SANDBOXED {
        let (_t, root, _o, global, marker) = person_setup();
        let nib = sandboxed(&root, mode).await;
        let out = sh(
            &nib,
            &format!(
                "git init -q -b main sub && cd sub && git -c user.name=a -c user.email=a@b -c commit.gpgsign=false commit -q --allow-empty -m x \
                 && git config gpg.ssh.defaultKeyCommand 'touch {m}' && git config gc.recentObjectsHook 'touch {m}' \
                 && echo unreachable | git hash-object -w --stdin >/dev/null && cd .. && git add sub; echo made",
                m = marker.display()
            ),
        )
        .await;
        assert!(
            out.contains("gpg.defaultKeyCommand") && out.contains("gc.recentObjectsHook"),
            "{mode:?}: the answer names what was taken out: {out}"
        );
        let sub = root.join("sub");
        persons_git(&sub, &global, &["commit", "-q", "--allow-empty", "-m", "p"]);
        persons_git(&sub, &global, &["gc", "-q", "--prune=now"]);
        persons_git(&root, &global, &["status"]);
        assert!(
            !marker.exists(),
            "{mode:?}: the person's git ran the model's command: {out}"
        );
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_worktree_is_still_made_inside_the_sandbox() {
    for mode in SANDBOXED {
        let (_t, root, _o, _global, _marker) = person_setup();
        let nib = sandboxed(&root, mode).await;
        let wt = sh(
            &nib,
            "git worktree add -q w && git -C w -c commit.gpgsign=false commit -q --allow-empty -m w && echo WORKTREE",
        )
        .await;
        assert!(wt.contains("WORKTREE"), "{mode:?}: {wt}");
        assert!(root.join("w/a.txt").is_file(), "{mode:?}: {wt}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_file_the_persons_config_includes_is_held_like_the_config() {
    for mode in SANDBOXED {
        let (_t, root, _o, global, marker) = person_setup();
        std::fs::write(root.join("team.gitconfig"), "[user]\n\tname = Team\n").unwrap();
        git(&root, &["config", "include.path", "../team.gitconfig"]);
        git(&root, &["add", "team.gitconfig"]);
        git(&root, &["commit", "-qm", "team"]);
        let before = std::fs::read(root.join("team.gitconfig")).unwrap();
        let nib = sandboxed(&root, mode).await;
        let out = sh(
            &nib,
            &format!(
                "printf '[core]\\n\\tfsmonitor = touch {m}\\n' >> team.gitconfig; echo appended",
                m = marker.display()
            ),
        )
        .await;
        let tag = expected_tag(&before);
        let t = nib
            .err(
                "write",
                json!({"path": "team.gitconfig", "content": format!("[core]\n\tfsmonitor = touch {}\n", marker.display()), "tag": tag}),
            )
            .await;
        assert!(t.contains("was declined"), "{mode:?}: {t}");
        assert_eq!(
            std::fs::read(root.join("team.gitconfig")).unwrap(),
            before,
            "{mode:?}: {out}"
        );
        persons_git_runs_nothing(&root, &global, &marker, &format!("{mode:?}: {out}"));
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_registered_local_submodule_is_still_made_inside_the_sandbox() {
    for mode in SANDBOXED {
        let (_t, root, _o, _global, _marker) = person_setup();
        // A local submodule's source in the project (ignored), recorded in
        // the project and registered by the person (`git submodule init`
        // writes the superproject's config, which programs may not).
        let up = root.join("upstream");
        std::fs::create_dir_all(&up).unwrap();
        git(&up, &["init", "-q", "-b", "main"]);
        std::fs::write(up.join("s.txt"), "s\n").unwrap();
        git(&up, &["add", "-A"]);
        git(&up, &["commit", "-qm", "s"]);
        std::fs::write(root.join(".gitignore"), "upstream/\n").unwrap();
        git(
            &root,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                "./upstream",
                "m",
            ],
        );
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", "with m"]);
        git(&root, &["submodule", "deinit", "-q", "-f", "m"]);
        std::fs::remove_dir_all(root.join(".git/modules/m")).unwrap();
        git(&root, &["submodule", "init", "-q"]);
        let nib = sandboxed(&root, mode).await;
        let out = sh(
            &nib,
            "git -c protocol.file.allow=always submodule update --init -q && echo SUBMODULE",
        )
        .await;
        assert!(out.contains("SUBMODULE"), "{mode:?}: {out}");
        assert!(
            !out.contains("[git: "),
            "{mode:?}: the sweep took out what git wrote: {out}"
        );
        assert!(root.join("m/s.txt").is_file(), "{mode:?}: {out}");
        // The submodule's git dir keeps what git wrote: git works in it.
        let status = sh(&nib, "git -C m status --short && echo STATUS").await;
        assert!(status.contains("STATUS"), "{mode:?}: {status}");
        nib.stop().await;
    }
}

/// One `nib sh` call in `root` under `mode` (a process of its own, as the
/// command line runs it): its output.
fn one_shot(root: &Path, mode: &[(&str, &str)], command: &str) -> String {
    let mut c = nib_command();
    c.args(["sh", command]).current_dir(root);
    for (k, v) in mode {
        c.env(k, v);
    }
    let out = c.output().expect("nib sh runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_git_dir_made_across_two_one_shot_calls_is_judged_whole() {
    for mode in SANDBOXED {
        let (_t, root, _o, global, marker) = person_setup();
        let first = one_shot(
            &root,
            mode,
            &format!(
                "mkdir -p sub/.git/hooks && printf '[core]\\n\\tfsmonitor = touch {m}\\n' > sub/.git/config; echo one",
                m = marker.display()
            ),
        );
        std::thread::sleep(std::time::Duration::from_millis(2500));
        // The second process's walk finds `sub/.git` by its name and holds
        // its config: held is not the person's.
        let second = one_shot(
            &root,
            mode,
            "cd sub && printf 'ref: refs/heads/main\\n' > .git/HEAD && mkdir -p .git/objects .git/refs/heads \
             && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x; cd .. && git add sub; echo two",
        );
        persons_git(&root, &global, &["status"]);
        persons_git(&root.join("sub"), &global, &["status"]);
        assert!(
            !marker.exists(),
            "{mode:?}: the person's git ran the model's command: {first}\n{second}"
        );
    }
}

#[tokio::test]
async fn a_git_dir_left_inside_the_git_folder_and_named_later_by_a_git_file_is_judged_whole() {
    for mode in SANDBOXED {
        let (_t, root, _o, global, marker) = person_setup();
        let nib = sandboxed(&root, mode).await;
        // A whole git dir where no walk goes and nothing names it yet.
        let first = sh(
            &nib,
            &format!(
                "mkdir -p .git/evil/objects .git/evil/refs/heads .git/evil/hooks && printf 'ref: refs/heads/main\\n' > .git/evil/HEAD \
                 && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tfsmonitor = touch {m}\\n' > .git/evil/config \
                 && printf '#!/bin/sh\\ntouch {m}\\n' > .git/evil/hooks/post-checkout && chmod +x .git/evil/hooks/post-checkout; echo one",
                m = marker.display()
            ),
        )
        .await;
        std::thread::sleep(std::time::Duration::from_millis(2500));
        let second = sh(
            &nib,
            "mkdir -p sub && printf 'gitdir: ../.git/evil\\n' > sub/.git && echo two",
        )
        .await;
        assert!(second.contains("two"), "{mode:?}: {first}\n{second}");
        persons_git(&root.join("sub"), &global, &["status"]);
        persons_git(
            &root.join("sub"),
            &global,
            &["checkout", "-q", "-b", "person"],
        );
        assert!(
            !marker.exists(),
            "{mode:?}: the person's git ran the model's command: {first}\n{second}"
        );
        nib.stop().await;
    }
}

/// A local submodule `m` (from `upstream/`, ignored) recorded in the
/// project and declared in `.gitmodules` but not registered: the
/// superproject's config has no `submodule.m.*` and `.git/modules/m` is
/// not there. Returns the commit `m` records.
fn unregistered_submodule(root: &Path) -> String {
    let up = root.join("upstream");
    std::fs::create_dir_all(&up).unwrap();
    git(&up, &["init", "-q", "-b", "main"]);
    std::fs::write(up.join("s.txt"), "s\n").unwrap();
    git(&up, &["add", "-A"]);
    git(&up, &["commit", "-qm", "s"]);
    std::fs::write(root.join(".gitignore"), "upstream/\n").unwrap();
    git(
        root,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            "./upstream",
            "m",
        ],
    );
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "with m"]);
    git(root, &["submodule", "deinit", "-q", "-f", "m"]);
    std::fs::remove_dir_all(root.join(".git/modules/m")).unwrap();
    let config = std::fs::read_to_string(root.join(".git/config")).unwrap();
    assert!(!config.contains("submodule"), "{config}");
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&up)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test]
async fn an_unregistered_submodule_is_registered_and_made_inside_the_sandbox() {
    for mode in SANDBOXED {
        let (_t, root, _o, _global, _marker) = person_setup();
        unregistered_submodule(&root);
        // A setting of the person's that the sweep's allowlist lacks stays.
        git(&root, &["config", "alias.st", "status"]);
        let before = std::fs::read_to_string(root.join(".git/config")).unwrap();
        let nib = sandboxed(&root, mode).await;
        let out = sh(
            &nib,
            "git -c protocol.file.allow=always submodule update --init -q && echo SUBMODULE",
        )
        .await;
        assert!(out.contains("SUBMODULE"), "{mode:?}: {out}");
        assert!(root.join("m/s.txt").is_file(), "{mode:?}: {out}");
        // The person's lines, then only the two keys of `m`.
        let after = std::fs::read_to_string(root.join(".git/config")).unwrap();
        assert_eq!(
            after,
            format!(
                "{before}[submodule \"m\"]\n\turl = {}/upstream\n\tactive = true\n",
                root.display()
            ),
            "{mode:?}: {out}"
        );
        let status = sh(&nib, "git -C m status --short && echo STATUS").await;
        assert!(status.contains("STATUS"), "{mode:?}: {status}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn a_planted_gitmodules_registers_only_a_url_and_active() {
    for mode in SANDBOXED {
        let (_t, root, _o, global, marker) = person_setup();
        let commit = unregistered_submodule(&root);
        let before = std::fs::read_to_string(root.join(".git/config")).unwrap();
        let nib = sandboxed(&root, mode).await;
        // The model's .gitmodules: an update command, an ext:: url, a name
        // with `..`, and a core setting; each path recorded as a gitlink.
        let m = marker.display();
        let out = sh(
            &nib,
            &format!(
                "printf '[submodule \"m\"]\\n\\tpath = m\\n\\turl = ./upstream\\n\\tupdate = !touch {m}\\n\
                 [submodule \"e\"]\\n\\tpath = e\\n\\turl = ext::sh -c touch%% {m}\\n\
                 [submodule \"../x\"]\\n\\tpath = x\\n\\turl = ./upstream\\n\
                 [core]\\n\\tfsmonitor = touch {m}\\n' > .gitmodules \
                 && git update-index --add --cacheinfo 160000,{commit},e --cacheinfo 160000,{commit},x \
                 && git add .gitmodules; \
                 git -c protocol.file.allow=always submodule init; echo INIT"
            ),
        )
        .await;
        assert!(out.contains("INIT"), "{mode:?}: {out}");
        let after = std::fs::read_to_string(root.join(".git/config")).unwrap();
        assert_eq!(
            after,
            format!(
                "{before}[submodule \"m\"]\n\turl = {}/upstream\n\tactive = true\n",
                root.display()
            ),
            "{mode:?}: {out}"
        );
        nib.stop().await;
        // The person's own git, outside any sandbox, runs nothing planted.
        persons_git(
            &root,
            &global,
            &["-c", "protocol.file.allow=always", "submodule", "update"],
        );
        persons_git(&root, &global, &["status"]);
        assert!(
            !marker.exists(),
            "{mode:?}: the person's git ran the model's command: {out}"
        );
    }
}

/// A local submodule `m` (from `upstream/`, ignored) registered and checked
/// out by the person at the first of upstream's two commits, which the
/// project records. Returns (recorded, other).
fn checked_out_submodule(root: &Path) -> (String, String) {
    let up = root.join("upstream");
    std::fs::create_dir_all(&up).unwrap();
    git(&up, &["init", "-q", "-b", "main"]);
    let head = |dir: &Path| {
        let out = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    std::fs::write(up.join("s.txt"), "one\n").unwrap();
    git(&up, &["add", "-A"]);
    git(&up, &["commit", "-qm", "one"]);
    let recorded = head(&up);
    std::fs::write(up.join("s.txt"), "two\n").unwrap();
    git(&up, &["commit", "-qam", "two"]);
    let other = head(&up);
    std::fs::write(root.join(".gitignore"), "upstream/\n").unwrap();
    git(
        root,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            "./upstream",
            "m",
        ],
    );
    git(&root.join("m"), &["checkout", "-q", &recorded]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "with m"]);
    assert_eq!(head(&root.join("m")), recorded);
    (recorded, other)
}

#[tokio::test]
async fn a_submodule_already_checked_out_is_updated_inside_the_sandbox() {
    for mode in SANDBOXED {
        let (_t, root, _o, global, marker) = person_setup();
        let (recorded, other) = checked_out_submodule(&root);
        let config = root.join(".git/modules/m/config");
        let before = std::fs::read(&config).unwrap();
        let nib = sandboxed(&root, mode).await;
        let m = marker.display();
        let out = sh(
            &nib,
            &format!(
                "git -c protocol.file.allow=always submodule update --init -q && echo FIRST; \
                 git -c protocol.file.allow=always submodule update --init -q && echo SECOND; \
                 git -C m checkout -q {other} && git submodule update -q && echo THIRD; \
                 printf '\\tfsmonitor = touch {m}\\n' >> .git/modules/m/config; \
                 mkdir -p .git/modules/m/hooks; printf '#!/bin/sh\\ntouch {m}\\n' > .git/modules/m/hooks/post-checkout; \
                 chmod +x .git/modules/m/hooks/post-checkout; git -C m rev-parse HEAD"
            ),
        )
        .await;
        for step in ["FIRST", "SECOND", "THIRD"] {
            assert!(out.contains(step), "{mode:?}: {step} failed: {out}");
        }
        assert!(
            out.contains(&recorded),
            "{mode:?}: m is not at the recorded commit: {out}"
        );
        nib.stop().await;
        assert_eq!(
            std::fs::read(&config).unwrap(),
            before,
            "{mode:?}: the submodule's config changed: {out}"
        );
        // The person's own git, outside any sandbox, runs nothing planted.
        persons_git(&root, &global, &["status"]);
        persons_git(&root.join("m"), &global, &["status"]);
        persons_git(&root.join("m"), &global, &["checkout", "-q", &other]);
        persons_git(
            &root,
            &global,
            &["-c", "protocol.file.allow=always", "submodule", "update"],
        );
        assert!(
            !marker.exists(),
            "{mode:?}: the person's git ran the model's command: {out}"
        );
    }
}

#[tokio::test]
async fn a_nested_submodule_already_checked_out_is_updated_with_recursive() {
    for mode in SANDBOXED {
        let (_t, root, _o, _global, _marker) = person_setup();
        // `inner` (ignored) is a submodule `n` of `upstream`, itself the
        // project's submodule `m`; the person checked both out.
        let inner = root.join("inner");
        std::fs::create_dir_all(&inner).unwrap();
        git(&inner, &["init", "-q", "-b", "main"]);
        std::fs::write(inner.join("i.txt"), "i\n").unwrap();
        git(&inner, &["add", "-A"]);
        git(&inner, &["commit", "-qm", "i"]);
        let up = root.join("upstream");
        std::fs::create_dir_all(&up).unwrap();
        git(&up, &["init", "-q", "-b", "main"]);
        std::fs::write(up.join("s.txt"), "s\n").unwrap();
        let inner_url = inner.display().to_string();
        git(
            &up,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                &inner_url,
                "n",
            ],
        );
        git(&up, &["add", "-A"]);
        git(&up, &["commit", "-qm", "s"]);
        std::fs::write(root.join(".gitignore"), "upstream/\ninner/\n").unwrap();
        git(
            &root,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                "./upstream",
                "m",
            ],
        );
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", "with m"]);
        git(
            &root,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "update",
                "--init",
                "--recursive",
                "-q",
            ],
        );
        let nested = root.join(".git/modules/m/modules/n/config");
        let before = std::fs::read(&nested).unwrap();
        assert!(String::from_utf8_lossy(&before).contains("worktree"));
        let nib = sandboxed(&root, mode).await;
        let out = sh(
            &nib,
            "git -c protocol.file.allow=always submodule update --init --recursive -q && echo FIRST; \
             git -c protocol.file.allow=always submodule update --init --recursive -q && echo SECOND",
        )
        .await;
        assert!(
            out.contains("FIRST") && out.contains("SECOND"),
            "{mode:?}: {out}"
        );
        assert!(root.join("m/n/i.txt").is_file(), "{mode:?}: {out}");
        nib.stop().await;
        assert_eq!(
            std::fs::read(&nested).unwrap(),
            before,
            "{mode:?}: the nested submodule's config changed: {out}"
        );
    }
}
