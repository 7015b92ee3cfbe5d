//! The client's roots: asked for with `roots/list` in the handshake era,
//! by `input_required` in the modern one (the retry's state sealed), and
//! set into the workspace. The call that needs them is `handler`'s.

use std::path::PathBuf;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, InputRequest, InputRequests, InputRequiredResult,
    ListRootsRequest, ListRootsResult,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};

use super::state::NibServer;

/// The key of the roots request in an `input_required` result.
pub(super) const ROOTS_INPUT: &str = "roots";
/// The request state that marks the retry after a roots request (sealed,
/// as every state nib hands out: [`crate::request_state`]).
pub(super) const ROOTS_STATE: &str = "nib-roots-v1";

impl NibServer {
    /// Asks the client for its roots (handshake era), bounded by the timeout.
    pub(super) fn fetch_roots(&self, peer: Peer<RoleServer>) {
        let declared = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !declared {
            tracing::debug!("client declared no roots; using the project directory");
            self.start_providers();
            return;
        }
        let this = self.clone();
        let timeout = self.inner.config.roots_timeout;
        tokio::spawn(async move {
            match tokio::time::timeout(timeout, peer.list_roots()).await {
                Ok(Ok(result)) => this.set_roots(&result),
                Ok(Err(e)) => tracing::warn!("roots/list failed: {e}; using the project directory"),
                Err(_) => tracing::warn!(
                    "roots/list got no answer in {} ms; using the project directory",
                    timeout.as_millis()
                ),
            }
            this.start_providers();
        });
    }

    pub(super) fn set_roots(&self, result: &ListRootsResult) {
        let roots: Vec<PathBuf> = result
            .roots
            .iter()
            .filter_map(|r| file_uri_to_path(&r.uri))
            .collect();
        tracing::info!("client roots: {roots:?}");
        self.inner.workspace.set_client_roots(roots);
        self.prestart_shell();
    }

    /// Modern era: ask for roots through `input_required` on the first call,
    /// or take them from the retry. `Some` is the answer to send instead of running the tool.
    pub(super) fn modern_roots(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        opened: Option<&str>,
        digest: &[u8; 32],
    ) -> Option<CallToolResponse> {
        let modern = context
            .meta
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        if !modern || self.inner.workspace.has_client_roots() {
            return None;
        }
        let declared = context
            .client_capabilities()
            .is_some_and(|c| c.roots.is_some());
        if !declared {
            return None;
        }
        if opened == Some(ROOTS_STATE) {
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|r| r.get(ROOTS_INPUT))
                .and_then(|v| serde_json::from_value::<ListRootsResult>(v.clone()).ok());
            match answer {
                Some(result) => self.set_roots(&result),
                // Asked once; without an answer the project directory stands.
                None => self.inner.workspace.set_client_roots(Vec::new()),
            }
            return None;
        }
        let mut requests = InputRequests::new();
        requests.insert(
            ROOTS_INPUT.to_string(),
            InputRequest::ListRoots(ListRootsRequest::default()),
        );
        let Some(state) = self.seal(context, digest, ROOTS_STATE) else {
            // Without a sealed state the retry could not be told from a
            // forged one: the project directory stands.
            self.inner.workspace.set_client_roots(Vec::new());
            return None;
        };
        Some(InputRequiredResult::new(Some(requests), Some(state)).into())
    }
}

/// `file:///a/b%20c` → `/a/b c`; other schemes are ignored.
pub(super) fn file_uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    use std::os::unix::ffi::OsStringExt;
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn file_uris_become_paths() {
        assert_eq!(
            file_uri_to_path("file:///a/b%20c"),
            Some(PathBuf::from("/a/b c"))
        );
        assert_eq!(
            file_uri_to_path("file://localhost/x"),
            Some(PathBuf::from("/x"))
        );
        assert_eq!(file_uri_to_path("https://x/y"), None);
        assert_eq!(file_uri_to_path("file:///bad%zz"), None);
    }
}
