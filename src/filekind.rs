//! What kind of file a path names, from its name and its first bytes: code,
//! prose, flat data, a lockfile or bundle to skip, or a binary to refuse.
//!
//! read uses this to choose between whole text, an outline and the first rows;
//! write uses it to pick the syntax check (JSON, YAML, TOML).

use std::path::Path;

/// How read shows a text file that is over its size limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Source code: outlined above 200 lines or 8 KiB.
    Code,
    /// Markdown: outlined by headings above 500 lines or 20 KiB.
    Markdown,
    /// Logs, CSV, JSON: the first 100 lines above 500 lines or 20 KiB.
    FlatData,
    /// Anything else: outlined by indentation above 500 lines or 20 KiB.
    Text,
}

impl Shape {
    /// The (lines, bytes) above which the file is not printed whole.
    pub fn limits(self) -> (usize, u64) {
        match self {
            Shape::Code => (200, 8 * 1024),
            _ => (500, 20 * 1024),
        }
    }
}

const CODE: &[&str] = &[
    "rs", "go", "java", "kt", "kts", "ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs", "py",
    "pyi", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx", "zig", "cs", "swift", "rb", "php",
    "scala", "lua", "sh", "bash", "zsh", "m", "mm", "dart", "ex", "exs", "erl", "hs", "ml", "mli",
    "clj", "groovy", "gradle", "vue", "svelte", "sql", "pl", "pm", "r", "jl", "nim", "v", "sv",
    "proto", "tf", "hwk", "css", "scss", "less", "html", "xml",
];

const FLAT: &[&str] = &[
    "log", "out", "csv", "tsv", "json", "jsonl", "ndjson", "geojson",
];

const LOCKFILES: &[&str] = &[
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lock",
    "bun.lockb",
    "Cargo.lock",
    "go.sum",
    "poetry.lock",
    "Pipfile.lock",
    "uv.lock",
    "composer.lock",
    "Gemfile.lock",
    "gradle.lockfile",
    "flake.lock",
    "mix.lock",
    "Package.resolved",
    "packages.lock.json",
    "pubspec.lock",
];

fn extension(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// How read shapes this file when it is large.
pub fn shape(path: &Path) -> Shape {
    let ext = extension(path);
    if CODE.contains(&ext.as_str()) {
        Shape::Code
    } else if ext == "md" || ext == "markdown" || ext == "mdx" {
        Shape::Markdown
    } else if FLAT.contains(&ext.as_str()) {
        Shape::FlatData
    } else {
        Shape::Text
    }
}

/// Why read skips this file without a selector, if it does: lockfiles,
/// minified or bundled files, and files in node_modules/ or dist/, over 4 KiB.
pub fn skip_reason(path: &Path, size: u64, head: &[u8]) -> Option<&'static str> {
    if size <= 4 * 1024 {
        return None;
    }
    let name = file_name(path);
    if LOCKFILES.contains(&name.as_str()) {
        return Some("a lockfile");
    }
    let lower = name.to_ascii_lowercase();
    if lower.contains(".min.") {
        return Some("a minified file");
    }
    if lower.contains(".bundle.") || lower.contains(".chunk.") || lower.ends_with(".map") {
        return Some("a bundled file");
    }
    if path
        .components()
        .any(|c| matches!(c.as_os_str().to_str(), Some("node_modules" | "dist")))
    {
        return Some("in node_modules/ or dist/");
    }
    let ext = extension(path);
    if matches!(ext.as_str(), "js" | "mjs" | "cjs" | "css") && looks_minified(head) {
        return Some("a minified file");
    }
    None
}

/// Few, very long lines: the mark of machine-written code.
fn looks_minified(head: &[u8]) -> bool {
    let newlines = head.iter().filter(|&&b| b == b'\n').count();
    head.len() > 2048 && head.len() / (newlines + 1) > 500
}

/// What a binary file is, if the first bytes say it is one.
pub fn binary_kind(path: &Path, head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"%PDF-") {
        return Some("a PDF");
    }
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some("a PNG image");
    }
    if head.starts_with(b"\xFF\xD8\xFF") {
        return Some("a JPEG image");
    }
    if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        return Some("a GIF image");
    }
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        return Some("a WebP image");
    }
    if head.starts_with(b"SQLite format 3\0") {
        return Some("a SQLite database");
    }
    if head.starts_with(b"\x7FELF") {
        return Some("an executable");
    }
    if head.starts_with(b"PK\x03\x04") {
        return Some("a zip archive");
    }
    if head.contains(&0) {
        return Some("a binary file");
    }
    if extension(path) == "pdf" && head.is_empty() {
        return Some("a PDF");
    }
    None
}

/// The syntax a file should keep parsing in, by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// TOML.
    Toml,
}

/// The checked syntax of a file, if it has one.
pub fn syntax(path: &Path) -> Option<Syntax> {
    match extension(path).as_str() {
        "json" => Some(Syntax::Json),
        "yaml" | "yml" => Some(Syntax::Yaml),
        "toml" => Some(Syntax::Toml),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_by_extension() {
        assert_eq!(shape(Path::new("a/b.rs")), Shape::Code);
        assert_eq!(shape(Path::new("README.md")), Shape::Markdown);
        assert_eq!(shape(Path::new("x.log")), Shape::FlatData);
        assert_eq!(shape(Path::new("notes")), Shape::Text);
    }

    #[test]
    fn skips_only_over_4_kib() {
        assert_eq!(skip_reason(Path::new("Cargo.lock"), 100, b""), None);
        assert_eq!(
            skip_reason(Path::new("Cargo.lock"), 5000, b""),
            Some("a lockfile")
        );
        assert_eq!(
            skip_reason(Path::new("web/node_modules/x/index.js"), 5000, b"x\n"),
            Some("in node_modules/ or dist/")
        );
        let min = vec![b'a'; 5000];
        assert_eq!(
            skip_reason(Path::new("app.js"), 5000, &min),
            Some("a minified file")
        );
        assert_eq!(skip_reason(Path::new("app.js"), 5000, b"a\nb\n"), None);
    }

    #[test]
    fn binaries_are_named() {
        assert_eq!(binary_kind(Path::new("x"), b"%PDF-1.7"), Some("a PDF"));
        assert_eq!(
            binary_kind(Path::new("x"), b"ab\0cd"),
            Some("a binary file")
        );
        assert_eq!(binary_kind(Path::new("x"), "héllo".as_bytes()), None);
    }
}
