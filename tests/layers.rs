//! The layering, read from the code and checked against ARCHITECTURE.md's
//! "Layers" section. Between crates: each workspace crate's path
//! dependencies in its Cargo.toml go only to crates written beneath it (the
//! compiler then refuses any upward import). Within each crate: every file
//! is a module, each `crate::…` or `super::…` path in it (outside its test
//! modules) an import of the module that path names — an item the crate
//! root re-exports counts as an import of the module it comes from — and so
//! is each bare `child::…` path to a module the file declares (`mod child;`). An
//! import may go to its own group or to a layer beneath; no import may
//! close a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose modules the check reads, by their source folder.
const CRATE_SOURCES: &[&str] = &[
    "src",
    "text/src",
    "files/src",
    "shell/src",
    "command_rules/src",
    "sandbox/src",
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
fn imports(
    file: &Path,
    me: &Module,
    mods: &BTreeMap<Module, PathBuf>,
    reexports: &BTreeMap<String, Module>,
) -> BTreeSet<Module> {
    let text = std::fs::read_to_string(file).unwrap();
    let code = text.split("\n#[cfg(test)]\nmod ").next().unwrap_or("");
    let mut out = BTreeSet::new();
    let mut add = |full: Vec<String>| {
        for k in (0..=full.len()).rev() {
            if mods.contains_key(&full[..k]) {
                let mut m = full[..k].to_vec();
                if let (0, Some(item)) = (k, full.first())
                    && let Some(from) = reexports.get(item)
                {
                    m = from.clone();
                }
                if m != me[..] {
                    out.insert(m);
                }
                return;
            }
        }
    };
    // The modules this file declares (`mod x;`): a bare `x::…` path in it
    // is an import of its child.
    let children: Vec<String> = code
        .lines()
        .map(str::trim)
        .filter_map(|l| {
            let l = l
                .strip_prefix("pub ")
                .or_else(|| l.strip_prefix("pub(crate) "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect();
    for line in code.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        for child in &children {
            let pattern = format!("{child}::");
            for (at, _) in line.match_indices(&pattern) {
                let before = line[..at].chars().last();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let mut full = me.clone();
                full.push(child.clone());
                add(full);
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
            let head = rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("");
            let path: Vec<&str> = head.split("::").filter(|p| !p.is_empty()).collect();
            // `crate::{a, b::c}`: each item, on top of the path before it.
            let items: Vec<Vec<&str>> = match rest[head.len()..].strip_prefix('{') {
                Some(list) => list
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|i| i.trim().split("::").collect())
                    .collect(),
                None => vec![Vec::new()],
            };
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
            for item in items {
                let mut full = base.clone();
                full.extend(parts.iter().chain(&item).map(|p| p.to_string()));
                add(full);
            }
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

/// What the crate root re-exports: item name → the module it comes from
/// (`pub use m::{A, b as c};`).
fn reexports(root: &Path) -> BTreeMap<String, Module> {
    let lib = std::fs::read_to_string(root.join("lib.rs")).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in lib.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.trim_end_matches(';');
        let rest = rest.strip_prefix("crate::").unwrap_or(rest);
        let (path, items) = match rest.split_once("::{") {
            Some((p, list)) => (p, list.trim_end_matches('}').split(',').collect::<Vec<_>>()),
            None => match rest.rsplit_once("::") {
                Some((p, item)) => (p, vec![item]),
                None => continue,
            },
        };
        let module: Module = path.split("::").map(str::to_string).collect();
        for item in items {
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            if !name.is_empty() {
                out.insert(name.to_string(), module.clone());
            }
        }
    }
    out
}

/// The import graph of the crate rooted at `root` (relative to the package).
fn graph_of(
    root: &Path,
) -> (
    BTreeMap<Module, PathBuf>,
    BTreeMap<Module, BTreeSet<Module>>,
) {
    let mods = modules(root);
    let re = reexports(root);
    let graph = mods
        .iter()
        .map(|(m, p)| (m.clone(), imports(p, m, &mods, &re)))
        .collect();
    (mods, graph)
}

/// ARCHITECTURE.md's layers for `crate_root`: each group's layer, 0 the top.
fn written_layers(crate_root: &str) -> BTreeMap<String, usize> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let fence = format!("```layers {crate_root}\n");
    let at = doc
        .find(&fence)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no `{}` block", fence.trim()));
    let block = &doc[at + fence.len()..];
    let block = &block[..block.find("```").unwrap()];
    let mut out = BTreeMap::new();
    for (rank, line) in block.lines().enumerate() {
        for group in line.split_whitespace() {
            assert!(
                out.insert(group.to_string(), rank).is_none(),
                "ARCHITECTURE.md names {group} twice in the layers of {crate_root}"
            );
        }
    }
    out
}

/// The group a module belongs to: the longest written name that is a
/// prefix of its path (`lib` for the crate root).
fn group_of<'l>(m: &Module, layers: &'l BTreeMap<String, usize>) -> Option<&'l str> {
    if m.is_empty() {
        return layers.get_key_value("lib").map(|(k, _)| k.as_str());
    }
    (1..=m.len())
        .rev()
        .map(|k| m[..k].join("/"))
        .find_map(|name| layers.get_key_value(&name).map(|(k, _)| k.as_str()))
}

/// Every way the crate's imports break its written layering.
fn breaches(crate_root: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_root);
    let (mods, graph) = graph_of(&root);
    let layers = written_layers(crate_root);
    let mut out = Vec::new();
    for name in layers.keys() {
        let known = name == "lib"
            || mods
                .keys()
                .any(|m| m.join("/") == *name || m.join("/").starts_with(&format!("{name}/")));
        if !known {
            out.push(format!(
                "ARCHITECTURE.md's layers of {crate_root} name {name}, which no module is"
            ));
        }
    }
    for (m, targets) in &graph {
        let Some(from) = group_of(m, &layers) else {
            out.push(format!(
                "{crate_root}: {} is in no layer; add it to ARCHITECTURE.md's layers",
                m.join("/")
            ));
            continue;
        };
        for t in targets {
            let Some(to) = group_of(t, &layers) else {
                continue; // reported as a module in no layer
            };
            if from == to {
                continue;
            }
            let why = if layers[to] <= layers[from] {
                ", which is not beneath it; move what it needs down, or hand it over from above"
            } else {
                continue;
            };
            out.push(format!(
                "{crate_root}: {} ({from}) imports {} ({to}){why}",
                m.join("/"),
                t.join("/"),
            ));
        }
    }
    for circle in circles(&graph) {
        out.push(format!(
            "{crate_root}: the imports of {circle:?} close a circle; make one of them import downward"
        ));
    }
    out
}

#[test]
fn imports_follow_the_written_layers_and_close_no_circle() {
    let found: Vec<String> = CRATE_SOURCES.iter().copied().flat_map(breaches).collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The workspace crates a crate's manifest depends on by path (its
/// `[dependencies]`, not its dev-dependencies), by package name.
fn path_dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut out = BTreeSet::new();
    let mut in_deps = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if !(in_deps && line.contains("path = ")) {
            continue;
        }
        if let Some((name, _)) = line.split_once('=') {
            out.insert(name.trim().to_string());
        }
    }
    out
}

#[test]
fn crates_depend_only_on_crates_written_beneath_them() {
    // ARCHITECTURE.md's crate layers name packages; "nib-tools" is the root's.
    let layers = written_layers("crates");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for source in CRATE_SOURCES {
        let folder = root.join(source).parent().unwrap().to_path_buf();
        let manifest = folder.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .unwrap()
            .trim_matches('"')
            .to_string();
        let Some(&mine) = layers.get(&name) else {
            found.push(format!("{name} is in no crate layer of ARCHITECTURE.md"));
            continue;
        };
        for dep in path_dependencies(&manifest) {
            match layers.get(&dep) {
                Some(&theirs) if theirs > mine => {}
                Some(_) => found.push(format!(
                    "{name} depends on {dep}, which is not written beneath it"
                )),
                None => found.push(format!(
                    "{name} depends on {dep}, which is in no crate layer of ARCHITECTURE.md"
                )),
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_circle_and_an_upward_import() {
    // Two modules importing each other, as the check reads them.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lib.rs"),
        "pub mod a;\npub mod b;\npub mod c;\npub use c::Thing;\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("a.rs"), "use crate::b::Thing;\n").unwrap();
    std::fs::write(dir.path().join("b.rs"), "pub fn f() { super::a::g() }\n").unwrap();
    std::fs::write(
        dir.path().join("c.rs"),
        "pub struct Thing;\n#[cfg(test)]\nmod tests { use crate::a; }\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("d.rs"), "use crate::Thing;\n").unwrap();
    // A parent calling its child by bare path, the child calling back up.
    std::fs::create_dir(dir.path().join("p")).unwrap();
    std::fs::write(
        dir.path().join("p").join("mod.rs"),
        "mod q;\npub fn g() {}\npub fn f() { q::h() }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("p").join("q.rs"),
        "pub fn h() { super::g() }\n",
    )
    .unwrap();
    let (_, graph) = graph_of(dir.path());
    assert_eq!(
        circles(&graph),
        vec![
            vec!["a".to_string(), "b".to_string()],
            vec!["p".to_string(), "p/q".to_string()]
        ]
    );
    // The re-exported item is an import of the module it comes from; a
    // test module's imports are not counted.
    assert_eq!(
        graph[&vec!["d".to_string()]],
        BTreeSet::from([vec!["c".to_string()]])
    );
    assert!(graph[&vec!["c".to_string()]].is_empty());
    let layers = BTreeMap::from([("d".to_string(), 1), ("c".to_string(), 0)]);
    assert_eq!(group_of(&vec!["d".to_string()], &layers), Some("d"));
    assert!(layers[group_of(&vec!["c".to_string()], &layers).unwrap()] <= layers["d"]);
}

/// Every `nib_settings::NAME` a crate's source names (`use` lines and paths).
fn settings_names(folder: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (_, rest) in text
                .match_indices("nib_settings::")
                .map(|(i, _)| text.split_at(i))
            {
                let rest = &rest["nib_settings::".len()..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(list) => list.split('}').next().unwrap_or("").split(',').collect(),
                    None => vec![rest],
                };
                for name in names {
                    let name: String = name
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        out.insert(name);
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_file_tools_are_handed_only_their_settings() {
    // nib-files reads what file tools need (`FileTools`) and the names of
    // the variables it documents; the broker's `Config` stays the broker's.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let names = settings_names(&root.join("files"));
    assert!(names.contains("FileTools"), "{names:?}");
    let others: Vec<&String> = names
        .iter()
        .filter(|n| *n != "FileTools" && !n.starts_with("NIB_"))
        .collect();
    assert!(
        others.is_empty(),
        "nib-files names {others:?} of nib-settings; hand it FileTools"
    );
    // The check sees a use of the whole Config.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.rs"),
        "use nib_settings::{FileTools, Config};\n",
    )
    .unwrap();
    assert!(settings_names(dir.path()).contains("Config"));
}
