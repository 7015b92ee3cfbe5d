//! The settings of nib's language-model calls: the `NIB_DECIDER*`
//! variables, then what `nib setup` kept (setup.json's `decider`,
//! `summary`, `opencode`); the key and its order; whether anything may
//! leave the machine. The calls themselves — the HTTPS client, the cache,
//! the rule judge — are the broker's (`nib::llm`).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// OpenRouter's OpenAI-compatible chat completions endpoint: the default
/// for decisions, summaries and rule judgments.
pub const CHAT_URL: &str = "https://openrouter.ai/api/v1/chat/completions";
/// The decision model when none is named.
pub const DEFAULT_MODEL: &str = "google/gemini-2.5-flash-lite";

/// How long output's rows are picked (`NIB_DECIDER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeciderKind {
    /// The first 100 and last 200 rows.
    Fixed,
    /// Head, tail and rows naming failures.
    Keywords,
    /// Keywords, plus windows a decision model rates as relevant.
    OpenRouter,
}

/// One summarizer of `NIB_DECIDER_SUMMARY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Summarizer {
    /// A model id at the chat endpoint.
    Chat(String),
    /// `claude-p:MODEL`: `claude -p` with no tools.
    ClaudeP(String),
    /// `opencode:PROVIDER/MODEL`: `opencode run` with a data folder of its own.
    OpenCode(String),
}

impl Summarizer {
    /// As written in `NIB_DECIDER_SUMMARY`.
    pub fn label(&self) -> String {
        match self {
            Summarizer::Chat(m) => m.clone(),
            Summarizer::ClaudeP(m) => format!("claude-p:{m}"),
            Summarizer::OpenCode(m) => format!("opencode:{m}"),
        }
    }

    fn parse(item: &str) -> Option<Summarizer> {
        let item = item.trim();
        if item.is_empty() {
            return None;
        }
        Some(if let Some(m) = item.strip_prefix("claude-p:") {
            Summarizer::ClaudeP(m.to_string())
        } else if let Some(m) = item.strip_prefix("opencode:") {
            Summarizer::OpenCode(m.to_string())
        } else {
            Summarizer::Chat(item.to_string())
        })
    }
}

/// The model settings, read once at start.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `NIB_DECIDER`, else setup.json's `decider`, else keywords.
    pub decider: DeciderKind,
    /// `NIB_DECIDER_URL`.
    pub decision_url: String,
    /// `NIB_DECIDER_MODEL`, in order of preference.
    pub decision_models: Vec<String>,
    /// `NIB_DECIDER_TIMEOUT` (ms).
    pub decision_timeout: Duration,
    /// `NIB_DECIDER_SUMMARY`, else setup.json's `summary`.
    pub summarizers: Vec<Summarizer>,
    /// `NIB_DECIDER_SUMMARY_URL`.
    pub summary_url: String,
    /// `NIB_DECIDER_SUMMARY_TIMEOUT` (ms).
    pub summary_timeout: Duration,
    /// `NIB_DECIDER_OPENCODE`, else setup.json's `opencode`, else `opencode`.
    pub opencode: String,
    /// `NIB_DECIDER_CACHE`.
    pub cache: Option<PathBuf>,
    /// `NIB_DECIDER_SANDBOX`: model calls allowed under `NIB_SANDBOX=1`.
    pub decider_sandbox: bool,
    /// `NIB_RULES_MODEL_URL`, `NIB_RULES_MODEL`, `NIB_RULES_MODEL_KEY`:
    /// overrides for the rule judge.
    pub rules_url: Option<String>,
    /// See `rules_url`.
    pub rules_model: Option<String>,
    /// See `rules_url`.
    pub rules_key: Option<String>,
    /// nib's settings folder (the key file).
    pub config_dir: PathBuf,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            decider: DeciderKind::Keywords,
            decision_url: CHAT_URL.into(),
            decision_models: vec![DEFAULT_MODEL.into()],
            decision_timeout: Duration::from_secs(30),
            summarizers: Vec::new(),
            summary_url: CHAT_URL.into(),
            summary_timeout: Duration::from_secs(30),
            opencode: "opencode".into(),
            cache: None,
            decider_sandbox: false,
            rules_url: None,
            rules_model: None,
            rules_key: None,
            config_dir: PathBuf::new(),
        }
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn millis(name: &str) -> Option<Duration> {
    var(name)?.parse().ok().map(Duration::from_millis)
}

impl Settings {
    /// From the environment, falling back to what `nib setup` kept in
    /// `config_dir/setup.json`.
    pub fn from_env(config_dir: &Path) -> Settings {
        let kept: serde_json::Value = std::fs::read(config_dir.join("setup.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let kept_str = |k: &str| {
            kept.get(k)
                .and_then(|v| v.as_str())
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let decider = match var("NIB_DECIDER")
            .or_else(|| kept_str("decider"))
            .as_deref()
        {
            Some("fixed") => DeciderKind::Fixed,
            Some("openrouter") => DeciderKind::OpenRouter,
            _ => DeciderKind::Keywords,
        };
        let list = |v: Option<String>| -> Vec<String> {
            v.map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
        };
        let defaults = Settings::default();
        let models = list(var("NIB_DECIDER_MODEL"));
        Settings {
            decider,
            decision_url: var("NIB_DECIDER_URL").unwrap_or(defaults.decision_url),
            decision_models: if models.is_empty() {
                defaults.decision_models
            } else {
                models
            },
            decision_timeout: millis("NIB_DECIDER_TIMEOUT").unwrap_or(defaults.decision_timeout),
            summarizers: list(var("NIB_DECIDER_SUMMARY").or_else(|| kept_str("summary")))
                .iter()
                .filter_map(|s| Summarizer::parse(s))
                .collect(),
            summary_url: var("NIB_DECIDER_SUMMARY_URL").unwrap_or(defaults.summary_url),
            summary_timeout: millis("NIB_DECIDER_SUMMARY_TIMEOUT")
                .unwrap_or(defaults.summary_timeout),
            opencode: var("NIB_DECIDER_OPENCODE")
                .or_else(|| kept_str("opencode"))
                .unwrap_or(defaults.opencode),
            cache: var("NIB_DECIDER_CACHE").map(PathBuf::from),
            decider_sandbox: var("NIB_DECIDER_SANDBOX")
                .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true")),
            rules_url: var("NIB_RULES_MODEL_URL"),
            rules_model: var("NIB_RULES_MODEL"),
            rules_key: var("NIB_RULES_MODEL_KEY"),
            config_dir: config_dir.to_path_buf(),
        }
    }

    /// Whether model calls may be made: always without `NIB_SANDBOX`;
    /// under it only with `NIB_DECIDER_SANDBOX=1` (a loopback endpoint too:
    /// nib cannot tell where a local gateway sends what it gets).
    pub fn may_reach(&self, sandbox: bool, _url: &str) -> bool {
        !sandbox || self.decider_sandbox
    }

    /// Whether programs that call models (the `claude-p:` and `opencode:`
    /// summarizers) may run.
    pub fn may_run_model_programs(&self, sandbox: bool) -> bool {
        !sandbox || self.decider_sandbox
    }

    /// The key for the chat endpoints: `NIB_DECIDER_KEY`, else
    /// `$OPENROUTER_API_KEY`, else `~/.config/nib/openrouter-key`, else
    /// OpenCode's stored OpenRouter login; with where it came from.
    pub fn key(&self) -> Option<(String, &'static str)> {
        if let Some(k) = var("NIB_DECIDER_KEY") {
            return Some((k.trim().to_string(), "NIB_DECIDER_KEY"));
        }
        if let Some(k) = var("OPENROUTER_API_KEY") {
            return Some((k.trim().to_string(), "OPENROUTER_API_KEY"));
        }
        if let Some(k) = std::fs::read_to_string(self.config_dir.join("openrouter-key"))
            .ok()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
        {
            return Some((k, "the key file in nib's settings folder"));
        }
        opencode_login().map(|k| (k, "OpenCode's stored login"))
    }
}

/// OpenCode's stored OpenRouter key (`$XDG_DATA_HOME/opencode/auth.json`,
/// else `~/.local/share/opencode/auth.json`).
fn opencode_login() -> Option<String> {
    let data = var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("opencode/auth.json")).ok()?).ok()?;
    json.get("openrouter")?
        .get("key")?
        .as_str()
        .map(str::to_string)
        .filter(|k| !k.is_empty())
}

/// Whether `url`'s host is `localhost`, `127.x` or `[::1]`.
pub fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host_port = rest.split('/').next().unwrap_or("");
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.rsplit_once(':').map_or(host_port, |(h, _)| h)
    };
    host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarizers_parse_in_order() {
        let got: Vec<Summarizer> = "claude-p:haiku, opencode:openrouter/x, vendor/model"
            .split(',')
            .filter_map(Summarizer::parse)
            .collect();
        assert_eq!(
            got,
            vec![
                Summarizer::ClaudeP("haiku".into()),
                Summarizer::OpenCode("openrouter/x".into()),
                Summarizer::Chat("vendor/model".into()),
            ]
        );
    }

    #[test]
    fn loopback_urls_are_told_apart() {
        assert!(is_loopback("http://127.0.0.1:8080/v1"));
        assert!(is_loopback("https://localhost/v1"));
        assert!(is_loopback("http://[::1]:9/x"));
        assert!(!is_loopback(
            "https://openrouter.ai/api/v1/chat/completions"
        ));
        assert!(!is_loopback("http://10.0.0.1/x"));
    }
}
