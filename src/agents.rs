//! Which agent is calling, and what each agent has seen, across restarts.
//!
//! Claude Code tells agents apart through nib's hook: for each of nib's own
//! tool uses, `nib hook` records the tool-use id with the session and agent
//! ([`record_tool_use`]); the call then arrives with that id in its `_meta`
//! (`claudecode/toolUseId`), and [`Agents::for_call`] finds the agent. OpenCode
//! sessions are told apart by the session id in `_meta`. A call that names
//! neither is the connection's default agent. SessionStart and PostCompact
//! write a reset mark for the session; the next call of an agent of that
//! session starts from nothing.
//!
//! What each agent saw is saved under the state folder (`seen/`) as hashes
//! and line numbers, never text; an agent met again after a restart gets back
//! the lines of every file whose bytes still hash the same. Saved agents are
//! bounded in size and expire.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use nib_files::fs;
use nib_files::seen::Agent;
use nib_text::hashline::Tag;
use nib_text::text::Text;

/// Files remembered per saved agent at most.
pub const SAVED_FILES: usize = 2000;
/// How long a saved agent is kept without use.
pub const EXPIRY: Duration = Duration::from_secs(14 * 24 * 3600);

/// The `_meta` keys that carry a tool-use id.
const TOOL_USE_KEYS: &[&str] = &["claudecode/toolUseId", "toolUseId", "tool_use_id"];
/// The `_meta` keys that carry a session id (OpenCode and others).
const SESSION_KEYS: &[&str] = &["opencode/sessionId", "sessionID", "sessionId", "session_id"];

/// A tool use recorded by the hook.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ToolUse {
    /// The client's session.
    pub session: String,
    /// The agent within it (`main` for the main agent).
    pub agent: String,
}

fn safe(s: &str) -> String {
    let h = xxhash_rust::xxh3::xxh3_64(s.as_bytes());
    let tail: String = s
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(40)
        .collect();
    format!("{tail}-{h:016x}")
}

fn hook_dir(state: &Path, kind: &str) -> PathBuf {
    state.join("hook").join(kind)
}

/// Records which agent issued a tool use (called by `nib hook`).
pub fn record_tool_use(state: &Path, tool_use_id: &str, use_: &ToolUse) -> std::io::Result<()> {
    let dir = hook_dir(state, "tool-use");
    std::fs::create_dir_all(&dir)?;
    let body = serde_json::to_vec(use_).map_err(std::io::Error::other)?;
    std::fs::write(dir.join(safe(tool_use_id)), body)
}

/// Records that `child` is a fork of `parent` (its agent starts with a copy of
/// what the parent's main agent saw).
pub fn record_fork(state: &Path, child: &str, parent: &str) -> std::io::Result<()> {
    let dir = hook_dir(state, "fork");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(safe(child)), parent.as_bytes())
}

fn fork_parent(state: &Path, child: &str) -> Option<String> {
    std::fs::read_to_string(hook_dir(state, "fork").join(safe(child))).ok()
}

/// Marks a session's agents as starting over (compaction, clear, new start).
pub fn record_reset(state: &Path, session: &str) -> std::io::Result<()> {
    let dir = hook_dir(state, "reset");
    std::fs::create_dir_all(&dir)?;
    // The time goes in the file: its mtime comes from the file system's
    // coarse clock (a tick of several ms), which can put a reset made just
    // after an agent was loaded before that load.
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::fs::write(dir.join(safe(session)), nanos.to_string())
}

fn reset_time(state: &Path, session: &str) -> Option<SystemTime> {
    let path = hook_dir(state, "reset").join(safe(session));
    let written = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(|n| SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(n));
    written.or_else(|| std::fs::metadata(&path).and_then(|m| m.modified()).ok())
}

fn lookup_tool_use(state: &Path, id: &str) -> Option<ToolUse> {
    let bytes = std::fs::read(hook_dir(state, "tool-use").join(safe(id))).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// How `nib serve --http` names its agents' sessions ("http:NAME"). No hook
/// writes for them (the front drops the client's own session and tool-use
/// ids), so no reset or fork is looked for on their calls.
pub const HTTP_SESSION_PREFIX: &str = "http:";

/// The identity of the agent behind a call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AgentKey {
    /// The session (empty for the connection's default agent).
    pub session: String,
    /// The agent within the session.
    pub agent: String,
}

impl AgentKey {
    fn file_name(&self) -> String {
        safe(&format!("{}\u{0}{}", self.session, self.agent))
    }
}

/// One saved file version: bytes hash, tag, lines seen.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SavedVersion {
    path: PathBuf,
    hash: u64,
    tag: u16,
    seen: Vec<(usize, usize)>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct SavedAgent {
    versions: Vec<SavedVersion>,
}

struct Slot {
    agent: Arc<Mutex<Agent>>,
    loaded_at: SystemTime,
}

/// Every agent this connection has served.
pub struct Agents {
    state: PathBuf,
    /// The nearest folder at or above `state` that existed when nib
    /// started: once it is gone (a test's home torn down, the person's
    /// cleanup), saving makes nothing again rather than bring it back.
    anchor: Option<PathBuf>,
    slots: Mutex<HashMap<AgentKey, Slot>>,
    /// Held while the agents are saved.
    saving: Mutex<()>,
}

impl Agents {
    /// Agents whose saved state lives under `state`.
    pub fn new(state: &Path) -> Agents {
        Agents {
            state: state.to_path_buf(),
            anchor: state
                .ancestors()
                .find(|a| a.is_dir())
                .map(Path::to_path_buf),
            slots: Mutex::new(HashMap::new()),
            saving: Mutex::new(()),
        }
    }

    /// The key of the agent a call's `_meta` names.
    pub fn key_for(&self, meta: &serde_json::Map<String, Value>) -> AgentKey {
        let get = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| meta.get(*k).and_then(Value::as_str))
                .map(str::to_string)
        };
        if let Some(id) = get(TOOL_USE_KEYS)
            && let Some(u) = lookup_tool_use(&self.state, &id)
        {
            return AgentKey {
                session: u.session,
                agent: u.agent,
            };
        }
        if let Some(s) = get(SESSION_KEYS) {
            return AgentKey {
                session: s,
                agent: "main".into(),
            };
        }
        AgentKey {
            session: String::new(),
            agent: "main".into(),
        }
    }

    /// The agent for a key: loaded from its saved state the first time, and
    /// started over when its session was reset since.
    pub fn get(
        &self,
        key: &AgentKey,
        load: &dyn Fn(&Path) -> Option<Vec<u8>>,
    ) -> Arc<Mutex<Agent>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let hooked = !key.session.is_empty() && !key.session.starts_with(HTTP_SESSION_PREFIX);
        let reset = hooked
            .then(|| reset_time(&self.state, &key.session))
            .flatten();
        if let Some(slot) = slots.get_mut(key) {
            if reset.is_some_and(|r| r > slot.loaded_at) {
                *slot.agent.lock().unwrap_or_else(|p| p.into_inner()) = Agent::default();
                slot.loaded_at = SystemTime::now();
            }
            return Arc::clone(&slot.agent);
        }
        let mut agent = Agent::default();
        // A subagent starts with the names its session's main agent has
        // defined by now (`hash -d` reaches the subagents started after it).
        if key.agent != "main"
            && let Some(main) = slots.get(&AgentKey {
                session: key.session.clone(),
                agent: "main".into(),
            })
        {
            let names = main.agent.lock().unwrap_or_else(|e| e.into_inner());
            agent.names = Arc::new(std::sync::RwLock::new(names.names_for_child()));
        }
        // A fork starts with a copy of what its parent's main agent saw, and
        // of its names.
        if key.agent == "main"
            && hooked
            && let Some(parent) = fork_parent(&self.state, &key.session)
        {
            let pkey = AgentKey {
                session: parent,
                agent: "main".into(),
            };
            if let Some(p) = slots.get(&pkey) {
                let parent = p.agent.lock().unwrap_or_else(|e| e.into_inner());
                agent.seen = parent.seen.clone();
                agent.names = Arc::new(std::sync::RwLock::new(parent.names_for_child()));
            } else {
                restore(&mut agent, &self.saved_path(&pkey), load);
            }
        }
        if !key.session.is_empty() {
            let file = self.saved_path(key);
            let fresh = match (
                std::fs::metadata(&file).and_then(|m| m.modified()).ok(),
                reset,
            ) {
                (Some(saved), Some(r)) => saved > r,
                (Some(_), None) => true,
                _ => false,
            };
            if fresh {
                restore(&mut agent, &file, load);
            }
        }
        let slot = Slot {
            agent: Arc::new(Mutex::new(agent)),
            loaded_at: SystemTime::now(),
        };
        let a = Arc::clone(&slot.agent);
        slots.insert(key.clone(), slot);
        a
    }

    fn saved_path(&self, key: &AgentKey) -> PathBuf {
        self.state.join("seen").join(key.file_name())
    }

    /// Every agent's own names (`hash -d`), for the record of names used.
    pub fn own_names(&self) -> Vec<nib_files::names::Name> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .values()
            .flat_map(|slot| {
                let agent = slot.agent.lock().unwrap_or_else(|p| p.into_inner());
                agent.names_for_child().list().to_vec()
            })
            .collect()
    }

    /// Saves every agent with a session (the default agent is the connection's own).
    pub fn save_all(&self) {
        // One save at a time, so the last to start is the last to write;
        // the map is held only to list the agents: a call looking up its
        // agent never waits for files to be written.
        let _one = self.saving.lock().unwrap_or_else(|p| p.into_inner());
        let agents: Vec<(PathBuf, Arc<Mutex<Agent>>)> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots
                .iter()
                .filter(|(k, _)| !k.session.is_empty())
                .map(|(key, slot)| (self.saved_path(key), Arc::clone(&slot.agent)))
                .collect()
        };
        let dir = self.state.join("seen");
        // A state folder removed since nib started is not made again, nor
        // its parents (they would be left behind, in `$TMPDIR` for tests).
        if self.anchor.as_deref().is_none_or(|a| !a.is_dir())
            || std::fs::create_dir_all(&dir).is_err()
        {
            return;
        }
        for (path, agent) in agents {
            let agent = agent.lock().unwrap_or_else(|p| p.into_inner());
            let saved = SavedAgent {
                versions: agent
                    .seen
                    .all_versions()
                    .take(SAVED_FILES)
                    .map(|(path, v)| SavedVersion {
                        path: path.to_path_buf(),
                        hash: xxhash_rust::xxh3::xxh3_64(&v.text.encode()),
                        tag: v.tag.0,
                        seen: v.seen.ranges().to_vec(),
                    })
                    .collect(),
            };
            // The agent's own calls wait for what is saved of it, not for
            // the file.
            drop(agent);
            if let Ok(body) = serde_json::to_vec(&saved) {
                let _ = fs::write_state(&path, &body);
            }
        }
        expire(&dir);
    }
}

/// Gives an agent back the lines of every saved file whose bytes still hash the same.
fn restore(agent: &mut Agent, file: &Path, load: &dyn Fn(&Path) -> Option<Vec<u8>>) {
    let Ok(bytes) = std::fs::read(file) else {
        return;
    };
    let Ok(saved) = serde_json::from_slice::<SavedAgent>(&bytes) else {
        return;
    };
    for v in saved.versions.into_iter().take(SAVED_FILES) {
        let Some(content) = load(&v.path) else {
            continue;
        };
        if xxhash_rust::xxh3::xxh3_64(&content) != v.hash {
            continue;
        }
        let text = Arc::new(Text::decode(&content));
        if text.encode() != content {
            // Mixed line endings do not round-trip; the hash was of the encoded text.
            continue;
        }
        let lines = v.seen.iter().flat_map(|&(a, b)| a..=b);
        agent.seen.record(&v.path, Tag(v.tag), &text, lines);
    }
}

/// Removes saved agents and hook records unused for [`EXPIRY`].
fn expire(seen_dir: &Path) {
    let now = SystemTime::now();
    let dirs = [
        seen_dir.to_path_buf(),
        seen_dir.with_file_name("hook").join("tool-use"),
        seen_dir.with_file_name("hook").join("reset"),
    ];
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age > EXPIRY);
            if old {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_save_waiting_on_one_agent_lets_another_agents_call_go_on() {
        let state = tempfile::tempdir().unwrap();
        let agents = Arc::new(Agents::new(state.path()));
        let none = |_: &Path| None;
        let key = |name: &str| AgentKey {
            session: format!("{HTTP_SESSION_PREFIX}{name}"),
            agent: "main".into(),
        };
        let busy = agents.get(&key("a"), &none);
        agents.get(&key("b"), &none);
        // Agent a is in a call: the save waits for it.
        let held = busy.lock().unwrap();
        let saver = {
            let agents = Arc::clone(&agents);
            std::thread::spawn(move || agents.save_all())
        };
        while agents.saving.try_lock().is_ok() {
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        // Agent b's next call looks its agent up meanwhile.
        let (tx, rx) = std::sync::mpsc::channel();
        let caller = {
            let agents = Arc::clone(&agents);
            std::thread::spawn(move || {
                agents.get(&key("b"), &|_: &Path| None);
                let _ = tx.send(());
            })
        };
        let went_on = rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok();
        drop(held);
        saver.join().unwrap();
        caller.join().unwrap();
        assert!(went_on, "b's lookup waited for the save of a");
        assert!(
            state
                .path()
                .join("seen")
                .join(key("a").file_name())
                .exists()
        );
    }

    #[test]
    fn calls_find_their_agent_through_hook_records() {
        let state = tempfile::tempdir().unwrap();
        let agents = Agents::new(state.path());
        record_tool_use(
            state.path(),
            "toolu_1",
            &ToolUse {
                session: "S".into(),
                agent: "main".into(),
            },
        )
        .unwrap();
        record_tool_use(
            state.path(),
            "toolu_2",
            &ToolUse {
                session: "S".into(),
                agent: "sub".into(),
            },
        )
        .unwrap();
        let m = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(
            agents
                .key_for(&m(json!({"claudecode/toolUseId": "toolu_1"})))
                .agent,
            "main"
        );
        assert_eq!(
            agents
                .key_for(&m(json!({"claudecode/toolUseId": "toolu_2"})))
                .agent,
            "sub"
        );
        assert_eq!(
            agents.key_for(&m(json!({"sessionID": "oc1"}))).session,
            "oc1"
        );
        assert_eq!(agents.key_for(&m(json!({}))).session, "");
    }

    #[test]
    fn a_fork_starts_with_its_parents_lines_and_a_subagent_does_not() {
        let state = tempfile::tempdir().unwrap();
        let agents = Agents::new(state.path());
        let none = |_: &Path| None;
        let parent = AgentKey {
            session: "P".into(),
            agent: "main".into(),
        };
        let text = Arc::new(Text::decode(b"a\n"));
        agents
            .get(&parent, &none)
            .lock()
            .unwrap()
            .seen
            .record(Path::new("/f"), Tag(1), &text, [1]);
        record_fork(state.path(), "C", "P").unwrap();
        let child = AgentKey {
            session: "C".into(),
            agent: "main".into(),
        };
        assert_eq!(
            agents
                .get(&child, &none)
                .lock()
                .unwrap()
                .seen
                .versions(Path::new("/f"))
                .count(),
            1
        );
        let sub = AgentKey {
            session: "P".into(),
            agent: "sub".into(),
        };
        assert_eq!(
            agents
                .get(&sub, &none)
                .lock()
                .unwrap()
                .seen
                .versions(Path::new("/f"))
                .count(),
            0
        );
    }

    #[test]
    fn saving_never_makes_a_removed_state_folder_again() {
        let home = tempfile::tempdir().unwrap();
        let state = home.path().join("state");
        let agents = Agents::new(&state);
        let none = |_: &Path| None;
        let key = AgentKey {
            session: "S".into(),
            agent: "main".into(),
        };
        let text = Arc::new(Text::decode(b"a\n"));
        agents
            .get(&key, &none)
            .lock()
            .unwrap()
            .seen
            .record(Path::new("/f"), Tag(1), &text, [1]);
        // The state folder is made on a first save beneath what existed.
        agents.save_all();
        assert!(state.join("seen").is_dir());
        // The home is removed (a test's teardown): a later save makes
        // nothing, neither the state folder nor the home above it.
        let gone = home.path().to_path_buf();
        drop(home);
        agents.save_all();
        assert!(!gone.exists(), "{} was made again", gone.display());
    }
}
