//! Where paths start and how they are shown: the project directory and the
//! client's roots.
//!
//! Tool arguments name paths relative to the project directory (or absolute,
//! `~/…`, or `~NAME/…` for a named directory, [`crate::names`]). Output shows paths relative to the project directory when they lie
//! under it, else absolute, with control characters escaped so a file name can
//! never forge a row. Roots are recorded here for the confinement issue; without
//! NIB_SANDBOX they restrict nothing, as in the original.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::names::{Names, Source};
use nib_text::path_text::{escape_control, lexical_normalize};

/// The project directory, the roots the client gave and the named directories.
#[derive(Debug)]
pub struct Workspace {
    project_dir: PathBuf,
    roots: RwLock<Option<Vec<PathBuf>>>,
    /// Shared with the workspaces made from this one ([`Workspace::sharing_names`]).
    names: Arc<RwLock<Names>>,
    /// The calling agent's own names (`hash -d`, [`Workspace::for_agent`]):
    /// looked at before the shared ones, defined only for that agent.
    own: Option<Arc<RwLock<Names>>>,
}

impl Workspace {
    /// A workspace rooted at `project_dir` with the names of its nib.json.
    /// With `auto`, folders shown often get names too ([`Names::saw`]).
    pub fn with_project_names(project_dir: PathBuf, auto: bool) -> Workspace {
        let mut names = Names::default();
        crate::names::load_project(&project_dir, &mut names);
        if auto {
            names.enable_auto(&project_dir);
        }
        let w = Workspace::new(project_dir);
        w.set_names(names);
        w
    }

    /// A workspace rooted at `project_dir` (already canonical), without names.
    pub fn new(project_dir: PathBuf) -> Workspace {
        Workspace {
            project_dir,
            roots: RwLock::new(None),
            names: Arc::new(RwLock::new(Names::default())),
            own: None,
        }
    }

    /// This workspace as one agent's call sees it: the same folder, roots
    /// (as they are now) and shared names, plus the agent's own names, where
    /// `hash -d` defines.
    pub fn for_agent(&self, own: Arc<RwLock<Names>>) -> Workspace {
        Workspace {
            project_dir: self.project_dir.clone(),
            roots: RwLock::new(self.roots.read().unwrap_or_else(|p| p.into_inner()).clone()),
            names: Arc::clone(&self.names),
            own: Some(own),
        }
    }

    /// A workspace rooted at `project_dir` whose names are `other`'s: a
    /// name either defines is a name of both.
    pub fn sharing_names(project_dir: PathBuf, other: &Workspace) -> Workspace {
        Workspace {
            project_dir,
            roots: RwLock::new(None),
            names: Arc::clone(&other.names),
            own: other.own.clone(),
        }
    }

    /// The named directories this workspace's agent sees: its own first,
    /// then the shared ones (one that clashes with its own is left out).
    pub fn names(&self) -> Names {
        let shared = self.names.read().unwrap_or_else(|p| p.into_inner());
        let Some(own) = &self.own else {
            return shared.clone();
        };
        let mut all = own.read().unwrap_or_else(|p| p.into_inner()).clone();
        for n in shared.list() {
            let _ = all.define(&n.name, &n.dir, n.source);
        }
        all.add_notes(shared.notes());
        all
    }

    /// Defines a name (see [`Names::define`]); `Err` says why it was not.
    /// With an agent's own names, `hash -d` defines there, after checking
    /// that the shared names leave room for it.
    pub fn define_name(&self, name: &str, dir: &Path, source: Source) -> Result<(), String> {
        let write = |names: &RwLock<Names>| {
            names
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .define(name, dir, source)
        };
        match &self.own {
            Some(own) if source == Source::Hash => {
                self.names
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .check(name, dir, source)?;
                write(own)
            }
            _ => write(&self.names),
        }
    }

    /// What the next answer should say about names, once: why some were
    /// not defined at startup, and names dropped because their folder went.
    pub fn name_news(&self) -> Vec<String> {
        let mut news = Vec::new();
        for names in std::iter::once(&self.names).chain(&self.own) {
            let mut names = names.write().unwrap_or_else(|p| p.into_inner());
            news.append(&mut names.unannounced);
            news.extend(names.prune());
        }
        news
    }

    /// Changes the names in place.
    pub fn update_names<R>(&self, f: impl FnOnce(&mut Names) -> R) -> R {
        f(&mut self.names.write().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replaces the names (a worker receives the broker's).
    pub fn set_names(&self, names: Names) {
        *self.names.write().unwrap_or_else(|p| p.into_inner()) = names;
    }

    /// The project directory.
    pub fn project_dir(&self) -> &Path {
        &self.project_dir
    }

    /// The roots in force: the client's when it gave some, else the project directory.
    pub fn roots(&self) -> Vec<PathBuf> {
        let guard = self.roots.read().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(r) if !r.is_empty() => r.clone(),
            _ => vec![self.project_dir.clone()],
        }
    }

    /// Whether the client has answered with its roots.
    pub fn has_client_roots(&self) -> bool {
        let guard = self.roots.read().unwrap_or_else(|p| p.into_inner());
        guard.is_some()
    }

    /// Records the client's roots (file:// URIs already turned into paths).
    pub fn set_client_roots(&self, roots: Vec<PathBuf>) {
        let mut guard = self.roots.write().unwrap_or_else(|p| p.into_inner());
        *guard = Some(roots);
    }

    /// The scope a call runs under: open, confirm-outside-roots, or sandbox
    /// (see [`crate::fs::Scope`]), with the roots opened now.
    pub fn scope(
        &self,
        sandbox: bool,
        confirm_outside_roots: bool,
    ) -> Result<crate::fs::Scope, String> {
        if !sandbox && !confirm_outside_roots {
            return Ok(crate::fs::Scope::Open);
        }
        let mut roots = Vec::new();
        let mut failures = Vec::new();
        for r in self.roots() {
            match crate::fs::Root::open(&r) {
                Ok(root) => roots.push(root),
                Err(e) => failures.push(format!("{}: {e}", r.display())),
            }
        }
        if roots.is_empty() {
            return Err(format!(
                "no root folder could be opened ({}), so nothing can be confined to them",
                failures.join("; ")
            ));
        }
        let roots: std::sync::Arc<[crate::fs::Root]> = roots.into();
        Ok(if sandbox {
            crate::fs::Scope::Sandbox(roots)
        } else {
            crate::fs::Scope::Confirm(roots)
        })
    }

    /// The absolute path an argument names. `..` is kept for the kernel to
    /// resolve; nothing here decides what may be touched.
    pub fn resolve(&self, arg: &str) -> PathBuf {
        if arg == "~"
            && let Some(home) = std::env::var_os("HOME")
        {
            return PathBuf::from(home);
        }
        if let Some(rest) = arg.strip_prefix("~/")
            && let Some(home) = std::env::var_os("HOME")
        {
            return PathBuf::from(home).join(rest);
        }
        if arg.starts_with('~')
            && let Some(p) = self
                .own
                .iter()
                .chain(std::iter::once(&self.names))
                .find_map(|n| n.read().unwrap_or_else(|p| p.into_inner()).expand(arg))
        {
            return p;
        }
        let p = Path::new(arg);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.project_dir.join(p)
        }
    }

    /// For an argument `~NAME/…` whose NAME is no name here (and not `~`
    /// or `~/…`, the home folder), what to say about it.
    pub fn unknown_name(&self, arg: &str) -> Option<String> {
        let rest = arg.strip_prefix('~')?;
        let name = rest.split('/').next().unwrap_or(rest);
        if name.is_empty() || !crate::names::valid_name(name) {
            return None;
        }
        let known = self
            .own
            .iter()
            .chain(std::iter::once(&self.names))
            .any(|n| {
                n.read()
                    .unwrap_or_else(|p| p.into_inner())
                    .expand(&format!("~{name}"))
                    .is_some()
            });
        (!known).then(|| {
            format!(
                "~{name} is not a name here: names come from nib.json's \"directories\", JVM source roots, hash -d, and the folders an agent kept seeing (those live in its MCP session, and are kept for the command line once used in two sessions); write the folder's path instead"
            )
        })
    }

    /// How a path is shown to the agent.
    pub fn display(&self, path: &Path) -> String {
        let lexical = lexical_normalize(path);
        let mut shown = match lexical.strip_prefix(&self.project_dir) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => lexical.to_string_lossy().into_owned(),
        };
        if let Some(own) = &self.own {
            let own = own.read().unwrap_or_else(|p| p.into_inner());
            if !own.is_empty()
                && let Some(short) = own.shorten(&lexical)
                && short.len() < shown.len()
            {
                shown = short;
            }
        }
        let mut names = self.names.write().unwrap_or_else(|p| p.into_inner());
        if !names.is_empty()
            && let Some(short) = names.shorten(&lexical)
            && short.len() < shown.len()
        {
            shown = short;
        }
        if lexical.starts_with(&self.project_dir) {
            names.saw(&lexical, &shown);
        }
        escape_control(&shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_relative_under_the_project() {
        let w = Workspace::new(PathBuf::from("/p/proj"));
        assert_eq!(w.display(Path::new("/p/proj/src/a.rs")), "src/a.rs");
        assert_eq!(w.display(Path::new("/p/proj")), ".");
        assert_eq!(w.display(Path::new("/p/proj/./src/../b.rs")), "b.rs");
        assert_eq!(w.display(Path::new("/p/projx/a")), "/p/projx/a");
        assert_eq!(w.display(Path::new("/etc/hosts")), "/etc/hosts");
    }

    #[test]
    fn control_characters_cannot_forge_rows() {
        let w = Workspace::new(PathBuf::from("/p"));
        assert_eq!(w.display(Path::new("/p/a\n1:evil")), "a\\n1:evil");
        assert_eq!(escape_control("x\u{1b}[31m"), "x\\x1B[31m");
    }

    #[test]
    fn resolve_joins_relative_paths() {
        let w = Workspace::new(PathBuf::from("/p"));
        assert_eq!(w.resolve("a/b"), PathBuf::from("/p/a/b"));
        assert_eq!(w.resolve("/x"), PathBuf::from("/x"));
        assert_eq!(w.roots(), vec![PathBuf::from("/p")]);
        w.set_client_roots(vec![PathBuf::from("/r")]);
        assert_eq!(w.roots(), vec![PathBuf::from("/r")]);
    }
}
