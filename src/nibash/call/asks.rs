//! The asks a call's worker sends and the broker answers: trash (the
//! paths checked against the call's scope), jobs of earlier calls, named
//! folders, submodules registered before git runs. The worker is not
//! trusted: each ask is checked as if an agent had made it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use nib_files::fs::Scope;
use nib_files::workspace::Workspace;
use nib_shell::channel::{Ask, Reply};

use crate::nibash::Nibash;
use crate::nibash::jobs::{Entry, ending_words};

/// Answers what a worker asks: trash and jobs.
pub(super) struct Asker {
    pub(super) scope: Scope,
    pub(super) nib: Arc<Nibash>,
    /// The agent whose call this is: `jobs`, `wait` and `kill` reach only its jobs.
    pub(super) owner: crate::nibash::jobs::Owner,
    pub(super) workspace: Workspace,
    pub(super) trashed: Vec<PathBuf>,
    /// Submodule configs whose `core.worktree` is out for a `git
    /// submodule update` of this call: written back when it asks, and at
    /// the latest when the call ends (this is dropped).
    pub(super) hidden: Vec<nib_files::fs::submodules::Hidden>,
}

impl Drop for Asker {
    fn drop(&mut self) {
        let hidden = std::mem::take(&mut self.hidden);
        for line in nib_files::fs::submodules::restore_worktrees(&self.scope, &hidden) {
            tracing::warn!("nibash: {line}");
        }
    }
}

/// Whether `name` may name a folder (what `hash -d name=dir` accepts).
pub(super) fn name_is_valid(name: &str) -> bool {
    nib_files::names::valid_name(name)
}

impl Asker {
    /// Whether `dir` is a folder the call's scope reaches (absolute, no
    /// control characters).
    pub(super) fn is_folder(&self, dir: &Path) -> bool {
        dir.is_absolute()
            && !dir.to_string_lossy().chars().any(char::is_control)
            && nib_files::fs::stat(&self.scope, dir)
                .is_ok_and(|s| s.kind == nib_files::fs::Kind::Dir)
    }

    pub(super) fn answer(&mut self, ask: Ask, deadline: Option<Instant>) -> Reply {
        match ask {
            Ask::Trash {
                paths,
                recursive,
                force,
            } => self.trash(&paths, recursive, force),
            Ask::TrashList => match nib_files::fs::trash::list_beneath(&self.workspace.roots()) {
                Ok(items) if items.is_empty() => Reply {
                    out: "the trash holds nothing from this project's roots\n".into(),
                    ..Reply::default()
                },
                Ok(items) => Reply {
                    out: items
                        .iter()
                        .map(|t| {
                            format!("{}  {}\n", t.deleted, self.workspace.display(&t.original))
                        })
                        .collect(),
                    ..Reply::default()
                },
                Err(e) => Reply {
                    err: format!("trash list: {e}\n"),
                    code: 1,
                    ..Reply::default()
                },
            },
            Ask::TrashRestore { path, force } => {
                match nib_files::fs::restore_entry(&self.scope, &path, force) {
                    Ok(()) => Reply {
                        out: format!("restored {}\n", self.workspace.display(&path)),
                        ..Reply::default()
                    },
                    Err(nib_files::fs::FsError::NotFound) => Reply {
                        err: format!(
                            "trash restore: {} is not in the trash (or its folder is gone); trash list shows what is\n",
                            self.workspace.display(&path)
                        ),
                        code: 1,
                        ..Reply::default()
                    },
                    Err(e) => Reply {
                        err: format!(
                            "trash restore: {}: {e}; nothing was restored\n",
                            self.workspace.display(&path)
                        ),
                        code: 1,
                        ..Reply::default()
                    },
                }
            }
            Ask::Jobs => Reply {
                out: self
                    .nib
                    .jobs
                    .jobs(&self.owner)
                    .iter()
                    .map(|e| {
                        let s = e.state();
                        format!(
                            "[%{}] {} {}s  {}\n",
                            e.id,
                            if s.ended() {
                                ending_words(&s)
                            } else {
                                "running".into()
                            },
                            e.age().as_secs(),
                            e.command
                        )
                    })
                    .collect(),
                ..Reply::default()
            },
            Ask::Wait { jobs } => self.wait(jobs, deadline),
            Ask::RegisterSubmodules {
                top,
                paths,
                recursive,
            } => self.register_submodules(&top, &paths, recursive),
            Ask::HideWorktrees {
                top,
                paths,
                recursive,
            } => {
                if self.is_folder(&top) {
                    self.hidden
                        .extend(nib_files::fs::submodules::hide_worktrees(
                            &self.scope,
                            &top,
                            &paths,
                            recursive,
                        ));
                }
                Reply::default()
            }
            Ask::RestoreWorktrees => {
                let hidden = std::mem::take(&mut self.hidden);
                Reply {
                    err: nib_files::fs::submodules::restore_worktrees(&self.scope, &hidden)
                        .iter()
                        .map(|l| format!("nib: {l}\n"))
                        .collect(),
                    ..Reply::default()
                }
            }
            Ask::Kill { jobs, signal: _ } => {
                let mut r = Reply::default();
                for id in jobs {
                    match self.nib.jobs.get(&self.owner, id) {
                        Some(e) if e.kill() => r.out.push_str(&format!("[job %{id} killed]\n")),
                        Some(_) => r.out.push_str(&format!("[job %{id} had already ended]\n")),
                        None => {
                            r.err.push_str(&format!("kill: %{id}: no such job\n"));
                            r.code = 1;
                        }
                    }
                }
                r
            }
        }
    }

    pub(super) fn trash(&mut self, paths: &[PathBuf], recursive: bool, force: bool) -> Reply {
        let mut r = Reply::default();
        for p in paths {
            match nib_files::fs::trash_entry(&self.scope, p, recursive) {
                Ok(()) => self.trashed.push(p.clone()),
                Err(nib_files::fs::FsError::NotFound) if force => {}
                Err(nib_files::fs::FsError::IsDirectory) => {
                    r.err.push_str(&format!(
                        "rm: cannot remove '{}': is a folder (rm -r moves it to the trash); nothing else changed\n",
                        self.workspace.display(p)
                    ));
                    r.code = 1;
                }
                Err(e) => {
                    r.err.push_str(&format!(
                        "rm: cannot remove '{}': {e}\n",
                        self.workspace.display(p)
                    ));
                    r.code = 1;
                }
            }
        }
        r
    }

    /// Registers the submodules `top` declares before git runs (its
    /// config is read-only for programs): only their url and `active`, for
    /// names and urls that run nothing (`nib_files::fs::submodules`).
    fn register_submodules(&self, top: &Path, paths: &[String], recursive: bool) -> Reply {
        if !self.is_folder(top) {
            return Reply::default();
        }
        let done = nib_files::fs::submodules::register(&self.scope, top, paths, recursive);
        Reply {
            err: done.refused.iter().map(|r| format!("nib: {r}\n")).collect(),
            ..Reply::default()
        }
    }

    pub(super) fn wait(&mut self, ids: Vec<u32>, deadline: Option<Instant>) -> Reply {
        let entries: Vec<Arc<Entry>> = if ids.is_empty() {
            self.nib.jobs.jobs(&self.owner)
        } else {
            let mut v = Vec::new();
            for id in &ids {
                match self.nib.jobs.get(&self.owner, *id) {
                    Some(e) => v.push(e),
                    None => {
                        return Reply {
                            err: format!("wait: %{id}: no such job (jobs lists them)\n"),
                            code: 127,
                            ..Reply::default()
                        };
                    }
                }
            }
            v
        };
        let mut r = Reply::default();
        for e in entries {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let ended = e.wait_for(left, |s| s.ended());
            let mut s = e.state();
            let from = s.shown.min(s.output.len());
            r.out.push_str(&String::from_utf8_lossy(&s.output[from..]));
            if !r.out.is_empty() && !r.out.ends_with('\n') {
                r.out.push('\n');
            }
            s.shown = s.output.len();
            if ended {
                s.reported = true;
                r.out.push_str(&format!(
                    "[job %{} {}: {}]\n",
                    e.id,
                    ending_words(&s),
                    e.command
                ));
                r.code = s.code().unwrap_or(0);
                drop(s);
                self.nib.jobs.remove(e.id);
            } else {
                r.out.push_str(&format!(
                    "[job %{} is still running after {}s: {}]\n",
                    e.id,
                    e.age().as_secs(),
                    e.command
                ));
                r.code = 0;
            }
        }
        r
    }
}
