//! Decisions and summaries kept on disk (`NIB_DECIDER_CACHE`), by a hash of
//! the model list, the prompt and the input: the same long output asked
//! about twice costs one model call.
//!
//! Safe under parallel calls: an entry is written to a file of its own
//! name and renamed into place, so a reader sees a whole entry or none.
//! Bounded: past [`MAX_ENTRIES`] files or [`MAX_BYTES`], the oldest go.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries kept at most.
pub const MAX_ENTRIES: usize = 2000;
/// Bytes kept at most (checked every [`TRIM_EVERY`] writes of a process).
pub const MAX_BYTES: u64 = 32 << 20;
/// Writes between two checks of the bounds.
const TRIM_EVERY: u64 = 32;

/// The cache in one folder.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
}

/// The key of an entry: what was asked of which models.
pub fn key(kind: &str, models: &[String], prompt: &str, input: &str) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for part in [kind, &models.join(","), prompt, input] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    format!("{:032x}", h.digest128())
}

impl Cache {
    /// The cache in `dir` (made when missing); `None` when it cannot be.
    pub fn open(dir: &Path) -> Option<Cache> {
        std::fs::create_dir_all(dir).ok()?;
        Some(Cache {
            dir: dir.to_path_buf(),
        })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.txt"))
    }

    /// The entry for `key`, when there is one.
    pub fn get(&self, key: &str) -> Option<String> {
        std::fs::read_to_string(self.path(key)).ok()
    }

    /// Keeps `value` under `key`, then trims the cache to its bounds.
    pub fn put(&self, key: &str, value: &str) {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .dir
            .join(format!(".{key}.{}.{n}.tmp", std::process::id()));
        if std::fs::write(&tmp, value).is_err() || std::fs::rename(&tmp, self.path(key)).is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        // Listing the folder costs a stat per entry: every 32nd write.
        if n.is_multiple_of(TRIM_EVERY) {
            self.trim();
        }
    }

    fn trim(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".txt"))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((m.modified().ok()?, m.len(), e.path()))
            })
            .collect();
        let mut bytes: u64 = files.iter().map(|f| f.1).sum();
        if files.len() <= MAX_ENTRIES && bytes <= MAX_BYTES {
            return;
        }
        files.sort();
        let mut count = files.len();
        for (_, len, path) in files {
            if count <= MAX_ENTRIES * 9 / 10 && bytes <= MAX_BYTES * 9 / 10 {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                count -= 1;
                bytes = bytes.saturating_sub(len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_parallel_writers_leave_whole_entries() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let k = key("summary", &["m".into()], "prompt", "input");
        assert_ne!(k, key("summary", &["m".into()], "prompt", "input2"));
        assert_ne!(k, key("summary", &["m2".into()], "prompt", "input"));
        assert_eq!(cache.get(&k), None);
        let big = "x".repeat(200_000);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| cache.put(&k, &big));
            }
            for _ in 0..8 {
                s.spawn(|| {
                    if let Some(v) = cache.get(&k) {
                        assert_eq!(v.len(), big.len(), "a torn entry");
                    }
                });
            }
        });
        assert_eq!(cache.get(&k).as_deref(), Some(big.as_str()));
        let leftovers = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            })
            .count();
        assert_eq!(leftovers, 0);
    }

    #[test]
    fn the_oldest_entries_go_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        for i in 0..MAX_ENTRIES + 100 {
            cache.put(&format!("{i:032x}"), "v");
        }
        let n = std::fs::read_dir(dir.path()).unwrap().count();
        assert!(n <= MAX_ENTRIES + TRIM_EVERY as usize, "{n} entries");
        assert!(cache.get(&format!("{:032x}", MAX_ENTRIES + 99)).is_some());
    }
}
