//! The `nib` binary. `main` reads the command line, sets up logging to stderr and either serves
//! MCP on stdio ([`server`]) or runs one tool as a CLI verb ([`cli`]). stdout
//! carries only protocol messages (or a verb's output); the broker never prints.

#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

use nib::{cli, server, stdio};
use nib_settings as config;

use std::io::Write;

use anyhow::Context;
use rmcp::ServiceExt;

/// musl's allocator is slow under the broker's threads; the static build
/// takes mimalloc (docs/install.md, the musl section).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env(config::NIB_LOG)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp::service=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

async fn serve(config: config::Config) -> anyhow::Result<()> {
    let (state_dir, project_dir) = (config.state_dir.clone(), config.project_dir.clone());
    let server = server::NibServer::new(config);
    // What `nib statusline` shows: this server's running calls and jobs.
    let _status = nib::statusline::publish(&state_dir, &project_dir, server.nibash());
    let keeper = server.clone();
    let io = stdio::start();
    let running = match server.serve((io.sink, io.stream)).await {
        Ok(r) => r,
        Err(e) => {
            // A client that leaves before starting a session is not an error
            // of ours; what the guard answered itself still goes out.
            tracing::info!("no MCP session: {e}");
            let bound = stdio::CLOSING_GRACE + std::time::Duration::from_secs(2);
            let _ = tokio::time::timeout(bound, io.output_done).await;
            return Ok(());
        }
    };
    let waited = running.waiting().await;
    keeper.save();
    keeper.stop_providers();
    nib::netproxy::remove_socket_folder();
    waited.context("serving MCP on stdio")?;
    // Let the last answers reach stdout before the process ends.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), io.output_done).await;
    Ok(())
}

/// Runs a server (`work`: MCP on stdio, or `nib serve --http`) on the
/// runtime both share: two workers (the tools run on blocking threads),
/// malloc's arenas limited. Blocking tool threads must not keep the process
/// alive once the server is done, so they get 100 ms. `None` (said on
/// stderr) when the runtime cannot start.
fn run_async<F: std::future::Future>(work: F) -> Option<F::Output> {
    nib_text::malloc::limit_arenas();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "nib: cannot start the async runtime: {e}"
            );
            return None;
        }
    };
    let result = runtime.block_on(work);
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    Some(result)
}

fn main() -> std::process::ExitCode {
    // A confined worker: the sandbox re-executes nib to apply its layers.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw.first().is_some_and(|a| a == nib_sandbox::ENTRY_ARG) {
        nib_sandbox::entry_main(&raw[1..]);
    }
    // A nibash worker, already confined: run one call's command line.
    if raw
        .first()
        .is_some_and(|a| a == nib_shell::worker::NIBASH_ARG)
    {
        // The session's zygote: forks a worker for each call.
        if raw
            .get(1)
            .is_some_and(|a| a == nib_shell::worker::ZYGOTE_ARG)
        {
            nib_sandbox::serve_zygote(nib_shell::worker::main);
        }
        nib_shell::worker::main();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The hook runs on every tool call of the client: answer it first, with no setup.
    if args.first().is_some_and(|a| a == "hook") && args.len() == 1 {
        let mut input = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut input);
        let answer = nib::hook::run(&config::state_dir(), &input);
        let _ = std::io::stdout().write_all(answer.stdout.as_bytes());
        return std::process::ExitCode::from(answer.code as u8);
    }
    let command = match cli::parse(&args) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "{e}");
            return std::process::ExitCode::from(2);
        }
    };
    match command {
        cli::Command::Version => {
            let _ = writeln!(std::io::stdout(), "nib {}", env!("CARGO_PKG_VERSION"));
            return std::process::ExitCode::SUCCESS;
        }
        cli::Command::Help => {
            let _ = write!(std::io::stdout(), "{}", cli::USAGE);
            return std::process::ExitCode::SUCCESS;
        }
        cli::Command::HelpFor(usage) => {
            let _ = write!(std::io::stdout(), "{usage}");
            return std::process::ExitCode::SUCCESS;
        }
        _ => {}
    }
    init_logging();
    let mut config = match config::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "nib: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    // A multi-file edit cut short by a crash is completed (or rolled back) first.
    for line in nib_files::tools::edit::journal::recover(&config.state_dir) {
        tracing::warn!("edit journal: {line}");
    }
    match command {
        cli::Command::Doctor => {
            let code = cli::doctor(&config);
            // The proxy's and the brokered secrets' folders, when doctor made them.
            nib::netproxy::remove_socket_folder();
            std::process::ExitCode::from(code as u8)
        }
        cli::Command::Hook => std::process::ExitCode::SUCCESS,
        cli::Command::Statusline => {
            let mut input = String::new();
            if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut input);
            }
            let project = nib::statusline::project_from(&input, &config.project_dir);
            let running = nib::statusline::running(&config.state_dir, &project);
            let _ = writeln!(std::io::stdout(), "{}", nib::statusline::line(&running));
            std::process::ExitCode::SUCCESS
        }
        cli::Command::Shape(s) => std::process::ExitCode::from(cli::shape(&s)),
        cli::Command::UndoDiff => {
            std::process::ExitCode::from(u8::try_from(cli::undo_diff(&config)).unwrap_or(1))
        }
        cli::Command::Undo(which) => {
            std::process::ExitCode::from(u8::try_from(cli::undo(&config, which)).unwrap_or(1))
        }
        cli::Command::Setup(args) => {
            let places = nib::setup::Places::from_env(&config.project_dir);
            let (out, code) = nib::setup::run(&places, &args);
            let _ = std::io::stdout().write_all(nib::terminal::visible(&out).as_bytes());
            std::process::ExitCode::from(code as u8)
        }
        cli::Command::Tool { call, json } => {
            let code = cli::run_tool(config, call, json);
            nib::netproxy::remove_socket_folder();
            std::process::ExitCode::from(code as u8)
        }
        cli::Command::Version | cli::Command::Help | cli::Command::HelpFor(_) => {
            std::process::ExitCode::SUCCESS
        }
        cli::Command::ServeHttp(options) => {
            let Some(result) = run_async(nib::serve_http::serve(config, options)) else {
                return std::process::ExitCode::FAILURE;
            };
            match result {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "nib: {e:#}");
                    std::process::ExitCode::from(2)
                }
            }
        }
        cli::Command::Serve(providers) => {
            // A person who typed `nib` at a terminal sees why nothing
            // happens; an MCP client's pipe gets nothing extra.
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                let _ = writeln!(
                    std::io::stderr(),
                    "nib: serving MCP on stdin for an MCP client (Claude Code, OpenCode…); to set it up for this project run `nib setup`, for the verbs `nib --help`; ctrl+d ends"
                );
            }
            config.cli_providers = providers;
            let Some(result) = run_async(serve(config)) else {
                return std::process::ExitCode::FAILURE;
            };
            match result {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
    }
}
