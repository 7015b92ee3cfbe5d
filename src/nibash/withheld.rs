//! The lines a confined call's answer ends with when the read policy or the
//! variable rule kept something from it: each hidden path the command line
//! names or a program's error message names, and each withheld variable the
//! command line expands — once per call, with how the user allows it.
//!
//! What is hidden is decided by the sandbox crate (`nib_sandbox::Reads`);
//! this module only finds the paths and names a call met and words the
//! lines. A program that opens a hidden path without naming it on the
//! command line or in an error message gets its ordinary error and no line;
//! nor does a path that does not exist for the user either.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nib_sandbox::Reads;

/// The closing lines for one call: `command` as given, `output` as the
/// programs printed it, `cwd` the call's folder, `roots` readable and
/// writable, `withheld` the variables programs did not get.
pub fn notes(
    command: &str,
    output: &str,
    cwd: &Path,
    home: Option<&Path>,
    reads: &Reads,
    roots: &[PathBuf],
    withheld: &[String],
) -> Vec<String> {
    let mut lines = Vec::new();
    let mut seen = BTreeSet::new();
    let error_lines = output.lines().filter(|l| {
        l.contains("No such file or directory")
            || l.contains("Permission denied")
            || l.contains("Errno 2]")
            || l.contains("Errno 13]")
            || l.contains("EACCES")
            || l.contains("ENOENT")
    });
    let words = std::iter::once(command)
        .chain(error_lines)
        .flat_map(path_words);
    for word in words {
        let Some(path) = absolute(&word, cwd, home) else {
            continue;
        };
        // A path that is not there for the user either is not news: the
        // program's error is the whole truth (a URL's path is no file).
        if !reads.hides(&path, roots)
            || std::fs::symlink_metadata(&path).is_err()
            || !seen.insert(path.clone())
        {
            continue;
        }
        let why = if reads.hidden.iter().any(|h| path.starts_with(h)) {
            "on the credential list"
        } else {
            "outside what programs may read"
        };
        lines.push(format!(
            "[sandbox: {} is hidden from programs ({why}); the user can show it with NIB_SANDBOX_BIND={}]",
            path.display(),
            path.display()
        ));
        if lines.len() >= 8 {
            break;
        }
    }
    for name in withheld {
        let named =
            command.contains(&format!("${name}")) || command.contains(&format!("${{{name}"));
        if named {
            lines.push(format!(
                "[sandbox: ${name} is withheld from programs (its name looks like a secret); the user can pass it with NIB_SANDBOX_ENV={name}]"
            ));
        }
    }
    lines
}

/// Words that may be paths: split at spaces, quotes, `:`, `=`, `<`, `>`,
/// `(`, `)`, `;`, `|`, `&`, `,` and backquotes; those that start with `/`
/// or `~/` (or `$HOME/`).
fn path_words(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || "'\"\\:=<>();|&,`".contains(c))
        .filter(|w| w.starts_with('/') || w.starts_with("~/") || w.starts_with("$HOME/"))
        .map(|w| w.trim_end_matches(['.', ']']).to_string())
        .collect()
}

/// The word as an absolute, lexically normal path.
fn absolute(word: &str, cwd: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let p = if let Some(rest) = word
        .strip_prefix("~/")
        .or_else(|| word.strip_prefix("$HOME/"))
    {
        home?.join(rest)
    } else {
        cwd.join(word)
    };
    let p = nib_text::path_text::lexical_normalize(&p);
    (p.components().count() > 1).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_paths_and_withheld_variables_are_named_once() {
        let base = tempfile::tempdir().unwrap();
        let h = base.path().join("h");
        for f in [".ssh/id_ed25519", "proj/src/a.rs"] {
            let p = h.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x\n").unwrap();
        }
        let hs = h.display().to_string();
        let reads = Reads {
            readable: vec![PathBuf::from("/usr"), h.join(".cargo")],
            hidden: vec![h.join(".ssh"), h.join(".cargo/credentials.toml")],
        };
        let roots = [h.join("proj")];
        let got = notes(
            &format!(
                "cat ~/.ssh/id_ed25519 {hs}/.ssh/id_ed25519; cat /usr/share/x src/a.rs; curl -d 'GET /not-a-file' x; echo $GITHUB_TOKEN ${{NPM_TOKEN:-}}"
            ),
            &format!(
                "python: [Errno 2] No such file or directory: '/etc/passwd'\nfine {hs}/never-an-error\n"
            ),
            &h.join("proj"),
            Some(&h),
            &reads,
            &roots,
            &[
                "GITHUB_TOKEN".into(),
                "NPM_TOKEN".into(),
                "AWS_SECRET_ACCESS_KEY".into(),
            ],
        );
        assert_eq!(
            got,
            vec![
                format!("[sandbox: {hs}/.ssh/id_ed25519 is hidden from programs (on the credential list); the user can show it with NIB_SANDBOX_BIND={hs}/.ssh/id_ed25519]"),
                // Outside the readable folders (the host's /tmp, where the
                // test may run, is never named: programs have their own).
                "[sandbox: /etc/passwd is hidden from programs (outside what programs may read); the user can show it with NIB_SANDBOX_BIND=/etc/passwd]".to_string(),
                "[sandbox: $GITHUB_TOKEN is withheld from programs (its name looks like a secret); the user can pass it with NIB_SANDBOX_ENV=GITHUB_TOKEN]".to_string(),
                "[sandbox: $NPM_TOKEN is withheld from programs (its name looks like a secret); the user can pass it with NIB_SANDBOX_ENV=NPM_TOKEN]".to_string(),
            ]
        );
    }
}
