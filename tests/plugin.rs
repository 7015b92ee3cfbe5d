//! The Claude Code plugin's launcher (`claude/bin/nib`) starts only a nib a
//! program run from the project cannot have planted (issue 57, items 8 and 9):
//! a `nib` in a relative PATH entry, in a folder inside the working folder or
//! the project, reached through a link into them, or in a folder others may
//! write never runs; with no trusted nib and no sums of a release it runs
//! nothing and says how to install nib. Each planted `nib` writes a marker.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::nib_bin;

fn launcher() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("claude/bin/nib")
}

/// A `nib` that leaves `marker` when run.
fn plant(dir: &Path, marker: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let nib = dir.join("nib");
    std::fs::write(
        &nib,
        format!(
            "#!/bin/sh\necho planted > '{}'\necho planted\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&nib, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn run(cwd: &Path, path: &str, home: &Path, project_dir: Option<&Path>) -> Output {
    let mut c = Command::new(launcher());
    c.arg("--version")
        .current_dir(cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home);
    if let Some(p) = project_dir {
        c.env("CLAUDE_PROJECT_DIR", p);
    }
    c.output().unwrap()
}

#[test]
fn the_plugin_never_runs_a_nib_the_project_could_have_planted() {
    let project = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let home = outside.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let marker = outside.path().join("planted-ran");
    let p = project.path();
    plant(&p.join("bin"), &marker);
    plant(&p.join("node_modules/.bin"), &marker);
    // A trusted folder outside the project holding the real nib.
    let trusted = outside.path().join("trusted");
    std::fs::create_dir_all(&trusted).unwrap();
    symlink(nib_bin(), trusted.join("nib")).unwrap();
    // A folder outside the project whose `nib` is a link into the project.
    let linked = outside.path().join("linked");
    std::fs::create_dir_all(&linked).unwrap();
    symlink(p.join("bin/nib"), linked.join("nib")).unwrap();
    // A world-writable folder outside the project with a planted nib.
    let open = outside.path().join("open");
    plant(&open, &marker);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let system = "/usr/bin:/bin";

    // Relative entries, the project's folders (absolute), a link into the
    // project and a world-writable folder come first; the trusted nib runs.
    let path = format!(
        "bin:node_modules/.bin:.::{}/bin:{}/node_modules/.bin:{}:{}:{}:{system}",
        p.display(),
        p.display(),
        linked.display(),
        open.display(),
        trusted.display()
    );
    let out = run(p, &path, &home, None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(env!("CARGO_PKG_VERSION")),
        "the trusted nib should have answered: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!marker.exists(), "a planted nib ran");

    // Started from elsewhere, the project Claude Code names still counts.
    let elsewhere = outside.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let path = format!("{}/bin:{}:{system}", p.display(), trusted.display());
    let out = run(&elsewhere, &path, &home, Some(p));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!marker.exists(), "a nib in CLAUDE_PROJECT_DIR ran");

    // The control: the same planted nib outside every untrusted folder runs,
    // so the checks above are what kept it out.
    let plain = outside.path().join("plain");
    plant(&plain, &marker);
    let out = run(
        &elsewhere,
        &format!("{}:{system}", plain.display()),
        &home,
        None,
    );
    assert!(out.status.success());
    assert!(marker.exists(), "the control's nib should have run");
    std::fs::remove_file(&marker).unwrap();

    // No trusted nib and no sums of a release: nothing runs, nothing is
    // fetched, and the message says how to install nib.
    let path = format!("bin:{}/bin:{}:{system}", p.display(), open.display());
    let out = run(p, &path, &home, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    assert!(
        stderr.contains("carries no checksums") && stderr.contains("cargo install"),
        "{stderr}"
    );
    assert!(!marker.exists(), "a planted nib ran");
    assert!(!home.join(".cache/nib").exists(), "something was fetched");
}
