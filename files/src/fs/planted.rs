//! Client and editor files that make code run, made by programs where none
//! was.
//!
//! Under `NIB_SANDBOX=1` the files that make code run which exist when a
//! call starts are bound read-only for its programs (`runs_code`), but a
//! bind cannot hold a path that does not exist: a program could create
//! `.claude/settings.json` with a `SessionStart` hook, `.mcp.json`,
//! `nib.json` with a provider, `opencode.json` or `.vscode/tasks.json`
//! (`runOn: folderOpen`), and the person's client or editor would run it
//! at its next start in the project, outside any sandbox. So after every
//! call, when a job ends, and every [`JOB_SWEEP_EVERY`] while a job runs,
//! the broker takes such an entry — one the call did not hold and that
//! was made or changed since the call (or the job) started, by change
//! time, which no program can set back — to the user's trash and names it.
//!
//! The same holds for what the person's own settings run from the root (a
//! hooks path, a script a Claude hook names: `settings_targets`): made by
//! a call where none was, it goes too.
//!
//! This module decides and moves; `runs_code` owns the list of names
//! ([`runs_code::CLIENT_FILES`]), `settings_targets` the settings' targets
//! and `git_guard` the git dirs.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{Scope, git_guard, runs_code, settings_targets};

/// How often a running job's roots are looked at: the bound on how long a
/// planted file can stay while a job runs (each look is a few `lstat`s per
/// root).
pub const JOB_SWEEP_EVERY: Duration = Duration::from_millis(250);

/// The most entries looked at inside one planted folder (`.claude/`,
/// `.vscode/`, `.opencode/`) for one changed since the call started.
const FOLDER_LIMIT: usize = 4_096;

/// Takes out of every root of a sandbox `scope` the client and editor
/// files ([`runs_code::CLIENT_FILES`]) that are not in `held` (bound
/// read-only for the call: the person's) and were made or changed at or
/// after `since`. Returns one line for the answer when anything was taken.
pub fn sweep(scope: &Scope, held: &[PathBuf], since: SystemTime) -> Vec<String> {
    let Scope::Sandbox(roots) = scope else {
        return Vec::new();
    };
    // Change times are kept at the kernel's tick: a second of margin.
    let since = since.checked_sub(Duration::from_secs(1)).unwrap_or(since);
    let since = since
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let mut taken = Vec::new();
    for root in roots.iter() {
        let targets = settings_targets::of_root(&root.path);
        let client_files = runs_code::CLIENT_FILES.iter().map(|n| root.path.join(n));
        for path in client_files.chain(targets) {
            if held.contains(&path) || !changed_since(&path, since) {
                continue;
            }
            if git_guard::to_trash(roots, &path).is_ok() {
                taken.push(nib_text::path_text::escape_control(&path.to_string_lossy()));
            }
        }
    }
    if taken.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "[sandbox: {} made by this call's programs would run code in your agent client, editor or \
         git outside the sandbox; moved to the trash (`trash list` shows it; the person can restore it, \
         or write it with nib's write tool, which asks first)]",
        taken.join(", ")
    )]
}

/// Whether the entry at `path` (never followed), or for a folder anything
/// in it, changed at or after `since` (ns since the epoch).
fn changed_since(path: &Path, since: i128) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if changed_at(&meta) >= since {
        return true;
    }
    if !meta.is_dir() {
        return false;
    }
    let mut stack = vec![path.to_path_buf()];
    let mut looked = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            looked += 1;
            if looked > FOLDER_LIMIT {
                // Too much to look through: judged as changed.
                return true;
            }
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if changed_at(&m) >= since {
                return true;
            }
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    false
}

/// A file's change time in nanoseconds since the epoch.
fn changed_at(m: &std::fs::Metadata) -> i128 {
    i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(t: SystemTime) -> i128 {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128)
    }

    #[test]
    fn a_folder_counts_as_changed_when_anything_inside_changed() {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path();
        std::fs::create_dir_all(d.join(".vscode/deep")).expect("mkdir");
        std::fs::write(d.join(".vscode/deep/a.json"), "{}").expect("write");
        std::fs::write(d.join("nib.json"), "{}").expect("write");
        let after = ns(SystemTime::now() + Duration::from_secs(5));
        let before = ns(SystemTime::now() - Duration::from_secs(5));
        assert!(changed_since(&d.join(".vscode"), before));
        assert!(!changed_since(&d.join(".vscode"), after));
        assert!(!changed_since(&d.join("missing"), before));
        // A folder whose own change time is old but whose content is new.
        let folder = std::fs::symlink_metadata(d.join(".vscode")).expect("stat");
        let inner = std::fs::symlink_metadata(d.join(".vscode/deep/a.json")).expect("stat");
        assert!(changed_at(&inner) >= changed_at(&folder));
        assert!(changed_since(&d.join(".vscode"), changed_at(&inner)));
        assert!(sweep(&Scope::Open, &[], SystemTime::now()).is_empty());
    }
}
