//! The worker's link to the broker and the state its parts share: the
//! channel (events sent, questions asked and answered), the request this
//! worker runs, brush's own builtins that nib's wrap, and the fatal
//! signal the shell sent itself. The entry (`mod.rs`) connects it; every
//! other part of the worker reaches it here, never through the entry.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use brush_builtins::BuiltinSet;
use brush_core::builtins::CommandExecuteFunc;
use brush_core::extensions::DefaultShellExtensions;

use crate::channel::{Ask, Channel, Event, Reply, Request};

/// The shell extensions nibash uses (brush's defaults).
pub type Se = DefaultShellExtensions;

/// The builtin functions nib wraps, as brush registered them.
pub(crate) fn original(name: &str) -> Option<CommandExecuteFunc<Se>> {
    static ORIGINALS: OnceLock<HashMap<String, CommandExecuteFunc<Se>>> = OnceLock::new();
    ORIGINALS
        .get_or_init(|| {
            brush_builtins::default_builtins::<Se>(BuiltinSet::BashMode)
                .into_iter()
                .map(|(k, v)| (k, v.execute_func))
                .collect()
        })
        .get(name)
        .copied()
}

static CHANNEL: OnceLock<Mutex<Channel>> = OnceLock::new();
static REQUEST: OnceLock<Request> = OnceLock::new();

/// The request this worker runs.
pub(crate) fn request() -> Option<&'static Request> {
    REQUEST.get()
}

/// Sends an event to the broker (ignored when there is no broker, as in tests).
pub(crate) fn send(event: &Event) {
    if let Some(c) = CHANNEL.get() {
        let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
        let _ = c.send(event);
    }
}

/// Asks the broker and waits for its answer.
pub(crate) fn ask(question: Ask) -> Reply {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Some(c) = CHANNEL.get() else {
        return Reply {
            id,
            err: "nibash: no broker to ask (this command works only inside a nibash call)\n".into(),
            code: 1,
            ..Reply::default()
        };
    };
    let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
    if c.send(&Event::Ask { id, ask: question }).is_err() {
        return Reply {
            id,
            err: "nibash: the broker is gone\n".into(),
            code: 1,
            ..Reply::default()
        };
    }
    match c.recv::<Reply>() {
        Ok(Some(r)) => r,
        _ => Reply {
            id,
            err: "nibash: the broker did not answer\n".into(),
            code: 1,
            ..Reply::default()
        },
    }
}

/// Connects the worker to its broker: the channel, and the request it runs.
pub(super) fn connect(channel: Channel, req: Request) {
    let _ = CHANNEL.set(Mutex::new(channel));
    let _ = REQUEST.set(req);
}

/// Whether the command's stdout goes straight to the model (not piped,
/// redirected or captured).
pub(crate) fn to_model(ctx: &brush_core::ExecutionContext<'_, Se>) -> bool {
    matches!(
        ctx.params.try_stdout(ctx.shell),
        Some(brush_core::openfiles::OpenFile::Stdout(_))
    )
}

/// A fatal signal the shell sent itself (`kill $$`), for the closing status.
static SELF_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Records that the shell ended itself with `signal` (see `builtins`' kill).
pub(crate) fn note_fatal_signal(signal: i32) {
    SELF_SIGNAL.store(signal, std::sync::atomic::Ordering::SeqCst);
}

pub(super) fn take_fatal_signal() -> Option<i32> {
    match SELF_SIGNAL.swap(0, std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The signals that end bash after running its EXIT trap.
pub(super) const FATAL: [i32; 5] = [
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];
