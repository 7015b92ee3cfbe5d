//! rmcp's entry points: the server's info and capabilities, the tool list
//! (providers' included), a call in either era (roots and approvals asked
//! on the way), and the notifications after the handshake. The work is
//! the other rooms': `asking`, `calls`, `roots` and `session`.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitResult, Implementation,
    InputRequest, InputRequests, InputRequiredResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use nib_files::context::ToolOutput;

use super::asking::{
    APPROVE_INPUT, APPROVE_STATE, MAX_APPROVALS_PER_CALL, NETWORK_STATE, approval_params,
    network_asker,
};
use super::calls::result;
use super::session::CHANNEL;
use super::state::{HttpAgent, NibServer};

/// How long a tool list waits for providers that are still starting.
const PROVIDER_SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

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
