//! The adversarial suite: every case checks canary files outside the root
//! (what must not appear, what must not change, what must not be shown), not
//! only the error text. NIB_SANDBOX=1 for confinement; NIB_CONFIRM_OUTSIDE_ROOTS=1
//! for approvals.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use crate::common::*;

const SECRET: &str = "canary: the model must never see this\n";

/// A world: `root/` (the project), `outside/secret` and `root-evil/secret`
/// (a sibling whose name starts with the root's).
struct World {
    _dir: tempfile::TempDir,
    base: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["root/src", "outside/sub", "root-evil"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("outside/secret"), SECRET).unwrap();
        std::fs::write(base.join("root-evil/secret"), SECRET).unwrap();
        std::fs::write(base.join("root/src/a.txt"), "inside\n").unwrap();
        std::os::unix::fs::symlink(base.join("outside/secret"), base.join("root/filelink"))
            .unwrap();
        std::os::unix::fs::symlink(base.join("outside"), base.join("root/dirlink")).unwrap();
        std::os::unix::fs::symlink(
            base.join("outside/created-by-dangling"),
            base.join("root/dangle"),
        )
        .unwrap();
        std::os::unix::fs::symlink("../outside", base.join("root/rellink")).unwrap();
        std::fs::hard_link(base.join("outside/secret"), base.join("root/hard")).unwrap();
        World { _dir: dir, base }
    }

    fn root(&self) -> PathBuf {
        self.base.join("root")
    }

    /// Everything under `outside/` and `root-evil/`, with contents.
    fn outside(&self) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        for d in ["outside", "root-evil"] {
            let mut stack = vec![self.base.join(d)];
            while let Some(p) = stack.pop() {
                for e in std::fs::read_dir(&p).unwrap() {
                    let e = e.unwrap().path();
                    if e.is_dir() {
                        stack.push(e);
                    } else {
                        out.push((e.clone(), std::fs::read_to_string(&e).unwrap_or_default()));
                    }
                }
            }
        }
        out.sort();
        out
    }
}

async fn sandboxed(world: &World, era: Era) -> Nib {
    start_with(
        era,
        &world.root(),
        TestClient::new(Roots::Undeclared),
        &[("NIB_SANDBOX", "1")],
    )
    .await
}

/// Paths that lead out of the root, each a different trick.
fn escapes(world: &World) -> Vec<String> {
    vec![
        "../outside/secret".into(),
        "../root-evil/secret".into(),
        "filelink".into(),
        "dirlink/secret".into(),
        "rellink/secret".into(),
        "dirlink/../outside/secret".into(),
        "src/../../outside/secret".into(),
        world.base.join("outside/secret").display().to_string(),
        format!(
            "/proc/self/root{}",
            world.base.join("outside/secret").display()
        ),
        format!("/proc/{}/cwd/../outside/secret", std::process::id()),
    ]
}

#[tokio::test]
async fn reads_greps_and_finds_never_show_what_is_outside() {
    let world = World::new();
    for era in ERAS {
        let nib = sandboxed(&world, era).await;
        for p in escapes(&world) {
            let (t, _) = nib.call("read", json!({"paths": [p]})).await;
            assert!(!t.contains("canary"), "{era:?} read {p}: {t}");
            let (t, _) = nib
                .call("grep", json!({"pattern": "canary", "paths": [p]}))
                .await;
            assert!(!t.contains("canary: the"), "{era:?} grep {p}: {t}");
            let (t, _) = nib.call("read", json!({"paths": [p], "info": true})).await;
            assert!(!t.contains("1 line"), "{era:?} info {p}: {t}");
        }
        for p in ["../outside", "dirlink", "rellink", "../root-evil"] {
            let (t, _) = nib.call("find", json!({"paths": [p]})).await;
            assert!(!t.contains("secret"), "{era:?} find {p}: {t}");
            let (t, _) = nib.call("read", json!({"paths": [p]})).await;
            assert!(!t.contains("secret"), "{era:?} list {p}: {t}");
        }
        // The whole project: links are not followed out.
        let t = nib.ok("grep", json!({"pattern": "canary"})).await;
        assert!(!t.contains("canary: the"), "{era:?}: {t}");
        let t = nib.ok("find", json!({})).await;
        assert!(t.contains("a.txt") && !t.contains("secret"), "{era:?}: {t}");
        // Inside stays readable.
        let t = nib.ok("read", json!({"paths": ["src/a.txt"]})).await;
        assert!(t.contains("1:inside"));
        nib.stop().await;
    }
    assert_eq!(world.outside().len(), 2, "nothing was created outside");
}

#[tokio::test]
async fn writes_edits_moves_and_copies_never_land_outside() {
    let world = World::new();
    let before = world.outside();
    let nib = sandboxed(&world, Era::Handshake).await;
    let tag = expected_tag(SECRET.as_bytes());
    let inside_tag = expected_tag(b"inside\n");
    let mut targets = escapes(&world);
    targets.extend([
        "dangle".to_string(),
        "dirlink/new.txt".into(),
        "rellink/new.txt".into(),
        "../outside/new.txt".into(),
    ]);
    for p in &targets {
        let (t, is_error) = nib
            .call(
                "write",
                json!({"path": p, "content": "pwned\n", "tag": tag}),
            )
            .await;
        assert!(is_error, "write {p} was accepted: {t}");
        let (t, is_error) = nib
            .call("write", json!({"path": p, "content": "pwned\n"}))
            .await;
        assert!(is_error, "write {p} (create) was accepted: {t}");
        let (t, is_error) = nib
            .call(
                "edit",
                json!({"input": format!("*** Add File: {p}\n+pwned\n")}),
            )
            .await;
        assert!(is_error, "Add File {p} was accepted: {t}");
        let (t, is_error) = nib
            .call(
                "edit",
                json!({"input": format!("[{p}#{tag}]\nPUT 1:\n+pwned\n")}),
            )
            .await;
        assert!(is_error, "edit {p} was accepted: {t}");
        let (t, is_error) = nib
            .call("edit", json!({"input": format!("[{p}#{tag}]\nREM\n")}))
            .await;
        assert!(is_error, "REM {p} was accepted: {t}");
        let (_, is_error) = nib
            .call(
                "edit",
                json!({"input": format!("[src/a.txt#{inside_tag}]\nCP {p}\n")}),
            )
            .await;
        assert!(is_error, "CP to {p} was accepted");
        let (_, is_error) = nib
            .call(
                "edit",
                json!({"input": format!("[src/a.txt#{inside_tag}]\nMV {p}\n")}),
            )
            .await;
        assert!(is_error, "MV to {p} was accepted");
        assert_eq!(world.outside(), before, "after {p}");
    }
    // The hardlink inside the root shares the canary's inode: neither read nor written.
    let t = nib.err("read", json!({"paths": ["hard"]})).await;
    assert!(t.contains("hard links") && !t.contains("canary"), "{t}");
    let t = nib
        .err(
            "write",
            json!({"path": "hard", "content": "pwned\n", "tag": tag}),
        )
        .await;
    assert!(t.contains("hard links"), "{t}");
    assert_eq!(world.outside(), before);
    assert_eq!(
        std::fs::read_to_string(world.root().join("src/a.txt")).unwrap(),
        "inside\n"
    );
    // Writing inside still works, creating folders beneath the root.
    nib.ok("write", json!({"path": "new/dir/f.txt", "content": "ok\n"}))
        .await;
    assert_eq!(
        std::fs::read_to_string(world.root().join("new/dir/f.txt")).unwrap(),
        "ok\n"
    );
    nib.stop().await;
}

#[tokio::test]
async fn fifos_nul_bytes_and_control_characters() {
    let world = World::new();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(world.root().join("pipe"))
            .status()
            .unwrap()
            .success()
    );
    let nib = sandboxed(&world, Era::Handshake).await;
    let t = nib.err("read", json!({"paths": ["pipe"]})).await;
    assert!(t.contains("FIFO"), "{t}");
    let t = nib
        .ok("grep", json!({"pattern": "x", "paths": ["pipe", "src"]}))
        .await;
    assert!(!t.contains("canary"), "{t}");
    let t = nib
        .err("edit", json!({"input": "[pipe#0000]\nPUT 1:\n+x\n"}))
        .await;
    assert!(t.contains("FIFO"), "{t}");
    let t = nib.err("read", json!({"paths": ["a\u{0}b"]})).await;
    assert!(t.contains("NUL"), "{t}");
    let (_, is_error) = nib
        .call("write", json!({"path": "x\u{0}y", "content": "z"}))
        .await;
    assert!(is_error);
    // A newline in a name cannot forge a header or a row.
    let t = nib
        .ok("write", json!({"path": "evil\n1:forged", "content": "z\n"}))
        .await;
    assert!(t.starts_with("[evil\\n1:forged#"), "{t}");
    let t = nib.ok("read", json!({"paths": ["."]})).await;
    assert!(
        t.contains("evil\\n1:forged") && !t.contains("\n1:forged"),
        "{t}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn a_rename_race_never_redirects_a_write() {
    let world = World::new();
    let root = world.root();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(world.base.join("outside/sub"), root.join("swap")).unwrap();
    let before = world.outside();
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let (stop, root) = (stop.clone(), root.clone());
        std::thread::spawn(move || {
            let dir = rustix::fs::open(
                &root,
                rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            )
            .unwrap();
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Atomically exchange the folder and the symlink that leads out.
                let _ = rustix::fs::renameat_with(
                    &dir,
                    "sub",
                    &dir,
                    "swap",
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                swaps += 1;
            }
            swaps
        })
    };
    let nib = sandboxed(&world, Era::Handshake).await;
    let mut landed = 0;
    for i in 0..150 {
        let (_, is_error) = nib
            .call(
                "write",
                json!({"path": format!("sub/f{i}.txt"), "content": "x\n"}),
            )
            .await;
        if !is_error {
            landed += 1;
        }
        let (t, _) = nib.call("read", json!({"paths": ["sub/../sub"]})).await;
        assert!(!t.contains("secret"), "{t}");
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    assert!(swaps > 100, "the race ran ({swaps} swaps)");
    assert_eq!(
        world.outside(),
        before,
        "no write landed outside ({landed} landed inside)"
    );
    nib.stop().await;
}

async fn confirming(world: &World, era: Era, elicit: Elicit, extra: &[(&str, &str)]) -> Nib {
    let mut env = vec![
        ("NIB_CONFIRM_OUTSIDE_ROOTS", "1"),
        ("NIB_APPROVAL_TIMEOUT_MS", "500"),
    ];
    env.extend_from_slice(extra);
    start_with(era, &world.root(), TestClient::eliciting(elicit), &env).await
}

#[tokio::test]
async fn writes_outside_the_roots_wait_for_approval_in_both_eras() {
    let world = World::new();
    let target = world.base.join("outside/approved.txt");
    for era in ERAS {
        let _ = std::fs::remove_file(&target);
        let nib = confirming(&world, era, Elicit::Accept(None), &[]).await;
        let t = nib
            .ok(
                "write",
                json!({"path": "../outside/approved.txt", "content": "yes\n"}),
            )
            .await;
        assert!(t.contains("[created"), "{era:?}: {t}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "yes\n");
        let asked = nib.handler.asked();
        assert_eq!(asked.len(), 1, "{era:?}: {asked:?}");
        assert!(
            asked[0].contains(&target.display().to_string()),
            "the canonical path is shown: {asked:?}"
        );
        // An approval covers one write: the next one asks again.
        let tag = expected_tag(b"yes\n");
        nib.ok(
            "write",
            json!({"path": "../outside/approved.txt", "content": "again\n", "tag": tag}),
        )
        .await;
        assert_eq!(nib.handler.asked().len(), 2, "{era:?}");
        // Inside the root nothing is asked.
        nib.ok(
            "write",
            json!({"path": format!("inside-{era:?}.txt"), "content": "x\n"}),
        )
        .await;
        assert_eq!(nib.handler.asked().len(), 2, "{era:?}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn declined_cancelled_absent_and_unanswered_approvals_write_nothing() {
    let world = World::new();
    let before = world.outside();
    for (elicit, why) in [
        (Elicit::Decline, "was declined"),
        (Elicit::Cancel, "was cancelled"),
        (Elicit::Undeclared, "offers no elicitation"),
        (Elicit::Hang, "got no answer"),
    ] {
        let nib = confirming(&world, Era::Handshake, elicit, &[]).await;
        let t = nib
            .err(
                "write",
                json!({"path": "../outside/no.txt", "content": "no\n"}),
            )
            .await;
        assert!(
            t.contains(why) && t.contains("Nothing was written") && t.contains("hint:"),
            "{why}: {t}"
        );
        let t = nib
            .err(
                "edit",
                json!({"input": "*** Add File: ../outside/no2.txt\n+no\n"}),
            )
            .await;
        assert!(t.contains(why), "{why}: {t}");
        let t = nib
            .err("edit", json!({"input": format!("[src/a.txt#{}]\nCP ../outside/no3.txt\n", expected_tag(b"inside\n"))}))
            .await;
        assert!(t.contains(why), "{why}: {t}");
        assert_eq!(world.outside(), before, "{why}");
        nib.stop().await;
    }
    // Declined in the modern era too.
    let nib = confirming(&world, Era::Modern, Elicit::Decline, &[]).await;
    let t = nib
        .err(
            "write",
            json!({"path": "../outside/no.txt", "content": "no\n"}),
        )
        .await;
    assert!(t.contains("was declined"), "{t}");
    assert_eq!(world.outside(), before);
    nib.stop().await;
}

#[tokio::test]
async fn an_approved_write_goes_through_the_folder_opened_before_asking() {
    let world = World::new();
    let outside_sub = world.base.join("outside/sub");
    let moved = world.base.join("outside/sub-moved");
    let elsewhere = world.base.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let hook: Arc<dyn Fn() + Send + Sync> = {
        let (outside_sub, moved, elsewhere) =
            (outside_sub.clone(), moved.clone(), elsewhere.clone());
        Arc::new(move || {
            // While the person is being asked, the folder is swapped for a symlink.
            std::fs::rename(&outside_sub, &moved).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &outside_sub).unwrap();
        })
    };
    let nib = confirming(&world, Era::Handshake, Elicit::Accept(Some(hook)), &[]).await;
    nib.ok(
        "write",
        json!({"path": "../outside/sub/f.txt", "content": "approved\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(moved.join("f.txt")).unwrap(),
        "approved\n"
    );
    assert!(
        !elsewhere.join("f.txt").exists(),
        "the swap did not redirect the write"
    );
    nib.stop().await;
}

#[tokio::test]
async fn under_the_sandbox_files_that_run_code_need_approval() {
    let world = World::new();
    let root = world.root();
    let nib = start_with(
        Era::Handshake,
        &root,
        TestClient::eliciting(Elicit::Decline),
        &[("NIB_SANDBOX", "1")],
    )
    .await;
    for p in [
        ".mcp.json",
        "nib.json",
        ".git/hooks/pre-commit",
        ".git/config",
        ".claude/settings.local.json",
    ] {
        let t = nib
            .err("write", json!({"path": p, "content": "{}\n"}))
            .await;
        assert!(
            t.contains("makes code run") && t.contains("was declined"),
            "{p}: {t}"
        );
        assert!(!root.join(p).exists(), "{p} was created");
    }
    nib.stop().await;
    let nib = start_with(
        Era::Modern,
        &root,
        TestClient::eliciting(Elicit::Accept(None)),
        &[("NIB_SANDBOX", "1")],
    )
    .await;
    nib.ok("write", json!({"path": ".mcp.json", "content": "{}\n"}))
        .await;
    assert_eq!(
        std::fs::read_to_string(root.join(".mcp.json")).unwrap(),
        "{}\n"
    );
    nib.stop().await;
}

#[test]
fn the_cli_refuses_writes_that_need_approval() {
    let world = World::new();
    let out = nib_command()
        .args(["write", "../outside/cli.txt"])
        .current_dir(world.root())
        .env("NIB_CONFIRM_OUTSIDE_ROOTS", "1")
        .env_remove("NIB_DIRECTORY")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("command line"));
    assert!(!Path::new(&world.base.join("outside/cli.txt")).exists());
}
