//! MCP over HTTP (`--only http`): the same calls over stdio and over
//! `nib serve --http` side by side (one agent), then 1, 8 and 32 agents at
//! once on one server, and the server's memory per idle agent.
//!
//! The HTTP client is this module's own: HTTP/1.1 on one kept-alive
//! `TcpStream` per agent (`TCP_NODELAY`, the request written in one piece,
//! `Content-Length` or chunked answers read), so what is timed is the server
//! and the loopback, as the stdio rows time the server and a pipe. Requests
//! are of the 2026-07-28 era (no session, the version and the method in
//! headers and `_meta`), except the rows of the older era: `initialize`, then
//! each request in the session nib opened (`Mcp-Session-Id`).
//!
//! `NIB_BENCH_HTTP_BEFORE=PATH` serves another nib binary (a build before a
//! change) over HTTP as well and times it in the same rows, interleaved;
//! `NIB_BENCH_SHOW=DIR` keeps the load levels' non-empty nibash answers.

use super::*;

use std::io::Read;
use std::net::TcpStream;
use std::sync::{Arc, Barrier};

/// The tools of an agent's round, in order.
const TOOLS: [&str; 3] = ["read", "edit", "nibash"];

/// The token of agent `i` (at least 16 characters, as nib asks).
fn token(i: usize) -> String {
    format!("bench-agent-{i:03}-token-0123456789abcdef")
}

/// A running `nib serve --http`, where it listens, and its stderr drained.
pub(crate) struct HttpServer {
    child: Child,
    pub(crate) addr: String,
    /// Requests logged with a status other than 200.
    not_ok: Arc<std::sync::atomic::AtomicU64>,
}

impl HttpServer {
    /// Starts `nib serve --http 127.0.0.1:0` in `dir` with `agents` tokens
    /// (the token file beside the project, outside it).
    pub(crate) fn spawn(
        nib: &Path,
        dir: &Path,
        state: &Path,
        agents: usize,
        extra: &[&str],
    ) -> Result<HttpServer> {
        let tokens = state.join(format!("tokens-{agents}"));
        let text: String = (0..agents)
            .map(|i| format!("a{i:03} {}\n", token(i)))
            .collect();
        write(&tokens, &text)?;
        let mut child = Command::new(nib)
            .args(["serve", "--http", "127.0.0.1:0", "--token-file"])
            .arg(&tokens)
            .args(extra)
            .env("NIB_SANDBOX", "0")
            .env("NIB_LOG", "warn")
            .current_dir(dir)
            .env("NIB_DIRECTORY", dir)
            .env("NIB_STATE_DIR", state)
            .env("XDG_DATA_HOME", state.join("data"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {} serve --http: {e}", nib.display()))?;
        let mut lines = BufReader::new(child.stderr.take().ok_or("no stderr")?).lines();
        let mut addr = None;
        for line in lines.by_ref() {
            let line = line.map_err(|e| format!("reading nib's stderr: {e}"))?;
            if let Some(rest) = line.strip_prefix("listening on http://") {
                addr = rest.strip_suffix("/mcp").map(str::to_string);
                break;
            }
        }
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("nib serve --http ended without saying where it listens".into());
        };
        // One JSON line per request: drained (as a pod's log collector
        // would), the statuses other than 200 counted.
        let not_ok = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let count = Arc::clone(&not_ok);
        std::thread::spawn(move || {
            for line in lines.map_while(std::result::Result::ok) {
                if line.contains("\"status\":") && !line.contains("\"status\":200") {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        Ok(HttpServer {
            child,
            addr,
            not_ok,
        })
    }

    /// Resident memory now (VmRSS), in KiB.
    fn rss_kib(&self) -> Option<u64> {
        status_kib(self.child.id(), "VmRSS:")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One agent's kept-alive connection.
pub(crate) struct HttpAgent {
    addr: String,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    auth: String,
    next_id: u64,
    out: Vec<u8>,
    body: Vec<u8>,
    /// The older era: the session nib opened at `initialize` (then requests
    /// carry it and no per-request `_meta`).
    session: Option<String>,
}

/// The `_meta` of a 2026-07-28 request.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "nib-bench", "version": "0"}
    })
}

impl HttpAgent {
    pub(crate) fn connect(addr: &str, token: &str) -> Result<HttpAgent> {
        let (reader, writer) = Self::open(addr)?;
        Ok(HttpAgent {
            addr: addr.to_string(),
            reader,
            writer,
            auth: format!("Bearer {token}"),
            next_id: 1,
            out: Vec::with_capacity(4096),
            body: Vec::with_capacity(16 * 1024),
            session: None,
        })
    }

    /// Opens an older-era session: `initialize` (2025-06-18), then
    /// `notifications/initialized`; later requests carry the session.
    pub(crate) fn open_session(&mut self) -> Result<()> {
        let (status, m) = self.request(
            "initialize",
            None,
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "nib-bench", "version": "0"}}),
        )?;
        if status != 200 || m.get("error").is_some() {
            return Err(format!("initialize: HTTP {status}: {m}"));
        }
        if self.session.is_none() {
            return Err("initialize: nib answered without an Mcp-Session-Id".into());
        }
        self.send(None, "notifications/initialized", None, &json!({}))?;
        let (status, _) = self.read_answer()?;
        if !(200..300).contains(&status) {
            return Err(format!("notifications/initialized: HTTP {status}"));
        }
        Ok(())
    }

    /// The `_meta` a request carries: the 2026-07-28 era's, none in a session.
    fn meta(&self) -> Value {
        if self.session.is_some() {
            json!({})
        } else {
            modern_meta()
        }
    }

    /// Writes one JSON-RPC message (a request when `id` is given).
    fn send(
        &mut self,
        id: Option<u64>,
        method: &str,
        name: Option<&str>,
        params: &Value,
    ) -> Result<()> {
        let body = match id {
            Some(id) => json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            None => json!({"jsonrpc": "2.0", "method": method}),
        }
        .to_string();
        self.out.clear();
        write!(
            self.out,
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
            self.addr, self.auth
        )
        .map_err(|e| e.to_string())?;
        match &self.session {
            Some(sid) => write!(
                self.out,
                "MCP-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: {sid}\r\n"
            ),
            None if method == "initialize" => Ok(()),
            None => write!(
                self.out,
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n"
            ),
        }
        .map_err(|e| e.to_string())?;
        if let (Some(n), None) = (name, &self.session) {
            write!(self.out, "Mcp-Name: {n}\r\n").map_err(|e| e.to_string())?;
        }
        write!(self.out, "Content-Length: {}\r\n\r\n{body}", body.len())
            .map_err(|e| e.to_string())?;
        self.writer
            .write_all(&self.out)
            .map_err(|e| format!("writing to nib over HTTP: {e}"))
    }

    fn open(addr: &str) -> Result<(BufReader<TcpStream>, TcpStream)> {
        let s = TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(120)))
            .map_err(|e| e.to_string())?;
        let w = s.try_clone().map_err(|e| e.to_string())?;
        Ok((BufReader::with_capacity(64 * 1024, s), w))
    }

    /// Sends one JSON-RPC request; the HTTP status and the JSON-RPC message.
    fn request(&mut self, method: &str, name: Option<&str>, params: Value) -> Result<(u16, Value)> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(Some(id), method, name, &params)?;
        let (status, close) = self.read_answer()?;
        if close {
            let (r, w) = Self::open(&self.addr)?;
            self.reader = r;
            self.writer = w;
        }
        let message = if status == 200 {
            serde_json::from_slice::<Value>(&self.body)
                .or_else(|_| {
                    // An event stream: the data line that answers.
                    String::from_utf8_lossy(&self.body)
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                        .find(|v| v.get("id").is_some())
                        .ok_or(())
                })
                .map_err(|()| {
                    format!(
                        "nib answered 200 without JSON: {}",
                        String::from_utf8_lossy(&self.body)
                    )
                })?
        } else {
            Value::String(String::from_utf8_lossy(&self.body).into_owned())
        };
        Ok((status, message))
    }

    /// Reads one answer into `self.body`; its status and whether the server
    /// closes the connection after it.
    fn read_answer(&mut self) -> Result<(u16, bool)> {
        let mut line = String::new();
        let io = |e: std::io::Error| format!("reading nib's HTTP answer: {e}");
        self.reader.read_line(&mut line).map_err(io)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or_else(|| format!("no HTTP status line: {line:?}"))?;
        let (mut length, mut chunked, mut close) = (None, false, false);
        loop {
            line.clear();
            if self.reader.read_line(&mut line).map_err(io)? == 0 {
                return Err("nib closed the connection mid-answer".into());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            let v = v.trim();
            if k.eq_ignore_ascii_case("content-length") {
                length = v.parse::<usize>().ok();
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.to_ascii_lowercase().contains("chunked");
            } else if k.eq_ignore_ascii_case("connection") {
                close = v.eq_ignore_ascii_case("close");
            } else if k.eq_ignore_ascii_case("mcp-session-id") {
                self.session = Some(v.to_string());
            }
        }
        self.body.clear();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line).map_err(io)?;
                let size = line.trim().split(';').next().unwrap_or("");
                let n = usize::from_str_radix(size, 16)
                    .map_err(|_| format!("a bad chunk size: {line:?}"))?;
                if n == 0 {
                    // Trailers, up to the blank line.
                    loop {
                        line.clear();
                        if self.reader.read_line(&mut line).map_err(io)? == 0
                            || line.trim_end().is_empty()
                        {
                            break;
                        }
                    }
                    break;
                }
                let start = self.body.len();
                self.body.resize(start + n, 0);
                self.reader
                    .read_exact(&mut self.body[start..])
                    .map_err(io)?;
                line.clear();
                self.reader.read_line(&mut line).map_err(io)?;
            }
        } else if let Some(n) = length {
            self.body.resize(n, 0);
            self.reader.read_exact(&mut self.body).map_err(io)?;
        } else {
            self.reader.read_to_end(&mut self.body).map_err(io)?;
            close = true;
        }
        Ok((status, close))
    }

    /// A tool call's text; an error for a status other than 200, a JSON-RPC
    /// error or a tool error.
    pub(crate) fn call(&mut self, tool: &str, args: Value) -> Result<String> {
        let (status, m) = self.request(
            "tools/call",
            Some(tool),
            json!({"name": tool, "arguments": args, "_meta": self.meta()}),
        )?;
        if status != 200 {
            return Err(format!("{tool}: HTTP {status}: {m}"));
        }
        if let Some(err) = m.get("error") {
            return Err(format!("{tool}: {err}"));
        }
        let text = m["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if m["result"]["isError"] == json!(true) {
            return Err(format!("{tool} failed: {text}"));
        }
        Ok(text)
    }

    /// `GET /healthz`: HTTP alone, no token, no MCP.
    fn healthz(&mut self) -> Result<()> {
        self.out.clear();
        write!(
            self.out,
            "GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n",
            self.addr
        )
        .map_err(|e| e.to_string())?;
        self.writer
            .write_all(&self.out)
            .map_err(|e| format!("writing to nib over HTTP: {e}"))?;
        let (status, close) = self.read_answer()?;
        if close {
            let (r, w) = Self::open(&self.addr)?;
            self.reader = r;
            self.writer = w;
        }
        if status != 200 {
            return Err(format!("GET /healthz: HTTP {status}"));
        }
        Ok(())
    }

    /// `tools/list`: MCP without a tool call.
    fn list(&mut self) -> Result<usize> {
        let meta = self.meta();
        let (status, m) = self.request("tools/list", None, json!({"_meta": meta}))?;
        if status != 200 || m.get("error").is_some() {
            return Err(format!("tools/list: HTTP {status}: {m}"));
        }
        Ok(m["result"]["tools"].to_string().len())
    }
}

/// What one agent did in a load run.
struct AgentRun {
    /// Times per tool, in [`TOOLS`] order.
    times: [Vec<Duration>; 3],
    /// When each of those calls started.
    starts: [Vec<Instant>; 3],
    errors: Vec<String>,
    /// The rounds whose edit nib took, in order.
    edits: Vec<u64>,
    /// Characters of the nibash answers, in all.
    bash_chars: usize,
}

/// The file each agent edits: 40 lines that name it.
fn agent_file(name: &str) -> String {
    (1..=40).map(|i| format!("// {name} line {i}\n")).collect()
}

/// One agent's loop: read → edit anchored on that read → `nibash true`,
/// until `deadline`, `pause` between rounds.
fn agent_loop(
    addr: &str,
    i: usize,
    folder: &str,
    start: &Barrier,
    run_for: Duration,
    pause: Duration,
) -> AgentRun {
    let mut run = AgentRun {
        times: [Vec::new(), Vec::new(), Vec::new()],
        starts: [Vec::new(), Vec::new(), Vec::new()],
        errors: Vec::new(),
        edits: Vec::new(),
        bash_chars: 0,
    };
    let mut agent = match HttpAgent::connect(addr, &token(i)) {
        Ok(a) => a,
        Err(e) => {
            run.errors.push(e);
            start.wait();
            return run;
        }
    };
    let name = format!("a{i:03}");
    let file = format!("{folder}/{name}/f.ts");
    start.wait();
    let deadline = Instant::now() + run_for;
    // Paced agents start spread over one pause, as agents that are not
    // in step would be.
    if !pause.is_zero() {
        std::thread::sleep(pause * u32::try_from(i).unwrap_or(0) / 32);
    }
    let mut round = 0u64;
    while Instant::now() < deadline {
        round += 1;
        let t = Instant::now();
        let read = agent.call("read", json!({"paths": [format!("{file}:1-40")]}));
        run.times[0].push(t.elapsed());
        run.starts[0].push(t);
        let tag = match read.and_then(|r| tag_of(&r)) {
            Ok(tag) => tag,
            Err(e) => {
                run.errors.push(e);
                continue;
            }
        };
        let t = Instant::now();
        let edit = agent.call(
            "edit",
            json!({"input": format!("[{file}#{tag}]\nPUT >$:\n+// {name} round {round}\n")}),
        );
        run.times[1].push(t.elapsed());
        run.starts[1].push(t);
        match edit {
            Ok(_) => run.edits.push(round),
            Err(e) => run.errors.push(e),
        }
        let t = Instant::now();
        let bash = agent.call("nibash", json!({"command": "true"}));
        run.times[2].push(t.elapsed());
        run.starts[2].push(t);
        match bash {
            Ok(text) => {
                run.bash_chars += text.chars().count();
                // NIB_BENCH_SHOW=DIR keeps the nibash answers that are not
                // empty, to see what an agent is told.
                if let Some(dir) = std::env::var_os("NIB_BENCH_SHOW")
                    && !text.is_empty()
                {
                    use std::io::Write as _;
                    let kept = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(Path::new(&dir).join("http-nibash-answers.txt"));
                    if let Ok(mut f) = kept {
                        let _ = writeln!(f, "{name} round {round}:\n{text}");
                    }
                }
            }
            Err(e) => run.errors.push(e),
        }
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    run
}

/// `n` agents at once on `server` for `run_for`: one row per tool (p50,
/// p99, calls per second, errors), and whether every agent's file holds
/// exactly its own edits. Returns the p50 and p99 per tool.
fn load_level(
    server: &HttpServer,
    dir: &Path,
    n: usize,
    run_for: Duration,
    pause: Duration,
    one_agent_p50: Option<&[Duration; 3]>,
) -> Result<[(Duration, Duration); 3]> {
    let folder = format!("load-{n}-{}", pause.as_millis());
    for i in 0..n {
        let name = format!("a{i:03}");
        write(
            &dir.join(&folder).join(&name).join("f.ts"),
            &agent_file(&name),
        )?;
    }
    // Each level starts on a quiet machine: the previous level's (and these
    // files') writes flushed to disk, and the warm workers it used made again,
    // so a level is not timed with the one before's writeback.
    let _ = std::process::Command::new("sync").status();
    settle();
    let before = server.not_ok.load(std::sync::atomic::Ordering::Relaxed);
    let start = Barrier::new(n + 1);
    let machine0 = machine_ticks();
    let nib0 = tree_ticks(server.child.id());
    let (t0, runs): (Instant, Vec<AgentRun>) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (addr, folder, start) = (&server.addr, &folder, &start);
                s.spawn(move || agent_loop(addr, i, folder, start, run_for, pause))
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        let runs = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| AgentRun {
                    times: [Vec::new(), Vec::new(), Vec::new()],
                    starts: [Vec::new(), Vec::new(), Vec::new()],
                    errors: vec!["an agent's thread panicked".into()],
                    edits: Vec::new(),
                    bash_chars: 0,
                })
            })
            .collect();
        (t0, runs)
    });
    let wall = t0.elapsed();
    let machine1 = machine_ticks();
    let nib1 = tree_ticks(server.child.id());
    let all_ticks = machine1.1.saturating_sub(machine0.1).max(1) as f64;
    let busy = machine1.0.saturating_sub(machine0.0) as f64 / all_ticks;
    let nib_share = nib1.saturating_sub(nib0) as f64 / all_ticks;
    let not_ok = server
        .not_ok
        .load(std::sync::atomic::Ordering::Relaxed)
        .saturating_sub(before);
    // Every agent's file: its 40 lines, then exactly the rounds nib took,
    // in order, and nothing of another agent's.
    let mut wrong_files = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let name = format!("a{i:03}");
        let mut want = agent_file(&name);
        for r in &run.edits {
            want.push_str(&format!("// {name} round {r}\n"));
        }
        let path = dir.join(&folder).join(&name).join("f.ts");
        let got = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if got != want {
            wrong_files.push(name);
        }
    }
    // NIB_BENCH_SHOW=DIR keeps every call's start and time, to see whether
    // a level's slow calls come together (the machine) or alone.
    if let Some(dir) = std::env::var_os("NIB_BENCH_SHOW") {
        let mut rows = String::from("agent\ttool\tstart_ms\tms\n");
        for (i, run) in runs.iter().enumerate() {
            for (k, tool) in TOOLS.iter().enumerate() {
                for (t, d) in run.starts[k].iter().zip(&run.times[k]) {
                    let at = t.saturating_duration_since(t0).as_secs_f64() * 1e3;
                    let ms = d.as_secs_f64() * 1e3;
                    rows.push_str(&format!("a{i:03}\t{tool}\t{at:.3}\t{ms:.3}\n"));
                }
            }
        }
        write(&Path::new(&dir).join(format!("http-{folder}.tsv")), &rows)?;
    }
    let errors: Vec<&String> = runs.iter().flat_map(|r| &r.errors).collect();
    let calls: usize = runs
        .iter()
        .map(|r| r.times.iter().map(Vec::len).sum::<usize>())
        .sum();
    let edits: usize = runs.iter().map(|r| r.edits.len()).sum();
    let mut out = [(Duration::ZERO, Duration::ZERO); 3];
    let paced = if pause.is_zero() {
        String::new()
    } else {
        format!(", {} ms between rounds", pause.as_millis())
    };
    for (k, tool) in TOOLS.iter().enumerate() {
        let mut all: Vec<Duration> = runs.iter().flat_map(|r| r.times[k].clone()).collect();
        all.sort();
        let (p50, p99) = (percentile(&all, 0.5), percentile(&all, 0.99));
        out[k] = (p50, p99);
        let versus = one_agent_p50
            .map(|one| {
                let base = one[k].as_secs_f64();
                if base > 0.0 {
                    format!("{:.1}x", p99.as_secs_f64() / base)
                } else {
                    "–".into()
                }
            })
            .unwrap_or_else(|| "–".into());
        println!(
            "| {n} agent{}{paced} | {tool} | {} | {} | {} | {versus} |",
            if n == 1 { "" } else { "s" },
            ms(p50),
            ms(p99),
            all.len(),
        );
    }
    println!(
        "|   | all | {:.0} calls/s | {} errors, {} non-200 answers | {edits} edits, {} files not exactly their own edits{} | |",
        calls as f64 / wall.as_secs_f64(),
        errors.len(),
        not_ok,
        wrong_files.len(),
        if wrong_files.is_empty() {
            String::new()
        } else {
            format!(" ({})", wrong_files.join(", "))
        }
    );
    let bash_calls = runs.iter().map(|r| r.times[2].len()).sum::<usize>().max(1);
    println!(
        "|   | CPU | machine {:.0}% busy | nib and its processes {:.0}% | of all cores; a nibash answer {} chars on average | |",
        busy * 100.0,
        nib_share * 100.0,
        runs.iter().map(|r| r.bash_chars).sum::<usize>() / bash_calls
    );
    for e in errors.iter().take(3) {
        eprintln!("  an error: {e}");
    }
    Ok(out)
}

/// CPU time a process's threads have had, in ns (`/proc/PID/task/*/schedstat`).
/// The older era's baseline in the read rows: the same call in a session.
const OLDER_ERA: &str = "HTTP, older era (a session)";

/// The older era against stdio, from one read row's baselines (both timed
/// in the same interleaved loop as the new era).
fn print_older_era_ratio(label: &str, baselines: &[(String, Stat)]) {
    let find = |name: &str| baselines.iter().find(|(n, _)| n == name).map(|(_, s)| s);
    if let (Some(older), Some(stdio)) = (find(OLDER_ERA), find("stdio"))
        && stdio.median > Duration::ZERO
    {
        println!(
            "| {label}, older era (a session) | {} ({}–{}) | | stdio {} | {:.2}x |",
            ms(older.median),
            ms(older.p10),
            ms(older.p90),
            ms(stdio.median),
            older.median.as_secs_f64() / stdio.median.as_secs_f64()
        );
    }
}

fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Waits (at most 20 s) until the machine is quiet: under a tenth of its CPU
/// busy in two quarter-seconds in a row, so that what a warm-up started in
/// the background (nibash's warm workers) is not timed with the rows.
fn settle() {
    let mut quiet = 0;
    let mut last = machine_ticks();
    for _ in 0..80 {
        std::thread::sleep(Duration::from_millis(250));
        let now = machine_ticks();
        let (busy, all) = (now.0.saturating_sub(last.0), now.1.saturating_sub(last.1));
        last = now;
        quiet = if busy * 10 < all { quiet + 1 } else { 0 };
        if quiet == 2 {
            return;
        }
    }
}

/// The machine's CPU time so far, busy and in all, in ticks (`/proc/stat`).
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(cpu) = stat.lines().next() else {
        return (0, 0);
    };
    let f: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|n| n.parse().ok())
        .collect();
    let total: u64 = f.iter().take(8).sum();
    // idle and iowait are not busy.
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// The CPU time of `pid` and every process below it, with the children
/// each has reaped, in ticks (`/proc/*/stat`): nib, its zygote and the
/// workers the zygote forked and reaped.
fn tree_ticks(pid: u32) -> u64 {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    // (pid, parent, ticks) of every process.
    let all: Vec<(u32, u32, u64)> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // The fields after the command's closing parenthesis: the
            // parent is the 2nd, utime the 12th (then stime, cutime, cstime).
            let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            let parent = rest.get(1)?.parse().ok()?;
            let ticks = rest
                .get(11..15)?
                .iter()
                .filter_map(|n| n.parse::<u64>().ok())
                .sum();
            Some((p, parent, ticks))
        })
        .collect();
    let mut tree = vec![pid];
    let mut k = 0;
    while let Some(&p) = tree.get(k) {
        tree.extend(
            all.iter()
                .filter(|(_, parent, _)| *parent == p)
                .map(|(c, _, _)| *c),
        );
        k += 1;
    }
    all.iter()
        .filter(|(p, _, _)| tree.contains(p))
        .map(|(_, _, t)| t)
        .sum()
}

/// The servers' CPU per call over a measurement (HTTP, stdio), in µs.
struct Cpu(f64, f64);

impl Cpu {
    fn print(&self) {
        let ratio = if self.1 > 0.0 {
            format!("{:.2}x", self.0 / self.1)
        } else {
            "–".into()
        };
        println!(
            "| ↳ the server's CPU per call (all its threads) | {:.0} µs | | stdio {:.0} µs | {ratio} |",
            self.0, self.1
        );
    }
}

/// Runs `f` and measures both servers' CPU over it (`pids`: HTTP, stdio).
fn with_cpu<T>(pids: (u32, u32), n: usize, f: impl FnOnce() -> Result<T>) -> Result<(T, Cpu)> {
    let before = (cpu_ns(pids.0), cpu_ns(pids.1));
    let v = f()?;
    let after = (cpu_ns(pids.0), cpu_ns(pids.1));
    let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / 1000.0 / n.max(1) as f64;
    Ok((v, Cpu(per(after.0, before.0), per(after.1, before.1))))
}

/// The `--only http` group.
pub(crate) fn http_scenarios(nib: &Path, scratch: &Path, n: usize, quick: bool) -> Result<()> {
    let body = {
        let mut rng = Rng(42);
        source_file(&mut rng, 300, false)
    };
    // One project per server, each with its own copy of the file.
    let stdio_dir = scratch.join("http-stdio");
    let http_dir = scratch.join("http-served");
    let state = scratch.join("http-state");
    for d in [&stdio_dir, &http_dir, &state] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    write(&stdio_dir.join("f300.ts"), &body)?;
    write(&http_dir.join("f300.ts"), &body)?;
    // The older era's agent edits a file of its own (the new era's agent
    // moves f300.ts's tag on).
    write(&http_dir.join("f300s.ts"), &body)?;

    println!(
        "nib-bench --only http: {n} iterations per call, interleaved; times in ms, median (p10–p90); \
         unconfined (NIB_SANDBOX=0); HTTP is 2026-07-28 requests without a session on one kept-alive connection\n"
    );
    println!("| call | over HTTP | response chars | over stdio | HTTP / stdio |");
    println!("|---|---|---|---|---|");
    let mut stdio = Server::spawn(nib, &stdio_dir, &state.join("stdio"))?;
    stdio.initialize()?;
    let http = HttpServer::spawn(nib, &http_dir, &state.join("http"), 32, &[])?;
    let mut agent = HttpAgent::connect(&http.addr, &token(0))?;
    // Warm both: the first call of each tool, and the tags to edit with.
    let mut http_tag = tag_of(&agent.call("read", json!({"paths": ["f300.ts:1-300"]}))?)?;
    let mut stdio_tag = tag_of(&stdio.call("read", json!({"paths": ["f300.ts:1-300"]}))?)?;
    agent.call("nibash", json!({"command": "true"}))?;
    stdio.call("nibash", json!({"command": "true"}))?;
    // NIB_BENCH_HTTP_BEFORE=PATH: another nib binary (a build before a
    // change) served over HTTP too, timed in the same rows, interleaved.
    let before = match std::env::var_os("NIB_BENCH_HTTP_BEFORE") {
        Some(path) => {
            let dir = scratch.join("http-before");
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            write(&dir.join("f300.ts"), &body)?;
            let server = HttpServer::spawn(Path::new(&path), &dir, &state.join("before"), 32, &[])?;
            let mut a = HttpAgent::connect(&server.addr, &token(0))?;
            a.call("read", json!({"paths": ["f300.ts:1-300"]}))?;
            let mut s = HttpAgent::connect(&server.addr, &token(1))?;
            s.open_session()?;
            s.call("read", json!({"paths": ["f300.ts:1-300"]}))?;
            println!(
                "(\"HTTP before\" rows: {} served over HTTP the same way; its CPU per call on the ↳ before line)\n",
                Path::new(&path).display()
            );
            Some((
                server,
                std::cell::RefCell::new(a),
                std::cell::RefCell::new(s),
            ))
        }
        None => None,
    };
    // The servers fork their warm workers in the background (at the start and
    // after the first nibash call): rows timed meanwhile time a busy machine.
    settle();
    let before_pid = before.as_ref().map(|(s, _, _)| s.child.id());
    let before_cpu = |n: usize, ns: u64| {
        if let Some(pid) = before_pid {
            println!(
                "| ↳ before: the HTTP server's CPU per call | {:.0} µs | | | |",
                cpu_ns(pid).saturating_sub(ns) as f64 / 1000.0 / n.max(1) as f64
            );
        }
    };
    let before_ns = || before_pid.map_or(0, cpu_ns);
    let pids = (http.child.id(), stdio.child.id());
    let stdio = std::cell::RefCell::new(stdio);
    let agent = std::cell::RefCell::new(agent);

    // The transport alone: GET /healthz against a ping on stdio; then
    // tools/list, MCP without a tool, on both.
    {
        let mut f = || -> Result<(Duration, usize)> {
            time(|| agent.borrow_mut().healthz()).map(|(d, ())| (d, 0))
        };
        let mut bases: Baselines<'_> = vec![(
            "stdio ping".into(),
            Box::new(|| time(|| stdio.borrow_mut().request("ping", json!({}))).map(|(d, _)| d)),
        )];
        let ((s, c, b), cpu) = with_cpu(pids, n, || interleave(n, Some(&mut f), &mut bases))?;
        Row {
            scenario: "the transport alone: GET /healthz (HTTP) vs ping (stdio)".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
        cpu.print();
    }
    {
        let mut f = || -> Result<(Duration, usize)> { time(|| agent.borrow_mut().list()) };
        let mut bases: Baselines<'_> = vec![(
            "stdio".into(),
            Box::new(|| {
                time(|| stdio.borrow_mut().request("tools/list", json!({}))).map(|(d, _)| d)
            }),
        )];
        if let Some((_, a, _)) = &before {
            bases.push((
                "HTTP before".into(),
                Box::new(move || time(|| a.borrow_mut().list()).map(|(d, _)| d)),
            ));
        }
        let ns = before_ns();
        let ((s, c, b), cpu) = with_cpu(pids, n, || interleave(n, Some(&mut f), &mut bases))?;
        Row {
            scenario: "tools/list (MCP, no tool)".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
        cpu.print();
        before_cpu(n, ns);
    }
    // The older era (initialize, then every request in the session, as
    // Claude Code's `http` servers and the Python SDK's legacy mode speak) is
    // timed in the same rows as the new era, interleaved with the same stdio
    // calls: rows timed minutes apart differed by more than the margin.
    let session = {
        let mut a = HttpAgent::connect(&http.addr, &token(1))?;
        a.open_session()?;
        a.call("read", json!({"paths": ["f300.ts:1-300"]}))?;
        std::cell::RefCell::new(a)
    };
    let mut session_tag = tag_of(
        &session
            .borrow_mut()
            .call("read", json!({"paths": ["f300s.ts:1-300"]}))?,
    )?;
    for (label, args) in [
        (
            "read 60 lines of a 300-line file",
            json!({"paths": ["f300.ts:1-60"], "full": true}),
        ),
        (
            "read a whole 300-line file",
            json!({"paths": ["f300.ts:1-300"], "full": true}),
        ),
    ] {
        let a2 = args.clone();
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| agent.borrow_mut().call("read", args.clone()))?;
            Ok((d, text.chars().count()))
        };
        let a4 = args.clone();
        let mut bases: Baselines<'_> = vec![
            (
                "stdio".into(),
                Box::new(|| time(|| stdio.borrow_mut().call("read", a2.clone())).map(|(d, _)| d)),
            ),
            (
                OLDER_ERA.into(),
                Box::new(|| time(|| session.borrow_mut().call("read", a4.clone())).map(|(d, _)| d)),
            ),
        ];
        if let Some((_, a, s)) = &before {
            let (a3, a5) = (args.clone(), args.clone());
            bases.push((
                "HTTP before".into(),
                Box::new(move || time(|| a.borrow_mut().call("read", a3.clone())).map(|(d, _)| d)),
            ));
            bases.push((
                format!("{OLDER_ERA}, before"),
                Box::new(move || time(|| s.borrow_mut().call("read", a5.clone())).map(|(d, _)| d)),
            ));
        }
        let ns = before_ns();
        let ((s, c, b), cpu) = with_cpu(pids, n, || interleave(n, Some(&mut f), &mut bases))?;
        print_older_era_ratio(label, &b);
        Row {
            scenario: label.into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
        cpu.print();
        before_cpu(n, ns);
    }
    {
        let mut k = 0u64;
        let mut f = || -> Result<(Duration, usize)> {
            k += 1;
            let input = format!("[f300.ts#{http_tag}]\nPUT 20:\n+    // edit {k}\n");
            let (d, out) = time(|| agent.borrow_mut().call("edit", json!({"input": input})))?;
            http_tag = tag_of(&out)?;
            Ok((d, out.chars().count()))
        };
        let (mut j, mut m) = (0u64, 0u64);
        let mut bases: Baselines<'_> = vec![(
            "stdio".into(),
            Box::new(|| {
                j += 1;
                let input = format!("[f300.ts#{stdio_tag}]\nPUT 20:\n+    // edit {j}\n");
                let (d, out) = time(|| stdio.borrow_mut().call("edit", json!({"input": input})))?;
                stdio_tag = tag_of(&out)?;
                Ok(d)
            }),
        )];
        bases.push((
            OLDER_ERA.into(),
            Box::new(|| {
                m += 1;
                let input = format!("[f300s.ts#{session_tag}]\nPUT 20:\n+    // edit {m}\n");
                let (d, out) = time(|| session.borrow_mut().call("edit", json!({"input": input})))?;
                session_tag = tag_of(&out)?;
                Ok(d)
            }),
        ));
        let ((s, c, b), cpu) = with_cpu(pids, n, || interleave(n, Some(&mut f), &mut bases))?;
        drop(bases);
        let label = "edit: one line, the tag from the last answer";
        print_older_era_ratio(label, &b);
        Row {
            scenario: label.into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
        cpu.print();
    }
    drop(session);
    {
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| {
                agent
                    .borrow_mut()
                    .call("nibash", json!({"command": "true"}))
            })?;
            Ok((d, text.chars().count()))
        };
        let mut bases: Baselines<'_> = vec![(
            "stdio".into(),
            Box::new(|| {
                time(|| {
                    stdio
                        .borrow_mut()
                        .call("nibash", json!({"command": "true"}))
                })
                .map(|(d, _)| d)
            }),
        )];
        let ((s, c, b), cpu) = with_cpu(pids, n, || interleave(n, Some(&mut f), &mut bases))?;
        Row {
            scenario: "nibash `true`".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
        cpu.print();
    }
    drop(before);
    drop(agent);
    drop(stdio);
    drop(http);

    // Many agents at once on one server: each in its own folder, read →
    // edit anchored on that read → nibash true, back to back.
    let run_for = Duration::from_secs(if quick { 2 } else { 10 });
    let load_dir = scratch.join("http-load");
    std::fs::create_dir_all(&load_dir).map_err(|e| e.to_string())?;
    // Each agent has one call running at a time: 32 agents need 32 places
    // (the default --max-calls is 16).
    let server = HttpServer::spawn(
        nib,
        &load_dir,
        &state.join("load"),
        32,
        &["--max-calls", "32"],
    )?;
    println!(
        "\nagents at once on one server (--max-calls 32), each looping read → edit → nibash `true` for {} s; \
         times in ms\n",
        run_for.as_secs()
    );
    println!("| agents | tool | p50 | p99 | calls | p99 / one agent's p50 |");
    println!("|---|---|---|---|---|---|");
    let single = load_level(&server, &load_dir, 1, run_for, Duration::ZERO, None)?;
    let p50s = [single[0].0, single[1].0, single[2].0];
    for agents in [8, 32] {
        load_level(
            &server,
            &load_dir,
            agents,
            run_for,
            Duration::ZERO,
            Some(&p50s),
        )?;
    }
    load_level(
        &server,
        &load_dir,
        32,
        run_for,
        Duration::from_millis(250),
        Some(&p50s),
    )?;
    drop(server);

    // Memory: a fresh server idle, after one agent's round, and with 32
    // idle agents (connections kept open) after each made its round.
    let mem_dir = scratch.join("http-memory");
    for i in 0..32 {
        let name = format!("a{i:03}");
        write(&mem_dir.join(&name).join("f.ts"), &agent_file(&name))?;
    }
    let server = HttpServer::spawn(nib, &mem_dir, &state.join("memory"), 32, &[])?;
    let settle = || std::thread::sleep(Duration::from_millis(300));
    settle();
    let idle = server.rss_kib().ok_or("no VmRSS for the server")?;
    let mut agents = Vec::new();
    let round = |i: usize| -> Result<HttpAgent> {
        let name = format!("a{i:03}");
        let mut a = HttpAgent::connect(&server.addr, &token(i))?;
        let tag = tag_of(&a.call("read", json!({"paths": [format!("{name}/f.ts:1-40")]}))?)?;
        a.call(
            "edit",
            json!({"input": format!("[{name}/f.ts#{tag}]\nPUT >$:\n+// {name} round 1\n")}),
        )?;
        a.call("nibash", json!({"command": "true"}))?;
        Ok(a)
    };
    agents.push(round(0)?);
    settle();
    let one_agent = server.rss_kib().ok_or("no VmRSS for the server")?;
    for i in 1..32 {
        agents.push(round(i)?);
    }
    settle();
    let all = server.rss_kib().ok_or("no VmRSS for the server")?;
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("\nthe server's resident memory (VmRSS, MiB), a fresh server:\n");
    println!("| state | VmRSS | per agent beyond one agent's |");
    println!("|---|---|---|");
    println!("| idle, no call yet | {:.1} | |", mib(idle));
    println!(
        "| one agent after one round (read, edit, nibash) | {:.1} | |",
        mib(one_agent)
    );
    println!(
        "| 32 idle agents, connections open, after one round each | {:.1} | {:.2} MiB |",
        mib(all),
        mib(all.saturating_sub(one_agent)) / 31.0
    );
    drop(agents);
    Ok(())
}
