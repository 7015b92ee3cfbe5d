//! The harness: start `nib` in a temp project, speak MCP to it, read results.
#![allow(dead_code, deprecated)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ListRootsResult, ProtocolVersion, Root,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};
use serde_json::Value;

/// The two protocol eras nib must serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` (2025-11-25).
    Handshake,
    /// `server/discover` with per-request metadata (2026-07-28).
    Modern,
}

pub const ERAS: [Era; 2] = [Era::Handshake, Era::Modern];

/// How the test client treats roots.
#[derive(Clone, Debug)]
pub enum Roots {
    /// The capability is not declared.
    Undeclared,
    /// Declared, answered with these URIs.
    Answer(Vec<String>),
    /// Declared, never answered.
    Hang,
}

/// How the test client answers elicitation (approval) requests.
#[derive(Clone)]
pub enum Elicit {
    /// The capability is not declared.
    Undeclared,
    /// Approve (after running the hook, if any: a test's race).
    Accept(Option<Arc<dyn Fn() + Send + Sync>>),
    /// Decline.
    Decline,
    /// Cancel.
    Cancel,
    /// Never answer.
    Hang,
}

#[derive(Clone)]
pub struct TestClient {
    pub roots: Roots,
    pub roots_calls: Arc<AtomicUsize>,
    pub elicit: Elicit,
    /// The messages of every elicitation received.
    pub asked: Arc<std::sync::Mutex<Vec<String>>>,
    /// The messages of every progress notification received.
    pub progress: Arc<std::sync::Mutex<Vec<String>>>,
    /// Declare Claude Code's channel (`experimental["claude/channel"]`).
    pub channel: bool,
    /// Every custom notification received: method and params as text.
    pub custom: Arc<std::sync::Mutex<Vec<String>>>,
    /// `notifications/tools/list_changed` received.
    pub tools_changed: Arc<AtomicUsize>,
}

impl TestClient {
    pub fn new(roots: Roots) -> TestClient {
        TestClient {
            roots,
            roots_calls: Arc::new(AtomicUsize::new(0)),
            elicit: Elicit::Undeclared,
            asked: Arc::default(),
            progress: Arc::default(),
            channel: false,
            custom: Arc::default(),
            tools_changed: Arc::default(),
        }
    }

    pub fn eliciting(elicit: Elicit) -> TestClient {
        TestClient {
            elicit,
            ..TestClient::new(Roots::Undeclared)
        }
    }

    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }

    pub fn roots_calls(&self) -> usize {
        self.roots_calls.load(Ordering::SeqCst)
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let mut caps = match self.roots {
            Roots::Undeclared => ClientCapabilities::default(),
            _ => ClientCapabilities::builder().enable_roots().build(),
        };
        if !matches!(self.elicit, Elicit::Undeclared) {
            caps.elicitation = ClientCapabilities::builder()
                .enable_elicitation()
                .build()
                .elicitation;
        }
        if self.channel {
            let mut experimental = rmcp::model::ExperimentalCapabilities::new();
            experimental.insert("claude/channel".into(), serde_json::Map::new());
            caps.experimental = Some(experimental);
        }
        ClientConfig::new(caps, Implementation::new("nib-tests", "0.0.0"))
    }

    async fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.custom.lock().unwrap().push(format!(
            "{} {}",
            notification.method,
            notification.params.unwrap_or_default()
        ));
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, ErrorData> {
        use rmcp::model::{ElicitResult, ElicitationAction};
        if let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().unwrap().push(message.clone());
        }
        match &self.elicit {
            Elicit::Accept(hook) => {
                if let Some(h) = hook {
                    h();
                }
                Ok(ElicitResult::new(ElicitationAction::Accept)
                    .with_content(serde_json::json!({"approve": true})))
            }
            Elicit::Decline => Ok(ElicitResult::new(ElicitationAction::Decline)),
            Elicit::Cancel => Ok(ElicitResult::new(ElicitationAction::Cancel)),
            Elicit::Hang => {
                std::future::pending::<()>().await;
                Err(ErrorData::internal_error("unreachable", None))
            }
            Elicit::Undeclared => Err(ErrorData::internal_error("no elicitation", None)),
        }
    }

    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.tools_changed.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.progress
            .lock()
            .unwrap()
            .push(params.message.unwrap_or_default());
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.roots_calls.fetch_add(1, Ordering::SeqCst);
        match &self.roots {
            Roots::Answer(uris) => Ok(ListRootsResult::new(
                uris.iter().map(|u| Root::new(u.clone())).collect(),
            )),
            Roots::Hang => {
                std::future::pending::<()>().await;
                Err(ErrorData::internal_error("unreachable", None))
            }
            Roots::Undeclared => Err(ErrorData::method_not_found::<
                rmcp::model::ListRootsRequestMethod,
            >()),
        }
    }
}

pub fn nib_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nib"))
}

/// A running server and its client.
pub struct Nib {
    pub client: RunningService<RoleClient, TestClient>,
    pub handler: TestClient,
    pub dir: PathBuf,
    /// The server's process id (to kill it mid-call).
    pub pid: Option<u32>,
    /// Where the server keeps its state and its trash (never the real home).
    pub home: tempfile::TempDir,
}

/// Environment that keeps a nib process's state and trash inside `home`,
/// unconfined unless a test asks for the sandbox (nib's own default is the
/// sandbox; `tests/sandbox_default.rs` checks that default itself). Its
/// temporary folder is `home/tmp` too: a server the harness kills cannot
/// remove its workers' private folders, and these go with the home, not
/// into the machine's `$TMPDIR`.
pub fn isolated_env(home: &Path) -> Vec<(String, String)> {
    let tmp = home.join("tmp");
    let _ = std::fs::create_dir_all(&tmp);
    vec![
        ("TMPDIR".into(), tmp.display().to_string()),
        ("NIB_SANDBOX".into(), "0".into()),
        (
            "NIB_STATE_DIR".into(),
            home.join("state").display().to_string(),
        ),
        (
            "XDG_DATA_HOME".into(),
            home.join("data").display().to_string(),
        ),
        (
            "XDG_CONFIG_HOME".into(),
            home.join("config").display().to_string(),
        ),
    ]
}

/// `nib` as a command whose state, data and config folders are the tests'
/// own (`target/tmp/nib-test-home`, shared by the processes of a run, so a
/// token one prints applies in the next), never the user's.
pub fn nib_command() -> std::process::Command {
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nib-test-home");
    let mut c = std::process::Command::new(nib_bin());
    for (k, v) in isolated_env(&home) {
        c.env(k, v);
    }
    c
}

/// Starts `nib` in `dir` as a client of the given era would.
pub async fn start_with(era: Era, dir: &Path, client: TestClient, env: &[(&str, &str)]) -> Nib {
    let home = tempfile::tempdir().expect("temp home");
    start_in_home(era, dir, client, env, home).await
}

/// Starts `nib` with its state and trash in a given `home` (to restart a server on the same state).
pub async fn start_in_home(
    era: Era,
    dir: &Path,
    client: TestClient,
    env: &[(&str, &str)],
    home: tempfile::TempDir,
) -> Nib {
    start_serving(era, dir, client, env, home, &[]).await
}

/// Starts `nib ARGS…` (`--provider NAME=PROGRAM`, say) with its state in `home`.
pub async fn start_serving(
    era: Era,
    dir: &Path,
    client: TestClient,
    env: &[(&str, &str)],
    home: tempfile::TempDir,
    args: &[&str],
) -> Nib {
    serve_command(era, dir, client, env, home, &[], args).await
}

/// Starts `nib` (with its state in a new home) where no cgroup can be made,
/// as for an ordinary user without a delegated cgroup: in a mount namespace
/// of its own whose `/sys/fs/cgroup` is an empty tmpfs (needs root and
/// util-linux's `unshare`, as CI has).
pub async fn start_without_cgroups(dir: &Path, env: &[(&str, &str)]) -> Nib {
    let home = tempfile::tempdir().expect("temp home");
    let wrapper = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount -t tmpfs none /sys/fs/cgroup && exec \"$0\"",
    ];
    let client = TestClient::new(Roots::Undeclared);
    serve_command(Era::Handshake, dir, client, env, home, &wrapper, &[]).await
}

/// Starts `WRAPPER… nib ARGS…` and speaks MCP to it.
async fn serve_command(
    era: Era,
    dir: &Path,
    client: TestClient,
    env: &[(&str, &str)],
    home: tempfile::TempDir,
    wrapper: &[&str],
    args: &[&str],
) -> Nib {
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = tokio::process::Command::new(first);
            c.args(rest).arg(nib_bin());
            c
        }
        None => tokio::process::Command::new(nib_bin()),
    };
    cmd.args(args)
        .current_dir(dir)
        .env_remove("NIB_DIRECTORY")
        .env("NIB_LOG", "warn")
        .kill_on_drop(true);
    for (k, v) in isolated_env(home.path()) {
        cmd.env(k, v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn nib");
    let pid = transport.id();
    let lifecycle = match era {
        Era::Handshake => ClientLifecycleMode::Initialize,
        Era::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    };
    let handler = client.clone();
    let running = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        client.serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .expect("nib answered the handshake in time")
    .expect("handshake succeeded");
    Nib {
        client: running,
        handler,
        dir: dir.to_path_buf(),
        pid,
        home,
    }
}

pub async fn start(era: Era, dir: &Path) -> Nib {
    start_with(era, dir, TestClient::new(Roots::Undeclared), &[]).await
}

impl Nib {
    /// Calls a tool; protocol errors are returned as Err.
    pub async fn try_call(&self, name: &str, args: Value) -> Result<CallToolResult, String> {
        let Value::Object(map) = args else {
            panic!("arguments must be an object");
        };
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(map);
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            self.client.call_tool(params),
        )
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())
    }

    /// Calls a tool that must answer with a result (error results included),
    /// without the session's one notice that the sandbox is off (the
    /// harness runs unconfined unless a test asks; `call_whole` keeps it).
    pub async fn call(&self, name: &str, args: Value) -> (String, bool) {
        let (text, is_error) = self.call_whole(name, args).await;
        (without_unconfined_notice(text), is_error)
    }

    /// [`Nib::call`] with the answer's text whole.
    pub async fn call_whole(&self, name: &str, args: Value) -> (String, bool) {
        let r = self
            .try_call(name, args)
            .await
            .unwrap_or_else(|e| panic!("{name} failed at the protocol level: {e}"));
        (text_of(&r), r.is_error.unwrap_or(false))
    }

    /// A successful call's text.
    pub async fn ok(&self, name: &str, args: Value) -> String {
        let (text, is_error) = self.call(name, args).await;
        assert!(!is_error, "{name} reported an error:\n{text}");
        text
    }

    /// A failed call's text.
    pub async fn err(&self, name: &str, args: Value) -> String {
        let (text, is_error) = self.call(name, args).await;
        assert!(is_error, "{name} should have failed but returned:\n{text}");
        text
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// The trash folder of this server's user.
    pub fn trash_files(&self) -> PathBuf {
        self.home.path().join("data/Trash/files")
    }

    /// The tag in the first `[PATH#TAG]` header of a text.
    pub fn tag_in(text: &str) -> String {
        header_tag(text)
    }

    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

/// A text without the line nib adds to a session's first nibash answer
/// under `NIB_SANDBOX=0` (checked by `tests/sandbox_default.rs`).
pub fn without_unconfined_notice(text: String) -> String {
    const NOTICE: &str = "[sandbox: off (NIB_SANDBOX=0)";
    if !text.contains(NOTICE) {
        return text;
    }
    text.split_inclusive('\n')
        .filter(|l| !l.starts_with(NOTICE))
        .collect()
}

pub fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

/// A fresh project directory.
pub fn project() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// The tag nib should print for these bytes, computed independently of nib's code
/// by the DESIGN.md rule.
pub fn expected_tag(bytes: &[u8]) -> String {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let trimmed: Vec<&str> = text
        .split('\n')
        .map(|l| l.trim_end_matches([' ', '\t']))
        .collect();
    let joined = trimmed.join("\n");
    format!(
        "{:04X}",
        xxhash_rust::xxh32::xxh32(joined.as_bytes(), 0) & 0xFFFF
    )
}

/// The tag of the first `[PATH#TAG]` header in a text.
pub fn header_tag(text: &str) -> String {
    let Some(start) = text.find('[') else {
        return String::new();
    };
    let rest = &text[start..];
    let Some(end) = rest.find(']') else {
        return String::new();
    };
    rest[..end]
        .rsplit_once('#')
        .map(|(_, t)| t.to_string())
        .unwrap_or_default()
}

/// nib used as a library, the way the server runs a tool call: a confined
/// scope over `project`, state in `state`, seen lines enforced.
pub struct Library {
    /// Leaked: the programs' sandbox borrows it for the test's life.
    pub config: &'static nib_settings::Config,
    pub file_tools: nib_settings::FileTools,
    pub programs: nib::nibash::command_rules::JudgedPrograms<'static>,
    pub workspace: nib_files::workspace::Workspace,
    pub agent: std::sync::Mutex<nib_files::seen::Agent>,
    pub nibash: std::sync::Arc<nib::nibash::Nibash>,
}

impl Library {
    pub fn new(project: &Path, state: &Path) -> Library {
        let config = nib_settings::Config {
            project_dir: std::fs::canonicalize(project).unwrap(),
            roots_timeout: std::time::Duration::from_secs(1),
            state_dir: state.to_path_buf(),
            failpoint: None,
            // Confined: every path goes through openat2 beneath the root.
            sandbox: true,
            confirm_outside_roots: false,
            approval_timeout: std::time::Duration::from_secs(1),
            sandbox_network: false,
            network_hosts: None,
            confirm_network: false,
            sandbox_bwrap: true,
            sandbox_bind: Vec::new(),
            sandbox_hide: Vec::new(),
            sandbox_env: Vec::new(),
            sandbox_secrets: None,
            sandbox_memory: None,
            shell: true,
            channel: false,
            warm: false,
            auto_names: false,
            providers_sandbox: false,
            provider_timeout: std::time::Duration::from_secs(5),
            cli_providers: Vec::new(),
            config_dir: state.join("config"),
            model: nib::llm::Settings::default(),
        };
        let config: &'static nib_settings::Config = Box::leak(Box::new(config));
        Library {
            workspace: nib_files::workspace::Workspace::new(config.project_dir.clone()),
            file_tools: config.file_tools(),
            programs: nib::nibash::command_rules::JudgedPrograms(config),
            config,
            agent: std::sync::Mutex::default(),
            nibash: Arc::default(),
        }
    }

    pub fn ctx(&self) -> nib_files::context::Ctx<'_> {
        nib_files::context::Ctx {
            workspace: &self.workspace,
            agent: &self.agent,
            settings: &self.file_tools,
            scope: self.workspace.scope(true, false).unwrap(),
            enforce_seen: true,
            live: None,
            programs: &self.programs,
            placing: None,
        }
    }
}

/// A self-signed certificate for 127.0.0.1 made with the openssl program:
/// `dir/cert.pem` and `dir/key.pem`, with `extensions` added (`-addext`).
pub fn self_signed_cert(dir: &Path, extensions: &[&str]) {
    let mut cmd = std::process::Command::new("openssl");
    cmd.args([
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
    ])
    .args([
        "-keyout",
        "key.pem",
        "-out",
        "cert.pem",
        "-subj",
        "/CN=127.0.0.1",
    ])
    .args(["-addext", "subjectAltName=IP:127.0.0.1"]);
    for e in extensions {
        cmd.args(["-addext", e]);
    }
    let ok = cmd
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the openssl program (CI installs it)");
    assert!(ok.success(), "openssl could not make a certificate");
}

/// A tool call carrying a tool-use id in `_meta`, as Claude Code sends it.
pub async fn call_as(nib: &Nib, tool_use: &str, name: &str, args: Value) -> (String, bool) {
    let mut meta = rmcp::model::RequestMetaObject::new();
    meta.0
        .0
        .insert("claudecode/toolUseId".into(), serde_json::json!(tool_use));
    let mut params = rmcp::model::CallToolRequestParams::new(name.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    params.meta = Some(meta);
    let r = nib.client.call_tool(params).await.unwrap();
    (text_of(&r), r.is_error.unwrap_or(false))
}

/// Records, as `nib hook` does for Claude Code, that tool use `id` is an
/// agent's (`None`: the session's main agent).
pub fn hook_tool_use(state: &Path, id: &str, session: &str, agent: Option<&str>) {
    let mut ev = serde_json::json!({"hook_event_name": "PreToolUse", "session_id": session, "tool_name": "mcp__nib__edit", "tool_use_id": id});
    if let Some(a) = agent {
        ev["agent_id"] = serde_json::json!(a);
    }
    let out = std::process::Command::new(nib_bin())
        .arg("hook")
        .env("NIB_STATE_DIR", state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            std::io::Write::write_all(c.stdin.as_mut().unwrap(), ev.to_string().as_bytes())?;
            drop(c.stdin.take());
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
}

/// nib (handshake era) in a fresh HOME, with each tool use recorded by the
/// hook for its agent of session `S` (`None`: the main agent); also the
/// state folder, for more hook records.
pub async fn start_with_agents(dir: &Path, uses: &[(&str, Option<&str>)]) -> (Nib, PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let nib = start_in_home(
        Era::Handshake,
        dir,
        TestClient::new(Roots::Undeclared),
        &[],
        home,
    )
    .await;
    for (id, agent) in uses {
        hook_tool_use(&state, id, "S", *agent);
    }
    (nib, state)
}

/// The test provider (cargo builds examples with the tests).
pub fn test_provider() -> PathBuf {
    let p = nib_bin()
        .parent()
        .map(|d| d.join("examples/nib-test-provider"))
        .unwrap_or_default();
    assert!(
        p.exists(),
        "{} is missing: build it with `cargo build --example nib-test-provider` (cargo test --workspace does)",
        p.display()
    );
    p
}

/// The test provider copied into the project: bubblewrap gives programs a
/// fresh /tmp, so a checkout under /tmp is not visible to a confined
/// provider, while the project (a root) is.
pub fn provider_in(dir: &Path) -> PathBuf {
    let bin = dir.join(".provider-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let copy = bin.join("nib-test-provider");
    std::fs::copy(test_provider(), &copy).unwrap();
    copy
}

/// nib.json naming the test provider with `flags`, under `name`.
pub fn nib_json_with(dir: &Path, entries: &[(&str, &[&str])]) {
    let provider = provider_in(dir);
    let mut map = serde_json::Map::new();
    for (name, flags) in entries {
        let mut command = vec![provider.display().to_string()];
        command.extend(flags.iter().map(|f| f.to_string()));
        map.insert((*name).into(), serde_json::json!({"command": command}));
    }
    std::fs::write(
        dir.join("nib.json"),
        serde_json::to_string(&serde_json::json!({"providers": map})).unwrap(),
    )
    .unwrap();
}

/// Runs git in `dir` with fixed identities and dates, so hashes repeat.
pub fn git(dir: &Path, args: &[&str]) -> String {
    git_as(dir, "Me", "me@example.org", args)
}

pub fn git_as(dir: &Path, name: &str, email: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", name)
        .env("GIT_AUTHOR_EMAIL", email)
        .env("GIT_COMMITTER_NAME", name)
        .env("GIT_COMMITTER_EMAIL", email)
        .env("GIT_AUTHOR_DATE", "2026-11-30T09:15:00Z")
        .env("GIT_COMMITTER_DATE", "2026-11-30T09:15:00Z")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("LC_ALL", "C")
        .env("TZ", "UTC")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A file of the JDK's own sources (Debian's openjdk-17-source, which
/// `.ci/run` installs), copied into `dir`; `None` where no JDK source
/// archive is installed (CI requires one: NIB_REQUIRE_THIRD_PARTY).
pub fn jdk_source(dir: &std::path::Path, member: &str) -> Option<std::path::PathBuf> {
    let archive = std::fs::read_dir("/usr/lib/jvm")
        .ok()?
        .flatten()
        .map(|e| e.path().join("lib/src.zip"))
        .find(|p| p.is_file());
    let Some(archive) = archive else {
        assert!(
            std::env::var_os("NIB_REQUIRE_THIRD_PARTY").is_none(),
            "no JDK source archive (/usr/lib/jvm/*/lib/src.zip): install openjdk-17-source"
        );
        skip("no JDK source archive (apt-get install openjdk-17-source)");
        return None;
    };
    let out = dir.join(member.rsplit('/').next().unwrap());
    let ok = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; open(sys.argv[3], 'wb').write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))",
        ])
        .arg(&archive)
        .arg(member)
        .arg(&out)
        .status()
        .unwrap()
        .success();
    assert!(ok, "{member} is not in {}", archive.display());
    Some(out)
}

/// The tests of this run that did not run what they are for, with why.
static SKIPPED: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Records that the calling test does not run what it tests, and why (a
/// program it drives is not installed, say), for the list printed when
/// this test binary exits: after libtest's `test result:` line, so the
/// last lines of `cargo test`'s output name each test a skip counted as
/// passed. The test itself returns early; under `NIB_REQUIRE_THIRD_PARTY=1`
/// (CI) the skips of third-party programs are failures instead (each site
/// asserts that before calling this).
pub fn skip(why: &str) {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    // libtest names each test's thread after the test.
    let test = std::thread::current()
        .name()
        .unwrap_or("a test on an unnamed thread")
        .to_string();
    eprintln!("{test}: skipped: {why}");
    let mut list = SKIPPED.lock().unwrap_or_else(|p| p.into_inner());
    let entry = (test, why.to_string());
    if !list.contains(&entry) {
        list.push(entry);
    }
    drop(list);
    AT_EXIT.call_once(|| {
        #[allow(unsafe_code)] // the one libc call of the harness
        // SAFETY: atexit only stores the pointer; `print_skipped` is an
        // `extern "C" fn()` that does not unwind (its stderr write ignores
        // errors, a poisoned lock is taken as it is) and does not call exit.
        unsafe {
            libc::atexit(print_skipped);
        }
    });
}

/// Prints the skipped tests to stderr as the process exits (see [`skip`]).
extern "C" fn print_skipped() {
    use std::io::Write;
    let list = SKIPPED.lock().unwrap_or_else(|p| p.into_inner());
    if list.is_empty() {
        return;
    }
    let mut text = format!(
        "\n{} test{} did not run what {} test{} (counted as passed above):\n",
        list.len(),
        if list.len() == 1 { "" } else { "s" },
        if list.len() == 1 { "it" } else { "they" },
        if list.len() == 1 { "s" } else { "" },
    );
    for (test, why) in list.iter() {
        text.push_str(&format!("  {test}: {why}\n"));
    }
    text.push_str(
        "NIB_REQUIRE_THIRD_PARTY=1 makes a missing third-party program a failure (.ci/run sets it)\n",
    );
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
