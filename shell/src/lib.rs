//! nibash's worker: the code that runs inside the sandbox. The bash
//! interpreter (brush) with nib's own commands and builtins ([`worker`]),
//! and the messages between it and its broker ([`channel`]), which the
//! broker's side (`nib::nibash`) imports from here.
//!
//! It stands on the file tools (`nib-files`), the text primitives
//! (`nib-text`), the command rules' syntax walks (`nib-command-rules`) and the
//! sandbox's entry points (`nib-sandbox`); it depends on no part of the
//! broker, which the compiler holds.

#![deny(clippy::print_stdout, clippy::print_stderr)]
#![deny(missing_docs)]

pub mod channel;
pub mod worker;
