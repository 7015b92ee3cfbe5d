//! Brokered secrets (`NIB_SANDBOX_SECRETS`): credentials sandboxed programs
//! use on the wire without ever holding them. This module owns the user's
//! declarations, the per-session placeholders programs see instead of the
//! real values, and the pure rewriting the proxy applies: the declared
//! header of a request to a declared host (placeholder → real value), and
//! response bytes (real value → placeholder). The TLS side is [`super::tls`]'s,
//! the request-by-request relay [`super::terminate`]'s.
//!
//! Only the user declares a secret (an environment variable of nib's):
//! nothing of a project's is read here.
//!
//! The rooms, each importing only those beneath it: `fill` (a request
//! head's declared header filled with the real value), `declared` (the
//! declarations read and checked, each [`Secret`] with its placeholder),
//! `echoes` (a value's encoded forms, so an echo comes back as the
//! placeholder), `placeholder` (a placeholder made of a token's shape), and
//! `scrub` (response bytes rewritten, real value to placeholder) on its own.

mod declared;
mod echoes;
mod fill;
mod placeholder;
mod scrub;

pub use declared::{NIB_SANDBOX_SECRETS, Secret, Secrets, Wire, file_of};
pub use echoes::encoded_echoes;
pub use fill::{basic_pair, fill_request_head};
pub use placeholder::placeholder_for;
pub use scrub::Scrubber;

#[cfg(test)]
mod tests;
