//! Languages: parsing with tree-sitter, and what read, edit and grep ask of a
//! syntax tree — declarations (with their doc comments and annotations), the
//! outline of a large file, the end of the block starting at a line, the
//! first parse error, and import blocks.
//!
//! One cargo feature per grammar (`lang-java` … `lang-zig`), all on by
//! default. Parsers are reused (a pool per language) and a tree is parsed
//! once per file version (a small cache keyed by the bytes' hash). Files in
//! other languages keep the indentation heuristics of `outline.rs` and
//! `edit/apply.rs`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use tree_sitter::{InputEdit, Language, Node, Parser, Point, Tree};

/// The languages nib parses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    /// Java.
    Java,
    /// Kotlin.
    Kotlin,
    /// TypeScript.
    TypeScript,
    /// TSX.
    Tsx,
    /// JavaScript (and JSX).
    JavaScript,
    /// Go.
    Go,
    /// Python.
    Python,
    /// Rust.
    Rust,
    /// C.
    C,
    /// C++.
    Cpp,
    /// Zig.
    Zig,
}

impl Lang {
    /// The language of a file, by extension, when its grammar is built in.
    pub fn of(path: &Path) -> Option<Lang> {
        let ext = path.extension()?.to_string_lossy().to_ascii_lowercase();
        let lang = match ext.as_str() {
            "java" => Lang::Java,
            "kt" | "kts" => Lang::Kotlin,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "js" | "jsx" | "mjs" | "cjs" => Lang::JavaScript,
            "go" => Lang::Go,
            "py" | "pyi" => Lang::Python,
            "rs" => Lang::Rust,
            "c" | "h" => Lang::C,
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => Lang::Cpp,
            "zig" => Lang::Zig,
            _ => return None,
        };
        lang.grammar().is_some().then_some(lang)
    }

    fn grammar(self) -> Option<Language> {
        match self {
            #[cfg(feature = "lang-java")]
            Lang::Java => Some(tree_sitter_java::LANGUAGE.into()),
            #[cfg(feature = "lang-kotlin")]
            Lang::Kotlin => Some(tree_sitter_kotlin_ng::LANGUAGE.into()),
            #[cfg(feature = "lang-typescript")]
            Lang::TypeScript => Some(tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into()),
            #[cfg(feature = "lang-typescript")]
            Lang::Tsx => Some(tree_sitter_typescript::LANGUAGE_TSX.into()),
            #[cfg(feature = "lang-javascript")]
            Lang::JavaScript => Some(tree_sitter_javascript::LANGUAGE.into()),
            #[cfg(feature = "lang-go")]
            Lang::Go => Some(tree_sitter_go::LANGUAGE.into()),
            #[cfg(feature = "lang-python")]
            Lang::Python => Some(tree_sitter_python::LANGUAGE.into()),
            #[cfg(feature = "lang-rust")]
            Lang::Rust => Some(tree_sitter_rust::LANGUAGE.into()),
            #[cfg(feature = "lang-c")]
            Lang::C => Some(tree_sitter_c::LANGUAGE.into()),
            #[cfg(feature = "lang-cpp")]
            Lang::Cpp => Some(tree_sitter_cpp::LANGUAGE.into()),
            #[cfg(feature = "lang-zig")]
            Lang::Zig => Some(tree_sitter_zig::LANGUAGE.into()),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Node kinds that declare something with a name.
    fn declaration_kinds(self) -> &'static [&'static str] {
        match self {
            Lang::Java => &[
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
                "method_declaration",
                "constructor_declaration",
                "field_declaration",
                "enum_constant",
            ],
            Lang::Kotlin => &[
                "class_declaration",
                "object_declaration",
                "function_declaration",
                "property_declaration",
                "companion_object",
                "type_alias",
            ],
            Lang::TypeScript | Lang::Tsx | Lang::JavaScript => &[
                "function_declaration",
                "generator_function_declaration",
                "class_declaration",
                "abstract_class_declaration",
                "method_definition",
                "interface_declaration",
                "type_alias_declaration",
                "enum_declaration",
                "public_field_definition",
                "field_definition",
                "variable_declarator",
                "method_signature",
                "property_signature",
            ],
            Lang::Go => &[
                "function_declaration",
                "method_declaration",
                "type_spec",
                "const_spec",
                "var_spec",
                "field_declaration",
                "method_elem",
            ],
            Lang::Python => &["function_definition", "class_definition"],
            Lang::Rust => &[
                "function_item",
                "function_signature_item",
                "struct_item",
                "enum_item",
                "union_item",
                "trait_item",
                "impl_item",
                "mod_item",
                "const_item",
                "static_item",
                "type_item",
                "macro_definition",
                "field_declaration",
                "enum_variant",
            ],
            Lang::C => &[
                "function_definition",
                "struct_specifier",
                "enum_specifier",
                "union_specifier",
                "type_definition",
                "declaration",
                "field_declaration",
            ],
            Lang::Cpp => &[
                "function_definition",
                "class_specifier",
                "struct_specifier",
                "enum_specifier",
                "union_specifier",
                "namespace_definition",
                "type_definition",
                "alias_declaration",
                "declaration",
                "field_declaration",
            ],
            Lang::Zig => &[
                "function_declaration",
                "variable_declaration",
                "test_declaration",
                "container_field",
            ],
        }
    }

    /// Nodes that wrap a declaration and start before it (decorators, exports, templates).
    fn wrapper_kinds(self) -> &'static [&'static str] {
        match self {
            Lang::Python => &["decorated_definition"],
            Lang::TypeScript | Lang::Tsx | Lang::JavaScript => &[
                "export_statement",
                "lexical_declaration",
                "variable_declaration",
            ],
            Lang::Cpp => &["template_declaration"],
            Lang::Go => &["type_declaration", "const_declaration", "var_declaration"],
            _ => &[],
        }
    }

    /// Import node kinds (Java and Kotlin keep an import block).
    fn import_kinds(self) -> &'static [&'static str] {
        match self {
            Lang::Java => &["import_declaration"],
            Lang::Kotlin => &["import", "import_header"],
            _ => &[],
        }
    }
}

/// A declaration in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decl {
    /// Its own name.
    pub name: String,
    /// `Type.member` for members, the name for top-level declarations.
    pub qualified: String,
    /// First line (1-based), doc comments and annotations included.
    pub start: usize,
    /// The line the declaration itself starts on.
    pub head: usize,
    /// Last line (1-based).
    pub end: usize,
    /// 0 for top level, 1 for members of a top-level declaration, and so on.
    pub depth: usize,
}

type Pool = Mutex<HashMap<Lang, Vec<Parser>>>;
type Key = (Lang, u64);

/// A small cache of recent values, bounded by count and by a weight (the
/// source bytes behind each value): the most recent entry always stays.
struct Recent<V> {
    map: HashMap<Key, (V, usize)>,
    order: std::collections::VecDeque<Key>,
    weight: usize,
    max_len: usize,
    max_weight: usize,
}

impl<V: Clone> Recent<V> {
    fn new(max_len: usize, max_weight: usize) -> Recent<V> {
        Recent {
            map: HashMap::new(),
            order: std::collections::VecDeque::new(),
            weight: 0,
            max_len,
            max_weight,
        }
    }

    fn get(&self, key: &Key) -> Option<V> {
        self.map.get(key).map(|(v, _)| v.clone())
    }

    /// Drops the oldest entries that a new one of `weight` would evict
    /// anyway, before it is made: a large parse then never holds memory
    /// next to the trees it replaces.
    fn make_room(&mut self, weight: usize) -> usize {
        let before = self.weight;
        while !self.order.is_empty()
            && (self.order.len() >= self.max_len || self.weight + weight > self.max_weight)
        {
            if let Some(old) = self.order.pop_front()
                && let Some((_, w)) = self.map.remove(&old)
            {
                self.weight -= w;
            }
        }
        before - self.weight
    }

    fn insert(&mut self, key: Key, value: V, weight: usize) {
        if let Some((_, w)) = self.map.insert(key, (value, weight)) {
            self.weight -= w;
            self.order.retain(|k| *k != key);
        }
        self.order.push_back(key);
        self.weight += weight;
        while self.order.len() > 1
            && (self.order.len() > self.max_len || self.weight > self.max_weight)
        {
            if let Some(old) = self.order.pop_front()
                && let Some((_, w)) = self.map.remove(&old)
            {
                self.weight -= w;
            }
        }
    }
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::default)
}

/// Source bytes whose trees the cache keeps: 64 KiB holds the trees of a
/// dozen ordinary source files, about 2.5 MiB (128 KiB held 4–5 MiB after a
/// run of reads, an eighth of the server's peak over the bench), and any
/// file under it keeps its tree from a read to the edit that follows.
const TREE_BUDGET: usize = 64 << 10;

/// Trees cost about 40 times their source in memory (a 5,000-line file's
/// tree is 5–10 MiB): keep [`TREE_BUDGET`] of source's worth, and always the
/// latest edited version, which the next edit of that file reparses from. A
/// read of a file larger than the budget keeps no tree (what reads need of
/// it — declarations, the outline — is cached on its own, small).
fn cache() -> &'static Mutex<Recent<Arc<Tree>>> {
    static CACHE: OnceLock<Mutex<Recent<Arc<Tree>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Recent::new(64, TREE_BUDGET)))
}

/// Whether a new tree is kept when it is larger than the budget.
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    /// Only within the budget (a read's tree).
    WithinBudget,
    /// As the latest, whatever its size (an edit's tree).
    Latest,
    /// Only until the call ends: the tree serves a summary that is cached
    /// on its own (declarations), so keeping it would only hold memory.
    CallOnly,
}

fn tree_key(lang: Lang, source: &[u8]) -> Key {
    (lang, xxhash_rust::xxh3::xxh3_64(source))
}

thread_local! {
    /// The last tree this thread's call parsed without keeping it (a large
    /// file's, or one made only for its declarations), kept until the call
    /// ends ([`release_call_trees`]): declarations, outline and imports of
    /// one version then take one parse between them.
    static CALL_TREE: std::cell::RefCell<Option<(Key, Arc<Tree>)>> =
        const { std::cell::RefCell::new(None) };
}

fn cached(key: Key) -> Option<Arc<Tree>> {
    if let Some(t) = cache().lock().ok().and_then(|c| c.get(&key)) {
        return Some(t);
    }
    CALL_TREE.with_borrow(|slot| {
        slot.as_ref()
            .filter(|(k, _)| *k == key)
            .map(|(_, t)| Arc::clone(t))
    })
}

/// The source bytes behind a tree (its weight in the cache).
fn tree_weight(tree: &Tree) -> usize {
    tree.root_node().end_byte()
}

/// The syntax tree of `source` for this call only: from the cache when it
/// is there, else parsed and dropped when the call ends.
fn parse_for_call(lang: Lang, source: &[u8]) -> Option<Arc<Tree>> {
    let key = tree_key(lang, source);
    match cached(key) {
        Some(t) => Some(t),
        None => parse_into_cache(lang, source, key, None, Keep::CallOnly),
    }
}

/// Drops the large tree this thread's call parsed (see [`Keep`]); the
/// server calls it when a tool call ends.
pub fn release_call_trees() {
    CALL_TREE.with_borrow_mut(|slot| *slot = None);
}

/// The syntax tree of `source`, parsed once per version.
pub fn parse(lang: Lang, source: &[u8]) -> Option<Arc<Tree>> {
    let key = tree_key(lang, source);
    match cached(key) {
        Some(t) => Some(t),
        None => parse_into_cache(lang, source, key, None, Keep::WithinBudget),
    }
}

/// The syntax tree of `source`, an edit of `previous`: when the tree of
/// `previous` is cached, tree-sitter reparses only around the changed bytes.
pub fn parse_edited(lang: Lang, previous: &[u8], source: &[u8]) -> Option<Arc<Tree>> {
    let key = tree_key(lang, source);
    if let Some(t) = cached(key) {
        return Some(t);
    }
    let old = cached(tree_key(lang, previous)).map(|t| {
        let mut t = (*t).clone();
        t.edit(&changed_span(previous, source));
        t
    });
    parse_into_cache(lang, source, key, old.as_ref(), Keep::Latest)
}

/// One edit covering every byte that differs: from the common prefix to the
/// common suffix. Always correct, whatever the hunks were.
fn changed_span(old: &[u8], new: &[u8]) -> InputEdit {
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let room = old.len().min(new.len()) - prefix;
    let suffix = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let point = |src: &[u8], at: usize| {
        let before = &src[..at];
        let row = memchr::memchr_iter(b'\n', before).count();
        let column = at - memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
        Point { row, column }
    };
    InputEdit {
        start_byte: prefix,
        old_end_byte: old.len() - suffix,
        new_end_byte: new.len() - suffix,
        start_position: point(old, prefix),
        old_end_position: point(old, old.len() - suffix),
        new_end_position: point(new, new.len() - suffix),
    }
}

fn parse_into_cache(
    lang: Lang,
    source: &[u8],
    key: Key,
    old: Option<&Tree>,
    keep: Keep,
) -> Option<Arc<Tree>> {
    let kept = match keep {
        Keep::Latest => true,
        Keep::WithinBudget => source.len() <= TREE_BUDGET,
        Keep::CallOnly => false,
    };
    let mut parser = pool()
        .lock()
        .ok()?
        .get_mut(&lang)
        .and_then(Vec::pop)
        .or_else(|| {
            let mut p = Parser::new();
            p.set_language(&lang.grammar()?).ok()?;
            Some(p)
        })?;
    // At most one large tree at a time: the cache makes room for a large
    // one (kept or not), and the call's previous tree goes.
    let room = if kept || source.len() > TREE_BUDGET {
        cache().lock().map_or(0, |mut c| c.make_room(source.len()))
    } else {
        0
    };
    let dropped =
        room + CALL_TREE.with_borrow_mut(|slot| slot.take().map_or(0, |(_, t)| tree_weight(&t)));
    if dropped >= 64 << 10 {
        // Trees of 64 KiB of source and more hold megabytes: give them back
        // before the next one is built, whichever malloc arena builds it.
        crate::malloc::release_freed();
    }
    let tree = parser.parse(source, old).map(Arc::new);
    if let Ok(mut p) = pool().lock() {
        p.entry(lang).or_default().push(parser);
    }
    let tree = tree?;
    if kept {
        if let Ok(mut c) = cache().lock() {
            c.insert(key, Arc::clone(&tree), source.len());
        }
    } else {
        CALL_TREE.with_borrow_mut(|slot| *slot = Some((key, Arc::clone(&tree))));
    }
    Some(tree)
}

fn text_of<'a>(node: Node, src: &'a [u8]) -> &'a str {
    std::str::from_utf8(&src[node.byte_range()]).unwrap_or("")
}

/// The name a declaration node gives, found by field or by the first identifier.
fn name_of(node: Node, src: &[u8]) -> Option<String> {
    for field in ["name", "declarator", "type"] {
        if let Some(n) = node.child_by_field_name(field) {
            if n.kind().contains("identifier") || n.kind() == "name" || n.kind().ends_with("_name")
            {
                return Some(text_of(n, src).to_string());
            }
            if let Some(inner) = name_of(n, src) {
                return Some(inner);
            }
        }
    }
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        let k = child.kind();
        if k.contains("identifier") || k == "simple_identifier" {
            return Some(text_of(child, src).to_string());
        }
    }
    None
}

/// Where a declaration's text begins: wrappers (decorators, `export`,
/// `template`), then the comments and attributes right above it.
fn start_row(lang: Lang, node: Node) -> (usize, usize) {
    let mut top = node;
    while let Some(p) = top.parent() {
        if lang.wrapper_kinds().contains(&p.kind())
            && p.start_position().row <= top.start_position().row
        {
            top = p;
        } else {
            break;
        }
    }
    let mut start = top.start_position().row;
    let head = signature_row(top);
    let mut prev = top.prev_sibling();
    while let Some(p) = prev {
        let k = p.kind();
        let attached = p.end_position().row + 1 >= start;
        if attached
            && (k.contains("comment")
                || k == "attribute_item"
                || k == "annotation"
                || k == "decorator")
        {
            start = p.start_position().row;
            prev = p.prev_sibling();
        } else {
            break;
        }
    }
    (start, head)
}

/// Whether a node kind is an annotation or decorator (Java's `@Override`,
/// `@Deprecated(since = "3")`, Kotlin's, Python's and TypeScript's `@x`).
fn is_annotation(kind: &str) -> bool {
    matches!(kind, "annotation" | "marker_annotation" | "decorator")
}

/// The row a declaration's signature starts on: its first token that is
/// not an annotation, decorator or comment (Java and Kotlin keep
/// annotations in the declaration's `modifiers`; a wrapper such as
/// Python's `decorated_definition` holds its decorators).
fn signature_row(node: Node) -> usize {
    let skipped = |n: &Node| is_annotation(n.kind()) || n.kind().contains("comment");
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        if skipped(&child) {
            continue;
        }
        if child.kind() == "modifiers" {
            let mut inner = child.walk();
            let first = child.children(&mut inner).find(|m| !skipped(m));
            match first {
                Some(m) => return m.start_position().row,
                None => continue,
            }
        }
        return child.start_position().row;
    }
    node.start_position().row
}

/// Every declaration of a file, in order (computed once per version).
pub fn declarations(lang: Lang, src: &[u8]) -> Arc<Vec<Decl>> {
    static DECLS: OnceLock<Mutex<Recent<Arc<Vec<Decl>>>>> = OnceLock::new();
    let cache = DECLS.get_or_init(|| Mutex::new(Recent::new(64, 1 << 20)));
    let key = tree_key(lang, src);
    if let Some(d) = cache.lock().ok().and_then(|c| c.get(&key)) {
        return d;
    }
    let decls = Arc::new(find_declarations(lang, src));
    if let Ok(mut c) = cache.lock() {
        let weight = decls
            .iter()
            .map(|d| d.name.len() + d.qualified.len() + std::mem::size_of::<Decl>())
            .sum();
        c.insert(key, Arc::clone(&decls), weight);
    }
    decls
}

fn find_declarations(lang: Lang, src: &[u8]) -> Vec<Decl> {
    let Some(tree) = parse_for_call(lang, src) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack: Vec<(Node, Vec<String>)> = vec![(tree.root_node(), Vec::new())];
    while let Some((node, owners)) = stack.pop() {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children.into_iter().rev() {
            let mut owners_here = owners.clone();
            if lang.declaration_kinds().contains(&child.kind()) {
                if let Some(name) = name_of(child, src).filter(|n| !n.is_empty()) {
                    let (start, head) = start_row(lang, child);
                    let qualified = if owners.is_empty() {
                        name.clone()
                    } else {
                        format!("{}.{name}", owners.join("."))
                    };
                    out.push(Decl {
                        name: name.clone(),
                        qualified,
                        start: start + 1,
                        head: head + 1,
                        end: child.end_position().row + 1,
                        depth: owners.len(),
                    });
                    owners_here.push(name);
                }
                // What a function declares inside its body is local, not a member.
                let k = child.kind();
                if k.contains("function")
                    || k.contains("method")
                    || k.contains("constructor")
                    || k == "test_declaration"
                {
                    continue;
                }
            }
            stack.push((child, owners_here));
        }
    }
    out.sort_by_key(|d| (d.start, d.depth));
    out.dedup_by(|a, b| a.head == b.head && a.name == b.name);
    out
}

/// The end (1-based) of the block that starts at `line`: the outermost node
/// that starts on that line.
pub fn block_end(lang: Lang, src: &[u8], line: usize) -> Option<usize> {
    let tree = parse(lang, src)?;
    let row = line.checked_sub(1)?;
    let mut best: Option<Node> = None;
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        let (s, e) = (node.start_position().row, node.end_position().row);
        if s > row || e < row {
            continue;
        }
        if s == row && node.parent().is_some() && node.is_named() {
            let wider = best.is_none_or(|b| {
                node.end_byte() - node.start_byte() > b.end_byte() - b.start_byte()
            });
            if wider {
                best = Some(node);
            }
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    best.map(|n| {
        let end = n.end_position();
        // A node that ends at column 0 ends on the line before.
        if end.column == 0 && end.row > row {
            end.row
        } else {
            end.row + 1
        }
    })
}

/// The line (1-based) of the first parse error, if the text does not parse.
pub fn first_error(lang: Lang, src: &[u8]) -> Option<usize> {
    first_error_in(&*parse(lang, src)?)
}

/// [`first_error`] of `after`, an edit of `before` (parsed incrementally).
pub fn first_error_after_edit(lang: Lang, before: &[u8], after: &[u8]) -> Option<usize> {
    first_error_in(&*parse_edited(lang, before, after)?)
}

fn first_error_in(tree: &Tree) -> Option<usize> {
    if !tree.root_node().has_error() {
        return None;
    }
    let mut stack = vec![tree.root_node()];
    let mut first: Option<usize> = None;
    while let Some(node) = stack.pop() {
        if !node.has_error() {
            continue;
        }
        if node.is_error() || node.is_missing() {
            let row = node.start_position().row + 1;
            first = Some(first.map_or(row, |f| f.min(row)));
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    first.or(Some(1))
}

/// The import lines (1-based) and their imported names (Java, Kotlin).
pub fn imports(lang: Lang, src: &[u8]) -> Vec<(usize, String)> {
    let Some(tree) = parse_for_call(lang, src) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if lang.import_kinds().contains(&node.kind()) {
            let text = text_of(node, src);
            let name = text
                .trim()
                .trim_start_matches("import")
                .trim()
                .trim_start_matches("static ")
                .trim_end_matches(';')
                .trim()
                .to_string();
            out.push((node.start_position().row + 1, name));
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    out.sort();
    out
}

/// Whether a language keeps an import block nib can add to.
pub fn has_imports(lang: Lang) -> bool {
    !lang.import_kinds().is_empty()
}

#[cfg(test)]
mod tests {

    #[test]
    fn room_is_made_before_a_value_that_would_evict_the_others() {
        let mut r: Recent<u32> = Recent::new(4, 10);
        r.insert((Lang::Rust, 1), 1, 4);
        r.insert((Lang::Rust, 2), 2, 4);
        // A value of weight 6 leaves room for only one of the two: the
        // older goes before the new value is made.
        assert_eq!(r.make_room(6), 4);
        assert_eq!(r.get(&(Lang::Rust, 1)), None);
        assert_eq!(r.get(&(Lang::Rust, 2)), Some(2));
        // One larger than the whole budget leaves nothing behind.
        assert_eq!(r.make_room(11), 4);
        assert_eq!(r.get(&(Lang::Rust, 2)), None);
        assert_eq!(r.weight, 0);
        r.insert((Lang::Rust, 3), 3, 11);
        assert_eq!(r.get(&(Lang::Rust, 3)), Some(3));
    }
    use super::*;

    fn names(lang: Lang, src: &str) -> Vec<String> {
        declarations(lang, src.as_bytes())
            .iter()
            .map(|d| d.qualified.clone())
            .collect()
    }

    #[test]
    fn an_incremental_parse_gives_the_tree_a_full_parse_gives() {
        let before = "fn a() {\r\n    1\r\n}\r\n\r\nfn b(x: u32) -> u32 {\r\n    x\r\n}";
        let edits = [
            // Two hunks far apart, one of them at the very end without a newline.
            before
                .replace("    1", "    let é = 2;\r\n    é")
                .replace("    x\r\n}", "    x + 1\r\n}\r\nfn c() {}"),
            // A deletion, then a broken file.
            before.replace("fn a() {\r\n    1\r\n}\r\n", ""),
            before.replace("(x: u32)", "(x: u32"),
        ];
        for after in edits {
            parse(Lang::Rust, before.as_bytes()).unwrap();
            let inc = parse_edited(Lang::Rust, before.as_bytes(), after.as_bytes()).unwrap();
            let mut p = Parser::new();
            p.set_language(&Lang::Rust.grammar().unwrap()).unwrap();
            let full = p.parse(after.as_bytes(), None).unwrap();
            fn nodes(t: &Tree) -> Vec<(String, std::ops::Range<usize>, Point)> {
                let mut out = Vec::new();
                let mut stack = vec![t.root_node()];
                while let Some(n) = stack.pop() {
                    out.push((n.kind().to_string(), n.byte_range(), n.start_position()));
                    let mut c = n.walk();
                    stack.extend(n.children(&mut c));
                }
                out
            }
            assert_eq!(nodes(&inc), nodes(&full), "{after}");
            assert_eq!(
                first_error_after_edit(Lang::Rust, before.as_bytes(), after.as_bytes()),
                first_error_in(&full)
            );
        }
    }

    #[test]
    fn rust_declarations_and_members() {
        let src = "/// Doc.\n#[derive(Debug)]\npub struct S {\n    a: u32,\n}\n\nimpl S {\n    pub fn new() -> S {\n        S { a: 1 }\n    }\n}\n";
        let d = declarations(Lang::Rust, src.as_bytes());
        let s = d.iter().find(|d| d.name == "S" && d.depth == 0).unwrap();
        assert_eq!((s.start, s.head, s.end), (1, 3, 5));
        assert!(
            names(Lang::Rust, src).contains(&"S.new".to_string()),
            "{:?}",
            names(Lang::Rust, src)
        );
    }

    #[test]
    fn block_ends_and_errors() {
        let src = "fn a() {\n    x();\n}\nfn b() {}\n";
        assert_eq!(block_end(Lang::Rust, src.as_bytes(), 1), Some(3));
        assert_eq!(block_end(Lang::Rust, src.as_bytes(), 4), Some(4));
        assert_eq!(first_error(Lang::Rust, src.as_bytes()), None);
        assert_eq!(first_error(Lang::Rust, b"fn a() {\n    x(;\n}\n"), Some(2));
    }
}

/// The lines (1-based) an outline of a large file shows: every top-level
/// line a declaration or statement starts on, and the first line of each
/// first-level member.
pub fn outline(lang: Lang, src: &[u8]) -> Arc<Outline> {
    static OUTLINES: OnceLock<Mutex<Recent<Arc<Outline>>>> = OnceLock::new();
    let cache = OUTLINES.get_or_init(|| Mutex::new(Recent::new(64, 1 << 20)));
    let key = tree_key(lang, src);
    if let Some(o) = cache.lock().ok().and_then(|c| c.get(&key)) {
        return o;
    }
    let found = Arc::new(Outline {
        lines: find_outline(lang, src),
        import_runs: import_runs(lang, src),
    });
    if let Ok(mut c) = cache.lock() {
        let names: usize = found
            .import_runs
            .iter()
            .flat_map(|r| r.2.iter().map(String::len))
            .sum();
        c.insert(key, Arc::clone(&found), found.lines.len() * 8 + names);
    }
    found
}

/// What a read's outline shows of a parsed file (computed once per version).
#[derive(Debug, Default)]
pub struct Outline {
    /// Lines of top-level items and their members (1-based).
    pub lines: Vec<usize>,
    /// Runs of 10 or more import lines (see [`import_runs`]).
    pub import_runs: Vec<(usize, usize, Vec<String>)>,
}

fn find_outline(lang: Lang, src: &[u8]) -> Vec<usize> {
    let Some(tree) = parse(lang, src) else {
        return Vec::new();
    };
    let mut lines: Vec<usize> = Vec::new();
    let root = tree.root_node();
    let mut cursor = root.walk();
    for child in root.named_children(&mut cursor) {
        if child.kind().contains("comment") {
            continue;
        }
        lines.push(signature_row(child) + 1);
    }
    for d in declarations(lang, src).iter() {
        if d.depth <= 1 {
            lines.push(d.head);
        }
    }
    lines.sort_unstable();
    lines.dedup();
    lines
}

/// Runs of 10 or more consecutive import lines, as (first, last, names).
pub fn import_runs(lang: Lang, src: &[u8]) -> Vec<(usize, usize, Vec<String>)> {
    let mut runs: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for (line, name) in imports(lang, src) {
        match runs.last_mut() {
            Some((_, last, names)) if line <= *last + 2 => {
                *last = line;
                names.push(name);
            }
            _ => runs.push((line, line, vec![name])),
        }
    }
    runs.retain(|(_, _, names)| names.len() >= 10);
    runs
}

/// Imports grouped by package: `java.util: List, Map, Set`.
pub fn package_tree(names: &[String]) -> Vec<String> {
    let mut groups: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for n in names {
        let (pkg, item) = n.rsplit_once('.').unwrap_or(("", n.as_str()));
        groups.entry(pkg).or_default().push(item);
    }
    groups
        .into_iter()
        .map(|(pkg, items)| format!("  {pkg}: {}", items.join(", ")))
        .collect()
}

#[cfg(test)]
mod outline_tests {
    use super::*;

    #[test]
    fn imports_group_by_package() {
        let names: Vec<String> = ["java.util.List", "java.util.Map", "com.acme.Repo"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            package_tree(&names),
            vec!["  com.acme: Repo", "  java.util: List, Map"]
        );
    }
}
