//! The server's resident memory between calls. Tool calls run on tokio's
//! blocking threads, and glibc gives each new thread its own malloc arena,
//! so memory one call freed on one thread was not reused by the next call on
//! another: the server's peak grew with every large call (a walk of a
//! 30,000-file tree, the syntax trees of a 5,000-line file). nib keeps two
//! arenas and hands freed pages back after a call that did much work.
//! Other C libraries manage their own memory: there this does nothing.

use std::time::Duration;

/// A call that ran at least this long gets its freed memory trimmed
/// afterwards. Trimming a fragmented heap is not free: it hands back page
/// after page (hundreds of madvise calls), and the next call faults them in
/// again — after every 5 ms call it made a long session's nibash calls a
/// millisecond slower. Calls that free much are the long ones (walks of a
/// tree), and dropping a large syntax tree trims on its own.
pub const TRIM_AFTER: Duration = Duration::from_millis(50);

/// Called once at startup, before any thread is started.
#[allow(unsafe_code)]
pub fn limit_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt takes two integers and only sets a malloc tunable.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Returns freed heap pages to the system after a call that took `took`.
pub fn trim_after(took: Duration) {
    if took >= TRIM_AFTER {
        release_freed();
    }
}

/// Returns freed heap pages to the system now: after dropping something
/// large (a syntax tree of megabytes) and before making its successor.
#[allow(unsafe_code)]
pub fn release_freed() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes an integer and only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}
