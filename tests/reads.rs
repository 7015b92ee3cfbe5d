//! The read policy over MCP, in both sandbox modes (bubblewrap, and
//! Landlock + seccomp alone): canaries in a test `$HOME` (every entry of the
//! default credential list, another project), a project outside `$HOME`,
//! the host's `/tmp` and `/var/tmp`, secret variables in nib's environment,
//! a unix socket in `/run` with a listener, a sibling process's
//! environment, `mknod`, a symlink planted in the root — each tried through
//! nib's own `cat`, the system `cat` and python. Controls that must keep
//! working: git, python, node, pip installing a local package, and a cargo
//! build of a crate with a path dependency, from a toolchain under `$HOME`
//! and from one named by `CARGO_HOME`/`RUSTUP_HOME`. A provider (the test
//! provider, confined) reads no canary and gets no secret variable either.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::common::*;

const SANDBOX_MODES: [&[(&str, &str)]; 2] = [
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

async fn sh(nib: &Nib, command: &str) -> String {
    let (text, _) = nib
        .call("nibash", json!({ "command": command, "timeout": 120 }))
        .await;
    text
}

/// A test home: a canary inside every credential entry, another project,
/// and a toolchain (`.cargo/bin`, `.rustup`) linked to the machine's.
struct Home {
    _dir: tempfile::TempDir,
    path: PathBuf,
    canaries: Vec<(PathBuf, String)>,
}

fn canary_text(what: &str) -> String {
    format!("CANARY-{}", what.replace(['/', '.'], "_"))
}

fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    let mut canaries = Vec::new();
    for entry in nib_sandbox::CREDENTIALS {
        let text = canary_text(entry);
        // Files where the name says file, folders (with a key inside) else.
        let looks_like_file = entry.rsplit('/').next().is_some_and(|n| {
            n.contains(".json")
                || n.contains(".toml")
                || n.contains(".xml")
                || n.contains(".properties")
                || n.contains(".Config")
                || n.ends_with("rc")
                || n.ends_with("history")
                || n.ends_with("credentials")
                || n.ends_with("token")
                || [
                    ".netrc",
                    ".pgpass",
                    ".my.cnf",
                    ".s3cfg",
                    ".boto",
                    ".databrickscfg",
                    ".pypirc",
                    ".yarnrc.yml",
                    ".vault-token",
                ]
                .contains(&n)
        });
        let file = if looks_like_file {
            path.join(entry)
        } else {
            path.join(entry).join("id_secret")
        };
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, format!("{text}\n")).unwrap();
        canaries.push((file, text));
    }
    let other = path.join("other-project/secret.txt");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::write(&other, "CANARY-other-project\n").unwrap();
    canaries.push((other, "CANARY-other-project".into()));
    // A toolchain under $HOME, as rustup lays it out, made of links to
    // the machine's own (a copy would be gigabytes).
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    let rustup_home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".rustup"));
    std::os::unix::fs::symlink(cargo_home.join("bin"), path.join(".cargo/bin")).unwrap();
    std::os::unix::fs::symlink(&rustup_home, path.join(".rustup")).unwrap();
    std::fs::write(
        path.join(".gitconfig"),
        "[user]\n\tname = Reads Test\n\temail = t@example.invalid\n",
    )
    .unwrap();
    Home {
        _dir: dir,
        path,
        canaries,
    }
}

/// Canaries outside `$HOME`: a project in `/srv`, files in the host's
/// `/tmp` and `/var/tmp`.
fn outside_canaries(tag: &str) -> Vec<(PathBuf, String)> {
    let pid = std::process::id();
    let mut out = Vec::new();
    for (p, text) in [
        (
            PathBuf::from(format!("/srv/nib-reads-{pid}-{tag}/secret.txt")),
            format!("CANARY-srv-{tag}"),
        ),
        (
            PathBuf::from(format!("/tmp/nib-reads-host-tmp-{pid}-{tag}")),
            format!("CANARY-host-tmp-{tag}"),
        ),
        (
            PathBuf::from(format!("/var/tmp/nib-reads-{pid}-{tag}")),
            format!("CANARY-var-tmp-{tag}"),
        ),
    ] {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("{text}\n")).unwrap();
        out.push((p, text));
    }
    out
}

fn remove_outside(canaries: &[(PathBuf, String)]) {
    for (p, _) in canaries {
        let _ = std::fs::remove_file(p);
        if p.starts_with("/srv") {
            let _ = std::fs::remove_dir(p.parent().unwrap());
        }
    }
}

static PYENV_ROOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

fn pyenv_root() -> Option<String> {
    std::env::var("PYENV_ROOT").ok().or_else(|| {
        let p = format!("{}/.pyenv", std::env::var("HOME").ok()?);
        Path::new(&p).is_dir().then_some(p)
    })
}

/// Secret-looking variables in nib's environment, with their canaries.
const SECRETS: &[(&str, &str)] = &[
    ("GITHUB_TOKEN", "ghp_CANARYTOKEN"),
    ("AWS_SECRET_ACCESS_KEY", "CANARY-aws-secret"),
    ("ANTHROPIC_API_KEY", "CANARY-anthropic"),
    ("OPENROUTER_API_KEY", "CANARY-openrouter"),
    ("NIB_DECIDER_KEY", "CANARY-decider"),
    ("NPM_TOKEN", "CANARY-npm"),
    ("DB_PASSWORD", "CANARY-db"),
];

/// nib serving `root` for the user of `home` in `mode` (extra variables),
/// with [`SECRETS`] in its environment, `PASSED_TOKEN` passed by
/// NIB_SANDBOX_ENV, and the toolchain under `$HOME` first on PATH.
async fn serve_for(home: &Home, root: &Path, mode: &[(&str, &str)]) -> Nib {
    let home_s = home.path.display().to_string();
    let path_var = format!(
        "{home_s}/.cargo/bin:{}",
        std::env::var("PATH").unwrap_or_default()
    );
    let mut env = vec![("HOME", home_s.as_str()), ("PATH", path_var.as_str())];
    env.extend_from_slice(SECRETS);
    env.push(("PASSED_TOKEN", "VISIBLE-passed"));
    env.push(("NIB_SANDBOX_ENV", "PASSED_TOKEN"));
    // pyenv's shims find their versions through PYENV_ROOT (a toolchain
    // variable, so readable) when $HOME is not the user's.
    if let Some(root) = PYENV_ROOT.get_or_init(pyenv_root) {
        env.push(("PYENV_ROOT", root.as_str()));
    }
    env.extend_from_slice(mode);
    start_with(
        Era::Handshake,
        root,
        TestClient::new(Roots::Undeclared),
        &env,
    )
    .await
}

#[tokio::test]
async fn programs_read_only_what_the_work_needs_in_both_sandbox_modes() {
    let python = "python3";
    for (i, mode) in SANDBOX_MODES.iter().enumerate() {
        let home = home();
        let outside = outside_canaries(&i.to_string());
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        // A symlink planted in the root, leading to a key.
        std::os::unix::fs::symlink(home.path.join(".ssh/id_secret"), root.join("planted")).unwrap();
        // A listener in /run where docker.sock or an agent would be.
        let sock = PathBuf::from(format!("/run/nib-reads-{}-{i}.sock", std::process::id()));
        let _ = std::fs::remove_file(&sock);
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        listener.set_nonblocking(true).unwrap();
        // A sibling process with a secret in its environment.
        let mut sibling = std::process::Command::new("sleep")
            .arg("60")
            .env("SIBLING_SECRET", "CANARY-sibling-environ")
            .spawn()
            .unwrap();
        let nib = serve_for(&home, &root, mode).await;
        let mut all: Vec<(PathBuf, String)> = home.canaries.clone();
        all.extend(outside.iter().cloned());
        let mut answers = String::new();
        // Three ways each: nib's own cat, the system cat, python.
        let mut own = String::new();
        let mut system = String::new();
        let mut py = String::from(
            "import sys\nfor p in sys.argv[1:]:\n    try:\n        print(open(p).read())\n    except OSError as e:\n        print('refused', e.errno)\n",
        );
        py.push('\n');
        std::fs::write(root.join("try_read.py"), &py).unwrap();
        let mut args = String::new();
        for (p, _) in &all {
            own.push_str(&format!("cat '{}'; ", p.display()));
            system.push_str(&format!("/bin/cat '{}'; ", p.display()));
            args.push_str(&format!(" '{}'", p.display()));
        }
        answers.push_str(&sh(&nib, &own).await);
        answers.push_str(&sh(&nib, &system).await);
        answers.push_str(&sh(&nib, &format!("{python} try_read.py{args}")).await);
        // Through the planted symlink, every way.
        answers.push_str(
            &sh(
                &nib,
                "cat planted; /bin/cat planted; python3 -c 'print(open(\"planted\").read())'",
            )
            .await,
        );
        // Listing the home folder shows no other project.
        answers.push_str(&sh(&nib, "ls -a ~ 2>&1; ls ~/other-project 2>&1").await);
        // The environment: the secrets are withheld, the passed one is there.
        let env_out = sh(&nib, "env; echo \"[$GITHUB_TOKEN]\"").await;
        assert!(
            env_out.contains("PASSED_TOKEN=VISIBLE-passed"),
            "{mode:?}: {env_out}"
        );
        assert!(
            env_out.contains("$GITHUB_TOKEN is withheld from programs"),
            "{mode:?}: the call says it withheld a variable it expands: {env_out}"
        );
        answers.push_str(&env_out);
        // The sibling's environment.
        answers.push_str(
            &sh(
                &nib,
                &format!(
                    "cat /proc/{}/environ; /bin/cat /proc/{}/environ",
                    sibling.id(),
                    sibling.id()
                ),
            )
            .await,
        );
        // The unix socket in /run.
        let connect = sh(
            &nib,
            &format!("python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"CONNECTED\")'", sock.display()),
        )
        .await;
        assert!(!connect.contains("CONNECTED"), "{mode:?}: {connect}");
        assert!(
            listener.accept().is_err(),
            "{mode:?}: the listener saw a connection"
        );
        // Device nodes.
        let mk = sh(&nib, "mknod dev-null-copy c 1 3; python3 -c 'import os; os.mknod(\"dev-blk\", 0o60600, os.makedev(7, 0))'; ls -l").await;
        for name in ["dev-null-copy", "dev-blk"] {
            let made = std::fs::symlink_metadata(root.join(name))
                .is_ok_and(|m| m.file_type().is_char_device() || m.file_type().is_block_device());
            assert!(!made, "{mode:?}: {name} was made: {mk}");
        }
        // The host's /etc/shadow.
        answers.push_str(&sh(&nib, "cat /etc/shadow; /bin/cat /etc/shadow").await);
        let shadow_root = std::fs::read_to_string("/etc/shadow")
            .ok()
            .and_then(|s| s.lines().next().map(str::to_string));
        if let Some(line) = shadow_root.filter(|l| l.len() > 6) {
            assert!(!answers.contains(&line), "{mode:?}: /etc/shadow was read");
        }
        for (p, text) in &all {
            assert!(
                !answers.contains(text.as_str()),
                "{mode:?}: {} was read:\n{answers}",
                p.display()
            );
        }
        let secrets = SECRETS.iter().map(|(_, v)| *v);
        for secret in secrets.chain(["CANARY-sibling-environ"]) {
            assert!(
                !answers.contains(secret),
                "{mode:?}: {secret} reached a program"
            );
        }
        assert!(
            answers.contains("is hidden from programs (on the credential list)"),
            "{mode:?}: a hidden path is named: {answers}"
        );
        // The status names the read policy.
        let status = nib.ok("nibash_status", json!({})).await;
        assert!(
            status.contains("hidden, even inside those:"),
            "{mode:?}: {status}"
        );
        assert!(
            status.contains("withheld variables:") && status.contains("GITHUB_TOKEN"),
            "{mode:?}: {status}"
        );
        nib.stop().await;
        let _ = sibling.kill();
        let _ = sibling.wait();
        let _ = std::fs::remove_file(&sock);
        remove_outside(&outside);
    }
}

/// Writes a one-module wheel (no build backend needed, so no network).
const MKWHEEL: &str = r#"import base64, hashlib, zipfile
files = {
    "localpkg/__init__.py": b"VALUE = 'imported'\n",
    "localpkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: localpkg\nVersion: 0.1\n",
    "localpkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile("localpkg-0.1-py3-none-any.whl", "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("localpkg-0.1.dist-info/RECORD,,")
    z.writestr("localpkg-0.1.dist-info/RECORD", "\n".join(record) + "\n")
"#;

#[tokio::test]
async fn builds_and_tools_keep_working_in_both_sandbox_modes() {
    let cargo_home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap()));
    let rustup_home = std::env::var("RUSTUP_HOME")
        .unwrap_or_else(|_| format!("{}/.rustup", std::env::var("HOME").unwrap()));
    for mode in SANDBOX_MODES {
        let home = home();
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        // A crate with a path dependency.
        std::fs::create_dir_all(root.join("app/src")).unwrap();
        std::fs::create_dir_all(root.join("dep/src")).unwrap();
        std::fs::write(
            root.join("dep/Cargo.toml"),
            "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .unwrap();
        std::fs::write(
            root.join("dep/src/lib.rs"),
            "pub fn answer() -> u32 { 42 }\n",
        )
        .unwrap();
        std::fs::write(root.join("app/Cargo.toml"), "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ndep = { path = \"../dep\" }\n").unwrap();
        std::fs::write(
            root.join("app/src/main.rs"),
            "fn main() { println!(\"built {}\", dep::answer()); }\n",
        )
        .unwrap();
        // A local Python package, as a wheel (pip installs it offline).
        std::fs::write(root.join("mkwheel.py"), MKWHEEL).unwrap();
        let nib = serve_for(&home, &root, mode).await;
        // git in the root, with the user's ~/.gitconfig.
        let git = sh(
            &nib,
            "git init -q . && git add dep && git commit -qm first && git log --format=%an",
        )
        .await;
        assert!(git.contains("Reads Test"), "{mode:?}: {git}");
        let py = sh(&nib, "python3 -c 'print(6*7)'; node -e 'console.log(6*7)'").await;
        assert_eq!(py.matches("42").count(), 2, "{mode:?}: {py}");
        // cargo from the toolchain under $HOME (links to the machine's).
        let build = sh(
            &nib,
            "cd app && CARGO_TARGET_DIR=../target-home cargo run --offline -q",
        )
        .await;
        assert!(build.contains("built 42"), "{mode:?}: from $HOME: {build}");
        // cargo from a toolchain named by CARGO_HOME and RUSTUP_HOME.
        let named = sh(
            &nib,
            &format!("cd app && CARGO_HOME={cargo_home} RUSTUP_HOME={rustup_home} CARGO_TARGET_DIR=../target-named {cargo_home}/bin/cargo run --offline -q"),
        )
        .await;
        assert!(named.contains("built 42"), "{mode:?}: named: {named}");
        let pip = sh(
            &nib,
            "python3 mkwheel.py && python3 -m venv venv && venv/bin/pip install -q --no-index localpkg-0.1-py3-none-any.whl 2>&1 | tail -3; venv/bin/python -c 'import localpkg; print(localpkg.VALUE)'",
        )
        .await;
        assert!(pip.contains("imported"), "{mode:?}: {pip}");
        nib.stop().await;
    }
}

#[tokio::test]
async fn nibs_own_keys_never_reach_programs_unconfined() {
    let home = home();
    let project = project();
    let nib = serve_for(&home, project.path(), &[]).await;
    let out = sh(&nib, "env").await;
    assert!(
        !out.contains("CANARY-openrouter") && !out.contains("CANARY-decider"),
        "{out}"
    );
    // Unconfined stays as the original: the other variables are the user's.
    assert!(out.contains("ghp_CANARYTOKEN"), "{out}");
    nib.stop().await;
}

#[tokio::test]
async fn a_provider_reads_only_what_programs_may_in_both_sandbox_modes() {
    for (i, mode) in SANDBOX_MODES.iter().enumerate() {
        let home = home();
        let outside = outside_canaries(&format!("provider-{i}"));
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        nib_json_with(&root, &[("zemble", &[])]);
        std::fs::write(root.join("inside.txt"), "VISIBLE-inside\n").unwrap();
        let mut env = mode.to_vec();
        env.push(("NIB_PROVIDERS_SANDBOX", "1"));
        let nib = serve_for(&home, &root, &env).await;
        let mut answers = String::new();
        for (p, _) in home.canaries.iter().chain(&outside) {
            let path = p.display().to_string();
            answers.push_str(&nib.ok("zemble_read", json!({ "path": path })).await);
        }
        for (name, _) in SECRETS {
            answers.push_str(&nib.ok("zemble_env", json!({ "name": name })).await);
        }
        for (p, text) in home.canaries.iter().chain(&outside) {
            assert!(
                !answers.contains(text.as_str()),
                "{mode:?}: the provider read {}:\n{answers}",
                p.display()
            );
        }
        for (name, value) in SECRETS {
            assert!(
                !answers.contains(value),
                "{mode:?}: {name} reached the provider"
            );
        }
        // Controls: the root and the passed variable.
        let inside = root.join("inside.txt").display().to_string();
        let read = nib.ok("zemble_read", json!({ "path": inside })).await;
        assert!(read.contains("VISIBLE-inside"), "{mode:?}: {read}");
        let passed = nib
            .ok("zemble_env", json!({ "name": "PASSED_TOKEN" }))
            .await;
        assert!(passed.contains("VISIBLE-passed"), "{mode:?}: {passed}");
        nib.stop().await;
        remove_outside(&outside);
    }
}

/// A project's nib.json narrows the sandbox, never widens it: entries
/// that would show hidden or unlisted paths (as `NIB_SANDBOX_BIND` does
/// for the user) are no setting of the project's, and `sandbox.hide`
/// only hides — the canaries stay unread in both modes.
#[tokio::test]
async fn a_projects_nib_json_shows_nothing_the_sandbox_keeps_from_programs() {
    for mode in SANDBOX_MODES {
        let home = home();
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        let key = home.path.join(".ssh/id_secret");
        let other = home.path.join("other-project/secret.txt");
        let (k, o) = (key.display().to_string(), other.display().to_string());
        std::fs::write(
            root.join("nib.json"),
            json!({
                "sandbox": {
                    "bind": [&k, &o, "~/.ssh", "~"],
                    "allow": ["~/.ssh", "~/other-project"],
                    "readable": ["~"],
                    "hide": ["secret-in-root.txt"]
                }
            })
            .to_string(),
        )
        .unwrap();
        std::fs::write(
            root.join("secret-in-root.txt"),
            "CANARY-hidden-by-project\n",
        )
        .unwrap();
        let nib = serve_for(&home, &root, mode).await;
        let out = sh(
            &nib,
            &format!("cat '{k}' '{o}'; /bin/cat '{k}' '{o}'; /bin/cat secret-in-root.txt"),
        )
        .await;
        for canary in [canary_text(".ssh"), "CANARY-other-project".into()] {
            assert!(
                !out.contains(&canary),
                "{mode:?}: {canary} was read:\n{out}"
            );
        }
        if mode.len() == 1 && nib_sandbox::bwrap_usable() {
            // Bubblewrap holds a hidden path inside a root (a stand-in).
            assert!(
                !out.contains("CANARY-hidden-by-project"),
                "{mode:?}: the project's own hide did not hold:\n{out}"
            );
        }
        nib.stop().await;
    }
}

/// Issue 58, findings 4 and 5: credential files where a toolchain
/// variable, a variable that moves them, or `PATH` puts them stay unread
/// by nib's own `cat` and the system's — `CARGO_HOME`, `GRADLE_USER_HOME`
/// and a `bin` folder's parent outside `$HOME` (readable whole), `M2_HOME`
/// and the moved credential files inside `/opt` (readable as a system
/// folder), sbt's and Ivy's under `$HOME`; the other files of those
/// folders stay readable.
#[tokio::test]
async fn credential_files_where_variables_put_them_stay_unread_in_both_sandbox_modes() {
    for (i, mode) in SANDBOX_MODES.iter().enumerate() {
        let home = home();
        let project = project();
        let root = std::fs::canonicalize(project.path()).unwrap();
        let pid = std::process::id();
        let srv = PathBuf::from(format!("/srv/nib-reads-vars-{pid}-{i}"));
        let opt = PathBuf::from(format!("/opt/nib-reads-vars-{pid}-{i}"));
        let canaries: Vec<(PathBuf, &str)> = vec![
            (srv.join("cargo/credentials.toml"), "CANARY-VAR-CARGO-TOML"),
            (srv.join("cargo/credentials"), "CANARY-VAR-CARGO"),
            (srv.join("gradle/gradle.properties"), "CANARY-VAR-GRADLE"),
            (srv.join("tool/credentials.toml"), "CANARY-VAR-PATH-ROOT"),
            // A toolchain reached through a link, into a system folder.
            (opt.join("realtool/credentials.toml"), "CANARY-VAR-LINKED"),
            (opt.join("maven/conf/settings.xml"), "CANARY-VAR-M2"),
            (opt.join("docker/config.json"), "CANARY-VAR-DOCKER"),
            (opt.join("kube/config"), "CANARY-VAR-KUBE"),
            (opt.join("aws/credentials"), "CANARY-VAR-AWS"),
            (opt.join("gh/hosts.yml"), "CANARY-VAR-GH"),
            (opt.join("config/gh/hosts.yml"), "CANARY-VAR-XDG-GH"),
            (
                opt.join("config/gcloud/credentials.db"),
                "CANARY-VAR-XDG-GCLOUD",
            ),
            (home.path.join(".sbt/.credentials"), "CANARY-HOME-SBT"),
            (home.path.join(".ivy2/.credentials"), "CANARY-HOME-IVY"),
        ];
        for (p, text) in &canaries {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{text}\n")).unwrap();
        }
        let controls = [
            (
                srv.join("cargo/registry/readme.txt"),
                "VISIBLE-cargo-registry",
            ),
            (
                srv.join("gradle/caches/readme.txt"),
                "VISIBLE-gradle-caches",
            ),
            (srv.join("tool/bin/readme.txt"), "VISIBLE-tool-bin"),
            (opt.join("maven/lib/readme.txt"), "VISIBLE-maven-lib"),
            // A project's own settings, with the project's bin on PATH.
            (root.join("gradle.properties"), "VISIBLE-project-gradle"),
            (root.join("bin/readme.txt"), "VISIBLE-project-bin"),
        ];
        for (p, text) in &controls {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{text}\n")).unwrap();
        }
        std::fs::create_dir_all(opt.join("realtool/bin")).unwrap();
        std::os::unix::fs::symlink(opt.join("realtool"), srv.join("linked")).unwrap();
        let through_link = srv.join("linked/credentials.toml");
        let s = |p: PathBuf| p.display().to_string();
        let path_var = format!(
            "{}:{}:{}:{}/.cargo/bin:{}",
            s(srv.join("tool/bin")),
            s(srv.join("linked/bin")),
            s(root.join("bin")),
            home.path.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let vars = [
            ("CARGO_HOME", s(srv.join("cargo"))),
            ("GRADLE_USER_HOME", s(srv.join("gradle"))),
            ("M2_HOME", s(opt.join("maven"))),
            ("DOCKER_CONFIG", s(opt.join("docker"))),
            ("KUBECONFIG", s(opt.join("kube/config"))),
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                s(opt.join("aws/credentials")),
            ),
            ("GH_CONFIG_DIR", s(opt.join("gh"))),
            ("XDG_CONFIG_HOME", s(opt.join("config"))),
            ("PATH", path_var),
        ];
        let mut env: Vec<(&str, &str)> = mode.to_vec();
        env.extend(vars.iter().map(|(k, v)| (*k, v.as_str())));
        let nib = serve_for(&home, &root, &env).await;
        let mut own = String::new();
        let mut system = String::new();
        for (p, _) in canaries
            .iter()
            .map(|(p, t)| (p, *t))
            .chain([(&through_link, "")])
            .chain(controls.iter().map(|(p, t)| (p, *t)))
        {
            own.push_str(&format!("cat '{}'; ", p.display()));
            system.push_str(&format!("/bin/cat '{}'; ", p.display()));
        }
        let mut answers = sh(&nib, &own).await;
        answers.push_str(&sh(&nib, &system).await);
        for (p, text) in &canaries {
            assert!(
                !answers.contains(text),
                "{mode:?}: {} was read:\n{answers}",
                p.display()
            );
        }
        for (p, text) in &controls {
            assert_eq!(
                answers.matches(text).count(),
                2,
                "{mode:?}: {} is readable both ways:\n{answers}",
                p.display()
            );
        }
        nib.stop().await;
        let _ = std::fs::remove_dir_all(&srv);
        let _ = std::fs::remove_dir_all(&opt);
    }
}
