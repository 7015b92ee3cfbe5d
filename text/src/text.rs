//! A text file as lines: its BOM, its line endings, whether it ends in a newline.
//!
//! Line numbers everywhere in nib are the numbers of [`Text::lines`] (1-based in
//! output): CRLF and lone CR end a line just as LF does, matching the tag, and the
//! final newline is not a line of its own. Encoding back with [`Text::encode`]
//! restores the BOM, each line's ending and the final newline, so a file that
//! is read and written unchanged keeps its bytes (invalid UTF-8 excepted).

/// The line ending a file uses most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineEnding {
    /// `\n`
    Lf,
    /// `\r\n`
    Crlf,
    /// a lone `\r`
    Cr,
}

impl LineEnding {
    /// The bytes of this line ending.
    pub fn as_str(self) -> &'static str {
        match self {
            LineEnding::Lf => "\n",
            LineEnding::Crlf => "\r\n",
            LineEnding::Cr => "\r",
        }
    }

    /// The name shown in `info` output.
    pub fn name(self) -> &'static str {
        match self {
            LineEnding::Lf => "LF",
            LineEnding::Crlf => "CRLF",
            LineEnding::Cr => "CR",
        }
    }
}

/// Lines of text in one buffer: line `i` is `buf[ends[i - 1]..ends[i]]`
/// (from 0 for the first). One allocation for a whole file instead of one
/// per line: a kept version of a file costs about its size, not three times
/// it (nib keeps several versions per file the agent saw).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Lines {
    buf: String,
    ends: Vec<usize>,
}

impl Lines {
    /// Room for `lines` lines of `bytes` bytes in all.
    pub fn with_capacity(bytes: usize, lines: usize) -> Lines {
        Lines {
            buf: String::with_capacity(bytes),
            ends: Vec::with_capacity(lines),
        }
    }

    /// Adds a line (without its ending).
    pub fn push(&mut self, line: &str) {
        self.buf.push_str(line);
        self.ends.push(self.buf.len());
    }

    /// The number of lines.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The bytes of all lines together (endings not counted).
    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// Line `i` (0-based).
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.buf.get(start..end)
    }

    /// The lines in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator + Clone {
        (0..self.ends.len()).map(|i| self.get(i).unwrap_or(""))
    }

    /// Lines `range` (0-based), as many as exist.
    pub fn range(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = &str> {
        let end = range.end.min(self.len());
        (range.start.min(end)..end).map(|i| self.get(i).unwrap_or(""))
    }

    /// The lines as borrowed strings (for diffing).
    pub fn to_strs(&self) -> Vec<&str> {
        self.iter().collect()
    }
}

impl std::ops::Index<usize> for Lines {
    type Output = str;

    /// Line `i`; panics past the end, like a slice.
    fn index(&self, i: usize) -> &str {
        match self.get(i) {
            Some(line) => line,
            None => panic!("line index {i} out of range for {} lines", self.len()),
        }
    }
}

impl<S: AsRef<str>> FromIterator<S> for Lines {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Lines {
        let mut lines = Lines::default();
        lines.extend(iter);
        lines
    }
}

impl<S: AsRef<str>> Extend<S> for Lines {
    fn extend<I: IntoIterator<Item = S>>(&mut self, iter: I) {
        for line in iter {
            self.push(line.as_ref());
        }
    }
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<S: AsRef<str>> PartialEq<Vec<S>> for Lines {
    fn eq(&self, other: &Vec<S>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b.as_ref())
    }
}

/// A decoded text file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text {
    /// The file started with a UTF-8 byte order mark.
    pub bom: bool,
    /// The most common line ending (LF for a file without any).
    pub ending: LineEnding,
    /// More than one kind of line ending occurs.
    pub mixed_endings: bool,
    /// Each line's own ending, kept only when they are mixed (empty
    /// otherwise: every line ends with [`Text::ending`]). A last line without
    /// one has no entry.
    pub endings: Vec<LineEnding>,
    /// The lines, without their endings; invalid UTF-8 is replaced by U+FFFD.
    pub lines: Lines,
    /// The last line is followed by a line ending.
    pub final_newline: bool,
}

impl Text {
    /// Splits raw file bytes into lines.
    pub fn decode(bytes: &[u8]) -> Text {
        let (bom, body) = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
            Some(rest) => (true, rest),
            None => (false, bytes),
        };
        // Valid UTF-8 (the common case) is split without a lossy pass per line.
        let valid = std::str::from_utf8(body).ok();
        let mut lines = Lines::with_capacity(body.len(), body.len() / 32 + 1);
        let mut line_of = |a: usize, b: usize| match valid {
            Some(s) => lines.push(&s[a..b]),
            None => lines.push(&String::from_utf8_lossy(&body[a..b])),
        };
        let mut endings = Vec::new();
        let (mut lf, mut crlf, mut cr) = (0usize, 0usize, 0usize);
        let mut start = 0;
        let mut final_newline = false;
        while start < body.len() {
            let Some(i) = memchr::memchr2(b'\n', b'\r', &body[start..]) else {
                line_of(start, body.len());
                final_newline = false;
                break;
            };
            let end = start + i;
            line_of(start, end);
            start = if body[end] == b'\r' && body.get(end + 1) == Some(&b'\n') {
                crlf += 1;
                endings.push(LineEnding::Crlf);
                end + 2
            } else {
                if body[end] == b'\r' {
                    cr += 1;
                    endings.push(LineEnding::Cr);
                } else {
                    lf += 1;
                    endings.push(LineEnding::Lf);
                }
                end + 1
            };
            final_newline = start == body.len();
        }
        let ending = if crlf > lf && crlf >= cr {
            LineEnding::Crlf
        } else if cr > lf && cr > crlf {
            LineEnding::Cr
        } else {
            LineEnding::Lf
        };
        let kinds = [lf, crlf, cr].iter().filter(|&&n| n > 0).count();
        if kinds < 2 {
            endings = Vec::new();
        }
        Text {
            bom,
            ending,
            mixed_endings: kinds > 1,
            endings,
            lines,
            final_newline,
        }
    }

    /// The ending after line `i` (0-based): its own where they are mixed.
    pub fn ending_of(&self, i: usize) -> LineEnding {
        self.endings.get(i).copied().unwrap_or(self.ending)
    }

    /// A text of these lines shaped like `self` (BOM, endings, final newline).
    pub fn with_lines(&self, lines: Lines, endings: Vec<LineEnding>) -> Text {
        Text {
            bom: self.bom,
            ending: self.ending,
            mixed_endings: self.mixed_endings,
            endings,
            lines,
            final_newline: self.final_newline,
        }
    }

    /// Joins the lines back into bytes with the file's BOM, ending and final newline.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.bom {
            out.extend_from_slice(b"\xEF\xBB\xBF");
        }
        for (i, line) in self.lines.iter().enumerate() {
            out.extend_from_slice(line.as_bytes());
            if i + 1 < self.lines.len() || self.final_newline {
                out.extend_from_slice(self.ending_of(i).as_str().as_bytes());
            }
        }
        out
    }

    /// The number of addressable lines.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// The file has no lines at all.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Line `n` (1-based), if it exists.
    pub fn line(&self, n: usize) -> Option<&str> {
        n.checked_sub(1).and_then(|i| self.lines.get(i))
    }
}

/// The line diff from `old` to `new` (Myers, bounded to two seconds).
pub fn diff_ops(old: &Text, new: &Text) -> Vec<similar::DiffOp> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    similar::capture_diff_slices_deadline(
        similar::Algorithm::Myers,
        &old.lines.to_strs(),
        &new.lines.to_strs(),
        Some(deadline),
    )
}

/// For each line of `old` (0-based), its index in `new` when it is unchanged
/// (a Myers line diff, bounded to two seconds).
pub fn unchanged_map(old: &Text, new: &Text) -> Vec<Option<usize>> {
    let mut map = vec![None; old.len()];
    let ops = diff_ops(old, new);
    for op in ops {
        if let similar::DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            for k in 0..len {
                map[old_index + k] = Some(new_index + k);
            }
        }
    }
    map
}

/// Text sent by an agent, shaped like the file it replaces: the old file's
/// CRLF (or CR) endings and BOM are kept when the new content has none of its own.
pub fn shape_like(content: &str, old: Option<&Text>) -> Vec<u8> {
    let Some(old) = old else {
        return content.as_bytes().to_vec();
    };
    let mut text = Text::decode(content.as_bytes());
    if !content.contains('\r') {
        text.ending = old.ending;
        if !old.endings.is_empty() {
            // Lines the write leaves as they were keep their own endings;
            // a changed line takes the ending of the line before it.
            let mut from: Vec<Option<usize>> = vec![None; text.len()];
            for (j, i) in unchanged_map(old, &text).into_iter().enumerate() {
                if let Some(slot) = i.and_then(|i| from.get_mut(i)) {
                    *slot = Some(j);
                }
            }
            let mut endings: Vec<LineEnding> = Vec::with_capacity(text.len());
            for f in &from {
                let from_old = f.map(|j| old.ending_of(j));
                let e = from_old
                    .or_else(|| endings.last().copied())
                    .unwrap_or(old.ending);
                endings.push(e);
            }
            text.mixed_endings = true;
            text.endings = endings;
        }
    }
    if old.bom {
        text.bom = true;
    }
    text.encode()
}

#[cfg(test)]
mod mixed_endings {
    use super::*;

    #[test]
    fn decode_and_encode_keep_each_lines_ending() {
        for bytes in [
            &b"a\r\nb\nc\rd"[..],
            b"a\r\nb\nc\rd\n",
            b"\xEF\xBB\xBFa\rb\r\n",
            b"plain\nlf\n",
        ] {
            assert_eq!(Text::decode(bytes).encode(), bytes);
        }
        assert!(
            Text::decode(b"a\nb\n").endings.is_empty(),
            "kept only when mixed"
        );
    }

    #[test]
    fn a_write_keeps_the_endings_of_lines_it_leaves() {
        let old = Text::decode(b"one\r\ntwo\nthree\rfour\n");
        assert_eq!(
            shape_like("one\nTWO\nthree\nfour\nfive\n", Some(&old)),
            b"one\r\nTWO\r\nthree\rfour\nfive\n"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_newline_is_not_a_line() {
        let t = Text::decode(b"a\nb\n");
        assert_eq!(t.lines, vec!["a", "b"]);
        assert!(t.final_newline);
        let t = Text::decode(b"a\nb");
        assert_eq!(t.lines, vec!["a", "b"]);
        assert!(!t.final_newline);
        let t = Text::decode(b"");
        assert!(t.is_empty());
        let t = Text::decode(b"\n");
        assert_eq!(t.lines, vec![""]);
    }

    #[test]
    fn round_trips_each_ending_and_bom() {
        for raw in [
            &b"a\nb\n"[..],
            b"a\r\nb\r\n",
            b"\xEF\xBB\xBFx\r\ny",
            b"one\rtwo\r",
            b"",
            b"no newline",
        ] {
            let t = Text::decode(raw);
            assert_eq!(t.encode(), raw, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn crlf_is_detected() {
        let t = Text::decode(b"a\r\nb\r\nc\n");
        assert_eq!(t.ending, LineEnding::Crlf);
        assert!(t.mixed_endings);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let t = Text::decode(b"ok\n\xFF\xFEbad\n");
        assert_eq!(&t.lines[1], "\u{FFFD}\u{FFFD}bad");
    }

    #[test]
    fn shape_like_keeps_crlf_and_bom() {
        let old = Text::decode(b"\xEF\xBB\xBFa\r\nb\r\n");
        assert_eq!(shape_like("x\ny\n", Some(&old)), b"\xEF\xBB\xBFx\r\ny\r\n");
        assert_eq!(shape_like("x\ny\n", None), b"x\ny\n");
        // Content with its own endings is left as sent.
        let lf_old = Text::decode(b"a\n");
        assert_eq!(shape_like("x\r\ny\r\n", Some(&lf_old)), b"x\r\ny\r\n");
    }
}
