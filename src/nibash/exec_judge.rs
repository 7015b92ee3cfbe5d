//! Program rules at exec time: the [`nib_sandbox::ExecJudge`] nibash's
//! workers run under while nib.json has program rules, in every mode.
//!
//! The sandbox's supervisor hands over each exec of a call's tree with the
//! file the kernel would run and its `#!` interpreters; this module says
//! whether a rule forbids it. A file is the forbidden program when any of
//! these holds:
//! - its name, as it was asked for or after its symlinks, is the program's
//!   name (a second installation anywhere);
//! - it is one of the program's files found on PATH, by device and inode
//!   (a symlink or hard link under another name, a changed PATH);
//! - it has the same size and content fingerprint as one of them (a copy).
//!
//! A rule with `args` refuses only when the arguments match (read from the
//! caller; unreadable arguments refuse). What to do with a refusal (the
//! closing line of the answer) is `call.rs`'s business; finding the file is
//! the sandbox's.

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use nib_command_rules::Rules;
use nib_sandbox::{ExecAttempt, ExecFile, ExecJudge};
use regex::Regex;

/// How much of each end of a file its fingerprint reads.
const FINGERPRINT_END: u64 = 1 << 20;

/// Folders searched for a forbidden program's files besides PATH.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// One program rule as the judge applies it.
#[derive(Debug)]
struct JudgeRule {
    names: Vec<String>,
    args: Option<Regex>,
    message: String,
}

/// A file of a forbidden program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Known {
    rule: usize,
    dev: u64,
    ino: u64,
    size: u64,
    fingerprint: u64,
}

/// Decides execs by nib.json's program rules.
#[derive(Debug)]
pub struct ProgramJudge {
    rules: Vec<JudgeRule>,
    known: Vec<Known>,
}

impl ProgramJudge {
    /// The judge for these rules; `None` when they have no program rules.
    /// `path` is the PATH programs search (the broker's).
    pub fn new(rules: &Rules, path: Option<&std::ffi::OsStr>) -> Option<ProgramJudge> {
        let judge_rules: Vec<JudgeRule> = rules
            .program_rules()
            .map(|r| JudgeRule {
                names: r.programs.clone(),
                args: r.args.clone(),
                message: format!("refused by {}, {}", rules.source.display(), r.describe()),
            })
            .collect();
        if judge_rules.is_empty() {
            return None;
        }
        let mut dirs: Vec<PathBuf> = path
            .map(|p| std::env::split_paths(p).collect())
            .unwrap_or_default();
        dirs.extend(SYSTEM_DIRS.iter().map(PathBuf::from));
        let mut known = Vec::new();
        for (i, rule) in judge_rules.iter().enumerate() {
            for name in &rule.names {
                for dir in &dirs {
                    if let Some(k) = known_file(&dir.join(name), i)
                        && !known.contains(&k)
                    {
                        known.push(k);
                    }
                }
            }
        }
        Some(ProgramJudge {
            rules: judge_rules,
            known,
        })
    }

    /// The rules that forbid this file, by name, identity or content.
    fn rules_for(&self, file: &ExecFile) -> Vec<usize> {
        let mut hits = Vec::new();
        let mut names = vec![base_name(&file.named)];
        let resolved = std::fs::read_link(format!("/proc/self/fd/{}", file.fd.as_raw_fd())).ok();
        if let Some(r) = &resolved {
            names.push(base_name(r));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.names.iter().any(|n| names.iter().any(|m| m == n)) {
                hits.push(i);
            }
        }
        let mut fingerprint = None;
        for k in &self.known {
            if hits.contains(&k.rule) {
                continue;
            }
            let same = (k.dev, k.ino) == (file.dev, file.ino)
                || (k.size == file.size
                    && *fingerprint.get_or_insert_with(|| {
                        file.open().ok().and_then(|f| fingerprint_of(f, file.size))
                    }) == Some(k.fingerprint));
            if same {
                hits.push(k.rule);
            }
        }
        hits
    }
}

impl ExecJudge for ProgramJudge {
    fn judge(&self, attempt: &ExecAttempt<'_>) -> Option<String> {
        let mut hits: Vec<usize> = Vec::new();
        for f in &attempt.files {
            for r in self.rules_for(f) {
                if !hits.contains(&r) {
                    hits.push(r);
                }
            }
        }
        hits.sort_unstable();
        let mut argv = None;
        for i in hits {
            let rule = &self.rules[i];
            let Some(re) = &rule.args else {
                return Some(rule.message.clone());
            };
            let args = argv.get_or_insert_with(|| attempt.argv());
            match args {
                // Unreadable arguments cannot be judged: refuse.
                None => return Some(rule.message.clone()),
                Some(a) => {
                    let joined = a
                        .iter()
                        .skip(1)
                        .map(|s| s.to_string_lossy())
                        .collect::<Vec<_>>()
                        .join(" ");
                    if re.is_match(&joined) {
                        return Some(rule.message.clone());
                    }
                }
            }
        }
        None
    }
}

fn base_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A forbidden program's file at `path` (its link target), if one is there.
fn known_file(path: &Path, rule: usize) -> Option<Known> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let key = (
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
    );
    /// Device, inode, size and modification time → fingerprint.
    type Cache = Mutex<HashMap<(u64, u64, u64, i64, i64), u64>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    let cached = cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
        .copied();
    let fingerprint = match cached {
        Some(f) => f,
        None => {
            let f = fingerprint_of(std::fs::File::open(path).ok()?, meta.size())?;
            cache
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key, f);
            f
        }
    };
    Some(Known {
        rule,
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        fingerprint,
    })
}

/// A fingerprint of a file's content: its first and last MiB (all of it
/// when smaller), with its size.
fn fingerprint_of(mut file: std::fs::File, size: u64) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&size.to_le_bytes());
    let mut head = Vec::new();
    (&mut file)
        .take(FINGERPRINT_END)
        .read_to_end(&mut head)
        .ok()?;
    h.update(&head);
    if size > FINGERPRINT_END {
        let from = size.saturating_sub(FINGERPRINT_END).max(FINGERPRINT_END);
        let mut tail = vec![0u8; (size - from) as usize];
        file.read_exact_at(&mut tail, from).ok()?;
        h.update(&tail);
    }
    Some(h.digest())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_known_by_content_and_other_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        let c = dir.path().join("c");
        std::fs::write(&a, b"#!/bin/sh\necho hi\n").unwrap();
        std::fs::write(&b, b"#!/bin/sh\necho hi\n").unwrap();
        std::fs::write(&c, b"#!/bin/sh\necho ho\n").unwrap();
        let f = |p: &Path| fingerprint_of(std::fs::File::open(p).unwrap(), 18);
        assert_eq!(f(&a), f(&b));
        assert_ne!(f(&a), f(&c));
        let big = dir.path().join("big");
        let mut bytes = vec![7u8; (3 * FINGERPRINT_END) as usize];
        std::fs::write(&big, &bytes).unwrap();
        let len = bytes.len() as u64;
        let before = fingerprint_of(std::fs::File::open(&big).unwrap(), len);
        let last = bytes.len() - 1;
        bytes[last] = 8;
        std::fs::write(&big, &bytes).unwrap();
        assert_ne!(
            before,
            fingerprint_of(std::fs::File::open(&big).unwrap(), len),
            "the last MiB counts"
        );
    }
}
