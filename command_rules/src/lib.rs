//! nib's command rules: the `rules` of the nearest `nib.json`, checked
//! against every command a nibash command line may run, before it runs.
//!
//! - [`rules`]: the file, its rules, and matching a program and arguments.
//! - [`extract`]: every command a line may run, on brush-parser's syntax
//!   tree (the parser the interpreter uses), failing closed on what cannot
//!   be known statically.
//! - [`wrappers`]: where a wrapper (`env`, `xargs`, `sudo`, `sh -c`…) keeps
//!   its inner command.
//! - [`model`]: the decision model that judges `rule` entries, and an HTTP
//!   client for an OpenAI-compatible chat endpoint.
//! - [`ast`]: a walk over the syntax tree (shared with nibash's rewrites).
//!
//! The runtime line (refusing builtins in the interpreter, masked binaries
//! in the sandbox) is applied by nib from [`rules::Rules::forbidden_names`];
//! this crate does no I/O beyond reading nib.json and the scripts a line
//! sources, and the model's HTTP request.

#![deny(missing_docs)]

pub mod arg;
pub mod ast;
pub mod extract;
pub mod model;
pub mod rules;
pub mod wrappers;

use std::path::Path;

pub use extract::{Arg, Context, Finding, Invocation, extract};
pub use rules::{Rule, Rules, RulesError};

/// Exit status of a refused call.
pub const REFUSED_EXIT: i32 = 126;

/// The outcome of checking a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It may run.
    Allow,
    /// It may not; nothing runs.
    Refuse {
        /// The rule's position in nib.json, when one rule refused it.
        rule: Option<usize>,
        /// What the agent reads.
        message: String,
    },
}

fn via(inv: &Invocation) -> String {
    if inv.via.is_empty() {
        String::new()
    } else {
        format!(" (run through {})", inv.via.join(" → "))
    }
}

/// Checks `text` (run in `cwd`) against the program rules, and the model
/// rules when a model is given.
pub fn check(
    rules: &Rules,
    text: &str,
    cwd: &Path,
    model: Option<&dyn model::DecisionModel>,
) -> Verdict {
    let source = rules.source.display();
    let findings = match extract(
        text,
        &Context {
            cwd: cwd.to_path_buf(),
        },
    ) {
        Ok(f) => f,
        Err(e) => {
            return Verdict::Refuse {
                rule: None,
                message: format!(
                    "refused: {e}; while {source} has command rules, a line nib cannot parse does not run. Nothing ran."
                ),
            };
        }
    };
    let mut runs: Vec<&Invocation> = Vec::new();
    for f in &findings {
        match f {
            Finding::Unknown { construct, text } if rules.has_program_rules() => {
                return Verdict::Refuse {
                    rule: None,
                    message: format!(
                        "refused: {construct} (`{text}`): nib cannot tell which program it runs, and {source} forbids some programs. Nothing ran.\nhint: write the command out literally"
                    ),
                };
            }
            Finding::Unknown { .. } => {}
            Finding::Run(inv) => runs.push(inv),
        }
    }
    for inv in &runs {
        for rule in rules.program_rules().filter(|r| r.names(&inv.name)) {
            let literal: Option<Vec<String>> = inv
                .args
                .iter()
                .map(|a| a.literal().map(str::to_string))
                .collect();
            let hit = match (&rule.args, literal) {
                (None, _) => true,
                (Some(_), Some(args)) => rule.args_match(&args),
                // Arguments built at run time could match.
                (Some(_), None) => true,
            };
            if hit {
                return Verdict::Refuse {
                    rule: Some(rule.index),
                    message: format!(
                        "refused by {source}, {}: `{}`{} may not run. Nothing ran.",
                        rule.describe(),
                        inv.name,
                        via(inv)
                    ),
                };
            }
        }
    }
    if let Some(model) = model {
        let programs: Vec<String> = runs.iter().map(|i| i.name.clone()).collect();
        for rule in rules.model_rules() {
            if rule.matches.as_ref().is_some_and(|m| !m.is_match(text)) {
                continue;
            }
            if !rule.programs.is_empty() {
                let runs_it = runs.iter().any(|inv| {
                    rule.names(&inv.name) && {
                        let args: Vec<String> =
                            inv.args.iter().map(|a| a.text().to_string()).collect();
                        rule.args_match(&args)
                    }
                });
                if !runs_it {
                    continue;
                }
            }
            let Some(rule_text) = rule.rule.as_deref() else {
                continue;
            };
            match model.judge(rule_text, text, &programs) {
                Ok(model::Decision::Allow) => {}
                Ok(model::Decision::Deny(reason)) => {
                    return Verdict::Refuse {
                        rule: Some(rule.index),
                        message: format!(
                            "refused by {source}, {} (the decision model: {reason}). Nothing ran.",
                            rule.describe()
                        ),
                    };
                }
                Err(e) => {
                    return Verdict::Refuse {
                        rule: Some(rule.index),
                        message: format!(
                            "refused: {source}'s {} needs the decision model, which failed ({e}). Nothing ran.\nhint: try again, or check the model's URL and key",
                            rule.describe()
                        ),
                    };
                }
            }
        }
    }
    Verdict::Allow
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Rules {
        let text = r#"{"rules": [
          {"program": ["gradlew", "gradle"], "why": "use the build tools"},
          {"program": "zenit-dev", "args": "^(build|test)( |$)", "why": "use zd_build"},
          {"rule": "No full test suites.", "match": "test"}
        ]}"#;
        match Rules::parse(Path::new("/p/nib.json"), text) {
            Ok(Some(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    fn verdict(text: &str) -> Verdict {
        check(&rules(), text, Path::new("/tmp"), None)
    }

    #[test]
    fn forbidden_programs_are_refused_wherever_they_hide() {
        for text in [
            "gradle build",
            "./gradlew test",
            "/usr/bin/gradle",
            "echo $(gradle -v)",
            "env FOO=1 gradle",
            "bash -c 'cd x && gradle'",
            "zenit-dev build --all",
            "zenit-dev $what",
            "$tool build",
            "eval \"$x\"",
        ] {
            assert!(matches!(verdict(text), Verdict::Refuse { .. }), "{text}");
        }
        match verdict("timeout 60 gradle") {
            Verdict::Refuse { rule, message } => {
                assert_eq!(rule, Some(1));
                assert!(
                    message.contains("use the build tools") && message.contains("timeout"),
                    "{message}"
                );
            }
            Verdict::Allow => panic!("allowed"),
        }
    }

    #[test]
    fn other_commands_keep_working() {
        for text in [
            "git status",
            "zenit-dev status",
            "echo gradle",
            "cat gradle.properties",
            "ls | grep gradle",
        ] {
            assert_eq!(verdict(text), Verdict::Allow, "{text}");
        }
    }

    struct Fake(model::Decision);
    impl model::DecisionModel for Fake {
        fn judge(
            &self,
            _rule: &str,
            _command: &str,
            _programs: &[String],
        ) -> Result<model::Decision, String> {
            Ok(self.0.clone())
        }
    }

    #[test]
    fn model_rules_are_judged_only_when_match_hits_and_skipped_without_a_model() {
        let deny = Fake(model::Decision::Deny("a full suite".into()));
        assert!(matches!(
            check(&rules(), "make test", Path::new("/"), Some(&deny)),
            Verdict::Refuse { rule: Some(3), .. }
        ));
        assert_eq!(
            check(&rules(), "make lint", Path::new("/"), Some(&deny)),
            Verdict::Allow
        );
        assert_eq!(
            check(&rules(), "make test", Path::new("/"), None),
            Verdict::Allow
        );
    }
}

#[cfg(test)]
mod fuzz_regressions {
    use super::*;

    /// Found by the policy_extractor fuzz target (out of memory past 2 GiB).
    #[test]
    fn a_here_document_opener_with_a_carriage_return_stays_small() {
        let data: &[u8] = &[
            251, 255, 60, 205, 10, 0, 114, 0, 8, 251, 255, 251, 255, 10, 0, 114, 154, 40, 17, 8,
            60, 60, 13, 40, 111, 251, 255, 251, 255, 0, 154, 61, 34, 42, 10, 34, 32,
        ];
        let text = String::from_utf8_lossy(data);
        let rules = match Rules::parse(
            std::path::Path::new("/fuzz/nib.json"),
            r#"{"rules": [{"program": "forbidden-tool", "why": "fuzz"}]}"#,
        ) {
            Ok(Some(r)) => r,
            _ => panic!("rules parse"),
        };
        let _ = check(&rules, &text, std::path::Path::new("/nonexistent"), None);
    }
}
