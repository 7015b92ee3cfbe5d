//! Effect tests: each guarantee checked by an outcome (a file that must not
//! appear, a connection that must be refused, a process that must be gone),
//! run with bubblewrap and with Landlock + seccomp alone.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nib_sandbox::{Limits, Output, Policy, Sandbox, bwrap_usable};

fn probe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nib-sandbox-probe"))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Bwrap,
    LandlockSeccomp,
}

fn modes() -> Vec<Mode> {
    let mut m = vec![Mode::LandlockSeccomp];
    if bwrap_usable() {
        m.push(Mode::Bwrap);
    }
    m
}

fn policy(mode: Mode, root: &Path) -> Policy {
    Policy {
        confine: true,
        writable: vec![root.to_path_buf()],
        use_bwrap: mode == Mode::Bwrap,
        limits: Limits {
            processes: 64,
            output_bytes: 1 << 20,
            ..Limits::default()
        },
        ..Policy::default()
    }
}

fn run(policy: &Policy, cwd: &Path, args: &[&str], timeout: Duration) -> Output {
    let sandbox = Sandbox::new(&probe(), policy.clone());
    let mut argv: Vec<OsString> = vec![probe().into_os_string()];
    argv.extend(args.iter().map(OsString::from));
    let confined = sandbox.spawn(&argv, cwd, &[]).expect("spawn");
    confined.wait(Some(timeout))
}

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    World {
        _dir: dir,
        root,
        outside,
    }
}

const T: Duration = Duration::from_secs(20);

#[test]
fn writes_outside_the_roots_and_to_home_fail_and_leave_no_file() {
    for mode in modes() {
        let w = world();
        let p = policy(mode, &w.root);
        let o = run(
            &p,
            &w.root,
            &["write", w.outside.join("x").to_str().unwrap()],
            T,
        );
        assert!(out(&o).starts_with("DENIED"), "{mode:?}: {}", out(&o));
        assert!(!w.outside.join("x").exists(), "{mode:?}");
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let canary = Path::new(&home).join(format!("nib-sandbox-canary-{}", std::process::id()));
        let o = run(&p, &w.root, &["write", canary.to_str().unwrap()], T);
        assert!(out(&o).starts_with("DENIED"), "{mode:?}: {}", out(&o));
        assert!(!canary.exists(), "{mode:?}");
        let o = run(
            &p,
            &w.root,
            &["write", w.root.join("ok").to_str().unwrap()],
            T,
        );
        assert!(out(&o).starts_with("OK"), "{mode:?}: {}", out(&o));
        assert!(
            w.root.join("ok").exists(),
            "{mode:?}: the root stays writable"
        );
    }
}

#[test]
fn a_symlink_in_a_root_cannot_be_written_through() {
    for mode in modes() {
        let w = world();
        std::os::unix::fs::symlink(&w.outside, w.root.join("out")).unwrap();
        let o = run(&policy(mode, &w.root), &w.root, &["write", "out/pwned"], T);
        assert!(out(&o).starts_with("DENIED"), "{mode:?}: {}", out(&o));
        assert!(!w.outside.join("pwned").exists(), "{mode:?}");
    }
}

#[test]
fn tcp_to_a_loopback_listener_is_refused() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    listener.set_nonblocking(true).unwrap();
    for mode in modes() {
        let w = world();
        let o = run(&policy(mode, &w.root), &w.root, &["tcp", &addr], T);
        assert!(out(&o).starts_with("DENIED"), "{mode:?}: {}", out(&o));
        assert!(
            listener.accept().is_err(),
            "{mode:?}: no connection arrived"
        );
        // With the network allowed, it connects (the test is not vacuous).
        let mut open = policy(mode, &w.root);
        open.network = true;
        let o = run(&open, &w.root, &["tcp", &addr], T);
        assert!(
            out(&o).starts_with("OK"),
            "{mode:?} with network: {}",
            out(&o)
        );
        // Take that connection off the backlog before the next mode checks it is empty.
        let started = Instant::now();
        while listener.accept().is_err() && started.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn unix_sockets_outside_are_unreachable() {
    let name = format!("nib-sandbox-test-{}", std::process::id());
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
    };
    let w = world();
    let path = w.outside.join("sock");
    let _path_listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    for mode in modes() {
        let o = run(&policy(mode, &w.root), &w.root, &["abstract", &name], T);
        assert!(
            out(&o).starts_with("DENIED"),
            "{mode:?} abstract: {}",
            out(&o)
        );
        if mode == Mode::Bwrap {
            // Landlock does not mediate connect() on a pathname socket; bubblewrap
            // hides it (the host's /tmp is replaced). SECURITY.md says so.
            let o = run(
                &policy(mode, &w.root),
                &w.root,
                &["unix", path.to_str().unwrap()],
                T,
            );
            assert!(out(&o).starts_with("DENIED"), "{mode:?} path: {}", out(&o));
        }
    }
    drop(abstract_listener);
}

/// The path rules are kept between starts (Landlock alone); a change to
/// what they were made from shows at the next start: a file added to a
/// split folder is readable, a hidden path made later stays hidden, a
/// granted folder replaced by another is the new one.
#[test]
fn the_read_policy_follows_changes_made_between_starts() {
    for mode in modes() {
        let w = world();
        let shown = w.outside.join("shown");
        let tool = w.outside.join("tool");
        std::fs::create_dir_all(&shown).unwrap();
        std::fs::create_dir_all(&tool).unwrap();
        std::fs::write(shown.join("before.txt"), "BEFORE\n").unwrap();
        std::fs::write(tool.join("v1"), "V1\n").unwrap();
        let mut p = policy(mode, &w.root);
        p.reads.readable.push(shown.clone());
        p.reads.readable.push(tool.clone());
        p.reads.hidden.push(shown.join("secret"));
        let read = |path: &Path| out(&run(&p, &w.root, &["read", path.to_str().unwrap()], T));
        // The probe answers `OK <length>` for a file it read.
        let before = read(&shown.join("before.txt"));
        assert!(before.starts_with("OK 7"), "{mode:?}: {before}");
        let v1 = read(&tool.join("v1"));
        assert!(v1.starts_with("OK 3"), "{mode:?}: {v1}");
        std::fs::write(shown.join("after.txt"), "AFTER\n").unwrap();
        std::fs::write(shown.join("secret"), "CANARY-made-later\n").unwrap();
        std::fs::remove_dir_all(&tool).unwrap();
        std::fs::create_dir_all(&tool).unwrap();
        std::fs::write(tool.join("v2"), "V2\n").unwrap();
        let after = read(&shown.join("after.txt"));
        assert!(after.starts_with("OK 6"), "{mode:?}: {after}");
        let secret = read(&shown.join("secret"));
        assert!(!secret.starts_with("OK"), "{mode:?}: {secret}");
        let v2 = read(&tool.join("v2"));
        assert!(v2.starts_with("OK 3"), "{mode:?}: {v2}");
    }
}

#[test]
fn the_hosts_init_environment_is_unreadable() {
    for mode in modes() {
        let w = world();
        let o = run(
            &policy(mode, &w.root),
            &w.root,
            &["read", "/proc/1/environ"],
            T,
        );
        let text = out(&o);
        // Under bubblewrap PID 1 is its own init, never the host's; with
        // Landlock alone the tree has a /proc of its own where the broker
        // may make a mount namespace (root here), whose PID 1 is the
        // tree's reaper with an empty environment; elsewhere the host's
        // is refused. (tests/reads.rs reads a sibling's non-empty one.)
        assert!(
            text.starts_with("DENIED")
                || mode == Mode::Bwrap
                || (text.starts_with("OK") && text.split_whitespace().nth(1) == Some("0")),
            "{mode:?}: {text}"
        );
    }
}

#[test]
fn ptrace_keyrings_and_user_namespaces_fail_and_no_new_privs_is_set() {
    for mode in modes() {
        let w = world();
        let p = policy(mode, &w.root);
        for what in ["ptrace", "keyctl", "userns"] {
            let o = run(&p, &w.root, &[what], T);
            assert!(
                out(&o).starts_with("DENIED"),
                "{mode:?} {what}: {}",
                out(&o)
            );
        }
        let o = run(&p, &w.root, &["status"], T);
        assert!(out(&o).contains("NoNewPrivs:\t1"), "{mode:?}: {}", out(&o));
    }
}

#[test]
fn only_fds_0_to_2_reach_the_program_and_no_terminal() {
    // An fd the test holds open without close-on-exec must not leak.
    let f = std::fs::File::open("/dev/null").unwrap();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&f);
    // SAFETY: clearing FD_CLOEXEC on our own open fd.
    unsafe {
        libc::fcntl(raw, libc::F_SETFD, 0);
    }
    for mode in modes() {
        let w = world();
        let o = run(&policy(mode, &w.root), &w.root, &["fds"], T);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "0 1 2",
            "{mode:?}"
        );
        let o = run(&policy(mode, &w.root), &w.root, &["tty"], T);
        assert!(out(&o).starts_with("DENIED"), "{mode:?}: {}", out(&o));
        let o = run(&policy(mode, &w.root), &w.root, &["tiocsti"], T);
        assert!(out(&o).contains("DENIED"), "{mode:?}: {}", out(&o));
    }
    // Without confinement too (layer 1).
    let w = world();
    let o = run(&Policy::default(), &w.root, &["fds"], T);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0 1 2");
    drop(f);
}

/// Layer 1 alone, then each confining mode, each with a world of its own
/// (its root writable).
fn layer_1_and_every_mode() -> Vec<(String, Policy, World)> {
    let mut all = Vec::new();
    let w = world();
    let layer_1 = Policy {
        writable: vec![w.root.clone()],
        ..Policy::default()
    };
    all.push(("layer 1".to_string(), layer_1, w));
    for mode in modes() {
        let w = world();
        all.push((format!("{mode:?}"), policy(mode, &w.root), w));
    }
    all
}

#[test]
fn the_program_is_pid_2_under_a_reaper_and_a_missing_one_is_named() {
    use std::os::unix::fs::PermissionsExt;
    for (name, p, w) in layer_1_and_every_mode() {
        // The reaper is PID 1 of the tree's own namespace (root can make
        // one, in CI too); the program is an ordinary process under it.
        if nib_sandbox::probe().pid_namespace || name != "layer 1" {
            let o = run(&p, &w.root, &["pid"], T);
            assert_eq!(out(&o).trim(), "2 1", "{name}");
        }
        // A program found on PATH runs; a missing one is named, exit 127.
        let sandbox = Sandbox::new(&probe(), p.clone());
        let o = sandbox
            .spawn(&["true".into()], &w.root, &[])
            .expect("spawn")
            .wait(Some(T));
        assert_eq!(o.code, Some(0), "{name}: {}", out(&o));
        let o = sandbox
            .spawn(&["nib-no-such-program".into(), "x".into()], &w.root, &[])
            .expect("spawn")
            .wait(Some(T));
        assert_eq!(o.code, Some(127), "{name}: {}", out(&o));
        assert_eq!(
            out(&o).trim(),
            "nib sandbox: cannot run nib-no-such-program: No such file or directory",
            "{name}"
        );
        // A file on PATH that is not executable: permission, not absence.
        let bin = w.root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("nib-not-runnable"), "#!/bin/sh\n").unwrap();
        let path = format!("{}:/usr/bin:/bin", bin.display());
        let o = sandbox
            .spawn(
                &["nib-not-runnable".into()],
                &w.root,
                &[("PATH".into(), path.clone().into())],
            )
            .expect("spawn")
            .wait(Some(T));
        assert_eq!(o.code, Some(127), "{name}: {}", out(&o));
        assert!(
            out(&o).ends_with("Permission denied\n"),
            "{name}: {}",
            out(&o)
        );
        // A script without `#!` runs under /bin/sh, as execvp runs it.
        let script = bin.join("nib-no-shebang");
        std::fs::write(&script, "echo ran by sh: \"$1\"\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let o = sandbox
            .spawn(
                &["nib-no-shebang".into(), "one arg".into()],
                &w.root,
                &[("PATH".into(), path.clone().into())],
            )
            .expect("spawn")
            .wait(Some(T));
        assert_eq!(o.code, Some(0), "{name}: {}", out(&o));
        assert_eq!(out(&o), "ran by sh: one arg\n", "{name}");
    }
}

#[test]
fn the_output_ends_when_the_programs_tree_closes_it() {
    use std::io::Read;
    for (name, p, w) in layer_1_and_every_mode() {
        // The program writes, closes its stdout and stderr, and lives on:
        // the pipe's end must come now (no reaper, init or bubblewrap
        // process holds the pipe), while the program still runs.
        // The program never ends by itself: the test ends it.
        let sandbox = Sandbox::new(&probe(), p);
        let argv: Vec<OsString> = [
            "sh",
            "-c",
            "echo out; echo err >&2; exec >&- 2>&-; exec sleep 1000",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let (mut confined, mut pipe) = sandbox.spawn_merged(&argv, &w.root, &[], None).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            let _ = tx.send(text);
        });
        let text = rx.recv_timeout(T);
        let running = confined.try_wait().is_none();
        drop(confined);
        assert_eq!(
            text.as_deref(),
            Ok("out\nerr\n"),
            "{name}: the pipe did not end while the program ran"
        );
        assert!(running, "{name}");
    }
}

#[test]
fn what_bubblewrap_says_when_it_cannot_start_is_kept() {
    use std::io::Read;
    if !bwrap_usable() {
        return;
    }
    let w = world();
    // A stand-in that does not exist: bubblewrap cannot bind it and says so
    // (a missing entry is refused before bubblewrap starts).
    let missing = w.outside.join("no-such-entry");
    let mut p = policy(Mode::Bwrap, &w.root);
    p.stand_in_files
        .push((w.outside.join("some-file"), missing.clone()));
    let sandbox = Sandbox::new(&probe(), p);
    let argv: Vec<OsString> = vec!["true".into()];
    let (mut confined, mut pipe) = sandbox.spawn_merged(&argv, &w.root, &[], None).unwrap();
    let mut text = String::new();
    pipe.read_to_string(&mut text).unwrap();
    assert_eq!(text, "", "nothing of the program's");
    let status = confined.wait_blocking().expect("status");
    assert!(!status.success());
    let said = String::from_utf8_lossy(&confined.start_messages()).into_owned();
    assert!(
        said.contains("bwrap") && said.contains("no-such-entry"),
        "{said}"
    );
}

#[test]
fn a_setsid_orphan_is_gone_when_the_call_ends() {
    for (name, p, w) in layer_1_and_every_mode() {
        let beat = w.root.join("heartbeat");
        let o = run(&p, &w.root, &["orphan", beat.to_str().unwrap()], T);
        assert!(out(&o).starts_with("OK"), "{name}: {}", out(&o));
        std::thread::sleep(Duration::from_millis(300));
        let a = std::fs::read_to_string(&beat).unwrap_or_default();
        std::thread::sleep(Duration::from_millis(400));
        let b = std::fs::read_to_string(&beat).unwrap_or_default();
        assert_eq!(a, b, "{name}: the orphan is still writing");
    }
}

#[test]
fn the_private_tmp_never_reaches_the_hosts_tmp() {
    for mode in modes() {
        let w = world();
        let name = format!("/tmp/nib-sandbox-canary-{}-{mode:?}", std::process::id());
        let _ = run(&policy(mode, &w.root), &w.root, &["write", &name], T);
        assert!(!Path::new(&name).exists(), "{mode:?}");
        // The confined process's own temp folder is writable in every mode.
        let o = run(&policy(mode, &w.root), &w.root, &["write-temp"], T);
        assert_eq!(o.code, Some(0), "{mode:?}: {}", out(&o));
    }
}

#[test]
fn a_fork_bomb_is_contained_and_the_broker_keeps_working() {
    for mode in modes() {
        let w = world();
        let started = Instant::now();
        let o = run(
            &policy(mode, &w.root),
            &w.root,
            &["forkbomb"],
            Duration::from_secs(3),
        );
        assert!(
            o.timed_out || o.code.is_some() || o.signal.is_some(),
            "{mode:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{mode:?}: took {:?}",
            started.elapsed()
        );
        // The machine still runs programs promptly.
        let t = Instant::now();
        let o = run(&policy(mode, &w.root), &w.root, &["status"], T);
        assert!(out(&o).contains("NoNewPrivs"), "{mode:?}");
        assert!(t.elapsed() < Duration::from_secs(5), "{mode:?}");
    }
}

#[test]
fn yes_is_cut_at_the_output_cap_and_killed() {
    for mode in modes() {
        let w = world();
        let started = Instant::now();
        let o = run(&policy(mode, &w.root), &w.root, &["yes"], T);
        assert!(o.truncated, "{mode:?}");
        assert!(
            o.stdout.len() <= 1 << 20,
            "{mode:?}: {} bytes",
            o.stdout.len()
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{mode:?}");
    }
}

#[test]
fn the_environment_is_scrubbed_in_every_mode() {
    let w = world();
    let o = run(&Policy::default(), &w.root, &["env"], T);
    let env = String::from_utf8_lossy(&o.stdout);
    assert!(
        env.contains("PAGER=cat")
            && env.contains("GIT_TERMINAL_PROMPT=0")
            && env.contains("TERM=dumb"),
        "{env}"
    );
    assert!(!env.contains("SSH_AUTH_SOCK"), "{env}");
}

#[test]
fn bubblewrap_is_usable_where_ci_installs_it() {
    if std::env::var_os("CI").is_some() {
        assert!(
            bwrap_usable(),
            "CI installs bubblewrap; it must work for the tests to cover both paths"
        );
    }
}

#[test]
fn the_tree_ends_when_the_broker_dies() {
    let mut cases = vec![("layer 1", "open", "")];
    for mode in modes() {
        cases.push(if mode == Mode::Bwrap {
            ("bwrap", "confine", "bwrap")
        } else {
            ("landlock", "confine", "")
        });
    }
    for (name, confine, bwrap) in cases {
        let w = world();
        let beat = w.root.join("heartbeat");
        // Under bubblewrap, with a proxy route: its bridge must end too.
        let socket = w.root.join("proxy.sock");
        let _proxy = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let route = if bwrap.is_empty() { "" } else { "3128" };
        let mut broker = std::process::Command::new(probe())
            .args([
                "broker",
                confine,
                w.root.to_str().unwrap(),
                bwrap,
                beat.to_str().unwrap(),
                route,
                socket.to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::fs::read_to_string(&beat)
            .unwrap_or_default()
            .parse::<u32>()
            .unwrap_or(0)
            < 2
        {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{name}: the orphan never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        broker.kill().unwrap();
        broker.wait().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let a = std::fs::read_to_string(&beat).unwrap_or_default();
        std::thread::sleep(Duration::from_millis(400));
        let b = std::fs::read_to_string(&beat).unwrap_or_default();
        assert_eq!(a, b, "{name}: the orphan outlived the broker");
        // Nothing of the sandbox is left (bubblewrap's init waits for every
        // process of its namespace, the proxy bridge included).
        let left = running_in(&w.root);
        assert!(left.is_empty(), "{name}: left running: {left:?}");
    }
}

/// The command lines of running processes that name `root` (every process
/// of a sandbox for it does: bubblewrap's and the confined process's arguments).
fn running_in(root: &Path) -> Vec<String> {
    let root = root.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&root))
        .collect()
}

/// Where no pids cgroup can be made (an ordinary user has none to write),
/// a call with a proxy route under bubblewrap leaves nothing running: the
/// bridge ends with the program, so bubblewrap's init, which waits for
/// every process of its namespace, ends too.
#[test]
fn a_proxied_call_leaves_nothing_running_without_a_cgroup() {
    if !bwrap_usable() {
        eprintln!("skipped: bubblewrap is not usable here");
        return;
    }
    let w = world();
    let socket = w.root.join("proxy.sock");
    let _proxy = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    // A private mount namespace whose /sys/fs/cgroup is an empty tmpfs.
    let o = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs none /sys/fs/cgroup && exec \"$0\" proxied \"$1\" \"$2\"")
        .arg(probe())
        .arg(&w.root)
        .arg(&socket)
        .output()
        .expect("unshare (util-linux)");
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.starts_with("OK"),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::thread::sleep(Duration::from_millis(500));
    let left = running_in(&w.root);
    assert!(left.is_empty(), "left running after the call: {left:?}");
}

#[test]
fn a_channel_is_the_only_extra_fd() {
    let w = world();
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let sandbox = Sandbox::new(&probe(), Policy::default());
    let argv: Vec<OsString> = vec![probe().into_os_string(), "fds".into()];
    let confined = sandbox
        .spawn_with_channel(&argv, &w.root, &[], Some(std::os::fd::OwnedFd::from(a)))
        .unwrap();
    let o = confined.wait(Some(T));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0 1 2 3");
}

/// Refuses any exec whose file (or `#!` interpreter) is the one given.
#[derive(Debug)]
struct RefuseFile {
    dev: u64,
    ino: u64,
}

impl nib_sandbox::ExecJudge for RefuseFile {
    fn judge(&self, attempt: &nib_sandbox::ExecAttempt<'_>) -> Option<String> {
        attempt
            .files
            .iter()
            .any(|f| (f.dev, f.ino) == (self.dev, self.ino))
            .then(|| "the test rule".to_string())
    }
}

#[test]
fn execs_are_decided_by_the_judge_in_every_mode() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let unconfined = |root: &Path| Policy {
        writable: vec![root.to_path_buf()],
        ..Policy::default()
    };
    type MakePolicy = fn(&Path) -> Policy;
    let mut policies: Vec<(&str, MakePolicy)> = vec![("layer 1 only", unconfined)];
    policies.push(("Landlock + seccomp", |r| policy(Mode::LandlockSeccomp, r)));
    if bwrap_usable() {
        policies.push(("bubblewrap", |r| policy(Mode::Bwrap, r)));
    }
    for (name, make) in policies {
        let w = world();
        let tool = w.root.join("tool");
        std::fs::write(
            &tool,
            format!("#!/bin/sh\ntouch '{}/canary'\n", w.root.display()),
        )
        .unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let wrapper = w.root.join("wrapper");
        std::fs::write(&wrapper, format!("#!{}\n", tool.display())).unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&tool, w.root.join("link")).unwrap();
        std::fs::hard_link(&tool, w.root.join("hard")).unwrap();
        let meta = std::fs::metadata(&tool).unwrap();
        let judge = std::sync::Arc::new(RefuseFile {
            dev: meta.dev(),
            ino: meta.ino(),
        });
        let sandbox = Sandbox::new(&probe(), make(&w.root)).with_exec_judge(judge);
        for attempt in [
            "./tool",
            "./link",
            "./hard",
            "$PWD/tool",
            "sh -c ./tool",
            "./wrapper",
            "cd / && exec \"$OLDPWD/link\"",
            "exec 5<./tool; exec /proc/self/fd/5",
        ] {
            let argv: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), attempt.into()];
            let confined = sandbox.spawn(&argv, &w.root, &[]).unwrap();
            let log = confined.exec_log().unwrap();
            let o = confined.wait(Some(T));
            assert!(
                !w.root.join("canary").exists(),
                "{name}: {attempt:?} ran the tool: {}",
                out(&o)
            );
            assert!(
                out(&o).contains("denied") || out(&o).contains("Permission"),
                "{name}: {attempt:?} did not fail with EACCES: {}",
                out(&o)
            );
            let refusals = log.refusals();
            assert!(
                refusals
                    .iter()
                    .any(|r| r.why == "the test rule" && r.caller == "sh"),
                "{name}: {attempt:?}: {refusals:?}"
            );
        }
        // Other programs run, and neither the channel nor the supervisor
        // socket nor the listener reaches them.
        let argv: Vec<OsString> = vec![probe().into_os_string(), "fds".into()];
        let o = sandbox.spawn(&argv, &w.root, &[]).unwrap().wait(Some(T));
        assert_eq!(out(&o).trim(), "0 1 2", "{name}");
    }
}

/// A stand-in for nib's proxy: answers every request `200 OK` with what it
/// was asked, on a TCP port and on a Unix socket, and keeps the request
/// lines it received (the canary).
struct FakeProxy {
    port: u16,
    socket: PathBuf,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

fn fake_proxy() -> FakeProxy {
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("proxy.sock");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let answer = |seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
                  s: &mut dyn std::io::Read,
                  w: &mut dyn Write| {
        let mut r = std::io::BufReader::new(s);
        let mut first = String::new();
        let _ = r.read_line(&mut first);
        let first = first.trim().to_string();
        seen.lock().unwrap().push(first.clone());
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nasked {first}\n"
        );
    };
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let s1 = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for mut c in tcp.incoming().flatten() {
            let mut w = c.try_clone().unwrap();
            answer(std::sync::Arc::clone(&s1), &mut c, &mut w);
        }
    });
    let unix = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let s2 = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for mut c in unix.incoming().flatten() {
            let mut w = c.try_clone().unwrap();
            answer(std::sync::Arc::clone(&s2), &mut c, &mut w);
        }
    });
    FakeProxy {
        port,
        socket,
        seen,
        _dir: dir,
    }
}

#[test]
fn with_a_proxy_route_programs_reach_the_proxy_and_nothing_else() {
    let landlock_net = nib_sandbox::probe().landlock_abi >= 4;
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_addr = other.local_addr().unwrap().to_string();
    other.set_nonblocking(true).unwrap();
    for mode in modes() {
        let w = world();
        let proxy = fake_proxy();
        let mut p = policy(mode, &w.root);
        p.proxy = Some(nib_sandbox::ProxyRoute {
            port: proxy.port,
            socket: proxy.socket.clone(),
        });
        let o = run(&p, &w.root, &["proxy-get", "http://pkg.example/index"], T);
        let text = out(&o);
        if mode == Mode::Bwrap || landlock_net {
            assert!(text.starts_with("OK HTTP/1.1 200 OK"), "{mode:?}: {text}");
            assert_eq!(
                proxy.seen.lock().unwrap().as_slice(),
                ["GET http://pkg.example/index HTTP/1.1"],
                "{mode:?}"
            );
        } else {
            // Without Landlock's port rule nothing holds TCP to the proxy:
            // programs get no TCP at all.
            assert!(text.starts_with("DENIED"), "{mode:?}: {text}");
        }
        // No UDP either (a DNS query would be one): nothing arrives.
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let udp_addr = udp.local_addr().unwrap().to_string();
        let o = run(&p, &w.root, &["udp", &udp_addr], T);
        assert!(out(&o).starts_with("DENIED"), "{mode:?}: {}", out(&o));
        let mut buf = [0u8; 16];
        assert!(
            udp.recv_from(&mut buf).is_err(),
            "{mode:?}: no datagram arrived"
        );
        // Around the proxy: another port on this machine's loopback, by
        // TCP and by Multipath TCP (which Landlock's TCP rules miss).
        let o = run(&p, &w.root, &["tcp", &other_addr], T);
        assert!(out(&o).starts_with("DENIED"), "{mode:?}: {}", out(&o));
        let o = run(&p, &w.root, &["mptcp", &other_addr], T);
        assert!(out(&o).starts_with("DENIED"), "{mode:?}: {}", out(&o));
        assert!(
            other.accept().is_err(),
            "{mode:?}: nothing arrived around the proxy"
        );
    }
}
