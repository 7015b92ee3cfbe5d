//! The decision model that judges `rule` entries: the interface, the words
//! it is asked in and how its reply is read. The client that asks (HTTPS,
//! keys, retries) is nib's (`src/model/`). Without a configured model the
//! `rule` entries are skipped, as the spec says, and nibash_status says so.

/// What the model decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The command line keeps the rule.
    Allow,
    /// It breaks the rule, for this reason.
    Deny(String),
}

/// Judges whether a command line keeps a rule.
pub trait DecisionModel {
    /// `rule`: the rule's text; `command`: the whole line; `programs`: the
    /// programs the line runs, as the extractor found them.
    fn judge(&self, rule: &str, command: &str, programs: &[String]) -> Result<Decision, String>;
}

/// What the judge is told it is.
pub const SYSTEM: &str = "You decide whether a shell command line breaks a rule set by the project. \
Reply with exactly ALLOW, or with DENY: followed by one short sentence saying why.";

/// Reads the model's reply text as a decision (anything but a clear ALLOW denies).
pub fn parse_reply(content: &str) -> Decision {
    let t = content.trim();
    if t.eq_ignore_ascii_case("allow") || t.to_ascii_uppercase().starts_with("ALLOW") {
        return Decision::Allow;
    }
    let reason = t
        .strip_prefix("DENY:")
        .or_else(|| t.strip_prefix("DENY"))
        .unwrap_or(t)
        .trim();
    Decision::Deny(if reason.is_empty() {
        "it breaks the rule".into()
    } else {
        reason.to_string()
    })
}

/// The question put to the model for one rule and one command line.
pub fn question(rule: &str, command: &str, programs: &[String]) -> String {
    format!(
        "Rule: {rule}\nCommand line: {command}\nPrograms it runs: {}",
        programs.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_strictly() {
        assert_eq!(parse_reply("ALLOW"), Decision::Allow);
        assert_eq!(parse_reply(" allow."), Decision::Allow);
        assert_eq!(
            parse_reply("DENY: it runs the whole suite"),
            Decision::Deny("it runs the whole suite".into())
        );
        assert_eq!(parse_reply("maybe?"), Decision::Deny("maybe?".into()));
        assert_eq!(
            parse_reply("DENY"),
            Decision::Deny("it breaks the rule".into())
        );
    }
}
