//! What the person's own settings run from inside a root.
//!
//! A setting the person wrote may name a file in the work tree as the code
//! it runs: git's `core.hooksPath = .husky/_` (in the repository's config
//! or the person's global one), a Claude Code hook or status line whose
//! command is `"$CLAUDE_PROJECT_DIR"/scripts/check.sh`, an MCP server in
//! `.mcp.json` started as `node ./tools/server.js`. The setting is the
//! person's, but a program that writes the file it names runs code as the
//! person the next time the setting fires. So those targets are held like
//! the files that make code run: read-only for programs when they exist
//! (`runs_code::protected_for_programs`), taken to the trash when a call
//! makes them (`planted`).
//!
//! This module only reads settings and names paths; it decides nothing.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The most bytes read of one settings file.
const READ_LIMIT: u64 = 1 << 20;

/// The paths inside `root` that the person's settings run code from
/// (existing or not), each absolute, without `..`.
pub fn of_root(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for hooks in hooks_paths(root) {
        push_inside(&mut found, root, &hooks);
    }
    for file in claude_settings(root) {
        for command in claude_commands(&file) {
            for token in path_tokens(&command) {
                push_inside(&mut found, root, &token);
            }
        }
    }
    for command in mcp_commands(&root.join(".mcp.json")) {
        for token in path_tokens(&command) {
            push_inside(&mut found, root, &token);
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Adds `path` (relative to `root`, or absolute) when it lies in `root`.
fn push_inside(found: &mut Vec<PathBuf>, root: &Path, path: &str) {
    let p = Path::new(path);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    };
    let mut clean = PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                clean.pop();
            }
            std::path::Component::CurDir => {}
            other => clean.push(other),
        }
    }
    if clean.starts_with(root) && clean != root {
        found.push(clean);
    }
}

fn read(path: &Path) -> Option<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    f.take(READ_LIMIT).read_to_string(&mut text).ok()?;
    Some(text)
}

/// `core.hooksPath` of the root's repository and of the person's global
/// git configuration (a relative value is taken from the work tree's top,
/// where git runs hooks).
fn hooks_paths(root: &Path) -> Vec<String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut configs = vec![root.join(".git/config")];
    if let Some(g) = std::env::var_os("GIT_CONFIG_GLOBAL") {
        configs.push(PathBuf::from(g));
    } else {
        if let Some(h) = &home {
            configs.push(h.join(".gitconfig"));
        }
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".config")));
        if let Some(x) = xdg {
            configs.push(x.join("git/config"));
        }
    }
    configs
        .iter()
        .filter_map(|c| read(c))
        .flat_map(|text| config_values(&text, "core", "hookspath"))
        .map(|v| match (v.strip_prefix("~/"), &home) {
            (Some(rest), Some(h)) => h.join(rest).display().to_string(),
            _ => v,
        })
        .collect()
}

/// The values of `section.key` (no subsection) in a git config's text.
fn config_values(text: &str, section: &str, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut here = false;
    for line in text.lines() {
        let mut t = line.trim();
        if let Some(rest) = t.strip_prefix('[') {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
                .collect::<String>()
                .to_ascii_lowercase();
            here = name == section && !rest.trim_start_matches(&name[..]).starts_with(' ');
            t = match rest.find(']') {
                Some(end) => rest[end + 1..].trim(),
                None => "",
            };
        }
        if !here {
            continue;
        }
        if let Some((k, v)) = t.split_once('=')
            && k.trim().eq_ignore_ascii_case(key)
        {
            let v = v.trim().trim_matches('"').trim();
            if !v.is_empty() {
                out.push(v.to_string());
            }
        }
    }
    out
}

/// Claude Code's settings files that apply in the project: the project's
/// own and the person's.
fn claude_settings(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![
        root.join(".claude/settings.json"),
        root.join(".claude/settings.local.json"),
    ];
    let dir = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")));
    if let Some(d) = dir {
        files.push(d.join("settings.json"));
    }
    files
}

/// Every hook command and the status line's command of a Claude Code
/// settings file.
fn claude_commands(file: &Path) -> Vec<String> {
    let Some(v) = read(file).and_then(|t| serde_json::from_str::<Value>(&t).ok()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(events) = v.get("hooks").and_then(Value::as_object) {
        for groups in events.values().filter_map(Value::as_array) {
            for group in groups {
                for hook in group
                    .get("hooks")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(c) = hook.get("command").and_then(Value::as_str) {
                        out.push(c.to_string());
                    }
                }
            }
        }
    }
    if let Some(c) = v.pointer("/statusLine/command").and_then(Value::as_str) {
        out.push(c.to_string());
    }
    out
}

/// The command and arguments of each MCP server in a `.mcp.json`.
fn mcp_commands(file: &Path) -> Vec<String> {
    let Some(v) = read(file).and_then(|t| serde_json::from_str::<Value>(&t).ok()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for server in v
        .get("mcpServers")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.values())
    {
        if let Some(c) = server.get("command").and_then(Value::as_str) {
            out.push(c.to_string());
        }
        for a in server
            .get("args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            out.push(a.to_string());
        }
    }
    out
}

/// The words of a command line that name a file in the project: led by
/// `$CLAUDE_PROJECT_DIR` (in any of its spellings), or relative with a
/// slash (`./x.sh`, `scripts/x.sh`), quotes taken off.
fn path_tokens(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in command.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|')) {
        let w: String = word.chars().filter(|c| !matches!(c, '"' | '\'')).collect();
        let w = w.as_str();
        let rest = ["$CLAUDE_PROJECT_DIR/", "${CLAUDE_PROJECT_DIR}/"]
            .iter()
            .find_map(|p| w.strip_prefix(p));
        if let Some(rest) = rest {
            if !rest.is_empty() {
                out.push(rest.to_string());
            }
            continue;
        }
        if w.contains('/') && !w.starts_with('/') && !w.starts_with('$') && !w.starts_with('-') {
            out.push(w.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_persons_settings_name_their_targets_in_the_root() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).expect("mkdir");
        std::fs::create_dir_all(root.join(".claude")).expect("mkdir");
        std::fs::write(
            root.join(".git/config"),
            "[core]\n\trepositoryformatversion = 0\n\thooksPath = .husky/_\n[remote \"core\"]\n\thooksPath = nope\n",
        )
        .expect("write");
        std::fs::write(
            root.join(".claude/settings.json"),
            r#"{"hooks":{"PostToolUse":[{"matcher":"Edit","hooks":[{"type":"command","command":"\"$CLAUDE_PROJECT_DIR\"/scripts/fmt.sh --fix"}]}]},
               "statusLine":{"type":"command","command":"bash tools/line.sh"}}"#,
        )
        .expect("write");
        std::fs::write(
            root.join(".mcp.json"),
            r#"{"mcpServers":{"local":{"command":"node","args":["./srv/index.js","--port","1"]},"abs":{"command":"/usr/bin/true","args":["../../outside.sh"]}}}"#,
        )
        .expect("write");
        let got = of_root(root);
        let want: Vec<PathBuf> = [
            ".husky/_",
            "scripts/fmt.sh",
            "srv/index.js",
            "tools/line.sh",
        ]
        .iter()
        .map(|p| root.join(p))
        .collect();
        for w in &want {
            assert!(got.contains(w), "{} missing from {got:?}", w.display());
        }
        assert!(!got.iter().any(|p| p.ends_with("nope")), "{got:?}");
        assert!(got.iter().all(|p| p.starts_with(root)), "{got:?}");
    }
}
