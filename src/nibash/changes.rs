//! Files a nibash call changed: after each call the broker walks the roots
//! (git-ignored files and `.git/` left out, as grep and find do) for files
//! modified since the call started, lists them with their new tags, and
//! prints the changed rows of files the agent had seen when the change is
//! small — those rows then count as seen, so the agent can edit on.
//!
//! The files come from the roots' watcher (`watch`) when it has them all;
//! otherwise from a walk, bounded ([`WALK_LIMIT`] entries): a tree larger
//! than that is reported as not fully checked rather than slowing every call.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::Nibash;
use nib_files::context::Ctx;
use nib_text::hashline::{self, Tag};
use nib_text::text::Text;

/// Entries walked at most after a call.
pub const WALK_LIMIT: usize = 50_000;
/// Files listed at most.
const LISTED: usize = 30;
/// A change of at most this many rows to a file the agent saw prints as rows.
const SMALL_CHANGE: usize = 12;
/// The clock file timestamps are taken from (the kernel's coarse real-time
/// clock, which can lag the precise one by a tick): a file written after
/// this reading has a modification time at or after it.
pub fn file_clock_now() -> SystemTime {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    match (u64::try_from(t.tv_sec), u32::try_from(t.tv_nsec)) {
        (Ok(s), Ok(n)) => SystemTime::UNIX_EPOCH + Duration::new(s, n),
        _ => SystemTime::now(),
    }
}

/// Files under `roots` modified at or after `since` (a [`file_clock_now`]
/// reading), in path order; and whether the walk stopped at its limit.
pub fn changed_since(roots: &[PathBuf], since: SystemTime) -> (Vec<PathBuf>, bool) {
    let mut out = Vec::new();
    let mut walked = 0;
    for root in roots {
        let walk = ignore::WalkBuilder::new(root)
            .hidden(false)
            .git_ignore(true)
            .git_global(false)
            .git_exclude(true)
            .parents(false)
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        for entry in walk.flatten() {
            walked += 1;
            if walked > WALK_LIMIT {
                out.sort();
                return (out, true);
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
            if modified.is_some_and(|m| m >= since) {
                out.push(entry.into_path());
            }
        }
    }
    out.sort();
    (out, false)
}

/// Where a call started, for finding what it changed.
pub struct Start {
    time: SystemTime,
    watch: Option<(std::sync::Arc<super::watch::Watcher>, u64)>,
    /// The [`super::tool_writes::ToolWrites`] mark when the call started.
    tool_writes: u64,
}

/// Notes the start of a call (a watcher mark, and the file clock for a walk).
pub fn start(ctx: &Ctx, shell: &Nibash) -> Start {
    let watch = shell.watcher(&ctx.workspace.roots()).map(|w| {
        let m = w.mark();
        (w, m)
    });
    let tool_writes = shell.tool_writes.mark();
    Start {
        time: file_clock_now(),
        watch,
        tool_writes,
    }
}

/// The answer's section on changed files (empty when none changed).
pub fn report(ctx: &Ctx, shell: &Nibash, start: &Start, skip: &[PathBuf]) -> String {
    use std::sync::atomic::Ordering;
    let watched = start.watch.as_ref().and_then(|(w, m)| w.changed_since(*m));
    let (paths, cut_short) = match watched {
        Some(p) => (p, false),
        None if shell.walk_too_big.load(Ordering::Relaxed) => {
            return "[changed files are not listed: the roots are too large to watch or walk after each call]\n".into();
        }
        None => {
            let (p, cut) = changed_since(&ctx.workspace.roots(), start.time);
            if cut {
                shell.walk_too_big.store(true, Ordering::Relaxed);
            }
            (p, cut)
        }
    };
    // nib's own temp files (a write in progress, any agent's) are no change,
    // nor is what the call moved to the trash, unless something is there again.
    let paths: Vec<PathBuf> = paths
        .into_iter()
        .filter(|p| !skip.contains(p) || std::fs::symlink_metadata(p).is_ok())
        .filter(|p| !p.file_name().is_some_and(nib_files::fs::is_temp_name))
        .collect();
    // A folder with many changed files is one entry with its count.
    let mut per_folder: std::collections::BTreeMap<&Path, usize> = Default::default();
    for p in &paths {
        *per_folder.entry(p.parent().unwrap_or(p)).or_default() += 1;
    }
    let mut folded: Vec<String> = Vec::new();
    let mut listed = Vec::new();
    let mut rows = String::new();
    let mut taken = 0;
    for (folder, n) in &per_folder {
        if *n >= FOLD {
            folded.push(format!("{}/ ({n} files)", ctx.workspace.display(folder)));
        }
    }
    for p in &paths {
        if per_folder
            .get(p.parent().unwrap_or(p))
            .is_some_and(|n| *n >= FOLD)
        {
            continue;
        }
        if taken == LISTED {
            break;
        }
        taken += 1;
        let shown = ctx.workspace.display(p);
        // The tools' writes kept by now: one kept after the read is newer
        // than what was read.
        let read_at = shell.tool_writes.now();
        let Ok(file) = nib_files::fs::read_file(&ctx.scope, p, nib_files::context::TEXT_LIMIT)
        else {
            listed.push(shown);
            continue;
        };
        let tag = Tag::of(&file.bytes);
        if known_to_agent(ctx, p, tag, &file.bytes) {
            // Written through nib's own tools (or already shown): not news.
            continue;
        }
        if written_by_a_tool(shell, start, read_at, p, tag) {
            // Another agent's edit or write while this call ran (ended, or
            // still running: it said what it puts in place before it was
            // there): not this call's change.
            continue;
        }
        // A program's change: the tools' earlier writes no longer say what
        // the file holds (a later call putting one back is a change too).
        shell.tool_writes.forget(&canonical(p));
        listed.push(format!("{shown}#{tag}"));
        if let Some(part) = small_change(ctx, p, &shown, tag, &file.bytes) {
            rows.push_str(&part);
        }
    }
    if listed.is_empty() && folded.is_empty() && !cut_short {
        return String::new();
    }
    let mut out = String::new();
    if !listed.is_empty() || !folded.is_empty() {
        let in_folded: usize = per_folder.values().filter(|n| **n >= FOLD).sum();
        let more = paths.len().saturating_sub(taken + in_folded);
        let mut entries = nib_text::by_folder::group(&listed);
        entries.extend(folded);
        out.push_str(&format!(
            "[changed: {}{}]\n",
            entries.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    out.push_str(&rows);
    if cut_short {
        out.push_str(&format!(
            "[changed files: the roots hold over {WALK_LIMIT} entries, so not all were checked]\n"
        ));
    }
    out
}

/// A folder with this many changed files is listed as one entry with its count.
const FOLD: usize = 8;

/// Whether the agent's newest version of the file is exactly this content.
fn known_to_agent(ctx: &Ctx, path: &Path, tag: Tag, bytes: &[u8]) -> bool {
    let Ok(canonical) = nib_files::fs::canonical(path) else {
        return false;
    };
    ctx.with_seen(|s| {
        s.versions(&canonical)
            .next()
            .is_some_and(|v| v.tag == tag && *v.text == Text::decode(bytes))
    })
}

/// Whether nib's edit or write tool (any agent's call) wrote exactly this
/// content to the file while the call ran.
fn written_by_a_tool(shell: &Nibash, start: &Start, read_at: u64, path: &Path, tag: Tag) -> bool {
    shell
        .tool_writes
        .wrote_since(start.tool_writes, read_at, &canonical(path), tag)
}

/// A changed file's canonical path, as the tools' writes are kept.
fn canonical(path: &Path) -> PathBuf {
    nib_files::fs::canonical(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The changed rows of a file the agent saw, when the change is small; the
/// rows printed count as seen in the new version.
fn small_change(ctx: &Ctx, path: &Path, shown: &str, tag: Tag, bytes: &[u8]) -> Option<String> {
    let canonical = nib_files::fs::canonical(path).ok()?;
    let old = ctx.with_seen(|s| s.versions(&canonical).next().map(|v| Arc::clone(&v.text)))?;
    let new = Arc::new(Text::decode(bytes));
    if *old == *new {
        return None;
    }
    let mut changed: Vec<usize> = Vec::new();
    let mut removed = 0;
    for op in nib_text::text::diff_ops(&old, &new) {
        match op {
            similar::DiffOp::Equal { .. } => {}
            similar::DiffOp::Delete { old_len, .. } => removed += old_len,
            similar::DiffOp::Insert {
                new_index, new_len, ..
            } => changed.extend(new_index + 1..=new_index + new_len),
            similar::DiffOp::Replace {
                new_index, new_len, ..
            } => changed.extend(new_index + 1..=new_index + new_len),
        }
    }
    if changed.len() + removed > SMALL_CHANGE {
        return None;
    }
    let mut out = format!(
        "{} changed since you saw it{}:\n",
        hashline::header(shown, tag),
        if removed > 0 {
            format!(" ({removed} lines removed)")
        } else {
            String::new()
        }
    );
    for &n in &changed {
        out.push_str(&hashline::anchored_row(n, new.line(n).unwrap_or_default()));
        out.push('\n');
    }
    ctx.with_seen(|s| s.record(&canonical, tag, &new, changed.iter().copied()));
    Some(out)
}

#[cfg(test)]
mod tests {

    #[test]
    fn changed_files_are_grouped_by_folder() {
        let shown: Vec<String> = [
            "a.txt#0001",
            "src/x.rs#0002",
            "docs/guide.md#0003",
            "src/y.rs#0004",
            "b.txt#0005",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            nib_text::by_folder::group(&shown),
            [
                "a.txt#0001",
                "b.txt#0005",
                "src/{x.rs#0002, y.rs#0004}",
                "docs/guide.md#0003"
            ]
        );
    }
    use super::*;

    #[test]
    fn only_files_modified_since_the_start_are_found_and_ignored_ones_are_not() {
        let d = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let root = d.path().to_path_buf();
        let _ = std::fs::write(root.join("old.txt"), "x");
        let _ = std::fs::write(root.join(".gitignore"), "ignored.txt\n");
        let old = SystemTime::now() - Duration::from_secs(60);
        let f = std::fs::File::options()
            .write(true)
            .open(root.join("old.txt"));
        if let Ok(f) = f {
            let _ = f.set_modified(old);
        }
        if let Ok(f) = std::fs::File::options()
            .write(true)
            .open(root.join(".gitignore"))
        {
            let _ = f.set_modified(old);
        }
        let _ = std::fs::create_dir(root.join(".git"));
        let start = file_clock_now();
        let _ = std::fs::write(root.join("new.txt"), "y");
        let _ = std::fs::write(root.join("ignored.txt"), "y");
        let _ = std::fs::write(root.join(".git/index"), "y");
        let (found, cut) = changed_since(std::slice::from_ref(&root), start);
        assert_eq!(found, vec![root.join("new.txt")]);
        assert!(!cut);
    }
}
