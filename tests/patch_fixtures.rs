//! Every fixture in tests/fixtures/patch/NNN_name/{before,patch,after}, run
//! through the edit tool on LF, CRLF, BOM and no-final-newline variants of the
//! same text (a `variants` file limits them). `TAG` in a patch header is
//! replaced by the file's real tag; the file is read first, so its lines are
//! seen, as an agent's would be. Optional files: `dest` names the file where
//! `after` is expected (MV, CP, Add File), `source_gone` says file.txt must be
//! gone afterwards (MV).

use serde_json::json;
use std::path::Path;

use nib_files::tools;

const VARIANTS: [&str; 4] = ["lf", "crlf", "bom", "nofinal"];

fn variant(text: &str, v: &str) -> Option<Vec<u8>> {
    match v {
        "lf" => Some(text.as_bytes().to_vec()),
        "crlf" => Some(text.replace('\n', "\r\n").into_bytes()),
        "bom" => Some([&b"\xEF\xBB\xBF"[..], text.as_bytes()].concat()),
        "nofinal" => text
            .strip_suffix('\n')
            .map(|t| t.as_bytes().to_vec())
            .or(Some(Vec::new())),
        _ => None,
    }
}

fn run_fixture(dir: &Path) -> Vec<String> {
    let before = std::fs::read_to_string(dir.join("before")).unwrap();
    let patch = std::fs::read_to_string(dir.join("patch")).unwrap();
    let after = std::fs::read_to_string(dir.join("after")).unwrap();
    let variants: Vec<String> = std::fs::read_to_string(dir.join("variants"))
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_else(|_| VARIANTS.iter().map(|s| s.to_string()).collect());
    let mut failures = Vec::new();
    for v in &variants {
        let project = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let file = project.path().join("file.txt");
        let b = variant(&before, v).unwrap();
        let a = variant(&after, v).unwrap();
        std::fs::write(&file, &b).unwrap();
        let lib = crate::common::Library::new(project.path(), state.path());
        let ctx = lib.ctx();
        let read = tools::call_file_tool(
            "read",
            json!({"paths": ["file.txt"]}).as_object().cloned(),
            &ctx,
        )
        .unwrap();
        let tag = crate::common::header_tag(&read.text);
        let patch = patch.replace("#TAG]", &format!("#{tag}]"));
        let out = tools::call_file_tool("edit", json!({"input": patch}).as_object().cloned(), &ctx)
            .unwrap();
        let dest = std::fs::read_to_string(dir.join("dest")).map(|d| d.trim().to_string());
        let result = project.path().join(dest.as_deref().unwrap_or("file.txt"));
        let got = std::fs::read(&result).unwrap_or_default();
        let source_gone = dir.join("source_gone").exists();
        if source_gone == file.exists() {
            failures.push(format!(
                "{} [{v}]: file.txt should {}exist afterwards\n{}",
                dir.file_name().unwrap().to_string_lossy(),
                if source_gone { "not " } else { "" },
                out.text
            ));
        }
        if out.is_error || got != a {
            failures.push(format!(
                "{} [{v}]: error={} got {:?} want {:?}\n{}",
                dir.file_name().unwrap().to_string_lossy(),
                out.is_error,
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&a),
                out.text
            ));
        }
    }
    failures
}

#[test]
fn every_patch_fixture_on_every_line_ending() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/patch");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 20, "fixtures missing");
    let failures: Vec<String> = dirs.iter().flat_map(|d| run_fixture(d)).collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
