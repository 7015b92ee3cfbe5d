//! What a command line becomes when nib answers it itself ([`Call`]), and
//! which files nib may show as rows: regular text files within the size
//! limit, not logs ([`is_log`]). Reading command lines is `lines`' and
//! `grep`'s; running a call is `answer`'s.

use std::path::{Path, PathBuf};

use nib_files::tools::grep::GrepRequest;

/// What nib runs instead of the system program.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// The read tool on these `path:A-B` selectors.
    Read(Vec<String>),
    /// Counts for `wc` (which counts to print).
    Count(Vec<PathBuf>, WcWhat),
    /// `cut -c`: the columns of each line, as `N|TEXT` rows.
    Columns(PathBuf, Vec<(usize, Option<usize>)>),
    /// The grep tool's request.
    Grep(GrepRequest),
}

/// Which counts `wc` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WcWhat {
    pub(super) lines: bool,
    pub(super) words: bool,
    pub(super) bytes: bool,
    pub(super) chars: bool,
}

/// A regular text file nib may show as rows, with its line count.
pub(super) fn text_file(arg: &str, cwd: &Path) -> Option<(PathBuf, usize)> {
    if arg.is_empty() || arg == "-" {
        return None;
    }
    let path = cwd.join(arg);
    if is_log(&path) {
        return None;
    }
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() || meta.len() > nib_files::context::TEXT_LIMIT {
        return None;
    }
    let bytes = std::fs::read(&path).ok()?;
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return None;
    }
    let text = nib_text::text::Text::decode(&bytes);
    Some((path, text.len()))
}

/// Files that print as plain output through nibash: `*.log`, `*.out`, and
/// files in a `log`, `logs` or `test-logs` folder that git does not track.
pub fn is_log(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str());
    if matches!(ext, Some("log") | Some("out")) {
        return true;
    }
    let in_log_folder = path.components().any(|c| {
        matches!(
            c.as_os_str().to_str(),
            Some("log") | Some("logs") | Some("test-logs")
        )
    });
    in_log_folder && !tracked_by_git(path)
}

/// Whether git tracks the file (false outside a repository or without git).
fn tracked_by_git(path: &Path) -> bool {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let mut git = std::process::Command::new("git");
    for setting in nib_files::git::NEUTRAL_CONFIG {
        git.args(["-c", setting]);
    }
    git.arg("-C")
        .arg(dir)
        .args(["ls-files", "--error-unmatch", "--"])
        .arg(name)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The read tool's selector for lines `a` to `b` of `path`.
pub(super) fn selector(path: &Path, a: usize, b: usize) -> String {
    format!("{}:{a}-{b}", path.display())
}
