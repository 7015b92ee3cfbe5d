//! nib's file tools and what they stand on: read, grep, find, edit and
//! write ([`tools`]), over the one module that touches files ([`fs`]:
//! kernel-resolved beneath the roots, atomic writes, the trash), the
//! workspace and its named folders ([`workspace`], [`names`]), the confined
//! walk ([`search`]), what each agent saw ([`seen`]), nib's own changes for
//! `nib undo` ([`undo`]), git's output as rows ([`git`]), the call context
//! ([`context`]). The settings it is handed come from `nib-settings`.
//!
//! It knows no shell and no MCP: the broker (`nib`) offers these tools to
//! clients, and nibash's worker (`nib-shell`) runs them for its own
//! commands inside the sandbox. It stands on `nib-text` and `nib-sandbox`.

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![deny(missing_docs)]

pub mod context;
pub mod fs;
pub mod git;
pub mod names;
pub mod search;
pub mod seen;
pub mod tools;
pub mod undo;
pub mod workspace;
