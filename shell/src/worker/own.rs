//! nib's own `cat`, `head`, `tail`, `sed -n`, `cut -c`, `wc` and the grep
//! family (`grep`, `egrep`, `fgrep`, `rg`), inside the worker.
//!
//! Each one prints `[PATH#TAG]` blocks of anchored rows — through the read
//! and grep tools, so the rows are exactly theirs — when its output goes
//! straight to the model and nib understands every option given. Otherwise
//! (piped, redirected, inside `$(…)`, reading stdin, an option nib does not
//! know, a missing file, a log) the system program of the same name runs, so
//! scripts see the behaviour they expect. Rows printed count as seen: the
//! lines are reported to the broker, which checks them against the file.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;

use brush_core::commands::{CommandArg, ShellForCommand, SimpleCommand};
use brush_core::{ExecutionContext, ExecutionResult};
use serde_json::{Map, Value, json};

use super::link::Se;
use crate::channel::Event;
use nib_files::context::{Ctx, Programs};
use nib_files::seen::Agent;
use nib_files::tools;
use nib_files::workspace::Workspace;

/// The commands nib answers itself when it can.
pub const NAMES: &[&str] = &[
    "cat", "head", "tail", "grep", "egrep", "fgrep", "rg", "sed", "cut", "wc",
];

pub(crate) type Answer<'a> = Pin<
    Box<dyn std::future::Future<Output = Result<ExecutionResult, brush_core::Error>> + Send + 'a>,
>;

/// The builtin entry for every name in [`NAMES`].
pub fn run(ctx: ExecutionContext<'_, Se>, args: Vec<CommandArg>) -> Answer<'_> {
    Box::pin(async move {
        let argv: Vec<String> = args.iter().map(ToString::to_string).collect();
        let to_model = super::link::to_model(&ctx);
        if to_model {
            let cwd = ctx.shell.working_dir().to_path_buf();
            let name = ctx.command_name.clone();
            if let Some(call) = plan(&name, argv.get(1..).unwrap_or_default(), &cwd) {
                let (text, code) = answer(&call);
                use std::io::Write;
                let mut out = ctx.stdout();
                out.write_all(text.as_bytes())?;
                out.flush()?;
                return Ok(ExecutionResult::new(code));
            }
        }
        system(ctx, args).await
    })
}

/// Runs the system program named like the command, with the same arguments.
pub async fn system(
    ctx: ExecutionContext<'_, Se>,
    args: Vec<CommandArg>,
) -> Result<ExecutionResult, brush_core::Error> {
    let name = ctx.command_name.clone();
    let Some(path) = ctx.shell.find_first_executable_in_path_using_cache(&name) else {
        use std::io::Write;
        let _ = writeln!(ctx.stderr(), "nibash: {name}: command not found");
        return Ok(ExecutionResult::new(127));
    };
    let mut cmd = SimpleCommand::new(
        ShellForCommand::ParentShell(ctx.shell),
        ctx.params,
        path.to_string_lossy().into_owned(),
        args,
    );
    cmd.argv0 = Some(name);
    cmd.use_functions = false;
    let spawned = cmd.execute().await?;
    let waited = spawned.wait().await?;
    Ok(waited.into())
}

/// What nib runs instead of the system program.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// The read tool on these `path:A-B` selectors.
    Read(Vec<String>),
    /// Counts for `wc` (which counts to print).
    Count(Vec<PathBuf>, WcWhat),
    /// `cut -c`: the columns of each line, as `N|TEXT` rows.
    Columns(PathBuf, Vec<(usize, Option<usize>)>),
    /// The grep tool with these arguments.
    Grep(Map<String, Value>),
}

/// Which counts `wc` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WcWhat {
    lines: bool,
    words: bool,
    bytes: bool,
    chars: bool,
}

/// Plans nib's answer for `name args…`, or `None` when the system program
/// must run (an option nib does not know, stdin, a file it should not show
/// as rows).
pub fn plan(name: &str, args: &[String], cwd: &Path) -> Option<Call> {
    match name {
        "cat" => plan_cat(args, cwd),
        "head" | "tail" => plan_head_tail(name == "head", args, cwd),
        "sed" => plan_sed(args, cwd),
        "cut" => plan_cut(args, cwd),
        "wc" => plan_wc(args, cwd),
        "grep" | "egrep" | "fgrep" => plan_grep(name, args, cwd),
        "rg" => plan_rg(args, cwd),
        _ => None,
    }
}

/// A regular text file nib may show as rows, with its line count.
fn text_file(arg: &str, cwd: &Path) -> Option<(PathBuf, usize)> {
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

fn selector(path: &Path, a: usize, b: usize) -> String {
    format!("{}:{a}-{b}", path.display())
}

fn plan_cat(args: &[String], cwd: &Path) -> Option<Call> {
    let mut files = Vec::new();
    let mut options_done = false;
    for a in args {
        if !options_done && a == "--" {
            options_done = true;
        } else if !options_done && a.starts_with('-') && a.len() > 1 {
            // -n numbers lines, which the rows do anyway; anything else changes the bytes.
            if a != "-n" {
                return None;
            }
        } else {
            files.push(a.as_str());
        }
    }
    if files.is_empty() {
        return None;
    }
    let mut sels = Vec::new();
    for f in files {
        let (path, n) = text_file(f, cwd)?;
        sels.push(if n == 0 {
            path.display().to_string()
        } else {
            selector(&path, 1, n)
        });
    }
    Some(Call::Read(sels))
}

/// `-n N`, `-nN`, `-N`, `--lines=N` (tail also `+N`).
fn plan_head_tail(head: bool, args: &[String], cwd: &Path) -> Option<Call> {
    let mut count: Option<String> = None;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "-n" {
            count = Some(args.get(i + 1)?.clone());
            i += 1;
        } else if let Some(v) = a.strip_prefix("--lines=") {
            count = Some(v.to_string());
        } else if let Some(v) = a.strip_prefix("-n") {
            count = Some(v.to_string());
        } else if a.len() > 1 && a.starts_with('-') && a[1..].bytes().all(|b| b.is_ascii_digit()) {
            count = Some(a[1..].to_string());
        } else if a.starts_with('-') && a.len() > 1 {
            return None;
        } else {
            files.push(a.as_str());
        }
        i += 1;
    }
    if files.is_empty() {
        return None;
    }
    let count = count.unwrap_or_else(|| "10".into());
    let mut sels = Vec::new();
    for f in files {
        let (path, n) = text_file(f, cwd)?;
        let (a, b) = if head {
            if let Some(neg) = count.strip_prefix('-') {
                (1, n.saturating_sub(neg.parse::<usize>().ok()?))
            } else {
                (1, count.parse::<usize>().ok()?.min(n))
            }
        } else if let Some(from) = count.strip_prefix('+') {
            (from.parse::<usize>().ok()?.max(1), n)
        } else {
            let k: usize = count.trim_start_matches('-').parse().ok()?;
            (n.saturating_sub(k) + 1, n)
        };
        sels.push(if a > b || n == 0 {
            // Nothing to print but the header.
            format!("{}:{}-{}", path.display(), 1, 0)
        } else {
            selector(&path, a, b)
        });
    }
    // An empty range prints the file's header only: read the whole file's
    // header by asking for no lines is not possible, so drop such files.
    let sels: Vec<String> = sels.into_iter().filter(|s| !s.ends_with(":1-0")).collect();
    if sels.is_empty() {
        return None;
    }
    Some(Call::Read(sels))
}

/// `sed -n 'Ap'`, `'A,Bp'`, `'A,$p'`, `'$p'` on one file.
fn plan_sed(args: &[String], cwd: &Path) -> Option<Call> {
    let mut quiet = false;
    let mut script: Option<&str> = None;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-n" | "--quiet" | "--silent" => quiet = true,
            "-e" => {
                if script.is_some() {
                    return None;
                }
                script = Some(args.get(i + 1)?.as_str());
                i += 1;
            }
            _ if a.starts_with('-') && a.len() > 1 => return None,
            _ if script.is_none() => script = Some(a),
            _ => files.push(a),
        }
        i += 1;
    }
    if !quiet || files.len() != 1 {
        return None;
    }
    let (path, n) = text_file(files[0], cwd)?;
    let body = script?.trim().strip_suffix('p')?.trim();
    let line = |s: &str| -> Option<usize> {
        if s == "$" {
            Some(n)
        } else {
            s.trim().parse().ok()
        }
    };
    let (a, b) = match body.split_once(',') {
        Some((a, b)) => (line(a)?, line(b)?),
        None => {
            let a = line(body)?;
            (a, a)
        }
    };
    let b = b.min(n);
    if a == 0 || a > b {
        return None;
    }
    Some(Call::Read(vec![selector(&path, a, b)]))
}

/// `cut -c LIST FILE`.
fn plan_cut(args: &[String], cwd: &Path) -> Option<Call> {
    let mut list: Option<&str> = None;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "-c" {
            list = Some(args.get(i + 1)?.as_str());
            i += 1;
        } else if let Some(l) = a
            .strip_prefix("-c")
            .or_else(|| a.strip_prefix("--characters="))
        {
            list = Some(l);
        } else if a.starts_with('-') && a.len() > 1 {
            return None;
        } else {
            files.push(a);
        }
        i += 1;
    }
    if files.len() != 1 {
        return None;
    }
    let mut ranges = Vec::new();
    for part in list?.split(',') {
        let r = match part.split_once('-') {
            Some(("", b)) => (1, Some(b.parse().ok()?)),
            Some((a, "")) => (a.parse().ok()?, None),
            Some((a, b)) => (a.parse().ok()?, Some(b.parse().ok()?)),
            None => {
                let a: usize = part.parse().ok()?;
                (a, Some(a))
            }
        };
        if r.0 == 0 {
            return None;
        }
        ranges.push(r);
    }
    let (path, _) = text_file(files[0], cwd)?;
    Some(Call::Columns(path, ranges))
}

fn plan_wc(args: &[String], cwd: &Path) -> Option<Call> {
    let mut what = WcWhat::default();
    let mut files = Vec::new();
    for a in args {
        if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) {
            for f in flags.chars() {
                match f {
                    'l' => what.lines = true,
                    'w' => what.words = true,
                    'c' => what.bytes = true,
                    'm' => what.chars = true,
                    _ => return None,
                }
            }
        } else {
            files.push(text_file(a, cwd)?.0);
        }
    }
    if files.is_empty() {
        return None;
    }
    if what == WcWhat::default() {
        what = WcWhat {
            lines: true,
            words: true,
            bytes: true,
            chars: false,
        };
    }
    Some(Call::Count(files, what))
}

/// Turns a basic regular expression (grep's default) into the extended
/// syntax the grep tool reads.
fn bre_to_ere(bre: &str) -> String {
    let mut out = String::new();
    let mut chars = bre.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('(' | ')' | '|' | '{' | '}' | '+' | '?')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '|' | '{' | '}' | '+' | '?' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

fn plan_grep(name: &str, args: &[String], cwd: &Path) -> Option<Call> {
    let mut extended = name == "egrep";
    let mut literal = name == "fgrep";
    let (mut ignore_case, mut recursive, mut word, mut line) = (false, false, false, false);
    let (mut before, mut after) = (0usize, 0usize);
    let mut mode: Option<&str> = None;
    let mut pattern: Option<String> = None;
    let mut globs: Vec<String> = Vec::new();
    let mut operands: Vec<&str> = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let a = args[i].as_str();
        let mut next = || -> Option<String> {
            i += 1;
            args.get(i).cloned()
        };
        if options_done || !a.starts_with('-') || a == "-" {
            operands.push(a);
        } else if a == "--" {
            options_done = true;
        } else if let Some(g) = a.strip_prefix("--include=") {
            globs.push(g.to_string());
        } else if let Some(g) = a.strip_prefix("--exclude=") {
            globs.push(format!("!{g}"));
        } else if a == "-e" || a == "--regexp" {
            if pattern.is_some() {
                return None;
            }
            pattern = Some(next()?);
        } else if let Some(p) = a.strip_prefix("--regexp=") {
            pattern = Some(p.to_string());
        } else if matches!(a, "-A" | "-B" | "-C") {
            let n: usize = next()?.parse().ok()?;
            match a {
                "-A" => after = n,
                "-B" => before = n,
                _ => (before, after) = (n, n),
            }
        } else if a.starts_with("--") {
            match a {
                "--ignore-case" => ignore_case = true,
                "--recursive" => recursive = true,
                "--line-number" | "--with-filename" | "--color=never" | "--no-messages" => {}
                "--fixed-strings" => literal = true,
                "--extended-regexp" => extended = true,
                "--word-regexp" => word = true,
                "--line-regexp" => line = true,
                "--files-with-matches" => mode = Some("files"),
                "--count" => mode = Some("count"),
                _ => return None,
            }
        } else {
            let flags: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < flags.len() {
                match flags[k] {
                    'i' | 'y' => ignore_case = true,
                    'r' | 'R' => recursive = true,
                    'n' | 'H' | 's' => {}
                    'E' => extended = true,
                    'F' => literal = true,
                    'G' => extended = false,
                    'P' => extended = true,
                    'w' => word = true,
                    'x' => line = true,
                    'l' => mode = Some("files"),
                    'c' => mode = Some("count"),
                    c @ ('A' | 'B' | 'C') => {
                        let rest: String = flags[k + 1..].iter().collect();
                        let n: usize = if rest.is_empty() {
                            next()?.parse().ok()?
                        } else {
                            rest.parse().ok()?
                        };
                        match c {
                            'A' => after = n,
                            'B' => before = n,
                            _ => (before, after) = (n, n),
                        }
                        k = flags.len();
                        continue;
                    }
                    d if d.is_ascii_digit() => {
                        let n: usize = flags[k..].iter().collect::<String>().parse().ok()?;
                        (before, after) = (n, n);
                        k = flags.len();
                        continue;
                    }
                    _ => return None,
                }
                k += 1;
            }
        }
        i += 1;
    }
    let mut operands = operands.into_iter();
    let pattern = match pattern {
        Some(p) => p,
        None => operands.next()?.to_string(),
    };
    let mut paths: Vec<String> = Vec::new();
    for p in operands {
        let full = cwd.join(p);
        let meta = std::fs::metadata(&full).ok()?;
        if meta.is_dir() && !recursive {
            return None;
        }
        if meta.is_file() && (is_log(&full) || text_file(p, cwd).is_none()) {
            return None;
        }
        paths.push(full.display().to_string());
    }
    if paths.is_empty() {
        if !recursive {
            return None;
        }
        paths.push(cwd.display().to_string());
    }
    let mut regex = if literal || extended {
        pattern
    } else {
        bre_to_ere(&pattern)
    };
    if word || line {
        if literal {
            regex = escape_regex(&regex);
            literal = false;
        }
        regex = if line {
            format!("^(?:{regex})$")
        } else {
            format!(r"\b(?:{regex})\b")
        };
    }
    grep_call(GrepAsk {
        pattern: regex,
        paths,
        globs,
        ignore_case,
        literal,
        before,
        after,
        mode,
    })
}

fn escape_regex(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What a grep-family command line asks the grep tool for.
struct GrepAsk<'a> {
    pattern: String,
    paths: Vec<String>,
    globs: Vec<String>,
    ignore_case: bool,
    literal: bool,
    before: usize,
    after: usize,
    mode: Option<&'a str>,
}

/// The grep tool call for `ask`.
fn grep_call(ask: GrepAsk<'_>) -> Option<Call> {
    let GrepAsk {
        pattern,
        paths,
        globs,
        ignore_case,
        literal,
        before,
        after,
        mode,
    } = ask;
    let mut m = Map::new();
    m.insert("pattern".into(), json!(pattern));
    m.insert("paths".into(), json!(paths));
    if !globs.is_empty() {
        m.insert("glob".into(), json!(globs));
    }
    m.insert("ignoreCase".into(), json!(ignore_case));
    m.insert("literal".into(), json!(literal));
    m.insert("before".into(), json!(before));
    m.insert("after".into(), json!(after));
    if let Some(mode) = mode {
        m.insert("mode".into(), json!(mode));
    }
    Some(Call::Grep(m))
}

fn plan_rg(args: &[String], cwd: &Path) -> Option<Call> {
    let (mut ignore_case, mut literal, mut word) = (false, false, false);
    let (mut before, mut after) = (0usize, 0usize);
    let mut mode: Option<&str> = None;
    let mut globs = Vec::new();
    let mut operands: Vec<&str> = Vec::new();
    let mut pattern: Option<String> = None;
    let mut no_ignore = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut next = || -> Option<String> {
            i += 1;
            args.get(i).cloned()
        };
        match a {
            "-i" | "--ignore-case" | "-S" | "--smart-case" => ignore_case = a.contains('i'),
            "-F" | "--fixed-strings" => literal = true,
            "-w" | "--word-regexp" => word = true,
            "-n" | "--line-number" | "--hidden" | "-." => {}
            "-u" | "--no-ignore" => no_ignore = true,
            "-l" | "--files-with-matches" => mode = Some("files"),
            "-c" | "--count" => mode = Some("count"),
            "-g" | "--glob" => globs.push(next()?),
            "-e" | "--regexp" => pattern = Some(next()?),
            "-A" => after = next()?.parse().ok()?,
            "-B" => before = next()?.parse().ok()?,
            "-C" => {
                let n: usize = next()?.parse().ok()?;
                (before, after) = (n, n);
            }
            _ if a.starts_with('-') && a.len() > 1 => return None,
            _ => operands.push(a),
        }
        i += 1;
    }
    let mut operands = operands.into_iter();
    let mut regex = match pattern {
        Some(p) => p,
        None => operands.next()?.to_string(),
    };
    let mut paths = Vec::new();
    for p in operands {
        let full = cwd.join(p);
        let meta = std::fs::metadata(&full).ok()?;
        if meta.is_file() && (is_log(&full) || text_file(p, cwd).is_none()) {
            return None;
        }
        paths.push(full.display().to_string());
    }
    if paths.is_empty() {
        paths.push(cwd.display().to_string());
    }
    if word {
        if literal {
            regex = escape_regex(&regex);
            literal = false;
        }
        regex = format!(r"\b(?:{regex})\b");
    }
    let mut call = grep_call(GrepAsk {
        pattern: regex,
        paths,
        globs,
        ignore_case,
        literal,
        before,
        after,
        mode,
    })?;
    if no_ignore && let Call::Grep(m) = &mut call {
        m.insert("noIgnore".into(), json!(true));
    }
    Some(call)
}

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
    let project = super::link::request()
        .map(|r| r.cwd.clone())
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
    let config = match nib_files::config::Config::from_env() {
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
    if let Some(req) = super::link::request() {
        workspace.set_names(nib_files::names::Names::from_pairs(
            &req.names,
            &req.name_sources,
        ));
    }
    let agent = Mutex::new(Agent::default());
    let ctx = Ctx {
        workspace: &workspace,
        agent: &agent,
        config: &config,
        scope: nib_files::fs::Scope::Open,
        enforce_seen: false,
        live: None,
        programs: &AlreadyConfined,
    };
    let result = f(&ctx, &workspace);
    let guard = agent.lock().unwrap_or_else(|p| p.into_inner());
    for (path, version) in guard.seen.all_versions() {
        if version.seen.ranges().is_empty() {
            continue;
        }
        super::link::send(&Event::Seen {
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
struct AlreadyConfined;

impl Programs for AlreadyConfined {
    fn sandbox(
        &self,
        config: &nib_files::config::Config,
        roots: &[PathBuf],
    ) -> Result<nib_sandbox::Sandbox, String> {
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

fn answer_with(call: &Call, ctx: &Ctx, workspace: &Workspace) -> (String, u8) {
    let (text, code) = match call {
        Call::Read(sels) => {
            let mut m = Map::new();
            m.insert("paths".into(), json!(sels));
            m.insert("full".into(), json!(true));
            match tools::call_file_tool("read", Some(m), ctx) {
                Ok(out) => (out.text, u8::from(out.is_error)),
                Err(e) => (format!("nibash: {e}\n"), 2),
            }
        }
        Call::Grep(m) => match tools::call_file_tool("grep", Some(m.clone()), ctx) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("tempdir: {e}"),
        };
        for (name, body) in files {
            let p = d.path().join(name);
            if let Some(parent) = p.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            let _ = std::fs::write(p, body);
        }
        d
    }

    #[test]
    fn line_commands_become_read_selectors() {
        let d = dir_with(&[("a.txt", "1\n2\n3\n4\n5\n")]);
        let c = d.path();
        let p = c.join("a.txt").display().to_string();
        let sel = |s: &str| Some(Call::Read(vec![format!("{p}:{s}")]));
        assert_eq!(plan("cat", &strings(&["a.txt"]), c), sel("1-5"));
        assert_eq!(plan("head", &strings(&["-n", "2", "a.txt"]), c), sel("1-2"));
        assert_eq!(plan("head", &strings(&["-3", "a.txt"]), c), sel("1-3"));
        assert_eq!(
            plan("head", &strings(&["-n", "-2", "a.txt"]), c),
            sel("1-3")
        );
        assert_eq!(
            plan("head", &strings(&["-n", "50", "a.txt"]), c),
            sel("1-5")
        );
        assert_eq!(plan("tail", &strings(&["-n", "2", "a.txt"]), c), sel("4-5"));
        assert_eq!(
            plan("tail", &strings(&["-n", "+4", "a.txt"]), c),
            sel("4-5")
        );
        assert_eq!(
            plan("sed", &strings(&["-n", "2,4p", "a.txt"]), c),
            sel("2-4")
        );
        assert_eq!(plan("sed", &strings(&["-n", "3p", "a.txt"]), c), sel("3-3"));
        assert_eq!(
            plan("sed", &strings(&["-n", "2,$p", "a.txt"]), c),
            sel("2-5")
        );
    }

    #[test]
    fn unknown_options_stdin_and_logs_fall_back_to_the_system_program() {
        let d = dir_with(&[
            ("a.txt", "x\n"),
            ("build.log", "x\n"),
            ("logs/t.txt", "x\n"),
        ]);
        let c = d.path();
        assert_eq!(plan("cat", &strings(&["-A", "a.txt"]), c), None);
        assert_eq!(plan("cat", &strings(&[]), c), None);
        assert_eq!(plan("cat", &strings(&["-"]), c), None);
        assert_eq!(plan("cat", &strings(&["missing.txt"]), c), None);
        assert_eq!(plan("cat", &strings(&["build.log"]), c), None);
        assert_eq!(plan("cat", &strings(&["logs/t.txt"]), c), None);
        assert_eq!(plan("head", &strings(&["-c", "5", "a.txt"]), c), None);
        assert_eq!(plan("tail", &strings(&["-f", "a.txt"]), c), None);
        assert_eq!(plan("sed", &strings(&["s/x/y/", "a.txt"]), c), None);
        assert_eq!(plan("sed", &strings(&["-n", "/x/p", "a.txt"]), c), None);
        assert_eq!(plan("grep", &strings(&["-v", "x", "a.txt"]), c), None);
        assert_eq!(
            plan("grep", &strings(&["x"]), c),
            None,
            "grep without files reads stdin"
        );
        assert_eq!(
            plan("grep", &strings(&["x", "."]), c),
            None,
            "a folder without -r"
        );
        assert_eq!(plan("wc", &strings(&["-L", "a.txt"]), c), None);
    }

    #[test]
    fn files_in_a_log_folder_are_logs_unless_git_tracks_them() {
        let d = dir_with(&[("logs/run.txt", "x\n"), ("logs/kept.txt", "x\n")]);
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(d.path())
                .output()
                .is_ok_and(|o| o.status.success())
        };
        assert!(
            is_log(&d.path().join("logs/run.txt")),
            "no repository: a log"
        );
        if git(&["init", "-q"]) && git(&["add", "logs/kept.txt"]) {
            assert!(
                !is_log(&d.path().join("logs/kept.txt")),
                "tracked: not a log"
            );
            assert!(is_log(&d.path().join("logs/run.txt")), "untracked: a log");
        }
    }

    #[test]
    fn grep_options_map_onto_the_grep_tool() {
        let d = dir_with(&[("a.txt", "x\n")]);
        let c = d.path();
        let Some(Call::Grep(m)) = plan("grep", &strings(&["-rni", "-C2", "a\\|b", "."]), c) else {
            panic!("grep -rni was not planned");
        };
        assert_eq!(m["pattern"], json!("a|b"));
        assert_eq!(m["ignoreCase"], json!(true));
        assert_eq!(
            (m["before"].clone(), m["after"].clone()),
            (json!(2), json!(2))
        );
        let Some(Call::Grep(m)) = plan("grep", &strings(&["-lw", "-F", "a.b", "a.txt"]), c) else {
            panic!("grep -lw -F was not planned");
        };
        assert_eq!(m["pattern"], json!(r"\b(?:a\.b)\b"));
        assert_eq!(m["mode"], json!("files"));
        let Some(Call::Grep(m)) = plan("rg", &strings(&["-g", "*.rs", "fn (a|b)"]), c) else {
            panic!("rg was not planned");
        };
        assert_eq!(m["glob"], json!(["*.rs"]));
        assert_eq!(m["pattern"], json!("fn (a|b)"));
    }

    #[test]
    fn basic_regular_expressions_become_extended() {
        assert_eq!(bre_to_ere(r"a\(b\|c\)+"), r"a(b|c)\+");
        assert_eq!(bre_to_ere(r"x\{2\}"), "x{2}");
        assert_eq!(bre_to_ere(r"\.\*"), r"\.\*");
    }
}
