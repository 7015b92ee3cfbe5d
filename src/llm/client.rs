//! The one HTTP client for model calls: HTTPS through rustls with the
//! system's certificates (and `SSL_CERT_FILE`/`SSL_CERT_DIR`), proxies from
//! the environment, a deadline per call, retries on 429 and 5xx with
//! backoff, and the models tried in order of preference.
//!
//! Errors never carry the key: they are built from status codes, the
//! endpoint's host and nib's own words.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Why a model call gave no answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelError {
    /// No key was found.
    #[error(
        "no key (set NIB_DECIDER_KEY or OPENROUTER_API_KEY, or put one in ~/.config/nib/openrouter-key)"
    )]
    NoKey,
    /// The deadline passed.
    #[error("no answer within {0} ms")]
    Timeout(u128),
    /// The endpoint answered with an error status.
    #[error("{host} answered {status}")]
    Status {
        /// The endpoint's host.
        host: String,
        /// The HTTP status.
        status: u16,
    },
    /// The answer was not a chat completion.
    #[error("the answer is not a chat completion ({0})")]
    BadAnswer(String),
    /// The request could not be sent.
    #[error("{host}: {why}")]
    Transport {
        /// The endpoint's host.
        host: String,
        /// What failed.
        why: String,
    },
}

/// The agent shared by every call (its connection pool and TLS roots).
fn agent() -> &'static ureq::Agent {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    AGENT.get_or_init(|| {
        let native = rustls_native_certs::load_native_certs();
        let roots: Vec<ureq::tls::Certificate<'static>> = native
            .certs
            .iter()
            .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
            .collect();
        let tls = if roots.is_empty() {
            ureq::tls::TlsConfig::builder().build()
        } else {
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)))
                .build()
        };
        ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .user_agent(concat!("nib/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent()
    })
}

fn host_of(url: &str) -> String {
    url.split_once("://")
        .map_or(url, |(_, r)| r)
        .split('/')
        .next()
        .unwrap_or("")
        .to_string()
}

/// A chat completion request.
pub struct Chat<'a> {
    /// The endpoint.
    pub url: &'a str,
    /// The models, in order of preference.
    pub models: &'a [String],
    /// The bearer key (none for a local endpoint that needs none).
    pub key: Option<&'a str>,
    /// The messages (`[{"role", "content"}]`).
    pub messages: Value,
    /// A JSON schema the answer must follow (`response_format`), if any.
    pub schema: Option<Value>,
    /// The deadline for the whole call, retries and fallbacks included.
    pub timeout: Duration,
}

/// What a model said, and which model said it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The model that answered.
    pub model: String,
    /// The message content.
    pub content: String,
}

/// Backoff before retry `attempt` (1-based): 250 ms, 500 ms, 1 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250u64 << attempt.saturating_sub(1).min(4))
}

/// Retries per model on 429 and 5xx.
const ATTEMPTS: u32 = 3;

/// Sends `chat`, trying each model in turn; the last model's error when none answers.
pub fn complete(chat: &Chat<'_>) -> Result<Answer, ModelError> {
    let deadline = Instant::now() + chat.timeout;
    let host = host_of(chat.url);
    let mut last = ModelError::BadAnswer("no model was named".into());
    for model in chat.models {
        for attempt in 1..=ATTEMPTS {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ModelError::Timeout(chat.timeout.as_millis()));
            }
            match once(chat, model, &host, left) {
                Ok(a) => return Ok(a),
                Err(e @ ModelError::Status { status, .. })
                    if status == 429 || (500..600).contains(&status) =>
                {
                    last = e;
                    let pause = backoff(attempt);
                    if attempt < ATTEMPTS && Instant::now() + pause < deadline {
                        std::thread::sleep(pause);
                        continue;
                    }
                    break;
                }
                Err(e @ ModelError::Timeout(_)) => return Err(e),
                Err(e) => {
                    last = e;
                    break;
                }
            }
        }
    }
    Err(last)
}

fn once(chat: &Chat<'_>, model: &str, host: &str, left: Duration) -> Result<Answer, ModelError> {
    let mut body = json!({
        "model": model,
        "messages": chat.messages,
        "temperature": 0,
        // Zero data retention where the provider supports it (OpenRouter
        // routes only to providers that keep nothing); others ignore it.
        "provider": {"zdr": true, "data_collection": "deny"},
    });
    if let Some(schema) = &chat.schema {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": "answer", "strict": true, "schema": schema}
        });
    }
    let mut request = agent()
        .post(chat.url)
        .config()
        .timeout_global(Some(left))
        .build()
        .header("Content-Type", "application/json");
    if let Some(key) = chat.key {
        request = request.header("Authorization", &format!("Bearer {key}"));
    }
    let sent = request.send(body.to_string().as_bytes());
    let mut response = match sent {
        Ok(r) => r,
        Err(ureq::Error::Timeout(_)) => return Err(ModelError::Timeout(chat.timeout.as_millis())),
        Err(e) => {
            return Err(ModelError::Transport {
                host: host.to_string(),
                why: e.to_string(),
            });
        }
    };
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(ModelError::Status {
            host: host.to_string(),
            status,
        });
    }
    let text = match response
        .body_mut()
        .with_config()
        .limit(4 << 20)
        .read_to_string()
    {
        Ok(t) => t,
        Err(ureq::Error::Timeout(_)) => return Err(ModelError::Timeout(chat.timeout.as_millis())),
        Err(e) => {
            return Err(ModelError::Transport {
                host: host.to_string(),
                why: e.to_string(),
            });
        }
    };
    let json: Value =
        serde_json::from_str(&text).map_err(|e| ModelError::BadAnswer(e.to_string()))?;
    let content = json
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| ModelError::BadAnswer("no choices[0].message.content".into()))?;
    Ok(Answer {
        model: json
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(model)
            .to_string(),
        content: content.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles() {
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_millis(1000));
    }

    #[test]
    fn hosts_are_named_without_paths() {
        assert_eq!(host_of("https://openrouter.ai/api/v1/x"), "openrouter.ai");
        assert_eq!(host_of("http://127.0.0.1:9/v1"), "127.0.0.1:9");
    }
}
