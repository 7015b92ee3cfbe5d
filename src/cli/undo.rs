//! `nib undo`: the list of nib's recorded changes, one put back, or the
//! newest as a diff. The record and the putting back are
//! `nib_files::undo`'s; this room prints them.

use nib_files::workspace::Workspace;
use nib_settings::Config;
use std::io::Write;

use super::output::fail;

/// `nib undo`: lists nib's recorded changes, or puts one back; returns the
/// exit status (1 when a file could not be put back).
pub fn undo(config: &Config, which: Option<usize>) -> i32 {
    let workspace = Workspace::with_project_names(config.project_dir.clone(), false);
    let shown = |p: &std::path::Path| workspace.display(p);
    let stdout = std::io::stdout();
    let tty = std::io::IsTerminal::is_terminal(&stdout);
    let (text, code) = match which {
        None => (
            nib_files::undo::list(&config.state_dir, &config.project_dir, shown),
            0,
        ),
        // Nothing recorded is not a failure: there is nothing to put back.
        Some(_) if nib_files::undo::count(&config.state_dir, &config.project_dir) == 0 => (
            "Nothing to undo: nib has recorded no change in this project, so nothing was changed.\n"
                .to_string(),
            0,
        ),
        Some(n) => {
            let (text, all) = nib_files::undo::revert(
                &config.state_dir,
                &config.project_dir,
                &undo_floor(config),
                n,
                shown,
            );
            (text, i32::from(!all))
        }
    };
    let _ = stdout
        .lock()
        .write_all(crate::terminal::for_stream(&text, tty).as_bytes());
    code
}

/// The confinement `nib undo` adds of its own environment to the one each
/// change recorded (the stricter of the two applies).
pub fn undo_floor(config: &Config) -> nib_files::undo::Confinement {
    nib_files::undo::Confinement {
        sandbox: config.sandbox,
        confirm: config.confirm_outside_roots,
        roots: vec![config.project_dir.clone()],
    }
}

/// `nib undo --diff`: the newest change as a unified diff (files changed
/// since nib wrote them left out); exit 2 with a line on stderr when there
/// is none to show.
pub fn undo_diff(config: &Config) -> i32 {
    match nib_files::undo::latest_diff(
        &config.state_dir,
        &config.project_dir,
        &undo_floor(config),
        None,
        std::time::Duration::MAX,
    ) {
        Some(diff) => {
            let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
            let _ = std::io::stdout()
                .lock()
                .write_all(crate::terminal::for_stream(&diff, tty).as_bytes());
            0
        }
        None => fail("nib undo --diff: no change of nib's whose files still hold what it wrote"),
    }
}
