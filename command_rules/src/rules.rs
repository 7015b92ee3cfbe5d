//! The rules of a `nib.json`: `program` rules (a name or a list of names,
//! matched by base name, optionally narrowed by an `args` regex) and `rule`
//! entries judged by a decision model (optionally gated by a `match` regex
//! over the command text, and by a program and args). The nearest `nib.json`
//! with rules at or above a folder applies. Plain data and matching; no
//! effects but reading the file.

use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;

/// Why a nib.json's rules cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The file is not the JSON nib expects.
    #[error(
        "{path}: {why}; fix the file (rules are [{{\"program\": …, \"why\": …}}, …]) before running commands"
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Names {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    program: Option<Names>,
    args: Option<String>,
    why: Option<String>,
    rule: Option<String>,
    #[serde(rename = "match")]
    matches: Option<String>,
}

#[derive(Deserialize)]
struct RawFile {
    rules: Option<Vec<RawRule>>,
}

/// One rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// Its position in the file (1-based), for messages.
    pub index: usize,
    /// Program base names it applies to (empty: any program, for model rules).
    pub programs: Vec<String>,
    /// A regex over the arguments (joined by spaces).
    pub args: Option<Regex>,
    /// Why, as the file says.
    pub why: Option<String>,
    /// For a model rule: the rule text the model judges.
    pub rule: Option<String>,
    /// For a model rule: a regex over the command text that must hit.
    pub matches: Option<Regex>,
}

impl Rule {
    /// A rule the program check enforces by itself (no model).
    pub fn is_program_rule(&self) -> bool {
        self.rule.is_none() && !self.programs.is_empty()
    }

    /// Whether `name` (as written, maybe a path) is one of its programs.
    pub fn names(&self, name: &str) -> bool {
        let base = base_name(name);
        self.programs.iter().any(|p| p == base)
    }

    /// Whether these arguments match (no `args` regex: any arguments).
    pub fn args_match(&self, args: &[String]) -> bool {
        match &self.args {
            None => true,
            Some(re) => re.is_match(&args.join(" ")),
        }
    }

    /// How the rule reads in a refusal.
    pub fn describe(&self) -> String {
        let what = if let Some(r) = &self.rule {
            format!("\"{r}\"")
        } else {
            let names = self.programs.join(", ");
            match &self.args {
                Some(a) => format!("program {names} with arguments matching /{}/", a.as_str()),
                None => format!("program {names}"),
            }
        };
        match &self.why {
            Some(w) => format!("rule {} ({what}): {w}", self.index),
            None => format!("rule {} ({what})", self.index),
        }
    }
}

/// The base name of a program as written (`/usr/bin/gradle` → `gradle`).
pub fn base_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// The rules in force, and where they came from.
#[derive(Clone, Debug)]
pub struct Rules {
    /// The nib.json they were read from.
    pub source: PathBuf,
    /// The rules, in file order.
    pub rules: Vec<Rule>,
}

impl Rules {
    /// Parses the text of a nib.json; `None` when it has no rules.
    pub fn parse(path: &Path, text: &str) -> Result<Option<Rules>, RulesError> {
        let invalid = |why: String| RulesError::Invalid {
            path: path.to_path_buf(),
            why,
        };
        let raw: RawFile = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let Some(raw_rules) = raw.rules.filter(|r| !r.is_empty()) else {
            return Ok(None);
        };
        let mut rules = Vec::new();
        for (i, r) in raw_rules.into_iter().enumerate() {
            let index = i + 1;
            let programs = match r.program {
                None => Vec::new(),
                Some(Names::One(p)) => vec![p],
                Some(Names::Many(ps)) => ps,
            };
            if programs.iter().any(|p| p.is_empty() || p.contains('/')) {
                return Err(invalid(format!(
                    "rule {index}: a program is a base name (gradle), not empty and not a path"
                )));
            }
            if programs.is_empty() && r.rule.is_none() {
                return Err(invalid(format!(
                    "rule {index} names no program and has no \"rule\" text"
                )));
            }
            let compile = |what: &str, re: Option<String>| -> Result<Option<Regex>, RulesError> {
                re.map(|s| {
                    Regex::new(&s).map_err(|e| {
                        invalid(format!("rule {index}: \"{what}\" is not a regex: {e}"))
                    })
                })
                .transpose()
            };
            rules.push(Rule {
                index,
                programs,
                args: compile("args", r.args)?,
                why: r.why,
                rule: r.rule,
                matches: compile("match", r.matches)?,
            });
        }
        Ok(Some(Rules {
            source: path.to_path_buf(),
            rules,
        }))
    }

    /// The nearest nib.json with rules at or above `dir`.
    pub fn find(dir: &Path) -> Result<Option<Rules>, RulesError> {
        for d in dir.ancestors() {
            let path = d.join("nib.json");
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if let Some(rules) = Rules::parse(&path, &text)? {
                return Ok(Some(rules));
            }
        }
        Ok(None)
    }

    /// The rules the program check enforces without a model.
    pub fn program_rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(|r| r.is_program_rule())
    }

    /// The rules a decision model judges.
    pub fn model_rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(|r| r.rule.is_some())
    }

    /// Whether a program rule could match a command whose name is unknown.
    pub fn has_program_rules(&self) -> bool {
        self.program_rules().next().is_some()
    }

    /// Every program name a program rule forbids outright (no `args`), for
    /// the runtime layers.
    pub fn forbidden_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .program_rules()
            .filter(|r| r.args.is_none())
            .flat_map(|r| r.programs.iter().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specs_example_parses_and_matches() {
        let text = r#"{"rules": [
          {"program": ["gradlew", "gradle"], "why": "Gradle runs through zenit-dev's MCP tools"},
          {"program": "zenit-dev", "args": "^(build|test)( |$)", "why": "use zd_build / zd_test"},
          {"rule": "Do not run full test suites directly.", "match": "gradle|test", "why": "Use the zenit-dev MCP tools."},
          {"rule": "Do not pipe or filter zenit-dev's output.", "program": "zenit-dev"}
        ]}"#;
        let rules = match Rules::parse(Path::new("/p/nib.json"), text) {
            Ok(Some(r)) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(rules.program_rules().count(), 2);
        assert_eq!(rules.model_rules().count(), 2);
        let gradle = &rules.rules[0];
        assert!(gradle.names("gradle") && gradle.names("/opt/bin/gradlew") && !gradle.names("git"));
        let zd = &rules.rules[1];
        assert!(zd.args_match(&["build".into(), "x".into()]));
        assert!(!zd.args_match(&["status".into()]));
        assert_eq!(rules.forbidden_names(), vec!["gradle", "gradlew"]);
        assert!(gradle.describe().contains("Gradle runs through"));
    }

    #[test]
    fn files_without_rules_and_bad_files_are_told_apart() {
        assert!(matches!(
            Rules::parse(Path::new("n"), r#"{"directories": {}}"#),
            Ok(None)
        ));
        assert!(Rules::parse(Path::new("n"), r#"{"rules": [{"args": "x"}]}"#).is_err());
        assert!(
            Rules::parse(
                Path::new("n"),
                r#"{"rules": [{"program": "a", "args": "("}]}"#
            )
            .is_err()
        );
        assert!(Rules::parse(Path::new("n"), r#"{"rules": [{"program": "/bin/a"}]}"#).is_err());
        assert!(Rules::parse(Path::new("n"), "{").is_err());
    }
}
