//! `nib shape`: a saved log as nibash would show it, cut by the rows the
//! purpose asks for. The cutting itself is `crate::nibash::cut`'s; reading
//! the flags is `parse`'s.

use std::io::Write;

/// What `nib shape` shapes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// The saved log.
    pub log: std::path::PathBuf,
    /// What the run was for (steers which rows stay).
    pub purpose: String,
    /// Its exit status.
    pub exit: Option<i32>,
    /// The command that wrote it.
    pub command: Option<String>,
}

/// Prints what nibash would show of a saved log; returns the exit status.
pub fn shape(s: &Shape) -> u8 {
    let bytes = match std::fs::read(&s.log) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "nib shape: {}: {e}; nothing was shaped",
                s.log.display()
            );
            return 1;
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    let rows: Vec<&str> = text.lines().collect();
    let words = crate::nibash::cut::expect_words(&s.purpose, &rows);
    let mut out = String::new();
    if let Some(c) = &s.command {
        out.push_str(&format!("$ {c}\n"));
    }
    if crate::nibash::cut::is_long(&text) {
        let extra = |row: &str| crate::nibash::cut::has_word(row, &words);
        // The keyword or fixed rows the configured decider starts from
        // (environment, then setup.json); the model's windows are for calls.
        let decider = crate::llm::Settings::from_env(&nib_settings::config_dir()).decider;
        let keep =
            crate::nibash::cut::pick(&rows, crate::nibash::cut::Decider::of(decider), &extra);
        out.push_str(&crate::nibash::cut::render(&rows, &keep, Some(&s.log)));
    } else {
        out.push_str(&text);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if let Some(c) = s.exit.filter(|c| *c != 0) {
        out.push_str(&format!("[exit {c}]\n"));
    }
    let stdout = std::io::stdout();
    let out = crate::terminal::for_stream(&out, std::io::IsTerminal::is_terminal(&stdout));
    let _ = stdout.lock().write_all(out.as_bytes());
    0
}
