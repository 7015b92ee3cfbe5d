//! nib's text and format primitives, the leaf of its crates: the hashline
//! tag and the row spellings agents read ([`hashline`]), a file as lines
//! ([`text`]), a tool's answer as blocks of rows under one cap ([`blocks`]),
//! what a file is ([`filekind`]), outlines ([`outline`] by indentation,
//! [`lang`] by tree-sitter), syntax checks ([`validate`]), paths and
//! sizes as people read them ([`path_text`], [`readable`], [`by_folder`]),
//! and the malloc arenas the trees' memory returns to ([`malloc`]).
//!
//! It knows no file system, no agent and no shell: every other nib crate
//! stands on it, and it depends on none of them.

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![deny(missing_docs)]

pub mod blocks;
pub mod by_folder;
pub mod filekind;
pub mod hashline;
pub mod lang;
pub mod malloc;
pub mod outline;
pub mod path_text;
pub mod readable;
pub mod text;
pub mod validate;
