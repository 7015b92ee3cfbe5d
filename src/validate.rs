//! Syntax checks for JSON, YAML and TOML files, so a write or edit that breaks
//! one can warn with the line of the first error (the file is still written).

use crate::filekind::Syntax;

/// The first syntax error of a text: 1-based line and a short message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where the error is.
    pub line: usize,
    /// What the parser said.
    pub message: String,
}

/// Checks `text` as `syntax`; `None` when it parses.
pub fn check(syntax: Syntax, text: &str) -> Option<SyntaxError> {
    match syntax {
        Syntax::Json => serde_json::from_str::<serde::de::IgnoredAny>(text)
            .err()
            .map(|e| SyntaxError {
                line: e.line().max(1),
                message: strip_position(&e.to_string()),
            }),
        Syntax::Yaml => yaml_rust2::YamlLoader::load_from_str(text)
            .err()
            .map(|e| SyntaxError {
                line: e.marker().line().max(1),
                message: e.info().to_string(),
            }),
        Syntax::Toml => toml::from_str::<toml::Table>(text).err().map(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                .unwrap_or(1);
            SyntaxError {
                line,
                message: e.message().to_string(),
            }
        }),
    }
}

/// serde_json appends " at line N column M"; the line is reported separately.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// The syntax's name for messages.
pub fn name(syntax: Syntax) -> &'static str {
    match syntax {
        Syntax::Json => "JSON",
        Syntax::Yaml => "YAML",
        Syntax::Toml => "TOML",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_texts_pass() {
        assert_eq!(check(Syntax::Json, "{\"a\": [1, 2]}\n"), None);
        assert_eq!(check(Syntax::Yaml, "a:\n  - 1\n"), None);
        assert_eq!(check(Syntax::Toml, "[a]\nb = 1\n"), None);
    }

    #[test]
    fn errors_name_their_line() {
        assert_eq!(
            check(Syntax::Json, "{\n\"a\": 1,\n}\n").map(|e| e.line),
            Some(3)
        );
        assert_eq!(
            check(Syntax::Yaml, "a: 1\nb: [1, 2\nc: 3\n").map(|e| e.line),
            Some(3)
        );
        assert_eq!(
            check(Syntax::Yaml, "x: 1\na: b: c\n").map(|e| e.line),
            Some(2)
        );
        assert_eq!(
            check(Syntax::Toml, "a = 1\nb = \n").map(|e| e.line),
            Some(2)
        );
    }
}
