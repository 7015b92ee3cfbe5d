//! One running provider: its program started in the sandbox nibash programs
//! run in (stdin and stdout are the MCP channel, stderr goes to a log and a
//! short tail), an MCP client session over those pipes (rmcp's, in the
//! handshake era every server speaks), its tools, and how it ended.
//!
//! What it does not decide: when to restart, what a call's answer becomes
//! (both [`super`]'s).
//!
//! rmcp marks roots deprecated (SEP-2577); providers written for today's
//! clients still ask for them, so nib answers with the roots it confines
//! them to, and this module allows the deprecation.
#![allow(deprecated)]

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ListRootsResult, ProgressNotificationParam,
    ProgressToken, Root, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};
use tokio::io::{AsyncRead, ReadBuf};

use nib_files::fs::Scope;

use super::spec::ProviderSpec;
use crate::nibash::call::watch::{Service, watch_service};

/// The longest line nib reads from a provider (a bigger message is dropped).
pub const MAX_MESSAGE_BYTES: usize = 8 << 20;
/// A provider may take this long to start even when calls are bounded
/// more tightly (interpreters and package runners start slowly).
pub const START_AT_LEAST: std::time::Duration = std::time::Duration::from_secs(20);
/// Lines of stderr kept for error messages.
const STDERR_TAIL: usize = 20;
/// Bytes of stderr written to the provider's log.
const STDERR_LOG_CAP: u64 = 1 << 20;

/// Forwards a provider's progress to nib's client: (progress, total, message).
pub type ProgressFn = Box<dyn Fn(f64, Option<f64>, Option<String>) + Send + Sync>;

/// What the provider's side of the session calls back into nib for.
pub struct Hooks {
    /// Progress of calls in flight, by the token nib sent the provider.
    pub progress: Mutex<HashMap<ProgressToken, ProgressFn>>,
    /// The provider said its tools changed.
    pub tools_changed: Box<dyn Fn() + Send + Sync>,
    /// The roots the provider may ask for (those it was started with).
    pub roots: Vec<PathBuf>,
}

/// nib as the provider's MCP client.
#[derive(Clone)]
pub struct Handler(pub Arc<Hooks>);

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_roots().build(),
            Implementation::new("nib", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(
            self.0
                .roots
                .iter()
                .map(|p| Root::new(format!("file://{}", percent_path(p))))
                .collect(),
        ))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let map = self.0.progress.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = map.get(&params.progress_token) {
            f(params.progress, params.total, params.message.clone());
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.0.tools_changed)();
    }
}

/// A path as the path part of a `file://` URI.
fn percent_path(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in p.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What the provider wrote to stderr: the last lines, and its log.
#[derive(Default)]
pub struct StderrTail {
    lines: Mutex<VecDeque<String>>,
}

impl StderrTail {
    /// The last line, for one-line error messages.
    pub fn last(&self) -> Option<String> {
        self.lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .back()
            .cloned()
    }

    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == STDERR_TAIL {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

/// Reads a provider's stderr on a thread: lines into `tail` (each cut to
/// 300 characters), bytes into `log` up to its cap.
fn drain_stderr(stderr: std::process::ChildStderr, tail: Arc<StderrTail>, log: Option<PathBuf>) {
    let _ = std::thread::Builder::new()
        .name("nib-provider-stderr".into())
        .spawn(move || {
            let mut file = log.and_then(|p| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .ok()
            });
            let mut written = 0u64;
            let mut reader = std::io::BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Some(f) = file.as_mut()
                            && written < STDERR_LOG_CAP
                        {
                            let _ = f.write_all(&buf);
                            written += n as u64;
                        }
                        let line = String::from_utf8_lossy(&buf);
                        let line = line.trim_end();
                        if !line.is_empty() {
                            tail.push(line.chars().take(300).collect());
                        }
                    }
                }
            }
        });
}

/// Lines on the provider's stdout that are not JSON-RPC messages: counted,
/// the first kept (rmcp skips them; nib names them when a call fails).
#[derive(Default)]
pub struct Junk {
    count: AtomicUsize,
    first: Mutex<Option<String>>,
}

impl Junk {
    /// How many lines, and the first.
    pub fn seen(&self) -> Option<(usize, String)> {
        let n = self.count.load(Ordering::Relaxed);
        let first = self.first.lock().unwrap_or_else(|p| p.into_inner()).clone();
        (n > 0).then(|| (n, first.unwrap_or_default()))
    }
}

/// stdout as rmcp reads it, watching each line's first bytes for [`Junk`].
struct Watched<R> {
    inner: R,
    junk: Arc<Junk>,
    at_line_start: bool,
    current: Option<Vec<u8>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let new = buf.filled()[before..].to_vec();
            for b in new {
                self.watch(b);
            }
        }
        polled
    }
}

impl<R> Watched<R> {
    fn watch(&mut self, b: u8) {
        if b == b'\n' {
            if let Some(line) = self.current.take() {
                self.junk.count.fetch_add(1, Ordering::Relaxed);
                let mut first = self.junk.first.lock().unwrap_or_else(|p| p.into_inner());
                if first.is_none() {
                    *first = Some(String::from_utf8_lossy(&line).chars().take(80).collect());
                }
            }
            self.at_line_start = true;
            return;
        }
        if self.at_line_start && !b.is_ascii_whitespace() {
            self.at_line_start = false;
            if b != b'{' && b != b'[' {
                self.current = Some(Vec::new());
            }
        }
        if let Some(line) = self.current.as_mut()
            && line.len() < 200
        {
            line.push(b);
        }
    }
}

/// How the provider's process ended, once it has.
#[derive(Default)]
pub struct Ending {
    ended: AtomicBool,
    how: Mutex<Option<String>>,
    /// Held while killing, so a kill never meets a reaped (reused) pid.
    guard: Mutex<()>,
}

impl Ending {
    /// "exit status 3", "killed by signal 9", once it ended.
    pub fn how(&self) -> Option<String> {
        self.how.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A started provider.
pub struct Session {
    /// The MCP session with it.
    pub service: RunningService<RoleClient, Handler>,
    /// Its tools, as it lists them (again when it says they changed).
    pub tools: Mutex<Vec<Tool>>,
    /// Its stderr.
    pub stderr: Arc<StderrTail>,
    /// Its non-protocol stdout lines.
    pub junk: Arc<Junk>,
    /// Its end.
    pub ending: Arc<Ending>,
    /// The roots it was started with.
    pub roots: Vec<PathBuf>,
    /// What the session calls back into.
    pub hooks: Arc<Hooks>,
    /// What it plants in the roots is looked at while it runs (under the
    /// sandbox), and swept after each of its calls.
    pub watch: Arc<Service>,
    killer: nib_sandbox::Killer,
}

impl Session {
    /// Ends the provider's whole tree (no-op once it ended).
    pub fn kill(&self) {
        let _held = self.ending.guard.lock().unwrap_or_else(|p| p.into_inner());
        if !self.ending.ended.load(Ordering::SeqCst) {
            self.killer.kill();
        }
    }

    /// Whether its process ended or its channel closed.
    pub fn gone(&self) -> bool {
        self.ending.ended.load(Ordering::SeqCst) || self.service.is_closed()
    }
}

/// Everything [`start`] needs.
pub struct StartArgs<'a> {
    /// The provider.
    pub spec: &'a ProviderSpec,
    /// The sandbox nibash programs run in for these roots.
    pub sandbox: nib_sandbox::Sandbox,
    /// Its working directory (the project).
    pub cwd: &'a Path,
    /// The roots it sees.
    pub roots: Vec<PathBuf>,
    /// Where its stderr is logged.
    pub log: Option<PathBuf>,
    /// The bound on starting (spawn, handshake, tool list): the call
    /// timeout, and at least [`START_AT_LEAST`].
    pub timeout: std::time::Duration,
    /// The provider said its tools changed.
    pub tools_changed: Box<dyn Fn() + Send + Sync>,
    /// Called once from a thread when the process has ended.
    pub on_exit: Box<dyn FnOnce() + Send>,
    /// The roots as the file tools hold them: under the sandbox, what the
    /// provider plants there is looked at from before it starts.
    pub scope: Scope,
}

/// Starts the provider and opens its session; the error says why not.
pub async fn start(args: StartArgs<'_>) -> Result<Session, String> {
    let StartArgs {
        spec,
        sandbox,
        cwd,
        roots,
        log,
        timeout,
        tools_changed,
        on_exit,
        scope,
    } = args;
    let timeout = timeout.max(START_AT_LEAST);
    let program: Vec<OsString> = spec.command.iter().map(OsString::from).collect();
    let env: Vec<(OsString, OsString)> = spec
        .env
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
    let cwd_owned = cwd.to_path_buf();
    let name = format!("provider {}", spec.name);
    let (watch, started) = tokio::task::spawn_blocking(move || {
        // Looked at from before it starts: nothing it makes is older.
        let watch = watch_service(&name, &scope, &sandbox.policy().protected);
        (watch, sandbox.spawn_service(&program, &cwd_owned, &env))
    })
    .await
    .map_err(|e| format!("the start was interrupted: {e}"))?;
    let (mut worker, pipes) = started.map_err(|e| e.to_string())?;
    let stderr = Arc::new(StderrTail::default());
    drain_stderr(pipes.stderr, Arc::clone(&stderr), log);
    let killer = worker.killer();
    let ending = Arc::new(Ending::default());
    {
        let ending = Arc::clone(&ending);
        let watch = Arc::clone(&watch);
        let _ = std::thread::Builder::new()
            .name("nib-provider-wait".into())
            .spawn(move || {
                worker.wait_exited();
                // What it planted before it ended (a failed start
                // included): taken out, and said in nib's log.
                let _ = watch.sweep_now();
                {
                    let _held = ending.guard.lock().unwrap_or_else(|p| p.into_inner());
                    ending.ended.store(true, Ordering::SeqCst);
                }
                let status = worker.wait_blocking();
                *ending.how.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(describe_status(status));
                on_exit();
            });
    }
    let fail = |why: String| {
        let _held = ending.guard.lock().unwrap_or_else(|p| p.into_inner());
        if !ending.ended.load(Ordering::SeqCst) {
            killer.kill();
        }
        why
    };
    let stdin = tokio::net::unix::pipe::Sender::from_owned_fd(pipes.stdin.into())
        .map_err(|e| fail(format!("its stdin cannot be used: {e}")))?;
    let stdout = tokio::net::unix::pipe::Receiver::from_owned_fd(pipes.stdout.into())
        .map_err(|e| fail(format!("its stdout cannot be used: {e}")))?;
    let junk = Arc::new(Junk::default());
    let reader = Watched {
        inner: stdout,
        junk: Arc::clone(&junk),
        at_line_start: true,
        current: None,
    };
    let transport =
        AsyncRwTransport::new_client(reader, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
    let hooks = Arc::new(Hooks {
        progress: Mutex::default(),
        tools_changed,
        roots: roots.clone(),
    });
    let handler = Handler(Arc::clone(&hooks));
    let opened = tokio::time::timeout(
        timeout,
        handler.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize),
    )
    .await;
    let service = match opened {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            // Let the waiter see an exit that caused this.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            return Err(fail(format!(
                "the MCP handshake failed ({e}){}",
                ended_words(&ending, &stderr)
            )));
        }
        Err(_) => {
            return Err(fail(format!(
                "no MCP handshake within {} s{}",
                timeout.as_secs(),
                junk_words(&junk)
            )));
        }
    };
    let tools = match tokio::time::timeout(timeout, service.peer().list_all_tools()).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return Err(fail(format!("tools/list failed ({e})"))),
        Err(_) => {
            return Err(fail(format!(
                "no answer to tools/list within {} s",
                timeout.as_secs()
            )));
        }
    };
    Ok(Session {
        service,
        tools: Mutex::new(tools),
        stderr,
        junk,
        ending,
        roots,
        hooks,
        watch,
        killer,
    })
}

/// " (it ended: exit status 3; its last stderr line: "…")", or nothing.
pub fn ended_words(ending: &Ending, stderr: &StderrTail) -> String {
    let mut parts = Vec::new();
    if let Some(how) = ending.how() {
        parts.push(format!("it ended: {how}"));
    }
    if let Some(line) = stderr.last() {
        parts.push(format!("its last stderr line: {line:?}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join("; "))
    }
}

/// "; it wrote 3 lines that are not MCP to stdout (first: "…")", or nothing.
pub fn junk_words(junk: &Junk) -> String {
    match junk.seen() {
        Some((n, first)) => format!(
            "; it wrote {n} line{} that {} not MCP to stdout (first: {first:?})",
            if n == 1 { "" } else { "s" },
            if n == 1 { "is" } else { "are" }
        ),
        None => String::new(),
    }
}

fn describe_status(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (_, Some(sig)) => format!("killed by signal {sig}"),
            _ => "ended".into(),
        },
        None => "ended".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junk_lines_are_counted_and_the_first_kept() {
        let junk = Arc::new(Junk::default());
        let mut w = Watched {
            inner: (),
            junk: Arc::clone(&junk),
            at_line_start: true,
            current: None,
        };
        for b in b"{\"jsonrpc\":\"2.0\"}\nhello there\n  [1]\n\nnot json either\n" {
            w.watch(*b);
        }
        assert_eq!(junk.seen(), Some((2, "hello there".to_string())));
    }

    #[test]
    fn root_paths_become_file_uris() {
        assert_eq!(percent_path(Path::new("/a b/c%")), "/a%20b/c%25");
    }
}
