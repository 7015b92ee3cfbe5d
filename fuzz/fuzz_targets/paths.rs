//! Fuzz path and selector parsing with properties: splitting an argument
//! into a path and a selector never panics; resolved line spans are sorted,
//! disjoint and inside the file; and the lexical path from a root to a path,
//! joined back onto the root, names the same place (the kernel check in
//! `fs/beneath.rs` relies on that relative path).
//!
//! Input: `ARG \0 ROOT \0 PATH` (missing parts are empty).

#![no_main]

use std::path::{Component, Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use nib_files::fs::beneath;
use nib_files::tools::read::selector::{self, Selector};

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(s) => out.push(s),
            _ => {}
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = s.split('\0');
    let arg = parts.next().unwrap_or("");
    let root = parts.next().unwrap_or("");
    let path = parts.next().unwrap_or("");

    let (_, sel, _) = selector::split(arg, |p| p.len() % 3 == 0);
    if let Selector::Lines(ranges) = sel {
        for len in [0usize, 1, 7, 1000] {
            if let Ok(spans) = selector::resolve(&ranges, len) {
                let mut last = 0;
                for (a, b) in spans {
                    assert!(
                        a >= 1 && a <= b && b <= len,
                        "span {a}-{b} in a file of {len}"
                    );
                    assert!(a > last, "spans are sorted and disjoint");
                    last = b;
                }
            }
        }
    }

    if !root.is_empty() && !path.is_empty() && !root.contains("..") && !root.contains('.') {
        let root = Path::new("/").join(root);
        let path = Path::new("/").join(path);
        let rel = beneath::relative(&root, &path);
        assert!(rel.is_relative(), "{rel:?}");
        assert_eq!(
            normalize(&root.join(&rel)),
            normalize(&path),
            "root {root:?} path {path:?} rel {rel:?}"
        );
    }
});
