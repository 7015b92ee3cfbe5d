//! Named directories from nib.json and from `hash -d`: a name works as a
//! path in the tools' arguments and in nibash, paths under it are printed
//! with it, an edit can use it in its header, conflicts are explained, and a
//! name never reaches past the roots under the sandbox (a canary).

use serde_json::json;

use crate::common::*;

const DEEP: &str = "src/main/java/com/example/platform/orm/workflow";
const SECRET: &str = "canary: the model must never see this\n";

/// A project with a deep package folder named `wf` in nib.json, a second
/// definition of `wf`, a prefix of it, and a name for a folder outside.
fn project_with_names() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(root.join(DEEP)).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/secret"), SECRET).unwrap();
    std::fs::write(
        root.join(DEEP).join("Step.java"),
        "package com.example.platform.orm.workflow;\n\nclass Step {\n    int order;\n}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("nib.json"),
        json!({"directories": {
            "wf": DEEP,
            "w": "docs",
            "out": "../outside",
            "bad..name": "docs",
        }})
        .to_string(),
    )
    .unwrap();
    (dir, root)
}

#[tokio::test]
async fn nib_json_names_work_in_arguments_and_output_in_both_eras() {
    for era in ERAS {
        let (_keep, root) = project_with_names();
        let nib = start(era, &root).await;

        // A read through the name: rows under a header written with it.
        let t = nib.ok("read", json!({"paths": ["~wf/Step.java"]})).await;
        assert!(t.starts_with("[~wf/Step.java#"), "{t}");
        // The first answer says once why some names were not defined.
        assert!(t.contains("~w and ~wf would be prefixes"), "{t}");
        let again = nib.ok("read", json!({"paths": ["~wf/Step.java:1"]})).await;
        assert!(!again.contains("prefixes"), "said only once: {again}");
        assert!(t.contains("3:class Step {"), "{t}");

        // grep and find print the shortened path too.
        let g = nib
            .ok("grep", json!({"pattern": "int order", "paths": ["src"]}))
            .await;
        assert!(g.contains("~wf/Step.java"), "{g}");
        assert!(!g.contains(DEEP), "the long prefix is gone: {g}");
        let f = nib.ok("find", json!({"paths": ["~wf"]})).await;
        assert!(f.contains("Step.java") && !f.contains(DEEP), "{f}");

        // An edit whose header uses the name, anchored on the rows read.
        let tag = Nib::tag_in(&t);
        let e = nib
            .ok(
                "edit",
                json!({"input": format!("[~wf/Step.java#{tag}]\nPUT >4:\n+    int weight;\n")}),
            )
            .await;
        assert!(e.contains("[~wf/Step.java#"), "{e}");
        assert_eq!(
            std::fs::read_to_string(root.join(DEEP).join("Step.java")).unwrap(),
            "package com.example.platform.orm.workflow;\n\nclass Step {\n    int order;\n    int weight;\n}\n"
        );

        // nibash: an unquoted name expands, a quoted one stays literal.
        let n = nib
            .ok(
                "nibash",
                json!({"command": "cat ~wf/Step.java | wc -l; echo '~wf/x'"}),
            )
            .await;
        assert!(n.contains("6\n") && n.contains("~wf/x"), "{n}");

        // nibash_status lists the names with their sources and says why
        // the others were not defined.
        let s = nib.ok("nibash_status", json!({})).await;
        assert!(s.contains("~wf = ") && s.contains("(nib.json)"), "{s}");
        assert!(s.contains("~w and ~wf would be prefixes"), "{s}");
        assert!(s.contains("bad..name"), "{s}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn hash_d_names_reach_the_tools_and_keep_the_first_definition() {
    let (_keep, root) = project_with_names();
    let nib = start(Era::Modern, &root).await;
    let t = nib
        .ok(
            "nibash",
            json!({"command": "hash -d flow=src/main/java/com/example/platform/orm"}),
        )
        .await;
    assert!(!t.contains("hash -d:"), "{t}");
    // The name now works in the file tools.
    let r = nib
        .ok("read", json!({"paths": ["~flow/workflow/Step.java"]}))
        .await;
    assert!(r.contains("class Step"), "{r}");
    // A second definition of the same name is refused, naming the first.
    let again = nib
        .call("nibash", json!({"command": "hash -d flow=docs"}))
        .await
        .0;
    assert!(
        again.contains("already") && again.contains("was ignored"),
        "{again}"
    );
    let r = nib
        .ok("read", json!({"paths": ["~flow/workflow/Step.java"]}))
        .await;
    // Printed with the longest name that matches: nib.json's ~wf.
    assert!(
        r.starts_with("[~wf/Step.java#"),
        "the first definition stays: {r}"
    );

    // A name whose folder goes is dropped, with a note in the next answer.
    std::fs::create_dir(root.join("tmpdir")).unwrap();
    let t = nib
        .ok("nibash", json!({"command": "hash -d gone=tmpdir"}))
        .await;
    assert!(!t.contains("hash -d:"), "{t}");
    std::fs::remove_dir(root.join("tmpdir")).unwrap();
    let t = nib.ok("find", json!({"paths": ["docs"]})).await;
    assert!(t.contains("~gone was dropped"), "{t}");
    let s = nib.ok("nibash_status", json!({})).await;
    assert!(!s.contains("~gone ="), "{s}");
    nib.stop().await;
}

/// `hash -d` defines a name for the agent that ran it and the subagents
/// its session starts afterwards; other agents never see it.
#[tokio::test]
async fn hash_d_names_belong_to_their_agent_and_the_subagents_it_starts_later() {
    let (_keep, root) = project_with_names();
    std::fs::create_dir_all(root.join("tools/scripts")).unwrap();
    std::fs::write(root.join("tools/scripts/run.sh"), "echo run\n").unwrap();
    let (nib, _) = start_with_agents(
        &root,
        &[
            ("m1", None),
            ("m2", None),
            ("m3", None),
            ("m4", None),
            ("e1", Some("early")),
            ("e2", Some("early")),
            ("l1", Some("late")),
            ("l2", Some("late")),
            ("l3", Some("late")),
        ],
    )
    .await;
    let step = json!({"paths": ["~flow/workflow/Step.java"]});
    // A subagent met before the main agent defines the name.
    let (t, is_error) = call_as(&nib, "e1", "nibash", json!({"command": "true"})).await;
    assert!(!is_error, "{t}");
    let (t, is_error) = call_as(
        &nib,
        "m1",
        "nibash",
        json!({"command": "hash -d flow=src/main/java/com/example/platform/orm"}),
    )
    .await;
    assert!(!is_error && !t.contains("hash -d:"), "{t}");
    let (t, is_error) = call_as(&nib, "m2", "read", step.clone()).await;
    assert!(!is_error && t.contains("class Step"), "the main agent: {t}");
    // A subagent met afterwards has it; the one met before does not.
    let (t, is_error) = call_as(&nib, "l1", "read", step.clone()).await;
    assert!(
        !is_error && t.contains("class Step"),
        "a later subagent: {t}"
    );
    let (t, is_error) = call_as(&nib, "e2", "read", step.clone()).await;
    assert!(
        is_error && !t.contains("class Step"),
        "a subagent met before the name was defined: {t}"
    );
    // A subagent's own name stays its own.
    let (t, is_error) = call_as(
        &nib,
        "l2",
        "nibash",
        json!({"command": "hash -d sc=tools/scripts"}),
    )
    .await;
    assert!(!is_error && !t.contains("hash -d:"), "{t}");
    let (t, is_error) = call_as(
        &nib,
        "l3",
        "read",
        json!({"paths": ["tools/scripts/run.sh"]}),
    )
    .await;
    assert!(!is_error && t.starts_with("[~sc/run.sh#"), "{t}");
    let (t, _) = call_as(
        &nib,
        "m3",
        "read",
        json!({"paths": ["tools/scripts/run.sh"]}),
    )
    .await;
    assert!(
        t.starts_with("[tools/scripts/run.sh#"),
        "the main agent never named it: {t}"
    );
    let (t, is_error) = call_as(&nib, "m4", "read", json!({"paths": ["~sc/run.sh"]})).await;
    assert!(is_error && !t.contains("echo run"), "{t}");
    let s = nib.ok("nibash_status", json!({})).await;
    assert!(
        !s.contains("~sc =") && !s.contains("~flow ="),
        "another agent's names: {s}"
    );
    nib.stop().await;
}

#[tokio::test]
async fn a_name_outside_the_roots_reaches_nothing_under_the_sandbox() {
    // With bubblewrap, and with Landlock + seccomp alone.
    for bwrap in ["1", "0"] {
        outside_name_reaches_nothing(&[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", bwrap)]).await;
    }
}

async fn outside_name_reaches_nothing(env: &[(&str, &str)]) {
    let (_keep, root) = project_with_names();
    let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), env).await;
    let (t, is_error) = nib.call("read", json!({"paths": ["~out/secret"]})).await;
    assert!(is_error, "{t}");
    assert!(!t.contains("canary"), "{env:?}: the secret was shown: {t}");
    assert!(t.contains("~out"), "the refusal names the name: {t}");
    // For programs a name is only its path: the same outcome as the real
    // path (what programs may read outside the roots is the sandbox's
    // business, not the name's; see SECURITY.md).
    let real = root.parent().unwrap().join("outside/secret");
    let (via_name, _) = nib
        .call(
            "nibash",
            json!({"command": "cat ~out/secret; echo \"status $?\""}),
        )
        .await;
    let (via_path, _) = nib
        .call(
            "nibash",
            json!({"command": format!("cat {}; echo \"status $?\"", real.display())}),
        )
        .await;
    let body = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with('['))
            .map(|l| {
                l.trim_start_matches(|c: char| c.is_ascii_digit() || c == ':')
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        body(&via_name),
        body(&via_path),
        "{env:?}: a name widened a program's view"
    );
    // The write is refused too, and nothing appears outside.
    let (t, is_error) = nib
        .call("write", json!({"path": "~out/new", "content": "x\n"}))
        .await;
    assert!(is_error, "{t}");
    assert!(!root.parent().unwrap().join("outside/new").exists());
    // A program given the name's path cannot write there either.
    nib.call("nibash", json!({"command": "echo x > ~out/by-program"}))
        .await;
    assert!(
        !root.parent().unwrap().join("outside/by-program").exists(),
        "{env:?}: a program wrote outside through a name"
    );
    nib.stop().await;
}

#[tokio::test]
async fn folders_shown_often_get_a_name_once_unless_turned_off() {
    for auto in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let deep = "services/billing/internal/reconciliation";
        std::fs::create_dir_all(root.join(deep)).unwrap();
        for i in 0..3 {
            std::fs::write(root.join(deep).join(format!("f{i}.txt")), "ledger entry\n").unwrap();
        }
        let env: &[(&str, &str)] = if auto {
            &[]
        } else {
            &[("NIB_AUTO_NAMES", "0")]
        };
        let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), env).await;
        let mut announced = Vec::new();
        let mut last = String::new();
        for _ in 0..4 {
            last = nib
                .ok("grep", json!({"pattern": "ledger", "paths": ["services"]}))
                .await;
            if last.contains("now stands for") {
                announced.push(last.clone());
            }
        }
        if auto {
            assert_eq!(announced.len(), 1, "announced once: {announced:?}");
            assert!(
                announced[0].contains(
                    "~reconciliation now stands for services/billing/internal/reconciliation"
                ),
                "{}",
                announced[0]
            );
            assert!(
                last.contains("~reconciliation/f0.txt") && !last.contains(deep),
                "{last}"
            );
            // The name works in arguments too, and is listed as nib's own.
            let r = nib
                .ok("read", json!({"paths": ["~reconciliation/f1.txt"]}))
                .await;
            assert!(r.contains("ledger entry"), "{r}");
            let s = nib.ok("nibash_status", json!({})).await;
            assert!(
                s.contains("~reconciliation = ") && s.contains("(seen often)"),
                "{s}"
            );
        } else {
            assert!(announced.is_empty(), "{announced:?}");
            assert!(last.contains(deep), "{last}");
        }
        nib.stop().await;
    }
}

/// An automatic name never makes a path ambiguous: in a monorepo where
/// `packages/server` exists, the folder seen often, `packages/tests/server`,
/// is named `~tests-server`, not `~server`; and an agent's own `hash -d`
/// takes an automatic name (it was refused as defined "from hash -d" while
/// nibash_status said it came from sightings).
#[tokio::test]
async fn automatic_names_are_never_ambiguous_and_hash_d_takes_their_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let seen = "packages/tests/server/integration/fixtures";
    for folder in ["packages/server/src", "packages/client/src", seen] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    // A second `fixtures` folder too: the last name alone is shared.
    std::fs::create_dir_all(root.join("packages/client/fixtures")).unwrap();
    for i in 0..3 {
        std::fs::write(
            root.join(seen).join(format!("case{i}.json")),
            "{\"ledger\": 1}\n",
        )
        .unwrap();
    }
    let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), &[]).await;
    let mut notes = String::new();
    for _ in 0..8 {
        notes.push_str(
            &nib.ok(
                "grep",
                json!({"pattern": "ledger", "paths": ["packages/tests"]}),
            )
            .await,
        );
    }
    assert!(
        notes.contains(
            "~integration-fixtures now stands for packages/tests/server/integration/fixtures"
        ),
        "{notes}"
    );
    assert!(!notes.contains("~fixtures "), "{notes}");
    // The agent's own name for a folder takes the automatic name's place.
    let out = nib
        .ok(
            "nibash",
            json!({"command": "hash -d integration-fixtures=packages/client/fixtures && echo defined"}),
        )
        .await;
    assert!(out.contains("defined"), "{out}");
    let listed = nib
        .ok(
            "nibash",
            json!({"command": "ls ~integration-fixtures/ | wc -l"}),
        )
        .await;
    assert_eq!(
        listed.trim(),
        "0",
        "the name still points at the old folder"
    );
    nib.stop().await;
}

#[tokio::test]
async fn a_name_used_in_two_sessions_is_kept_for_the_next() {
    let (_keep, root) = project_with_names();
    let state = tempfile::tempdir().unwrap();
    let state_env = state.path().display().to_string();
    let env: &[(&str, &str)] = &[("NIB_STATE_DIR", &state_env)];
    let session = |define: bool| {
        let root = root.clone();
        async move {
            let nib = start_with(Era::Modern, &root, TestClient::new(Roots::Undeclared), env).await;
            if define {
                let t = nib
                    .ok("nibash", json!({"command": "hash -d docs=docs"}))
                    .await;
                assert!(!t.contains("hash -d:"), "{t}");
            }
            let s = nib.ok("nibash_status", json!({})).await;
            nib.stop().await;
            s
        }
    };
    let names_file = || {
        std::fs::read_dir(state.path().join("names"))
            .map(|d| {
                d.flatten()
                    .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                    .collect::<String>()
            })
            .unwrap_or_default()
    };
    // Waits for the stopped server's save (it writes as it exits).
    let saved = |sessions: &str| {
        let want = format!("\"sessions\": {sessions}");
        async move {
            for _ in 0..100 {
                if names_file().contains(&want) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("never saved with {want}: {}", names_file());
        }
    };
    session(true).await;
    saved("1").await;
    let s = session(false).await;
    assert!(!s.contains("~docs ="), "one session is not enough: {s}");
    session(true).await;
    saved("2").await;
    let s = session(false).await;
    assert!(
        s.contains("~docs = ") && s.contains("(kept from earlier sessions)"),
        "{s}"
    );
}
