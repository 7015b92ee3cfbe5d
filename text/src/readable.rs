//! Sizes, ages and similar names, written the way people read them.

use std::time::SystemTime;

/// `812 B`, `12.0 KiB`, `1.5 MiB`.
pub fn size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else if b < KIB * KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else {
        format!("{:.1} GiB", b / (KIB * KIB * KIB))
    }
}

/// `12s ago`, `3m ago`, `1h ago`, `40d ago`; `just now` for the future (clock skew).
pub fn age(modified: Option<SystemTime>, now: SystemTime) -> String {
    let Some(m) = modified else {
        return "age unknown".to_string();
    };
    let Ok(d) = now.duration_since(m) else {
        return "just now".to_string();
    };
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s ago")
    } else if s < 3600 {
        format!("{}m ago", s / 60)
    } else if s < 86400 {
        format!("{}h ago", s / 3600)
    } else {
        format!("{}d ago", s / 86400)
    }
}

/// Edit distance between two short strings (for "did you mean").
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Up to three of `candidates` closest to `name`, nearest first.
pub fn similar<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| {
            let cl = c.to_lowercase();
            let d = if cl.contains(&lower) || lower.contains(&cl) {
                0
            } else {
                distance(&lower, &cl)
            };
            (d, c)
        })
        .filter(|(d, c)| *d <= (name.len().max(c.len()) / 3).max(2))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(3)
        .map(|(_, c)| c.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn sizes_and_ages() {
        assert_eq!(size(812), "812 B");
        assert_eq!(size(12 * 1024), "12.0 KiB");
        assert_eq!(size(1536 * 1024), "1.5 MiB");
        let now = SystemTime::now();
        assert_eq!(age(Some(now - Duration::from_secs(200)), now), "3m ago");
        assert_eq!(
            age(Some(now - Duration::from_secs(40 * 86400)), now),
            "40d ago"
        );
    }

    #[test]
    fn similar_names_are_ranked() {
        let got = similar("mian.rs", ["main.rs", "lib.rs", "zzzzzzzzz"]);
        assert_eq!(got, vec!["main.rs"]);
    }
}
