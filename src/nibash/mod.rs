//! nibash: the shell tool, in two rooms that meet only in the channel.
//!
//! - [`broker`]: the broker process's side — starting a confined worker per
//!   call, serving its asks, the jobs between calls, the answer.
//! - [`worker`]: what runs inside the sandbox — the bash interpreter
//!   (brush), nib's own commands, the builtins that ask the broker.
//! - [`channel`]: the messages between the two and their framing; the only
//!   module both import (`tests/layers.rs` checks it).

pub mod broker;
pub mod channel;
pub mod worker;
