//! A call run: a tool of nib's on a blocking thread with the call's
//! context, or a provider's tool forwarded, and a tool's answer made a
//! CallToolResult. What is asked of the person on the way is `asking`'s;
//! the protocol around the call is `handler`'s.

use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use crate::broker_ctx::BrokerCtx;
use crate::tools::{self, CallError};
use nib_files::context::{Ctx, ToolOutput};
use nib_files::seen::Agent;

use super::state::{NibServer, owner};

impl NibServer {
    /// Runs a tool on a blocking thread with this call's scope.
    pub(super) async fn run_tool(
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
    pub(super) async fn provider_call(
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
    pub(super) async fn run_in_call(
        &self,
        agent: Arc<Mutex<Agent>>,
        context: &RequestContext<RoleServer>,
        work: impl FnOnce(&BrokerCtx) -> Result<ToolOutput, CallError> + Send + 'static,
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
            let programs = crate::nibash::command_rules::JudgedPrograms(config);
            let ctx = BrokerCtx {
                files: Ctx {
                    workspace: &workspace,
                    agent: &agent,
                    settings: &this.inner.file_tools,
                    scope,
                    enforce_seen: true,
                    live: Some(live.as_ref()),
                    programs: &programs,
                    placing: None,
                },
                config,
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
            // Arguments the tool cannot use are the tool's error, as a
            // result the model reads (isError), not a protocol error.
            Err(CallError::Args(e)) => Ok(ToolOutput::error(format!(
                "{e}; nothing was read or written.\n\
                 hint: call the tool again with the arguments its input schema names (tools/list)\n"
            ))),
        }
    }
}

pub(super) fn result(out: ToolOutput) -> CallToolResult {
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
