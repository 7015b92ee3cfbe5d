//! Fuzz the patch parser and the applier with a property, not just "no panic":
//! when a patch parses and plans against a file, the splice keeps every line it
//! did not touch, in order, and the line count adds up.
//!
//! Input: `FILE \0 PATCH` (without a NUL, a five-line file is used).

#![no_main]

use libfuzzer_sys::fuzz_target;
use nib_files::tools::edit::{apply, patch};
use nib_text::text::Text;

struct AllowAll;

impl apply::SubPolicy for AllowAll {
    fn allow(&self, _hunk: usize, _named: usize, _found: usize) -> bool {
        true
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let (file, patch_text) = s
        .split_once('\0')
        .unwrap_or(("one\ntwo\nthree\nfour\nfive\n", s));
    let Ok((patch::Patch::Sections(sections), _notes)) = patch::parse(patch_text) else {
        return;
    };
    let text = Text::decode(file.as_bytes());
    for section in &sections {
        let Ok(plan) = apply::plan(&text, &section.hunks, &AllowAll) else {
            continue;
        };
        let (new, landed) = apply::splice(&text, &plan.ops);
        let added: usize = plan.ops.iter().map(|o| o.rows.len()).sum();
        let removed: usize = plan.ops.iter().map(|o| o.end - o.start).sum();
        assert_eq!(
            new.len() + removed,
            text.len() + added,
            "line counts add up"
        );
        assert_eq!(landed.len(), plan.ops.len());
        let map = apply::line_map(text.len(), &plan.ops);
        let mut last = None;
        for (i, m) in map.iter().enumerate() {
            if let Some(j) = *m {
                assert_eq!(
                    text.lines[i], new.lines[j],
                    "an untouched line is unchanged"
                );
                assert!(
                    last.is_none_or(|l| l < j),
                    "untouched lines keep their order"
                );
                last = Some(j);
            }
        }
    }
});
