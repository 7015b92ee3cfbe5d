//! Every call nib makes to a language model: one HTTPS client
//! ([`client`]), a disk cache ([`cache`]), and the judge of nib.json `rule`
//! entries ([`judge`]); the settings they read are `nib-files`' (its
//! `nib_settings::llm`, re-exported here).
//!
//! What the models are asked is decided by their users: long output's
//! `openrouter` decider and the summarizers (`nibash::decide`,
//! `nibash::summary`), command rules (`nibash::command_rules`).

pub mod cache;
pub mod client;
pub mod judge;

pub use nib_settings::llm::{
    CHAT_URL, DEFAULT_MODEL, DeciderKind, Settings, Summarizer, is_loopback,
};
