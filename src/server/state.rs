//! The server's state: [`NibServer`] and the fields its rooms share, and
//! the agent a request comes from. What is done with them is the other
//! rooms' (`session`, `roots`, `calls`, `asking`, `handler`).

use std::sync::{Arc, Mutex};

use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};

use crate::agents::Agents;
use nib_files::context::ToolOutput;
use nib_files::workspace::Workspace;
use nib_settings::Config;

/// The HTTP agent (the token's NAME) a request comes from: `serve_http`
/// puts it in the request context's extensions, where nothing a client
/// sends can reach. A request without it is the stdio client's.
#[derive(Clone, Debug)]
pub struct HttpAgent(pub Arc<str>);

/// Whose jobs a call reaches (see [`crate::nibash::jobs::Owner`]):
/// the HTTP agent's NAME, or empty for the stdio client, which is one agent.
pub(super) fn owner(context: &RequestContext<RoleServer>) -> crate::nibash::jobs::Owner {
    context
        .extensions
        .get::<HttpAgent>()
        .map_or_else(|| Arc::from(""), |a| Arc::clone(&a.0))
}

/// One connection's server: its workspace and what its agent has seen.
#[derive(Clone)]
pub struct NibServer {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) config: Config,
    /// What the file tools read of `config`, made once.
    pub(super) file_tools: nib_settings::FileTools,
    pub(super) workspace: Workspace,
    pub(super) agents: Agents,
    pub(super) last_save: Mutex<std::time::Instant>,
    pub(super) nibash: Arc<crate::nibash::Nibash>,
    /// The client, for notifications sent outside a request (job ends).
    pub(super) peer: Mutex<Option<Peer<RoleServer>>>,
    /// The client declared Claude Code's channel (`experimental["claude/channel"]`).
    pub(super) channel_client: std::sync::atomic::AtomicBool,
    /// This session, for counting the sessions a name was used in.
    pub(super) session: String,
    /// Modern era, NIB_CONFIRM_NETWORK: answers of nibash calls that met
    /// unlisted hosts, kept while the user is asked about those hosts
    /// (by id: the answer and the `host:port`s).
    pub(super) network_asks: Mutex<std::collections::HashMap<String, (ToolOutput, Vec<String>)>>,
    /// Hosts an agent's person declined (agent label, `host:port`): not
    /// put to them again, so a program cannot ask on every call.
    pub(super) network_declined: Mutex<std::collections::HashSet<(String, String)>>,
    /// Other MCP servers whose tools nib offers (`None` outside a runtime).
    pub(super) providers: Option<Arc<crate::providers::Providers>>,
    /// Seals the request states of `input_required` answers (`None`: the
    /// system gave no randomness; then nothing is asked that way).
    pub(super) sealer: Option<crate::request_state::Sealer>,
}
