//! Speed (`--only speed`): an edit against plain writes and the reference filesystem server, and nibash calls back to back, at once and first in a session.

use super::*;

/// Writes `bytes` to `path` as a careful editor does: a temp file beside
/// it, fsynced, renamed over it, the folder fsynced (the durability nib's
/// own writes have).
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<Duration> {
    let t = Instant::now();
    let tmp = path.with_extension("bench-tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
    f.write_all(bytes).map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| e.to_string())?;
    }
    Ok(t.elapsed())
}

/// The edit call against a plain atomic write of the same bytes; and, in
/// each sandbox mode, nibash `true` back to back, a burst of four calls
/// sent at once (as a client sends a turn's parallel calls) against one
/// call, and the first call of a session (300 ms after `initialize`)
/// against a warm one — each against its baseline in the same run.
pub(crate) fn speed_scenarios(nib: &Path, work: &Path, state: &Path, n: usize) -> Result<()> {
    let dir = work.join("speed");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let body = std::fs::read_to_string(work.join("f300.ts")).map_err(|e| e.to_string())?;
    write(&dir.join("f300.ts"), &body)?;
    write(&dir.join("plain.ts"), &body)?;
    {
        let mut srv = Server::spawn(nib, &dir, state)?;
        srv.initialize()?;
        let read = srv.call("read", json!({"paths": ["f300.ts:1-300"], "full": true}))?;
        let mut tag = tag_of(&read)?;
        let mut k = 0u64;
        let lines: Vec<String> = body.lines().map(str::to_string).collect();
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
        // The reference filesystem server from npm, when installed under
        // target/peer-fs (docs/performance.md says how): its edit_file on
        // its own copy of the file, the same one-line change.
        let peer_bin = std::env::current_dir()
            .unwrap_or_default()
            .join("target/peer-fs/node_modules/.bin/mcp-server-filesystem");
        let mut peer = if peer_bin.exists() {
            write(&dir.join("peer.ts"), &body)?;
            let d = dir.display().to_string();
            let mut p = Server::spawn_args(&peer_bin, &[&d], &dir, state, &[])?;
            p.initialize()?;
            Some(p)
        } else {
            None
        };
        let peer_file = dir.join("peer.ts").display().to_string();
        let mut peer_line = lines.get(19).cloned().unwrap_or_default();
        let mut pk = 0u64;
        let plain = dir.join("plain.ts");
        let mut j = 0u64;
        let mut bases: Baselines<'_> = vec![(
            "atomic write of the same bytes (temp, fsync, rename, folder fsync)".into(),
            Box::new(move || {
                j += 1;
                let mut l = lines.clone();
                if l.len() > 19 {
                    l[19] = format!("    // edit {j}");
                }
                atomic_write(&plain, (l.join("\n") + "\n").as_bytes())
            }),
        )];
        if let Some(p) = peer.as_mut() {
            bases.push((
                "the reference filesystem server's edit_file".into(),
                Box::new(move || {
                    pk += 1;
                    let new_line = format!("    // peer edit {pk}");
                    let edit = json!({"path": peer_file, "edits": [{"oldText": peer_line, "newText": new_line}]});
                    let (d, _) = time(|| p.call("edit_file", edit))?;
                    peer_line = new_line;
                    Ok(d)
                }),
            ));
        }
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        drop(bases);
        Row {
            scenario: "edit alone (tag from the last answer) vs a plain atomic write".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
        // A read and five one-line edits, each answer's tag used by the
        // next, against the same with the filesystem server.
        if let Some(p) = peer.as_mut() {
            let mut round = 0u64;
            let mut f = || -> Result<(Duration, usize)> {
                round += 1;
                let t = Instant::now();
                let read = srv.call("read", json!({"paths": ["f300.ts:1-60"]}))?;
                let mut tag = tag_of(&read)?;
                let mut chars = 0;
                for line in [5usize, 15, 25, 35, 45] {
                    let out = srv.call(
                        "edit",
                        json!({"input": format!("[f300.ts#{tag}]\nPUT {line}:\n+    // round {round} line {line}\n")}),
                    )?;
                    tag = tag_of(&out)?;
                    chars += out.chars().count();
                }
                Ok((t.elapsed(), chars))
            };
            // The lines edited are made unique first: edit_file finds its
            // place by text.
            let mut current: Vec<String> = body.lines().map(str::to_string).collect();
            for line in [5usize, 15, 25, 35, 45] {
                if let Some(l) = current.get_mut(line - 1) {
                    *l = format!("    // start line {line}");
                }
            }
            let peer_path = dir.join("peer5.ts");
            write(&peer_path, &(current.join("\n") + "\n"))?;
            let peer_file = peer_path.display().to_string();
            let mut pr = 0u64;
            let mut bases: Baselines<'_> = vec![(
                "the filesystem server: read_text_file + 5 edit_file".into(),
                Box::new(move || {
                    pr += 1;
                    let t = Instant::now();
                    p.call("read_text_file", json!({"path": peer_file, "head": 60}))?;
                    for line in [5usize, 15, 25, 35, 45] {
                        let new_line = format!("    // round {pr} line {line}");
                        let old = current.get(line - 1).cloned().unwrap_or_default();
                        p.call(
                            "edit_file",
                            json!({"path": peer_file, "edits": [{"oldText": old, "newText": new_line}]}),
                        )?;
                        if let Some(l) = current.get_mut(line - 1) {
                            *l = new_line;
                        }
                    }
                    Ok(t.elapsed())
                }),
            )];
            let (s, c, b) = interleave(n.min(30), Some(&mut f), &mut bases)?;
            Row {
                scenario: "read + 5 sequential one-line edits vs the filesystem server".into(),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
    }
    let modes: [(&str, &[(&str, &str)]); 3] = [
        ("no sandbox", &[]),
        ("NIB_SANDBOX=1", &[("NIB_SANDBOX", "1")]),
        (
            "NIB_SANDBOX=1 NIB_SANDBOX_BWRAP=0",
            &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
        ),
    ];
    for (mode, env) in modes {
        let mut srv = Server::spawn_with(nib, &dir, state, env)?;
        srv.initialize()?;
        srv.call("nibash", json!({"command": "true"}))?;
        {
            let srv = &mut srv;
            let mut f = || -> Result<(Duration, usize)> {
                let (d, text) = time(|| srv.call("nibash", json!({"command": "true"})))?;
                Ok((d, text.chars().count()))
            };
            let d2 = dir.clone();
            let mut bases: Baselines<'_> = vec![(
                "bash -c 'true'".into(),
                Box::new(move || run_program(&d2, &["bash", "-c", "true"])),
            )];
            let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
            Row {
                scenario: format!("nibash `true` back to back, {mode}"),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
        {
            // A turn's calls come after the model thought (300 ms here; a
            // model's turn takes longer), four at once.
            let srv = std::cell::RefCell::new(&mut srv);
            let mut f = || -> Result<(Duration, usize)> {
                std::thread::sleep(Duration::from_millis(300));
                let calls = vec![json!({"command": "true"}); 4];
                let (d, texts) = time(|| srv.borrow_mut().call_many("nibash", &calls))?;
                Ok((d, texts.iter().map(|t| t.chars().count()).sum()))
            };
            let mut bases: Baselines<'_> = vec![(
                "one call".into(),
                Box::new(|| {
                    std::thread::sleep(Duration::from_millis(300));
                    time(|| srv.borrow_mut().call("nibash", json!({"command": "true"})))
                        .map(|(d, _)| d)
                }),
            )];
            let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
            Row {
                scenario: format!("nibash: 4 calls of `true` sent at once, {mode}"),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
        if env.is_empty() {
            // What the machine gives plain bash: four `bash -c true`
            // spawned at once against one (no nib): on two cores four
            // processes cannot take the time of one either.
            let d3 = dir.clone();
            let mut four = || -> Result<(Duration, usize)> {
                std::thread::sleep(Duration::from_millis(50));
                let t = Instant::now();
                let children: Vec<_> = (0..4)
                    .map(|_| {
                        Command::new("bash")
                            .args(["-c", "true"])
                            .current_dir(&d3)
                            .stdin(Stdio::null())
                            .spawn()
                            .map_err(|e| format!("bash: {e}"))
                    })
                    .collect::<Result<_>>()?;
                for mut c in children {
                    c.wait().map_err(|e| format!("bash: {e}"))?;
                }
                Ok((t.elapsed(), 0))
            };
            let d4 = dir.clone();
            let mut bases: Baselines<'_> = vec![(
                "one `bash -c true`".into(),
                Box::new(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    run_program(&d4, &["bash", "-c", "true"])
                }),
            )];
            let (s, c, b) = interleave(n, Some(&mut four), &mut bases)?;
            Row {
                scenario: "reference, no nib: 4 `bash -c true` spawned at once".into(),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
        {
            let srv = std::cell::RefCell::new(&mut srv);
            let mut f = || -> Result<(Duration, usize)> {
                let mut fresh = Server::spawn_with(nib, &dir, state, env)?;
                fresh.initialize()?;
                std::thread::sleep(Duration::from_millis(300));
                let (d, text) = time(|| fresh.call("nibash", json!({"command": "true"})))?;
                Ok((d, text.chars().count()))
            };
            let mut bases: Baselines<'_> = vec![(
                "a warm call (30 ms after the last)".into(),
                Box::new(|| {
                    std::thread::sleep(Duration::from_millis(30));
                    time(|| srv.borrow_mut().call("nibash", json!({"command": "true"})))
                        .map(|(d, _)| d)
                }),
            )];
            let (s, c, b) = interleave(n.min(20), Some(&mut f), &mut bases)?;
            Row {
                scenario: format!(
                    "nibash: the session's first call, 300 ms after initialize, {mode}"
                ),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
    }
    Ok(())
}
