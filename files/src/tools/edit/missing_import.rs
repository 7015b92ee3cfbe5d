//! The Java class an edit starts using without importing it.
//!
//! Two steps, kept apart so the first can be tested as a whole value:
//! [`unimported`] reads the edited file's syntax tree and names the capitalised
//! types the new rows use that the file neither declares, imports, nor gets
//! from `java.lang`; [`resolve`] then looks for each name among well-known
//! JDK classes and the project's own `NAME.java` files (through the same
//! confined walk grep uses, bounded in files and time) and returns the
//! qualified names to import. A name found nowhere, or only in the file's own
//! package, gives no warning: nib warns only when it knows the fix.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tree_sitter::Node;

use crate::fs;
use crate::search::{self, GlobFilter, WalkOptions};
use nib_text::lang::{self, Lang};

/// How long the project look for `NAME.java` may take.
const LOOK_BUDGET: Duration = Duration::from_secs(2);

/// Types visible in every Java file without an import.
const JAVA_LANG: &[&str] = &[
    "AutoCloseable",
    "Appendable",
    "ArithmeticException",
    "ArrayIndexOutOfBoundsException",
    "AssertionError",
    "Boolean",
    "Byte",
    "CharSequence",
    "Character",
    "Class",
    "ClassCastException",
    "ClassNotFoundException",
    "CloneNotSupportedException",
    "Cloneable",
    "Comparable",
    "Deprecated",
    "Double",
    "Enum",
    "Error",
    "Exception",
    "Float",
    "FunctionalInterface",
    "IllegalArgumentException",
    "IllegalStateException",
    "IndexOutOfBoundsException",
    "Integer",
    "InterruptedException",
    "Iterable",
    "Long",
    "Math",
    "NullPointerException",
    "Number",
    "NumberFormatException",
    "Object",
    "OutOfMemoryError",
    "Override",
    "Process",
    "ProcessBuilder",
    "Readable",
    "Record",
    "ReflectiveOperationException",
    "Runnable",
    "Runtime",
    "RuntimeException",
    "SafeVarargs",
    "SecurityException",
    "Short",
    "StackOverflowError",
    "StrictMath",
    "String",
    "StringBuffer",
    "StringBuilder",
    "SuppressWarnings",
    "System",
    "Thread",
    "ThreadLocal",
    "Throwable",
    "UnsupportedOperationException",
    "Void",
];

/// Well-known JDK classes outside `java.lang`, by simple name.
const JDK: &[&str] = &[
    "java.io.BufferedReader",
    "java.io.BufferedWriter",
    "java.io.File",
    "java.io.IOException",
    "java.io.InputStream",
    "java.io.OutputStream",
    "java.io.PrintStream",
    "java.io.Reader",
    "java.io.Serializable",
    "java.io.UncheckedIOException",
    "java.io.Writer",
    "java.math.BigDecimal",
    "java.math.BigInteger",
    "java.nio.charset.StandardCharsets",
    "java.nio.file.Files",
    "java.nio.file.Path",
    "java.nio.file.Paths",
    "java.time.Duration",
    "java.time.Instant",
    "java.time.LocalDate",
    "java.time.LocalDateTime",
    "java.util.ArrayDeque",
    "java.util.ArrayList",
    "java.util.Arrays",
    "java.util.Collection",
    "java.util.Collections",
    "java.util.Comparator",
    "java.util.Deque",
    "java.util.EnumMap",
    "java.util.EnumSet",
    "java.util.HashMap",
    "java.util.HashSet",
    "java.util.Iterator",
    "java.util.LinkedHashMap",
    "java.util.LinkedHashSet",
    "java.util.LinkedList",
    "java.util.List",
    "java.util.Map",
    "java.util.Objects",
    "java.util.Optional",
    "java.util.Queue",
    "java.util.Random",
    "java.util.Scanner",
    "java.util.Set",
    "java.util.SortedMap",
    "java.util.TreeMap",
    "java.util.TreeSet",
    "java.util.UUID",
    "java.util.concurrent.CompletableFuture",
    "java.util.concurrent.ConcurrentHashMap",
    "java.util.concurrent.ExecutorService",
    "java.util.concurrent.Executors",
    "java.util.concurrent.TimeUnit",
    "java.util.concurrent.atomic.AtomicInteger",
    "java.util.concurrent.atomic.AtomicLong",
    "java.util.function.BiFunction",
    "java.util.function.Consumer",
    "java.util.function.Function",
    "java.util.function.Predicate",
    "java.util.function.Supplier",
    "java.util.regex.Matcher",
    "java.util.regex.Pattern",
    "java.util.stream.Collectors",
    "java.util.stream.IntStream",
    "java.util.stream.Stream",
];

/// What [`unimported`] found: the names to place, and what the file already
/// has that decides whether a qualified name needs an import.
#[derive(Debug, PartialEq, Eq)]
pub struct Unimported {
    /// Simple names used on the new rows and not resolved in the file.
    pub names: Vec<String>,
    /// The file's package (empty for the default package).
    pub package: String,
    /// Packages imported with `.*`.
    pub wildcards: Vec<String>,
}

fn text<'a>(node: Node, src: &'a [u8]) -> &'a str {
    std::str::from_utf8(&src[node.byte_range()]).unwrap_or("")
}

fn capitalised(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

/// The capitalised type names used on lines `rows` (1-based, inclusive
/// ranges) of a Java file that it does not declare or import.
pub fn unimported(src: &[u8], rows: &[(usize, usize)]) -> Option<Unimported> {
    let tree = lang::parse(Lang::Java, src)?;
    let on_new_row = |n: Node| {
        let r = n.start_position().row + 1;
        rows.iter().any(|&(a, b)| a <= r && r <= b)
    };
    let mut declared: HashSet<&str> = HashSet::new();
    let mut imported: HashSet<String> = HashSet::new();
    let mut wildcards = Vec::new();
    let mut package = String::new();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        match node.kind() {
            "package_declaration" => {
                package = text(node, src)
                    .trim()
                    .trim_start_matches("package")
                    .trim()
                    .trim_end_matches(';')
                    .trim()
                    .to_string();
                continue;
            }
            "import_declaration" => {
                let t = text(node, src)
                    .trim()
                    .trim_start_matches("import")
                    .trim()
                    .trim_end_matches(';')
                    .trim();
                if t.starts_with("static ") {
                    continue;
                }
                let t: String = t.chars().filter(|c| !c.is_whitespace()).collect();
                match t.strip_suffix(".*") {
                    Some(pkg) => wildcards.push(pkg.to_string()),
                    None => {
                        if let Some(simple) = t.rsplit('.').next() {
                            imported.insert(simple.to_string());
                        }
                    }
                }
                continue;
            }
            "class_declaration"
            | "interface_declaration"
            | "enum_declaration"
            | "record_declaration"
            | "annotation_type_declaration" => {
                if let Some(n) = node.child_by_field_name("name") {
                    declared.insert(text(n, src));
                }
            }
            "type_parameter" => {
                let mut c = node.walk();
                for child in node.named_children(&mut c) {
                    if matches!(child.kind(), "type_identifier" | "identifier") {
                        declared.insert(text(child, src));
                        break;
                    }
                }
            }
            "type_identifier" if on_new_row(node) => {
                // In `Outer.Inner` only the leftmost name needs an import.
                let leftmost = match node.parent() {
                    Some(p) if p.kind() == "scoped_type_identifier" => p
                        .named_child(0)
                        .is_some_and(|first| first.id() == node.id()),
                    _ => true,
                };
                if leftmost {
                    used.insert(text(node, src));
                }
            }
            "method_invocation" | "field_access" | "method_reference" if on_new_row(node) => {
                // `Files.readString(…)`, `Collectors.toList()`, `List::of`.
                let object = node
                    .child_by_field_name("object")
                    .or_else(|| node.named_child(0));
                if let Some(o) = object
                    && o.kind() == "identifier"
                {
                    used.insert(text(o, src));
                }
            }
            "marker_annotation" | "annotation" if on_new_row(node) => {
                if let Some(n) = node.child_by_field_name("name")
                    && n.kind() == "identifier"
                {
                    used.insert(text(n, src));
                }
            }
            _ => {}
        }
        let mut c = node.walk();
        stack.extend(node.named_children(&mut c));
    }
    // A capitalised name that is also a variable or field in the file is
    // probably one (`Config.load()` on a field named Config is rare enough).
    let names: Vec<String> = used
        .into_iter()
        .filter(|n| capitalised(n) && n.len() > 1)
        .filter(|n| {
            !n.chars()
                .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
        })
        .filter(|n| !declared.contains(n) && !imported.contains(*n) && !JAVA_LANG.contains(n))
        .map(str::to_string)
        .collect();
    Some(Unimported {
        names,
        package,
        wildcards,
    })
}

/// The package a Java source declares, from its first lines.
fn package_of(src: &str) -> String {
    for line in src.lines().take(200) {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("package ") {
            return rest.trim().trim_end_matches(';').trim().to_string();
        }
        if t.starts_with("import ") || t.contains(" class ") || t.starts_with("class ") {
            break;
        }
    }
    String::new()
}

/// Qualified names for `found.names`: a JDK class, else the project's own
/// `NAME.java` (when exactly one package has it). Names the file reaches
/// through its package or a wildcard import are dropped.
pub fn resolve(found: &Unimported, roots: &[PathBuf], scope: &fs::Scope) -> Vec<String> {
    let mut fixes: HashMap<&str, String> = HashMap::new();
    let mut look_for: HashSet<String> = HashSet::new();
    for name in &found.names {
        match JDK.iter().find(|q| q.rsplit('.').next() == Some(name)) {
            Some(q) => {
                fixes.insert(name, (*q).to_string());
            }
            None => {
                look_for.insert(format!("{name}.java"));
            }
        }
    }
    if !look_for.is_empty() {
        let packages: Mutex<HashMap<String, BTreeSet<String>>> = Mutex::new(HashMap::new());
        let started = Instant::now();
        let Ok(globs) = GlobFilter::new(&[]) else {
            return Vec::new();
        };
        let visit = |abs: &Path, _rel: &Path| {
            if started.elapsed() > LOOK_BUDGET {
                return false;
            }
            let Some(file) = abs.file_name().and_then(|f| f.to_str()) else {
                return true;
            };
            if !look_for.contains(file) {
                return true;
            }
            if let Ok(bytes) = fs::read_file(scope, abs, 256 * 1024) {
                let pkg = package_of(&String::from_utf8_lossy(&bytes.bytes));
                if let Ok(mut p) = packages.lock() {
                    p.entry(file.trim_end_matches(".java").to_string())
                        .or_default()
                        .insert(pkg);
                }
            }
            true
        };
        search::walk(
            roots,
            &WalkOptions {
                no_ignore: false,
                globs,
                scope: scope.clone(),
            },
            &visit,
        );
        let packages = packages.into_inner().unwrap_or_default();
        for name in &found.names {
            if let Some(pkgs) = packages.get(name.as_str()) {
                // Same package needs no import; several candidates, no guess.
                if pkgs.contains(&found.package) || pkgs.len() != 1 {
                    continue;
                }
                if let Some(pkg) = pkgs.iter().next().filter(|p| !p.is_empty()) {
                    fixes.insert(name, format!("{pkg}.{name}"));
                }
            }
        }
    }
    let mut out: Vec<String> = found
        .names
        .iter()
        .filter_map(|n| fixes.get(n.as_str()).cloned())
        .filter(|q| {
            let pkg = q.rsplit_once('.').map(|(p, _)| p).unwrap_or("");
            pkg != found.package && !found.wildcards.iter().any(|w| w == pkg)
        })
        .collect();
    out.sort();
    out
}

/// The warning for an edit whose new rows use classes the file does not
/// import, with the IMPORT hunk that fixes it.
pub fn warning(fixes: &[String]) -> Option<String> {
    if fixes.is_empty() {
        return None;
    }
    let simple: Vec<&str> = fixes
        .iter()
        .map(|q| q.rsplit('.').next().unwrap_or(q))
        .collect();
    let (what, verb) = if simple.len() == 1 {
        ("class", "is")
    } else {
        ("classes", "are")
    };
    Some(format!(
        "[warning: the {what} {} {verb} used without an import; this hunk adds it: IMPORT {}]",
        simple.join(", "),
        fixes.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "package com.acme.app;\n\nimport java.util.List;\nimport com.acme.util.*;\n\npublic class Service<T> {\n    private final List<T> items;\n    Map<String, Widget> byName;\n    @Inject Clock clock;\n    void run() {\n        String s = Files.readString(path);\n        Service<T> again = null;\n        Map.Entry<String, T> e = null;\n        int n = MAX_SIZE;\n    }\n}\n";

    #[test]
    fn names_used_on_new_rows_that_the_file_does_not_resolve() {
        let all = unimported(SRC.as_bytes(), &[(7, 14)]).unwrap();
        assert_eq!(
            all,
            Unimported {
                names: vec![
                    "Clock".into(),
                    "Files".into(),
                    "Inject".into(),
                    "Map".into(),
                    "Widget".into()
                ],
                package: "com.acme.app".into(),
                wildcards: vec!["com.acme.util".into()],
            }
        );
        // Only the rows the edit wrote count.
        let one = unimported(SRC.as_bytes(), &[(11, 11)]).unwrap();
        assert_eq!(one.names, vec!["Files".to_string()]);
    }

    #[test]
    fn the_warning_names_the_hunk() {
        assert_eq!(warning(&[]), None);
        assert_eq!(
            warning(&["java.util.Map".into()]).unwrap(),
            "[warning: the class Map is used without an import; this hunk adds it: IMPORT java.util.Map]"
        );
    }

    #[test]
    fn package_line_is_read() {
        assert_eq!(package_of("// c\npackage a.b ;\nclass X {}"), "a.b");
        assert_eq!(package_of("class X {}\npackage a;"), "");
    }
}
