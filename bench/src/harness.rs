//! The harness: the server under test spoken to over stdio, timing, statistics, the rows of the table and the server's memory after each scenario.

use super::*;

/// A named baseline: one run of it, timed.
pub(crate) type Baseline<'a> = (String, Box<dyn FnMut() -> Result<Duration> + 'a>);

/// The baselines of a scenario.
pub(crate) type Baselines<'a> = Vec<Baseline<'a>>;

/// nib's times, its response size, and each baseline's times.
pub(crate) type Measured = (Option<Stat>, Option<usize>, Vec<(String, Stat)>);

pub(crate) fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: BufReader<ChildStdout>,
    pub(crate) next_id: u64,
}

impl Server {
    pub(crate) fn spawn(nib: &Path, dir: &Path, state: &Path) -> Result<Server> {
        Server::spawn_with(nib, dir, state, &[])
    }

    pub(crate) fn spawn_with(
        nib: &Path,
        dir: &Path,
        state: &Path,
        env: &[(&str, &str)],
    ) -> Result<Server> {
        Server::spawn_args(nib, &[], dir, state, env)
    }

    pub(crate) fn spawn_args(
        nib: &Path,
        args: &[&str],
        dir: &Path,
        state: &Path,
        env: &[(&str, &str)],
    ) -> Result<Server> {
        // Unconfined unless a row asks for the sandbox (nib's own default).
        let mut child = Command::new(nib)
            .args(args)
            .env("NIB_SANDBOX", "0")
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

    pub(crate) fn send(&mut self, msg: &Value) -> Result<()> {
        let mut line = msg.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("writing to nib: {e}"))
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> Result<Value> {
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

    pub(crate) fn initialize(&mut self) -> Result<()> {
        self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "nib-bench", "version": "0"}}),
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    }

    pub(crate) fn call(&mut self, tool: &str, args: Value) -> Result<String> {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}))?;
        let text = r["content"][0]["text"].as_str().unwrap_or("").to_string();
        if r["isError"] == json!(true) {
            return Err(format!("{tool} failed: {text}"));
        }
        Ok(text)
    }

    /// Sends several calls at once (as a client sends a turn's parallel
    /// calls) and waits for every answer.
    pub(crate) fn call_many(&mut self, tool: &str, args: &[Value]) -> Result<Vec<String>> {
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
    pub(crate) fn peak_kib(&self) -> Option<u64> {
        status_kib(self.child.id(), "VmHWM:")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn time<T>(f: impl FnOnce() -> Result<T>) -> Result<(Duration, T)> {
    let t = Instant::now();
    let v = f()?;
    Ok((t.elapsed(), v))
}

/// Runs a program to completion, output discarded; its wall time.
pub(crate) fn run_program(dir: &Path, argv: &[&str]) -> Result<Duration> {
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

pub(crate) fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub(crate) struct Stat {
    pub(crate) median: Duration,
    pub(crate) p10: Duration,
    pub(crate) p90: Duration,
}

pub(crate) fn stat(mut v: Vec<Duration>) -> Stat {
    v.sort();
    Stat {
        median: percentile(&v, 0.5),
        p10: percentile(&v, 0.1),
        p90: percentile(&v, 0.9),
    }
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

pub(crate) struct Row {
    pub(crate) scenario: String,
    pub(crate) nib: Option<Stat>,
    pub(crate) chars: Option<usize>,
    pub(crate) baselines: Vec<(String, Stat)>,
}

/// The main server's pid, and its memory after each scenario printed
/// (VmHWM only grows: a jump attributes the peak to that scenario).
pub(crate) static MAIN_SERVER: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

pub(crate) static PEAK_AFTER: std::sync::Mutex<Vec<(String, Memory)>> =
    std::sync::Mutex::new(Vec::new());

/// The main server's memory after a scenario, in KiB: the peak so far and
/// what stays resident, split into heap (anonymous) and mapped files (its
/// own code, mostly).
#[derive(Clone, Copy, Default)]
pub(crate) struct Memory {
    pub(crate) peak: u64,
    pub(crate) resident: u64,
    pub(crate) anon: u64,
    pub(crate) file: u64,
}

impl Memory {
    pub(crate) fn of(pid: u32) -> Option<Memory> {
        Some(Memory {
            peak: status_kib(pid, "VmHWM:")?,
            resident: status_kib(pid, "VmRSS:")?,
            anon: status_kib(pid, "RssAnon:")?,
            file: status_kib(pid, "RssFile:")?,
        })
    }
}

/// A `/proc/PID/status` figure in KiB (`VmHWM:`, `VmRSS:`).
pub(crate) fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

impl Row {
    pub(crate) fn print(&self) {
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
pub(crate) fn interleave(
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

pub(crate) fn print_header(n: usize, quick: bool) {
    println!(
        "nib-bench: {} iterations per scenario{}; times in ms, median (p10–p90)\n",
        n,
        if quick { " (--quick)" } else { "" }
    );
    println!("| scenario | nib | response chars | baseline median (p10–p90) | nib / baseline |");
    println!("|---|---|---|---|---|");
}

pub(crate) fn tag_of(answer: &str) -> Result<String> {
    let start = answer.find('#').ok_or("no tag in answer")?;
    Ok(answer[start + 1..start + 5].to_string())
}
