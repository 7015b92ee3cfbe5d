//! NIB_SANDBOX=1 fails closed (issue 59) and runs only trusted helpers
//! (issue 57). A seccomp filter stands in for gVisor and locked-down
//! containers (`tests/fixtures/hostile_kernel.py`: no Landlock, no user
//! namespaces, no seccomp user notification; optionally no mount). Under
//! it, in both sandbox modes, as root and as an ordinary user, the canaries
//! — a credential file read by the system's cat and by nib's own, a file
//! written outside the project, a connection to a loopback listener — stay
//! untouched, and what nib says names only layers in force.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::*;

const KEY: &str = "canary-private-key-material";

fn helper() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile_kernel.py")
}

/// An ordinary user to run nib as (made once with useradd), or `None` when
/// this process cannot make or become one.
fn ordinary_user() -> Option<(u32, u32)> {
    static USER: OnceLock<Option<(u32, u32)>> = OnceLock::new();
    *USER.get_or_init(|| {
        let id = |flag: &str| -> Option<u32> {
            let o = Command::new("id").args([flag, "nibfc"]).output().ok()?;
            String::from_utf8_lossy(&o.stdout).trim().parse().ok()
        };
        if id("-u").is_none() {
            let _ = Command::new("useradd")
                .args(["-M", "-s", "/bin/sh", "nibfc"])
                .status();
        }
        Some((id("-u")?, id("-g")?))
    })
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

/// A world: a home with a credential file, a project, a loopback listener.
struct World {
    _dir: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    listener: TcpListener,
}

impl World {
    fn new(owner: Option<(u32, u32)>) -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let home = base.join("home");
        let project = base.join("project");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), KEY).unwrap();
        std::fs::write(project.join("a.txt"), "inside\n").unwrap();
        if let Some((uid, gid)) = owner {
            let s = Command::new("chown")
                .args(["-R", &format!("{uid}:{gid}"), base.to_str().unwrap()])
                .status()
                .unwrap();
            assert!(s.success());
            // The temp folder's own mode keeps others out.
            let mut p = std::fs::metadata(&base).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
            std::fs::set_permissions(&base, p).unwrap();
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        World {
            _dir: dir,
            home,
            project,
            listener,
        }
    }

    fn port(&self) -> u16 {
        self.listener.local_addr().unwrap().port()
    }

    /// The command that tries every canary.
    fn attack(&self) -> String {
        format!(
            "cat ~/.ssh/id_rsa; /bin/cat ~/.ssh/id_rsa; echo x > ~/out.txt; \
             /usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {}), 2)'; \
             echo done",
            self.port()
        )
    }

    /// Asserts every canary is untouched.
    fn untouched(&self, what: &str, said: &str) {
        assert!(!said.contains(KEY), "{what}: the key was shown:\n{said}");
        assert!(
            !self.home.join("out.txt").exists(),
            "{what}: a file was written outside the project:\n{said}"
        );
        match self.listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok(_) => panic!("{what}: the listener saw a connection:\n{said}"),
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// How nib runs: as whom, under which filter flags, with what environment.
struct Run<'a> {
    user: Option<(u32, u32)>,
    filter: Option<&'a [&'a str]>,
    env: Vec<(&'a str, String)>,
}

fn nib_in(world: &World, run: &Run<'_>, args: &[&str]) -> (String, i32) {
    let mut argv: Vec<String> = Vec::new();
    if let Some((uid, gid)) = run.user {
        argv.extend([
            "setpriv".into(),
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
        ]);
    }
    if let Some(flags) = run.filter {
        argv.push("/usr/bin/python3".into());
        argv.push(helper().display().to_string());
        argv.extend(flags.iter().map(|f| f.to_string()));
        argv.push("--".into());
    }
    argv.push(nib_bin().display().to_string());
    argv.extend(args.iter().map(|a| a.to_string()));
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .current_dir(&world.project)
        .env("HOME", &world.home)
        .env("NIB_STATE_DIR", world.home.join("state"))
        .env("XDG_DATA_HOME", world.home.join("data"))
        .env("XDG_CONFIG_HOME", world.home.join("config"))
        .env_remove("NIB_SANDBOX")
        .env_remove("NIB_SANDBOX_BWRAP");
    for (k, v) in &run.env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
    said.push_str(&String::from_utf8_lossy(&out.stderr));
    (said, out.status.code().unwrap_or(-1))
}

/// The modes under NIB_SANDBOX=1: bubblewrap allowed, and NIB_SANDBOX_BWRAP=0.
fn modes() -> [(&'static str, Vec<(&'static str, String)>); 2] {
    [
        ("bubblewrap allowed", vec![("NIB_SANDBOX", "1".into())]),
        (
            "NIB_SANDBOX_BWRAP=0",
            vec![
                ("NIB_SANDBOX", "1".into()),
                ("NIB_SANDBOX_BWRAP", "0".into()),
            ],
        ),
    ]
}

/// The people nib runs as here: root (when the tests are root) and an
/// ordinary user (made with useradd, when this process may).
fn people() -> Vec<(&'static str, Option<(u32, u32)>)> {
    let mut out = Vec::new();
    if is_root() {
        out.push(("root", None));
        match ordinary_user() {
            Some(u) => out.push(("an ordinary user", Some(u))),
            None => {
                eprintln!("fail_closed: cannot make an ordinary user (useradd failed): root only")
            }
        }
    } else {
        out.push(("this user", None));
    }
    out
}

fn filter_works() -> bool {
    if std::env::consts::ARCH != "x86_64" || !Path::new("/usr/bin/python3").exists() {
        crate::common::skip("the stand-in filter needs x86_64 and /usr/bin/python3");
        return false;
    }
    true
}

const GVISOR: &[&str] = &[];

#[test]
fn without_landlock_or_user_namespaces_nothing_leaks_in_any_mode() {
    if !filter_works() {
        return;
    }
    // gVisor (no user notification either), and a container without
    // Landlock that allows it (the key leaked there before: nib's own cat
    // printed it as rows, the system's cat too, and ~/out.txt was written).
    let filters: [&[&str]; 2] = [GVISOR, &["--keep-notify"]];
    for (who, user) in people() {
        for ((mode, env), filter) in modes()
            .into_iter()
            .flat_map(|m| filters.iter().map(move |f| (m.clone(), *f)))
        {
            let world = World::new(user);
            let what = format!("{who}, {mode}, filter {filter:?}");
            let run = Run {
                user,
                filter: Some(filter),
                env,
            };
            let (said, code) = nib_in(&world, &run, &["sh", &world.attack()]);
            world.untouched(&what, &said);
            if said.contains("are refused") {
                // Refused: says what is missing and claims nothing.
                assert!(said.contains("Landlock is not available"), "{what}: {said}");
                assert!(said.contains("To fix"), "{what}: {said}");
                assert!(!said.contains("is hidden from programs"), "{what}: {said}");
                assert!(!said.contains("done"), "{what}: something ran: {said}");
                assert_ne!(code, 0, "{what}");
            } else {
                // Only root's bubblewrap can start without user namespaces,
                // and it then holds alone with seccomp, and says so.
                assert!(
                    user.is_none() && mode == "bubblewrap allowed",
                    "{what}: {said}"
                );
                assert!(said.contains("no Landlock"), "{what}: {said}");
                assert!(said.contains("done"), "{what}: {said}");
            }
        }
    }
}

#[test]
fn doctor_claims_no_limit_that_is_not_enforced() {
    if !filter_works() {
        return;
    }
    for (who, user) in people() {
        for (mode, env) in modes() {
            let world = World::new(user);
            let what = format!("{who}, {mode}");
            let run = Run {
                user,
                filter: Some(GVISOR),
                env,
            };
            let (said, code) = nib_in(&world, &run, &["doctor"]);
            assert!(said.contains("Landlock ABI: none"), "{what}: {said}");
            let mode_line = said.lines().find(|l| l.starts_with("mode: ")).unwrap_or("");
            assert!(!said.contains("fully enforced"), "{what}: {said}");
            assert!(
                said.contains("exec-time rules: cannot be enforced here"),
                "{what}: {said}"
            );
            let refused = mode_line.contains("are refused");
            if user.is_some() || mode != "bubblewrap allowed" {
                assert!(refused, "{what}: {said}");
                assert_eq!(code, 1, "{what}: {said}");
                assert!(!said.contains("\nreads: "), "{what}: {said}");
            } else {
                assert!(!refused, "{what}: {said}");
                assert!(!mode_line.contains("Landlock ABI"), "{what}: {said}");
                assert!(mode_line.contains("bubblewrap + seccomp"), "{what}: {said}");
                assert_eq!(code, 0, "{what}: {said}");
            }
        }
    }
}

#[test]
fn without_user_namespaces_calls_run_under_landlock_and_say_why() {
    if !filter_works() {
        return;
    }
    for (who, user) in people() {
        // Root's bubblewrap needs no user namespace: a pod without
        // CAP_SYS_ADMIN is one where it cannot mount either.
        let flags: &[&str] = if user.is_none() {
            &["--keep-landlock", "--keep-notify", "--deny-mount"]
        } else {
            &["--keep-landlock", "--keep-notify"]
        };
        let world = World::new(user);
        let run = Run {
            user,
            filter: Some(flags),
            env: vec![("NIB_SANDBOX", "1".into())],
        };
        let (said, _) = nib_in(&world, &run, &["sh", &world.attack()]);
        world.untouched(who, &said);
        assert!(said.contains("done"), "{who}: the call ran: {said}");
        assert!(
            said.contains("bubblewrap cannot start here") && said.contains("Landlock ABI"),
            "{who}: the answer says why: {said}"
        );
        let (doctor, code) = nib_in(&world, &run, &["doctor"]);
        assert_eq!(code, 0, "{who}: {doctor}");
        assert!(doctor.contains("bubblewrap: no ("), "{who}: {doctor}");
        assert!(doctor.contains("Landlock ABI"), "{who}: {doctor}");
    }
}

/// A project whose `.venv/bin` is first on nib's PATH holds a `bwrap` that
/// leaves a marker; a git repository so read's `@HEAD` runs git.
fn planted(world: &World) -> (PathBuf, String) {
    let bin = world.project.join(".venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let marker = world.home.join("planted-bwrap-ran");
    let script = format!(
        "#!/bin/sh\ntouch {}\nexec /usr/bin/bwrap \"$@\"\n",
        marker.display()
    );
    let bwrap = bin.join("bwrap");
    std::fs::write(&bwrap, script).unwrap();
    let mut p = std::fs::metadata(&bwrap).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
    std::fs::set_permissions(&bwrap, p).unwrap();
    git(&world.project, &["init", "-q"]);
    git(&world.project, &["add", "a.txt"]);
    git(
        &world.project,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "a",
        ],
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (marker, path)
}

#[test]
fn a_bwrap_planted_on_path_inside_the_project_never_runs() {
    for (mode, env) in modes() {
        let world = World::new(None);
        let (marker, path) = planted(&world);
        let mut env = env;
        env.push(("PATH", path));
        let run = Run {
            user: None,
            filter: None,
            env,
        };
        let (said, _) = nib_in(&world, &run, &["sh", "echo hello from the call"]);
        assert!(said.contains("hello from the call"), "{mode}: {said}");
        let (read, _) = nib_in(&world, &run, &["read", "a.txt@HEAD"]);
        assert!(read.contains("inside"), "{mode}: {read}");
        let (doctor, _) = nib_in(&world, &run, &["doctor"]);
        assert!(
            !doctor.contains(".venv/bin/bwrap started"),
            "{mode}: {doctor}"
        );
        assert!(
            !marker.exists(),
            "{mode}: the planted bwrap ran:\n{said}\n{read}\n{doctor}"
        );
    }
}

#[test]
fn a_worker_entry_inside_the_project_is_refused() {
    let world = World::new(None);
    let bin = world.project.join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    let nib = bin.join("nib");
    std::fs::copy(nib_bin(), &nib).unwrap();
    let marker = world.home.join("planted-worker-ran");
    let worker = bin.join("nib-confine");
    std::fs::write(&worker, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    let mut p = std::fs::metadata(&worker).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
    std::fs::set_permissions(&worker, p).unwrap();
    for (mode, env) in modes() {
        let out = Command::new(&nib)
            .args(["sh", "echo ran"])
            .current_dir(&world.project)
            .env("HOME", &world.home)
            .env("NIB_STATE_DIR", world.home.join("state"))
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
        said.push_str(&String::from_utf8_lossy(&out.stderr));
        assert!(
            !marker.exists(),
            "{mode}: the planted nib-confine ran: {said}"
        );
        assert!(said.contains("confining entry"), "{mode}: {said}");
        assert!(!said.contains("\nran"), "{mode}: {said}");
        let doctor = Command::new(&nib)
            .arg("doctor")
            .current_dir(&world.project)
            .env("HOME", &world.home)
            .env("NIB_STATE_DIR", world.home.join("state"))
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&doctor.stdout);
        let mode_line = text.lines().find(|l| l.starts_with("mode: ")).unwrap_or("");
        assert!(mode_line.contains("confining entry"), "{mode}: {text}");
        assert_eq!(doctor.status.code(), Some(1), "{mode}: {text}");
        assert!(
            !marker.exists(),
            "{mode}: doctor ran the planted nib-confine"
        );
    }
}

#[test]
fn path_folders_this_user_cannot_read_are_left_out() {
    if !is_root() {
        crate::common::skip("needs root to run as another user");
        return;
    }
    let Some(user) = ordinary_user() else {
        crate::common::skip("cannot make an ordinary user (useradd failed)");
        return;
    };
    // A folder only root may enter, first on the user's PATH.
    let hidden = tempfile::tempdir().unwrap();
    let bin = hidden.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mut p = std::fs::metadata(hidden.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o700);
    std::fs::set_permissions(hidden.path(), p).unwrap();
    for (mode, env) in modes() {
        let world = World::new(Some(user));
        let mut env = env;
        env.push(("PATH", format!("{}:/usr/bin:/bin", bin.display())));
        let run = Run {
            user: Some(user),
            filter: None,
            env,
        };
        let (said, code) = nib_in(&world, &run, &["sh", "echo the call ran"]);
        assert!(said.contains("the call ran"), "{mode}: {said}");
        assert!(!said.contains("Can't find source path"), "{mode}: {said}");
        assert_eq!(code, 0, "{mode}: {said}");
    }
}

#[test]
fn without_user_notification_programs_are_refused_while_program_rules_exist() {
    if !filter_works() || !is_root() {
        return;
    }
    // Unconfined, and under root's bubblewrap + seccomp: modes that hold
    // without Landlock, where only the exec-time rules are missing.
    let unconfined: Vec<(&str, String)> = vec![("NIB_SANDBOX", "0".to_string())];
    for (mode, env) in [
        ("unconfined", unconfined),
        ("bubblewrap", vec![("NIB_SANDBOX", "1".to_string())]),
    ] {
        let world = World::new(None);
        std::fs::write(
            world.project.join("nib.json"),
            r#"{"rules": [{"program": "forbidden-tool", "why": "use the tool's MCP server"}]}"#,
        )
        .unwrap();
        let run = Run {
            user: None,
            filter: Some(GVISOR),
            env,
        };
        let (said, code) = nib_in(&world, &run, &["sh", "echo ran > marker"]);
        assert!(!world.project.join("marker").exists(), "{mode}: {said}");
        assert!(
            said.contains("program rules") && said.contains("user notification"),
            "{mode}: {said}"
        );
        assert_ne!(code, 0, "{mode}");
    }
}

/// A project holding `tools/bin`, a link to /usr/bin, first on nib's PATH:
/// the link resolves outside the roots, so bubblewrap is found through it;
/// a program may then put a folder of its own there.
#[tokio::test]
async fn over_mcp_a_bwrap_found_through_a_link_in_the_project_is_never_swapped() {
    for (mode, env) in modes() {
        let world = World::new(None);
        let (marker, _) = planted(&world);
        std::fs::remove_dir_all(world.project.join(".venv")).unwrap();
        std::fs::create_dir(world.project.join("tools")).unwrap();
        std::os::unix::fs::symlink("/usr/bin", world.project.join("tools/bin")).unwrap();
        let path = format!(
            "{}:{}",
            world.project.join("tools/bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut env: Vec<(&str, String)> = env;
        env.push(("PATH", path));
        env.push(("HOME", world.home.display().to_string()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let nib = start_with(
            Era::Handshake,
            &world.project,
            TestClient::new(Roots::Undeclared),
            &env,
        )
        .await;
        let first = nib
            .ok(
                "nibash",
                serde_json::json!({ "command": "echo first call" }),
            )
            .await;
        assert!(first.contains("first call"), "{mode}: {first}");
        // Away in one call (bubblewrap binds the PATH folder in it), a
        // folder of the program's own in the next.
        let gone = nib
            .ok("nibash", serde_json::json!({ "command": "rm -r tools" }))
            .await;
        assert!(!world.project.join("tools").exists(), "{mode}: {gone}");
        let swap = format!(
            "mkdir -p tools/bin && printf '#!/bin/sh\\ntouch {}\\nexec /usr/bin/bwrap \"$@\"\\n' > tools/bin/bwrap && chmod +x tools/bin/bwrap && echo swapped",
            marker.display()
        );
        let swapped = nib
            .ok("nibash", serde_json::json!({ "command": swap }))
            .await;
        assert!(swapped.contains("swapped"), "{mode}: {swapped}");
        let read = nib
            .ok("read", serde_json::json!({ "paths": ["a.txt@HEAD"] }))
            .await;
        let again = nib
            .ok("nibash", serde_json::json!({ "command": "echo again" }))
            .await;
        nib.stop().await;
        assert!(
            !marker.exists(),
            "{mode}: the program's bwrap ran:\n{swapped}\n{read}\n{again}"
        );
    }
}

#[tokio::test]
async fn over_mcp_a_bwrap_planted_on_path_inside_the_project_never_runs() {
    for (mode, env) in modes() {
        let world = World::new(None);
        let (marker, path) = planted(&world);
        let mut env: Vec<(&str, String)> = env;
        env.push(("PATH", path));
        env.push(("HOME", world.home.display().to_string()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let nib = start_with(
            Era::Handshake,
            &world.project,
            TestClient::new(Roots::Undeclared),
            &env,
        )
        .await;
        let said = nib
            .ok(
                "nibash",
                serde_json::json!({ "command": "echo hello from the call" }),
            )
            .await;
        assert!(said.contains("hello from the call"), "{mode}: {said}");
        let read = nib
            .ok("read", serde_json::json!({ "paths": ["a.txt@HEAD"] }))
            .await;
        assert!(read.contains("inside"), "{mode}: {read}");
        nib.stop().await;
        assert!(
            !marker.exists(),
            "{mode}: the planted bwrap ran:\n{said}\n{read}"
        );
    }
}
