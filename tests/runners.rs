//! Long output of real test runners and compilers (the logs in
//! `bench/corpus/outputs/`, made by running pytest, jest, vitest, go test,
//! cargo nextest, tsc, eslint and javac for real) keeps every line a
//! developer must see — by the bench's rule per tool — through nibash,
//! `skim` and `nib shape`, with the question an agent asks.

use serde_json::json;

use crate::common::*;

#[path = "../bench/src/must_see.rs"]
mod must_see;

fn corpus() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/corpus/outputs")
}

/// The logs a rule covers, with their must-see lines.
fn ruled_logs() -> Vec<(String, String, Vec<usize>)> {
    let mut logs = Vec::new();
    for e in std::fs::read_dir(corpus()).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        if let Some(must) = must_see::must_see(&name, &lines) {
            assert!(!must.is_empty(), "{name}: the rule found nothing to see");
            logs.push((name, text, must));
        }
    }
    logs.sort();
    assert!(logs.len() >= 8, "{} ruled logs", logs.len());
    logs
}

/// The log lines an answer shows: `N|TEXT` rows of a cut answer, every
/// line of one shown whole.
fn shown_lines(answer: &str, text: &str) -> std::collections::BTreeSet<usize> {
    if !answer.contains("|") || !answer.contains(" cut") {
        return (1..=text.lines().count()).collect();
    }
    answer
        .lines()
        .filter_map(|l| l.split_once('|')?.0.parse().ok())
        .collect()
}

fn missed(
    name: &str,
    text: &str,
    must: &[usize],
    shown: &std::collections::BTreeSet<usize>,
) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    must.iter()
        .filter(|n| !shown.contains(n))
        .map(|&n| format!("{name}:{n}: {}", lines[n - 1]))
        .collect()
}

#[tokio::test]
async fn failures_of_real_runners_survive_the_cut_through_nibash_and_skim() {
    let dir = project();
    let logs = ruled_logs();
    for (name, text, _) in &logs {
        std::fs::write(dir.path().join(format!("{name}.log")), text).unwrap();
    }
    let nib = start(Era::Handshake, dir.path()).await;
    let mut misses = Vec::new();
    for (name, text, must) in &logs {
        // A program's output (not nib's own cat, whose rows are a file's).
        let out = nib
            .ok(
                "nibash",
                json!({
                    "command": format!("python3 -c 'import sys; sys.stdout.write(open(\"{name}.log\").read())'"),
                    "expect": "which tests failed and why"
                }),
            )
            .await;
        misses.extend(missed(name, text, must, &shown_lines(&out, text)));
        let skimmed = nib
            .ok(
                "skim",
                json!({"paths": [format!("{name}.log")], "expect": "which tests failed and why"}),
            )
            .await;
        misses.extend(
            missed(name, text, must, &shown_lines(&skimmed, text))
                .into_iter()
                .map(|m| format!("skim {m}")),
        );
    }
    nib.stop().await;
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

#[test]
fn nib_shape_keeps_them_too() {
    for (name, text, must) in ruled_logs() {
        let out = nib_command()
            .args(["shape", "--log"])
            .arg(corpus().join(format!("{name}.log")))
            .args(["--purpose", "which tests failed and why"])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&out.stdout);
        let misses = missed(&name, &text, &must, &shown_lines(&out, &text));
        assert!(misses.is_empty(), "{}", misses.join("\n"));
    }
}
