//! A planned [`Call`] run with the file tools in this process: read and
//! grep with their typed requests ([`nib_files::tools::read::run`],
//! [`nib_files::tools::grep::run`]), `wc` and `cut -c`
//! here; the rows the tools showed are reported to the broker as seen
//! ([`Event::Seen`]). The worker's sandbox confines this process, so the
//! tools run unconfined ([`AlreadyConfined`]). Which command lines become a
//! call is decided by `lines` and `grep`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nib_files::tools::read::ReadRequest;
use nib_files::tools::read::versions::Collapse;

use super::call::{Call, WcWhat};
use crate::channel::Event;
use nib_files::context::{Ctx, Programs};
use nib_files::seen::Agent;
use nib_files::tools;
use nib_files::workspace::Workspace;

/// Runs the call with the tools in this process and reports the rows shown
/// as seen; returns the text and the exit status.
pub fn answer(call: &Call) -> (String, u8) {
    let answered = with_tools(|ctx, workspace| answer_with(call, ctx, workspace));
    match answered {
        Ok(a) => a,
        Err(e) => (format!("nibash: {e}\n"), 2),
    }
}

/// Runs `f` with the file tools of this process: a workspace on the call's
/// project with the broker's names, a fresh agent (unconfined: the worker's
/// sandbox confines it); reports the rows the tools showed as seen.
pub fn with_tools<T>(f: impl FnOnce(&Ctx, &Workspace) -> T) -> Result<T, String> {
    let project = crate::worker::link::request()
        .map(|r| r.cwd.clone())
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
    let config = match nib_settings::Config::from_env() {
        Ok(mut c) => {
            c.project_dir = project.clone();
            c.sandbox = false;
            c.confirm_outside_roots = false;
            c
        }
        Err(e) => return Err(e.to_string()),
    };
    let workspace = Workspace::new(project);
    // The broker's names, so the rows' headers shorten as the tools' do.
    if let Some(req) = crate::worker::link::request() {
        workspace.set_names(nib_files::names::Names::from_pairs(
            &req.names,
            &req.name_sources,
        ));
    }
    let agent = Mutex::new(Agent::default());
    let settings = config.file_tools();
    let programs = AlreadyConfined { config: &config };
    let ctx = Ctx {
        workspace: &workspace,
        agent: &agent,
        settings: &settings,
        scope: nib_files::fs::Scope::Open,
        enforce_seen: false,
        live: None,
        programs: &programs,
        placing: None,
    };
    let result = f(&ctx, &workspace);
    let guard = agent.lock().unwrap_or_else(|p| p.into_inner());
    for (path, version) in guard.seen.all_versions() {
        if version.seen.ranges().is_empty() {
            continue;
        }
        crate::worker::link::send(&Event::Seen {
            path: path.to_path_buf(),
            tag: version.tag.to_string(),
            lines: version.seen.ranges().to_vec(),
        });
    }
    Ok(result)
}

/// The worker's [`Programs`]: this process is confined already (its
/// sandbox, the broker's exec judge on every exec of its tree), so a
/// program a file tool starts here runs with no layer of its own (layer 1
/// only). nib's own commands read no revisions today (`cat a.txt@HEAD` is
/// the system cat's missing file); this is where read's git would run.
struct AlreadyConfined<'a> {
    /// The worker's settings (the folders and variables it passes on).
    config: &'a nib_settings::Config,
}

impl Programs for AlreadyConfined<'_> {
    fn sandbox(&self, roots: &[PathBuf]) -> Result<nib_sandbox::Sandbox, String> {
        let config = self.config;
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find nib's own binary: {e}; nothing was run"))?;
        let policy = nib_sandbox::Policy {
            writable: roots.to_vec(),
            read_only: config.sandbox_bind.clone(),
            pass_env: config.sandbox_env.clone(),
            network: config.sandbox_network,
            use_bwrap: config.sandbox_bwrap,
            ..nib_sandbox::Policy::default()
        };
        Ok(nib_sandbox::Sandbox::new(
            &nib_sandbox::entry_beside(&exe),
            policy,
        ))
    }
}

/// Runs `call` with `ctx`: its text and exit status.
fn answer_with(call: &Call, ctx: &Ctx, workspace: &Workspace) -> (String, u8) {
    let (text, code) = match call {
        Call::Read(sels) => {
            let mut request = ReadRequest::new(sels.clone());
            request.options.collapse = Collapse::Off;
            match tools::read::run(request, ctx) {
                Ok(out) => (out.text, u8::from(out.is_error)),
                Err(e) => (format!("nibash: {e}\n"), 2),
            }
        }
        Call::Grep(request) => match tools::grep::run(request.clone(), ctx) {
            Ok(out) if out.is_error => (out.text, 2),
            Ok(out) => {
                let none = out.text.starts_with("no matches");
                (out.text, u8::from(none))
            }
            Err(e) => (format!("nibash: {e}\n"), 2),
        },
        Call::Count(files, what) => (count(workspace, files, *what), 0),
        Call::Columns(path, ranges) => (columns(workspace, path, ranges), 0),
    };
    (text, code)
}

/// `wc`'s answer: each file's header and counts, and a total for several.
fn count(ws: &Workspace, files: &[PathBuf], what: WcWhat) -> String {
    let mut out = String::new();
    let mut total = [0usize; 4];
    for f in files {
        let bytes = std::fs::read(f).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let n = [
            bytes.iter().filter(|b| **b == b'\n').count(),
            text.split_whitespace().count(),
            bytes.len(),
            text.chars().count(),
        ];
        for k in 0..4 {
            total[k] += n[k];
        }
        out.push_str(&format!(
            "{} {}\n",
            nib_text::hashline::header(&ws.display(f), nib_text::hashline::Tag::of(&bytes)),
            counts(n, what)
        ));
    }
    if files.len() > 1 {
        out.push_str(&format!("total {}\n", counts(total, what)));
    }
    out
}

/// The counts `what` asks for, in `wc`'s order.
fn counts(n: [usize; 4], what: WcWhat) -> String {
    let mut parts = Vec::new();
    if what.lines {
        parts.push(format!("{} lines", n[0]));
    }
    if what.words {
        parts.push(format!("{} words", n[1]));
    }
    if what.bytes {
        parts.push(format!("{} bytes", n[2]));
    }
    if what.chars {
        parts.push(format!("{} chars", n[3]));
    }
    parts.join(", ")
}

/// `cut -c`'s answer: the file's header and each line's kept columns.
fn columns(ws: &Workspace, path: &Path, ranges: &[(usize, Option<usize>)]) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = nib_text::text::Text::decode(&bytes);
    let mut out =
        nib_text::hashline::header(&ws.display(path), nib_text::hashline::Tag::of(&bytes));
    out.push('\n');
    for n in 1..=text.len() {
        let line: Vec<char> = text.line(n).unwrap_or_default().chars().collect();
        let mut kept = String::new();
        for (i, c) in line.iter().enumerate() {
            let col = i + 1;
            if ranges
                .iter()
                .any(|(a, b)| col >= *a && b.is_none_or(|b| col <= b))
            {
                kept.push(*c);
            }
        }
        out.push_str(&format!("{n}|{kept}\n"));
    }
    out
}
