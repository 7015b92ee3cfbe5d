//! The MCP server: both protocol eras over stdio, tool routing, roots.
//!
//! This is the only module that knows MCP. It lists the tools of
//! [`crate::tools`] with their annotations, runs each call on a blocking thread
//! and wraps the [`nib_files::context::ToolOutput`] in a CallToolResult. Argument and
//! routing errors become protocol errors (invalid params); everything a tool
//! reports is a result with `isError`.
//!
//! Roots: in the handshake era (`initialize`) the server asks `roots/list` after
//! `notifications/initialized`, only when the client declared the roots
//! capability, bounded by [`Config::roots_timeout`], and again when the client
//! says its roots changed. In the modern era (`server/discover`, per-request
//! metadata) a server cannot call the client; the first `tools/call` from a
//! client that declares roots answers `input_required` with a `roots/list`
//! request, and the retry carries the roots.
//!
//! rmcp marks roots deprecated (SEP-2577), but the clients nib serves (Claude
//! Code, OpenCode) still send them and the design relies on them, so this module
//! allows the deprecation.
#![allow(deprecated)]

use crate::confinement::Confinement;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, Implementation,
    InputRequest, InputRequests, InputRequiredResult, ListRootsRequest, ListRootsResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};

use crate::agents::Agents;
use crate::tools::{self, CallError};
use nib_files::config::Config;
use nib_files::context::{ApprovalRequest, Ctx, ToolOutput};
use nib_files::seen::Agent;
use nib_files::workspace::Workspace;

/// The key of the roots request in an `input_required` result.
const ROOTS_INPUT: &str = "roots";
/// The request state that marks the retry after a roots request (sealed,
/// as every state nib hands out: [`crate::request_state`]).
const ROOTS_STATE: &str = "nib-roots-v1";

/// The HTTP agent (the token's NAME) a request comes from: `serve_http`
/// puts it in the request context's extensions, where nothing a client
/// sends can reach. A request without it is the stdio client's.
#[derive(Clone, Debug)]
pub struct HttpAgent(pub Arc<str>);

/// Whose jobs a call reaches (see [`crate::nibash::jobs::Owner`]):
/// the HTTP agent's NAME, or empty for the stdio client, which is one agent.
fn owner(context: &RequestContext<RoleServer>) -> crate::nibash::jobs::Owner {
    context
        .extensions
        .get::<HttpAgent>()
        .map_or_else(|| Arc::from(""), |a| Arc::clone(&a.0))
}

/// One connection's server: its workspace and what its agent has seen.
#[derive(Clone)]
pub struct NibServer {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    workspace: Workspace,
    agents: Agents,
    last_save: Mutex<std::time::Instant>,
    nibash: Arc<crate::nibash::Nibash>,
    /// The client, for notifications sent outside a request (job ends).
    peer: Mutex<Option<Peer<RoleServer>>>,
    /// The client declared Claude Code's channel (`experimental["claude/channel"]`).
    channel_client: std::sync::atomic::AtomicBool,
    /// This session, for counting the sessions a name was used in.
    session: String,
    /// Modern era, NIB_CONFIRM_NETWORK: answers of nibash calls that met
    /// unlisted hosts, kept while the user is asked about those hosts
    /// (by id: the answer and the `host:port`s).
    network_asks: Mutex<std::collections::HashMap<String, (ToolOutput, Vec<String>)>>,
    /// Hosts an agent's person declined (agent label, `host:port`): not
    /// put to them again, so a program cannot ask on every call.
    network_declined: Mutex<std::collections::HashSet<(String, String)>>,
    /// Other MCP servers whose tools nib offers (`None` outside a runtime).
    providers: Option<Arc<crate::providers::Providers>>,
    /// Seals the request states of `input_required` answers (`None`: the
    /// system gave no randomness; then nothing is asked that way).
    sealer: Option<crate::request_state::Sealer>,
}

impl NibServer {
    /// Keeps the client for notifications outside a request, and whether it
    /// declared Claude Code's channel.
    fn remember_peer(&self, context: &RequestContext<RoleServer>) {
        // An HTTP agent's client is not kept: what goes to the kept client
        // (job ends, list changes) would reach that agent whoever it was about.
        if context.extensions.get::<HttpAgent>().is_some() {
            return;
        }
        self.keep_peer(&context.peer);
        let declared = context.client_capabilities().is_some_and(|c| {
            c.experimental
                .as_ref()
                .is_some_and(|e| e.contains_key(CHANNEL))
        });
        if declared {
            self.inner
                .channel_client
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Keeps the client for notifications outside a request.
    fn keep_peer(&self, peer: &Peer<RoleServer>) {
        let mut slot = self.inner.peer.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(peer.clone());
        }
    }

    /// Starts the providers (once), seeing the roots known now.
    fn start_providers(&self) {
        if let Some(p) = &self.inner.providers {
            p.start(self.inner.workspace.roots());
        }
    }

    /// The shell's state (its running calls and jobs), for the status file.
    pub fn nibash(&self) -> Arc<crate::nibash::Nibash> {
        Arc::clone(&self.inner.nibash)
    }

    /// A server for one connection.
    pub fn new(config: Config) -> NibServer {
        let inner = Arc::new(Inner {
            workspace: {
                let w =
                    Workspace::with_project_names(config.project_dir.clone(), config.auto_names);
                w.update_names(|n| {
                    nib_files::names::load_kept(&config.state_dir, &config.project_dir, n)
                });
                w
            },
            agents: Agents::new(&config.state_dir),
            session: format!(
                "{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos())
            ),
            last_save: Mutex::new(std::time::Instant::now()),
            nibash: Arc::default(),
            peer: Mutex::new(None),
            network_asks: Mutex::default(),
            network_declined: Mutex::default(),
            channel_client: std::sync::atomic::AtomicBool::new(false),
            providers: crate::providers::Providers::new(&config),
            sealer: crate::request_state::Sealer::new(),
            config,
        });
        if let Some(providers) = &inner.providers {
            // A provider that starts, ends or changes its tools changes nib's list.
            let weak = Arc::downgrade(&inner);
            let runtime = tokio::runtime::Handle::try_current().ok();
            providers.on_change(Arc::new(move || {
                let Some(inner) = weak.upgrade() else { return };
                let peer = inner.peer.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let (Some(peer), Some(rt)) = (peer, runtime.as_ref()) {
                    rt.spawn(async move {
                        let _ = peer.notify_tool_list_changed().await;
                    });
                }
            }));
            let weak = Arc::downgrade(providers);
            *inner
                .nibash
                .provider_status
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(move || {
                weak.upgrade().map(|p| p.describe()).unwrap_or_default()
            }));
        }
        // Job ends reach a client with nib's channel at once.
        let weak = Arc::downgrade(&inner);
        let runtime = tokio::runtime::Handle::try_current().ok();
        *inner
            .nibash
            .announcer
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(move |id, text| {
            let (Some(inner), Some(runtime)) = (weak.upgrade(), runtime.as_ref()) else {
                return;
            };
            let wanted = inner.config.channel
                || inner
                    .channel_client
                    .load(std::sync::atomic::Ordering::Relaxed);
            let peer = inner.peer.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let (true, Some(peer)) = (wanted, peer) {
                runtime.spawn(async move {
                    let note = rmcp::model::CustomNotification::new(
                        CHANNEL_NOTIFICATION,
                        Some(serde_json::json!({
                            "content": text,
                            "meta": {"source": "nib", "job": format!("%{id}")}
                        })),
                    );
                    let _ = peer
                        .send_notification(rmcp::model::ServerNotification::CustomNotification(
                            note,
                        ))
                        .await;
                });
            }
        }));
        let server = NibServer { inner };
        server.prestart_shell();
        server
    }

    /// Starts a warm nibash worker for the roots in force, beside the
    /// session, so the first call finds one ready (its policy, with the walk
    /// for protected paths, is made on that thread too, not on a call's).
    fn prestart_shell(&self) {
        let config = &self.inner.config;
        if !config.shell || !config.warm {
            return;
        }
        let inner = Arc::clone(&self.inner);
        let _ = std::thread::Builder::new()
            .name("nib-prestart".into())
            .spawn(move || {
                let cwd = inner.workspace.project_dir().to_path_buf();
                let roots = inner.workspace.roots();
                let policy = inner.config.sandbox_policy(&roots);
                let key = crate::nibash::warm::key(&policy, &cwd);
                inner.nibash.warm.refill(key, policy, cwd);
                // The git-dir sweep's first walk, off the first call's path.
                if inner.config.sandbox {
                    nib_files::fs::git_guard::prime(&roots);
                }
            });
    }

    fn tool_list(config: &Config) -> Vec<Tool> {
        tools::definitions_for(config)
            .into_iter()
            .map(|d| {
                let schema = match d.schema {
                    serde_json::Value::Object(m) => m,
                    _ => serde_json::Map::new(),
                };
                let annotations = ToolAnnotations::new()
                    .read_only(d.read_only)
                    .destructive(!d.read_only)
                    .idempotent(d.read_only)
                    .open_world(false);
                Tool::new(d.name, d.description, Arc::new(schema)).with_annotations(annotations)
            })
            .collect()
    }

    /// Asks the client for its roots (handshake era), bounded by the timeout.
    fn fetch_roots(&self, peer: Peer<RoleServer>) {
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

    fn set_roots(&self, result: &ListRootsResult) {
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
    fn modern_roots(
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
fn file_uri_to_path(uri: &str) -> Option<PathBuf> {
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

/// The key of the approval request in an `input_required` result.
const APPROVE_INPUT: &str = "approve";
/// The request state of the retry after an approval request; the path follows.
const APPROVE_STATE: &str = "nib-approve-v1:";

/// The state of a modern-era question about hosts a nibash call met.
const NETWORK_STATE: &str = "nib-network-v1:";
/// Declined hosts remembered at most (past it, they may be asked again).
const MAX_DECLINED_HOSTS: usize = 4096;
/// Writes in one call that may each ask for approval.
const MAX_APPROVALS_PER_CALL: usize = 8;

/// The form a person answers: one yes/no.
fn approval_params(req: &ApprovalRequest) -> Result<ElicitRequestParams, &'static str> {
    let schema = ElicitationSchema::builder()
        .required_bool_property("approve", |b| {
            b.title("Allow this write").with_default(false)
        })
        .build()?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: req.question(),
        requested_schema: schema,
    })
}

/// Whether an elicitation's answer approves (accepted, with `approve` true).
fn approves(answer: Option<&ElicitResult>) -> bool {
    answer.is_some_and(|r| {
        r.action == ElicitationAction::Accept
            && r.content
                .as_ref()
                .and_then(|c| c.get("approve"))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false)
    })
}

/// An id for a kept answer (not a secret: it only names the answer).
fn rand_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    xxhash_rust::xxh3::xxh3_64(&t.to_le_bytes()) ^ u64::from(std::process::id())
}

/// The question for a host a program wants that is not on the list.
fn network_params(host_port: &str) -> Result<ElicitRequestParams, &'static str> {
    let schema = ElicitationSchema::builder()
        .required_bool_property("approve", |b| {
            b.title("Allow this host for the session")
                .with_default(false)
        })
        .build()?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "A program in nibash wants to reach {host_port}, which is not in NIB_SANDBOX_NETWORK. Allow that host for the rest of this session?"
        ),
        requested_schema: schema,
    })
}

/// The proxy's way to ask the user mid-call (the handshake era: the server
/// may send the client a request while a call runs): an elicitation on
/// `peer`, waited for at most `timeout`.
fn network_asker(peer: Peer<RoleServer>, timeout: std::time::Duration) -> crate::netproxy::Asker {
    let handle = tokio::runtime::Handle::current();
    Arc::new(move |host_port: &str| {
        let Ok(params) = network_params(host_port) else {
            return false;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let peer = peer.clone();
        handle.spawn(async move {
            let _ = tx.send(peer.create_elicitation(params).await.ok());
        });
        approves(rx.recv_timeout(timeout).ok().flatten().as_ref())
    })
}

fn result(out: ToolOutput) -> CallToolResult {
    let mut content = vec![ContentBlock::text(out.text)];
    content.extend(
        out.images
            .into_iter()
            .map(|(data, mime)| ContentBlock::image(data, mime)),
    );
    if out.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl NibServer {
    /// Runs a tool on a blocking thread with this call's scope.
    async fn run_tool(
        &self,
        agent: Arc<Mutex<Agent>>,
        name: String,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ToolOutput, McpError> {
        let shell = Arc::clone(&self.inner.nibash);
        let owner = owner(context);
        self.run_in_call(agent, context, move |ctx| {
            tools::call(&name, arguments, ctx, &shell, &owner)
        })
        .await
    }

    /// A provider's tool: the call goes to the provider (bounded, with the
    /// client's progress and cancellation), and its answer's locations
    /// become anchored rows read with this call's scope.
    async fn provider_call(
        &self,
        providers: &Arc<crate::providers::Providers>,
        agent: &Arc<Mutex<Agent>>,
        provider: &str,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ToolOutput, McpError> {
        self.start_providers();
        let progress = context.meta.get_progress_token().map(|token| {
            let peer = context.peer.clone();
            let handle = tokio::runtime::Handle::current();
            Box::new(
                move |done: f64, total: Option<f64>, message: Option<String>| {
                    let mut param = ProgressNotificationParam::new(token.clone(), done);
                    param.total = total;
                    param.message = message;
                    let peer = peer.clone();
                    handle.spawn(async move {
                        let _ = peer.notify_progress(param).await;
                    });
                },
            ) as crate::providers::session::ProgressFn
        });
        let ct = context.ct.clone();
        let answer = providers
            .call(
                provider,
                tool,
                arguments,
                self.inner.workspace.roots(),
                progress,
                async move { ct.cancelled().await },
            )
            .await;
        let answer = match answer {
            Ok(a) => a,
            Err(text) => return Ok(ToolOutput::error(format!("{}\n", text.trim_end()))),
        };
        let (provider, full) = (provider.to_string(), format!("{provider}_{tool}"));
        self.run_in_call(Arc::clone(agent), context, move |ctx| {
            Ok(crate::providers::locations::render(
                &provider, &full, &answer, ctx,
            ))
        })
        .await
    }

    /// Runs `work` on a blocking thread with this call's context (scope,
    /// agent, cancellation and progress).
    async fn run_in_call(
        &self,
        agent: Arc<Mutex<Agent>>,
        context: &RequestContext<RoleServer>,
        work: impl FnOnce(&Ctx) -> Result<ToolOutput, CallError> + Send + 'static,
    ) -> Result<ToolOutput, McpError> {
        let this = self.clone();
        let live = Arc::new(match context.meta.get_progress_token() {
            Some(token) => {
                let peer = context.peer.clone();
                let handle = tokio::runtime::Handle::current();
                nib_files::context::Live::with_progress(Box::new(move |secs, message| {
                    let peer = peer.clone();
                    let token = token.clone();
                    handle.spawn(async move {
                        let _ = peer
                            .notify_progress(
                                ProgressNotificationParam::new(token, secs).with_message(message),
                            )
                            .await;
                    });
                }))
            }
            None => nib_files::context::Live::default(),
        });
        let ct = context.ct.clone();
        let watcher = {
            let live = Arc::clone(&live);
            tokio::spawn(async move {
                ct.cancelled().await;
                live.cancel();
            })
        };
        let outcome = tokio::task::spawn_blocking(move || {
            let config = &this.inner.config;
            let scope = match this
                .inner
                .workspace
                .scope(config.sandbox, config.confirm_outside_roots)
            {
                Ok(s) => s,
                Err(e) => {
                    return Ok(ToolOutput::error(format!(
                        "{e}; nothing was read or written.\nhint: check the client's roots or NIB_DIRECTORY"
                    )));
                }
            };
            let own = Arc::clone(&agent.lock().unwrap_or_else(|p| p.into_inner()).names);
            let workspace = this.inner.workspace.for_agent(own);
            let ctx = Ctx {
                workspace: &workspace,
                agent: &agent,
                config,
                scope,
                enforce_seen: true,
                live: Some(live.as_ref()),
                programs: &crate::nibash::command_rules::JudgedPrograms,
            };
            let started = std::time::Instant::now();
            let mut outcome = work(&ctx);
            if let Ok(out) = &mut outcome {
                nib_files::context::push_notes(&mut out.text, &ctx.workspace.name_news());
            }
            nib_text::lang::release_call_trees();
            nib_text::malloc::trim_after(started.elapsed());
            outcome
        })
        .await;
        watcher.abort();
        let outcome = outcome.map_err(|e| {
            McpError::internal_error(format!("the tool stopped unexpectedly: {e}"), None)
        })?;
        match outcome {
            Ok(out) => Ok(out),
            Err(e @ CallError::UnknownTool(..)) => {
                Err(McpError::invalid_params(e.to_string(), None))
            }
            Err(CallError::Args(e)) => Err(McpError::invalid_params(
                format!("{e}; nothing was read or written"),
                None,
            )),
        }
    }

    /// Applies a person's answer: `None` when the write may go ahead,
    /// else why it may not.
    fn take_answer(
        &self,
        agent: &Mutex<Agent>,
        key: &Path,
        answer: Option<ElicitResult>,
    ) -> Option<String> {
        let approved = approves(answer.as_ref());
        let mut agent = agent.lock().unwrap_or_else(|p| p.into_inner());
        if approved && agent.approvals.approve(key) {
            return None;
        }
        agent.approvals.consume(key);
        Some(match answer.map(|r| r.action) {
            Some(ElicitationAction::Accept) => {
                "was not given (the form was sent without approving)".into()
            }
            Some(ElicitationAction::Decline) => "was declined".into(),
            Some(ElicitationAction::Cancel) => "was cancelled".into(),
            Some(_) | None => "was not answered".into(),
        })
    }

    /// Modern era: a call whose client can be asked (elicitation) makes
    /// the proxy put unlisted hosts to the user, after the call
    /// ([`Self::network_question`]), unless NIB_CONFIRM_NETWORK is `0`.
    fn note_askable(&self, context: &RequestContext<RoleServer>) {
        if !self.inner.config.confirm_network {
            return;
        }
        let modern = context
            .meta
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let can_ask = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        if modern && can_ask {
            crate::netproxy::note_askable();
        }
    }

    /// Modern era with NIB_CONFIRM_NETWORK: when a nibash call met hosts
    /// that are not listed (the user cannot be asked while a call runs in
    /// this era), its answer is kept and the user is asked about them.
    fn network_question(
        &self,
        context: &RequestContext<RoleServer>,
        digest: &[u8; 32],
        out: &ToolOutput,
    ) -> Option<CallToolResponse> {
        let modern = context
            .meta
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let can_ask = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        if !modern || !can_ask || !self.inner.config.confirm_network {
            return None;
        }
        let not_listed = crate::netproxy::hosts::Refusal::NotAllowed.to_string();
        let label = self.agent_label(context);
        let declined = self
            .inner
            .network_declined
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let hosts: Vec<String> = out
            .network_refused
            .iter()
            .filter(|(_, why)| *why == not_listed)
            .map(|(host, _)| host.clone())
            .filter(|host| !declined.contains(&(label.clone(), host.clone())))
            .collect();
        drop(declined);
        let params = network_params(&hosts.join(", ")).ok()?;
        if hosts.is_empty() {
            return None;
        }
        let id = format!("{:016x}", rand_id());
        let state = self.seal(context, digest, &format!("{NETWORK_STATE}{id}"))?;
        self.inner
            .network_asks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), (out.clone(), hosts));
        let mut requests = InputRequests::new();
        requests.insert(
            APPROVE_INPUT.to_string(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        );
        Some(InputRequiredResult::new(Some(requests), Some(state)).into())
    }

    /// The kept answer of a nibash call, with what the user said about the
    /// hosts it met (approved: allowed for the session).
    fn network_answer(&self, id: &str, agent: &str, answer: Option<ElicitResult>) -> ToolOutput {
        let kept = self
            .inner
            .network_asks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        let Some((mut out, hosts)) = kept else {
            return ToolOutput::error(
                "nibash: the answer this question was about is gone (nib restarted, or it was answered already); nothing ran again.\nhint: run the command again\n".into(),
            );
        };
        if approves(answer.as_ref())
            && let Some(running) = crate::netproxy::current()
        {
            for h in &hosts {
                running
                    .proxy
                    .allow(h.rsplit_once(':').map_or(h.as_str(), |(n, _)| n));
            }
            out.text.push_str(&format!(
                "[network: {} allowed for this session; run the command again to reach {}]\n",
                hosts.join(", "),
                if hosts.len() == 1 { "it" } else { "them" }
            ));
        } else {
            let mut declined = self
                .inner
                .network_declined
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            for h in &hosts {
                if declined.len() < MAX_DECLINED_HOSTS {
                    declined.insert((agent.to_string(), h.clone()));
                }
            }
            out.text.push_str(
                "[network: not allowed; the hosts stay refused]\n[network: nib will not ask about them again]\n",
            );
        }
        out
    }

    fn forget_approval(&self, agent: &Mutex<Agent>, key: &Path) {
        let mut agent = agent.lock().unwrap_or_else(|p| p.into_inner());
        agent.approvals.consume(key);
    }

    /// The agent behind a call (see [`crate::agents`]).
    /// How the agent of a call is named in nibash_status's usage table.
    fn agent_label(&self, context: &RequestContext<RoleServer>) -> String {
        if let Some(a) = context.extensions.get::<HttpAgent>() {
            return a.0.to_string();
        }
        let meta = serde_json::to_value(&context.meta)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        let key = self.inner.agents.key_for(&meta);
        match (key.session.is_empty(), key.agent.is_empty()) {
            (true, true) => "main".into(),
            (_, true) => format!("session {}", key.session),
            _ => key.agent,
        }
    }

    fn agent_for(&self, context: &RequestContext<RoleServer>) -> Arc<Mutex<Agent>> {
        let meta = serde_json::to_value(&context.meta)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        let key = self.inner.agents.key_for(&meta);
        let scope = self
            .inner
            .workspace
            .scope(
                self.inner.config.sandbox,
                self.inner.config.confirm_outside_roots,
            )
            .unwrap_or(nib_files::fs::Scope::Open);
        let load = |p: &Path| {
            nib_files::fs::read_file(&scope, p, nib_files::context::TEXT_LIMIT)
                .ok()
                .map(|f| f.bytes)
        };
        self.inner.agents.get(&key, &load)
    }

    /// Saves what agents saw, at most every two seconds (and at exit).
    fn save_soon(&self) {
        let mut last = self
            .inner
            .last_save
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if last.elapsed() >= std::time::Duration::from_secs(2) {
            *last = std::time::Instant::now();
            self.save();
        }
    }

    /// Ends the providers (the session is over; they would also end with
    /// nib through their parent-death signal).
    pub fn stop_providers(&self) {
        if let Some(p) = &self.inner.providers {
            p.stop();
        }
    }

    /// Saves what every agent saw, and the names this session used (also at exit).
    pub fn save(&self) {
        self.inner.agents.save_all();
        let inner = &self.inner;
        let mut used = inner.workspace.names().list().to_vec();
        used.extend(inner.agents.own_names());
        nib_files::names::save_used(
            &inner.config.state_dir,
            &inner.config.project_dir,
            &used,
            &inner.session,
        );
    }

    /// Seals `payload` as the request state of this call's
    /// `input_required` answer: bound to the agent ([`owner`]: the HTTP
    /// agent's NAME, or the stdio client) and to the call (`digest`).
    fn seal(
        &self,
        context: &RequestContext<RoleServer>,
        digest: &[u8; 32],
        payload: &str,
    ) -> Option<String> {
        self.inner
            .sealer
            .as_ref()?
            .seal(&owner(context), digest, payload)
    }

    /// The payload of the request state a retry carries, if any; a state
    /// that does not open (forged, altered, expired, used, another agent's
    /// or another call's) is a protocol error, and nothing runs.
    fn open_state(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        digest: &[u8; 32],
    ) -> Result<Option<String>, McpError> {
        let Some(state) = request.request_state.as_deref() else {
            return Ok(None);
        };
        let opened = match &self.inner.sealer {
            Some(s) => s.open(&owner(context), digest, state),
            None => Err(crate::request_state::Refused::Forged),
        };
        opened.map(Some).map_err(|why| {
            McpError::invalid_params(
                format!(
                    "requestState refused: {why}; nothing ran and nothing was written.
                     hint: call the tool again without requestState and inputResponses to be asked again"
                ),
                None,
            )
        })
    }

    fn refused_write(&self, key: &Path, why: &str) -> CallToolResponse {
        let shown = nib_text::path_text::escape_control(&key.to_string_lossy());
        result(ToolOutput::error(format!(
            "{shown}: the write needs a person's approval, which {why}. Nothing was written.\n\
             hint: ask again to be prompted, or keep the change inside the roots\n"
        )))
        .into()
    }
}

/// How long a tool list waits for providers that are still starting.
const PROVIDER_SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// Claude Code's channel: the capability a server declares and the
/// notification it sends.
const CHANNEL: &str = "claude/channel";
const CHANNEL_NOTIFICATION: &str = "notifications/claude/channel";

impl ServerHandler for NibServer {
    fn get_info(&self) -> ServerConfig {
        let providers = self.inner.providers.as_ref().is_some_and(|p| p.any());
        let mut capabilities = if providers {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        if self.inner.config.channel {
            let mut experimental = rmcp::model::ExperimentalCapabilities::new();
            experimental.insert(CHANNEL.into(), serde_json::Map::new());
            capabilities.experimental = Some(experimental);
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("nib", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "nib's read prints [PATH#TAG] headers and LINE:TEXT rows; those rows are the \
                 anchors edit refers to by line number. write creates files, or overwrites one given its tag.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools = Self::tool_list(&self.inner.config);
        if let Some(p) = &self.inner.providers {
            if context.extensions.get::<HttpAgent>().is_none() {
                self.keep_peer(&context.peer);
            }
            // The first list waits a little for providers still starting;
            // one that starts later is announced with list_changed.
            self.start_providers();
            p.settle(PROVIDER_SETTLE).await;
            tools.extend(p.tools());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let digest =
            crate::request_state::request_digest(&request.name, request.arguments.as_ref());
        let opened = self.open_state(&request, &context, &digest)?;
        if let Some(answer) = self.modern_roots(&request, &context, opened.as_deref(), &digest) {
            return Ok(answer);
        }
        self.remember_peer(&context);
        self.note_askable(&context);
        let name = request.name.to_string();
        let arguments = request.arguments.clone();
        let agent = self.agent_for(&context);
        // Modern era: the retry that carries the person's answer to an approval.
        if let Some(key) = opened
            .as_deref()
            .and_then(|s| s.strip_prefix(APPROVE_STATE))
        {
            let key = PathBuf::from(key);
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|r| r.get(APPROVE_INPUT))
                .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
            if let Some(why) = self.take_answer(&agent, &key, answer) {
                return Ok(self.refused_write(&key, &why));
            }
        }
        // Modern era: the answer about hosts an earlier run of this call met;
        // the call is not run again (it already ran), its answer is given.
        if let Some(id) = opened
            .as_deref()
            .and_then(|s| s.strip_prefix(NETWORK_STATE))
        {
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|r| r.get(APPROVE_INPUT))
                .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
            let label = self.agent_label(&context);
            return Ok(result(self.network_answer(id, &label, answer)).into());
        }
        if let Some(providers) = &self.inner.providers
            && let Some((provider, tool)) = providers.owner(&name)
        {
            let out = self
                .provider_call(providers, &agent, &provider, &tool, arguments, &context)
                .await?;
            self.save_soon();
            self.inner
                .nibash
                .count(&self.agent_label(&context), &name, out.text.chars().count());
            return Ok(result(out).into());
        }
        let mut asked = 0;
        loop {
            let out = self
                .run_tool(
                    Arc::clone(&agent),
                    name.clone(),
                    arguments.clone(),
                    &context,
                )
                .await?;
            let Some(req) = out.approval.clone() else {
                self.save_soon();
                self.inner.nibash.count(
                    &self.agent_label(&context),
                    &name,
                    out.text.chars().count(),
                );
                if name == "nibash"
                    && let Some(ask) = self.network_question(&context, &digest, &out)
                {
                    return Ok(ask);
                }
                return Ok(result(out).into());
            };
            asked += 1;
            let can_ask = context
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some());
            if !can_ask || asked > MAX_APPROVALS_PER_CALL {
                let why = if can_ask {
                    "was not asked for: too many writes in one call need approval"
                } else {
                    "cannot be asked for: the client offers no elicitation"
                };
                self.forget_approval(&agent, &req.key);
                return Ok(result(ToolOutput::error(req.refusal(why))).into());
            }
            let params = match approval_params(&req) {
                Ok(p) => p,
                Err(e) => {
                    self.forget_approval(&agent, &req.key);
                    let why = format!("could not be asked for ({e})");
                    return Ok(result(ToolOutput::error(req.refusal(&why))).into());
                }
            };
            let modern = context
                .meta
                .protocol_version()
                .is_some_and(|v| !v.has_initialize());
            if modern {
                let mut requests = InputRequests::new();
                requests.insert(
                    APPROVE_INPUT.to_string(),
                    InputRequest::Elicitation(ElicitRequest::new(params)),
                );
                let payload = format!("{APPROVE_STATE}{}", req.key.to_string_lossy());
                let Some(state) = self.seal(&context, &digest, &payload) else {
                    self.forget_approval(&agent, &req.key);
                    let why = "could not be asked for (no randomness to seal the question)";
                    return Ok(result(ToolOutput::error(req.refusal(why))).into());
                };
                return Ok(InputRequiredResult::new(Some(requests), Some(state)).into());
            }
            let timeout = self.inner.config.approval_timeout;
            let answer =
                tokio::time::timeout(timeout, context.peer.create_elicitation(params)).await;
            let answer = match answer {
                Ok(Ok(r)) => Some(r),
                Ok(Err(e)) => {
                    self.forget_approval(&agent, &req.key);
                    let why = format!("could not be asked for ({e})");
                    return Ok(result(ToolOutput::error(req.refusal(&why))).into());
                }
                Err(_) => {
                    self.forget_approval(&agent, &req.key);
                    let why = format!("got no answer within {} s", timeout.as_secs());
                    return Ok(result(ToolOutput::error(req.refusal(&why))).into());
                }
            };
            if let Some(why) = self.take_answer(&agent, &req.key, answer) {
                return Ok(result(ToolOutput::error(req.refusal(&why))).into());
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let config = &self.inner.config;
        let can_ask = context
            .peer
            .peer_info()
            .is_some_and(|i| i.capabilities.elicitation.is_some());
        if config.confirm_network && can_ask {
            crate::netproxy::set_asker(Some(network_asker(
                context.peer.clone(),
                config.approval_timeout,
            )));
            // With no host listed, programs now go through the proxy: the
            // worker made ahead for no network is made anew with the route.
            if config.sandbox && !config.sandbox_network && config.network_hosts.is_none() {
                self.prestart_shell();
            }
        }
        self.fetch_roots(context.peer);
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        self.fetch_roots(context.peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_become_paths() {
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

    #[test]
    fn tool_names_are_client_safe_and_annotated() {
        let config = match Config::from_env() {
            Ok(c) => c,
            Err(e) => panic!("config: {e}"),
        };
        for t in NibServer::tool_list(&config) {
            assert!(
                t.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
            let a = t.annotations.as_ref().map(|a| a.read_only_hint);
            assert!(a.is_some());
        }
    }
}
