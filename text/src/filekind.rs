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
    sniff(path, head).map(|(prose, _)| prose)
}

/// The MIME type of a binary file nib recognises by its first bytes
/// (`image/png`; `application/octet-stream` for other binary files).
pub fn mime_type(path: &Path, head: &[u8]) -> Option<&'static str> {
    sniff(path, head).map(|(_, mime)| mime)
}

/// What a binary file is, in words and as a MIME type.
fn sniff(path: &Path, head: &[u8]) -> Option<(&'static str, &'static str)> {
    const MAGIC: &[(&[u8], &str, &str)] = &[
        (b"%PDF-", "a PDF", "application/pdf"),
        (b"\x89PNG\r\n\x1a\n", "a PNG image", "image/png"),
        (b"\xFF\xD8\xFF", "a JPEG image", "image/jpeg"),
        (b"GIF87a", "a GIF image", "image/gif"),
        (b"GIF89a", "a GIF image", "image/gif"),
        (
            b"SQLite format 3\0",
            "a SQLite database",
            "application/vnd.sqlite3",
        ),
        (b"\x7FELF", "an executable", "application/x-executable"),
        (b"PK\x03\x04", "a zip archive", "application/zip"),
    ];
    if let Some((_, prose, mime)) = MAGIC.iter().find(|(m, _, _)| head.starts_with(m)) {
        return Some((prose, mime));
    }
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        return Some(("a WebP image", "image/webp"));
    }
    if head.contains(&0) {
        return Some(("a binary file", "application/octet-stream"));
    }
    if extension(path) == "pdf" && head.is_empty() {
        return Some(("a PDF", "application/pdf"));
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
    fn binary_files_have_mime_types() {
        let p = Path::new("x");
        for (head, mime) in [
            (&b"\x89PNG\r\n\x1a\nrest"[..], "image/png"),
            (b"\xFF\xD8\xFF\xE0", "image/jpeg"),
            (b"GIF89a..", "image/gif"),
            (b"RIFF\0\0\0\0WEBPVP8 ", "image/webp"),
            (b"%PDF-1.7", "application/pdf"),
            (b"SQLite format 3\0", "application/vnd.sqlite3"),
            (b"\x7FELF\x02", "application/x-executable"),
            (b"PK\x03\x04", "application/zip"),
            (b"ab\0cd", "application/octet-stream"),
        ] {
            assert_eq!(mime_type(p, head), Some(mime), "{head:?}");
        }
        assert_eq!(mime_type(p, b"plain text\n"), None);
    }

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
