//! nib: an MCP server that gives coding agents hashline file tools.
//!
//! The crate is the broker: it speaks MCP ([`server`]), runs the file tools
//! ([`tools`]) over the one filesystem module ([`fs`]), and remembers what each
//! agent was shown ([`state`]). ARCHITECTURE.md is the map; the binary in
//! `main.rs` only picks between serving and a CLI verb ([`cli`]).

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![deny(missing_docs)]

pub mod agents;
pub mod blocks;
pub mod by_folder;
pub mod cli;
pub mod cli_tokens;
pub mod config;
pub mod context;
pub mod edit;
pub mod filekind;
pub mod fs;
pub mod git;
pub mod hashline;
pub mod hook;
pub mod human;
pub mod lang;
pub mod memory;
pub mod model;
pub mod names;
pub mod netproxy;
pub mod nibash;
pub mod outline;
pub mod path_text;
pub mod providers;
pub mod search;
pub mod server;
pub mod setup;
pub mod state;
pub mod statusline;
pub mod stdio;
pub mod terminal;
pub mod text;
pub mod tools;
pub mod undo;
pub mod validate;
pub mod workspace;
