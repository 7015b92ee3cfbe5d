//! The file a section edits, as it is now: its bytes, text, tag, metadata
//! and canonical path, read through [`crate::fs`] and refused when it is a
//! folder, a special file or binary. Which version the patch refers to is
//! `rebase`'s; planning on it is `section`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::refusal::{Refusal, Shown};
use crate::context::TEXT_LIMIT;
use crate::fs::{self, FsError, Kind};
use nib_text::hashline::Tag;
use nib_text::text::Text;

/// A file's current state, read for editing.
pub(super) struct Current {
    pub(super) text: Arc<Text>,
    /// The file's bytes as read (MV and CP without hunks copy them as they are).
    pub(super) bytes: Vec<u8>,
    pub(super) tag: Tag,
    pub(super) stat: fs::Stat,
    pub(super) canonical: PathBuf,
}

impl Current {
    /// These lines of the current text, as rows printed in a refusal.
    pub(super) fn shown(&self, lines: Vec<usize>) -> Shown {
        Shown {
            canonical: self.canonical.clone(),
            tag: self.tag,
            text: Arc::clone(&self.text),
            lines,
        }
    }
}

/// Reads the file at `path` for editing; `None` when it does not exist.
pub(super) fn read_current(
    scope: &fs::Scope,
    path: &Path,
    shown: &str,
) -> Result<Option<Current>, Refusal> {
    let hard = |m: String| Refusal::Hard(m, None);
    let stat = match fs::stat(scope, path) {
        Ok(s) => s,
        Err(FsError::NotFound) => return Ok(None),
        Err(e) => return Err(hard(format!("{shown}: {e}"))),
    };
    match stat.kind {
        Kind::File => {}
        Kind::Dir => return Err(hard(format!("{shown} is a folder; edit changes files"))),
        Kind::Special(k) => return Err(hard(format!("{shown} is a {k}, not a regular file"))),
    }
    let file = fs::read_file(scope, path, TEXT_LIMIT).map_err(|e| hard(format!("{shown}: {e}")))?;
    let head = &file.bytes[..file.bytes.len().min(8192)];
    if let Some(kind) = nib_text::filekind::binary_kind(path, head) {
        return Err(hard(format!("{shown} is {kind}; edit changes text files")));
    }
    let canonical = fs::canonical(path).map_err(|e| hard(format!("{shown}: {e}")))?;
    Ok(Some(Current {
        tag: Tag::of(&file.bytes),
        text: Arc::new(Text::decode(&file.bytes)),
        bytes: file.bytes.clone(),
        stat: file.stat,
        canonical,
    }))
}
