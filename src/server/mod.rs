//! The MCP server: both protocol eras over stdio, tool routing, roots.
//!
//! This is the only module (with its rooms) that knows MCP. It lists the tools of
//! [`crate::tools`] with their annotations, runs each call on a blocking thread
//! and wraps the [`nib_files::context::ToolOutput`] in a CallToolResult. Argument and
//! routing errors become protocol errors (invalid params); everything a tool
//! reports is a result with `isError`.
//!
//! Roots: in the handshake era (`initialize`) the server asks `roots/list` after
//! `notifications/initialized`, only when the client declared the roots
//! capability, bounded by [`Config::roots_timeout`], and again when the client
//! says its roots changed. In the modern era (`server/discover`, per-request
//! metadata) a server cannot call the client; the first `tools/call` from a
//! client that declares roots answers `input_required` with a `roots/list`
//! request, and the retry carries the roots.
//!
//! rmcp marks roots deprecated (SEP-2577), but the clients nib serves (Claude
//! Code, OpenCode) still send them and the design relies on them, so this module
//! allows the deprecation (its rooms inherit the allowance).
//!
//! The rooms, each importing only those beneath it: `handler` (rmcp's
//! entry points: the server's info, the tool list, a call with its
//! approvals and roots in either era), `asking` (what is asked of the
//! person: approvals and unlisted hosts, by elicitation or `input_required`
//! with a sealed state), `calls` (a tool or provider call run on a blocking
//! thread, its answer made a result), `roots` (the client's roots, asked
//! for and set), `session` (a connection's server built, its peer, agents,
//! providers and saving), and `state` (the server's fields) beneath them.
#![allow(deprecated)]

mod asking;
mod calls;
mod handler;
mod roots;
mod session;
mod state;

pub use state::{HttpAgent, NibServer};
