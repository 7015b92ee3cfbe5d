//! git's output, reshaped for the model: what nibash's `git` prints when its
//! output goes straight to the model (piped or redirected, git's own bytes
//! pass through untouched — the worker decides that, not this module).
//!
//! [`plan`] reads a git command line and says whether and how its output is
//! reshaped, and which settings git runs with (dates to the minute in local
//! time, abbreviated hashes — git's own abbreviation, so it stays unique).
//! [`reshape`] turns what git printed into the shapes of [`status`],
//! [`history`] (commit headers, `--stat`, patches through [`diff`]) and the
//! file listings, removes hints and progress, and leaves every line it does
//! not recognise as git printed it. Errors and git's exit status are never
//! touched; the whole output is kept in the call's log by the caller.

pub mod diff;
pub mod history;
mod noise;
pub mod status;

use std::path::{Path, PathBuf};

use crate::context::Ctx;
use nib_text::hashline::Tag;

/// Settings for nib's own git calls (`read PATH@REV`, the worker's check
/// of whether git tracks a file), each after `-c`: the repository's own configuration
/// may name commands to run (the repository is the model's to write), and
/// none of them may run here. Textconv and external diffs are also off by
/// the commands' flags (`--no-textconv`, `--no-ext-diff`).
pub const NEUTRAL_CONFIG: [&str; 7] = [
    "color.ui=false",
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "diff.external=",
    "core.sshCommand=false",
    "credential.helper=",
];

/// What a reshaped command's output looks like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `git status`, long (`short: false`) or `-s`.
    Status {
        /// `-s`/`--short` (also `-sb`) rather than the long form.
        short: bool,
    },
    /// `log`, `show`, `diff`: commit headers (unless the command gave its own
    /// format), `--stat` with exact counts, patches as rows.
    History {
        /// nib shapes the commit headers (false when the command gave its
        /// own `--format`/`--pretty`).
        headers: bool,
    },
    /// `ls-files`: paths grouped by folder.
    Listing,
    /// A subcommand that changes the repository: hints and progress removed.
    Quiet,
}

/// How one git command line runs and is reshaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The arguments git runs with (after `git`), settings first.
    pub args: Vec<String>,
    /// The shape of its output.
    pub shape: Shape,
    /// Folders given with `-C`, in order (diff paths are found from there).
    pub dirs: Vec<String>,
    /// The subcommand's words after it (as given).
    pub operands: Vec<String>,
    /// The subcommand.
    pub sub: String,
}

/// Options before the subcommand that nib understands; anything else leaves
/// the command to git alone.
fn global_options(args: &[String]) -> Option<(usize, Vec<String>)> {
    let mut i = 0;
    let mut dirs = Vec::new();
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-C" => {
                dirs.push(args.get(i + 1)?.clone());
                i += 2;
            }
            "-c" => i += 2,
            "--no-pager" | "-P" | "--no-optional-locks" | "--literal-pathspecs" => i += 1,
            s if s.starts_with('-') => return None,
            _ => return Some((i, dirs)),
        }
    }
    None
}

/// Whether `args` hold any of `options` (exactly, or as `--opt=…`).
fn has(args: &[String], options: &[&str]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| {
        options
            .iter()
            .any(|o| a == o || (o.starts_with("--") && a.starts_with(&format!("{o}="))))
    })
}

/// The settings git runs with for reshaped history.
const HISTORY_SETTINGS: &[&str] = &[
    "-c",
    "log.date=format-local:%Y-%m-%d %H:%M",
    "-c",
    "log.abbrevCommit=true",
    "-c",
    "color.ui=false",
];

/// Output formats of status that programs read (or nib cannot): git's bytes.
const STATUS_MACHINE: &[&str] = &[
    "-z",
    "--null",
    "--porcelain",
    "--color",
    "--column",
    "-v",
    "--verbose",
];

/// The same for log, show and diff.
const DIFF_MACHINE: &[&str] = &[
    "-z",
    "--raw",
    "--numstat",
    "--word-diff",
    "--word-diff-regex",
    "--color-words",
    "--color",
    "--ext-diff",
    "--graph",
    "--patch-with-raw",
];

/// Commands that change a repository: only their noise goes.
const CHANGING: &[&str] = &[
    "commit",
    "merge",
    "rebase",
    "pull",
    "cherry-pick",
    "revert",
    "stash",
    "checkout",
    "switch",
    "reset",
    "add",
    "rm",
    "mv",
    "fetch",
    "push",
];

/// How `git ARGS` is reshaped, or `None` when its output passes through as
/// git prints it (an output format nib does not know, machine formats, an
/// option before the subcommand nib does not read).
pub fn plan(args: &[String]) -> Option<Plan> {
    let (at, dirs) = global_options(args)?;
    let (global, rest) = args.split_at(at);
    let sub = rest.first()?.as_str();
    let opts = &rest[1..];
    let own_format = has(opts, &["--oneline", "--format", "--pretty", "--graph"]);
    let mut run: Vec<String> = Vec::new();
    let shape = match sub {
        "status" if !has(opts, STATUS_MACHINE) => Shape::Status {
            short: has(opts, &["-s", "--short"]) || opts.iter().any(|a| a == "-sb" || a == "-bs"),
        },
        "log" | "show" | "diff" if !has(opts, DIFF_MACHINE) => {
            if !own_format {
                run.extend(HISTORY_SETTINGS.iter().map(|s| s.to_string()));
            }
            Shape::History {
                headers: !own_format,
            }
        }
        "ls-files"
            if !has(
                opts,
                &[
                    "-z",
                    "-s",
                    "--stage",
                    "--format",
                    "-t",
                    "-v",
                    "-f",
                    "--debug",
                    "--eol",
                    "-u",
                    "--unmerged",
                    "--resolve-undo",
                    "--deduplicate",
                ],
            ) =>
        {
            Shape::Listing
        }
        s if CHANGING.contains(&s) => {
            if s == "checkout" || s == "switch" {
                run.extend(["-c".to_string(), "advice.detachedHead=false".to_string()]);
            }
            Shape::Quiet
        }
        _ => return None,
    };
    run.extend(global.iter().cloned());
    run.push(sub.to_string());
    for a in opts {
        // --stat becomes --numstat: exact added and removed counts.
        if matches!(shape, Shape::History { .. }) && (a == "--stat" || a.starts_with("--stat=")) {
            run.push("--numstat".into());
        } else {
            run.push(a.clone());
        }
    }
    Some(Plan {
        args: run,
        shape,
        dirs,
        operands: opts.to_vec(),
        sub: sub.to_string(),
    })
}

/// Where a command ran: its folder and the repository's top folder.
pub struct Place {
    /// The folder git ran in (after `-C`).
    pub cwd: PathBuf,
    /// The work tree's top folder (diff paths are relative to it).
    pub top: PathBuf,
}

impl Place {
    /// `cwd` after the plan's `-C` folders, and the work tree around it (the
    /// nearest folder above with a `.git`).
    pub fn of(cwd: &Path, plan: &Plan) -> Place {
        let mut cwd = cwd.to_path_buf();
        for d in &plan.dirs {
            cwd = cwd.join(d);
        }
        let top = cwd
            .ancestors()
            .find(|a| a.join(".git").exists())
            .unwrap_or(&cwd)
            .to_path_buf();
        Place { cwd, top }
    }
}

/// What [`reshape`] made of git's output.
#[derive(Debug, Default)]
pub struct Shaped {
    /// The reshaped stdout.
    pub out: String,
    /// The reshaped stderr.
    pub err: String,
    /// Lines of files printed as anchors: (canonical path, tag, lines).
    pub seen: Vec<(PathBuf, Tag, Vec<usize>)>,
    /// Advice or progress that git printed is not in the answer: the log
    /// has it. (The views — status, log, diff — drop only generic advice
    /// and reformat the rest; their whole output is in the log too, unnamed.)
    pub cut: bool,
}

/// Reshapes what git printed. `me` is the user's own email (asked only when
/// a commit header needs it).
pub fn reshape(
    ctx: &Ctx,
    plan: &Plan,
    place: &Place,
    out: &str,
    err: &str,
    me: &dyn Fn() -> Option<String>,
) -> Shaped {
    let mut shaped = Shaped::default();
    let from_cwd = |p: &str| named(ctx, &place.cwd, p);
    let (err, err_cut) = quiet(err);
    shaped.err = err;
    shaped.cut |= err_cut;
    match &plan.shape {
        Shape::Status { short: false } => shaped.out = status::long(out, &from_cwd),
        Shape::Status { short: true } => shaped.out = status::short(out, &from_cwd),
        Shape::Listing => shaped.out = listing(out, &from_cwd),
        Shape::History { headers } => {
            let from_top = |p: &str| named(ctx, &place.top, p);
            let h = history::reshape(ctx, &place.top, out, *headers, me, &from_top);
            shaped.out = h.text;
            shaped.seen = h.seen;
        }
        Shape::Quiet => {
            let (o, cut) = quiet(out);
            shaped.out = o;
            shaped.cut |= cut;
        }
    }
    shaped
}

/// A path git printed (relative to `base`) shortened with the longest
/// named directory that covers it; quoted paths and renames stay as git
/// printed them, and so does a path no name covers.
fn named(ctx: &Ctx, base: &Path, path: &str) -> String {
    if path.starts_with('"') || path.contains(" -> ") || path.contains(" => ") {
        return path.to_string();
    }
    let (bare, slash) = match path.strip_suffix('/') {
        Some(p) => (p, "/"),
        None => (path, ""),
    };
    let shown = ctx.workspace.display(&base.join(bare));
    if shown.starts_with('~') {
        format!("{shown}{slash}")
    } else {
        path.to_string()
    }
}

/// Paths, one per line, grouped by folder.
fn listing(out: &str, name: &dyn Fn(&str) -> String) -> String {
    let paths: Vec<String> = out.lines().map(name).collect();
    let mut s = nib_text::by_folder::group(&paths).join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// `text` without hints and progress; whether anything went.
pub fn quiet(text: &str) -> (String, bool) {
    let mut out = String::with_capacity(text.len());
    let mut cut = false;
    for line in text.lines() {
        if noise::is_hint(line) || noise::is_progress(line) {
            cut = true;
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    (out, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn plans_read_the_subcommand_after_global_options() {
        let p = plan(&args("-C sub log -3 --stat")).expect("log is reshaped");
        assert_eq!(p.shape, Shape::History { headers: true });
        assert_eq!(p.dirs, vec!["sub".to_string()]);
        assert_eq!(&p.args[6..], &args("-C sub log -3 --numstat")[..]);
        assert_eq!(
            plan(&args("log --oneline -5")).map(|p| p.shape),
            Some(Shape::History { headers: false })
        );
        assert_eq!(
            plan(&args("status -sb")).map(|p| p.shape),
            Some(Shape::Status { short: true })
        );
        assert_eq!(
            plan(&args("commit -m x")).map(|p| p.shape),
            Some(Shape::Quiet)
        );
    }

    #[test]
    fn machine_formats_and_unknown_commands_pass_through() {
        for a in [
            "status --porcelain",
            "status -z",
            "diff --numstat",
            "log -z",
            "ls-files -s",
            "--git-dir=x status",
            "blame f",
            "config user.email",
        ] {
            assert_eq!(plan(&args(a)), None, "{a}");
        }
    }

    #[test]
    fn hints_and_progress_go_and_errors_stay() {
        let (q, cut) = quiet(
            "Receiving objects: 100% (3/3), done.\nremote: Counting objects: 5\nhint: use --force\nerror: failed to push\n  (use \"git pull\" to merge)\nEverything up-to-date\n",
        );
        assert_eq!(q, "error: failed to push\nEverything up-to-date\n");
        assert!(cut);
    }
}
