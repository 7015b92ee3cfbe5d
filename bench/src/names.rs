//! Names (`--only names`): what folder names save on a JVM project, and what they cost.

use super::*;

/// Named directories: the characters an agent gets, and the time, for the
/// same calls in a generated JVM project with names (the JVM source roots',
/// then automatic ones) and without (`"autoDirectories": false` and
/// `NIB_AUTO_NAMES=0` for the plain copy).
pub(crate) fn names_scenarios(
    nib: &Path,
    scratch: &Path,
    n: usize,
    jvm: Option<&(PathBuf, String)>,
) -> Result<()> {
    let named_dir = scratch.join("jvm-named");
    let plain_dir = scratch.join("jvm-plain");
    if let Some((repo, _)) = jvm {
        for d in [&named_dir, &plain_dir] {
            let cloned = Command::new("git")
                .args(["clone", "-q"])
                .arg(repo)
                .arg(d)
                .status()
                .map_err(|e| format!("git clone: {e}"))?;
            if !cloned.success() {
                return Err(format!("git clone {} failed", repo.display()));
            }
        }
    }
    for d in [&named_dir, &plain_dir] {
        if jvm.is_some() {
            break;
        }
        generate_jvm(d)?;
        let git = |args: &[&str]| {
            Command::new("git")
                .args(args)
                .current_dir(d)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
        };
        if git(&["init", "-q"]).is_ok() {
            let _ = git(&["add", "-A"]);
            let _ = git(&[
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@example.org",
                "commit",
                "-qm",
                "start",
            ]);
        }
    }
    // Without names: nib.json turns the JVM roots' names off (and git
    // leaves the file out of `git status`, so both answers list the same).
    write(
        &plain_dir.join("nib.json"),
        "{\"autoDirectories\": false}\n",
    )?;
    let exclude = plain_dir.join(".git/info/exclude");
    let mut excluded = std::fs::read_to_string(&exclude).unwrap_or_default();
    excluded.push_str("\nnib.json\n");
    write(&exclude, &excluded)?;
    let long = walk(&named_dir.join("src/main/java"), 20_000)
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .ok_or("no Java file under src/main/java")?;
    let rel = long
        .strip_prefix(&named_dir)
        .map_err(|e| e.to_string())?
        .to_string_lossy()
        .into_owned();
    // A few changes for git status: edited and new files in deep packages.
    for d in [&named_dir, &plain_dir] {
        for (i, f) in walk(&d.join("src/main/java"), 20_000).iter().enumerate() {
            if i % 9 == 0 {
                // Appended as bytes: a real repository's sources need not be UTF-8.
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(f)
                    .and_then(|mut file| file.write_all(b"// edited\n"))
                    .map_err(|e| format!("{}: {e}", f.display()))?;
            }
        }
        let beside = d.join(&rel);
        let folder = beside.parent().ok_or("the long class has no folder")?;
        write(&folder.join("NewStep.java"), "class NewStep {}\n")?;
    }
    let state = scratch.join("names-state");
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let mut named = Server::spawn_with(nib, &named_dir, &state, &[])?;
    named.initialize()?;
    let mut plain = Server::spawn_with(nib, &plain_dir, &state, &[("NIB_AUTO_NAMES", "0")])?;
    plain.initialize()?;
    let pattern = jvm.map_or("checkpoint", |(_, p)| p.as_str());
    let calls: Vec<(&str, &str, Value)> = vec![
        (
            "read of a long class (outline)",
            "read",
            json!({"paths": [rel]}),
        ),
        (
            "grep of a literal (about 20 files)",
            "grep",
            json!({"pattern": pattern, "literal": true, "paths": ["src"]}),
        ),
        ("find src", "find", json!({"paths": ["src"], "skip": 0})),
        (
            "nibash git status",
            "nibash",
            json!({"command": "git status"}),
        ),
    ];
    let (mut all_named, mut all_plain) = (0usize, 0usize);
    for (what, tool, args) in calls {
        let mut plain_chars = 0;
        let mut plain_times = Vec::new();
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| named.call(tool, args.clone()))?;
            let (pd, ptext) = time(|| plain.call(tool, args.clone()))?;
            plain_times.push(pd);
            plain_chars = ptext.chars().count();
            // NIB_BENCH_SHOW=DIR keeps both answers, to see what names save.
            if let Some(dir) = std::env::var_os("NIB_BENCH_SHOW") {
                let dir = PathBuf::from(dir);
                let _ = std::fs::create_dir_all(&dir);
                let _ = std::fs::write(dir.join(format!("{tool}.named")), &text);
                let _ = std::fs::write(dir.join(format!("{tool}.plain")), &ptext);
            }
            Ok((d, text.chars().count()))
        };
        let (s, c, _) = interleave(n, Some(&mut f), &mut [])?;
        let named_chars = c.unwrap_or(0);
        all_named += named_chars;
        all_plain += plain_chars;
        Row {
            scenario: format!("names: {what} (JVM project)"),
            nib: s,
            chars: c,
            baselines: vec![(
                format!("without names ({plain_chars} chars)"),
                stat(plain_times),
            )],
        }
        .print();
    }
    println!(
        "  names: {all_named} characters against {all_plain} without ({:.0}% fewer)",
        100.0 * (1.0 - all_named as f64 / all_plain.max(1) as f64)
    );
    Ok(())
}
