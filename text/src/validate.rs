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

/// The first key repeated within one JSON object, with its line; `None` when
/// the text has no repeated key (or is not JSON: see [`check`] for that).
pub fn json_duplicate_key(text: &str) -> Option<SyntaxError> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    use std::collections::HashSet;
    use std::fmt;

    struct Walk;
    impl<'de> DeserializeSeed<'de> for Walk {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(Walk)
        }
    }
    impl<'de> Visitor<'de> for Walk {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Walk)?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut keys = HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !keys.insert(key.clone()) {
                    return Err(serde::de::Error::custom(format!(
                        "the key \"{key}\" is repeated"
                    )));
                }
                map.next_value_seed(Walk)?;
            }
            Ok(())
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    match Walk.deserialize(&mut de) {
        Err(e) if e.to_string().contains("is repeated") => Some(SyntaxError {
            line: e.line().max(1),
            message: strip_position(&e.to_string()),
        }),
        _ => None,
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
    fn repeated_json_keys_are_found() {
        let e = json_duplicate_key("{\n\"a\": 1,\n\"b\": {\"x\": 1},\n\"a\": 2\n}\n").unwrap();
        assert_eq!(e.line, 4);
        assert!(e.message.contains("\"a\""), "{}", e.message);
        assert_eq!(json_duplicate_key("{\"a\": {\"a\": 1}}"), None);
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
