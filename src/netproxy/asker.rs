//! How the proxy puts an unlisted host to the user (NIB_CONFIRM_NETWORK):
//! the asker the server installs for the session.

use std::sync::Arc;

/// Puts a host a program wants (`HOST:PORT`) to the user; true when the
/// user allows it for the session. Set by the server when the client can
/// be asked mid-call (`NIB_CONFIRM_NETWORK=1`).
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
