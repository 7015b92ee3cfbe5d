//! Lenient tool arguments: what a model sends, turned into typed values.
//!
//! Models send numbers as strings, lists as JSON text, and other tools' argument
//! names (`file_path`, `offset`, `limit`). Each such slip is accepted and leaves a
//! short note that the tool prints under its result, so the model learns the
//! right form. A value of the wrong type that cannot be read is an [`ArgError`],
//! which the server reports as a protocol error (invalid params).

use serde_json::{Map, Value};

/// An argument that cannot be used as sent.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ArgError(pub String);

/// A tool's arguments being taken apart.
#[derive(Debug)]
pub struct Args {
    map: Map<String, Value>,
    notes: Vec<String>,
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl Args {
    /// Wraps the arguments object (absent arguments are an empty object).
    pub fn new(map: Option<Map<String, Value>>) -> Args {
        Args {
            map: map.unwrap_or_default(),
            notes: Vec::new(),
        }
    }

    /// Adds a note for the result.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Takes the notes made so far (later ones still come from [`Args::finish`]).
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Whether an argument was sent (null counts as absent).
    pub fn has(&self, name: &str) -> bool {
        self.map.get(name).is_some_and(|v| !v.is_null())
    }

    /// Moves `alias` to `name` when only the alias was sent, with a note.
    pub fn alias(&mut self, alias: &str, name: &str) {
        if self.has(alias)
            && !self.has(name)
            && let Some(v) = self.map.remove(alias)
        {
            self.map.insert(name.to_string(), v);
            self.note(format!("took \"{alias}\" as \"{name}\""));
        }
    }

    /// Takes the raw value, if sent.
    pub fn take_value(&mut self, name: &str) -> Option<Value> {
        self.map.remove(name).filter(|v| !v.is_null())
    }

    /// A string argument.
    pub fn string(&mut self, name: &str) -> Result<Option<String>, ArgError> {
        match self.take_value(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => {
                self.note(format!("took {name} {v} as a string"));
                Ok(Some(v.to_string()))
            }
            Some(v) => Err(ArgError(format!(
                "\"{name}\" must be a string, got {}",
                type_name(&v)
            ))),
        }
    }

    /// An argument whose schema takes a number or a text (`timeout`: `90`
    /// or `"90s"`), as text; a number is no leniency, so no note.
    pub fn number_or_text(&mut self, name: &str) -> Result<Option<String>, ArgError> {
        match self.take_value(name) {
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(v) => {
                self.map.insert(name.to_string(), v);
                self.string(name)
            }
            None => Ok(None),
        }
    }

    /// A required string argument.
    pub fn required_string(&mut self, name: &str) -> Result<String, ArgError> {
        self.string(name)?
            .ok_or_else(|| ArgError(format!("\"{name}\" is required")))
    }

    /// A non-negative integer; a numeric string is accepted with a note.
    pub fn usize(&mut self, name: &str) -> Result<Option<usize>, ArgError> {
        match self.take_value(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .map(|n| Some(n as usize))
                .ok_or_else(|| ArgError(format!("\"{name}\" must be a whole number ≥ 0, got {n}"))),
            Some(Value::String(s)) => match s.trim().parse::<usize>() {
                Ok(n) => {
                    self.note(format!("took {name} \"{s}\" as the number {n}"));
                    Ok(Some(n))
                }
                Err(_) => Err(ArgError(format!(
                    "\"{name}\" must be a whole number, got the string \"{s}\""
                ))),
            },
            Some(v) => Err(ArgError(format!(
                "\"{name}\" must be a number, got {}",
                type_name(&v)
            ))),
        }
    }

    /// A boolean; "true"/"false" strings are accepted with a note.
    pub fn bool(&mut self, name: &str) -> Result<Option<bool>, ArgError> {
        match self.take_value(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => {
                    self.note(format!("took {name} \"{s}\" as true"));
                    Ok(Some(true))
                }
                "false" | "0" | "no" => {
                    self.note(format!("took {name} \"{s}\" as false"));
                    Ok(Some(false))
                }
                _ => Err(ArgError(format!(
                    "\"{name}\" must be true or false, got \"{s}\""
                ))),
            },
            Some(v) => Err(ArgError(format!(
                "\"{name}\" must be true or false, got {}",
                type_name(&v)
            ))),
        }
    }

    /// A list of strings. A JSON list sent as a string, or one plain string, is
    /// accepted with a note.
    pub fn string_list(&mut self, name: &str) -> Result<Option<Vec<String>>, ArgError> {
        match self.take_value(name) {
            None => Ok(None),
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::String(s) => out.push(s),
                        other => {
                            return Err(ArgError(format!(
                                "\"{name}\" must be a list of strings; one item is {}",
                                type_name(&other)
                            )));
                        }
                    }
                }
                Ok(Some(out))
            }
            Some(Value::String(s)) => {
                let trimmed = s.trim();
                if trimmed.starts_with('[')
                    && let Ok(list) = serde_json::from_str::<Vec<String>>(trimmed)
                {
                    self.note(format!("took {name} sent as a JSON string as a list"));
                    return Ok(Some(list));
                }
                self.note(format!("took {name} \"{s}\" as a list of one"));
                Ok(Some(vec![s]))
            }
            Some(v) => Err(ArgError(format!(
                "\"{name}\" must be a list of strings, got {}",
                type_name(&v)
            ))),
        }
    }

    /// Ends parsing: unknown arguments are ignored with a note; returns the notes.
    pub fn finish(mut self) -> Vec<String> {
        let mut unknown: Vec<String> = self.map.keys().cloned().collect();
        unknown.sort();
        if !unknown.is_empty() {
            self.notes.push(format!(
                "ignored unknown argument(s): {}",
                unknown.join(", ")
            ));
        }
        self.notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Args {
        match v {
            Value::Object(m) => Args::new(Some(m)),
            _ => Args::new(None),
        }
    }

    #[test]
    fn numbers_as_strings_get_a_note() {
        let mut a = args(json!({"n": "12", "m": 3}));
        assert_eq!(a.usize("n").unwrap(), Some(12));
        assert_eq!(a.usize("m").unwrap(), Some(3));
        assert_eq!(a.finish().len(), 1);
    }

    #[test]
    fn lists_as_json_strings_are_parsed() {
        let mut a = args(json!({"paths": "[\"a\", \"b\"]"}));
        assert_eq!(
            a.string_list("paths").unwrap(),
            Some(vec!["a".into(), "b".into()])
        );
        let mut a = args(json!({"paths": "a.txt"}));
        assert_eq!(a.string_list("paths").unwrap(), Some(vec!["a.txt".into()]));
    }

    #[test]
    fn wrong_types_are_errors() {
        let mut a = args(json!({"paths": 42, "plain": {"x": 1}, "n": -1}));
        assert!(a.string_list("paths").is_err());
        assert!(a.bool("plain").is_err());
        assert!(a.usize("n").is_err());
    }

    #[test]
    fn aliases_and_unknowns_are_noted() {
        let mut a = args(json!({"file_path": "x", "bogus": 1}));
        a.alias("file_path", "path");
        assert_eq!(a.required_string("path").unwrap(), "x");
        let notes = a.finish();
        assert!(notes[0].contains("file_path"));
        assert!(notes[1].contains("bogus"));
    }
}
