//! Which files changed while a call ran, without walking the tree each time:
//! one inotify instance watches every folder of the roots that grep would
//! search (git-ignored folders and `.git/` left out), set up on the first
//! call. A call takes a [`Watcher::mark`] when it starts and asks for
//! [`Watcher::changed_since`] the mark when it ends.
//!
//! The watcher is passive: events are read only when a mark is taken or
//! asked about, so nothing runs between calls. Folders created during a call
//! are watched (and their files counted as changed) when their event is
//! read. When the kernel's queue overflowed, or the roots hold too many
//! folders to watch, callers walk the tree instead (`changes`).

use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// Folders watched at most; a larger tree falls back to walking.
pub const MAX_FOLDERS: usize = 100_000;
/// Changed paths remembered at most.
const LOG_LIMIT: usize = 100_000;

/// The roots' folders under watch and the changes read so far.
pub struct Watcher {
    fd: OwnedFd,
    state: Mutex<State>,
}

struct State {
    dirs: HashMap<i32, PathBuf>,
    ignores: Vec<(PathBuf, Gitignore)>,
    log: VecDeque<(u64, PathBuf)>,
    seq: u64,
    lost_at: Option<u64>,
}

fn flags() -> WatchFlags {
    WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_TO
        | WatchFlags::CREATE
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

impl Watcher {
    /// Watches every searched folder under `roots`; `None` when inotify is
    /// unavailable or the roots hold over [`MAX_FOLDERS`] folders.
    pub fn new(roots: &[PathBuf]) -> Option<Watcher> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        let watcher = Watcher {
            fd,
            state: Mutex::new(State {
                dirs: HashMap::new(),
                ignores: Vec::new(),
                log: VecDeque::new(),
                seq: 0,
                lost_at: None,
            }),
        };
        {
            let mut s = watcher.lock();
            for root in roots {
                if !watcher.watch_tree(&mut s, root, None) {
                    return None;
                }
            }
        }
        Some(watcher)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Watches `dir` and the folders below it; files found are logged as
    /// changed when `log_files` gives the sequence number to log them under.
    fn watch_tree(&self, s: &mut State, dir: &Path, log_files: Option<u64>) -> bool {
        let walk = ignore::WalkBuilder::new(dir)
            .hidden(false)
            .git_ignore(true)
            .git_global(false)
            .git_exclude(true)
            .parents(log_files.is_some())
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        for entry in walk.flatten() {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if !is_dir {
                if let Some(seq) = log_files
                    && entry.file_type().is_some_and(|t| t.is_file())
                {
                    s.log.push_back((seq, entry.into_path()));
                }
                continue;
            }
            if s.dirs.len() >= MAX_FOLDERS {
                return false;
            }
            let path = entry.into_path();
            let gitignore = path.join(".gitignore");
            if gitignore.is_file() {
                let mut b = GitignoreBuilder::new(&path);
                let _ = b.add(&gitignore);
                if let Ok(gi) = b.build() {
                    s.ignores.push((path.clone(), gi));
                }
            }
            match inotify::add_watch(&self.fd, &path, flags()) {
                Ok(wd) => {
                    s.dirs.insert(wd, path);
                }
                // Out of watches: the caller walks instead.
                Err(rustix::io::Errno::NOSPC) => return false,
                // The folder went away or cannot be read: nothing to watch.
                Err(_) => {}
            }
        }
        true
    }

    fn ignored(s: &State, path: &Path, is_dir: bool) -> bool {
        if path.components().any(|c| c.as_os_str() == ".git") {
            return true;
        }
        let mut best: Option<(usize, bool)> = None;
        for (dir, gi) in &s.ignores {
            if !path.starts_with(dir) {
                continue;
            }
            let depth = dir.components().count();
            let m = gi.matched_path_or_any_parents(path, is_dir);
            if (m.is_ignore() || m.is_whitelist()) && best.is_none_or(|(d, _)| depth > d) {
                best = Some((depth, m.is_ignore()));
            }
        }
        best.is_some_and(|(_, ignore)| ignore)
    }

    /// Reads the events the kernel has queued.
    fn drain(&self, s: &mut State) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut new_dirs = Vec::new();
        while let Ok(ev) = reader.next() {
            let mask = ev.events();
            if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
                s.lost_at.get_or_insert(s.seq);
                continue;
            }
            if mask.contains(ReadFlags::IGNORED) {
                s.dirs.remove(&ev.wd());
                continue;
            }
            let (Some(dir), Some(name)) = (s.dirs.get(&ev.wd()), ev.file_name()) else {
                continue;
            };
            let path = dir.join(OsStr::from_bytes(name.to_bytes()));
            let is_dir = mask.contains(ReadFlags::ISDIR);
            if Watcher::ignored(s, &path, is_dir) {
                continue;
            }
            if is_dir {
                if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                    new_dirs.push(path);
                }
            } else {
                s.log.push_back((s.seq, path));
            }
        }
        for d in new_dirs {
            let seq = s.seq;
            if !self.watch_tree(s, &d, Some(seq)) {
                s.lost_at.get_or_insert(seq);
            }
        }
        while s.log.len() > LOG_LIMIT {
            if let Some((seq, _)) = s.log.pop_front() {
                s.lost_at = Some(s.lost_at.map_or(seq, |l| l.max(seq)));
            }
        }
    }

    /// A mark to ask [`Watcher::changed_since`] about later.
    pub fn mark(&self) -> u64 {
        let mut s = self.lock();
        self.drain(&mut s);
        s.seq += 1;
        s.seq
    }

    /// Files written since `mark` (sorted, once each), or `None` when some
    /// events were lost and the caller must walk.
    pub fn changed_since(&self, mark: u64) -> Option<Vec<PathBuf>> {
        let mut s = self.lock();
        self.drain(&mut s);
        if s.lost_at.is_some_and(|l| l >= mark.saturating_sub(1)) {
            return None;
        }
        let mut out: Vec<PathBuf> = s
            .log
            .iter()
            .filter(|(q, _)| *q >= mark)
            .map(|(_, p)| p.clone())
            .collect();
        out.sort();
        out.dedup();
        // Written, then moved or removed within the call: nothing to show.
        out.retain(|p| p.symlink_metadata().is_ok_and(|m| m.is_file()));
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_after_the_mark_are_seen_and_ignored_or_earlier_ones_are_not() {
        let d = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let root = d.path().to_path_buf();
        let _ = std::fs::write(root.join(".gitignore"), "target/\n*.tmp\n");
        let _ = std::fs::create_dir_all(root.join("target"));
        let _ = std::fs::create_dir_all(root.join("src"));
        let Some(w) = Watcher::new(std::slice::from_ref(&root)) else {
            panic!("inotify is available here");
        };
        let _ = std::fs::write(root.join("before.txt"), "x");
        let mark = w.mark();
        let _ = std::fs::write(root.join("src/a.rs"), "x");
        let _ = std::fs::write(root.join("target/out"), "x");
        let _ = std::fs::write(root.join("x.tmp"), "x");
        let _ = std::fs::create_dir_all(root.join("new/deeper"));
        let _ = std::fs::write(root.join("new/deeper/b.rs"), "x");
        let _ = std::fs::write(root.join("moved.part"), "x");
        let _ = std::fs::rename(root.join("moved.part"), root.join("moved.txt"));
        let got = w.changed_since(mark);
        assert_eq!(
            got,
            Some(vec![
                root.join("moved.txt"),
                root.join("new/deeper/b.rs"),
                root.join("src/a.rs"),
            ])
        );
        let next = w.mark();
        assert_eq!(w.changed_since(next), Some(Vec::new()));
    }
}
