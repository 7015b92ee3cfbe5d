//! Fuzz the command-rule extractor: random shell text never panics the
//! check; and a forbidden program wrapped in layers of the constructs the
//! extractor knows (substitutions, subshells, nested shells, eval, wrappers,
//! functions, here-strings…) chosen by the input is never let through.
//!
//! Input: byte 0 (when below 128) selects the layered mode: each following
//! byte picks one layer; otherwise the input is shell text checked as is.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use nib_command_rules::{Rules, Verdict};

fn rules() -> Rules {
    match Rules::parse(
        Path::new("/fuzz/nib.json"),
        r#"{"rules": [{"program": "forbidden-tool", "why": "fuzz"}]}"#,
    ) {
        Ok(Some(r)) => r,
        _ => panic!("the fuzz rules parse"),
    }
}

/// Quotes text as one single-quoted shell word.
fn q(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Wraps `inner` in layer `k`; `simple` says whether `inner` is one simple
/// command (some wrappers take only that). Returns the text and whether it
/// is still a simple command.
fn wrap(inner: &str, simple: bool, k: u8) -> (String, bool) {
    let any = |t: String| (t, false);
    let simple_only = |t: String| (t, true);
    match k % 24 {
        0 => any(format!("echo $({inner})")),
        1 => any(format!("echo `{}`", inner.replace('`', "\\`"))),
        2 => any(format!("( {inner} )")),
        3 => any(format!("{{ {inner}; }}")),
        4 => simple_only(format!("bash -c {}", q(inner))),
        5 => simple_only(format!("sh -c {}", q(inner))),
        6 => simple_only(format!("eval {}", q(inner))),
        7 => any(format!("if true; then {inner}; fi")),
        8 => any(format!("f() {{ {inner}; }}; f")),
        9 => any(format!("{inner} | cat")),
        10 => any(format!("true && {inner}")),
        11 => any(format!("false || {inner}")),
        12 => any(format!("cat <({inner})")),
        13 => simple_only(format!("bash <<< {}", q(inner))),
        14 => simple_only(format!("flock /tmp/l -c {}", q(inner))),
        15 => any(format!("x=$({inner}); echo $x")),
        16 => any(format!("echo ${{v:-$({inner})}}")),
        17 if simple => simple_only(format!("env A=1 {inner}")),
        18 if simple => simple_only(format!("timeout 5 {inner}")),
        19 if simple => simple_only(format!("nice -n 1 {inner}")),
        20 if simple => simple_only(format!("echo x | xargs {inner}")),
        21 if simple => simple_only(format!("find . -exec {inner} \\;")),
        22 if simple => simple_only(format!("sudo -u root {inner}")),
        23 if simple => simple_only(format!("command {inner}")),
        _ => any(format!("while false; do :; done; {inner}")),
    }
}

fuzz_target!(|data: &[u8]| {
    let rules = rules();
    let cwd = Path::new("/nonexistent-fuzz-cwd");
    match data.split_first() {
        Some((&mode, layers)) if mode < 128 => {
            let mut text = "forbidden-tool --flag".to_string();
            let mut simple = true;
            for &k in layers.iter().take(12) {
                let (t, s) = wrap(&text, simple, k);
                text = t;
                simple = s;
            }
            let verdict = nib_command_rules::check(&rules, &text, cwd, None);
            assert!(
                matches!(verdict, Verdict::Refuse { .. }),
                "let through: {text}"
            );
        }
        _ => {
            let text = String::from_utf8_lossy(data);
            let _ = nib_command_rules::check(&rules, &text, cwd, None);
        }
    }
});
