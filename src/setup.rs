//! `nib setup`: registers nib with Claude Code and OpenCode, adding only what
//! is missing, so a second run changes nothing. A file that is not plain JSON
//! is left alone with a warning; `--dry-run` prints the change to each file as
//! a diff and writes nothing.
//!
//! In a project: `.mcp.json` (the nib stdio server), `.claude/settings.local.json`
//! (approval of that server, nib's hook for Read, nib's own tools (and after
//! nib's edit and write, for their diff), SessionStart, PostCompact and
//! UserPromptSubmit, deny rules for Bash, Grep, Glob, Edit and
//! Write, an allow rule for `mcp__nib__nibash_status`, which only reads;
//! `nibash_control`, which stops jobs and restores files, is left to ask), and `opencode.json` (or
//! `opencode.jsonc`) when the project has one — else, when it has a
//! `.opencode` folder, a note with what to add. In a checkout of nib's own
//! sources it refuses (exit 2), naming where to run it. Its output leads
//! with the files it created or updated; warnings and notes follow.
//! With `--user`: the Claude config folder's `settings.json`
//! ($CLAUDE_CONFIG_DIR, else ~/.claude), the server at user scope in
//! `~/.claude.json`, and OpenCode's user `opencode.json` if it exists, all
//! naming this binary by its path (Claude Code started from an IDE has
//! another PATH). It says which files it created and which it updated, names
//! allow rules nib's deny rules stop, gives what to paste into a file it
//! cannot edit, and the trust, `-p` and channel hints once, when nib's server
//! entry is first written.
//! `--user` also installs the nib mod for Claude Code (its band, panes, diff
//! rows and /nib-undo) as a local marketplace under `~/.local/share/nib`,
//! declared and enabled in the user's settings.
//! Options (`--provider`, `--decider`, `--summary`, `--opencode`) are kept in
//! `~/.config/nib/setup.json` ($XDG_CONFIG_HOME); an empty value clears one.
//! `--http URL` points the project's nib entry in `.mcp.json` at a running
//! `nib serve --http` instead (type `http`, the url, and an `Authorization`
//! header that names [`TOKEN_VARIABLE`] for Claude Code to fill from the
//! environment: the token itself is never written), and approves it in
//! `.claude/settings.local.json` with nib's permission rules; no hooks and
//! no status line, since those read the state of a nib on this machine.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// What setup was asked to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SetupArgs {
    /// For every project (the user's configuration).
    pub user: bool,
    /// Show the changes without writing.
    pub dry_run: bool,
    /// `--provider NAME=PROGRAM` (an empty PROGRAM clears NAME).
    pub providers: Vec<(String, String)>,
    /// `--decider KIND` (empty clears).
    pub decider: Option<String>,
    /// `--summary LIST` (empty clears).
    pub summary: Option<String>,
    /// `--opencode PROGRAM` (empty clears).
    pub opencode: Option<String>,
    /// `--no-sandbox`: the server entries run nib with `NIB_SANDBOX=0`
    /// (programs unconfined); without it nib's own default, the sandbox, holds.
    pub no_sandbox: bool,
    /// `--http URL`: the project's nib entry reaches a `nib serve --http`
    /// at URL instead of starting nib on stdio.
    pub http: Option<String>,
}

/// The environment variable Claude Code reads the agent's token from for
/// the `Authorization` header `--http` writes (`Bearer ${NIB_TOKEN}`): the
/// token stays out of `.mcp.json`, which is often committed.
pub const TOKEN_VARIABLE: &str = "NIB_TOKEN";

/// The `Authorization` header's value in nib's HTTP entry: a reference to
/// [`TOKEN_VARIABLE`] that Claude Code expands when it starts.
pub fn authorization_reference() -> String {
    format!("Bearer ${{{TOKEN_VARIABLE}}}")
}

/// Why `url` cannot be nib's HTTP entry, if it cannot: it must be an
/// `http://` or `https://` URL without spaces and without a user or
/// password (a secret in the URL would land in `.mcp.json`).
pub fn check_http_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("--http takes an http:// or https:// URL, not {url:?}"))?;
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "--http: the URL {url:?} holds a space or control character"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        return Err(format!("--http: the URL {url:?} names no host"));
    }
    if authority.contains('@') {
        return Err(format!(
            "--http: the URL {url:?} holds a user or password, which would be written into .mcp.json; give the host alone and the token in ${TOKEN_VARIABLE}"
        ));
    }
    Ok(())
}

/// One file's planned change.
#[derive(Debug)]
pub struct Change {
    /// The file.
    pub path: PathBuf,
    /// Its text now (empty when missing).
    pub before: String,
    /// Its text after setup.
    pub after: String,
    /// The file was there before.
    pub existed: bool,
}

/// Where setup writes.
#[derive(Debug, Clone)]
pub struct Places {
    /// The project folder.
    pub project: PathBuf,
    /// The home folder.
    pub home: PathBuf,
    /// The Claude config folder.
    pub claude_dir: PathBuf,
    /// The folder of nib's settings.
    pub config_dir: PathBuf,
    /// How to name the nib binary: `nib` when PATH finds this binary, else
    /// its absolute path (see [`command_name`]).
    pub nib: PathBuf,
    /// This binary's absolute path: what the user's configuration names
    /// (Claude Code started from an IDE has another PATH).
    pub exe: PathBuf,
    /// Another `nib` that PATH finds first, if any.
    pub other_nib: Option<PathBuf>,
    /// Where `--user` puts the nib mod for Claude Code (a local
    /// marketplace): `$XDG_DATA_HOME/nib/claude-plugin`, else
    /// `~/.local/share/nib/claude-plugin`.
    pub mod_dir: PathBuf,
}

impl Places {
    /// The places from the environment.
    pub fn from_env(project: &Path) -> Places {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"));
        let claude_dir = std::env::var_os("CLAUDE_CONFIG_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".claude"));
        let config_dir = nib_settings::config_dir();
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("nib"));
        let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
        let path = std::env::var_os("PATH");
        let nib = command_name(&exe, path.as_deref());
        let other_nib = first_on_path(path.as_deref()).filter(|p| !same_file(p, &exe));
        let mod_dir = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".local/share"))
            .join("nib/claude-plugin");
        Places {
            mod_dir,
            project: project.to_path_buf(),
            home,
            claude_dir,
            config_dir,
            nib,
            exe,
            other_nib,
        }
    }
}

/// How the configuration names nib: `nib` when the `nib` found on PATH is
/// this very binary (so the files can be shared, say through the
/// repository), else the binary's absolute path.
pub fn command_name(exe: &Path, path: Option<&std::ffi::OsStr>) -> PathBuf {
    match first_on_path(path) {
        Some(p) if same_file(&p, exe) => PathBuf::from("nib"),
        _ => exe.to_path_buf(),
    }
}

/// The `nib` that PATH finds first.
fn first_on_path(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    path.into_iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("nib"))
        .find(|p| p.is_file())
}

/// Whether two paths are the same file.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Whether a command string names a nib binary (an older setup's entry).
fn names_nib(command: &str) -> bool {
    command == "nib" || command.ends_with("/nib")
}

/// The value as an object, made one if it is not.
fn obj(v: &mut Value) -> Option<&mut Map<String, Value>> {
    if !v.is_object() {
        *v = json!({});
    }
    v.as_object_mut()
}

/// The object at `key`, made one if missing or not an object.
fn child<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    obj(m.entry(key.to_string()).or_insert_with(|| json!({})))
}

/// Adds `items` missing from the array at `key`.
fn add_to_list(m: &mut Map<String, Value>, key: &str, items: &[&str]) {
    let v = m.entry(key.to_string()).or_insert_with(|| json!([]));
    if !v.is_array() {
        return;
    }
    if let Value::Array(list) = v {
        for i in items {
            if !list.iter().any(|x| x.as_str() == Some(i)) {
                list.push(json!(i));
            }
        }
    }
}

fn hook_command(nib: &Path) -> String {
    format!("{} hook", nib.display())
}

/// Adds nib's hook for an event (and matcher) unless a nib hook is there.
fn add_hook(hooks: &mut Map<String, Value>, event: &str, matcher: Option<&str>, command: &str) {
    let v = hooks.entry(event.to_string()).or_insert_with(|| json!([]));
    let Value::Array(list) = v else { return };
    let mut present = false;
    for group in list.iter_mut() {
        if group.get("matcher").and_then(Value::as_str) != matcher {
            continue;
        }
        let Some(hs) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
            continue;
        };
        for h in hs {
            let Some(c) = h.get("command").and_then(Value::as_str) else {
                continue;
            };
            if let Some(binary) = c.strip_suffix(" hook")
                && names_nib(binary)
            {
                present = true;
                // An older setup wrote another path to nib: this one now.
                if c != command
                    && let Some(m) = h.as_object_mut()
                {
                    m.insert("command".into(), json!(command));
                }
            }
        }
    }
    if present {
        return;
    }
    let mut group = json!({"hooks": [{"type": "command", "command": command, "timeout": 5}]});
    if let (Some(m), Value::Object(g)) = (matcher, &mut group) {
        g.insert("matcher".into(), json!(m));
    }
    list.push(group);
}

/// How often Claude Code re-runs nib's status line, in seconds: without
/// it the line is re-run only on Claude Code's own events, and a running
/// call's clock stood still.
pub const STATUS_LINE_REFRESH: u64 = 1;

/// Whether a status line entry is nib's own (`… statusline`).
fn is_nibs_status_line(line: &Value) -> bool {
    line.get("command")
        .and_then(Value::as_str)
        .is_some_and(|c| c.ends_with(" statusline") || c == "nib statusline")
}

/// The Claude Code settings nib needs, added to `settings`. `users_line`:
/// the person already has a status line of their own elsewhere (a project
/// setup then adds none, since the project's would hide it).
pub fn claude_settings(settings: &mut Value, nib: &Path, project: bool, users_line: bool) {
    let Some(m) = obj(settings) else { return };
    if project {
        add_to_list(m, "enabledMcpjsonServers", &["nib"]);
    }
    if let Some(perms) = child(m, "permissions") {
        // Only the read-only status is allowed without asking; nibash_control
        // (stop a job, restore a file) stays with the client's approval.
        add_to_list(perms, "allow", &["mcp__nib__nibash_status"]);
        add_to_list(perms, "deny", &["Bash", "Grep", "Glob", "Edit", "Write"]);
    }
    // The user's own status line is never replaced; nib's refreshes on a
    // timer so a running call's clock moves.
    match m.get_mut("statusLine") {
        None if !users_line => {
            m.insert(
                "statusLine".into(),
                json!({
                    "type": "command",
                    "command": format!("{} statusline", nib.display()),
                    "refreshInterval": STATUS_LINE_REFRESH,
                }),
            );
        }
        Some(Value::Object(line))
            if is_nibs_status_line(&Value::Object(line.clone()))
                && !line.contains_key("refreshInterval") =>
        {
            line.insert("refreshInterval".into(), json!(STATUS_LINE_REFRESH));
        }
        _ => {}
    }
    let Some(hooks) = child(m, "hooks") else {
        return;
    };
    let cmd = hook_command(nib);
    add_hook(hooks, "PreToolUse", Some("Read"), &cmd);
    add_hook(hooks, "PreToolUse", Some("mcp__nib__.*"), &cmd);
    add_hook(
        hooks,
        "PostToolUse",
        Some("mcp__nib__edit|mcp__nib__write"),
        &cmd,
    );
    add_hook(hooks, "SessionStart", None, &cmd);
    add_hook(hooks, "PostCompact", None, &cmd);
    add_hook(hooks, "UserPromptSubmit", None, &cmd);
}

/// The mod's own sources, from the repository's `claude/` plugin: what
/// `--user` installs beside the server and hooks it writes to the user's
/// configuration.
const MOD_SOURCES: &[(&str, &str)] = &[
    (
        "plugin/hooks/register.tsx",
        include_str!("../claude/hooks/register.tsx"),
    ),
    (
        "plugin/hooks/status.ts",
        include_str!("../claude/hooks/status.ts"),
    ),
];

/// The files of the nib mod as `--user` installs it, relative to its
/// folder: a one-plugin marketplace whose plugin holds the mod alone (the
/// server and hooks are in the user's configuration already, so the
/// plugin repeats neither).
pub fn mod_files() -> Vec<(&'static str, String)> {
    let pretty = |v: Value| {
        let mut t = serde_json::to_string_pretty(&v).unwrap_or_default();
        t.push('\n');
        t
    };
    let mut files = vec![
        (
            ".claude-plugin/marketplace.json",
            pretty(json!({
                "name": "nib",
                "owner": {"name": "nib setup --user"},
                "plugins": [{"name": "nib", "source": "./plugin",
                    "description": "nib's mod: running nibash calls and jobs, panes, diffs of nib's edits, /nib-undo"}]
            })),
        ),
        (
            "plugin/.claude-plugin/plugin.json",
            pretty(json!({
                "name": "nib",
                "version": env!("CARGO_PKG_VERSION"),
                "description": "nib's mod for Claude Code (installed by nib setup --user, which also registered nib's server and hooks): the band above the prompt, a toast when a job ends, the /nibash, /trash, /tokens, /names and /seen panes, diffs of nib's edits in their rows, and /nib-undo.",
                "author": {"name": "nib developers"},
                "license": "MIT"
            })),
        ),
        (
            "plugin/hooks/hooks.json",
            pretty(json!({"modules": ["./register.tsx"]})),
        ),
    ];
    files.extend(MOD_SOURCES.iter().map(|(p, t)| (*p, (*t).to_string())));
    files
}

/// Declares the mod's marketplace (a folder) and enables its plugin in the
/// user's Claude Code settings, unless either is there already (a plugin
/// the user turned off stays off).
pub fn enable_mod(settings: &mut Value, mod_dir: &Path) {
    let Some(m) = obj(settings) else { return };
    if let Some(markets) = child(m, "extraKnownMarketplaces") {
        markets.entry("nib".to_string()).or_insert_with(
            || json!({"source": {"source": "directory", "path": mod_dir.display().to_string()}}),
        );
    }
    if let Some(enabled) = child(m, "enabledPlugins") {
        enabled
            .entry("nib@nib".to_string())
            .or_insert_with(|| json!(true));
    }
}

/// The nib server, added to an `mcpServers` map unless one named nib is
/// there. `alwaysLoad` puts nib's tools in Claude Code's first request
/// instead of behind its tool search. An entry an older setup wrote (its
/// command a nib binary) is brought up to date; any other is left alone.
pub fn mcp_server(config: &mut Value, nib: &Path) {
    let Some(servers) = obj(config).and_then(|m| child(m, "mcpServers")) else {
        return;
    };
    let command = nib.display().to_string();
    let entry = servers
        .entry("nib".to_string())
        .or_insert_with(|| nib_server(nib));
    let ours = entry
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(names_nib);
    if let (true, Some(m)) = (ours, entry.as_object_mut()) {
        m.insert("command".into(), json!(command));
        m.insert("alwaysLoad".into(), json!(true));
    }
}

/// `--http URL`: nib's entry in an `mcpServers` map reaches a `nib serve
/// --http` at `url` (Claude Code's `"type": "http"`), its `Authorization`
/// header naming [`TOKEN_VARIABLE`] rather than holding a token. A missing
/// entry is made; one an earlier setup wrote (its command a nib binary, or
/// an HTTP entry) is turned into this one, keeping other headers it has
/// (say a router's); any other server named nib is left alone.
pub fn http_server(config: &mut Value, url: &str) {
    let Some(servers) = obj(config).and_then(|m| child(m, "mcpServers")) else {
        return;
    };
    let entry = servers
        .entry("nib".to_string())
        .or_insert_with(|| json!({}));
    let Some(m) = entry.as_object_mut() else {
        return;
    };
    let stdio_nib = m
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(names_nib);
    let http = m.get("type").and_then(Value::as_str) == Some("http");
    if !(m.is_empty() || stdio_nib || http) {
        return;
    }
    for stdio_key in ["command", "args", "env"] {
        m.remove(stdio_key);
    }
    m.insert("type".into(), json!("http"));
    m.insert("url".into(), json!(url));
    if let Some(headers) = child(m, "headers") {
        headers.insert("Authorization".into(), json!(authorization_reference()));
    }
    m.insert("alwaysLoad".into(), json!(true));
}

/// The Claude Code settings for nib's HTTP entry: approved, with nib's
/// permission rules; none of the hooks or the status line, which read the
/// state of a nib on this machine rather than the server's.
pub fn claude_settings_http(settings: &mut Value) {
    let Some(m) = obj(settings) else { return };
    add_to_list(m, "enabledMcpjsonServers", &["nib"]);
    if let Some(perms) = child(m, "permissions") {
        // Only the read-only status is allowed without asking; nibash_control
        // (stop a job, restore a file) stays with the client's approval.
        add_to_list(perms, "allow", &["mcp__nib__nibash_status"]);
        add_to_list(perms, "deny", &["Bash", "Grep", "Glob", "Edit", "Write"]);
    }
}

/// `--no-sandbox` writes `NIB_SANDBOX=0` into nib's server entry (Claude
/// Code's `env`, OpenCode's `environment`); without it, a `0` an earlier
/// `--no-sandbox` wrote is taken out again, so the sandbox (nib's default)
/// holds. Other entries and variables are left alone.
pub fn sandbox_setting(config: &mut Value, off: bool) {
    let Some(m) = obj(config) else { return };
    let entries = [("mcpServers", "env"), ("mcp", "environment")];
    for (servers, env_key) in entries {
        let Some(entry) = m
            .get_mut(servers)
            .and_then(|s| s.get_mut("nib"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        if off {
            let env = entry
                .entry(env_key.to_string())
                .or_insert_with(|| json!({}));
            if let Some(env) = env.as_object_mut() {
                env.insert("NIB_SANDBOX".into(), json!("0"));
            }
        } else if let Some(env) = entry.get_mut(env_key).and_then(Value::as_object_mut) {
            if env.get("NIB_SANDBOX").and_then(Value::as_str) == Some("0") {
                env.remove("NIB_SANDBOX");
            }
            if env.is_empty() {
                entry.remove(env_key);
            }
        }
    }
}

/// Claude Code's entry for the nib server.
fn nib_server(nib: &Path) -> Value {
    json!({"type": "stdio", "command": nib.display().to_string(), "args": [], "alwaysLoad": true})
}

/// What `opencode` adds, as JSON to paste into a file setup cannot edit.
fn opencode_snippet(nib: &Path) -> String {
    let mut v = json!({});
    opencode(&mut v, nib);
    serde_json::to_string(&v).unwrap_or_default()
}

/// The tools whose bare deny nib adds, and allow rules that name them with
/// a pattern (`Bash(ls:*)`): Claude Code lets the deny win, so such a rule
/// stops working; said so, naming each.
fn shadowed_allows(settings: &Value, path: &Path) -> Vec<String> {
    let allows = settings
        .get("permissions")
        .and_then(|p| p.get("allow"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    allows
        .iter()
        .filter_map(Value::as_str)
        .filter(|rule| {
            ["Bash(", "Grep(", "Glob(", "Edit(", "Write("]
                .iter()
                .any(|t| rule.starts_with(t))
        })
        .map(|rule| {
            let tool = rule.split('(').next().unwrap_or(rule);
            format!(
                "{}: the allow rule {rule} stops working under the deny rule {tool} that nib adds (Claude Code lets a deny win); nib's tools do that work now (nibash for Bash), or remove {tool} from permissions.deny to keep it",
                path.display()
            )
        })
        .collect()
}

/// OpenCode: the nib server as a local MCP server, and deny rules for its own tools.
pub fn opencode(config: &mut Value, nib: &Path) {
    let Some(m) = obj(config) else { return };
    if let Some(mcp) = child(m, "mcp") {
        let command = nib.display().to_string();
        let entry = mcp.entry("nib".to_string()).or_insert_with(
            || json!({"type": "local", "command": [command], "enabled": true, "codemode": false}),
        );
        if let Some(first) = entry
            .get_mut("command")
            .and_then(Value::as_array_mut)
            .and_then(|c| c.first_mut())
            && first.as_str().is_some_and(names_nib)
        {
            *first = json!(command);
        }
    }
    if let Some(perm) = child(m, "permission") {
        for tool in ["bash", "read", "grep", "glob", "edit"] {
            perm.entry(tool.to_string())
                .or_insert_with(|| json!("deny"));
        }
    }
}

/// The remembered options, updated.
pub fn remember(saved: &mut Value, args: &SetupArgs) {
    let Some(m) = obj(saved) else { return };
    if !args.providers.is_empty()
        && let Some(providers) = child(m, "providers")
    {
        for (name, program) in &args.providers {
            if program.is_empty() {
                providers.remove(name);
            } else {
                providers.insert(name.clone(), json!(program));
            }
        }
    }
    for (key, value) in [
        ("decider", &args.decider),
        ("summary", &args.summary),
        ("opencode", &args.opencode),
    ] {
        match value.as_deref() {
            None => {}
            Some("") => {
                m.remove(key);
            }
            Some(v) => {
                m.insert(key.to_string(), json!(v));
            }
        }
    }
}

/// A file setup may change: its path, the edit, and whether to create it
/// when it does not exist.
type Target<'a> = (PathBuf, Box<dyn Fn(&mut Value) + 'a>, bool);

/// The files setup may change, each with its edit: the user's or the
/// project's Claude Code and OpenCode configuration, or the HTTP client's;
/// `notes` gets what could not be done for OpenCode.
fn targets<'a>(
    places: &'a Places,
    args: &'a SetupArgs,
    nib: &'a Path,
    users_line: bool,
    notes: &mut Vec<String>,
) -> Vec<Target<'a>> {
    let mut targets: Vec<Target<'a>> = Vec::new();
    let opencode_file = |dir: &Path| {
        ["opencode.json", "opencode.jsonc"]
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.exists())
    };
    if args.user {
        targets.push((
            places.claude_dir.join("settings.json"),
            Box::new(|v| {
                claude_settings(v, nib, false, false);
                enable_mod(v, &places.mod_dir);
            }),
            true,
        ));
        targets.push((
            places.home.join(".claude.json"),
            Box::new(|v| {
                mcp_server(v, nib);
                sandbox_setting(v, args.no_sandbox);
            }),
            true,
        ));
        match opencode_file(&places.home.join(".config/opencode")) {
            Some(oc) => targets.push((
                oc,
                Box::new(|v| {
                    opencode(v, nib);
                    sandbox_setting(v, args.no_sandbox);
                }),
                false,
            )),
            // Said only to someone who has OpenCode.
            None if places.home.join(".config/opencode").is_dir() => notes.push(format!(
                "note: OpenCode: ~/.config/opencode has no opencode.json, so nib was not added there; to use nib with OpenCode, create it with {{}} and run nib setup --user again, or add this to it: {}",
                opencode_snippet(nib)
            )),
            None => {}
        }
    } else if let Some(url) = &args.http {
        targets.push((
            places.project.join(".mcp.json"),
            Box::new(move |v| http_server(v, url)),
            true,
        ));
        targets.push((
            places.project.join(".claude/settings.local.json"),
            Box::new(claude_settings_http),
            true,
        ));
    } else {
        targets.push((
            places.project.join(".mcp.json"),
            Box::new(|v| {
                mcp_server(v, nib);
                sandbox_setting(v, args.no_sandbox);
            }),
            true,
        ));
        targets.push((
            places.project.join(".claude/settings.local.json"),
            Box::new(move |v| claude_settings(v, nib, true, users_line)),
            true,
        ));
        match opencode_file(&places.project) {
            Some(oc) => targets.push((
                oc,
                Box::new(|v| {
                    opencode(v, nib);
                    sandbox_setting(v, args.no_sandbox);
                }),
                false,
            )),
            // Said only in a project that has OpenCode (its folder).
            None if places.project.join(".opencode").exists() => notes.push(format!(
                "note: OpenCode: this project has a .opencode folder but no opencode.json, so nib was not added for OpenCode; to use it there, create opencode.json with {{}} and run nib setup again, or add this to it: {}",
                opencode_snippet(nib)
            )),
            None => {}
        }
    }
    targets
}

/// Plans every change: the files to write, and the lines to print after
/// what was done (each `warning: …` or `note: …`).
pub fn plan(places: &Places, args: &SetupArgs) -> (Vec<Change>, Vec<String>) {
    // The user's configuration serves every project, whatever PATH Claude
    // Code starts with (an IDE's may lack the nib a terminal finds): it
    // names this binary by its path. A project's may be shared: `nib` when
    // PATH finds this very binary.
    let nib = if args.user { &places.exe } else { &places.nib };
    let mut notes = Vec::new();
    // The opt-out is said each time it is asked for, with the way back.
    if args.no_sandbox && args.http.is_none() {
        notes.push("note: --no-sandbox: nib's server entry sets NIB_SANDBOX=0, so programs run unconfined, with your full authority (they can read your credentials and write anywhere you can); nib setup without --no-sandbox takes it out".to_string());
    }
    // A status line in the person's own settings: a project's would hide it.
    let users_line = std::fs::read_to_string(places.claude_dir.join("settings.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|v| v.get("statusLine").is_some());
    let mut targets = targets(places, args, nib, users_line, &mut notes);
    let remembered = !args.providers.is_empty()
        || args.decider.is_some()
        || args.summary.is_some()
        || args.opencode.is_some();
    if remembered {
        targets.push((
            places.config_dir.join("setup.json"),
            Box::new(|v| remember(v, args)),
            true,
        ));
    }
    let mut changes = Vec::new();
    let mut warnings = Vec::new();
    for (path, edit, create) in targets {
        let before = std::fs::read_to_string(&path).ok();
        if before.is_none() && !create {
            continue;
        }
        let mut value = match before.as_deref() {
            None => json!({}),
            Some(text) if text.trim().is_empty() => json!({}),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(v) if v.is_object() => v,
                _ => {
                    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    let paste = if name.starts_with("opencode") {
                        opencode_snippet(nib)
                    } else if let Some(url) = &args.http {
                        let mut v = json!({});
                        if name == ".mcp.json" {
                            http_server(&mut v, url);
                        } else {
                            claude_settings_http(&mut v);
                        }
                        serde_json::to_string(&v).unwrap_or_default()
                    } else if name == ".mcp.json" || name == ".claude.json" {
                        serde_json::to_string(&json!({"mcpServers": {"nib": nib_server(nib)}}))
                            .unwrap_or_default()
                    } else {
                        let mut v = json!({});
                        claude_settings(&mut v, nib, !args.user, users_line);
                        serde_json::to_string(&v).unwrap_or_default()
                    };
                    warnings.push(format!(
                        "warning: {} is not plain JSON (comments or trailing commas?); left alone: add this to it by hand: {paste}",
                        path.display()
                    ));
                    continue;
                }
            },
        };
        let original = value.clone();
        edit(&mut value);
        warnings.extend(
            shadowed_allows(&original, &path)
                .into_iter()
                .map(|w| format!("warning: {w}")),
        );
        if before.is_some() && value == original {
            continue;
        }
        let mut after = serde_json::to_string_pretty(&value).unwrap_or_default();
        after.push('\n');
        changes.push(Change {
            path,
            existed: before.is_some(),
            before: before.unwrap_or_default(),
            after,
        });
    }
    if args.user {
        for (name, text) in mod_files() {
            let path = places.mod_dir.join(name);
            let before = std::fs::read_to_string(&path).ok();
            if before.as_deref() == Some(text.as_str()) {
                continue;
            }
            changes.push(Change {
                path,
                existed: before.is_some(),
                before: before.unwrap_or_default(),
                after: text,
            });
        }
    }
    // What setup could not do for OpenCode is said when setup changes
    // something, not on every run that finds everything in place.
    if !changes.is_empty() {
        warnings.extend(notes);
    }
    (changes, warnings)
}

/// A unified diff of one change, for `--dry-run`.
pub fn diff(change: &Change) -> String {
    let name = change.path.display().to_string();
    similar::TextDiff::from_lines(&change.before, &change.after)
        .unified_diff()
        .context_radius(3)
        .header(&name, &name)
        .to_string()
}

/// Whether `dir` is a checkout of nib's own repository: its Cargo.toml's
/// `[package]` is named `nib-tools` (`nib` before it was renamed) and the
/// Claude Code plugin folder (`claude/.claude-plugin`) is beside it. Setting nib up there would write
/// nib's client files into nib's sources.
pub fn is_nib_checkout(dir: &Path) -> bool {
    let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
        return false;
    };
    let mut in_package = false;
    let named_nib = manifest.lines().map(str::trim).any(|line| {
        if line.starts_with('[') {
            in_package = line == "[package]";
            return false;
        }
        in_package
            && line
                .strip_prefix("name")
                .and_then(|rest| rest.trim_start().strip_prefix('='))
                .is_some_and(|v| ["\"nib-tools\"", "\"nib\""].contains(&v.trim()))
    });
    named_nib && dir.join("claude/.claude-plugin").is_dir()
}

/// Runs setup; returns what to print and the exit status.
pub fn run(places: &Places, args: &SetupArgs) -> (String, i32) {
    if let Some(url) = &args.http {
        let refused = if args.user {
            Err(
                "--http sets up this project's .mcp.json only; it does not go with --user"
                    .to_string(),
            )
        } else if args.no_sandbox {
            Err("--no-sandbox does not go with --http: the sandbox is the server's, set where `nib serve --http` starts (NIB_SANDBOX)".to_string())
        } else {
            check_http_url(url)
        };
        if let Err(why) = refused {
            return (format!("nib setup: {why}; nothing was written.\n"), 2);
        }
    }
    if !args.user && is_nib_checkout(&places.project) {
        return (
            format!(
                "nib setup: {} is a checkout of nib's own sources (Cargo.toml's package is nib-tools, with the claude/ plugin), not a project to set nib up in; nothing was written.\nRun nib setup in your project's folder (cd there first, or NIB_DIRECTORY=PROJECT nib setup); nib setup --user sets nib up for every project.\n",
                places.project.display()
            ),
            2,
        );
    }
    let (changes, said) = plan(places, args);
    let mut out = String::new();
    // What setup did comes first; its warnings and notes after it.
    let mut said = said.iter().map(|w| format!("{w}\n")).collect::<String>();
    if !args.user && args.http.is_none() && places.nib.is_absolute() && !changes.is_empty() {
        let found = match &places.other_nib {
            Some(other) => format!(
                "the nib PATH finds first is another binary, {}",
                other.display()
            ),
            None => "PATH finds no nib".to_string(),
        };
        said.push_str(&format!(
            "note: nib is named by its path, {}, because {found}; a file shared through the repository then works only where that path exists. Put this nib on PATH and run nib setup again to name it `nib`\n",
            places.nib.display()
        ));
    }
    if changes.is_empty() {
        out.push_str("nib setup: nothing to change; everything is in place\n");
        out.push_str(&said);
        return (out, 0);
    }
    for c in &changes {
        if args.dry_run {
            out.push_str(&diff(c));
            continue;
        }
        if let Some(dir) = c.path.parent() {
            let _ = nib_files::fs::create_dir_all(dir);
        }
        let written =
            nib_files::fs::write_atomic(&nib_files::fs::Scope::Open, &c.path, c.after.as_bytes());
        let verb = if c.existed { "updated" } else { "created" };
        match written {
            Ok(_) => out.push_str(&format!("{verb} {}\n", c.path.display())),
            Err(e) => {
                out.push_str(&format!("could not write {}: {e}\n", c.path.display()));
                out.push_str(&said);
                return (out, 1);
            }
        }
    }
    if args.dry_run {
        out.push_str("nib setup --dry-run: nothing was written\n");
        out.push_str(&said);
        return (out, 0);
    }
    out.push_str(&said);
    // Said once, when nib's server entry is first written.
    let first = changes.iter().any(|c| {
        !c.existed
            && c.path
                .file_name()
                .is_some_and(|n| n == ".mcp.json" || n == ".claude.json")
    }) || changes
        .iter()
        .any(|c| c.after.contains("\"mcpServers\"") && !c.before.contains("\"nib\""));
    if let Some(url) = &args.http
        && changes
            .iter()
            .any(|c| c.path.file_name().is_some_and(|n| n == ".mcp.json"))
    {
        out.push_str(&format!(
            "nib's entry in .mcp.json reaches {url} with the header `Authorization: {}`: Claude Code fills it from the environment, and the token itself is not written into .mcp.json. Start claude with {TOKEN_VARIABLE} set to this agent's token (its line in the server's --token-file), e.g. {TOKEN_VARIABLE}=... claude\n",
            authorization_reference()
        ));
    }
    if first {
        out.push_str(
            "next: start claude in the project and accept its folder-trust question (until then `claude mcp list` shows nib as pending approval); `claude -p` asks nobody, so pass --allowedTools mcp__nib there\n",
        );
        if args.http.is_none() {
            out.push_str(
            "tip: to have jobs that end wake the agent, add \"env\": {\"NIB_CHANNEL\": \"1\"} to nib's server entry and start Claude Code with `claude --dangerously-load-development-channels server:nib`\n",
        );
        }
    }
    (out, 0)
}
