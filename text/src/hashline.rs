//! The hashline format: the file TAG, `[PATH#TAG]` headers and `N:TEXT` rows.
//!
//! This module owns the exact tag function (DESIGN.md, "Hashline facts") and the
//! spelling of every row kind the tools print. It knows nothing of files on disk
//! or of what an agent has seen; `text` splits files into lines and `state`
//! remembers what was shown.

use std::fmt;

/// A 16-bit file tag: the low 16 bits of xxh32 over the normalized text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tag(pub u16);

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04X}", self.0)
    }
}

impl Tag {
    /// Computes the tag of a file's raw bytes.
    ///
    /// First a UTF-8 BOM is stripped; then CRLF and lone CR become LF; then every
    /// run of spaces, tabs and CRs that ends a line or the text is removed; the
    /// result is hashed with xxh32 (seed 0) and masked to 16 bits.
    pub fn of(bytes: &[u8]) -> Tag {
        let normalized = normalize_for_tag(bytes);
        Tag((xxhash_rust::xxh32::xxh32(&normalized, 0) & 0xFFFF) as u16)
    }

    /// Parses a tag as an agent may send it: `3C4D`, `#3C4D`, or lower case.
    pub fn parse(text: &str) -> Option<Tag> {
        let t = text.trim();
        let t = t.strip_prefix('#').unwrap_or(t);
        if t.len() != 4 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u16::from_str_radix(t, 16).ok().map(Tag)
    }
}

/// The bytes the tag is computed over (see [`Tag::of`]).
fn normalize_for_tag(bytes: &[u8]) -> Vec<u8> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut out = Vec::with_capacity(bytes.len());
    let mut start = 0;
    loop {
        let rest = &bytes[start..];
        let end = memchr::memchr2(b'\n', b'\r', rest).map_or(bytes.len(), |i| start + i);
        let line = &bytes[start..end];
        let kept = line
            .iter()
            .rposition(|&b| b != b' ' && b != b'\t')
            .map_or(0, |i| i + 1);
        out.extend_from_slice(&line[..kept]);
        if end == bytes.len() {
            return out;
        }
        out.push(b'\n');
        // CRLF is one line end; a lone CR is one of its own.
        start = if bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n') {
            end + 2
        } else {
            end + 1
        };
    }
}

/// `[PATH#TAG]`: the header above a file's anchored rows.
pub fn header(path: &str, tag: Tag) -> String {
    format!("[{path}#{tag}]")
}

/// `N:TEXT`: an anchored row. The agent may edit this line.
pub fn anchored_row(line: usize, text: &str) -> String {
    format!("{line}:{text}")
}

/// `N~TEXT`: a row of a sparse map (after a write): the line is known, not repeated whole.
pub fn sparse_row(line: usize, text: &str) -> String {
    format!("{line}~{text}")
}

/// `[line N, chars 1-K of M]|TEXT`: a long line cut for display; never an anchor.
pub fn long_line_row(line: usize, shown_chars: usize, total_chars: usize, text: &str) -> String {
    format!("[line {line}, chars 1-{shown_chars} of {total_chars}]|{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(s: &[u8]) -> String {
        Tag::of(s).to_string()
    }

    #[test]
    fn design_vectors() {
        assert_eq!(tag(b""), "5D05");
        assert_eq!(tag(b"export const enabled = false;\n"), "5B9D");
        assert_eq!(tag(b"export const enabled = false;\r\n"), "5B9D");
        assert_eq!(tag(b"\xEF\xBB\xBFexport const enabled = false;\n"), "5B9D");
        assert_eq!(tag(b"export const enabled = false;"), "B3E2");
        assert_eq!(tag(b"alpha\nbeta\ngamma\n"), "B6C1");
        assert_eq!(tag(b"a \nb\t\r\n\n  \n"), "9422");
        assert_eq!(tag(b"line one 263\nline two 4471\n"), "1D84");
        assert_eq!(tag(b"line one 410\nline two 6970\n"), "1D84");
    }

    #[test]
    fn lone_cr_is_a_line_end() {
        assert_eq!(
            Tag::of(b"alpha\rbeta\rgamma\r"),
            Tag::of(b"alpha\nbeta\ngamma\n")
        );
    }

    #[test]
    fn inner_blanks_are_kept() {
        assert_eq!(normalize_for_tag(b"a \t b  \n c\t"), b"a \t b\n c".to_vec());
        assert_ne!(Tag::of(b"a b\n"), Tag::of(b"ab\n"));
    }

    #[test]
    fn cr_runs_are_each_a_line_end() {
        assert_eq!(normalize_for_tag(b"a \r\r\n"), b"a\n\n".to_vec());
        assert_eq!(normalize_for_tag(b"\r\n"), b"\n".to_vec());
        assert_eq!(normalize_for_tag(b"x\t"), b"x".to_vec());
    }

    #[test]
    fn parse_accepts_common_spellings() {
        assert_eq!(Tag::parse("#3c4d"), Some(Tag(0x3C4D)));
        assert_eq!(Tag::parse("3C4D"), Some(Tag(0x3C4D)));
        assert_eq!(Tag::parse("3C4"), None);
        assert_eq!(Tag::parse("XYZW"), None);
    }
}
