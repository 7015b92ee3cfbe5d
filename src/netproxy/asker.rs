//! How the proxy puts an unlisted host to the user (NIB_CONFIRM_NETWORK,
//! on by default): the asker the server installs for the session, and
//! whether any client of this process can be asked at all.

use std::sync::Arc;

/// Puts a host a program wants (`HOST:PORT`) to the user; true when the
/// user allows it for the session. Set by the server when the client can
/// be asked mid-call (NIB_CONFIRM_NETWORK is not `0`).
pub type Asker = Arc<dyn Fn(&str) -> bool + Send + Sync>;

static ASKER: std::sync::Mutex<Option<Asker>> = std::sync::Mutex::new(None);

/// Installs (or removes) the way the proxy asks the user.
pub fn set_asker(asker: Option<Asker>) {
    if let Ok(mut a) = ASKER.lock() {
        *a = asker;
    }
}

pub(super) fn asker() -> Option<Asker> {
    ASKER.lock().ok().and_then(|a| a.clone())
}

/// A client of this process can be asked about hosts: in the handshake era
/// the asker above; in the 2026-07-28 era a call that declared elicitation
/// (it is asked after the call). Never unset once set.
static ASKABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records that a client of this process can be asked about hosts, so
/// sandboxed programs go through the proxy even with no host listed.
pub fn note_askable() {
    ASKABLE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether a client of this process can be asked about hosts.
pub fn askable() -> bool {
    ASKABLE.load(std::sync::atomic::Ordering::Relaxed) || asker().is_some()
}
