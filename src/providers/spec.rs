//! Which providers to start: `--provider NAME=PROGRAM` on nib's command line,
//! the project's nib.json (`"providers": {"NAME": "PROGRAM"}` or
//! `{"NAME": {"command": [...], "env": {...}}}`), and the user's
//! `setup.json` (what `nib setup --provider` keeps), in that order. A name
//! given twice keeps its first source, and the later one is reported once.
//!
//! Plain data and parsing; starting them is [`super::session`]'s.

use std::path::Path;

use serde_json::Value;

/// Where a provider was named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--provider` on nib's command line.
    CommandLine,
    /// The project's nib.json.
    NibJson,
    /// `setup.json` in nib's settings folder.
    Setup,
}

impl Source {
    /// How the source is named to people.
    pub fn label(self) -> &'static str {
        match self {
            Source::CommandLine => "--provider",
            Source::NibJson => "nib.json",
            Source::Setup => "setup.json",
        }
    }
}

/// One provider to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderSpec {
    /// The prefix of its tools (`zemble` → `zemble_search`).
    pub name: String,
    /// The program and its arguments, as run.
    pub command: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Where it was named.
    pub source: Source,
}

/// The argument a provider program gets after its own (the string form).
pub const PROVIDER_ARG: &str = "nib-provider";

/// Whether `name` may prefix tool names: ASCII letters, digits and `-`,
/// starting with a letter, at most 32 characters (so `NAME_TOOL` stays a
/// name every client accepts, and `_` separates the two unambiguously).
pub fn valid_name(name: &str) -> bool {
    name.len() <= 32
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// The string form: `PROGRAM` (words split on white space), then
/// [`PROVIDER_ARG`].
fn from_program(name: &str, program: &str, source: Source) -> Result<ProviderSpec, String> {
    let mut command: Vec<String> = program.split_whitespace().map(str::to_string).collect();
    if command.is_empty() {
        return Err(format!(
            "provider {name} ({}): no program given",
            source.label()
        ));
    }
    command.push(PROVIDER_ARG.into());
    Ok(ProviderSpec {
        name: name.into(),
        command,
        env: Vec::new(),
        source,
    })
}

/// One entry of a `providers` object: a program string, or
/// `{"command": [...], "env": {...}}` (run exactly as given).
fn from_json(name: &str, value: &Value, source: Source) -> Result<ProviderSpec, String> {
    if let Some(program) = value.as_str() {
        return from_program(name, program, source);
    }
    let bad = || {
        format!(
            "provider {name} ({}): expected \"PROGRAM\" or {{\"command\": [\"program\", \"arg\"…], \"env\": {{…}}}}",
            source.label()
        )
    };
    let obj = value.as_object().ok_or_else(bad)?;
    let command: Vec<String> = obj
        .get("command")
        .and_then(Value::as_array)
        .ok_or_else(bad)?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    if command.is_empty() {
        return Err(bad());
    }
    let env = match obj.get("env") {
        None => Vec::new(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect::<Option<_>>()
            .ok_or_else(bad)?,
        Some(_) => return Err(bad()),
    };
    Ok(ProviderSpec {
        name: name.into(),
        command,
        env,
        source,
    })
}

/// The `providers` object of a JSON settings file, in its order.
fn from_file(path: &Path, source: Source, notes: &mut Vec<String>) -> Vec<ProviderSpec> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    let json: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            notes.push(format!(
                "{} is not JSON ({e}); no providers were read from it",
                path.display()
            ));
            return Vec::new();
        }
    };
    let Some(providers) = json.get("providers") else {
        return Vec::new();
    };
    let Some(map) = providers.as_object() else {
        notes.push(format!(
            "\"providers\" in {} is not an object of NAME: PROGRAM; no providers were read from it",
            path.display()
        ));
        return Vec::new();
    };
    map.iter()
        .filter_map(|(name, v)| match from_json(name, v, source) {
            Ok(s) => Some(s),
            Err(e) => {
                notes.push(e);
                None
            }
        })
        .collect()
}

/// Every provider to start, in the order of their sources, with notes
/// about entries left out (bad names, bad entries, names given twice).
pub fn collect(
    cli: &[(String, String)],
    project_dir: &Path,
    config_dir: &Path,
) -> (Vec<ProviderSpec>, Vec<String>) {
    let mut notes = Vec::new();
    let mut all: Vec<ProviderSpec> = Vec::new();
    for (name, program) in cli {
        match from_program(name, program, Source::CommandLine) {
            Ok(s) => all.push(s),
            Err(e) => notes.push(e),
        }
    }
    all.extend(from_file(
        &project_dir.join("nib.json"),
        Source::NibJson,
        &mut notes,
    ));
    all.extend(from_file(
        &config_dir.join("setup.json"),
        Source::Setup,
        &mut notes,
    ));
    let mut kept: Vec<ProviderSpec> = Vec::new();
    for spec in all {
        if !valid_name(&spec.name) {
            notes.push(format!(
                "provider name {:?} ({}) left out: use letters, digits and -, starting with a letter",
                spec.name,
                spec.source.label()
            ));
        } else if let Some(first) = kept.iter().find(|k| k.name == spec.name) {
            notes.push(format!(
                "provider {} is named again in {}; the one from {} stands",
                spec.name,
                spec.source.label(),
                first.source.label()
            ));
        } else {
            kept.push(spec);
        }
    }
    (kept, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_in_order_first_name_wins_and_bad_entries_are_named() {
        let project = tempfile::tempdir().unwrap();
        let config = tempfile::tempdir().unwrap();
        std::fs::write(
            project.path().join("nib.json"),
            r#"{"providers": {"zemble": "other", "docs": {"command": ["/bin/docs", "--stdio"], "env": {"K": "v"}}, "bad_name": "x", "odd": 3}}"#,
        )
        .unwrap();
        std::fs::write(
            config.path().join("setup.json"),
            r#"{"providers": {"docs": "later", "mine": "my prog"}}"#,
        )
        .unwrap();
        let (specs, notes) = collect(
            &[("zemble".into(), "zemble".into())],
            project.path(),
            config.path(),
        );
        let got: Vec<(&str, Vec<&str>, Source)> = specs
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.command.iter().map(String::as_str).collect(),
                    s.source,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "zemble",
                    vec!["zemble", "nib-provider"],
                    Source::CommandLine
                ),
                ("docs", vec!["/bin/docs", "--stdio"], Source::NibJson),
                ("mine", vec!["my", "prog", "nib-provider"], Source::Setup),
            ]
        );
        assert_eq!(specs[1].env, vec![("K".to_string(), "v".to_string())]);
        let notes = notes.join("\n");
        assert!(notes.contains("\"bad_name\""), "{notes}");
        assert!(
            notes.contains("provider odd (nib.json): expected"),
            "{notes}"
        );
        assert!(
            notes.contains(
                "provider zemble is named again in nib.json; the one from --provider stands"
            ),
            "{notes}"
        );
        assert!(
            notes.contains(
                "provider docs is named again in setup.json; the one from nib.json stands"
            ),
            "{notes}"
        );
    }

    #[test]
    fn names_are_tool_prefixes() {
        assert!(valid_name("zemble"));
        assert!(valid_name("code-search2"));
        assert!(!valid_name(""));
        assert!(!valid_name("2x"));
        assert!(!valid_name("a_b"));
        assert!(!valid_name("a.b"));
        assert!(!valid_name(&"a".repeat(33)));
    }
}
