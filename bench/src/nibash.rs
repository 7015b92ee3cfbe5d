//! nibash end to end (in the full run): a call of `true` and of `cat` in
//! each mode 30 ms after the last, the exec-time rules' cost per exec, and
//! a call in a project the size of the tree, each against bash.

use super::*;

/// The nibash rows; `server` is the main server (no sandbox). Returns the
/// highest peak memory of the sandboxed servers, in KiB.
pub(crate) fn nibash_scenarios(
    nib: &Path,
    work: &Path,
    state: &Path,
    scratch: &Path,
    tree: &Path,
    server: &mut Server,
    n: usize,
) -> Result<u64> {
    let mut peak_kib = 0u64;
    // nibash end to end: a call of `true` and of `cat` on a 300-line file,
    // without and with the sandbox, against bash running the same line.
    let modes: [(&str, &[(&str, &str)]); 3] = [
        ("no sandbox", &[]),
        ("NIB_SANDBOX=1", &[("NIB_SANDBOX", "1")]),
        (
            "NIB_SANDBOX=1 NIB_SANDBOX_BWRAP=0 (Landlock + seccomp)",
            &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
        ),
    ];
    for (mode, env) in modes {
        let mut sandboxed;
        let srv: &mut Server = if env.is_empty() {
            &mut *server
        } else {
            sandboxed = Server::spawn_with(nib, work, state, env)?;
            sandboxed.initialize()?;
            &mut sandboxed
        };
        for (what, line) in [("`true`", "true"), ("`cat` of 300 lines", "cat f300.ts")] {
            let mut f = || -> Result<(Duration, usize)> {
                // An agent thinks between calls: the next worker is ready by
                // then (a 30 ms pause, not timed; back to back a call may
                // find the next worker still starting).
                std::thread::sleep(Duration::from_millis(30));
                let (d, text) = time(|| srv.call("nibash", json!({"command": line})))?;
                Ok((d, text.chars().count()))
            };
            let mut bases: Baselines<'_> = vec![(
                format!("bash -c '{line}'"),
                Box::new(|| run_program(work, &["bash", "-c", line])),
            )];
            let (s, c, b) = interleave(n.min(40), Some(&mut f), &mut bases)?;
            Row {
                scenario: format!("nibash {what} (30 ms after the last call), {mode}"),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
        if !env.is_empty() {
            peak_kib = peak_kib.max(srv.peak_kib().unwrap_or(0));
        }
    }
    // The exec-time layer: a call that runs 100 programs, in a project with
    // a program rule (every exec goes to the broker's supervisor) and in one
    // without (no filter at all), each mode side by side.
    for confined in [false, true] {
        const EXECS: u32 = 100;
        // Both without warm workers (a call with rules never gets one), so
        // the difference is the exec check alone.
        let env: &[(&str, &str)] = if confined {
            &[("NIB_SANDBOX", "1"), ("NIB_WARM", "0")]
        } else {
            &[("NIB_WARM", "0")]
        };
        let mode = if confined {
            "NIB_SANDBOX=1"
        } else {
            "no sandbox"
        };
        let plain_dir = scratch.join(format!("execs-plain-{confined}"));
        let ruled_dir = scratch.join(format!("execs-ruled-{confined}"));
        for d in [&plain_dir, &ruled_dir] {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        }
        std::fs::write(
            ruled_dir.join("nib.json"),
            r#"{"rules": [{"program": "nib-bench-forbidden", "why": "a rule for the benchmark"}]}"#,
        )
        .map_err(|e| e.to_string())?;
        let mut plain = Server::spawn_with(nib, &plain_dir, state, env)?;
        plain.initialize()?;
        let mut ruled = Server::spawn_with(nib, &ruled_dir, state, env)?;
        ruled.initialize()?;
        let line = format!("for i in $(seq {EXECS}); do /bin/true; done");
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| ruled.call("nibash", json!({"command": line})))?;
            if text.contains("refused") {
                return Err(format!("the benchmark's execs were refused: {text}"));
            }
            Ok((d, text.chars().count()))
        };
        let plain_line = line.clone();
        let bash_dir = plain_dir.clone();
        let bash_line = line.clone();
        let mut bases: Baselines<'_> = vec![
            (
                "same call, no rules".into(),
                Box::new(move || {
                    time(|| plain.call("nibash", json!({"command": plain_line}))).map(|(d, _)| d)
                }),
            ),
            (
                format!("bash -c '{line}'"),
                Box::new(move || run_program(&bash_dir, &["bash", "-c", &bash_line])),
            ),
        ];
        let (s, c, b) = interleave(n.min(30), Some(&mut f), &mut bases)?;
        if let (Some(with), Some((_, without))) = (&s, b.first()) {
            let per = with.median.saturating_sub(without.median) / EXECS;
            println!(
                "  exec-time rules cost per exec ({mode}): {:.3} ms (median of the call with rules minus without, / {EXECS})",
                per.as_secs_f64() * 1000.0
            );
        }
        Row {
            scenario: format!("nibash {EXECS} execs of /bin/true with a program rule, {mode}"),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }
    // After each call nibash walks the roots for changed files: its cost in
    // a project the size of the tree.
    {
        let mut in_tree = Server::spawn(nib, tree, state)?;
        in_tree.initialize()?;
        let srv = &mut in_tree;
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| srv.call("nibash", json!({"command": "true"})))?;
            Ok((d, text.chars().count()))
        };
        let tree_dir = tree.to_path_buf();
        let mut bases: Baselines<'_> = vec![(
            "bash -c 'true'".into(),
            Box::new(move || run_program(&tree_dir, &["bash", "-c", "true"])),
        )];
        let (s, c, b) = interleave(n.min(40), Some(&mut f), &mut bases)?;
        Row {
            scenario: format!(
                "nibash `true` in the tree ({} files), no sandbox",
                count_files(tree)
            ),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }
    Ok(peak_kib)
}
