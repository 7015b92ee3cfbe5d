//! Text bound for a person's terminal. A command line, a file name, a
//! file's text or a program's output may hold control characters — escape
//! sequences that write the clipboard (`ESC ]52`), set the title, clear the
//! screen or move the cursor — and a terminal shown them raw obeys them.
//! Here they are written out visibly instead (`\x1b`, `\u{9b}`). What goes
//! to a pipe or a file is left as it is: there it is data, as with `cat`.
//! Deciding what text reaches a terminal belongs to the callers (the CLI,
//! the status line, the hook, setup, doctor).

use std::borrow::Cow;

/// `text` with every control character but newline and tab written out.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// `text` as one line: newlines and tabs written out too.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    escape(text, |_| false)
}

/// `text` for a stream: visible when the stream is a terminal, as it is
/// otherwise.
pub fn for_stream(text: &str, is_terminal: bool) -> Cow<'_, str> {
    if is_terminal {
        visible(text)
    } else {
        Cow::Borrowed(text)
    }
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let control = |c: char| c.is_control() && !keep(c);
    if !text.chars().any(control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !control(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_out_and_the_rest_kept() {
        let hostile =
            "ls\x1b]52;c;Y3VybCBldmlsCg==\x07\x1b]0;title\x07\x1b[2J\r\u{9b}31m é\tx\ny\x7f";
        assert_eq!(
            visible(hostile),
            "ls\\x1b]52;c;Y3VybCBldmlsCg==\\x07\\x1b]0;title\\x07\\x1b[2J\\r\\u{9b}31m é\tx\ny\\x7f"
        );
        assert_eq!(visible_line("a\tb\nc"), "a\\tb\\nc");
        assert!(matches!(visible("plain text\n"), Cow::Borrowed(_)));
        assert_eq!(for_stream("\x1b[2J", false), "\x1b[2J");
        assert_eq!(for_stream("\x1b[2J", true), "\\x1b[2J");
    }
}
