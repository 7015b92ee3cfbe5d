//! The `read` tool: files as anchored rows, folders as listings.
//!
//! For each path: split off its selector ([`selector`]), stat it through
//! [`crate::fs`], then print lines, an outline, the first rows, a skip notice, a
//! listing, or a refusal. Blocks are fitted into the 40 KiB cap
//! ([`nib_text::blocks::fit`]) and the anchored rows that survive are recorded as
//! seen.
//!
//! The rooms, each importing only those beneath it: `paths` (the call:
//! each path argument resolved and read by what it is), `rows` (a text
//! file's rows: lines, outlines, the first rows of a large file, a
//! version's or a declaration's), `kinds` (what is not a text file's rows:
//! a folder's listing, an image, a database, a binary refused, a missing
//! path), and `request` (the typed request, its options and limits)
//! beneath them; then the helpers each reads with: [`selector`],
//! [`versions`], [`git`], [`image`] and [`sqlite`].

pub mod git;
pub mod image;
pub mod selector;
pub mod sqlite;
pub mod versions;

mod kinds;
mod paths;
mod request;
mod rows;

pub use crate::context::TEXT_LIMIT;
pub use kinds::file_facts;
pub use paths::{read_paths, run};
pub use request::{
    DEFAULT_MAX_LINE, FLAT_HEAD, LISTING_LIMIT, MAX_MAX_LINE, ReadOptions, ReadRequest,
};
