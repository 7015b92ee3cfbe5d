//! A connection's server: built from the settings (its workspace, agents,
//! nibash, providers), its peer kept for notifications, the tool list, the
//! agent a request is from, and what the session saves. Running calls is
//! `calls`'; answering rmcp is `handler`'s.

use crate::confinement::Confinement;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rmcp::model::{Tool, ToolAnnotations};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};

use crate::agents::Agents;
use crate::tools;
use nib_files::seen::Agent;
use nib_files::workspace::Workspace;
use nib_settings::Config;

use super::state::{HttpAgent, Inner, NibServer};

/// Claude Code's channel: the capability a server declares and the
/// notification it sends.
pub(super) const CHANNEL: &str = "claude/channel";
pub(super) const CHANNEL_NOTIFICATION: &str = "notifications/claude/channel";

impl NibServer {
    /// Keeps the client for notifications outside a request, and whether it
    /// declared Claude Code's channel.
    pub(super) fn remember_peer(&self, context: &RequestContext<RoleServer>) {
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
    pub(super) fn keep_peer(&self, peer: &Peer<RoleServer>) {
        let mut slot = self.inner.peer.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(peer.clone());
        }
    }

    /// Starts the providers (once), seeing the roots known now.
    pub(super) fn start_providers(&self) {
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
            file_tools: config.file_tools(),
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
    pub(super) fn prestart_shell(&self) {
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

    pub(super) fn tool_list(config: &Config) -> Vec<Tool> {
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

    /// The agent behind a call (see [`crate::agents`]).
    /// How the agent of a call is named in nibash_status's usage table.
    pub(super) fn agent_label(&self, context: &RequestContext<RoleServer>) -> String {
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

    pub(super) fn agent_for(&self, context: &RequestContext<RoleServer>) -> Arc<Mutex<Agent>> {
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

    /// Saves what agents saw, at most every two seconds (and at exit), on
    /// a blocking thread: the call that found the time come answers
    /// without waiting for every agent's file to be written.
    pub(super) fn save_soon(&self) {
        {
            let mut last = self
                .inner
                .last_save
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if last.elapsed() < std::time::Duration::from_secs(2) {
                return;
            }
            *last = std::time::Instant::now();
        }
        let server = self.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || server.save())),
            Err(_) => server.save(),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn tool_names_are_client_safe_and_annotated() {
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
