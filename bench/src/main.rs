//! nib-bench: measures nib end to end, as a client sees it, against the
//! programs an agent would otherwise run, side by side in one run.
//!
//! The harness starts the release `nib` on stdio and speaks JSON-RPC lines to
//! it (no MCP library in the way, so the numbers are the server's), generates
//! its inputs deterministically (fixed seed) or takes a tree from `--tree`, and
//! for each scenario interleaves nib's calls with the baseline's processes. It
//! prints a table of medians, p10–p90 spread, the ratio of nib to the
//! baseline, the response size in characters, and the server's peak memory.
//! It asserts nothing about timings: CI runs `--quick` only to keep it working.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod must_see;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

type Result<T> = std::result::Result<T, String>;

/// A function the generated 5,000-line file declares, for the declaration reads.
const LANG_DECL: &str = "main";

/// A named baseline: one run of it, timed.
type Baseline<'a> = (String, Box<dyn FnMut() -> Result<Duration> + 'a>);
/// The baselines of a scenario.
type Baselines<'a> = Vec<Baseline<'a>>;
/// nib's times, its response size, and each baseline's times.
type Measured = (Option<Stat>, Option<usize>, Vec<(String, Stat)>);

struct Options {
    nib: PathBuf,
    quick: bool,
    /// Only one group of scenarios (`deciders`, `proxy`).
    only: Option<String>,
    tree: Option<PathBuf>,
    /// A real JVM repository for the names scenarios, and the literal its
    /// grep scenario looks for (about 20 matches).
    jvm: Option<(PathBuf, String)>,
    iterations: usize,
}

fn parse_options() -> Result<Options> {
    let mut nib = PathBuf::from("target/release/nib");
    let mut quick = false;
    let mut only = None;
    let mut tree = None;
    let mut jvm = None;
    let mut iterations = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--nib" => nib = args.next().map(PathBuf::from).ok_or("--nib needs a path")?,
            "--quick" => quick = true,
            "--only" => {
                only = Some(
                    args.next()
                        .ok_or("--only needs deciders, proxy, providers, names, start or speed")?,
                )
            }
            "--tree" => {
                tree = Some(
                    args.next()
                        .map(PathBuf::from)
                        .ok_or("--tree needs a path")?,
                )
            }
            "--jvm" => {
                let (Some(repo), Some(pattern)) = (args.next(), args.next()) else {
                    return Err("--jvm needs a repository and a grep literal".into());
                };
                jvm = Some((PathBuf::from(repo), pattern));
            }
            "--iterations" => {
                iterations = Some(
                    args.next()
                        .and_then(|n| n.parse().ok())
                        .ok_or("--iterations needs a number")?,
                )
            }
            "--help" | "-h" => {
                println!(
                    "usage: nib-bench [--nib PATH] [--quick] [--tree PATH] [--iterations N] [--only deciders|proxy|providers|names|start|speed]\n\
                     --only runs one group: the long-output corpus (recall and share per decider), the network proxy, providers, names, the sandbox's start per layer, or the speed of an edit and of nibash bursts and first calls\n\
                     --tree runs the tree scenarios on an existing folder (a real repository) instead of a generated one\n\
                     --jvm REPO LITERAL runs the names scenarios on a clone of a JVM repository, grepping LITERAL"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    let iterations = iterations.unwrap_or(if quick { 15 } else { 60 });
    Ok(Options {
        nib,
        quick,
        only,
        tree,
        jvm,
        iterations,
    })
}

// ---------------------------------------------------------------- inputs

/// xorshift64*: a fixed-seed generator, so every run sees the same inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "session", "token", "user", "cache", "request", "buffer", "config", "engine", "record",
    "index", "parser", "handler", "stream", "value", "result", "error", "client", "server",
    "query", "store", "widget", "layout", "schema", "route", "event", "queue", "worker", "batch",
    "limit", "policy",
];

fn ident(rng: &mut Rng) -> String {
    let a = rng.pick(WORDS);
    let b = rng.pick(WORDS);
    let mut b = b.to_string();
    if let Some(first) = b.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    format!("{a}{b}")
}

/// A plausible source file of about `lines` lines (TypeScript-like or Rust-like).
fn source_file(rng: &mut Rng, lines: usize, rust: bool) -> String {
    let mut out = String::new();
    let mut n = 0;
    out.push_str(if rust {
        "use std::collections::HashMap;\n\n"
    } else {
        "import { session } from \"./session\";\n\n"
    });
    n += 2;
    while n < lines {
        let name = ident(rng);
        if rust {
            out.push_str(&format!("/// Returns the {} for a {}.\npub fn {}(input: &str, limit: usize) -> Option<String> {{\n", rng.pick(WORDS), rng.pick(WORDS), name.to_lowercase()));
        } else {
            out.push_str(&format!("/** Returns the {} for a {}. */\nexport function {}(input: string, limit: number): string | null {{\n", rng.pick(WORDS), rng.pick(WORDS), name));
        }
        n += 2;
        let body = 3 + rng.below(9);
        for _ in 0..body {
            let v = ident(rng);
            let line = match rng.below(4) {
                0 => format!(
                    "    let {} = {}(input, {});\n",
                    v.to_lowercase(),
                    ident(rng).to_lowercase(),
                    rng.below(1000)
                ),
                1 if rust => format!(
                    "    if {} > limit {{ return None; }} // TODO check {}\n",
                    v.to_lowercase(),
                    rng.pick(WORDS)
                ),
                1 => format!(
                    "    if ({} > limit) {{ return null; }} // TODO check {}\n",
                    v.to_lowercase(),
                    rng.pick(WORDS)
                ),
                2 => format!(
                    "    log(\"{} failed for {}\", {});\n",
                    rng.pick(WORDS),
                    rng.pick(WORDS),
                    v.to_lowercase()
                ),
                _ => format!("    {}.push({});\n", rng.pick(WORDS), rng.below(100_000)),
            };
            out.push_str(&line);
            n += 1;
        }
        // Valid source in its language, as the files agents edit mostly are.
        out.push_str(if rust {
            "    None\n}\n\n"
        } else {
            "    return null;\n}\n\n"
        });
        n += 3;
    }
    out
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Generates `files` source files in nested folders under `root`.
fn generate_tree(root: &Path, files: usize) -> Result<()> {
    let mut rng = Rng(0x6e69_6221);
    for i in 0..files {
        let dir = root.join(format!("pkg{:02}/mod{:03}", i % 40, (i / 40) % 500));
        let rust = i % 2 == 0;
        let name = format!(
            "{}_{i}.{}",
            ident(&mut rng).to_lowercase(),
            if rust { "rs" } else { "ts" }
        );
        let lines = 40 + rng.below(260);
        write(&dir.join(name), &source_file(&mut rng, lines, rust))?;
    }
    Ok(())
}

// ---------------------------------------------------------------- the server

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    fn spawn(nib: &Path, dir: &Path, state: &Path) -> Result<Server> {
        Server::spawn_with(nib, dir, state, &[])
    }

    fn spawn_with(nib: &Path, dir: &Path, state: &Path, env: &[(&str, &str)]) -> Result<Server> {
        Server::spawn_args(nib, &[], dir, state, env)
    }

    fn spawn_args(
        nib: &Path,
        args: &[&str],
        dir: &Path,
        state: &Path,
        env: &[(&str, &str)],
    ) -> Result<Server> {
        let mut child = Command::new(nib)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(dir)
            .env("NIB_DIRECTORY", dir)
            .env("NIB_STATE_DIR", state)
            .env("XDG_DATA_HOME", state.join("data"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", nib.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Server {
            child,
            stdin,
            stdout,
            next_id: 1,
        })
    }

    fn send(&mut self, msg: &Value) -> Result<()> {
        let mut line = msg.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("writing to nib: {e}"))
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("reading from nib: {e}"))?;
            if n == 0 {
                return Err("nib closed its output".into());
            }
            let v: Value =
                serde_json::from_str(&line).map_err(|e| format!("nib wrote non-JSON: {e}"))?;
            if v.get("id") == Some(&json!(id)) {
                if let Some(err) = v.get("error") {
                    return Err(format!("{method}: {err}"));
                }
                return Ok(v["result"].clone());
            }
        }
    }

    fn initialize(&mut self) -> Result<()> {
        self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "nib-bench", "version": "0"}}),
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    }

    fn call(&mut self, tool: &str, args: Value) -> Result<String> {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}))?;
        let text = r["content"][0]["text"].as_str().unwrap_or("").to_string();
        if r["isError"] == json!(true) {
            return Err(format!("{tool} failed: {text}"));
        }
        Ok(text)
    }

    /// Sends several calls at once (as a client sends a turn's parallel
    /// calls) and waits for every answer.
    fn call_many(&mut self, tool: &str, args: &[Value]) -> Result<Vec<String>> {
        let first = self.next_id;
        for a in args {
            let id = self.next_id;
            self.next_id += 1;
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": a}}))?;
        }
        let mut answers: Vec<Option<String>> = vec![None; args.len()];
        let mut line = String::new();
        while answers.iter().any(Option::is_none) {
            line.clear();
            let n = self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("reading from nib: {e}"))?;
            if n == 0 {
                return Err("nib closed its output".into());
            }
            let v: Value =
                serde_json::from_str(&line).map_err(|e| format!("nib wrote non-JSON: {e}"))?;
            let Some(k) = v["id"].as_u64().and_then(|id| id.checked_sub(first)) else {
                continue;
            };
            if let Some(slot) = answers.get_mut(k as usize) {
                if v["result"]["isError"] == json!(true) || v.get("error").is_some() {
                    return Err(format!("{tool} failed: {v}"));
                }
                *slot = Some(
                    v["result"]["content"][0]["text"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                );
            }
        }
        Ok(answers.into_iter().flatten().collect())
    }

    /// Peak resident memory (VmHWM) in KiB.
    fn peak_kib(&self) -> Option<u64> {
        status_kib(self.child.id(), "VmHWM:")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------- measuring

fn time<T>(f: impl FnOnce() -> Result<T>) -> Result<(Duration, T)> {
    let t = Instant::now();
    let v = f()?;
    Ok((t.elapsed(), v))
}

/// Runs a program to completion, output discarded; its wall time.
fn run_program(dir: &Path, argv: &[&str]) -> Result<Duration> {
    let t = Instant::now();
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", argv[0]))?;
    let d = t.elapsed();
    // grep exits 1 when nothing matches; that is still a measurement.
    if !out.status.success() && out.status.code() != Some(1) {
        return Err(format!(
            "{} failed: {}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(d)
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

struct Stat {
    median: Duration,
    p10: Duration,
    p90: Duration,
}

fn stat(mut v: Vec<Duration>) -> Stat {
    v.sort();
    Stat {
        median: percentile(&v, 0.5),
        p10: percentile(&v, 0.1),
        p90: percentile(&v, 0.9),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

struct Row {
    scenario: String,
    nib: Option<Stat>,
    chars: Option<usize>,
    baselines: Vec<(String, Stat)>,
}

/// The main server's pid, and its memory after each scenario printed
/// (VmHWM only grows: a jump attributes the peak to that scenario).
static MAIN_SERVER: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
static PEAK_AFTER: std::sync::Mutex<Vec<(String, Memory)>> = std::sync::Mutex::new(Vec::new());

/// The main server's memory after a scenario, in KiB: the peak so far and
/// what stays resident, split into heap (anonymous) and mapped files (its
/// own code, mostly).
#[derive(Clone, Copy, Default)]
struct Memory {
    peak: u64,
    resident: u64,
    anon: u64,
    file: u64,
}

impl Memory {
    fn of(pid: u32) -> Option<Memory> {
        Some(Memory {
            peak: status_kib(pid, "VmHWM:")?,
            resident: status_kib(pid, "VmRSS:")?,
            anon: status_kib(pid, "RssAnon:")?,
            file: status_kib(pid, "RssFile:")?,
        })
    }
}

/// A `/proc/PID/status` figure in KiB (`VmHWM:`, `VmRSS:`).
fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

impl Row {
    fn print(&self) {
        if let Some(memory) = MAIN_SERVER.get().and_then(|pid| Memory::of(*pid)) {
            let mut peaks = PEAK_AFTER.lock().unwrap_or_else(|p| p.into_inner());
            peaks.push((self.scenario.clone(), memory));
        }
        let nib = match &self.nib {
            Some(s) => format!("{} ({}–{})", ms(s.median), ms(s.p10), ms(s.p90)),
            None => "not built yet".into(),
        };
        let chars = self
            .chars
            .map(|c| c.to_string())
            .unwrap_or_else(|| "–".into());
        if self.baselines.is_empty() {
            println!("| {} | {} | {} | – | – |", self.scenario, nib, chars);
        }
        for (name, b) in &self.baselines {
            let ratio = match &self.nib {
                Some(s) if b.median > Duration::ZERO => {
                    format!("{:.2}x", s.median.as_secs_f64() / b.median.as_secs_f64())
                }
                _ => "–".into(),
            };
            println!(
                "| {} | {} | {} | {} {} ({}–{}) | {} |",
                self.scenario,
                nib,
                chars,
                name,
                ms(b.median),
                ms(b.p10),
                ms(b.p90),
                ratio
            );
        }
    }
}

/// Interleaves `n` runs of nib's measurement with each baseline's.
fn interleave(
    n: usize,
    mut nib: Option<&mut dyn FnMut() -> Result<(Duration, usize)>>,
    baselines: &mut [Baseline<'_>],
) -> Result<Measured> {
    let mut nib_times = Vec::with_capacity(n);
    let mut chars = None;
    let mut base_times: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); baselines.len()];
    for _ in 0..n {
        if let Some(f) = nib.as_mut() {
            let (d, c) = f()?;
            nib_times.push(d);
            chars = Some(c);
        }
        for (k, (_, f)) in baselines.iter_mut().enumerate() {
            base_times[k].push(f()?);
        }
    }
    let nib_stat = nib.map(|_| stat(nib_times));
    let base = baselines
        .iter()
        .zip(base_times)
        .map(|((name, _), t)| (name.clone(), stat(t)))
        .collect();
    Ok((nib_stat, chars, base))
}

/// Starting `true` per sandbox layer, against a plain spawn.
fn start_scenarios(nib: &Path, work: &Path, n: usize) -> Result<()> {
    let root = work.to_path_buf();
    let layer = |confine: bool, bwrap: bool| nib_sandbox::Policy {
        confine,
        writable: vec![root.clone()],
        use_bwrap: bwrap,
        ..nib_sandbox::Policy::default()
    };
    let mut layers = vec![
        (
            "start `true`: layer 1 (session, fds, env, limits, PID namespace)",
            layer(false, false),
        ),
        ("start `true`: Landlock + seccomp", layer(true, false)),
    ];
    if nib_sandbox::bwrap_usable() {
        layers.push((
            "start `true`: bubblewrap + Landlock + seccomp",
            layer(true, true),
        ));
    }
    // The read policy of a user whose $HOME holds 200 entries (projects,
    // dotfiles, credentials, toolchains), PATH as this machine's; the
    // home beside the root, not in it.
    let home = work.with_file_name("bench-home");
    for i in 0..180 {
        let _ = std::fs::create_dir_all(home.join(format!("project-{i}")));
    }
    for d in [
        ".ssh",
        ".aws",
        ".cargo/registry",
        ".cargo/bin",
        ".rustup",
        ".npm",
        ".cache/pip",
        ".config/gh",
        ".gnupg",
        ".m2/repository",
        ".gradle/caches",
        ".docker",
        ".kube",
        ".pyenv",
        ".local/bin",
        ".config/git",
    ] {
        let _ = std::fs::create_dir_all(home.join(d));
    }
    for f in [
        ".cargo/credentials.toml",
        ".npmrc",
        ".netrc",
        ".gitconfig",
        ".git-credentials",
        ".m2/settings.xml",
        ".bash_history",
    ] {
        let _ = std::fs::write(home.join(f), "x\n");
    }
    let user_reads = nib_sandbox::Reads::for_user(&nib_sandbox::UserReads {
        home: Some(home.clone()),
        path: std::env::var_os("PATH"),
        toolchain_vars: Vec::new(),
        allow: Vec::new(),
        hide: Vec::new(),
    });
    let with_reads = |bwrap: bool| nib_sandbox::Policy {
        reads: user_reads.clone(),
        ..layer(true, bwrap)
    };
    layers.push((
        "start `true`: Landlock + seccomp, read policy of a $HOME of 200 entries",
        with_reads(false),
    ));
    if nib_sandbox::bwrap_usable() {
        layers.push((
            "start `true`: bubblewrap + Landlock + seccomp, read policy of a $HOME of 200 entries",
            with_reads(true),
        ));
    }
    for (scenario, policy) in layers {
        let sandbox = nib_sandbox::Sandbox::new(&nib_sandbox::entry_beside(nib), policy);
        let mut f = || -> Result<(Duration, usize)> {
            let t = Instant::now();
            let w = sandbox
                .spawn(&["true".into()], work, &[])
                .map_err(|e| e.to_string())?;
            let o = w.wait(Some(Duration::from_secs(10)));
            if o.code != Some(0) {
                return Err(format!(
                    "{scenario}: true failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
            Ok((t.elapsed(), 0))
        };
        let mut bases: Baselines<'_> = vec![(
            "spawn true".into(),
            Box::new(|| run_program(work, &["true"])),
        )];
        let (s, _, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: scenario.into(),
            nib: s,
            chars: None,
            baselines: b,
        }
        .print();
    }
    Ok(())
}

fn print_header(n: usize, quick: bool) {
    println!(
        "nib-bench: {} iterations per scenario{}; times in ms, median (p10–p90)\n",
        n,
        if quick { " (--quick)" } else { "" }
    );
    println!("| scenario | nib | response chars | baseline median (p10–p90) | nib / baseline |");
    println!("|---|---|---|---|---|");
}

/// Writes `bytes` to `path` as a careful editor does: a temp file beside
/// it, fsynced, renamed over it, the folder fsynced (the durability nib's
/// own writes have).
fn atomic_write(path: &Path, bytes: &[u8]) -> Result<Duration> {
    let t = Instant::now();
    let tmp = path.with_extension("bench-tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
    f.write_all(bytes).map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| e.to_string())?;
    }
    Ok(t.elapsed())
}

/// The edit call against a plain atomic write of the same bytes; and, in
/// each sandbox mode, nibash `true` back to back, a burst of four calls
/// sent at once (as a client sends a turn's parallel calls) against one
/// call, and the first call of a session (300 ms after `initialize`)
/// against a warm one — each against its baseline in the same run.
fn speed_scenarios(nib: &Path, work: &Path, state: &Path, n: usize) -> Result<()> {
    let dir = work.join("speed");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let body = std::fs::read_to_string(work.join("f300.ts")).map_err(|e| e.to_string())?;
    write(&dir.join("f300.ts"), &body)?;
    write(&dir.join("plain.ts"), &body)?;
    {
        let mut srv = Server::spawn(nib, &dir, state)?;
        srv.initialize()?;
        let read = srv.call("read", json!({"paths": ["f300.ts:1-300"], "full": true}))?;
        let mut tag = tag_of(&read)?;
        let mut k = 0u64;
        let lines: Vec<String> = body.lines().map(str::to_string).collect();
        let mut f = || -> Result<(Duration, usize)> {
            k += 1;
            let (d, out) = time(|| {
                srv.call(
                    "edit",
                    json!({"input": format!("[f300.ts#{tag}]\nPUT 20:\n+    // edit {k}\n")}),
                )
            })?;
            tag = tag_of(&out)?;
            Ok((d, out.chars().count()))
        };
        // The reference filesystem server from npm, when installed under
        // target/peer-fs (docs/performance.md says how): its edit_file on
        // its own copy of the file, the same one-line change.
        let peer_bin = std::env::current_dir()
            .unwrap_or_default()
            .join("target/peer-fs/node_modules/.bin/mcp-server-filesystem");
        let mut peer = if peer_bin.exists() {
            write(&dir.join("peer.ts"), &body)?;
            let d = dir.display().to_string();
            let mut p = Server::spawn_args(&peer_bin, &[&d], &dir, state, &[])?;
            p.initialize()?;
            Some(p)
        } else {
            None
        };
        let peer_file = dir.join("peer.ts").display().to_string();
        let mut peer_line = lines.get(19).cloned().unwrap_or_default();
        let mut pk = 0u64;
        let plain = dir.join("plain.ts");
        let mut j = 0u64;
        let mut bases: Baselines<'_> = vec![(
            "atomic write of the same bytes (temp, fsync, rename, folder fsync)".into(),
            Box::new(move || {
                j += 1;
                let mut l = lines.clone();
                if l.len() > 19 {
                    l[19] = format!("    // edit {j}");
                }
                atomic_write(&plain, (l.join("\n") + "\n").as_bytes())
            }),
        )];
        if let Some(p) = peer.as_mut() {
            bases.push((
                "the reference filesystem server's edit_file".into(),
                Box::new(move || {
                    pk += 1;
                    let new_line = format!("    // peer edit {pk}");
                    let edit = json!({"path": peer_file, "edits": [{"oldText": peer_line, "newText": new_line}]});
                    let (d, _) = time(|| p.call("edit_file", edit))?;
                    peer_line = new_line;
                    Ok(d)
                }),
            ));
        }
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        drop(bases);
        Row {
            scenario: "edit alone (tag from the last answer) vs a plain atomic write".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
        // A read and five one-line edits, each answer's tag used by the
        // next, against the same with the filesystem server.
        if let Some(p) = peer.as_mut() {
            let mut round = 0u64;
            let mut f = || -> Result<(Duration, usize)> {
                round += 1;
                let t = Instant::now();
                let read = srv.call("read", json!({"paths": ["f300.ts:1-60"]}))?;
                let mut tag = tag_of(&read)?;
                let mut chars = 0;
                for line in [5usize, 15, 25, 35, 45] {
                    let out = srv.call(
                        "edit",
                        json!({"input": format!("[f300.ts#{tag}]\nPUT {line}:\n+    // round {round} line {line}\n")}),
                    )?;
                    tag = tag_of(&out)?;
                    chars += out.chars().count();
                }
                Ok((t.elapsed(), chars))
            };
            // The lines edited are made unique first: edit_file finds its
            // place by text.
            let mut current: Vec<String> = body.lines().map(str::to_string).collect();
            for line in [5usize, 15, 25, 35, 45] {
                if let Some(l) = current.get_mut(line - 1) {
                    *l = format!("    // start line {line}");
                }
            }
            let peer_path = dir.join("peer5.ts");
            write(&peer_path, &(current.join("\n") + "\n"))?;
            let peer_file = peer_path.display().to_string();
            let mut pr = 0u64;
            let mut bases: Baselines<'_> = vec![(
                "the filesystem server: read_text_file + 5 edit_file".into(),
                Box::new(move || {
                    pr += 1;
                    let t = Instant::now();
                    p.call("read_text_file", json!({"path": peer_file, "head": 60}))?;
                    for line in [5usize, 15, 25, 35, 45] {
                        let new_line = format!("    // round {pr} line {line}");
                        let old = current.get(line - 1).cloned().unwrap_or_default();
                        p.call(
                            "edit_file",
                            json!({"path": peer_file, "edits": [{"oldText": old, "newText": new_line}]}),
                        )?;
                        if let Some(l) = current.get_mut(line - 1) {
                            *l = new_line;
                        }
                    }
                    Ok(t.elapsed())
                }),
            )];
            let (s, c, b) = interleave(n.min(30), Some(&mut f), &mut bases)?;
            Row {
                scenario: "read + 5 sequential one-line edits vs the filesystem server".into(),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
    }
    let modes: [(&str, &[(&str, &str)]); 3] = [
        ("no sandbox", &[]),
        ("NIB_SANDBOX=1", &[("NIB_SANDBOX", "1")]),
        (
            "NIB_SANDBOX=1 NIB_SANDBOX_BWRAP=0",
            &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
        ),
    ];
    for (mode, env) in modes {
        let mut srv = Server::spawn_with(nib, &dir, state, env)?;
        srv.initialize()?;
        srv.call("nibash", json!({"command": "true"}))?;
        {
            let srv = &mut srv;
            let mut f = || -> Result<(Duration, usize)> {
                let (d, text) = time(|| srv.call("nibash", json!({"command": "true"})))?;
                Ok((d, text.chars().count()))
            };
            let d2 = dir.clone();
            let mut bases: Baselines<'_> = vec![(
                "bash -c 'true'".into(),
                Box::new(move || run_program(&d2, &["bash", "-c", "true"])),
            )];
            let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
            Row {
                scenario: format!("nibash `true` back to back, {mode}"),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
        {
            // A turn's calls come after the model thought (300 ms here; a
            // model's turn takes longer), four at once.
            let srv = std::cell::RefCell::new(&mut srv);
            let mut f = || -> Result<(Duration, usize)> {
                std::thread::sleep(Duration::from_millis(300));
                let calls = vec![json!({"command": "true"}); 4];
                let (d, texts) = time(|| srv.borrow_mut().call_many("nibash", &calls))?;
                Ok((d, texts.iter().map(|t| t.chars().count()).sum()))
            };
            let mut bases: Baselines<'_> = vec![(
                "one call".into(),
                Box::new(|| {
                    std::thread::sleep(Duration::from_millis(300));
                    time(|| srv.borrow_mut().call("nibash", json!({"command": "true"})))
                        .map(|(d, _)| d)
                }),
            )];
            let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
            Row {
                scenario: format!("nibash: 4 calls of `true` sent at once, {mode}"),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
        if env.is_empty() {
            // What the machine gives plain bash: four `bash -c true`
            // spawned at once against one (no nib): on two cores four
            // processes cannot take the time of one either.
            let d3 = dir.clone();
            let mut four = || -> Result<(Duration, usize)> {
                std::thread::sleep(Duration::from_millis(50));
                let t = Instant::now();
                let children: Vec<_> = (0..4)
                    .map(|_| {
                        Command::new("bash")
                            .args(["-c", "true"])
                            .current_dir(&d3)
                            .stdin(Stdio::null())
                            .spawn()
                            .map_err(|e| format!("bash: {e}"))
                    })
                    .collect::<Result<_>>()?;
                for mut c in children {
                    c.wait().map_err(|e| format!("bash: {e}"))?;
                }
                Ok((t.elapsed(), 0))
            };
            let d4 = dir.clone();
            let mut bases: Baselines<'_> = vec![(
                "one `bash -c true`".into(),
                Box::new(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    run_program(&d4, &["bash", "-c", "true"])
                }),
            )];
            let (s, c, b) = interleave(n, Some(&mut four), &mut bases)?;
            Row {
                scenario: "reference, no nib: 4 `bash -c true` spawned at once".into(),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
        {
            let srv = std::cell::RefCell::new(&mut srv);
            let mut f = || -> Result<(Duration, usize)> {
                let mut fresh = Server::spawn_with(nib, &dir, state, env)?;
                fresh.initialize()?;
                std::thread::sleep(Duration::from_millis(300));
                let (d, text) = time(|| fresh.call("nibash", json!({"command": "true"})))?;
                Ok((d, text.chars().count()))
            };
            let mut bases: Baselines<'_> = vec![(
                "a warm call (30 ms after the last)".into(),
                Box::new(|| {
                    std::thread::sleep(Duration::from_millis(30));
                    time(|| srv.borrow_mut().call("nibash", json!({"command": "true"})))
                        .map(|(d, _)| d)
                }),
            )];
            let (s, c, b) = interleave(n.min(20), Some(&mut f), &mut bases)?;
            Row {
                scenario: format!(
                    "nibash: the session's first call, 300 ms after initialize, {mode}"
                ),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
    }
    Ok(())
}

fn tag_of(answer: &str) -> Result<String> {
    let start = answer.find('#').ok_or("no tag in answer")?;
    Ok(answer[start + 1..start + 5].to_string())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("nib-bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let opts = parse_options()?;
    let nib = std::fs::canonicalize(&opts.nib).map_err(|e| {
        format!(
            "{}: {e}; build it with cargo build --release",
            opts.nib.display()
        )
    })?;
    let scratch = std::env::temp_dir().join(format!("nib-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let work = scratch.join("work");
    let state = scratch.join("state");
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let n = opts.iterations;
    match opts.only.as_deref() {
        Some("deciders") => return decider_scenarios(&nib, n.min(10)),
        Some("proxy") => return proxy_scenarios(&nib, &scratch, n),
        Some("providers") => return provider_scenarios(&nib, &scratch, n),
        Some("names") => return names_scenarios(&nib, &scratch, n.min(20), opts.jvm.as_ref()),
        Some("start") => return start_scenarios(&nib, &work, n),
        Some("speed") => {
            let mut rng = Rng(42);
            write(&work.join("f300.ts"), &source_file(&mut rng, 300, false))?;
            print_header(n, opts.quick);
            return speed_scenarios(&nib, &work, &state, n);
        }
        Some(other) => {
            return Err(format!(
                "--only {other}: the groups are deciders, proxy, providers, names, start and speed"
            ));
        }
        None => {}
    }

    let mut rng = Rng(42);
    write(&work.join("f300.ts"), &source_file(&mut rng, 300, false))?;
    let mut big = source_file(&mut rng, 5000, true);
    big.push_str("/// The benchmark's own declaration.\npub fn main() {\n    let x = 1;\n    let y = x + 1;\n    println!(\"{}\", y);\n}\n");
    write(&work.join("f5000.rs"), &big)?;
    let tree = match &opts.tree {
        Some(t) => std::fs::canonicalize(t).map_err(|e| format!("{}: {e}", t.display()))?,
        None => {
            let files = if opts.quick { 2_000 } else { 30_000 };
            let t = scratch.join("tree");
            let (d, _) = time(|| generate_tree(&t, files))?;
            eprintln!("generated {files} files in {:.1}s", d.as_secs_f64());
            t
        }
    };

    print_header(n, opts.quick);
    let mut peak_kib = 0u64;

    // Cold start to the first tools/list answer.
    {
        let mut nib_cold = || -> Result<(Duration, usize)> {
            let t = Instant::now();
            let mut s = Server::spawn(&nib, &work, &state)?;
            s.initialize()?;
            let list = s.request("tools/list", json!({}))?;
            Ok((t.elapsed(), list.to_string().len()))
        };
        let mut bases: Baselines<'_> = vec![(
            "spawn true".into(),
            Box::new(|| run_program(&work, &["true"])),
        )];
        let (s, c, b) = interleave(n.min(30), Some(&mut nib_cold), &mut bases)?;
        Row {
            scenario: "cold start → tools/list".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    let mut server = Server::spawn(&nib, &work, &state)?;
    server.initialize()?;
    let _ = MAIN_SERVER.set(server.child.id());

    // read a 300-line file.
    {
        let srv = &mut server;
        let mut f = || -> Result<(Duration, usize)> {
            // A range, so the whole file prints (without one, code over 200 lines is outlined).
            let (d, text) =
                time(|| srv.call("read", json!({"paths": ["f300.ts:1-300"], "full": true})))?;
            Ok((d, text.chars().count()))
        };
        let mut bases: Baselines<'_> = vec![(
            "cat".into(),
            Box::new(|| run_program(&work, &["cat", "f300.ts"])),
        )];
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: "read 300-line file".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // read lines 100-150 of a 5,000-line file.
    {
        let srv = &mut server;
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) =
                time(|| srv.call("read", json!({"paths": ["f5000.rs:100-150"], "full": true})))?;
            Ok((d, text.chars().count()))
        };
        let mut bases: Baselines<'_> = vec![(
            "sed -n".into(),
            Box::new(|| run_program(&work, &["sed", "-n", "100,150p", "f5000.rs"])),
        )];
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: "read lines 100–150 of 5,000".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // A single-line edit (read, then edit), and the edit alone.
    {
        let srv = &mut server;
        let mut flip = false;
        let mut f = || -> Result<(Duration, usize)> {
            flip = !flip;
            let t = Instant::now();
            let read = srv.call("read", json!({"paths": ["f300.ts:10-12"]}))?;
            let tag = tag_of(&read)?;
            let row = if flip {
                "    // edited by the benchmark"
            } else {
                "    // edited again"
            };
            let out = srv.call(
                "edit",
                json!({"input": format!("[f300.ts#{tag}]\nPUT 11:\n+{row}\n")}),
            )?;
            Ok((t.elapsed(), out.chars().count()))
        };
        let mut bases: Baselines<'_> = vec![(
            "sed -i".into(),
            Box::new(|| run_program(&work, &["sed", "-i", "11s/edited/edited/", "f300.ts"])),
        )];
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: "read + single-line edit".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }
    {
        let srv = &mut server;
        let read = srv.call("read", json!({"paths": ["f300.ts:1-300"], "full": true}))?;
        let mut tag = tag_of(&read)?;
        let mut k = 0u64;
        let mut f = || -> Result<(Duration, usize)> {
            k += 1;
            let (d, out) = time(|| {
                srv.call(
                    "edit",
                    json!({"input": format!("[f300.ts#{tag}]\nPUT 20:\n+    // edit {k}\n")}),
                )
            })?;
            tag = tag_of(&out)?;
            Ok((d, out.chars().count()))
        };
        let (s, c, b) = interleave(n, Some(&mut f), &mut [])?;
        Row {
            scenario: "edit alone (tag from the last answer)".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // Five sequential edits to one file.
    {
        let srv = &mut server;
        let mut round = 0u64;
        let mut f = || -> Result<(Duration, usize)> {
            round += 1;
            let t = Instant::now();
            let read = srv.call("read", json!({"paths": ["f5000.rs:1-60"]}))?;
            let mut tag = tag_of(&read)?;
            let mut chars = 0;
            for line in [5usize, 15, 25, 35, 45] {
                let out = srv.call(
                    "edit",
                    json!({"input": format!("[f5000.rs#{tag}]\nPUT {line}:\n+    // round {round} line {line}\n")}),
                )?;
                tag = tag_of(&out)?;
                chars += out.chars().count();
            }
            Ok((t.elapsed(), chars))
        };
        let mut bases: Baselines<'_> = vec![(
            "5 × sed -i".into(),
            Box::new(|| {
                let mut total = Duration::ZERO;
                for line in [5, 15, 25, 35, 45] {
                    total += run_program(
                        &work,
                        &["sed", "-i", &format!("{line}s/round/round/"), "f5000.rs"],
                    )?;
                }
                Ok(total)
            }),
        )];
        let (s, c, b) = interleave(n.min(30), Some(&mut f), &mut bases)?;
        Row {
            scenario: "read + 5 sequential edits".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // Languages: the outline of a 5,000-line file, and a declaration read,
    // cold (first parse) and warm (cached tree), against a line-range read.
    {
        let srv = &mut server;
        // A fresh copy for the cold parse, so no cached tree helps it.
        let mut k = 0u32;
        let mut cold = || -> Result<(Duration, usize)> {
            k += 1;
            let name = format!("cold{k}.rs");
            let body = std::fs::read(work.join("f5000.rs")).map_err(|e| e.to_string())?;
            let mut body = body;
            body.extend_from_slice(format!("\n// copy {k}\n").as_bytes());
            std::fs::write(work.join(&name), body).map_err(|e| e.to_string())?;
            let (d, text) = time(|| {
                srv.call(
                    "read",
                    json!({"paths": [format!("{name}:{LANG_DECL}")], "full": true}),
                )
            })?;
            Ok((d, text.chars().count()))
        };
        let (s, c, b) = interleave(n.min(20), Some(&mut cold), &mut [])?;
        Row {
            scenario: "declaration read, cold (first parse of 5,000 lines)".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
        let mut warm = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| {
                srv.call(
                    "read",
                    json!({"paths": [format!("f5000.rs:{LANG_DECL}")], "full": true}),
                )
            })?;
            Ok((d, text.chars().count()))
        };
        let warm_stat = interleave(n, Some(&mut warm), &mut [])?;
        let srv2 = &mut server;
        let mut range = || -> Result<(Duration, usize)> {
            let (d, text) =
                time(|| srv2.call("read", json!({"paths": ["f5000.rs:100-112"], "full": true})))?;
            Ok((d, text.chars().count()))
        };
        let range_stat = interleave(n, Some(&mut range), &mut [])?;
        let ratio = match (&warm_stat.0, &range_stat.0) {
            (Some(w), Some(r)) => {
                format!("{:.2}x", w.median.as_secs_f64() / r.median.as_secs_f64())
            }
            _ => "–".into(),
        };
        if let (Some(w), Some(r)) = (&warm_stat.0, &range_stat.0) {
            println!(
                "| declaration read, warm (cached tree) | {} ({}–{}) | {} | line-range read {} ({}–{}) | {ratio} |",
                ms(w.median),
                ms(w.p10),
                ms(w.p90),
                warm_stat.1.unwrap_or(0),
                ms(r.median),
                ms(r.p10),
                ms(r.p90)
            );
        }
        let srv = &mut server;
        let mut outline = || -> Result<(Duration, usize)> {
            let (d, text) =
                time(|| srv.call("read", json!({"paths": ["f5000.rs"], "full": true})))?;
            Ok((d, text.chars().count()))
        };
        let (s, c, b) = interleave(n, Some(&mut outline), &mut [])?;
        Row {
            scenario: "outline of a 5,000-line file".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    // The large tree: nib's grep and find come with their issue; the baselines run now.
    {
        let tree_files: Vec<PathBuf> = walk(&tree, 200);
        let srv = &mut server;
        let mut i = 0;
        let files = &tree_files;
        let mut f = || -> Result<(Duration, usize)> {
            let p = files
                .get(i % files.len().max(1))
                .ok_or("the tree has no files")?;
            i += 1;
            let (d, text) = time(|| srv.call("read", json!({"paths": [p.display().to_string()]})))?;
            Ok((d, text.chars().count()))
        };
        let mut j = 0;
        let mut bases: Baselines<'_> = vec![(
            "cat".into(),
            Box::new(|| {
                let p = files
                    .get(j % files.len().max(1))
                    .ok_or("the tree has no files")?;
                j += 1;
                run_program(&work, &["cat", &p.display().to_string()])
            }),
        )];
        let (s, c, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: "read tree files, one per call".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();

        let t = tree.display().to_string();
        let reps = if opts.quick { 5 } else { 15 };
        let literal =
            json!({"pattern": "TODO check session", "literal": true, "paths": [t.clone()]});
        let regex =
            json!({"pattern": "fn [a-z]+token\\(", "before": 1, "after": 1, "paths": [t.clone()]});
        for (scenario, args, base) in [
            (
                "grep literal across the tree",
                literal,
                vec![
                    ("grep -rn", vec!["grep", "-rn", "TODO check session"]),
                    ("rg", vec!["rg", "-n", "TODO check session"]),
                ],
            ),
            (
                "grep regex with context across the tree",
                regex,
                vec![
                    (
                        "grep -rnE -C1",
                        vec!["grep", "-rnE", "-C1", "fn [a-z]+token\\("],
                    ),
                    ("rg -C1", vec!["rg", "-n", "-C1", "fn [a-z]+token\\("]),
                ],
            ),
        ] {
            let srv = &mut server;
            let mut f = || -> Result<(Duration, usize)> {
                let (d, text) = time(|| srv.call("grep", args.clone()))?;
                Ok((d, text.chars().count()))
            };
            let mut bases: Baselines<'_> = Vec::new();
            for (name, argv) in base {
                if have(argv[0]) {
                    let work = &work;
                    let t = &t;
                    bases.push((
                        name.to_string(),
                        Box::new(move || {
                            let mut full = argv.clone();
                            full.push(t.as_str());
                            run_program(work, &full)
                        }),
                    ));
                }
            }
            let (s, c, b) = interleave(reps, Some(&mut f), &mut bases)?;
            Row {
                scenario: scenario.into(),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
            peak_kib = peak_kib.max(server.peak_kib().unwrap_or(0));
        }
        let srv = &mut server;
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| srv.call("find", json!({"paths": [t.clone()]})))?;
            Ok((d, text.chars().count()))
        };
        let mut finds: Baselines<'_> = vec![(
            "find".into(),
            Box::new(|| run_program(&work, &["find", &t, "-type", "f"])),
        )];
        let (s, c, b) = interleave(reps, Some(&mut f), &mut finds)?;
        Row {
            scenario: "find over the tree".into(),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }
    // The hook runs on every tool call of Claude Code: one invocation, end to end.
    {
        let event = json!({"hook_event_name": "PreToolUse", "session_id": "bench", "tool_name": "mcp__nib__read",
                           "tool_use_id": "toolu_bench", "tool_input": {}})
        .to_string();
        let mut f = || -> Result<(Duration, usize)> {
            let t = Instant::now();
            let mut child = Command::new(&nib)
                .arg("hook")
                .env("NIB_STATE_DIR", &state)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin
                    .write_all(event.as_bytes())
                    .map_err(|e| e.to_string())?;
            }
            let status = child.wait().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err("nib hook failed".into());
            }
            Ok((t.elapsed(), 0))
        };
        let mut bases: Baselines<'_> = vec![(
            "spawn true".into(),
            Box::new(|| run_program(&work, &["true"])),
        )];
        let (s, _, b) = interleave(n.min(40), Some(&mut f), &mut bases)?;
        Row {
            scenario: "nib hook (PreToolUse of a nib tool)".into(),
            nib: s,
            chars: None,
            baselines: b,
        }
        .print();
    }

    start_scenarios(&nib, &work, n.min(40))?;
    speed_scenarios(&nib, &work, &state, n.min(40))?;
    // nibash end to end: a call of `true` and of `cat` on a 300-line file,
    // without and with the sandbox, against bash running the same line.
    let modes: [(&str, &[(&str, &str)]); 3] = [
        ("no sandbox", &[]),
        ("NIB_SANDBOX=1", &[("NIB_SANDBOX", "1")]),
        (
            "NIB_SANDBOX=1 NIB_SANDBOX_BWRAP=0 (Landlock + seccomp)",
            &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
        ),
    ];
    for (mode, env) in modes {
        let mut sandboxed;
        let srv: &mut Server = if env.is_empty() {
            &mut server
        } else {
            sandboxed = Server::spawn_with(&nib, &work, &state, env)?;
            sandboxed.initialize()?;
            &mut sandboxed
        };
        for (what, line) in [("`true`", "true"), ("`cat` of 300 lines", "cat f300.ts")] {
            let mut f = || -> Result<(Duration, usize)> {
                // An agent thinks between calls: the next worker is ready by
                // then (a 30 ms pause, not timed; back to back a call may
                // find the next worker still starting).
                std::thread::sleep(Duration::from_millis(30));
                let (d, text) = time(|| srv.call("nibash", json!({"command": line})))?;
                Ok((d, text.chars().count()))
            };
            let mut bases: Baselines<'_> = vec![(
                format!("bash -c '{line}'"),
                Box::new(|| run_program(&work, &["bash", "-c", line])),
            )];
            let (s, c, b) = interleave(n.min(40), Some(&mut f), &mut bases)?;
            Row {
                scenario: format!("nibash {what} (30 ms after the last call), {mode}"),
                nib: s,
                chars: c,
                baselines: b,
            }
            .print();
        }
        if !env.is_empty() {
            peak_kib = peak_kib.max(srv.peak_kib().unwrap_or(0));
        }
    }
    // The exec-time layer: a call that runs 100 programs, in a project with
    // a program rule (every exec goes to the broker's supervisor) and in one
    // without (no filter at all), each mode side by side.
    for confined in [false, true] {
        const EXECS: u32 = 100;
        // Both without warm workers (a call with rules never gets one), so
        // the difference is the exec check alone.
        let env: &[(&str, &str)] = if confined {
            &[("NIB_SANDBOX", "1"), ("NIB_WARM", "0")]
        } else {
            &[("NIB_WARM", "0")]
        };
        let mode = if confined {
            "NIB_SANDBOX=1"
        } else {
            "no sandbox"
        };
        let plain_dir = scratch.join(format!("execs-plain-{confined}"));
        let ruled_dir = scratch.join(format!("execs-ruled-{confined}"));
        for d in [&plain_dir, &ruled_dir] {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        }
        std::fs::write(
            ruled_dir.join("nib.json"),
            r#"{"rules": [{"program": "nib-bench-forbidden", "why": "a rule for the benchmark"}]}"#,
        )
        .map_err(|e| e.to_string())?;
        let mut plain = Server::spawn_with(&nib, &plain_dir, &state, env)?;
        plain.initialize()?;
        let mut ruled = Server::spawn_with(&nib, &ruled_dir, &state, env)?;
        ruled.initialize()?;
        let line = format!("for i in $(seq {EXECS}); do /bin/true; done");
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| ruled.call("nibash", json!({"command": line})))?;
            if text.contains("refused") {
                return Err(format!("the benchmark's execs were refused: {text}"));
            }
            Ok((d, text.chars().count()))
        };
        let plain_line = line.clone();
        let bash_dir = plain_dir.clone();
        let bash_line = line.clone();
        let mut bases: Baselines<'_> = vec![
            (
                "same call, no rules".into(),
                Box::new(move || {
                    time(|| plain.call("nibash", json!({"command": plain_line}))).map(|(d, _)| d)
                }),
            ),
            (
                format!("bash -c '{line}'"),
                Box::new(move || run_program(&bash_dir, &["bash", "-c", &bash_line])),
            ),
        ];
        let (s, c, b) = interleave(n.min(30), Some(&mut f), &mut bases)?;
        if let (Some(with), Some((_, without))) = (&s, b.first()) {
            let per = with.median.saturating_sub(without.median) / EXECS;
            println!(
                "  exec-time rules cost per exec ({mode}): {:.3} ms (median of the call with rules minus without, / {EXECS})",
                per.as_secs_f64() * 1000.0
            );
        }
        Row {
            scenario: format!("nibash {EXECS} execs of /bin/true with a program rule, {mode}"),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }
    // After each call nibash walks the roots for changed files: its cost in
    // a project the size of the tree.
    {
        let mut in_tree = Server::spawn(&nib, &tree, &state)?;
        in_tree.initialize()?;
        let srv = &mut in_tree;
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| srv.call("nibash", json!({"command": "true"})))?;
            Ok((d, text.chars().count()))
        };
        let tree_dir = tree.clone();
        let mut bases: Baselines<'_> = vec![(
            "bash -c 'true'".into(),
            Box::new(move || run_program(&tree_dir, &["bash", "-c", "true"])),
        )];
        let (s, c, b) = interleave(n.min(40), Some(&mut f), &mut bases)?;
        Row {
            scenario: format!(
                "nibash `true` in the tree ({} files), no sandbox",
                count_files(&tree)
            ),
            nib: s,
            chars: c,
            baselines: b,
        }
        .print();
    }

    names_scenarios(&nib, &scratch, n.min(20), opts.jvm.as_ref())?;
    git_scenarios(&nib, &scratch, n.min(20))?;
    decider_scenarios(&nib, n.min(10))?;
    proxy_scenarios(&nib, &scratch, n)?;
    provider_scenarios(&nib, &scratch, n)?;

    peak_kib = peak_kib.max(server.peak_kib().unwrap_or(0));
    println!(
        "\nthe main server's memory after each scenario (MiB; the peak where a scenario raised it):"
    );
    println!(
        "  {:>6} {:>8} {:>6} {:>6}",
        "peak", "resident", "heap", "files"
    );
    let mut last = 0;
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    for (scenario, m) in PEAK_AFTER.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let peak = if m.peak > last {
            mib(m.peak)
        } else {
            String::new()
        };
        last = last.max(m.peak);
        println!(
            "  {peak:>6} {:>8} {:>6} {:>6}  after {scenario}",
            mib(m.resident),
            mib(m.anon),
            mib(m.file)
        );
    }
    println!(
        "\npeak memory of the server (VmHWM): {:.1} MiB; tree: {} ({} files)",
        peak_kib as f64 / 1024.0,
        if opts.tree.is_some() {
            tree.display().to_string()
        } else {
            "generated".into()
        },
        count_files(&tree)
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// A JVM project with a deep package tree: 6 packages of 2 subpackages
/// under `com/example/platform/orm`, 8 classes each, half as many tests;
/// 20 classes hold the word `checkpoint`.
fn generate_jvm(root: &Path) -> Result<()> {
    let mut rng = Rng(0x6a76_6d21);
    let mut marked = 0;
    for (set, per) in [("main", 8), ("test", 4)] {
        for pkg in [
            "workflow",
            "repository",
            "model",
            "service",
            "query",
            "mapping",
        ] {
            for sub in ["impl", "api"] {
                let dir = root.join(format!(
                    "src/{set}/java/com/example/platform/orm/{pkg}/{sub}"
                ));
                for i in 0..per {
                    let class = format!(
                        "{}{}{i}",
                        ident(&mut rng),
                        if set == "test" { "Test" } else { "" }
                    );
                    let mut body = format!(
                        "package com.example.platform.orm.{pkg}.{sub};\n\nimport java.util.List;\nimport java.util.Map;\n\n/** The {class} of {pkg}. */\npublic class {class} {{\n    private final List<String> items;\n\n    public {class}(List<String> items) {{\n        this.items = items;\n    }}\n"
                    );
                    for m in 0..(20 + rng.below(30)) {
                        let word = if marked < 20 && m == 3 {
                            marked += 1;
                            "checkpoint"
                        } else {
                            rng.pick(WORDS)
                        };
                        body.push_str(&format!(
                            "\n    /** Returns the {word} for a {}. */\n    public int {}{m}(Map<String, Integer> input, int limit) {{\n        int total = limit;\n        for (String item : items) {{\n            total += input.getOrDefault(item, {m});\n        }}\n        return total;\n    }}\n",
                            rng.pick(WORDS),
                            ident(&mut rng).to_lowercase()
                        ));
                    }
                    body.push_str("}\n");
                    write(&dir.join(format!("{class}.java")), &body)?;
                }
            }
        }
    }
    Ok(())
}

/// A provider's tool through nib (the call forwarded to the provider in
/// its worker, its locations read as anchored rows) against the same call
/// made to the provider directly, over stdio in both cases. The provider is
/// the test suite's (`examples/nib-test-provider.rs`, built beside nib by
/// `bench/run.sh`); without it the scenario says so and is skipped.
fn provider_scenarios(nib: &Path, scratch: &Path, n: usize) -> Result<()> {
    let provider = nib
        .parent()
        .map(|d| d.join("examples/nib-test-provider"))
        .filter(|p| p.exists());
    let Some(provider) = provider else {
        println!("  providers: skipped (build examples/nib-test-provider beside nib)");
        return Ok(());
    };
    let dir = scratch.join("provider-project");
    std::fs::create_dir_all(dir.join("src")).map_err(|e| e.to_string())?;
    let mut rng = Rng(7);
    for i in 0..20 {
        let mut text = source_file(&mut rng, 200, false);
        if i % 4 == 0 {
            text.push_str("// needle: the line the provider finds\n");
        }
        write(&dir.join(format!("src/m{i}.ts")), &text)?;
    }
    write(
        &dir.join("nib.json"),
        &json!({"providers": {"zemble": {"command": [provider.display().to_string()]}}})
            .to_string(),
    )?;
    let state = scratch.join("provider-state");
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let mut through = Server::spawn(nib, &dir, &state)?;
    through.initialize()?;
    // The first call waits for the provider to start.
    through.call("zemble_search", json!({"query": "needle"}))?;
    let mut direct = Server::spawn(&provider, &dir, &state)?;
    direct.initialize()?;
    let mut nib_call = || -> Result<(Duration, usize)> {
        let (d, text) = time(|| through.call("zemble_search", json!({"query": "needle"})))?;
        Ok((d, text.chars().count()))
    };
    let direct_call = || -> Result<Duration> {
        Ok(time(|| direct.call("search", json!({"query": "needle"})))?.0)
    };
    let (s, c, b) = interleave(
        n,
        Some(&mut nib_call),
        &mut [(
            "the provider called directly".to_string(),
            Box::new(direct_call),
        )],
    )?;
    Row {
        scenario: "provider tool through nib (5 locations as anchored rows)".into(),
        nib: s,
        chars: c,
        baselines: b,
    }
    .print();
    Ok(())
}

/// Named directories: the characters an agent gets, and the time, for the
/// same calls in a generated JVM project with names (the JVM source roots',
/// then automatic ones) and without (`"autoDirectories": false` and
/// `NIB_AUTO_NAMES=0` for the plain copy).
fn names_scenarios(
    nib: &Path,
    scratch: &Path,
    n: usize,
    jvm: Option<&(PathBuf, String)>,
) -> Result<()> {
    let named_dir = scratch.join("jvm-named");
    let plain_dir = scratch.join("jvm-plain");
    if let Some((repo, _)) = jvm {
        for d in [&named_dir, &plain_dir] {
            let cloned = Command::new("git")
                .args(["clone", "-q"])
                .arg(repo)
                .arg(d)
                .status()
                .map_err(|e| format!("git clone: {e}"))?;
            if !cloned.success() {
                return Err(format!("git clone {} failed", repo.display()));
            }
        }
    }
    for d in [&named_dir, &plain_dir] {
        if jvm.is_some() {
            break;
        }
        generate_jvm(d)?;
        let git = |args: &[&str]| {
            Command::new("git")
                .args(args)
                .current_dir(d)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
        };
        if git(&["init", "-q"]).is_ok() {
            let _ = git(&["add", "-A"]);
            let _ = git(&[
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@example.org",
                "commit",
                "-qm",
                "start",
            ]);
        }
    }
    // Without names: nib.json turns the JVM roots' names off (and git
    // leaves the file out of `git status`, so both answers list the same).
    write(
        &plain_dir.join("nib.json"),
        "{\"autoDirectories\": false}\n",
    )?;
    let exclude = plain_dir.join(".git/info/exclude");
    let mut excluded = std::fs::read_to_string(&exclude).unwrap_or_default();
    excluded.push_str("\nnib.json\n");
    write(&exclude, &excluded)?;
    let long = walk(&named_dir.join("src/main/java"), 20_000)
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .ok_or("no Java file under src/main/java")?;
    let rel = long
        .strip_prefix(&named_dir)
        .map_err(|e| e.to_string())?
        .to_string_lossy()
        .into_owned();
    // A few changes for git status: edited and new files in deep packages.
    for d in [&named_dir, &plain_dir] {
        for (i, f) in walk(&d.join("src/main/java"), 20_000).iter().enumerate() {
            if i % 9 == 0 {
                // Appended as bytes: a real repository's sources need not be UTF-8.
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(f)
                    .and_then(|mut file| file.write_all(b"// edited\n"))
                    .map_err(|e| format!("{}: {e}", f.display()))?;
            }
        }
        let beside = d.join(&rel);
        let folder = beside.parent().ok_or("the long class has no folder")?;
        write(&folder.join("NewStep.java"), "class NewStep {}\n")?;
    }
    let state = scratch.join("names-state");
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let mut named = Server::spawn_with(nib, &named_dir, &state, &[])?;
    named.initialize()?;
    let mut plain = Server::spawn_with(nib, &plain_dir, &state, &[("NIB_AUTO_NAMES", "0")])?;
    plain.initialize()?;
    let pattern = jvm.map_or("checkpoint", |(_, p)| p.as_str());
    let calls: Vec<(&str, &str, Value)> = vec![
        (
            "read of a long class (outline)",
            "read",
            json!({"paths": [rel]}),
        ),
        (
            "grep of a literal (about 20 files)",
            "grep",
            json!({"pattern": pattern, "literal": true, "paths": ["src"]}),
        ),
        ("find src", "find", json!({"paths": ["src"], "skip": 0})),
        (
            "nibash git status",
            "nibash",
            json!({"command": "git status"}),
        ),
    ];
    let (mut all_named, mut all_plain) = (0usize, 0usize);
    for (what, tool, args) in calls {
        let mut plain_chars = 0;
        let mut plain_times = Vec::new();
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| named.call(tool, args.clone()))?;
            let (pd, ptext) = time(|| plain.call(tool, args.clone()))?;
            plain_times.push(pd);
            plain_chars = ptext.chars().count();
            // NIB_BENCH_SHOW=DIR keeps both answers, to see what names save.
            if let Some(dir) = std::env::var_os("NIB_BENCH_SHOW") {
                let dir = PathBuf::from(dir);
                let _ = std::fs::create_dir_all(&dir);
                let _ = std::fs::write(dir.join(format!("{tool}.named")), &text);
                let _ = std::fs::write(dir.join(format!("{tool}.plain")), &ptext);
            }
            Ok((d, text.chars().count()))
        };
        let (s, c, _) = interleave(n, Some(&mut f), &mut [])?;
        let named_chars = c.unwrap_or(0);
        all_named += named_chars;
        all_plain += plain_chars;
        Row {
            scenario: format!("names: {what} (JVM project)"),
            nib: s,
            chars: c,
            baselines: vec![(
                format!("without names ({plain_chars} chars)"),
                stat(plain_times),
            )],
        }
        .print();
    }
    println!(
        "  names: {all_named} characters against {all_plain} without ({:.0}% fewer)",
        100.0 * (1.0 - all_named as f64 / all_plain.max(1) as f64)
    );
    Ok(())
}

/// nibash's git and find against the programs' own output (characters as
/// plain bash prints them; time against the same command piped through
/// `cat`, which nib leaves as the program printed it), in a clone of this
/// repository with a 10-file change in the work tree.
fn git_scenarios(nib: &Path, scratch: &Path, n: usize) -> Result<()> {
    let top = Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let Some(top) = top else {
        println!("  git: not run from a git repository; skipped");
        return Ok(());
    };
    let repo = scratch.join("git-clone");
    let cloned = Command::new("git")
        .args(["clone", "-q"])
        .arg(&top)
        .arg(&repo)
        .status()
        .map_err(|e| e.to_string())?;
    if !cloned.success() {
        return Err("git clone of this repository failed".into());
    }
    let files = Command::new("git")
        .args(["ls-files", "*.rs"])
        .current_dir(&repo)
        .output()
        .map_err(|e| e.to_string())?;
    let listed = String::from_utf8_lossy(&files.stdout).into_owned();
    // A commit of 10 changed files (for `git show HEAD`), then 10 other
    // files changed in the work tree (for status and diff).
    let change = |skip: usize| -> Result<()> {
        for (i, f) in listed.lines().skip(skip).step_by(7).take(10).enumerate() {
            let path = repo.join(f);
            let mut text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
            text = text.replacen("\n", &format!("\n// bench change {i}\n"), 3);
            write(&path, &text)?;
        }
        Ok(())
    };
    change(0)?;
    let committed = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.org",
        ])
        .args(["commit", "-qam", "bench: a 10-file change"])
        .current_dir(&repo)
        .status()
        .map_err(|e| e.to_string())?;
    if !committed.success() {
        return Err("git commit in the bench clone failed".into());
    }
    change(3)?;
    write(&repo.join("notes/new-a.md"), "a\n")?;
    write(&repo.join("notes/new-b.md"), "b\n")?;
    let state = scratch.join("git-state");
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let mut server = Server::spawn_with(nib, &repo, &state, &[])?;
    server.initialize()?;
    let (mut all_nib, mut all_raw) = (0usize, 0usize);
    for command in [
        "git status",
        "git diff",
        "git log -10",
        "git show HEAD",
        "git diff --stat",
        "find .",
    ] {
        // What the program prints, as plain bash would hand it over.
        let raw = Command::new("bash")
            .args(["-c", &format!("{command} 2>&1")])
            .current_dir(&repo)
            .output()
            .map_err(|e| e.to_string())?;
        let raw_chars = String::from_utf8_lossy(&raw.stdout).chars().count();
        let mut raw_times = Vec::new();
        let srv = &mut server;
        let mut f = || -> Result<(Duration, usize)> {
            let (d, text) = time(|| srv.call("nibash", json!({ "command": command })))?;
            let piped = format!("{command} | cat");
            let (rd, _) = time(|| srv.call("nibash", json!({ "command": piped })))?;
            raw_times.push(rd);
            Ok((d, text.chars().count()))
        };
        let (s, c, _) = interleave(n, Some(&mut f), &mut [])?;
        all_nib += c.unwrap_or(0);
        all_raw += raw_chars;
        Row {
            scenario: format!("nibash `{command}` (this repository, 10 files changed)"),
            nib: s,
            chars: c,
            baselines: vec![(
                format!("its own output ({raw_chars} chars), time of `| cat`"),
                stat(raw_times),
            )],
        }
        .print();
    }
    println!(
        "  git and find: {all_nib} characters against the programs' own {all_raw} ({:.0}% of them)",
        100.0 * all_nib as f64 / all_raw.max(1) as f64
    );
    Ok(())
}

/// Long output: for each log of the corpus (real tools run on purpose-built
/// failing projects, `bench/corpus/`), what each decider keeps — recall of
/// the lines a developer must see (by a rule per tool, `must_see.rs`, or
/// listed in `must.txt`), the characters the model gets as a share of the
/// log's, and the time of `nib shape` on it (a whole process).
fn decider_scenarios(nib: &Path, n: usize) -> Result<()> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let must = std::fs::read_to_string(corpus.join("must.txt")).map_err(|e| e.to_string())?;
    let mut marks: Vec<(String, String)> = Vec::new();
    for line in must
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, text) = line.split_once('\t').ok_or("must.txt: NAME<TAB>TEXT")?;
        marks.push((name.to_string(), text.to_string()));
    }
    let mut names: Vec<String> = std::fs::read_dir(corpus.join("outputs"))
        .map_err(|e| e.to_string())?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|f| f.strip_suffix(".log"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    // Each log's must-see lines: by its tool's rule, else from must.txt.
    let mut musts: Vec<(String, String, Vec<usize>)> = Vec::new();
    for name in &names {
        let log = corpus.join("outputs").join(format!("{name}.log"));
        let text = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let lines: Vec<&str> = text.lines().collect();
        let at = match must_see::must_see(name, &lines) {
            Some(at) => at,
            None => {
                let mut at = Vec::new();
                for (_, m) in marks.iter().filter(|(n, _)| n == name) {
                    let found: Vec<usize> = lines
                        .iter()
                        .enumerate()
                        .filter(|(_, l)| l.contains(m.as_str()))
                        .map(|(i, _)| i + 1)
                        .collect();
                    if found.len() != 1 {
                        return Err(format!(
                            "must.txt: {name}: {m:?} matches {} lines",
                            found.len()
                        ));
                    }
                    at.push(found[0]);
                }
                at
            }
        };
        if at.is_empty() {
            return Err(format!(
                "{name}: no must-see line (no rule, nothing in must.txt)"
            ));
        }
        musts.push((name.clone(), text, at));
    }
    for decider in ["keywords", "fixed"] {
        let (mut found, mut total, mut kept_chars, mut all_chars) =
            (0usize, 0usize, 0usize, 0usize);
        // Runs of 1,000 lines or more, apart.
        let (mut long_kept, mut long_all) = (0usize, 0usize);
        let mut times = Vec::new();
        let mut per_log = Vec::new();
        for (name, text, at) in &musts {
            let log = corpus.join("outputs").join(format!("{name}.log"));
            let lines: Vec<&str> = text.lines().collect();
            let mut shaped = String::new();
            for _ in 0..n {
                let started = Instant::now();
                let out = Command::new(nib)
                    .args(["shape", "--log"])
                    .arg(&log)
                    .args(["--purpose", "build and test the project"])
                    .env("NIB_DECIDER", decider)
                    .output()
                    .map_err(|e| e.to_string())?;
                times.push(started.elapsed());
                shaped = String::from_utf8_lossy(&out.stdout).into_owned();
            }
            // Kept rows print as `N|TEXT` when the log is cut, else whole.
            let cut = lines.len() > 400 || text.len() > 30 * 1024;
            let kept: std::collections::BTreeSet<usize> = if cut {
                shaped
                    .lines()
                    .filter_map(|l| l.split_once('|').and_then(|(n, _)| n.parse().ok()))
                    .collect()
            } else {
                (1..=lines.len()).collect()
            };
            let missed: Vec<String> = at
                .iter()
                .filter(|n| !kept.contains(n))
                .map(|&n| format!("{n}: {}", lines.get(n - 1).copied().unwrap_or_default()))
                .collect();
            total += at.len();
            found += at.len() - missed.len();
            let (k, a) = (shaped.chars().count(), text.chars().count());
            kept_chars += k;
            all_chars += a;
            if lines.len() >= 1000 {
                long_kept += k;
                long_all += a;
            }
            per_log.push(format!(
                "{name} {}/{} {:.1}%{}",
                at.len() - missed.len(),
                at.len(),
                100.0 * k as f64 / a.max(1) as f64,
                if cut { "" } else { " (whole)" }
            ));
            if !missed.is_empty() {
                println!("  {decider} missed in {name}: {}", missed.join("; "));
            }
        }
        let s = stat(times);
        println!(
            "| long output, decider `{decider}` ({} logs, {total} must-see lines) | {} ({}–{}) | {kept_chars} | recall {:.3}, {:.1}% of the logs' {all_chars} chars | – |",
            names.len(),
            ms(s.median),
            ms(s.p10),
            ms(s.p90),
            found as f64 / total.max(1) as f64,
            100.0 * kept_chars as f64 / all_chars.max(1) as f64
        );
        println!(
            "  {decider}: runs of 1,000 lines or more: {:.1}% of their {long_all} chars",
            100.0 * long_kept as f64 / long_all.max(1) as f64
        );
        println!(
            "  {decider} per log (must-see kept, share): {}",
            per_log.join("; ")
        );
    }
    Ok(())
}

/// A loopback server for the proxy rows: `ok` answers each request and
/// closes; `hold` keeps every connection open until the client leaves.
fn loopback_server(hold: bool) -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut buf = [0u8; 4096];
                if hold {
                    while c.read(&mut buf).is_ok_and(|n| n > 0) {}
                    return;
                }
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let _ = c.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    Ok(port)
}

/// Reads until the end of an HTTP head (and whatever came with it).
fn read_head(s: &mut std::net::TcpStream) -> Result<String> {
    use std::io::Read;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

/// HTTPS for real: curl fetching a file from `openssl s_server` (a
/// self-signed certificate for 127.0.0.1) through the proxy at `proxy_port`
/// and directly, interleaved; skipped when openssl or curl is missing.
fn https_through_the_proxy(
    nib: &Path,
    scratch: &Path,
    dir: &Path,
    proxy_port: u16,
    n: usize,
) -> Result<()> {
    if !have("openssl") || !have("curl") {
        println!("  proxy: openssl or curl missing; the HTTPS row is skipped");
        return Ok(());
    }
    write(&dir.join("hello.txt"), "hello\n")?;
    // A CA and a certificate for 127.0.0.1 it signed (rustls, which nib's
    // proxy verifies a brokered host with, takes no self-signed leaf).
    write(
        &dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )?;
    let openssl = |args: &[&str]| -> Result<()> {
        let made = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())?;
        if made.success() {
            Ok(())
        } else {
            Err(format!("openssl {args:?} failed"))
        }
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=nib-bench CA",
    ])?;
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=127.0.0.1",
    ])?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        "cert.pem",
        "-extfile",
        "leaf.ext",
    ])?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let mut tls = Command::new("openssl")
        .args(["s_server", "-accept", &format!("127.0.0.1:{port}")])
        .args(["-cert", "cert.pem", "-key", "key.pem", "-WWW", "-quiet"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(10) {
            let _ = tls.kill();
            return Err("openssl s_server did not start".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("https://127.0.0.1:{port}/hello.txt");
    write(&dir.join("s_server.url"), &url)?;
    let proxy = format!("http://127.0.0.1:{proxy_port}");
    // curl through `via` (or straight), trusting `ca`, with `header` when given.
    let curl = |via: Option<&str>, ca: &Path, header: Option<&str>| -> Result<Duration> {
        let mut c = Command::new("curl");
        c.args(["-sf", "-o", "/dev/null", "--cacert"])
            .arg(ca)
            .current_dir(dir);
        match via {
            Some(p) => c.args(["--proxy", p]),
            None => c.args(["--noproxy", "*"]),
        };
        if let Some(h) = header {
            c.args(["-H", h]);
        }
        let started = Instant::now();
        let ok = c.arg(&url).status().map_err(|e| e.to_string())?;
        if !ok.success() {
            return Err(format!("curl {url} failed ({ok})"));
        }
        Ok(started.elapsed())
    };
    let cert = dir.join("ca.pem");
    let mut proxied = || -> Result<(Duration, usize)> { Ok((curl(Some(&proxy), &cert, None)?, 0)) };
    let mut bases: Baselines<'_> = vec![(
        "curl straight to the server".into(),
        Box::new(|| curl(None, &cert, None)),
    )];
    let result = interleave(n.min(30), Some(&mut proxied), &mut bases);
    let terminated = result.and_then(|(s, _, b)| {
        Row {
            scenario: "curl over HTTPS through the proxy (openssl s_server, loopback)".into(),
            nib: s,
            chars: None,
            baselines: b,
        }
        .print();
        terminated_tunnel(nib, scratch, dir, &proxy, n, &curl)
    });
    let _ = tls.kill();
    let _ = tls.wait();
    terminated
}

/// The test server's URL, from the port file `https_through_the_proxy`
/// leaves beside its certificate.
fn url_of(dir: &Path) -> Result<String> {
    std::fs::read_to_string(dir.join("s_server.url")).map_err(|e| e.to_string())
}

/// One HTTPS GET of `url` through the proxy at `proxy` (`http://HOST:PORT`)
/// with `header`, over a rustls client of `config`; the time to the whole
/// answer.
fn tls_get(
    config: &std::sync::Arc<rustls::ClientConfig>,
    proxy: &str,
    url: &str,
    header: &str,
) -> Result<Duration> {
    use std::io::{Read, Write};
    let target = url.trim_start_matches("https://");
    let (authority, path) = target.split_once('/').unwrap_or((target, ""));
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    let started = Instant::now();
    let mut tcp = std::net::TcpStream::connect(proxy.trim_start_matches("http://"))
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    tcp.write_all(format!("CONNECT {authority} HTTP/1.1\r\n\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let head = read_head(&mut tcp)?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("the proxy said {head:?}"));
    }
    let name =
        rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let conn = rustls::ClientConnection::new(std::sync::Arc::clone(config), name)
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(
        format!(
            "GET /{path} HTTP/1.1\r\nHost: {authority}\r\n{header}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    // The server closes without TLS's close_notify: what arrived counts.
    let _ = tls.read_to_end(&mut answer);
    if !answer.starts_with(b"HTTP/1.") {
        return Err(format!("no answer: {:?}", String::from_utf8_lossy(&answer)));
    }
    Ok(started.elapsed())
}

/// The brokered secret's cost on the wire alone: a client whose trust (the
/// bundle at `bundle`) is loaded once, through the terminating proxy and
/// through the opaque one.
fn tls_through(
    terminating: &str,
    opaque: &str,
    bundle: &Path,
    header: &str,
    url: &str,
    n: usize,
) -> Result<()> {
    let pem = std::fs::read(bundle).map_err(|e| e.to_string())?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem).flatten() {
        let cert: rustls::pki_types::CertificateDer<'static> = cert;
        let _ = roots.add(cert);
    }
    let config = std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let mut through =
        || -> Result<(Duration, usize)> { Ok((tls_get(&config, terminating, url, header)?, 0)) };
    let mut bases: Baselines<'_> = vec![(
        "the same through an opaque tunnel".into(),
        Box::new(|| tls_get(&config, opaque, url, header)),
    )];
    let (s, _, b) = interleave(n, Some(&mut through), &mut bases)?;
    Row {
        scenario: "HTTPS request (trust loaded once), tunnel terminated to fill a brokered secret"
            .into(),
        nib: s,
        chars: None,
        baselines: b,
    }
    .print();
    Ok(())
}

/// A curl to the test server: through a proxy or straight, trusting a
/// bundle, with a header.
type Curl<'a> = dyn Fn(Option<&str>, &Path, Option<&str>) -> Result<Duration> + 'a;

/// A brokered secret's cost on the wire (NIB_SANDBOX_SECRETS): curl with
/// the placeholder in `Authorization` through a second nib whose proxy
/// terminates the server's tunnel and fills the real token in, against the
/// same request through `opaque`, the first nib's proxy, which only tunnels.
fn terminated_tunnel(
    nib: &Path,
    scratch: &Path,
    dir: &Path,
    opaque: &str,
    n: usize,
    curl: &Curl<'_>,
) -> Result<()> {
    let cert = dir.join("ca.pem");
    let cert_text = cert.to_string_lossy().into_owned();
    let mut server = Server::spawn_with(
        nib,
        dir,
        &scratch.join("proxy-secrets-state"),
        &[
            ("NIB_SANDBOX", "1"),
            ("NIB_SANDBOX_NETWORK", "127.0.0.1"),
            ("NIB_SANDBOX_SECRETS", "BENCH_TOKEN@127.0.0.1"),
            ("BENCH_TOKEN", "bench_R3alT0ken0123456789"),
            // nib's proxy trusts the test server's certificate.
            ("SSL_CERT_FILE", &cert_text),
        ],
    )?;
    server.initialize()?;
    let said = server.call(
        "nibash",
        json!({"command": "echo $HTTP_PROXY; echo $SSL_CERT_FILE; echo $BENCH_TOKEN"}),
    )?;
    let lines: Vec<&str> = said.lines().map(str::trim).collect();
    let (Some(proxy), Some(bundle), Some(placeholder)) = (
        lines
            .first()
            .and_then(|l| l.rsplit_once('@'))
            .map(|(_, a)| format!("http://{a}")),
        lines.get(1).filter(|b| b.ends_with("bundle.pem")),
        lines.get(2),
    ) else {
        println!("  proxy: no brokered secret here ({said:?}); the terminated row is skipped");
        return Ok(());
    };
    let header = format!("Authorization: Bearer {placeholder}");
    tls_through(&proxy, opaque, Path::new(bundle), &header, &url_of(dir)?, n)?;
    // Both curls trust the same bundle (the system's roots, the test
    // server's CA, the session's authority): parsing it is curl's own cost
    // (tens of milliseconds for a system bundle), not the proxy's.
    let bundle = PathBuf::from(bundle);
    let mut through =
        || -> Result<(Duration, usize)> { Ok((curl(Some(&proxy), &bundle, Some(&header))?, 0)) };
    let mut bases: Baselines<'_> = vec![(
        "the same through an opaque tunnel".into(),
        Box::new(|| curl(Some(opaque), &bundle, Some(&header))),
    )];
    let (s, _, b) = interleave(n.min(30), Some(&mut through), &mut bases)?;
    Row {
        scenario: "curl over HTTPS, tunnel terminated to fill a brokered secret".into(),
        nib: s,
        chars: None,
        baselines: b,
    }
    .print();
    Ok(())
}

/// The network allowlist's proxy: what a request through a `CONNECT`
/// tunnel (the way HTTPS goes) adds over a direct one to a loopback server,
/// and the server's memory with 100 tunnels open.
fn proxy_scenarios(nib: &Path, scratch: &Path, n: usize) -> Result<()> {
    use std::io::{Read, Write};
    let dir = scratch.join("proxy");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let up = loopback_server(false)?;
    let hold = loopback_server(true)?;
    let state = scratch.join("proxy-state");
    let mut server = Server::spawn_with(
        nib,
        &dir,
        &state,
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_NETWORK", "127.0.0.1")],
    )?;
    server.initialize()?;
    let said = server.call("nibash", json!({"command": "echo $HTTP_PROXY"}))?;
    let Some(port) = said
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
    else {
        println!("  proxy: programs got no proxy here ({said:?}); skipped");
        return Ok(());
    };
    let request = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{up}\r\n\r\n");
    let get = |s: &mut std::net::TcpStream| -> Result<()> {
        s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
        if answer.ends_with("ok") {
            Ok(())
        } else {
            Err(format!("unexpected answer {answer:?}"))
        }
    };
    let mut tunnelled = || -> Result<(Duration, usize)> {
        let started = Instant::now();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        s.write_all(format!("CONNECT 127.0.0.1:{up} HTTP/1.1\r\n\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        let head = read_head(&mut s)?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("the proxy said {head:?}"));
        }
        get(&mut s)?;
        Ok((started.elapsed(), 0))
    };
    let mut bases: Baselines<'_> = vec![(
        "the same request direct".into(),
        Box::new(|| {
            let started = Instant::now();
            let mut s =
                std::net::TcpStream::connect(("127.0.0.1", up)).map_err(|e| e.to_string())?;
            get(&mut s)?;
            Ok(started.elapsed())
        }),
    )];
    let (s, _, b) = interleave(n, Some(&mut tunnelled), &mut bases)?;
    Row {
        scenario: "request through the proxy's CONNECT tunnel (as HTTPS goes), loopback server"
            .into(),
        nib: s,
        chars: None,
        baselines: b,
    }
    .print();
    https_through_the_proxy(nib, scratch, &dir, port, n)?;
    let pid = server.child.id();
    let before = status_kib(pid, "VmRSS:").unwrap_or(0);
    let mut open = Vec::new();
    for _ in 0..100 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        s.write_all(format!("CONNECT 127.0.0.1:{hold} HTTP/1.1\r\n\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        let head = read_head(&mut s)?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("tunnel refused: {head:?}"));
        }
        s.write_all(b"hello").map_err(|e| e.to_string())?;
        open.push(s);
    }
    let with = status_kib(pid, "VmRSS:").unwrap_or(0);
    drop(open);
    println!(
        "  proxy: server resident memory {:.1} MiB before, {:.1} MiB with 100 tunnels open (+{} KiB)",
        before as f64 / 1024.0,
        with as f64 / 1024.0,
        with.saturating_sub(before)
    );
    Ok(())
}

/// Up to `limit` files under `root`, in a stable order.
fn walk(root: &Path, limit: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries.into_iter().rev() {
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if p.is_file() {
                out.push(p);
                if out.len() >= limit {
                    return out;
                }
            }
        }
    }
    out
}

fn count_files(root: &Path) -> usize {
    walk(root, usize::MAX).len()
}
