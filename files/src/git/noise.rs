//! The lines git prints for a person at a terminal, not for the model:
//! progress rewritten in place or counted up, and hints and advice.

/// A line of progress (rewritten in place with `\r`, or git's counters).
pub(super) fn is_progress(line: &str) -> bool {
    const COUNTERS: &[&str] = &[
        "Enumerating objects:",
        "Counting objects:",
        "Compressing objects:",
        "Writing objects:",
        "Receiving objects:",
        "Resolving deltas:",
        "Unpacking objects:",
        "Total ",
        "Delta compression",
    ];
    let l = line.strip_prefix("remote: ").unwrap_or(line);
    line.contains('\r') || COUNTERS.iter().any(|c| l.starts_with(c))
}

/// A hint or advice line.
pub(super) fn is_hint(line: &str) -> bool {
    line == "hint:" || line.starts_with("hint: ") || {
        let t = line.trim_start();
        t.len() < line.len() && t.starts_with("(use \"git ") && t.ends_with(')')
    }
}
