//! Black-box tests: the built `nib` binary, driven over stdio by rmcp's client
//! (both protocol eras) or by raw JSON-RPC lines, and as a CLI.
//! One test binary, so the suite links once.
// A test is a script of steps: the 150-line rule (clippy.toml) is for product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod architecture;
mod bash_diff;

mod claude_code;
mod cli;
mod clients;
mod common;
mod confine;
mod deciders;
mod edit;
mod fail_closed;
mod first_use;
mod git;
mod git_dirs;
mod grep;
mod http;
mod http_clients;
mod http_red_team;
mod lang;
mod layers;
mod limits;
mod names;
mod network;
mod network_why;
mod nibash;
mod nibash_control;
mod patch_fixtures;
mod planted;
mod plugin;
mod policy;
mod protocol;
mod providers;
mod read;
mod read_git;
mod read_more;
mod reads;
mod red_team;
mod replay;
mod runners;
mod sandbox_default;
mod secrets;
mod terminal;
mod tool_schemas;
mod write;
