//! The layering, read from the code: every file of `src/`, `policy/src/`
//! and `sandbox/src/` is a module, each `crate::…` or `super::…` path in it
//! (outside its test module) an import of the module that path names, and
//! no import may close a circle. The circles that remain are listed, each
//! with the issue that removes it; a new circle, or a listed one that grew,
//! fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles not yet gone (issue 37), as the sorted module paths in each.
const KNOWN: &[&[&str]] = &[
    // `Ctx` holds the shell's state; the shell's tools take `Ctx`.
    &["context", "nibash"],
    // The call starts workers through the warm pool, which names the
    // call's types; the worker's entry reads the call's request.
    &["nibash/call", "nibash/warm", "nibash/worker"],
    &["nibash/worker/deletes", "nibash/worker/listing"],
];

type Module = Vec<String>;

/// The modules of a crate rooted at `root`, by module path.
fn modules(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "bin") {
                    stack.push(p);
                }
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().with_extension("");
            let mut m: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if m.last()
                .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
            {
                m.pop();
            }
            out.insert(m, p);
        }
    }
    out
}

/// The modules `file` (module `me`) imports.
fn imports(file: &Path, me: &Module, mods: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let text = std::fs::read_to_string(file).unwrap();
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    let mut out = BTreeSet::new();
    let mut add = |full: Vec<String>| {
        for k in (0..=full.len()).rev() {
            if mods.contains_key(&full[..k]) {
                if full[..k] != me[..] {
                    out.insert(full[..k].to_vec());
                }
                return;
            }
        }
    };
    for line in code.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        // `use crate::{a, b::c}`: each item.
        if let Some(list) = line
            .strip_prefix("use crate::{")
            .or_else(|| line.strip_prefix("pub use crate::{"))
            .and_then(|l| l.split('}').next())
        {
            for item in list.split(',') {
                add(item.trim().split("::").map(str::to_string).collect());
            }
        }
        for (at, _) in line
            .match_indices("crate::")
            .chain(line.match_indices("super::"))
        {
            let before = line[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &line[at..];
            let path: Vec<&str> = rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|p| !p.is_empty())
                .collect();
            let (base, parts): (Vec<String>, &[&str]) = match path.first() {
                Some(&"crate") => (Vec::new(), &path[1..]),
                Some(&"super") => {
                    // `super` of `a/b.rs` is `a`; of `a/mod.rs` (module `a`), the crate.
                    let mut b = me.clone();
                    b.pop();
                    (b, &path[1..])
                }
                _ => continue,
            };
            let mut full = base;
            full.extend(parts.iter().map(|p| p.to_string()));
            add(full);
        }
    }
    out
}

/// The circles of the import graph: its strongly connected parts of more
/// than one module (Tarjan's algorithm).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g Module) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let Some((w, _)) = self.graph.get_key_value(w) else {
                    continue;
                };
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let l = self.low[w].min(self.low[v]);
                    self.low.insert(v, l);
                } else if self.stack.contains(&w) {
                    let l = self.index[w].min(self.low[v]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    part.push(w.join("/"));
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.found.push(part);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

fn circles_of(root: &str) -> Vec<Vec<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(root);
    let mods = modules(&root);
    let graph = mods
        .iter()
        .map(|(m, p)| (m.clone(), imports(p, m, &mods)))
        .collect();
    circles(&graph)
}

#[test]
fn imports_close_no_circle_beyond_the_known_ones() {
    for crate_root in ["src", "policy/src", "sandbox/src"] {
        for circle in circles_of(crate_root) {
            let known = KNOWN.iter().any(|k| {
                crate_root == "src" && circle.iter().map(String::as_str).eq(k.iter().copied())
            });
            assert!(
                known,
                "{crate_root}: the imports of {circle:?} close a circle; make one of them import downward (ARCHITECTURE.md, the layers)"
            );
        }
    }
}

#[test]
fn the_check_sees_a_circle() {
    // Two modules importing each other, as the check reads them.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(dir.path().join("a.rs"), "use crate::b::Thing;\n").unwrap();
    std::fs::write(dir.path().join("b.rs"), "pub fn f() { super::a::g() }\n").unwrap();
    let mods = modules(dir.path());
    let graph = mods
        .iter()
        .map(|(m, p)| (m.clone(), imports(p, m, &mods)))
        .collect();
    assert_eq!(
        circles(&graph),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
}
