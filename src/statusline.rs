//! `nib statusline`: one line about the project's running nibash calls and
//! jobs, for Claude Code's `statusLine` setting. The calls live in the MCP
//! server's memory, so each server publishes them: a small JSON file per
//! server in the state folder's `status/` (named by the project and the
//! server's pid), rewritten by a thread as soon as what it shows changes and removed
//! when the server ends. The command reads the files of its project whose
//! server is still alive. What a call or job is belongs to `nibash`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How often a server looks at its calls for the status file when
/// nothing changes (the seconds shown).
const EVERY: Duration = Duration::from_millis(1000);
/// The least time between two looks that changed nothing.
const SOONEST: Duration = Duration::from_millis(20);
/// How old the oldest of the calls must be before an idle server shows
/// them: a call that ends sooner (most do) never reaches the disk, where
/// nobody could have seen it anyway. Jobs are shown at once.
const QUIET: Duration = Duration::from_millis(100);

/// One running call or job, as published.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Running {
    /// Its job number.
    pub id: u32,
    /// The command line (its first line, cut).
    pub command: String,
    /// Seconds since it started (when published; a reader counts from
    /// `started_ms`).
    pub seconds: u64,
    /// When it started, in milliseconds since the Unix epoch (0: unknown):
    /// the file is rewritten only when what runs changes, so the clock a
    /// reader shows is counted from here, not from `seconds`.
    #[serde(default)]
    pub started_ms: u64,
    /// Still a call (the agent waits), or a job.
    pub job: bool,
    /// The job ended and its end was not reported yet.
    pub ended: bool,
}

/// What one server publishes.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Published {
    pid: u32,
    running: Vec<Running>,
}

fn folder(state_dir: &Path) -> PathBuf {
    state_dir.join("status")
}

/// The name every status file of this project starts with.
fn project_key(project: &Path) -> String {
    let canonical = nib_files::fs::canonical(project).unwrap_or_else(|_| project.to_path_buf());
    format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64(canonical.as_os_str().as_encoded_bytes())
    )
}

fn snapshot(nib: &crate::nibash::Nibash) -> Vec<Running> {
    let mut out: Vec<Running> = nib
        .jobs
        .all()
        .iter()
        .map(|e| {
            let s = e.state();
            let first = e.command.lines().next().unwrap_or_default();
            let age = e.age();
            Running {
                id: e.id,
                command: first.chars().take(60).collect(),
                seconds: age.as_secs(),
                started_ms: now_ms().saturating_sub(u64::try_from(age.as_millis()).unwrap_or(0)),
                job: s.is_job,
                ended: s.ended(),
            }
        })
        .collect();
    out.sort_by_key(|r| r.id);
    out
}

/// Starts the thread that keeps this server's status file; the file is
/// removed when the returned guard drops.
pub fn publish(state_dir: &Path, project: &Path, nib: Arc<crate::nibash::Nibash>) -> Guard {
    let file = folder(state_dir).join(format!(
        "{}-{}.json",
        project_key(project),
        std::process::id()
    ));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (f, s) = (file.clone(), Arc::clone(&stop));
    let _ = std::thread::Builder::new()
        .name("nib-status".into())
        .spawn(move || {
            let mut last: Option<Vec<Running>> = None;
            let mut seen = 0;
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                let at = nib.jobs.changes.count();
                let now = snapshot(&nib);
                let shows_nothing = last.as_ref().is_none_or(|l| l.is_empty());
                if shows_nothing && let Some(wait) = quiet_left(&now, now_ms()) {
                    seen = nib.jobs.changes.wait_after(seen, wait);
                    continue;
                }
                // Seconds tick: rewrite only when the set or a state changed,
                // or every ten seconds while something runs.
                let changed = last.as_ref().is_none_or(|l| {
                    l.len() != now.len()
                        || l.iter().zip(&now).any(|(a, b)| {
                            a.id != b.id
                                || a.job != b.job
                                || a.ended != b.ended
                                || b.seconds / 10 != a.seconds / 10
                        })
                });
                // Woken by a change of the table (a call started, became a
                // job, ended), else once a second for the seconds; a wake
                // that changed nothing shown (output streaming in) waits a
                // little before the next look.
                if changed {
                    write(&f, &now);
                    last = Some(now);
                    nib.jobs.changes.mark_published(at);
                } else {
                    nib.jobs.changes.mark_published(at);
                    std::thread::sleep(SOONEST);
                }
                seen = nib.jobs.changes.wait_after(seen, EVERY);
            }
        });
    Guard { file, stop }
}

/// How long until calls this young are shown, when all of `running` are
/// calls (no job) younger than [`QUIET`]; `None` when they are to be shown
/// now (or there are none).
fn quiet_left(running: &[Running], now_ms: u64) -> Option<Duration> {
    if running.is_empty() || running.iter().any(|r| r.job) {
        return None;
    }
    let oldest = running
        .iter()
        .map(|r| now_ms.saturating_sub(r.started_ms))
        .max()?;
    let quiet = u64::try_from(QUIET.as_millis()).unwrap_or(u64::MAX);
    (oldest < quiet).then(|| Duration::from_millis(quiet - oldest))
}

fn write(file: &Path, running: &[Running]) {
    if running.is_empty() {
        let _ = nib_files::fs::recover_remove(file);
        return;
    }
    let published = Published {
        pid: std::process::id(),
        running: running.to_vec(),
    };
    if let (Some(dir), Ok(json)) = (file.parent(), serde_json::to_vec(&published)) {
        let _ = nib_files::fs::create_dir_all(dir);
        let _ = nib_files::fs::write_state(file, &json);
    }
}

/// Removes the status file when the server ends.
pub struct Guard {
    file: PathBuf,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = nib_files::fs::recover_remove(&self.file);
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Whether a process with this pid is alive.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Everything the live servers of `project` publish.
pub fn running(state_dir: &Path, project: &Path) -> Vec<Running> {
    let key = project_key(project);
    let Ok(entries) = nib_files::fs::list_dir(&nib_files::fs::Scope::Open, &folder(state_dir))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries {
        if !e.name.starts_with(&key) || !e.name.ends_with(".json") {
            continue;
        }
        let Ok(bytes) = nib_files::fs::read_small(&e.path) else {
            continue;
        };
        let Ok(p) = serde_json::from_slice::<Published>(&bytes) else {
            continue;
        };
        if !alive(p.pid) {
            // A server that died without cleaning up.
            let _ = nib_files::fs::recover_remove(&e.path);
            continue;
        }
        let now = now_ms();
        out.extend(p.running.into_iter().map(|mut r| {
            if r.started_ms > 0 {
                r.seconds = now.saturating_sub(r.started_ms) / 1000;
            }
            r
        }));
    }
    out
}

/// The status line for these calls and jobs.
pub fn line(running: &[Running]) -> String {
    if running.is_empty() {
        return "nib: idle".into();
    }
    let age = |s: u64| {
        if s >= 3600 {
            format!("{}h", s / 3600)
        } else if s >= 60 {
            format!("{}m", s / 60)
        } else {
            format!("{s}s")
        }
    };
    let calls: Vec<String> = running
        .iter()
        .filter(|r| !r.job)
        .map(|r| format!("{} ({})", r.command, age(r.seconds)))
        .collect();
    let jobs: Vec<String> = running
        .iter()
        .filter(|r| r.job)
        .map(|r| {
            format!(
                "%{} {}{}",
                r.id,
                r.command,
                if r.ended {
                    " (ended)".to_string()
                } else {
                    format!(" ({})", age(r.seconds))
                }
            )
        })
        .collect();
    let mut parts = Vec::new();
    if !calls.is_empty() {
        parts.push(format!("running {}", calls.join(", ")));
    }
    if !jobs.is_empty() {
        parts.push(format!(
            "{} job{} {}",
            jobs.len(),
            if jobs.len() == 1 { "" } else { "s" },
            jobs.join(", ")
        ));
    }
    // Command lines are the model's: shown, never obeyed by the terminal.
    crate::terminal::visible_line(&format!("nib: {}", parts.join("; "))).into_owned()
}

/// The project a `statusLine` command is for: the JSON Claude Code sends on
/// stdin names it (`workspace.current_dir`, else `cwd`); else `fallback`.
pub fn project_from(input: &str, fallback: &Path) -> PathBuf {
    let v: serde_json::Value = serde_json::from_str(input).unwrap_or_default();
    v.pointer("/workspace/project_dir")
        .or_else(|| v.pointer("/workspace/current_dir"))
        .or_else(|| v.get("cwd"))
        .and_then(serde_json::Value::as_str)
        .map(PathBuf::from)
        .unwrap_or_else(|| fallback.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_calls_and_jobs() {
        assert_eq!(line(&[]), "nib: idle");
        let r = |id, command: &str, seconds, job, ended| Running {
            id,
            command: command.into(),
            seconds,
            started_ms: 0,
            job,
            ended,
        };
        assert_eq!(
            line(&[
                r(3, "cargo test", 12, false, false),
                r(1, "npm run dev", 300, true, false),
                r(2, "make", 4, true, true)
            ]),
            "nib: running cargo test (12s); 2 jobs %1 npm run dev (5m), %2 make (ended)"
        );
    }

    #[test]
    fn young_calls_wait_to_be_shown_and_jobs_do_not() {
        let r = |started_ms, job| Running {
            id: 1,
            command: "true".into(),
            seconds: 0,
            started_ms,
            job,
            ended: false,
        };
        let now = 10_000;
        assert_eq!(quiet_left(&[], now), None);
        assert_eq!(
            quiet_left(&[r(now - 30, false), r(now - 10, false)], now),
            Some(Duration::from_millis(70))
        );
        assert_eq!(quiet_left(&[r(now - 100, false)], now), None);
        assert_eq!(quiet_left(&[r(now - 30, false), r(now, true)], now), None);
    }

    /// The file is rewritten only when what runs changes: a reader counts
    /// the seconds from the start it names, so the clock moves between
    /// rewrites.
    #[test]
    fn a_reader_counts_the_seconds_from_the_published_start() {
        let state = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let file = folder(state.path()).join(format!(
            "{}-{}.json",
            project_key(project.path()),
            std::process::id()
        ));
        let started = |ago_ms: u64| Running {
            id: 1,
            command: "sleep 60".into(),
            seconds: 0,
            started_ms: now_ms() - ago_ms,
            job: false,
            ended: false,
        };
        write(&file, &[started(7_500)]);
        assert_eq!(
            line(&running(state.path(), project.path())),
            "nib: running sleep 60 (7s)"
        );
        // Published by an older nib: no start, its seconds as written.
        let old = Running {
            seconds: 4,
            started_ms: 0,
            ..started(0)
        };
        write(&file, &[old]);
        assert_eq!(
            line(&running(state.path(), project.path())),
            "nib: running sleep 60 (4s)"
        );
    }

    #[test]
    fn the_project_comes_from_claude_codes_input() {
        let fallback = Path::new("/here");
        assert_eq!(
            project_from(
                r#"{"workspace": {"current_dir": "/p"}, "cwd": "/c"}"#,
                fallback
            ),
            PathBuf::from("/p")
        );
        assert_eq!(
            project_from(r#"{"cwd": "/c"}"#, fallback),
            PathBuf::from("/c")
        );
        assert_eq!(project_from("not json", fallback), PathBuf::from("/here"));
    }
}
