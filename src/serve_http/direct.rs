//! Plain `tools/call` and `tools/list` requests answered by nib's front
//! itself rather than by rmcp's per-request service or session worker.
//!
//! rmcp answers each sessionless request by building a peer for it and
//! spawning a service loop with its channels, and each request of a session
//! by passing it through the session's worker and service loop and streaming
//! the answer back as SSE; either costs a read of 60 lines about a tenth of a
//! millisecond (issue 61, docs/performance.md). This module owns only the
//! plain cases, with the `Host`, `Accept` and `Content-Type` headers rmcp
//! would accept, no `Origin`, no `Mcp-Param-*` and no progress token (rmcp
//! streams progress as SSE):
//! - [`Era::Sessionless`]: a POST without a session whose body is a
//!   `tools/call` or `tools/list` naming 2026-07-28 in its `_meta` (with
//!   every key that era requires) and in its `MCP-Protocol-Version` header,
//!   with matching `Mcp-Method` and `Mcp-Name` headers;
//! - [`Era::Session`]: a POST in an older-era session (the front checks the
//!   session is the agent's and open) naming an older version in its
//!   header and none in `_meta`, whose body is a `tools/list` or a
//!   `tools/call` of a tool that never asks the client anything mid-call
//!   ([`NEVER_ASKS`]: approvals and questions ride a session's own stream,
//!   which only rmcp's worker has). Its answer is JSON, as a server may
//!   answer any POST.
//!
//! For those it runs rmcp's own dispatch of the front's `HttpNib` (the same
//! `_meta` checks, tools, agent and errors) with a peer made once for the
//! request's protocol version, on the request's own task, and writes the JSON reply rmcp writes without a
//! session: the same body and `Content-Type`. A client that goes away
//! mid-call cancels the call, which runs on to its end as under rmcp.
//! [`Direct::take`] leaves every other request (`initialize`, other methods,
//! other tools in a session, anything unusual or refused) to rmcp.

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

/// The sessionless era answered here, in the header and in `_meta`.
const ERA: &str = "2026-07-28";
const JSON: &str = "application/json";

/// The tools a session's request may have answered here: they read and
/// never ask the client (no approval, no question about hosts), so they
/// need no stream of the session's. A call of any other tool in a session
/// goes through rmcp's session worker.
pub(super) const NEVER_ASKS: &[&str] = &["read", "grep", "find"];

/// How a request reached the front.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Era {
    /// 2026-07-28: no session, the version in every request.
    Sessionless,
    /// An older era's request in a session opened by `initialize`.
    Session,
}

/// The front's direct answers: the server (the front's `HttpNib`), one peer
/// per protocol version (its peer info is what rmcp makes for each
/// sessionless request; for a session's request, what decides the answer's
/// shape in rmcp is its version) and the HTTP settings.
pub(super) struct Direct<S: ServerHandler + Clone> {
    nib: S,
    /// 2026-07-28 first, then each older version a session may have.
    peers: Vec<(ProtocolVersion, Peer<RoleServer>)>,
    config: StreamableHttpServerConfig,
    /// The loops behind `peers`, on sessions of a manager of its own that
    /// no request can name: nothing ever arrives on them, and nothing is
    /// sent (no sessionless server asks the client, a session's calls that
    /// may ask go to rmcp, progress goes to rmcp). A session's transport,
    /// as rmcp serves sessions, so the binary holds no second copy of
    /// rmcp's service loop. Taken by [`Direct::close`].
    services: std::sync::Mutex<Vec<RunningService<RoleServer, S>>>,
    _sessions: LocalSessionManager,
}

/// A request this module answers, and the peer it is answered with.
pub(super) struct Taken {
    request: JsonRpcRequest<ClientRequest>,
    peer: Peer<RoleServer>,
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
        let versions = std::iter::once(ProtocolVersion::V_2026_07_28).chain(
            ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .filter(|v| v.has_initialize())
                .cloned(),
        );
        let (mut peers, mut services) = (Vec::new(), Vec::new());
        for version in versions {
            let (_, transport) = sessions.create_session().await.map_err(|e| {
                format!("cannot start the HTTP front's MCP peer: {e}; nothing was served")
            })?;
            let info = InitializeRequestParams::new(
                ClientCapabilities::default(),
                Implementation::default(),
            )
            .with_protocol_version(version.clone());
            let service = serve_directly(nib.clone(), transport, Some(info));
            peers.push((version, service.peer().clone()));
            services.push(service);
        }
        Ok(Direct {
            nib,
            peers,
            config,
            services: std::sync::Mutex::new(services),
            _sessions: sessions,
        })
    }

    /// Ends the peers' loops when the server stops, as a cancellation: were
    /// one dropped with its session, rmcp would log the session's end before
    /// an initialize as an error.
    pub(super) async fn close(&self) {
        let services =
            std::mem::take(&mut *self.services.lock().unwrap_or_else(|p| p.into_inner()));
        for mut service in services {
            let _ = service
                .close_with_timeout(std::time::Duration::from_secs(1))
                .await;
        }
    }

    /// The request, when it is a plain case this module answers in `era`;
    /// `None` leaves it to rmcp.
    pub(super) fn take(&self, headers: &HeaderMap, body: &[u8], era: Era) -> Option<Taken> {
        let version = one(headers, "mcp-protocol-version")?;
        let (_, peer) = self.peers.iter().find(|(v, _)| {
            v.as_str() == version
                && match era {
                    Era::Sessionless => version == ERA,
                    Era::Session => v.has_initialize(),
                }
        })?;
        if headers.contains_key(http::header::ORIGIN)
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
        if meta.get_progress_token().is_some() {
            return None;
        }
        // The routing headers: required in the sessionless era; when a
        // session's client sends them they must match the body, as rmcp checks.
        let given_method = optional(headers, "mcp-method")?;
        let given_name = optional(headers, "mcp-name")?;
        match era {
            Era::Sessionless => {
                let modern = ProtocolVersion::V_2026_07_28;
                if meta.protocol_version()? != modern
                    || !meta.missing_required_keys(&modern).is_empty()
                    || given_method? != method
                    || (name.is_some() && given_name.is_none())
                {
                    return None;
                }
            }
            Era::Session => {
                if meta.protocol_version().is_some()
                    || given_method.is_some_and(|m| m != method)
                    || name.is_some_and(|n| !NEVER_ASKS.contains(&n.as_ref()))
                {
                    return None;
                }
            }
        }
        match (name, given_name) {
            // Only the plain form: rmcp decodes a `=?base64?…?=` one.
            (Some(name), Some(given)) if given != name.as_ref() || given.starts_with("=?") => {
                return None;
            }
            (None, Some(_)) => return None,
            _ => {}
        }
        Some(Taken {
            request,
            peer: peer.clone(),
        })
    }

    /// Runs the request as rmcp's service loop would and answers it as
    /// rmcp's HTTP service does in JSON mode.
    pub(super) async fn answer(
        &self,
        taken: Taken,
        parts: http::request::Parts,
        era: Era,
    ) -> Response<Body> {
        let Taken { request, peer } = taken;
        let JsonRpcRequest {
            id, mut request, ..
        } = request;
        let mut context = RequestContext::new(id.clone(), peer);
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
        // rmcp's status for an answer to a request with a well-formed
        // `_meta`; in a session every answer is 200 (rmcp streams an error
        // as it streams a result).
        let status = match &message {
            ServerJsonRpcMessage::Error(_) if era == Era::Session => StatusCode::OK,
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

/// A header that may be absent: `Some(None)` when it is, `None` when it is
/// there but not as exactly one value of text.
fn optional<'a>(headers: &'a HeaderMap, name: &str) -> Option<Option<&'a str>> {
    if headers.contains_key(name) {
        one(headers, name).map(Some)
    } else {
        Some(None)
    }
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

    /// The peers' sessions never see an initialize: their loops outlive rmcp's
    /// wait for one (a minute by default) for as long as nib serves, and end
    /// when the server closes them.
    #[tokio::test(start_paused = true)]
    async fn the_peer_lives_past_rmcps_wait_for_an_initialize_until_closed() {
        let direct = Direct::new(Empty, StreamableHttpServerConfig::default())
            .await
            .expect("the front's peer");
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        assert!(
            direct.peers.iter().all(|(_, p)| !p.is_transport_closed()),
            "a loop ended early"
        );
        direct.close().await;
        assert!(
            direct.peers.iter().all(|(_, p)| p.is_transport_closed()),
            "a loop outlived close"
        );
    }
}
