//! Sealed `requestState`: the state nib hands a client in an
//! `input_required` result (2026-07-28 era) and takes back on its retry.
//!
//! Whatever a retry carries is the client's word, and over HTTP the client
//! is whoever holds a token. So a state nib issues is sealed: HMAC-SHA256
//! under a key drawn at random when the process starts (never stored, never
//! shown), over the agent it was issued to, the request it answers (the
//! tool's name and a digest of its arguments, keys sorted, so the retry
//! must carry the same call) and the state itself, which holds its expiry
//! ([`TTL`]) and a random nonce. [`Sealer::open`] takes a state back only
//! when all of these match (compared in constant time), before it expires,
//! and once: a forged, altered, expired or already used state, or one
//! issued to another agent or for another call, is refused.
//!
//! The state is signed, not encrypted: its payload (what kind of question,
//! the path or id it is about) is readable and holds nothing secret. This
//! module knows nothing of MCP; `server` decides what a state says and
//! what a refused one means.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{Map, Value};

/// How long an issued state can be used.
pub const TTL: Duration = Duration::from_secs(10 * 60);
/// Marks nib's sealed states (and their format's version).
const PREFIX: &str = "nib1.";
/// Mixed into every tag, so no other HMAC under the key can pass for one.
const DOMAIN: &[u8] = b"nib/request-state/v1";
/// The random nonce that makes each state single-use.
const NONCE: usize = 16;
/// The expiry at the front of a state's body (unix milliseconds, big-endian).
const EXPIRY: usize = 8;
/// States told apart for single use at most; past it the oldest go first
/// (they expire within [`TTL`] anyway).
const USED_KEPT: usize = 65_536;

/// Why a state was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// Not a state nib issued in this format.
    #[error("it is not a state nib issued")]
    Malformed,
    /// The tag does not match: forged, altered, issued by another nib
    /// process, or issued to another agent or for another call.
    #[error(
        "it does not verify: it was altered, not issued by this nib process, or issued to another agent or for another call"
    )]
    Forged,
    /// Past its expiry.
    #[error("it expired ({} minutes after it was issued)", TTL.as_secs() / 60)]
    Expired,
    /// Taken back once already.
    #[error("it was used already (a state is good for one retry)")]
    Used,
}

/// Seals states and takes them back once.
pub struct Sealer {
    key: hmac::Key,
    rng: SystemRandom,
    ttl: Duration,
    /// Nonces of states taken back, with their expiry (unix ms).
    used: Mutex<HashMap<[u8; NONCE], u64>>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { key: <hidden> }")
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The digest of a call a state is bound to: the tool's name and its
/// arguments with every object's keys sorted (clients may reorder them).
pub fn request_digest(tool: &str, arguments: Option<&Map<String, Value>>) -> [u8; 32] {
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    if let Some(v) = m.get(k) {
                        canonical(v, out);
                    }
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(v, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    match arguments {
        Some(m) => canonical(&Value::Object(m.clone()), &mut text),
        None => text.push_str("null"),
    }
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(&(tool.len() as u64).to_be_bytes());
    ctx.update(tool.as_bytes());
    ctx.update(text.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

impl Sealer {
    /// A sealer with a fresh random key; `None` when the system offers no
    /// randomness (then nothing can be sealed, and nothing is asked).
    pub fn new() -> Option<Sealer> {
        Sealer::with_ttl(TTL)
    }

    fn with_ttl(ttl: Duration) -> Option<Sealer> {
        let rng = SystemRandom::new();
        let mut bytes = [0u8; 32];
        rng.fill(&mut bytes).ok()?;
        Some(Sealer {
            key: hmac::Key::new(hmac::HMAC_SHA256, &bytes),
            rng,
            ttl,
            used: Mutex::default(),
        })
    }

    /// What the tag covers: the domain, the agent, the call and the body.
    fn signed(agent: &str, request: &[u8; 32], body: &[u8]) -> Vec<u8> {
        let mut m = Vec::with_capacity(DOMAIN.len() + 8 + agent.len() + 32 + body.len());
        m.extend_from_slice(DOMAIN);
        m.extend_from_slice(&(agent.len() as u64).to_be_bytes());
        m.extend_from_slice(agent.as_bytes());
        m.extend_from_slice(request);
        m.extend_from_slice(body);
        m
    }

    /// Seals `payload` for `agent`'s call `request` ([`request_digest`]);
    /// `None` only when the system gives no random nonce.
    pub fn seal(&self, agent: &str, request: &[u8; 32], payload: &str) -> Option<String> {
        let mut nonce = [0u8; NONCE];
        self.rng.fill(&mut nonce).ok()?;
        let expiry = now_ms().saturating_add(u64::try_from(self.ttl.as_millis()).unwrap_or(0));
        let mut body = Vec::with_capacity(EXPIRY + NONCE + payload.len());
        body.extend_from_slice(&expiry.to_be_bytes());
        body.extend_from_slice(&nonce);
        body.extend_from_slice(payload.as_bytes());
        let tag = hmac::sign(&self.key, &Sealer::signed(agent, request, &body));
        Some(format!(
            "{PREFIX}{}.{}",
            URL_SAFE_NO_PAD.encode(&body),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        ))
    }

    /// Takes back a state `agent` sent with its call `request`: its payload
    /// when it verifies, has not expired and was not taken back before
    /// (it is then used up).
    pub fn open(&self, agent: &str, request: &[u8; 32], sealed: &str) -> Result<String, Refused> {
        let rest = sealed.strip_prefix(PREFIX).ok_or(Refused::Malformed)?;
        let (body, tag) = rest.split_once('.').ok_or(Refused::Malformed)?;
        let body = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| Refused::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| Refused::Malformed)?;
        if body.len() < EXPIRY + NONCE {
            return Err(Refused::Malformed);
        }
        hmac::verify(&self.key, &Sealer::signed(agent, request, &body), &tag)
            .map_err(|_| Refused::Forged)?;
        let mut expiry = [0u8; EXPIRY];
        expiry.copy_from_slice(&body[..EXPIRY]);
        let expiry = u64::from_be_bytes(expiry);
        let now = now_ms();
        if now >= expiry {
            return Err(Refused::Expired);
        }
        let mut nonce = [0u8; NONCE];
        nonce.copy_from_slice(&body[EXPIRY..EXPIRY + NONCE]);
        {
            let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
            used.retain(|_, e| *e > now);
            if used.contains_key(&nonce) {
                return Err(Refused::Used);
            }
            if used.len() >= USED_KEPT {
                // Every kept nonce is still within its TTL: refuse rather
                // than forget one that could then be replayed.
                return Err(Refused::Used);
            }
            used.insert(nonce, expiry);
        }
        String::from_utf8(body[EXPIRY + NONCE..].to_vec()).map_err(|_| Refused::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn a_state_opens_once_for_its_agent_and_call_only() {
        let s = Sealer::new().expect("randomness");
        let call = request_digest("write", Some(&args(json!({"path": "a", "content": "x"}))));
        let state = s.seal("alice", &call, "approve:/p/a").expect("sealed");
        // Another agent, another call, another key: refused, and not used up.
        assert_eq!(s.open("bob", &call, &state), Err(Refused::Forged));
        let other = request_digest("write", Some(&args(json!({"path": "a", "content": "y"}))));
        assert_eq!(s.open("alice", &other, &state), Err(Refused::Forged));
        let stranger = Sealer::new().expect("randomness");
        assert_eq!(stranger.open("alice", &call, &state), Err(Refused::Forged));
        // The same call with its keys in another order is the same call.
        let reordered = request_digest("write", Some(&args(json!({"content": "x", "path": "a"}))));
        assert_eq!(
            s.open("alice", &reordered, &state).as_deref(),
            Ok("approve:/p/a")
        );
        assert_eq!(s.open("alice", &call, &state), Err(Refused::Used));
    }

    #[test]
    fn altered_forged_and_expired_states_are_refused() {
        let s = Sealer::new().expect("randomness");
        let call = request_digest("write", None);
        let state = s.seal("alice", &call, "approve:/p/a").expect("sealed");
        // A payload of the client's choosing under the old tag.
        let (body, tag) = state[PREFIX.len()..].split_once('.').expect("two parts");
        let mut bytes = URL_SAFE_NO_PAD.decode(body).expect("base64");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let altered = format!("{PREFIX}{}.{tag}", URL_SAFE_NO_PAD.encode(&bytes));
        assert_eq!(s.open("alice", &call, &altered), Err(Refused::Forged));
        for forged in ["nib-approve-v1:/p/a", "nib1.", "nib1.AAAA.AAAA", ""] {
            assert!(s.open("alice", &call, forged).is_err(), "{forged}");
        }
        let quick = Sealer::with_ttl(Duration::ZERO).expect("randomness");
        let state = quick.seal("alice", &call, "roots").expect("sealed");
        assert_eq!(quick.open("alice", &call, &state), Err(Refused::Expired));
    }
}
