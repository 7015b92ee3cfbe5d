//! nib-bench: measures nib end to end, as a client sees it, against the
//! programs an agent would otherwise run, side by side in one run.
//!
//! The harness starts the release `nib` on stdio and speaks JSON-RPC lines to
//! it (no MCP library in the way, so the numbers are the server's), generates
//! its inputs deterministically (fixed seed) or takes a tree from `--tree`, and
//! for each scenario interleaves nib's calls with the baseline's processes. It
//! prints a table of medians, p10–p90 spread, the ratio of nib to the
//! baseline, the response size in characters, and the server's peak memory.
//! It asserts nothing about timings: CI runs `--quick` only to keep it working.

// A scenario is a list of measurements: the 150-line rule (clippy.toml) is for product code.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::too_many_lines)]
#![deny(missing_docs)]

mod deciders;
mod file_tools;
mod git;
mod harness;
mod http;
mod must_see;
mod names;
mod nibash;
mod providers;
mod proxy;
mod speed;
mod start;
mod tree;

use deciders::*;
use file_tools::*;
use git::*;
use harness::*;
use http::*;
use names::*;
use nibash::*;
use providers::*;
use proxy::*;
use speed::*;
use start::*;
use tree::*;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

type Result<T> = std::result::Result<T, String>;

/// A function the generated 5,000-line file declares, for the declaration reads.
const LANG_DECL: &str = "main";

struct Options {
    nib: PathBuf,
    quick: bool,
    /// Only one group of scenarios (`deciders`, `proxy`).
    only: Option<String>,
    tree: Option<PathBuf>,
    /// A real JVM repository for the names scenarios, and the literal its
    /// grep scenario looks for (about 20 matches).
    jvm: Option<(PathBuf, String)>,
    iterations: usize,
}

fn parse_options() -> Result<Options> {
    let mut nib = PathBuf::from("target/release/nib");
    let mut quick = false;
    let mut only = None;
    let mut tree = None;
    let mut jvm = None;
    let mut iterations = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--nib" => nib = args.next().map(PathBuf::from).ok_or("--nib needs a path")?,
            "--quick" => quick = true,
            "--only" => {
                only = Some(args.next().ok_or(
                    "--only needs deciders, proxy, providers, names, start, speed or http",
                )?)
            }
            "--tree" => {
                tree = Some(
                    args.next()
                        .map(PathBuf::from)
                        .ok_or("--tree needs a path")?,
                )
            }
            "--jvm" => {
                let (Some(repo), Some(pattern)) = (args.next(), args.next()) else {
                    return Err("--jvm needs a repository and a grep literal".into());
                };
                jvm = Some((PathBuf::from(repo), pattern));
            }
            "--iterations" => {
                iterations = Some(
                    args.next()
                        .and_then(|n| n.parse().ok())
                        .ok_or("--iterations needs a number")?,
                )
            }
            "--help" | "-h" => {
                println!(
                    "usage: nib-bench [--nib PATH] [--quick] [--tree PATH] [--iterations N] [--only deciders|proxy|providers|names|start|speed|http]\n\
                     --only runs one group: the long-output corpus (recall and share per decider), the network proxy, providers, names, the sandbox's start per layer, or the speed of an edit and of nibash bursts and first calls, or MCP over HTTP (stdio against HTTP side by side, 1, 8 and 32 agents at once, memory per idle agent)\n\
                     --tree runs the tree scenarios on an existing folder (a real repository) instead of a generated one\n\
                     --jvm REPO LITERAL runs the names scenarios on a clone of a JVM repository, grepping LITERAL"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    let iterations = iterations.unwrap_or(if quick { 15 } else { 60 });
    Ok(Options {
        nib,
        quick,
        only,
        tree,
        jvm,
        iterations,
    })
}

// ---------------------------------------------------------------- inputs

// ---------------------------------------------------------------- the server

// ---------------------------------------------------------------- measuring

fn main() {
    if let Err(e) = run() {
        eprintln!("nib-bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let opts = parse_options()?;
    let nib = std::fs::canonicalize(&opts.nib).map_err(|e| {
        format!(
            "{}: {e}; build it with cargo build --release",
            opts.nib.display()
        )
    })?;
    let scratch = std::env::temp_dir().join(format!("nib-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let work = scratch.join("work");
    let state = scratch.join("state");
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let n = opts.iterations;
    match opts.only.as_deref() {
        Some("deciders") => return decider_scenarios(&nib, n.min(10)),
        Some("proxy") => return proxy_scenarios(&nib, &scratch, n),
        Some("providers") => return provider_scenarios(&nib, &scratch, n),
        Some("names") => return names_scenarios(&nib, &scratch, n.min(20), opts.jvm.as_ref()),
        Some("start") => return start_scenarios(&nib, &work, n),
        Some("speed") => {
            let mut rng = Rng(42);
            write(&work.join("f300.ts"), &source_file(&mut rng, 300, false))?;
            print_header(n, opts.quick);
            return speed_scenarios(&nib, &work, &state, n);
        }
        Some("http") => {
            let r = http_scenarios(&nib, &scratch, n, opts.quick);
            let _ = std::fs::remove_dir_all(&scratch);
            return r;
        }
        Some(other) => {
            return Err(format!(
                "--only {other}: the groups are deciders, proxy, providers, names, start, speed and http"
            ));
        }
        None => {}
    }

    let mut rng = Rng(42);
    write(&work.join("f300.ts"), &source_file(&mut rng, 300, false))?;
    let mut big = source_file(&mut rng, 5000, true);
    big.push_str("/// The benchmark's own declaration.\npub fn main() {\n    let x = 1;\n    let y = x + 1;\n    println!(\"{}\", y);\n}\n");
    write(&work.join("f5000.rs"), &big)?;
    let tree = match &opts.tree {
        Some(t) => std::fs::canonicalize(t).map_err(|e| format!("{}: {e}", t.display()))?,
        None => {
            let files = if opts.quick { 2_000 } else { 30_000 };
            let t = scratch.join("tree");
            let (d, _) = time(|| generate_tree(&t, files))?;
            eprintln!("generated {files} files in {:.1}s", d.as_secs_f64());
            t
        }
    };

    print_header(n, opts.quick);
    let mut peak_kib = 0u64;

    let (mut server, tools_peak) = file_tool_scenarios(&nib, &work, &state, &tree, n, opts.quick)?;
    peak_kib = peak_kib.max(tools_peak);
    start_scenarios(&nib, &work, n.min(40))?;
    speed_scenarios(&nib, &work, &state, n.min(40))?;
    let nibash_peak = nibash_scenarios(&nib, &work, &state, &scratch, &tree, &mut server, n)?;
    peak_kib = peak_kib.max(nibash_peak);

    names_scenarios(&nib, &scratch, n.min(20), opts.jvm.as_ref())?;
    git_scenarios(&nib, &scratch, n.min(20))?;
    decider_scenarios(&nib, n.min(10))?;
    proxy_scenarios(&nib, &scratch, n)?;
    provider_scenarios(&nib, &scratch, n)?;

    peak_kib = peak_kib.max(server.peak_kib().unwrap_or(0));
    println!(
        "\nthe main server's memory after each scenario (MiB; the peak where a scenario raised it):"
    );
    println!(
        "  {:>6} {:>8} {:>6} {:>6}",
        "peak", "resident", "heap", "files"
    );
    let mut last = 0;
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    for (scenario, m) in PEAK_AFTER.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let peak = if m.peak > last {
            mib(m.peak)
        } else {
            String::new()
        };
        last = last.max(m.peak);
        println!(
            "  {peak:>6} {:>8} {:>6} {:>6}  after {scenario}",
            mib(m.resident),
            mib(m.anon),
            mib(m.file)
        );
    }
    println!(
        "\npeak memory of the server (VmHWM): {:.1} MiB; tree: {} ({} files)",
        peak_kib as f64 / 1024.0,
        if opts.tree.is_some() {
            tree.display().to_string()
        } else {
            "generated".into()
        },
        count_files(&tree)
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
