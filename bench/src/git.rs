//! git and find through nibash: reshaped output against the programs' own.

use super::*;

/// nibash's git and find against the programs' own output (characters as
/// plain bash prints them; time against the same command piped through
/// `cat`, which nib leaves as the program printed it), in a clone of this
/// repository with a 10-file change in the work tree.
pub(crate) fn git_scenarios(nib: &Path, scratch: &Path, n: usize) -> Result<()> {
    let top = Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let Some(top) = top else {
        println!("  git: not run from a git repository; skipped");
        return Ok(());
    };
    let repo = scratch.join("git-clone");
    let cloned = Command::new("git")
        .args(["clone", "-q"])
        .arg(&top)
        .arg(&repo)
        .status()
        .map_err(|e| e.to_string())?;
    if !cloned.success() {
        return Err("git clone of this repository failed".into());
    }
    let files = Command::new("git")
        .args(["ls-files", "*.rs"])
        .current_dir(&repo)
        .output()
        .map_err(|e| e.to_string())?;
    let listed = String::from_utf8_lossy(&files.stdout).into_owned();
    // A commit of 10 changed files (for `git show HEAD`), then 10 other
    // files changed in the work tree (for status and diff).
    let change = |skip: usize| -> Result<()> {
        for (i, f) in listed.lines().skip(skip).step_by(7).take(10).enumerate() {
            let path = repo.join(f);
            let mut text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
            text = text.replacen("\n", &format!("\n// bench change {i}\n"), 3);
            write(&path, &text)?;
        }
        Ok(())
    };
    change(0)?;
    let committed = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.org",
        ])
        .args(["commit", "-qam", "bench: a 10-file change"])
        .current_dir(&repo)
        .status()
        .map_err(|e| e.to_string())?;
    if !committed.success() {
        return Err("git commit in the bench clone failed".into());
    }
    change(3)?;
    write(&repo.join("notes/new-a.md"), "a\n")?;
    write(&repo.join("notes/new-b.md"), "b\n")?;
    let state = scratch.join("git-state");
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let mut server = Server::spawn_with(nib, &repo, &state, &[])?;
    server.initialize()?;
    let (mut all_nib, mut all_raw) = (0usize, 0usize);
    for command in [
        "git status",
        "git diff",
        "git log -10",
        "git show HEAD",
        "git diff --stat",
        "find .",
    ] {
        // What the program prints, as plain bash would hand it over.
        let raw = Command::new("bash")
            .args(["-c", &format!("{command} 2>&1")])
            .current_dir(&repo)
            .output()
            .map_err(|e| e.to_string())?;
        let raw_chars = String::from_utf8_lossy(&raw.stdout).chars().count();
        let mut raw_times = Vec::new();
        let srv = &mut server;
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| srv.call("nibash", json!({ "command": command })))?;
            let piped = format!("{command} | cat");
            let (rd, _) = time(|| srv.call("nibash", json!({ "command": piped })))?;
            raw_times.push(rd);
            Ok((d, text.chars().count()))
        };
        let (s, c, _) = interleave(n, Some(&mut f), &mut [])?;
        all_nib += c.unwrap_or(0);
        all_raw += raw_chars;
        Row {
            scenario: format!("nibash `{command}` (this repository, 10 files changed)"),
            nib: s,
            chars: c,
            baselines: vec![(
                format!("its own output ({raw_chars} chars), time of `| cat`"),
                stat(raw_times),
            )],
        }
        .print();
    }
    println!(
        "  git and find: {all_nib} characters against the programs' own {all_raw} ({:.0}% of them)",
        100.0 * all_nib as f64 / all_raw.max(1) as f64
    );
    Ok(())
}
