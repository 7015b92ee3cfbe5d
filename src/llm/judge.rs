//! The judge of nib.json `rule` entries on nib's model client: the chat
//! endpoint (`NIB_RULES_MODEL_URL`, else `NIB_DECIDER_SUMMARY_URL`), the
//! first decision model (`NIB_RULES_MODEL` overrides), the key
//! (`NIB_RULES_MODEL_KEY` overrides). The words and the reading of the
//! reply are `nib_command_rules::model`'s.

use std::time::Duration;

use nib_command_rules::model::{Decision, DecisionModel, SYSTEM, parse_reply, question};
use serde_json::json;

use super::Settings;
use super::client::{Chat, complete};

/// A configured judge.
#[derive(Clone, Debug)]
pub struct RuleJudge {
    /// The chat endpoint.
    pub url: String,
    models: Vec<String>,
    key: Option<String>,
    timeout: Duration,
}

impl RuleJudge {
    /// The judge these settings give, or why there is none.
    pub fn from_settings(settings: &Settings, sandbox: bool) -> Result<RuleJudge, String> {
        let url = settings
            .rules_url
            .clone()
            .unwrap_or_else(|| settings.summary_url.clone());
        let key = settings
            .rules_key
            .clone()
            .or_else(|| settings.key().map(|(k, _)| k));
        if key.is_none() && settings.rules_url.is_none() {
            return Err(
                "no decision model is configured (a key in NIB_DECIDER_KEY or OPENROUTER_API_KEY, or NIB_RULES_MODEL_URL)"
                    .into(),
            );
        }
        if !settings.may_reach(sandbox, &url) {
            return Err(
                "NIB_SANDBOX=1 keeps them from leaving the machine (NIB_DECIDER_SANDBOX=1 allows it)"
                    .into(),
            );
        }
        Ok(RuleJudge {
            url,
            models: match &settings.rules_model {
                Some(m) => vec![m.clone()],
                None => settings.decision_models.clone(),
            },
            key,
            timeout: settings.decision_timeout,
        })
    }
}

impl DecisionModel for RuleJudge {
    fn judge(&self, rule: &str, command: &str, programs: &[String]) -> Result<Decision, String> {
        let answer = complete(&Chat {
            url: &self.url,
            models: &self.models,
            key: self.key.as_deref(),
            messages: json!([
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": question(rule, command, programs)}
            ]),
            schema: None,
            timeout: self.timeout,
        })
        .map_err(|e| e.to_string())?;
        Ok(parse_reply(&answer.content))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn fake(reply: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
        let h = std::thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else {
                return String::new();
            };
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65536];
            // Headers, then the body its Content-Length names.
            loop {
                let n = s.read(&mut buf).unwrap_or(0);
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len: usize = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if got.len() >= end + 4 + len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let body = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": reply}}]}).to_string();
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            String::from_utf8_lossy(&got).into_owned()
        });
        (format!("http://127.0.0.1:{port}/v1/chat/completions"), h)
    }

    fn settings(url: String) -> Settings {
        Settings {
            rules_url: Some(url),
            rules_model: Some("m".into()),
            rules_key: Some("k".into()),
            decision_timeout: Duration::from_secs(5),
            ..Settings::default()
        }
    }

    #[test]
    fn a_loopback_endpoint_is_asked_and_its_answer_read() {
        let (url, h) = fake("DENY: it runs the whole suite");
        let judge = RuleJudge::from_settings(&settings(url), false).unwrap();
        let d = judge.judge("No full suites.", "make test", &["make".into()]);
        assert_eq!(d, Ok(Decision::Deny("it runs the whole suite".into())));
        let request = h.join().unwrap_or_default();
        assert!(
            request.starts_with("POST /v1/chat/completions HTTP/1.1"),
            "{request}"
        );
        assert!(
            request
                .to_ascii_lowercase()
                .contains("authorization: bearer k")
                && request.contains("make test"),
            "{request}"
        );
        let (url, _h) = fake("ALLOW");
        let judge = RuleJudge::from_settings(&settings(url), false).unwrap();
        assert_eq!(judge.judge("r", "ls", &[]), Ok(Decision::Allow));
    }

    #[test]
    fn under_the_sandbox_a_remote_judge_needs_the_switch() {
        let mut s = settings("https://models.example/v1/chat/completions".into());
        assert!(RuleJudge::from_settings(&s, true).is_err());
        assert!(RuleJudge::from_settings(&s, false).is_ok());
        s.decider_sandbox = true;
        assert!(RuleJudge::from_settings(&s, true).is_ok());
    }
}
