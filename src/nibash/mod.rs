//! nibash, the shell tool, on the broker's side ([`broker`]): starting a
//! confined worker per call, serving its asks, the jobs between calls, the
//! answer. What runs inside the sandbox — the bash interpreter, nib's own
//! commands, the builtins that ask the broker — is the `nib-shell` crate,
//! and the two meet only in its `channel`; the compiler holds that the
//! worker imports nothing of the broker.

pub mod broker;
