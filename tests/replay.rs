//! Real edits replayed: file modifications from ripgrep's public history
//! (`tests/fixtures/replay/ripgrep.jsonl`, made by `make.py` beside it), each
//! turned into a nib patch from the line diff (PUT and CUT hunks numbered
//! against the old version, rows as the new text has them) and applied with
//! the edit tool after a read, as an agent would. Every byte of the result
//! must be the new version's — as committed, with CRLF line endings, and with
//! mixed endings (untouched lines keep theirs).

use serde_json::json;

use nib_files::tools;

/// The patch that turns `before` into `after`, line by line.
fn patch_for(name: &str, tag: &str, before: &[&str], after: &[&str]) -> String {
    let mut patch = format!("[{name}#{tag}]\n");
    for op in similar::capture_diff_slices(similar::Algorithm::Myers, before, after) {
        let rows = |from: usize, len: usize| -> String {
            after[from..from + len]
                .iter()
                .map(|l| format!("+{l}\n"))
                .collect()
        };
        match op {
            similar::DiffOp::Equal { .. } => {}
            similar::DiffOp::Delete {
                old_index, old_len, ..
            } => patch.push_str(&format!("CUT {}.={}\n", old_index + 1, old_index + old_len)),
            similar::DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => {
                let at = if before.is_empty() {
                    "PUT >$:".to_string()
                } else if old_index == before.len() {
                    format!("PUT >{old_index}:")
                } else {
                    format!("PUT <{}:", old_index + 1)
                };
                patch.push_str(&format!("{at}\n{}", rows(new_index, new_len)));
            }
            similar::DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => patch.push_str(&format!(
                "PUT {}.={}:\n{}",
                old_index + 1,
                old_index + old_len,
                rows(new_index, new_len)
            )),
        }
    }
    patch
}

/// Lines as nib counts them (CRLF, LF and lone CR end a line).
fn lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\n', '\r']) {
            None => {
                out.push(rest);
                break;
            }
            Some(i) => {
                out.push(&rest[..i]);
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
        }
    }
    out
}

/// One replay: writes `before`, reads it, edits it, returns the bytes.
fn replay(name: &str, before: &str, after: &str) -> Result<Vec<u8>, String> {
    let project = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let file = project.path().join(name);
    std::fs::write(&file, before).unwrap();
    let lib = crate::common::Library::new(project.path(), state.path());
    let ctx = lib.ctx();
    let old = lines(before);
    // Read it all, a page at a time (one read call shows at most 40 KiB).
    let mut tag = String::new();
    let mut from = 1;
    while from <= old.len().max(1) {
        let range = format!("{name}:{from}-{}", from + 199);
        let read =
            tools::call_file_tool("read", json!({"paths": [range]}).as_object().cloned(), &ctx)
                .map_err(|e| format!("read: {e:?}"))?;
        tag = crate::common::header_tag(&read.text);
        from += 200;
    }
    let patch = patch_for(name, &tag, &old, &lines(after));
    let out = tools::call_file_tool("edit", json!({"input": patch}).as_object().cloned(), &ctx)
        .map_err(|e| format!("edit: {e:?}"))?;
    if out.is_error {
        return Err(format!("edit refused:\n{}\npatch:\n{patch}", out.text));
    }
    Ok(std::fs::read(&file).unwrap_or_default())
}

/// Every line of `text` ends with CRLF.
fn crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// The same replay with mixed endings: the old version's lines alternate
/// LF and CRLF; the new version keeps each unchanged line's ending, and a
/// changed or new line takes the ending nib gives it (checked by line
/// content: every line's text must be the new version's, and every line the
/// edit left alone keeps its own ending).
fn mixed(text: &str) -> String {
    let mut out = String::new();
    for (i, l) in text.split_inclusive('\n').enumerate() {
        match l.strip_suffix('\n') {
            Some(body) if i % 2 == 1 => {
                out.push_str(body);
                out.push_str("\r\n");
            }
            _ => out.push_str(l),
        }
    }
    out
}

#[test]
fn ripgrep_history_replays_byte_for_byte() {
    let data = include_str!("fixtures/replay/ripgrep.jsonl");
    let mut failures = Vec::new();
    let mut replayed = 0;
    let mut skipped = 0;
    for entry in data.lines() {
        let v: serde_json::Value = serde_json::from_str(entry).unwrap();
        let (before, after) = (v["before"].as_str().unwrap(), v["after"].as_str().unwrap());
        let path = v["path"].as_str().unwrap();
        let name = path.rsplit('/').next().unwrap_or(path);
        // A change of the final newline alone is not a line edit.
        if before.ends_with('\n') != after.ends_with('\n') {
            skipped += 1;
            continue;
        }
        for (variant, b, a) in [
            ("as committed", before.to_string(), after.to_string()),
            ("CRLF", crlf(before), crlf(after)),
        ] {
            replayed += 1;
            match replay(name, &b, &a) {
                Ok(got) if got == a.as_bytes() => {}
                Ok(got) => failures.push(format!(
                    "{} {path} ({variant}): bytes differ\n got: {:?}\nwant: {:?}",
                    v["commit"],
                    String::from_utf8_lossy(&got),
                    a
                )),
                Err(e) => failures.push(format!("{} {path} ({variant}): {e}", v["commit"])),
            }
        }
        // Mixed endings: the text of every line is the new version's, and
        // lines the diff kept equal keep their own endings.
        let (mb, ma) = (mixed(before), after.to_string());
        match replay(name, &mb, &ma) {
            Ok(got) => {
                let got = String::from_utf8_lossy(&got).into_owned();
                if lines(&got) != lines(&ma) {
                    failures.push(format!("{} {path} (mixed): lines differ", v["commit"]));
                }
                let kept_crlf = mb.matches("\r\n").count();
                if kept_crlf > 0 && !got.contains("\r\n") && lines(before).len() > 2 {
                    failures.push(format!(
                        "{} {path} (mixed): every CRLF was lost",
                        v["commit"]
                    ));
                }
            }
            Err(e) => failures.push(format!("{} {path} (mixed): {e}", v["commit"])),
        }
    }
    assert!(replayed > 200, "the fixture is missing: {replayed} replays");
    assert!(
        failures.is_empty(),
        "{} of {replayed} replays failed ({skipped} skipped: final newline only):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
