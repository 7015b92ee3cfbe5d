//! What the proxy reached and refused ([`NetLog`]): for the session, and
//! for each call by its worker's token until the call takes its refusals;
//! bounded in entries and in the length of each name. Deciding what to
//! refuse is the proxy's and the host rules'.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use crate::netproxy::hosts::Refusal;

/// The most calls whose refusals are kept until the call takes them (a
/// background call's are never taken).
pub(super) const CALLS_KEPT: usize = 256;
/// The most refusals kept for one call, and for the session: what a program
/// asks for is the program's to choose, so the log is bounded in entries…
const REFUSALS_KEPT: usize = 32;
const SESSION_REFUSALS_KEPT: usize = 256;
/// …and in the length of each name it keeps (a DNS name has at most 253).
const NAME_KEPT: usize = 255;

/// `host:port` as kept in the log: at most [`NAME_KEPT`] bytes of the host,
/// cut on a character boundary and marked.
fn kept_name(host: &str, port: u16) -> String {
    if host.len() <= NAME_KEPT {
        return format!("{host}:{port}");
    }
    let mut end = NAME_KEPT;
    while !host.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…:{port}", &host[..end])
}

/// Hosts reached and refused, in order, each once — for the session and,
/// by the token of the worker that asked, for each call.
#[derive(Debug, Default)]
pub struct NetLog {
    reached: Mutex<BTreeSet<String>>,
    blocked: Mutex<Vec<(String, String)>>,
    by_call: Mutex<HashMap<String, Vec<(String, String)>>>,
}

impl NetLog {
    /// Records `host:port` as reached.
    pub(super) fn reach(&self, host: &str, port: u16) {
        if let Ok(mut r) = self.reached.lock()
            && r.len() < SESSION_REFUSALS_KEPT
        {
            r.insert(kept_name(host, port));
        }
    }

    /// Records `host:port` as refused, for the session and for `call`.
    pub(super) fn block(&self, host: &str, port: u16, why: &Refusal, call: Option<&str>) {
        let key = kept_name(host, port);
        let entry = (key.clone(), why.to_string());
        if let Ok(mut b) = self.blocked.lock()
            && b.len() < SESSION_REFUSALS_KEPT
            && !b.iter().any(|(k, _)| *k == key)
        {
            b.push(entry.clone());
        }
        if let Some(call) = call
            && call.len() <= NAME_KEPT
            && let Ok(mut calls) = self.by_call.lock()
            && (calls.len() < CALLS_KEPT || calls.contains_key(call))
        {
            let list = calls.entry(call.to_string()).or_default();
            if list.len() < REFUSALS_KEPT && !list.iter().any(|(k, _)| *k == key) {
                list.push(entry);
            }
        }
    }

    /// `(host:port, why)` refused for the call whose worker has `token`,
    /// each once, in order; taken (asked again, they are gone).
    pub fn take_call(&self, token: &str) -> Vec<(String, String)> {
        self.by_call
            .lock()
            .ok()
            .and_then(|mut c| c.remove(token))
            .unwrap_or_default()
    }

    /// `host:port` reached so far.
    pub fn reached(&self) -> Vec<String> {
        self.reached
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// `(host:port, why)` refused so far, in order.
    pub fn blocked(&self) -> Vec<(String, String)> {
        self.blocked.lock().map(|b| b.clone()).unwrap_or_default()
    }
}
