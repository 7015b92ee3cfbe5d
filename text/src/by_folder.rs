//! Paths grouped by folder: each folder written once, its files after it in
//! braces (`src/{a.rs, b.rs}`). One concept used wherever nib lists paths to
//! the model — the `[changed: …]` line, git's status, ls-files and stat
//! lists, `find` and `ls` — so every listing reads the same way.
//!
//! Pure functions over the strings as they will print; callers decide what a
//! path looks like (relative, named, with a tag or a note after the name).

/// Paths (`dir/name…`) with each folder written once: files of the same
/// folder follow it in braces, a file alone in its folder and top-level
/// files stay as they are; folders in the order they first appear. A
/// folder entry (`dir/sub/`) whose own entries are among the paths is left
/// out: they show it.
///
/// A path git quoted (`"a\303\251.txt"`) stays whole, so its quoting holds,
/// and so does a rename (`old -> new`, `old => new`).
pub fn group(paths: &[String]) -> Vec<String> {
    let mut order: Vec<&str> = Vec::new();
    let mut files: std::collections::HashMap<&str, Vec<&str>> = Default::default();
    let mut whole: Vec<(usize, &str)> = Vec::new();
    // A folder whose own entries are listed shows in their paths: listing
    // it as an entry of its parent too wrote it twice (`find`, `ls -R`).
    let all: std::collections::BTreeSet<&str> = paths.iter().map(String::as_str).collect();
    let shown_below = |folder: &str| {
        folder.ends_with('/')
            && all
                .range::<str, _>((
                    std::ops::Bound::Excluded(folder),
                    std::ops::Bound::Unbounded,
                ))
                .next()
                .is_some_and(|next| next.starts_with(folder))
    };
    for s in paths {
        if shown_below(s) {
            continue;
        }
        if s.starts_with('"') || s.contains(" -> ") || s.contains(" => ") {
            whole.push((order.len(), s));
            continue;
        }
        let (dir, name) = match s.trim_end_matches('/').rsplit_once('/') {
            // `dir/sub/` (a folder) splits after `dir`.
            Some((d, _)) => (d, &s[d.len() + 1..]),
            None => ("", s.as_str()),
        };
        if !files.contains_key(dir) {
            order.push(dir);
        }
        files.entry(dir).or_default().push(name);
    }
    let mut out = Vec::new();
    let mut quoted = whole.into_iter().peekable();
    for (i, dir) in order.iter().enumerate() {
        while let Some((_, q)) = quoted.next_if(|(at, _)| *at <= i) {
            out.push(q.to_string());
        }
        let names = &files[dir];
        if dir.is_empty() {
            out.extend(names.iter().map(|n| n.to_string()));
        } else if names.len() == 1 {
            out.push(format!("{dir}/{}", names[0]));
        } else {
            out.push(format!("{dir}/{{{}}}", names.join(", ")));
        }
    }
    out.extend(quoted.map(|(_, q)| q.to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn folders_are_written_once_in_the_order_they_first_appear() {
        assert_eq!(
            group(&s(&[
                "src/a.rs",
                "README.md",
                "src/b.rs",
                "docs/x.md",
                "src/c/d.rs"
            ])),
            s(&["src/{a.rs, b.rs}", "README.md", "docs/x.md", "src/c/d.rs"])
        );
    }

    #[test]
    fn folders_group_under_their_parent_and_quoted_paths_stay_whole() {
        assert_eq!(
            group(&s(&[
                "notes/",
                "src/x/",
                "src/y.rs",
                "\"\\303\\251.txt\"",
                "z"
            ])),
            s(&["notes/", "z", "src/{x/, y.rs}", "\"\\303\\251.txt\""])
        );
    }

    #[test]
    fn a_folder_whose_entries_are_listed_is_written_once() {
        assert_eq!(
            group(&s(&[
                "./assets/",
                "./assets/img/",
                "./assets/img/iconset/",
                "./assets/img/iconset/a.png",
                "./assets/img/iconset/b.png",
                "./assets/x.css",
                "./empty/",
            ])),
            s(&[
                "./assets/img/iconset/{a.png, b.png}",
                "./assets/x.css",
                "./empty/"
            ])
        );
    }
}
