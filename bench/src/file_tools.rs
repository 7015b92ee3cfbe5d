//! The file tools end to end (in the full run): a cold start, reads,
//! edits, the language scenarios (outline, declaration reads), grep and
//! find over the tree, and the hook, each against the programs an agent
//! would otherwise run.

use super::*;

/// The file tools' rows, against the main server it starts in `work` (and
/// returns, for the scenarios after it), with the peak memory it reached
/// in KiB.
pub(crate) fn file_tool_scenarios(
    nib: &Path,
    work: &Path,
    state: &Path,
    tree: &Path,
    n: usize,
    quick: bool,
) -> Result<(Server, u64)> {
    let mut peak_kib = 0u64;
    // Cold start to the first tools/list answer.
    {
        let mut nib_cold = || -> Result<(Duration, usize)> {
            let t = Instant::now();
            let mut s = Server::spawn(nib, work, state)?;
            s.initialize()?;
            let list = s.request("tools/list", json!({}))?;
            Ok((t.elapsed(), list.to_string().len()))
        };
        let mut bases: Baselines<'_> = vec![(
            "spawn true".into(),
            Box::new(|| run_program(work, &["true"])),
        )];
        let (s, c, b) = interleave(n.min(30), Some(&mut nib_cold), &mut bases)?;
        Row {
            scenario: "cold start → tools/list".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    let mut server = Server::spawn(nib, work, state)?;
    server.initialize()?;
    let _ = MAIN_SERVER.set(server.child.id());

    // read a 300-line file.
    {
        let srv = &mut server;
        let mut f = || -> Result<(Duration, usize)> {
            // A range, so the whole file prints (without one, code over 200 lines is outlined).
            let (d, text) =
                time(|| srv.call("read", json!({"paths": ["f300.ts:1-300"], "full": true})))?;
            Ok((d, text.chars().count()))
        };
        let mut bases: Baselines<'_> = vec![(
            "cat".into(),
            Box::new(|| run_program(work, &["cat", "f300.ts"])),
        )];
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: "read 300-line file".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // read lines 100-150 of a 5,000-line file.
    {
        let srv = &mut server;
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) =
                time(|| srv.call("read", json!({"paths": ["f5000.rs:100-150"], "full": true})))?;
            Ok((d, text.chars().count()))
        };
        let mut bases: Baselines<'_> = vec![(
            "sed -n".into(),
            Box::new(|| run_program(work, &["sed", "-n", "100,150p", "f5000.rs"])),
        )];
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: "read lines 100–150 of 5,000".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // A single-line edit (read, then edit), and the edit alone.
    {
        let srv = &mut server;
        let mut flip = false;
        let mut f = || -> Result<(Duration, usize)> {
            flip = !flip;
            let t = Instant::now();
            let read = srv.call("read", json!({"paths": ["f300.ts:10-12"]}))?;
            let tag = tag_of(&read)?;
            let row = if flip {
                "    // edited by the benchmark"
            } else {
                "    // edited again"
            };
            let out = srv.call(
                "edit",
                json!({"input": format!("[f300.ts#{tag}]\nPUT 11:\n+{row}\n")}),
            )?;
            Ok((t.elapsed(), out.chars().count()))
        };
        let mut bases: Baselines<'_> = vec![(
            "sed -i".into(),
            Box::new(|| run_program(work, &["sed", "-i", "11s/edited/edited/", "f300.ts"])),
        )];
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: "read + single-line edit".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }
    {
        let srv = &mut server;
        let read = srv.call("read", json!({"paths": ["f300.ts:1-300"], "full": true}))?;
        let mut tag = tag_of(&read)?;
        let mut k = 0u64;
        let mut f = || -> Result<(Duration, usize)> {
            k += 1;
            let (d, out) = time(|| {
                srv.call(
                    "edit",
                    json!({"input": format!("[f300.ts#{tag}]\nPUT 20:\n+    // edit {k}\n")}),
                )
            })?;
            tag = tag_of(&out)?;
            Ok((d, out.chars().count()))
        };
        let (s, c, b) = interleave(n, Some(&mut f), &mut [])?;
        Row {
            scenario: "edit alone (tag from the last answer)".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // Five sequential edits to one file.
    {
        let srv = &mut server;
        let mut round = 0u64;
        let mut f = || -> Result<(Duration, usize)> {
            round += 1;
            let t = Instant::now();
            let read = srv.call("read", json!({"paths": ["f5000.rs:1-60"]}))?;
            let mut tag = tag_of(&read)?;
            let mut chars = 0;
            for line in [5usize, 15, 25, 35, 45] {
                let out = srv.call(
                    "edit",
                    json!({"input": format!("[f5000.rs#{tag}]\nPUT {line}:\n+    // round {round} line {line}\n")}),
                )?;
                tag = tag_of(&out)?;
                chars += out.chars().count();
            }
            Ok((t.elapsed(), chars))
        };
        let mut bases: Baselines<'_> = vec![(
            "5 × sed -i".into(),
            Box::new(|| {
                let mut total = Duration::ZERO;
                for line in [5, 15, 25, 35, 45] {
                    total += run_program(
                        work,
                        &["sed", "-i", &format!("{line}s/round/round/"), "f5000.rs"],
                    )?;
                }
                Ok(total)
            }),
        )];
        let (s, c, b) = interleave(n.min(30), Some(&mut f), &mut bases)?;
        Row {
            scenario: "read + 5 sequential edits".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // Languages: the outline of a 5,000-line file, and a declaration read,
    // cold (first parse) and warm (cached tree), against a line-range read.
    {
        let srv = &mut server;
        // A fresh copy for the cold parse, so no cached tree helps it.
        let mut k = 0u32;
        let mut cold = || -> Result<(Duration, usize)> {
            k += 1;
            let name = format!("cold{k}.rs");
            let body = std::fs::read(work.join("f5000.rs")).map_err(|e| e.to_string())?;
            let mut body = body;
            body.extend_from_slice(format!("\n// copy {k}\n").as_bytes());
            std::fs::write(work.join(&name), body).map_err(|e| e.to_string())?;
            let (d, text) = time(|| {
                srv.call(
                    "read",
                    json!({"paths": [format!("{name}:{LANG_DECL}")], "full": true}),
                )
            })?;
            Ok((d, text.chars().count()))
        };
        let (s, c, b) = interleave(n.min(20), Some(&mut cold), &mut [])?;
        Row {
            scenario: "declaration read, cold (first parse of 5,000 lines)".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
        let mut warm = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| {
                srv.call(
                    "read",
                    json!({"paths": [format!("f5000.rs:{LANG_DECL}")], "full": true}),
                )
            })?;
            Ok((d, text.chars().count()))
        };
        let warm_stat = interleave(n, Some(&mut warm), &mut [])?;
        let srv2 = &mut server;
        let mut range = || -> Result<(Duration, usize)> {
            let (d, text) =
                time(|| srv2.call("read", json!({"paths": ["f5000.rs:100-112"], "full": true})))?;
            Ok((d, text.chars().count()))
        };
        let range_stat = interleave(n, Some(&mut range), &mut [])?;
        let ratio = match (&warm_stat.0, &range_stat.0) {
            (Some(w), Some(r)) => {
                format!("{:.2}x", w.median.as_secs_f64() / r.median.as_secs_f64())
            }
            _ => "–".into(),
        };
        if let (Some(w), Some(r)) = (&warm_stat.0, &range_stat.0) {
            println!(
                "| declaration read, warm (cached tree) | {} ({}–{}) | {} | line-range read {} ({}–{}) | {ratio} |",
                ms(w.median),
                ms(w.p10),
                ms(w.p90),
                warm_stat.1.unwrap_or(0),
                ms(r.median),
                ms(r.p10),
                ms(r.p90)
            );
        }
        let srv = &mut server;
        let mut outline = || -> Result<(Duration, usize)> {
            let (d, text) =
                time(|| srv.call("read", json!({"paths": ["f5000.rs"], "full": true})))?;
            Ok((d, text.chars().count()))
        };
        let (s, c, b) = interleave(n, Some(&mut outline), &mut [])?;
        Row {
            scenario: "outline of a 5,000-line file".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // The large tree: nib's grep and find come with their issue; the baselines run now.
    {
        let tree_files: Vec<PathBuf> = walk(tree, 200);
        let srv = &mut server;
        let mut i = 0;
        let files = &tree_files;
        let mut f = || -> Result<(Duration, usize)> {
            let p = files
                .get(i % files.len().max(1))
                .ok_or("the tree has no files")?;
            i += 1;
            let (d, text) = time(|| srv.call("read", json!({"paths": [p.display().to_string()]})))?;
            Ok((d, text.chars().count()))
        };
        let mut j = 0;
        let mut bases: Baselines<'_> = vec![(
            "cat".into(),
            Box::new(|| {
                let p = files
                    .get(j % files.len().max(1))
                    .ok_or("the tree has no files")?;
                j += 1;
                run_program(work, &["cat", &p.display().to_string()])
            }),
        )];
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: "read tree files, one per call".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();

        let t = tree.display().to_string();
        let reps = if quick { 5 } else { 15 };
        let literal =
            json!({"pattern": "TODO check session", "literal": true, "paths": [t.clone()]});
        let regex =
            json!({"pattern": "fn [a-z]+token\\(", "before": 1, "after": 1, "paths": [t.clone()]});
        for (scenario, args, base) in [
            (
                "grep literal across the tree",
                literal,
                vec![
                    ("grep -rn", vec!["grep", "-rn", "TODO check session"]),
                    ("rg", vec!["rg", "-n", "TODO check session"]),
                ],
            ),
            (
                "grep regex with context across the tree",
                regex,
                vec![
                    (
                        "grep -rnE -C1",
                        vec!["grep", "-rnE", "-C1", "fn [a-z]+token\\("],
                    ),
                    ("rg -C1", vec!["rg", "-n", "-C1", "fn [a-z]+token\\("]),
                ],
            ),
        ] {
            let srv = &mut server;
            let mut f = || -> Result<(Duration, usize)> {
                let (d, text) = time(|| srv.call("grep", args.clone()))?;
                Ok((d, text.chars().count()))
            };
            let mut bases: Baselines<'_> = Vec::new();
            for (name, argv) in base {
                if have(argv[0]) {
                    let work = &work;
                    let t = &t;
                    bases.push((
                        name.to_string(),
                        Box::new(move || {
                            let mut full = argv.clone();
                            full.push(t.as_str());
                            run_program(work, &full)
                        }),
                    ));
                }
            }
            let (s, c, b) = interleave(reps, Some(&mut f), &mut bases)?;
            Row {
                scenario: scenario.into(),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
            peak_kib = peak_kib.max(server.peak_kib().unwrap_or(0));
        }
        let srv = &mut server;
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| srv.call("find", json!({"paths": [t.clone()]})))?;
            Ok((d, text.chars().count()))
        };
        let mut finds: Baselines<'_> = vec![(
            "find".into(),
            Box::new(|| run_program(work, &["find", &t, "-type", "f"])),
        )];
        let (s, c, b) = interleave(reps, Some(&mut f), &mut finds)?;
        Row {
            scenario: "find over the tree".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }
    // The hook runs on every tool call of Claude Code: one invocation, end to end.
    {
        let event = json!({"hook_event_name": "PreToolUse", "session_id": "bench", "tool_name": "mcp__nib__read",
                           "tool_use_id": "toolu_bench", "tool_input": {}})
        .to_string();
        let mut f = || -> Result<(Duration, usize)> {
            let t = Instant::now();
            let mut child = Command::new(nib)
                .arg("hook")
                .env("NIB_STATE_DIR", state)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin
                    .write_all(event.as_bytes())
                    .map_err(|e| e.to_string())?;
            }
            let status = child.wait().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err("nib hook failed".into());
            }
            Ok((t.elapsed(), 0))
        };
        let mut bases: Baselines<'_> = vec![(
            "spawn true".into(),
            Box::new(|| run_program(work, &["true"])),
        )];
        let (s, _, b) = interleave(n.min(40), Some(&mut f), &mut bases)?;
        Row {
            scenario: "nib hook (PreToolUse of a nib tool)".into(),
            nib: s,
            chars: None,
            baselines: b,
        }
        .print();
    }
    Ok((server, peak_kib))
}
