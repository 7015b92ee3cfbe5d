//! `nib serve --http ADDR --token-file FILE`: MCP over streamable HTTP.
//!
//! The same [`NibServer`] as on stdio (the same tools and guarantees) behind
//! rmcp's streamable HTTP service, which serves both protocol eras at `/mcp`:
//! 2026-07-28 requests without a session, and `initialize` + `Mcp-Session-Id`
//! for older clients. The plain sessionless `tools/call` and `tools/list` of
//! the 2026-07-28 era, the calls agents make most, skip rmcp's per-request
//! service, and a session's `tools/list` and reads (tools that never ask the
//! client) skip its session worker: `direct.rs` runs rmcp's dispatch for them
//! itself and writes rmcp's JSON answer, taking only requests whose headers
//! rmcp would accept, in a session only the agent's own that rmcp still has
//! (whose idle timer the front then restarts now and then). In front of
//! both, this module decides who may call and how much:
//!
//! - every `/mcp` request names its agent by a token of the token file
//!   (`NAME TOKEN` a line), in `Authorization: Bearer TOKEN` or
//!   [`TOKEN_HEADER`]; the token is compared in constant time, and a request
//!   without a known token gets 401 before anything reads its body;
//! - the body is bounded ([`Options::max_body`], 413), and so are the calls
//!   running at once, in all and per agent (503 with `Retry-After`);
//! - rmcp checks `Host` (loopback names and `--allow-host`) and `Origin`
//!   (none allowed unless `--allow-origin`): a foreign one gets 403;
//! - `GET /healthz` and `GET /readyz` answer without a token and without detail;
//! - SIGTERM drains: new requests get 503, running calls get
//!   [`Options::grace`] to finish, then nib saves and exits 0;
//! - one JSON line per request goes to stderr (agent, method, tool, status,
//!   ms), never arguments or tokens.
//!
//! Agents are apart: [`HttpNib`] replaces whatever agent a request's `_meta`
//! names with the token's NAME, so what an agent saw is kept between its
//! sessionless requests and never lets another agent edit. An HTTP client's
//! roots are not asked for: the project directory is the root.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use rmcp::model::{CallToolRequestParams, CallToolResponse, ListToolsResult};
use rmcp::model::{PaginatedRequestParams, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::server::{HttpAgent, NibServer};
use nib_settings::Config;

mod direct;

/// nib's own header for the token, for routers that consume `Authorization`.
pub const TOKEN_HEADER: &str = "x-nib-token";
/// The `_meta` key that carries the agent's NAME to [`crate::agents`].
const AGENT_META: &str = "sessionId";
/// The older era's session header.
const SESSION_HEADER: &str = "mcp-session-id";
/// Session owners kept before those of ended sessions are forgotten.
const PRUNE_SESSIONS: usize = 1024;
/// Older-era sessions one agent may hold open at once (rmcp keeps an idle
/// one `--session-idle`, five minutes by default).
const SESSIONS_PER_AGENT: usize = 64;
/// A request stream no session ever has (rmcp numbers them from 0): closing
/// it changes nothing but restarts the session's idle timer.
const NO_REQUEST_STREAM: u64 = u64::MAX;
/// The longest request head (hyper's default is about 400 KiB a
/// connection, held before the token is checked).
const MAX_HEAD: usize = 32 * 1024;
/// Shortest token accepted.
const MIN_TOKEN: usize = 16;
/// How long `/readyz` keeps the sandbox's last answer before trying again.
const READY_KEPT: Duration = Duration::from_secs(5);
/// How long the sandbox's trial program may take before nib is not ready.
const READY_TRIAL: Duration = Duration::from_secs(10);

/// What `nib serve --http` was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Where to listen (`HOST:PORT`; port 0 picks one).
    pub addr: String,
    /// The agents' tokens, `NAME TOKEN` a line.
    pub token_file: PathBuf,
    /// `Host` values accepted besides the loopback names.
    pub allow_hosts: Vec<String>,
    /// `Origin` values accepted (none by default).
    pub allow_origins: Vec<String>,
    /// Largest request body, in bytes.
    pub max_body: usize,
    /// Calls running at once, in all.
    pub max_calls: usize,
    /// Calls running at once, per agent.
    pub max_calls_per_agent: usize,
    /// How long running calls may take to finish after SIGTERM.
    pub grace: Duration,
    /// How long an older-era session may go unused before it ends.
    pub session_idle: Duration,
}

/// `nib serve --http` and its options.
pub const USAGE: &str = "\
nib serve --http HOST:PORT --token-file FILE [OPTIONS]
  Serves MCP over streamable HTTP at http://HOST:PORT/mcp (port 0 picks one;
  the address goes to stderr as `listening on http://HOST:PORT/mcp`).
  --token-file FILE        one agent a line: NAME TOKEN (outside the project)
  --allow-host NAME        a Host to accept besides localhost (repeatable)
  --allow-origin ORIGIN    an Origin to accept, e.g. https://app.example:443 (repeatable)
  --max-body BYTES         largest request body (default 4194304)
  --max-calls N            calls running at once in all (default 16)
  --max-calls-per-agent N  calls running at once per agent (default 4)
  --grace SECONDS          how long running calls get after SIGTERM (default 25)
  --session-idle SECONDS   how long an older-era session may go unused before
                           it ends (default 300)
  Each request needs `Authorization: Bearer TOKEN` or `X-Nib-Token: TOKEN`.
  docs/http.md has the rest.
";

/// Reads `serve`'s arguments.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut addr = None;
    let mut token_file = None;
    let mut options = Options {
        addr: String::new(),
        token_file: PathBuf::new(),
        allow_hosts: Vec::new(),
        allow_origins: Vec::new(),
        max_body: 4 * 1024 * 1024,
        max_calls: 16,
        max_calls_per_agent: 4,
        grace: Duration::from_secs(25),
        session_idle: Duration::from_secs(300),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("serve: {flag} needs a value\n\n{USAGE}"))
        };
        let number = |v: String| {
            v.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("serve: {flag} takes a positive number; got \"{v}\""))
        };
        match flag {
            "--http" => addr = Some(value()?),
            "--token-file" => token_file = Some(PathBuf::from(value()?)),
            "--allow-host" => options.allow_hosts.push(value()?),
            "--allow-origin" => options.allow_origins.push(value()?),
            "--max-body" => options.max_body = number(value()?)?,
            "--max-calls" => options.max_calls = number(value()?)?,
            "--max-calls-per-agent" => options.max_calls_per_agent = number(value()?)?,
            "--grace" => {
                let v = value()?;
                let secs = v
                    .parse::<u64>()
                    .map_err(|_| format!("serve: --grace takes seconds; got \"{v}\""))?;
                options.grace = Duration::from_secs(secs);
            }
            "--session-idle" => {
                options.session_idle = Duration::from_secs(number(value()?)? as u64);
            }
            other => return Err(format!("serve: unknown option \"{other}\"\n\n{USAGE}")),
        }
    }
    options.addr = addr.ok_or_else(|| {
        format!("serve needs --http HOST:PORT (MCP on stdio is plain `nib`)\n\n{USAGE}")
    })?;
    options.token_file = token_file.ok_or_else(|| {
        format!(
            "serve --http needs --token-file FILE: every request must name its agent\n\n{USAGE}"
        )
    })?;
    Ok(options)
}

/// The agents of the token file.
struct Tokens(Vec<(Arc<str>, Vec<u8>)>);

impl Tokens {
    /// Reads the token file, refusing one inside the project (a tool could read
    /// or write it) and one that names no agent.
    fn load(path: &Path, project: &Path) -> Result<Tokens, String> {
        let shown = path.display();
        let real = std::fs::canonicalize(path)
            .map_err(|e| format!("cannot read the token file {shown}: {e}; nothing was served"))?;
        if let Ok(project) = std::fs::canonicalize(project)
            && real.starts_with(&project)
        {
            return Err(format!(
                "the token file {shown} is inside the project {}, where the tools can read it; \
                 nothing was served.\nhint: move it outside the project",
                project.display()
            ));
        }
        let text = std::fs::read_to_string(&real)
            .map_err(|e| format!("cannot read the token file {shown}: {e}; nothing was served"))?;
        Tokens::parse(&text).map_err(|e| format!("token file {shown}: {e}; nothing was served"))
    }

    fn parse(text: &str) -> Result<Tokens, String> {
        let mut agents: Vec<(Arc<str>, Vec<u8>)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(name), Some(token), None) = (words.next(), words.next(), words.next()) else {
                return Err(format!("line {} is not `NAME TOKEN`", n + 1));
            };
            let name_ok = name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !name_ok {
                return Err(format!(
                    "line {}: an agent's NAME is letters, digits, '-', '_' or '.'",
                    n + 1
                ));
            }
            if token.len() < MIN_TOKEN {
                return Err(format!(
                    "line {}: the token of {name} is shorter than {MIN_TOKEN} characters",
                    n + 1
                ));
            }
            if agents
                .iter()
                .any(|(a, t)| &**a == name || t == token.as_bytes())
            {
                return Err(format!(
                    "line {}: {name} or its token is listed twice",
                    n + 1
                ));
            }
            agents.push((Arc::from(name), token.as_bytes().to_vec()));
        }
        if agents.is_empty() {
            return Err("it names no agent (one a line: NAME TOKEN)".into());
        }
        Ok(Tokens(agents))
    }

    /// The agent whose token this is; every token is compared, each in
    /// constant time, so the answer's timing does not tell how much matched.
    fn agent(&self, given: &[u8]) -> Option<Arc<str>> {
        let mut found = None;
        for (name, token) in &self.0 {
            if same(token, given) {
                found = Some(Arc::clone(name));
            }
        }
        found
    }
}

/// Equal bytes, compared without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for (i, x) in a.iter().enumerate() {
        diff |= x ^ b.get(i).copied().unwrap_or(!x);
    }
    std::hint::black_box(diff) == 0
}

/// The token a request carries.
fn token_of(req: &Request<hyper::body::Incoming>) -> Option<&[u8]> {
    if let Some(v) = req.headers().get(TOKEN_HEADER) {
        return Some(v.as_bytes());
    }
    let auth = req.headers().get(http::header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = auth.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

/// What the log line needs of a JSON-RPC message, borrowed from its body
/// where no escape forces a copy; every other member is skipped unbuilt.
#[derive(serde::Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<PeekParams<'a>>,
}

/// A request's `params`, for the tool's name.
#[derive(serde::Deserialize)]
struct PeekParams<'a> {
    #[serde(borrow, default)]
    name: Option<std::borrow::Cow<'a, str>>,
}

/// The agent a request was let in as (in the HTTP request's extensions).
#[derive(Clone, Debug)]
struct AgentName(Arc<str>);

/// The [`NibServer`] as an HTTP client's agent sees it: the agent is the
/// token's NAME whatever the request's `_meta` says, and the client's roots
/// are not asked for.
#[derive(Clone)]
pub struct HttpNib(NibServer);

/// Makes a request's context name the token's agent.
fn as_agent(
    mut context: RequestContext<RoleServer>,
) -> Result<RequestContext<RoleServer>, McpError> {
    let name = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<AgentName>())
        .map(|a| Arc::clone(&a.0))
        .ok_or_else(|| McpError::invalid_request("the request names no agent", None))?;
    // Only the protocol's own keys and the progress token stay: no tool-use
    // or session id of the client's can name another agent.
    context
        .meta
        .retain(|k, _| k.starts_with("io.modelcontextprotocol/") || k == "progressToken");
    if let Some(mut caps) = context.meta.client_capabilities() {
        caps.roots = None;
        context.meta.set_client_capabilities(caps);
    }
    context.meta.insert(
        AGENT_META.into(),
        Value::String(format!("{}{name}", crate::agents::HTTP_SESSION_PREFIX)),
    );
    // Whose jobs the call reaches, and how nibash_status names it.
    context.extensions.insert(HttpAgent(name));
    Ok(context)
}

impl ServerHandler for HttpNib {
    fn get_info(&self) -> ServerConfig {
        self.0.get_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.0.list_tools(request, as_agent(context)?).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.0.call_tool(request, as_agent(context)?).await
    }
}

use direct::Body;

/// The front: tokens, limits, health, drain, logging; `/mcp` goes on to rmcp.
struct Front {
    tokens: Tokens,
    mcp: StreamableHttpService<HttpNib, LocalSessionManager>,
    all: Arc<Semaphore>,
    per_agent: HashMap<Arc<str>, Arc<Semaphore>>,
    max_body: usize,
    draining: AtomicBool,
    /// Older-era sessions and the agent that opened each: another agent's
    /// request naming one is answered as for an unknown session.
    sessions: std::sync::Mutex<HashMap<String, Held>>,
    /// How often a session used through the direct path has rmcp's idle
    /// timer restarted (a sixteenth of `--session-idle`: such a session ends
    /// at the earliest fifteen sixteenths of it after its last use).
    refresh_every: Duration,
    /// How many owners may be kept before the next prune (doubles when a
    /// prune forgets little, so live sessions do not make every request
    /// walk them all).
    prune_at: std::sync::atomic::AtomicUsize,
    /// rmcp's sessions, to forget the owners of those that ended.
    manager: Arc<LocalSessionManager>,
    /// Whether the sandbox takes a call, for `/readyz`.
    sandbox: SandboxReady,
    /// The plain calls and lists answered without rmcp's per-request
    /// service or session worker.
    direct: direct::Direct<HttpNib>,
}

/// An older-era session as the front knows it.
struct Held {
    /// The agent that opened it.
    owner: Arc<str>,
    /// When the front last restarted rmcp's idle timer for it (or opened
    /// it): the timer restarts on each request rmcp's session handles, not
    /// on those the front answers itself.
    refreshed: Instant,
}

/// Whether the sandbox would take a call now, tried at most every
/// [`READY_KEPT`] (one trial at a time; the answer is kept meanwhile).
struct SandboxReady {
    config: Config,
    last: tokio::sync::Mutex<Option<(Instant, bool)>>,
}

impl SandboxReady {
    async fn ready(&self) -> bool {
        let mut last = self.last.lock().await;
        if let Some((at, ready)) = *last
            && at.elapsed() < READY_KEPT
        {
            return ready;
        }
        let config = self.config.clone();
        let ready = tokio::task::spawn_blocking(move || sandbox_takes_a_call(&config))
            .await
            .unwrap_or(false);
        *last = Some((Instant::now(), ready));
        ready
    }
}

/// Unconfined, programs always run. Under NIB_SANDBOX=1: the layers are
/// chosen (fail closed: none fit, none run), the worker entry is trusted,
/// and a trial program (`true`) starts in the sandbox of the project and
/// exits 0 within [`READY_TRIAL`] — what a nibash call needs to start.
fn sandbox_takes_a_call(config: &Config) -> bool {
    if !config.sandbox {
        return true;
    }
    let roots = [config.project_dir.clone()];
    let Ok(sandbox) = crate::nibash::command_rules::judged_sandbox(config, &roots) else {
        return false;
    };
    if !matches!(sandbox.mode(), Ok(Some(_))) {
        return false;
    }
    let trial = [std::ffi::OsString::from("true")];
    match sandbox.spawn(&trial, &config.project_dir, &[]) {
        Ok(worker) => worker.wait(Some(READY_TRIAL)).code == Some(0),
        Err(e) => {
            tracing::warn!("/readyz: the sandbox cannot start a program: {e}");
            false
        }
    }
}

/// What one request's log line says.
struct Log {
    start: Instant,
    agent: Option<Arc<str>>,
    method: Option<String>,
    tool: Option<String>,
    status: u16,
    /// The call's places among the running calls, held until its answer is sent.
    permits: Vec<OwnedSemaphorePermit>,
}

impl Log {
    fn write(&self) {
        let line = json!({
            "agent": self.agent.as_deref(),
            "method": self.method,
            "tool": self.tool,
            "status": self.status,
            "ms": u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        // One write(2): stderr is unbuffered, so writeln! wrote each JSON token apart.
        let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
    }
}

/// A response body that holds the call's permits until it is sent (or the
/// client leaves), and then writes the request's log line.
struct Tracked {
    inner: Body,
    log: Log,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.log.write();
        // A warm worker's refill waits for the answer to be out first.
        crate::stdio::note_answer_sent();
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_string())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
    }
    r
}

impl Front {
    /// Ready for a call: not draining, a place free among the calls, and
    /// the sandbox takes one.
    async fn ready(&self) -> bool {
        !self.draining.load(Ordering::SeqCst)
            && self.all.available_permits() > 0
            && self.sandbox.ready().await
    }

    async fn handle(&self, req: Request<hyper::body::Incoming>) -> Response<Body> {
        let mut log = Log {
            start: Instant::now(),
            agent: None,
            method: None,
            tool: None,
            status: 0,
            permits: Vec::new(),
        };
        let response = self.route(req, &mut log).await;
        let (parts, inner) = response.into_parts();
        log.status = parts.status.as_u16();
        Response::from_parts(parts, Tracked { inner, log }.boxed())
    }

    async fn route(&self, req: Request<hyper::body::Incoming>, log: &mut Log) -> Response<Body> {
        let path = req.uri().path();
        let get = req.method() == http::Method::GET;
        log.method = Some(format!(
            "{} {}",
            req.method(),
            path.chars().take(64).collect::<String>()
        ));
        match path {
            "/healthz" if get => return plain(StatusCode::OK, "ok\n"),
            "/readyz" if get => {
                return if self.ready().await {
                    plain(StatusCode::OK, "ready\n")
                } else {
                    plain(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
                };
            }
            "/mcp" => {}
            _ => return plain(StatusCode::NOT_FOUND, "not found\n"),
        }
        if self.draining.load(Ordering::SeqCst) {
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "nib is shutting down; nothing ran, retry on another replica\n",
            );
        }
        let Some(agent) = token_of(&req).and_then(|t| self.tokens.agent(t)) else {
            return plain(
                StatusCode::UNAUTHORIZED,
                "nothing ran: a known token is needed, as Authorization: Bearer TOKEN or X-Nib-Token: TOKEN\n",
            );
        };
        log.agent = Some(Arc::clone(&agent));
        let too_big = req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > self.max_body as u64);
        if too_big {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is larger than --max-body; nothing ran\n",
            );
        }
        // Only a POST carries a body (rmcp reads none on GET or DELETE), and
        // a call takes its places before its body is read, so bodies held
        // in memory are bounded by the calls at once.
        let has_body = req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
            || req.headers().contains_key(http::header::TRANSFER_ENCODING);
        if has_body && req.method() != http::Method::POST {
            return plain(
                StatusCode::BAD_REQUEST,
                "only a POST to /mcp may carry a body; nothing ran\n",
            );
        }
        if req.method() == http::Method::POST {
            let mine = self.per_agent.get(&agent).map(Arc::clone);
            let permits = mine.and_then(|m| m.try_acquire_owned().ok()).and_then(|m| {
                Arc::clone(&self.all)
                    .try_acquire_owned()
                    .ok()
                    .map(|a| vec![m, a])
            });
            let Some(permits) = permits else {
                return plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too many calls are running; nothing ran, retry after a second\n",
                );
            };
            log.permits = permits;
        }
        let (mut parts, body) = req.into_parts();
        let bytes = match Limited::new(body, self.max_body).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the request body is larger than --max-body; nothing ran\n",
                );
            }
            Err(_) => {
                return plain(
                    StatusCode::BAD_REQUEST,
                    "the request body was cut short; nothing ran\n",
                );
            }
        };
        // The method and the tool, for the log line: peeked without building
        // the message (rmcp parses it into its own types next).
        if let Ok(peek) = serde_json::from_slice::<Peek<'_>>(&bytes) {
            if let Some(m) = &peek.method {
                log.method = Some(m.chars().take(64).collect());
            }
            if log.method.as_deref() == Some("tools/call") {
                log.tool = peek
                    .params
                    .and_then(|p| p.name)
                    .map(|s| s.chars().take(64).collect());
            }
        }
        let session = parts
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let Some(id) = &session {
            let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            if sessions.get(id).is_some_and(|held| held.owner != agent) {
                return plain(StatusCode::NOT_FOUND, "no such session; nothing ran\n");
            }
        }
        if session.is_none()
            && log.method.as_deref() == Some("initialize")
            && self.sessions_full(&agent).await
        {
            return plain(
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "this agent holds {SESSIONS_PER_AGENT} open sessions; no new one was opened. \
                     End one (DELETE /mcp with its Mcp-Session-Id) or retry once an idle one \
                     expires (--session-idle, 5 minutes by default)\n"
                ),
            );
        }
        let closing = parts.method == http::Method::DELETE;
        parts.extensions.insert(AgentName(Arc::clone(&agent)));
        if parts.method == http::Method::POST {
            let era = match session {
                Some(_) => direct::Era::Session,
                None => direct::Era::Sessionless,
            };
            if let Some(request) = self.direct.take(&parts.headers, &bytes, era)
                && self.open_to(session.as_deref(), &agent).await
            {
                let response = self.direct.answer(request, parts, era).await;
                if let Some(id) = &session {
                    self.keep_open(id).await;
                }
                return response;
            }
        }
        let mut response = self
            .mcp
            .handle(Request::from_parts(parts, Full::new(bytes)))
            .await;
        // A DELETE that ended the session is done, not accepted for later:
        // rmcp says 202, clients (the Python SDK) look for 200 or 204.
        if closing && response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::OK;
        }
        self.note_session(session, closing, agent, &response).await;
        response
    }

    /// Records who opened a session rmcp has just opened, forgets the owner
    /// of one a DELETE ended, and prunes the owners now and then.
    async fn note_session(
        &self,
        session: Option<String>,
        closing: bool,
        agent: Arc<str>,
        response: &Response<Body>,
    ) {
        let kept = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            match (session, response.headers().get(SESSION_HEADER)) {
                // Only a DELETE rmcp carried out ends the session: one it
                // refused (a foreign Host, another era's version header)
                // leaves the session running, and its owner with it.
                (Some(id), _) if closing && response.status().is_success() => {
                    sessions.remove(&id);
                }
                (None, Some(opened)) => {
                    if let Ok(id) = opened.to_str() {
                        let held = Held {
                            owner: agent,
                            refreshed: Instant::now(),
                        };
                        sessions.insert(id.to_string(), held);
                    }
                }
                _ => {}
            }
            sessions.len()
        };
        if kept > self.prune_at.load(Ordering::Relaxed) {
            let left = self.prune_sessions().await;
            self.prune_at
                .store((left * 2).max(PRUNE_SESSIONS), Ordering::Relaxed);
        }
    }

    /// Forgets the owners of sessions rmcp no longer has (ended or
    /// expired); returns how many are kept. Only owners recorded before
    /// rmcp's sessions are listed can be forgotten: one recorded meanwhile
    /// is of a session opened after the list was made, live though not in
    /// it.
    async fn prune_sessions(&self) -> usize {
        let known: Vec<String> = {
            let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.keys().cloned().collect()
        };
        let live: std::collections::HashSet<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        forget_ended(&mut sessions, &known, &live);
        sessions.len()
    }

    /// Whether the front may answer a request in `session` for `agent`:
    /// always without a session; in one, only when the agent opened it and
    /// rmcp still has it (else rmcp answers, 404 for an ended session).
    async fn open_to(&self, session: Option<&str>, agent: &Arc<str>) -> bool {
        let Some(id) = session else {
            return true;
        };
        let owned = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .is_some_and(|held| held.owner == *agent);
        owned && self.manager.sessions.read().await.contains_key(id)
    }

    /// After the front answered a request in session `id`: restarts rmcp's
    /// idle timer for it when the front has not for a while (whatever rmcp
    /// answered meanwhile: some of its answers, a refusal or a sessionless
    /// request naming the session, never reach the session), so a session
    /// used only for reads is not ended as idle. The restart is an
    /// event the session's worker handles without touching the session
    /// (closing a request stream no request has): one round trip to the
    /// worker, at most once every sixteenth of `--session-idle` a session.
    async fn keep_open(&self, id: &str) {
        {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            let Some(held) = sessions.get_mut(id) else {
                return;
            };
            if held.refreshed.elapsed() < self.refresh_every {
                return;
            }
            held.refreshed = Instant::now();
        }
        let handle = self.manager.sessions.read().await.get(id).cloned();
        if let Some(handle) = handle {
            let _ = handle.close_request_wise_channel(NO_REQUEST_STREAM).await;
        }
    }

    /// Whether `agent` holds [`SESSIONS_PER_AGENT`] sessions rmcp still has.
    async fn sessions_full(&self, agent: &Arc<str>) -> bool {
        let count = |s: &HashMap<String, Held>| s.values().filter(|h| h.owner == *agent).count();
        let held = count(&self.sessions.lock().unwrap_or_else(|p| p.into_inner()));
        if held < SESSIONS_PER_AGENT {
            return false;
        }
        self.prune_sessions().await;
        count(&self.sessions.lock().unwrap_or_else(|p| p.into_inner())) >= SESSIONS_PER_AGENT
    }
}

/// Forgets the owners of the sessions in `known` (the owners recorded when
/// rmcp's sessions were about to be listed) that are not `live`; an owner
/// recorded since is kept.
fn forget_ended<V>(
    sessions: &mut HashMap<String, V>,
    known: &[String],
    live: &std::collections::HashSet<String>,
) {
    for id in known.iter().filter(|id| !live.contains(*id)) {
        sessions.remove(id);
    }
}

/// Connections held at once: half of the descriptors nib may open
/// (RLIMIT_NOFILE; `unlimited` reads as the most), so the tools (files,
/// pipes, sandboxed programs) keep the other half however many
/// connections clients open.
fn max_connections() -> usize {
    // /proc/self/limits: `Max open files  SOFT  HARD  files`.
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("Max open files"))
                .and_then(|rest| rest.split_whitespace().next())
                .map(|n| n.parse::<usize>().unwrap_or(usize::MAX))
        })
        .unwrap_or(1024);
    (soft / 2).clamp(16, 65_536)
}

/// Serves MCP over HTTP until SIGTERM (or ctrl+c), then drains and saves.
pub async fn serve(mut config: Config, options: Options) -> anyhow::Result<()> {
    let tokens =
        Tokens::load(&options.token_file, &config.project_dir).map_err(anyhow::Error::msg)?;
    // Every agent's token is in that file: the sandbox hides it from every
    // agent's programs (one agent reading it would become any other).
    config
        .sandbox_hide
        .extend(std::path::absolute(&options.token_file));
    config
        .sandbox_hide
        .extend(std::fs::canonicalize(&options.token_file));
    let listener = tokio::net::TcpListener::bind(&options.addr)
        .await
        .map_err(|e| {
            anyhow::anyhow!("cannot listen on {}: {e}; nothing was served", options.addr)
        })?;
    let local = listener.local_addr()?;
    let (state_dir, project_dir) = (config.state_dir.clone(), config.project_dir.clone());
    let sandbox = SandboxReady {
        config: config.clone(),
        last: tokio::sync::Mutex::new(None),
    };
    let server = NibServer::new(config);
    let _status = crate::statusline::publish(&state_dir, &project_dir, server.nibash());
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(options.allow_hosts.iter().cloned());
    let http_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(options.allow_origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_body)
        .with_json_response(true);
    let cancel = http_config.cancellation_token.clone();
    let direct = direct::Direct::new(HttpNib(server.clone()), http_config.clone())
        .await
        .map_err(anyhow::Error::msg)?;
    let shared = server.clone();
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(options.session_idle);
    let manager = Arc::new(manager);
    let mcp = StreamableHttpService::new(
        move || Ok(HttpNib(shared.clone())),
        Arc::clone(&manager),
        http_config,
    );
    let per_agent = tokens
        .0
        .iter()
        .map(|(name, _)| {
            (
                Arc::clone(name),
                Arc::new(Semaphore::new(options.max_calls_per_agent)),
            )
        })
        .collect();
    let front = Arc::new(Front {
        tokens,
        mcp,
        all: Arc::new(Semaphore::new(options.max_calls)),
        per_agent,
        max_body: options.max_body,
        draining: AtomicBool::new(false),
        sessions: std::sync::Mutex::default(),
        refresh_every: options.session_idle / 16,
        prune_at: std::sync::atomic::AtomicUsize::new(PRUNE_SESSIONS),
        manager,
        sandbox,
        direct,
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let _ = writeln!(std::io::stderr(), "listening on http://{local}/mcp");
    let places = Arc::new(Semaphore::new(max_connections()));
    let accept = |stream: tokio::net::TcpStream| {
        // Past the bound a connection is closed at once: idle connections
        // never take the descriptors the tools need.
        let Ok(place) = Arc::clone(&places).try_acquire_owned() else {
            return;
        };
        // No Nagle: a streamed answer's last small chunk would wait for the
        // client's delayed ACK (40 ms a call in the older era's sessions).
        let _ = stream.set_nodelay(true);
        let front = Arc::clone(&front);
        tokio::spawn(async move {
            let _place = place;
            let service = hyper::service::service_fn(move |req| {
                let front = Arc::clone(&front);
                async move { Ok::<_, Infallible>(front.handle(req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            // A client that never finishes its request head is let go.
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                // A head past it gets 431: what a connection holds before
                // its token is checked stays small.
                .max_buf_size(MAX_HEAD)
                .serve_connection(io, service)
                .await
            {
                tracing::debug!("HTTP connection ended: {e}");
            }
        });
    };
    loop {
        tokio::select! {
            got = listener.accept() => match got {
                Ok((stream, _)) => accept(stream),
                Err(e) => {
                    // Out of descriptors (EMFILE) accept fails at once until
                    // one is freed: wait, rather than spin and flood the log.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    // Drain: new requests get 503; running calls get the grace period.
    front.draining.store(true, Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + options.grace;
    let idle = |f: &Front| f.all.available_permits() == options.max_calls;
    while !idle(&front) && tokio::time::Instant::now() < deadline {
        tokio::select! {
            got = listener.accept() => if let Ok((stream, _)) = got { accept(stream) },
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    if !idle(&front) {
        tracing::warn!(
            "calls still running after {} s of grace are cut off",
            options.grace.as_secs()
        );
    }
    cancel.cancel();
    front.direct.close().await;
    server.save();
    server.stop_providers();
    crate::netproxy::remove_socket_folder();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prune_forgets_only_owners_it_knew_of_before_listing_rmcps_sessions() {
        let owner = |n: &str| -> Arc<str> { Arc::from(n) };
        let mut sessions: HashMap<String, Arc<str>> = [
            ("ended".to_string(), owner("bob")),
            ("live".to_string(), owner("bob")),
        ]
        .into();
        let known = vec!["ended".to_string(), "live".to_string()];
        // Alice's session opens after the owners were listed and before
        // rmcp's sessions were: it is live, though not in `live`.
        sessions.insert("alices".into(), owner("alice"));
        let live = ["live".to_string()].into();
        forget_ended(&mut sessions, &known, &live);
        let mut kept: Vec<(&str, &str)> = sessions
            .iter()
            .map(|(id, o)| (id.as_str(), o.as_ref()))
            .collect();
        kept.sort();
        assert_eq!(kept, [("alices", "alice"), ("live", "bob")]);
    }

    #[test]
    fn tokens_are_read_and_matched_whole() {
        let t = Tokens::parse("# agents\nalice aaaaaaaaaaaaaaaa1\n\nbob bbbbbbbbbbbbbbbb2\n")
            .expect("two agents");
        assert_eq!(t.agent(b"aaaaaaaaaaaaaaaa1").as_deref(), Some("alice"));
        assert_eq!(t.agent(b"bbbbbbbbbbbbbbbb2").as_deref(), Some("bob"));
        assert_eq!(t.agent(b"aaaaaaaaaaaaaaaa"), None);
        assert_eq!(t.agent(b"aaaaaaaaaaaaaaaa12"), None);
        assert_eq!(t.agent(b""), None);
        assert!(Tokens::parse("alice short").is_err());
        assert!(Tokens::parse("alice aaaaaaaaaaaaaaaa1 extra").is_err());
        assert!(Tokens::parse("a aaaaaaaaaaaaaaaa1\na aaaaaaaaaaaaaaaa2").is_err());
        assert!(Tokens::parse("\n# none\n").is_err());
    }

    #[test]
    fn serve_needs_an_address_and_a_token_file() {
        let args = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let o = parse(&args(
            "--http 127.0.0.1:0 --token-file /t --allow-host pod --max-calls=3",
        ))
        .expect("parses");
        assert_eq!(o.addr, "127.0.0.1:0");
        assert_eq!(o.allow_hosts, vec!["pod".to_string()]);
        assert_eq!(o.max_calls, 3);
        assert!(parse(&args("--http 127.0.0.1:0")).is_err());
        assert!(parse(&args("--token-file /t")).is_err());
        assert!(parse(&args("--http 127.0.0.1:0 --token-file /t --max-calls 0")).is_err());
    }
}
