//! nib: an MCP server that gives coding agents hashline file tools.
//!
//! This crate is the broker, the top of nib's crates: it speaks MCP
//! ([`server`]), offers the file tools (`nib-files`) and the shell's
//! ([`tools`]), runs nibash's broker side ([`nibash`]) around the worker
//! (`nib-shell`), the providers, the network proxy, the model clients,
//! setup, hooks and the status line. ARCHITECTURE.md is the map; the binary
//! in `main.rs` only picks between serving and a CLI verb ([`cli`]).

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![deny(missing_docs)]

pub mod agents;
pub mod broker_ctx;
pub mod cli;
pub mod cli_tokens;
pub mod confinement;
pub mod hook;
pub mod llm;
pub mod netproxy;
pub mod nibash;
pub mod providers;
pub mod request_state;
pub mod serve_http;
pub mod server;
pub mod setup;
pub mod statusline;
pub mod stdio;
pub mod terminal;
pub mod tools;
