//! Providers: other MCP servers whose tools nib offers as its own, each run
//! like a nibash program — in the sandbox of the roots, confined under
//! `NIB_SANDBOX=1` (only with `NIB_PROVIDERS_SANDBOX=1`), with nib.json's
//! program rules held at exec time.
//!
//! [`spec`] says which to start, [`session`] runs one (process, MCP client,
//! stderr), [`locations`] turns an answer's locations into anchored rows.
//! This module is the table: starting them once the roots are known, their
//! tools as `NAME_TOOL`, calls (timeout, cancellation, progress), one
//! restart after a crash, the status lines. The server owns MCP towards
//! the client and tells it when the tool list changed.

pub mod locations;
pub mod session;
pub mod spec;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    ServerResult, Tool,
};
use rmcp::service::PeerRequestOptions;

use nib_settings::Config;
use session::{ProgressFn, Session};
use spec::ProviderSpec;

/// Where a provider is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Not started, and why.
    Off(String),
    /// Starting (or restarting).
    Starting,
    /// Running; its tools are offered.
    Running,
    /// Stopped for good, and why.
    Failed(String),
}

struct Entry {
    spec: ProviderSpec,
    state: State,
    session: Option<Arc<Session>>,
    /// Restarts after a crash so far (at most one).
    restarts: u32,
    /// Why it was restarted, for the status.
    restarted_because: Option<String>,
    /// Bumped whenever nib replaces or stops the session on purpose, so
    /// the old process's end is not taken for a crash.
    generation: u64,
}

/// Called when the tools nib offers change.
pub type Changed = Arc<dyn Fn() + Send + Sync>;

/// The providers of one server.
pub struct Providers {
    config: Config,
    entries: Mutex<Vec<Entry>>,
    /// Notes from reading the sources, for the status.
    notes: Vec<String>,
    started: AtomicBool,
    settled: tokio::sync::Notify,
    changed: Mutex<Option<Changed>>,
    runtime: tokio::runtime::Handle,
}

/// A call's failure, worded for the agent.
pub type CallFailure = String;

impl Providers {
    /// The providers the configuration names; none runs yet ([`Providers::start`]).
    /// Must be made inside the tokio runtime.
    pub fn new(config: &Config) -> Option<Arc<Providers>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (specs, notes) = spec::collect(
            &config.cli_providers,
            &config.project_dir,
            &config.config_dir,
        );
        for n in &notes {
            tracing::warn!("providers: {n}");
        }
        let off = (config.sandbox && !config.providers_sandbox).then(|| {
            "left off: NIB_SANDBOX=1 runs providers only with NIB_PROVIDERS_SANDBOX=1".to_string()
        });
        if let Some(why) = &off
            && !specs.is_empty()
        {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            tracing::warn!("providers {}: {why}", names.join(", "));
        }
        let entries = specs
            .into_iter()
            .map(|spec| Entry {
                spec,
                state: off.clone().map_or(State::Starting, State::Off),
                session: None,
                restarts: 0,
                restarted_because: None,
                generation: 0,
            })
            .collect();
        Some(Arc::new(Providers {
            config: config.clone(),
            entries: Mutex::new(entries),
            notes,
            started: AtomicBool::new(false),
            settled: tokio::sync::Notify::new(),
            changed: Mutex::new(None),
            runtime,
        }))
    }

    /// Whether any provider is configured (the server then says its tool
    /// list may change).
    pub fn any(&self) -> bool {
        !self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells `f` whenever the tools nib offers change.
    pub fn on_change(&self, f: Changed) {
        *self.changed.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
    }

    fn announce(&self) {
        let f = self
            .changed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(f) = f {
            f();
        }
    }

    /// Starts every provider that is not off, once, seeing `roots`.
    pub fn start(self: &Arc<Self>, roots: Vec<PathBuf>) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let count = self.lock().len();
        for i in 0..count {
            if self.lock()[i].state == State::Starting {
                let this = Arc::clone(self);
                let roots = roots.clone();
                self.runtime
                    .spawn(async move { this.start_one(i, roots).await });
            }
        }
    }

    /// Waits until no provider is starting, at most `bound`.
    pub async fn settle(&self, bound: Duration) {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let notified = self.settled.notified();
            let starting = self.lock().iter().any(|e| e.state == State::Starting);
            if !starting || !self.started.load(Ordering::SeqCst) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// Starts provider `i` (boxed: a restart after a crash starts it again
    /// from inside the task that noticed).
    fn start_one(
        self: Arc<Self>,
        i: usize,
        roots: Vec<PathBuf>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move { self.start_one_now(i, roots).await })
    }

    async fn start_one_now(self: Arc<Self>, i: usize, roots: Vec<PathBuf>) {
        let (spec, generation) = {
            let mut entries = self.lock();
            let e = &mut entries[i];
            e.state = State::Starting;
            (e.spec.clone(), e.generation)
        };
        let started = match self.sandbox(&roots) {
            Ok(sandbox) => {
                let log = provider_log(&self.config, &spec.name);
                let scope = self.watch_scope(&roots);
                let weak = Arc::downgrade(&self);
                let changed_weak = Arc::downgrade(&self);
                session::start(session::StartArgs {
                    spec: &spec,
                    sandbox,
                    cwd: &self.config.project_dir,
                    roots: roots.clone(),
                    log,
                    timeout: self.config.provider_timeout,
                    tools_changed: Box::new(move || {
                        if let Some(this) = changed_weak.upgrade() {
                            let rt = this.runtime.clone();
                            rt.spawn(async move { this.relist(i).await });
                        }
                    }),
                    on_exit: Box::new(move || {
                        if let Some(this) = weak.upgrade() {
                            let rt = this.runtime.clone();
                            rt.spawn(async move { this.exited(i, generation, roots).await });
                        }
                    }),
                    scope,
                })
                .await
            }
            Err(e) => Err(e),
        };
        {
            let mut entries = self.lock();
            let e = &mut entries[i];
            if e.generation == generation {
                match started {
                    Ok(s) => {
                        e.state = State::Running;
                        e.session = Some(Arc::new(s));
                    }
                    Err(why) => {
                        tracing::warn!("provider {} did not start: {why}", spec.name);
                        e.state = State::Failed(format!("did not start: {why}"));
                        e.session = None;
                    }
                }
            } else if let Ok(s) = started {
                s.kill();
            }
        }
        self.settled.notify_waiters();
        self.announce();
    }

    /// The sandbox a provider runs in: nibash's for these roots, with
    /// nib.json's program rules at exec time (and their files masked).
    fn sandbox(&self, roots: &[PathBuf]) -> Result<nib_sandbox::Sandbox, String> {
        crate::nibash::command_rules::judged_sandbox(&self.config, roots)
    }

    /// The roots as the sweeps take them: under the sandbox, those that
    /// open (a provider is confined to the same ones), else none.
    fn watch_scope(&self, roots: &[PathBuf]) -> nib_files::fs::Scope {
        if !self.config.sandbox {
            return nib_files::fs::Scope::Open;
        }
        let open: Vec<nib_files::fs::Root> = roots
            .iter()
            .filter_map(|r| nib_files::fs::Root::open(r).ok())
            .collect();
        nib_files::fs::Scope::Sandbox(open.into())
    }

    /// The provider's process ended: restart it once, then stop.
    async fn exited(self: Arc<Self>, i: usize, generation: u64, roots: Vec<PathBuf>) {
        let restart = {
            let mut entries = self.lock();
            let e = &mut entries[i];
            if e.generation != generation || e.state != State::Running {
                return;
            }
            let why = e
                .session
                .as_ref()
                .map(|s| session::ended_words(&s.ending, &s.stderr))
                .unwrap_or_default();
            let why = why.trim_start_matches("; ").to_string();
            tracing::warn!("provider {} ended ({why})", e.spec.name);
            e.session = None;
            e.generation += 1;
            if e.restarts == 0 {
                e.restarts = 1;
                e.restarted_because = Some(why);
                e.state = State::Starting;
                true
            } else {
                e.state = State::Failed(format!(
                    "ended again after a restart ({why}); not restarted again"
                ));
                false
            }
        };
        self.announce();
        if restart {
            self.start_one(i, roots).await;
        }
    }

    /// The provider said its tools changed: list them again.
    async fn relist(self: Arc<Self>, i: usize) {
        let session = self.lock()[i].session.clone();
        let Some(session) = session else { return };
        let listed = tokio::time::timeout(
            self.config.provider_timeout,
            session.service.peer().list_all_tools(),
        )
        .await;
        if let Ok(Ok(tools)) = listed {
            *session.tools.lock().unwrap_or_else(|p| p.into_inner()) = tools;
            self.announce();
        }
    }

    /// The tools nib offers for its providers: `NAME_TOOL`, the provider's
    /// schema and annotations, its description after `[NAME]`.
    pub fn tools(&self) -> Vec<Tool> {
        let entries = self.lock();
        let mut out = Vec::new();
        for e in entries.iter() {
            let Some(s) = &e.session else { continue };
            for t in s.tools.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                let mut t = t.clone();
                t.name = format!("{}_{}", e.spec.name, t.name).into();
                // nib answers with text (locations as rows), never with the
                // provider's structured content, so no output schema holds.
                t.output_schema = None;
                t.description = Some(
                    format!(
                        "[{} provider] {}",
                        e.spec.name,
                        t.description.as_deref().unwrap_or("")
                    )
                    .trim_end()
                    .to_string()
                    .into(),
                );
                out.push(t);
            }
        }
        out
    }

    /// The provider and its tool for an offered name, when it is one.
    pub fn owner(&self, full: &str) -> Option<(String, String)> {
        let (name, tool) = full.split_once('_')?;
        self.lock()
            .iter()
            .any(|e| e.spec.name == name)
            .then(|| (name.to_string(), tool.to_string()))
    }

    /// Calls `tool` of provider `name`: bounded by the provider timeout and
    /// `cancel`, with progress passed to `progress`. Restarts the provider
    /// first when the roots changed since it started.
    pub async fn call(
        self: &Arc<Self>,
        name: &str,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        roots: Vec<PathBuf>,
        progress: Option<ProgressFn>,
        cancel: impl std::future::Future<Output = ()>,
    ) -> Result<rmcp::model::CallToolResult, CallFailure> {
        let full = format!("{name}_{tool}");
        let i = self
            .lock()
            .iter()
            .position(|e| e.spec.name == name)
            .ok_or_else(|| format!("{full}: no provider is named {name}; nothing was run"))?;
        self.settle(self.config.provider_timeout).await;
        let session = self.session_for(i, &roots).await.map_err(|why| {
            format!(
                "{full}: provider {name} is not running ({why}); nothing was run.\n\
                 hint: nibash_status lists the providers; fix the provider's program, then restart nib"
            )
        })?;
        let outcome = self
            .call_on(&session, name, tool, arguments, progress, cancel)
            .await;
        // What the provider planted in the roots is taken out before its
        // answer, as after a nibash call, and said with it.
        let watch = Arc::clone(&session.watch);
        let taken = tokio::task::spawn_blocking(move || watch.sweep_now())
            .await
            .unwrap_or_default();
        if taken.is_empty() {
            return outcome;
        }
        let said = taken.join("\n");
        match outcome {
            Ok(mut r) => {
                r.content.push(rmcp::model::ContentBlock::text(said));
                Ok(r)
            }
            Err(text) => Err(format!("{}\n{said}", text.trim_end())),
        }
    }

    /// [`Providers::call`] once the session is known.
    async fn call_on(
        &self,
        session: &Arc<Session>,
        name: &str,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        progress: Option<ProgressFn>,
        cancel: impl std::future::Future<Output = ()>,
    ) -> Result<rmcp::model::CallToolResult, CallFailure> {
        let full = &format!("{name}_{tool}");
        let known = session
            .tools
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|t| t.name == tool);
        if !known {
            return Err(format!(
                "{full}: provider {name} offers no tool {tool:?} (its tools changed?); nothing was run.\n\
                 hint: list the tools again"
            ));
        }
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Some(a) = arguments {
            params = params.with_arguments(a);
        }
        let peer = session.service.peer().clone();
        let handle = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                PeerRequestOptions::no_options(),
            )
            .await
            .map_err(|e| e.to_string());
        let handle = match handle {
            Ok(h) => h,
            Err(e) => return Err(self.lost(full, name, session, &e).await),
        };
        let id = handle.id.clone();
        let token = handle.progress_token.clone();
        if let Some(p) = progress {
            session
                .hooks
                .progress
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(token.clone(), p);
        }
        let timeout = self.config.provider_timeout;
        tokio::pin!(cancel);
        let outcome = tokio::select! {
            r = handle.await_response() => Some(r),
            _ = tokio::time::sleep(timeout) => None,
            _ = &mut cancel => {
                let _ = peer.notify_cancelled(CancelledNotificationParam::new(Some(id.clone()), Some("cancelled by nib's client".into()))).await;
                session.hooks.progress.lock().unwrap_or_else(|p| p.into_inner()).remove(&token);
                return Err(format!("{full}: the call was cancelled; nib wrote nothing\n"));
            }
        };
        session
            .hooks
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&token);
        match outcome {
            None => {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("no answer within nib's timeout".into()),
                    ))
                    .await;
                Err(format!(
                    "{full}: provider {name} gave no answer within {} s{}; the request was cancelled and nib wrote nothing.\n\
                     hint: try a smaller request, or raise NIB_PROVIDER_TIMEOUT_MS",
                    timeout.as_secs(),
                    session::junk_words(&session.junk)
                ))
            }
            Some(Ok(ServerResult::CallToolResult(r))) => Ok(r),
            Some(Ok(other)) => Err(format!(
                "{full}: provider {name} answered with something that is not a tool result ({}); nib wrote nothing.\n\
                 hint: the provider is at fault; report it to its author",
                short_json(&other)
            )),
            Some(Err(rmcp::ServiceError::McpError(e))) => Err(format!(
                "{full}: provider {name} refused the call: {} (code {}); nib wrote nothing.\n\
                 hint: check the arguments against the tool's schema",
                e.message, e.code.0
            )),
            Some(Err(e)) => Err(self.lost(full, name, session, &e.to_string()).await),
        }
    }

    /// Words for a call whose session broke; waits a moment so the end of
    /// the process (and its restart) are known.
    async fn lost(&self, full: &str, name: &str, session: &Session, error: &str) -> String {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let state = self
            .lock()
            .iter()
            .find(|e| e.spec.name == name)
            .map(|e| e.state.clone());
        let next = match state {
            Some(State::Starting | State::Running) => "it is being restarted; run the call again",
            _ => "it is stopped; nibash_status says why",
        };
        format!(
            "{full}: provider {name} broke off the call ({error}{}{}); nib wrote nothing.\n\
             hint: {next}",
            session::ended_words(&session.ending, &session.stderr),
            session::junk_words(&session.junk),
        )
    }

    /// The running session of provider `i`, restarted first when the roots
    /// changed since it started; else why there is none.
    async fn session_for(
        self: &Arc<Self>,
        i: usize,
        roots: &[PathBuf],
    ) -> Result<Arc<Session>, String> {
        let (state, session) = {
            let e = &self.lock()[i];
            (e.state.clone(), e.session.clone())
        };
        match (state, session) {
            (State::Running, Some(s)) if s.roots == roots => Ok(s),
            (State::Running, Some(s)) => {
                {
                    let mut entries = self.lock();
                    entries[i].generation += 1;
                    entries[i].session = None;
                    entries[i].state = State::Starting;
                }
                s.kill();
                Arc::clone(self).start_one(i, roots.to_vec()).await;
                let e = &self.lock()[i];
                e.session.clone().ok_or_else(|| state_words(&e.state))
            }
            (state, _) => Err(state_words(&state)),
        }
    }

    /// One line per provider for nibash_status, and the notes from reading
    /// the sources.
    pub fn describe(&self) -> String {
        let entries = self.lock();
        if entries.is_empty() && self.notes.is_empty() {
            return String::new();
        }
        let mut out = String::new();
        for e in entries.iter() {
            let tools = e.session.as_ref().map_or(0, |s| {
                s.tools.lock().unwrap_or_else(|p| p.into_inner()).len()
            });
            let state = match &e.state {
                State::Running => match &e.restarted_because {
                    Some(why) => {
                        format!("running, restarted once (it had ended: {why}), {tools} tools")
                    }
                    None => format!("running, {tools} tools"),
                },
                other => state_words(other),
            };
            out.push_str(&format!(
                "provider {} ({}: {}): {state}\n",
                e.spec.name,
                e.spec.source.label(),
                e.spec.command.join(" ")
            ));
        }
        for n in &self.notes {
            out.push_str(&format!("provider note: {n}\n"));
        }
        out
    }

    /// Ends every provider (nib is exiting).
    pub fn stop(&self) {
        let mut entries = self.lock();
        for e in entries.iter_mut() {
            e.generation += 1;
            if let Some(s) = e.session.take() {
                s.kill();
            }
        }
    }
}

fn state_words(state: &State) -> String {
    match state {
        State::Off(why) => format!("off, {why}"),
        State::Starting => "starting".into(),
        State::Running => "running".into(),
        State::Failed(why) => format!("stopped: {why}"),
    }
}

/// The provider's stderr log: `providers/NAME.log` in the state folder.
fn provider_log(config: &Config, name: &str) -> Option<PathBuf> {
    let dir = config.state_dir.join("providers");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join(format!("{name}.log")))
}

/// A value as short JSON (200 characters at most).
fn short_json(v: &impl serde::Serialize) -> String {
    let s = serde_json::to_string(v).unwrap_or_default();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}
