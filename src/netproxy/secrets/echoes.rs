//! A value's encoded forms: each pair of (real, placeholder) written in
//! base64 (both alphabets, every offset), percent-encoding and JSON
//! escapes, so a response that echoes the real value in any of them comes
//! back as the placeholder in the same form. Scrubbing the bytes is
//! `scrub`'s.

use base64::Engine;

/// How one character of a value is written in an encoded echo.
#[derive(Clone, Copy)]
pub(super) enum Form {
    Literal,
    /// `%2F`, upper- or lowercase hex.
    Percent(bool),
    /// `\u002f`, upper- or lowercase hex.
    Unicode(bool),
    /// JSON's `\/`.
    Slash,
}

pub(super) fn write_form(out: &mut Vec<u8>, b: u8, form: Form) {
    let hex = |upper: bool| {
        if upper {
            format!("{b:02X}")
        } else {
            format!("{b:02x}")
        }
    };
    match form {
        Form::Literal => out.push(b),
        Form::Percent(upper) => out.extend(format!("%{}", hex(upper)).bytes()),
        Form::Unicode(upper) => out.extend(format!("\\u00{}", hex(upper)).bytes()),
        Form::Slash if b == b'/' => out.extend(b"\\/"),
        Form::Slash => out.push(b),
    }
}

/// `real` and `placeholder` (of equal lengths) each written with the form
/// `form` gives for the real character at each place, so the two
/// encodings have equal lengths too.
pub(super) fn written(
    real: &[u8],
    placeholder: &[u8],
    form: impl Fn(u8) -> Form,
) -> (Vec<u8>, Vec<u8>) {
    let (mut r, mut p) = (Vec::new(), Vec::new());
    for (&a, &b) in real.iter().zip(placeholder) {
        let f = form(a);
        // A `\/` stays `\/` only where both hold `/` (a placeholder keeps
        // the value's `/` and has no other).
        let f = match f {
            Form::Slash if b != b'/' => Form::Literal,
            f => f,
        };
        write_form(&mut r, a, f);
        write_form(&mut p, b, f);
    }
    (r, p)
}

/// The `(real, placeholder)` pairs of `real` as a server may echo it: as
/// it is; JSON-escaped (`\/`, every character or every one outside
/// `A-Za-z0-9-._~` as `\uXXXX`, `/` either way); percent-encoded (the reserved characters or all of
/// them, either case of hex); and base64 (standard and URL alphabets, at
/// each of the three places a value may start in an encoded run — the
/// characters that hold only the value's bits). Each placeholder form has
/// its real form's length, so a body keeps its length.
pub fn encoded_echoes(real: &[u8], placeholder: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = vec![(real.to_vec(), placeholder.to_vec())];
    if real.len() != placeholder.len() {
        return out;
    }
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || b"-._~".contains(&b);
    for upper in [true, false] {
        out.push(written(real, placeholder, |_| Form::Unicode(upper)));
        for slash in [Form::Slash, Form::Unicode(upper)] {
            out.push(written(real, placeholder, |b| match b {
                b'/' => slash,
                b if unreserved(b) => Form::Literal,
                _ => Form::Unicode(upper),
            }));
        }
        out.push(written(real, placeholder, |_| Form::Percent(upper)));
        out.push(written(real, placeholder, |b| {
            if unreserved(b) {
                Form::Literal
            } else {
                Form::Percent(upper)
            }
        }));
    }
    out.push(written(real, placeholder, |_| Form::Slash));
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        for k in 0..3usize {
            let encode = |v: &[u8]| {
                let mut led = vec![0u8; k];
                led.extend_from_slice(v);
                engine.encode(led).into_bytes()
            };
            let (r, p) = (encode(real), encode(placeholder));
            // Character j holds bits 6j..6j+6 of the run: only the value's
            // when they lie within bytes k..k+len.
            let inner: Vec<usize> = (0..r.len())
                .filter(|j| 6 * j >= 8 * k && 6 * j + 6 <= 8 * (k + real.len()))
                .collect();
            if let (Some(&first), Some(&last)) = (inner.first(), inner.last()) {
                out.push((r[first..=last].to_vec(), p[first..=last].to_vec()));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|(r, _)| seen.insert(r.clone()));
    out
}

pub(super) fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}
