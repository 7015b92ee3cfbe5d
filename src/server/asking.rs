//! What is asked of the person: a write's approval and a host not on the
//! network list, by elicitation (the handshake era) or by `input_required`
//! with a sealed request state (the modern era); answers kept while asked,
//! and declined hosts remembered. Running the call is `calls`'; the
//! protocol around it is `handler`'s.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, InputRequest, InputRequests, InputRequiredResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer};

use nib_files::context::{ApprovalRequest, ToolOutput};
use nib_files::seen::Agent;

use super::calls::result;
use super::state::{NibServer, owner};

/// The key of the approval request in an `input_required` result.
pub(super) const APPROVE_INPUT: &str = "approve";
/// The request state of the retry after an approval request; the path follows.
pub(super) const APPROVE_STATE: &str = "nib-approve-v1:";

/// The state of a modern-era question about hosts a nibash call met.
pub(super) const NETWORK_STATE: &str = "nib-network-v1:";
/// Declined hosts remembered at most (past it, they may be asked again).
pub(super) const MAX_DECLINED_HOSTS: usize = 4096;
/// Writes in one call that may each ask for approval.
pub(super) const MAX_APPROVALS_PER_CALL: usize = 8;

/// The form a person answers: one yes/no.
pub(super) fn approval_params(req: &ApprovalRequest) -> Result<ElicitRequestParams, &'static str> {
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
pub(super) fn approves(answer: Option<&ElicitResult>) -> bool {
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
pub(super) fn rand_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    xxhash_rust::xxh3::xxh3_64(&t.to_le_bytes()) ^ u64::from(std::process::id())
}

/// The question for a host a program wants that is not on the list.
pub(super) fn network_params(host_port: &str) -> Result<ElicitRequestParams, &'static str> {
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
pub(super) fn network_asker(
    peer: Peer<RoleServer>,
    timeout: std::time::Duration,
) -> crate::netproxy::Asker {
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

impl NibServer {
    /// Applies a person's answer: `None` when the write may go ahead,
    /// else why it may not.
    pub(super) fn take_answer(
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
    pub(super) fn note_askable(&self, context: &RequestContext<RoleServer>) {
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
    pub(super) fn network_question(
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
    pub(super) fn network_answer(
        &self,
        id: &str,
        agent: &str,
        answer: Option<ElicitResult>,
    ) -> ToolOutput {
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

    pub(super) fn forget_approval(&self, agent: &Mutex<Agent>, key: &Path) {
        let mut agent = agent.lock().unwrap_or_else(|p| p.into_inner());
        agent.approvals.consume(key);
    }

    /// Seals `payload` as the request state of this call's
    /// `input_required` answer: bound to the agent ([`owner`]: the HTTP
    /// agent's NAME, or the stdio client) and to the call (`digest`).
    pub(super) fn seal(
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
    pub(super) fn open_state(
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

    pub(super) fn refused_write(&self, key: &Path, why: &str) -> CallToolResponse {
        let shown = nib_text::path_text::escape_control(&key.to_string_lossy());
        result(ToolOutput::error(format!(
            "{shown}: the write needs a person's approval, which {why}. Nothing was written.\n\
             hint: ask again to be prompted, or keep the change inside the roots\n"
        )))
        .into()
    }
}
