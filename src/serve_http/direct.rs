//! The 2026-07-28 era's sessionless `tools/call` and `tools/list`,
//! answered by nib's front itself rather than by rmcp's per-request service.
//!
//! rmcp answers each sessionless request by building a peer for it and
//! spawning a service loop with its channels, which costs a read of 60 lines
//! about a tenth of a millisecond (issue 61, docs/performance.md). This
//! module owns only the plain case: a POST without a session whose body is a
//! `tools/call` or `tools/list` naming 2026-07-28 in its `_meta` (with every
//! key that era requires) and in its `MCP-Protocol-Version` header, with the
//! `Host`, `Accept`, `Content-Type`, `Mcp-Method` and `Mcp-Name` headers rmcp
//! would accept, no `Origin`, no `Mcp-Param-*` and no progress token (rmcp
//! streams progress as SSE). For that case it runs rmcp's own dispatch of
//! the front's `HttpNib` (the same `_meta` checks, tools, agent and errors) with one
//! peer made once, on the request's own task, and writes the JSON reply rmcp
//! writes: the same body, status and `Content-Type`. A client that goes away
//! mid-call cancels the call, which runs on to its end as under rmcp.
//! [`Direct::take`] leaves every other request (sessions, `initialize`,
//! other methods, anything unusual or refused) to rmcp, unparsed by it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use rmcp::model::{
    ClientCapabilities, ClientJsonRpcMessage, ClientRequest, ErrorCode, GetExtensions, GetMeta,
    Implementation, InitializeRequestParams, JsonRpcRequest, ProtocolVersion, ServerJsonRpcMessage,
};
use rmcp::service::{RequestContext, RunningService, serve_directly};
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler, Service};

/// An answer's body, here and in the front.
pub(super) type Body = BoxBody<Bytes, std::convert::Infallible>;

/// The era answered here, in the header and in `_meta`.
const ERA: &str = "2026-07-28";
const JSON: &str = "application/json";

/// The front's direct answers: the server (the front's `HttpNib`), one peer
/// for every request (its peer info is what rmcp makes for each of them) and
/// the HTTP settings.
pub(super) struct Direct<S: ServerHandler + Clone> {
    nib: S,
    peer: Peer<RoleServer>,
    config: StreamableHttpServerConfig,
    /// The loop behind `peer`, on a session of a manager of its own that no
    /// request can name: nothing ever arrives on it, and in this era nothing
    /// is sent (a server may not ask the client; progress goes to rmcp). A
    /// session's transport, as rmcp serves sessions, so the binary holds no
    /// second copy of rmcp's service loop. Taken by [`Direct::close`].
    service: std::sync::Mutex<Option<RunningService<RoleServer, S>>>,
    _sessions: LocalSessionManager,
}

impl<S: ServerHandler + Clone> Direct<S> {
    /// Made once, inside the runtime, with the HTTP service's settings.
    pub(super) async fn new(
        nib: S,
        config: StreamableHttpServerConfig,
    ) -> Result<Direct<S>, String> {
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = None;
        // Its session never sees an initialize: rmcp's wait for one would
        // end the loop after a minute, with an error line on stderr.
        sessions.session_config.init_timeout = None;
        let (_, transport) = sessions.create_session().await.map_err(|e| {
            format!("cannot start the HTTP front's MCP peer: {e}; nothing was served")
        })?;
        let info =
            InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
                .with_protocol_version(ProtocolVersion::V_2026_07_28);
        let service = serve_directly(nib.clone(), transport, Some(info));
        Ok(Direct {
            nib,
            peer: service.peer().clone(),
            config,
            service: std::sync::Mutex::new(Some(service)),
            _sessions: sessions,
        })
    }

    /// Ends the peer's loop when the server stops, as a cancellation: were
    /// it dropped with its session, rmcp would log the session's end before
    /// an initialize as an error.
    pub(super) async fn close(&self) {
        let service = self
            .service
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(mut service) = service {
            let _ = service
                .close_with_timeout(std::time::Duration::from_secs(1))
                .await;
        }
    }

    /// The request, when it is the plain case this module answers; `None`
    /// leaves it to rmcp.
    pub(super) fn take(
        &self,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Option<JsonRpcRequest<ClientRequest>> {
        if one(headers, "mcp-protocol-version")? != ERA
            || headers.contains_key(http::header::ORIGIN)
            || headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
            || !self.host_allowed(headers)
            || !accepts_json_and_sse(headers)
            || !is_json(headers)
        {
            return None;
        }
        let ClientJsonRpcMessage::Request(request) = serde_json::from_slice(body).ok()? else {
            return None;
        };
        let (method, name) = match &request.request {
            ClientRequest::CallToolRequest(call) => ("tools/call", Some(&call.params.name)),
            ClientRequest::ListToolsRequest(_) => ("tools/list", None),
            _ => return None,
        };
        let meta = request.request.get_meta();
        let era = ProtocolVersion::V_2026_07_28;
        if meta.protocol_version()? != era
            || !meta.missing_required_keys(&era).is_empty()
            || meta.get_progress_token().is_some()
            || one(headers, "mcp-method")? != method
        {
            return None;
        }
        if let Some(name) = name {
            // Only the plain form: rmcp decodes a `=?base64?…?=` one.
            let given = one(headers, "mcp-name")?;
            if given != name.as_ref() || given.starts_with("=?") {
                return None;
            }
        }
        Some(request)
    }

    /// Runs the request as rmcp's service loop would and answers it as
    /// rmcp's HTTP service does in JSON mode.
    pub(super) async fn answer(
        &self,
        request: JsonRpcRequest<ClientRequest>,
        parts: http::request::Parts,
    ) -> Response<Body> {
        let JsonRpcRequest {
            id, mut request, ..
        } = request;
        let mut context = RequestContext::new(id.clone(), self.peer.clone());
        std::mem::swap(&mut context.meta, request.get_meta_mut());
        std::mem::swap(&mut context.extensions, request.extensions_mut());
        context.extensions.insert(parts);
        // Cancelled when the client goes away or nib stops serving.
        context.ct = self.config.cancellation_token.child_token();
        let ct = context.ct.clone();
        let nib = self.nib.clone();
        let call = Finish {
            work: Some(Box::pin(async move {
                Service::<RoleServer>::handle_request(&nib, request, context).await
            })),
            cancel: Some(Box::new(move || ct.cancel())),
        };
        let message = match call.await {
            Ok(result) => ServerJsonRpcMessage::response(result, id),
            Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
        };
        // rmcp's status for an answer to a request with a well-formed `_meta`.
        let status = match &message {
            ServerJsonRpcMessage::Error(e) => match e.error.code {
                ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
                | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
                ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
                _ => StatusCode::OK,
            },
            _ => StatusCode::OK,
        };
        let (status, body, kind) = match serde_json::to_vec(&message) {
            Ok(body) => (status, Bytes::from(body), JSON),
            Err(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                Bytes::from(format!(
                    "the answer could not be written as JSON ({e}); the call ran\n"
                )),
                "text/plain; charset=utf-8",
            ),
        };
        let mut response = Response::new(Full::new(body).boxed());
        *response.status_mut() = status;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(kind),
        );
        response
    }

    /// rmcp's `Host` rule: the header's host (and port, when the allowed
    /// entry names one) is one of the allowed.
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| http::uri::Authority::try_from(h).ok())
        else {
            return false;
        };
        let (name, port) = (normalize(host.host()), host.port_u16());
        self.config.allowed_hosts.iter().any(|allowed| {
            let allowed = allowed.trim();
            let (a_name, a_port) = match http::uri::Authority::try_from(allowed) {
                Ok(a) => (normalize(a.host()), a.port_u16()),
                Err(_) => (normalize(allowed), None),
            };
            !allowed.is_empty() && a_name == name && a_port.is_none_or(|p| port == Some(p))
        })
    }
}

/// A host as rmcp compares it: without brackets, lower case.
fn normalize(host: &str) -> String {
    host.trim_matches('[')
        .trim_matches(']')
        .to_ascii_lowercase()
}

/// The one value of a header, when there is exactly one and it is text.
fn one<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()
}

/// `Accept` names both JSON and SSE, in the plain form only (no quotes, no
/// parameters such as `q`, which rmcp weighs).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(http::header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains(['"', ';']) {
            return false;
        }
        for kind in value.split(',').map(str::trim) {
            json |= kind.eq_ignore_ascii_case(JSON);
            sse |= kind.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// rmcp's `Content-Type` rule: JSON, whatever its parameters.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| {
            h.split_once(';')
                .map_or(h, |(essence, _)| essence)
                .trim()
                .eq_ignore_ascii_case(JSON)
        })
}

type Answer = Result<rmcp::model::ServerResult, McpError>;

/// A call run on the request's task that, when the request is dropped
/// before it ends (the client went away), is cancelled and finishes on a
/// task of its own, as rmcp's handler task would.
struct Finish {
    work: Option<Pin<Box<dyn Future<Output = Answer> + Send>>>,
    cancel: Option<Box<dyn FnOnce() + Send>>,
}

impl Future for Finish {
    type Output = Answer;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(Err(McpError::internal_error(
                "the call was answered already",
                None,
            )));
        };
        let answer = std::task::ready!(work.as_mut().poll(cx));
        self.work = None;
        Poll::Ready(answer)
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else {
            return;
        };
        if let Some(cancel) = self.cancel.take() {
            cancel();
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = work.await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct Empty;
    impl ServerHandler for Empty {}

    /// The peer's session never sees an initialize: its loop outlives rmcp's
    /// wait for one (a minute by default) for as long as nib serves, and ends
    /// when the server closes it.
    #[tokio::test(start_paused = true)]
    async fn the_peer_lives_past_rmcps_wait_for_an_initialize_until_closed() {
        let direct = Direct::new(Empty, StreamableHttpServerConfig::default())
            .await
            .expect("the front's peer");
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        assert!(!direct.peer.is_transport_closed(), "the loop ended early");
        direct.close().await;
        assert!(direct.peer.is_transport_closed(), "the loop outlived close");
    }
}
