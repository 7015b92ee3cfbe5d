//! Refused-edit and replace tokens across command-line processes: `nib grep
//! --replace` or a refused `nib edit` prints a token, and the next process's
//! `REAPPLY TOKEN` (or the same patch sent again) must find it. Each token is
//! a small JSON file in the state folder's `cli-tokens/`, holding the patch
//! and a hash of each file it was checked against — never the file's text:
//! the next process reads the file again and the token applies only while
//! the hash still matches. At most [`KEEP`] are kept, none older than
//! [`MAX_AGE`]. The MCP server keeps tokens in memory and does not use this.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use nib_files::fs;
use nib_files::seen::{PendingEdit, Tokens};
use nib_text::text::Text;

/// How many tokens are kept.
pub const KEEP: usize = 64;
/// How long a token lives.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

#[derive(Serialize, Deserialize)]
struct Saved {
    patch: String,
    waive_seen: bool,
    sub_moves: Vec<(usize, usize)>,
    /// Each file's path and a hash of the text it had when the token was given.
    versions: Vec<(PathBuf, u64)>,
}

fn folder(state_dir: &Path) -> PathBuf {
    state_dir.join("cli-tokens")
}

fn valid_token(t: &str) -> bool {
    !t.is_empty() && t.len() <= 32 && t.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Puts the tokens earlier processes saved (and still live) into `tokens`,
/// and removes the expired ones.
pub fn load(state_dir: &Path, tokens: &mut Tokens) {
    let Ok(entries) = fs::list_dir(&fs::Scope::Open, &folder(state_dir)) else {
        return;
    };
    let now = SystemTime::now();
    let mut found: Vec<(SystemTime, String, PathBuf)> = Vec::new();
    for e in entries {
        let Some(token) = e
            .name
            .strip_suffix(".json")
            .filter(|t| valid_token(t))
            .map(str::to_string)
        else {
            continue;
        };
        let modified = e
            .stat
            .as_ref()
            .and_then(|s| s.modified)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        if now.duration_since(modified).unwrap_or_default() > MAX_AGE {
            let _ = fs::recover_remove(&e.path);
            continue;
        }
        found.push((modified, token, e.path));
    }
    found.sort();
    let skip = found.len().saturating_sub(KEEP);
    for (i, (_, token, path)) in found.into_iter().enumerate() {
        if i < skip {
            let _ = fs::recover_remove(&path);
            continue;
        }
        let Ok(bytes) = fs::read_small(&path) else {
            continue;
        };
        let Ok(saved) = serde_json::from_slice::<Saved>(&bytes) else {
            continue;
        };
        // Each file as it is now, when it still has the text the token was
        // checked against; otherwise a version that matches nothing, so the
        // edit says the file changed.
        let versions = saved
            .versions
            .into_iter()
            .map(|(p, hash)| {
                let now = fs::read_small(&p)
                    .ok()
                    .map(|b| Text::decode(&b))
                    .filter(|t| text_hash(t) == hash)
                    .unwrap_or_else(|| Text::decode(b"\0nib: changed since the token was given\0"));
                (p, Arc::new(now))
            })
            .collect();
        tokens.restore(
            token,
            PendingEdit {
                patch: saved.patch,
                waive_seen: saved.waive_seen,
                sub_moves: saved.sub_moves,
                versions,
            },
        );
    }
}

fn text_hash(t: &Text) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&t.encode())
}

/// Saves the tokens this process made (those not on disk yet) and removes
/// those that were used up (no longer in `tokens`).
pub fn save(state_dir: &Path, before: &[String], tokens: &Tokens) {
    let dir = folder(state_dir);
    let now: Vec<&String> = tokens.all().map(|(t, _)| t).collect();
    for gone in before.iter().filter(|t| !now.contains(t)) {
        let _ = fs::recover_remove(&dir.join(format!("{gone}.json")));
    }
    for (token, edit) in tokens.all() {
        if before.contains(token) || !valid_token(token) {
            continue;
        }
        let saved = Saved {
            patch: edit.patch.clone(),
            waive_seen: edit.waive_seen,
            sub_moves: edit.sub_moves.clone(),
            versions: edit
                .versions
                .iter()
                .map(|(p, t)| (p.clone(), text_hash(t)))
                .collect(),
        };
        let Ok(json) = serde_json::to_vec(&saved) else {
            continue;
        };
        if fs::create_dir_all(&dir).is_ok() {
            let _ = fs::write_state(&dir.join(format!("{token}.json")), &json);
        }
    }
}

/// The tokens now in `tokens` (to tell new ones from loaded ones later).
pub fn names(tokens: &Tokens) -> Vec<String> {
    tokens.all().map(|(t, _)| t.clone()).collect()
}
