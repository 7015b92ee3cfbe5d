//! How paths read as text, beneath every module that shows or compares
//! them (`fs`, `workspace`, `names`, the tools): control characters
//! escaped for display, and `.`/`..` folded lexically. Pure functions; no
//! file is touched and no access is decided here.

use std::path::{Component, Path, PathBuf};

/// Removes `.` and folds `a/..` for display only (never for access decisions).
pub fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Escapes control characters (newlines included) as `\n`, `\t`, `\xNN`.
pub fn escape_control(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for ch in s.chars() {
        match ch {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}
