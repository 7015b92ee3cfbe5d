//! Long output (`--only deciders`): each decider's recall of must-see lines and share of the logs, on real tools' logs.

use super::*;

/// Long output: for each log of the corpus (real tools run on purpose-built
/// failing projects, `bench/corpus/`), what each decider keeps — recall of
/// the lines a developer must see (by a rule per tool, `must_see.rs`, or
/// listed in `must.txt`), the characters the model gets as a share of the
/// log's, and the time of `nib shape` on it (a whole process).
pub(crate) fn decider_scenarios(nib: &Path, n: usize) -> Result<()> {
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
                    .env("NIB_SANDBOX", "0")
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
