//! `git status`, reshaped: the branch and its tracking on one line, each
//! section's files grouped by kind and folder on a line per kind, hints and
//! blank lines gone. Lines it does not recognise (rebase and merge states,
//! submodule notes) stay as git printed them.

use nib_text::by_folder;

/// One section of the long format (`Changes to be committed:` …) with its
/// entries by kind, kinds in the order they first appear.
#[derive(Default)]
struct Section {
    title: String,
    kinds: Vec<(String, Vec<String>)>,
}

impl Section {
    fn add(&mut self, kind: &str, path: &str) {
        match self.kinds.iter_mut().find(|(k, _)| k == kind) {
            Some((_, v)) => v.push(path.to_string()),
            None => self.kinds.push((kind.to_string(), vec![path.to_string()])),
        }
    }

    fn render(&self, out: &mut String) {
        out.push_str(&self.title);
        out.push('\n');
        for (kind, paths) in &self.kinds {
            let list = by_folder::group(paths).join(", ");
            if kind.is_empty() {
                out.push_str(&format!("  {list}\n"));
            } else {
                out.push_str(&format!("  {kind}: {list}\n"));
            }
        }
    }
}

/// A trailing `(use "git …")` in a summary line goes.
fn without_advice(line: &str) -> &str {
    match line.find(" (use \"git ") {
        Some(i) if line.ends_with(')') => &line[..i],
        _ => line,
    }
}

/// The long format (git's default). `name` shortens each path (with a
/// named directory).
pub fn long(text: &str, name: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut branch: Option<String> = None;
    let mut tracking: Vec<String> = Vec::new();
    let mut in_tracking = false;
    let mut section: Option<Section> = None;
    let flush_branch =
        |out: &mut String, branch: &mut Option<String>, tracking: &mut Vec<String>| {
            if let Some(b) = branch.take() {
                out.push_str(&b);
                if !tracking.is_empty() {
                    out.push_str(&format!(" ({})", tracking.join(" ")));
                    tracking.clear();
                }
                out.push('\n');
            }
        };
    for line in text.lines() {
        if let Some(b) = line.strip_prefix("On branch ") {
            flush_branch(&mut out, &mut branch, &mut tracking);
            branch = Some(format!("On branch {b}"));
            continue;
        }
        if let Some(t) = line.strip_prefix("Your branch ") {
            in_tracking = true;
            let t = t.trim_end_matches([',', '.']);
            let t = t.strip_prefix("is ").unwrap_or(t);
            // "and 'origin/main' have diverged," (the counts follow).
            let t = match t
                .strip_prefix("and ")
                .and_then(|r| r.strip_suffix(" have diverged"))
            {
                Some(other) => format!("diverged from {other}:"),
                None => t.to_string(),
            };
            tracking.push(t);
            continue;
        }
        if in_tracking {
            if line.is_empty() {
                in_tracking = false;
                continue;
            }
            if line.trim_start().starts_with('(') {
                continue;
            }
            if !line.starts_with(char::is_whitespace) && !line.starts_with("and have") {
                in_tracking = false;
            } else {
                let t = line.trim().trim_end_matches('.');
                let t = t.strip_prefix("and have ").unwrap_or(t);
                tracking.push(t.trim_end_matches(", respectively").to_string());
                continue;
            }
        }
        if line.is_empty() || super::noise::is_hint(line) {
            continue;
        }
        if let Some(entry) = line.strip_prefix('\t') {
            let sec = section.get_or_insert_with(Section::default);
            let untracked = sec.title.starts_with("Untracked") || sec.title.starts_with("Ignored");
            match entry.split_once(':') {
                Some((kind, path))
                    if !untracked && path.starts_with(' ') && !kind.contains('/') =>
                {
                    sec.add(kind.trim(), &name(path.trim_start()))
                }
                _ => sec.add("", &name(entry)),
            }
            continue;
        }
        flush_branch(&mut out, &mut branch, &mut tracking);
        if !line.starts_with(char::is_whitespace) && line.ends_with(':') {
            if let Some(s) = section.take() {
                s.render(&mut out);
            }
            section = Some(Section {
                title: line.to_string(),
                ..Section::default()
            });
            continue;
        }
        if let Some(s) = section.take() {
            s.render(&mut out);
        }
        out.push_str(without_advice(line));
        out.push('\n');
    }
    flush_branch(&mut out, &mut branch, &mut tracking);
    if let Some(s) = section.take() {
        s.render(&mut out);
    }
    out
}

/// The short format (`-s`, `-sb`): entries grouped by their two-letter code
/// and folder, the `##` branch line as it is.
pub fn short(text: &str, name: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut codes = Section::default();
    for line in text.lines() {
        if line.starts_with("## ") || line.len() < 4 || line.as_bytes()[2] != b' ' {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        codes.add(&line[..2], &name(&line[3..]));
    }
    for (code, paths) in &codes.kinds {
        out.push_str(&format!("{code} {}\n", by_folder::group(paths).join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_is(p: &str) -> String {
        p.to_string()
    }

    #[test]
    fn the_long_format_keeps_what_an_agent_needs_on_few_lines() {
        let raw = "On branch main\nYour branch is ahead of 'origin/main' by 1 commit.\n  (use \"git push\" to publish your local commits)\n\nChanges to be committed:\n  (use \"git restore --staged <file>...\" to unstage)\n\tnew file:   src/b.rs\n\trenamed:    old.txt -> src/new.txt\n\nChanges not staged for commit:\n  (use \"git add/rm <file>...\" to update what will be committed)\n\tdeleted:    docs/with space.md\n\tmodified:   src/a.rs\n\tmodified:   src/c.rs\n\nUntracked files:\n  (use \"git add <file>...\" to include in what will be committed)\n\tun tracked.txt\n\t\"\\303\\251.txt\"\n\n";
        assert_eq!(
            long(raw, &as_is),
            "On branch main (ahead of 'origin/main' by 1 commit)\n\
             Changes to be committed:\n  new file: src/b.rs\n  renamed: old.txt -> src/new.txt\n\
             Changes not staged for commit:\n  deleted: docs/with space.md\n  modified: src/{a.rs, c.rs}\n\
             Untracked files:\n  un tracked.txt, \"\\303\\251.txt\"\n"
        );
    }

    #[test]
    fn diverged_branches_and_clean_trees_read_in_one_line_each() {
        let raw = "On branch main\nYour branch and 'origin/main' have diverged,\nand have 1 and 2 different commits each, respectively.\n  (use \"git pull\" if you want to integrate the remote branch with yours)\n\nnothing to commit, working tree clean\n";
        assert_eq!(
            long(raw, &as_is),
            "On branch main (diverged from 'origin/main': 1 and 2 different commits each)\nnothing to commit, working tree clean\n"
        );
    }

    #[test]
    fn the_short_format_groups_by_code_and_folder() {
        assert_eq!(
            short(
                "## main...origin/main [ahead 1]\n M src/a.rs\nA  src/b.rs\n M src/c.rs\n?? x\n",
                &as_is
            ),
            "## main...origin/main [ahead 1]\n M src/{a.rs, c.rs}\nA  src/b.rs\n?? x\n"
        );
    }
}
