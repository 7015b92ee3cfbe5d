//! The network programs may reach: a filtering proxy in the broker with a
//! host allowlist (issue: sandboxed programs reach only the hosts the user
//! allows). [`rules`] decides which hosts and addresses, [`address`]
//! classifies addresses, [`proxy`] serves `CONNECT` tunnels and plain HTTP
//! and records what it reached and refused.
//!
//! Not yet wired into the program sandbox: programs still get the network
//! all or nothing (`NIB_SANDBOX_NETWORK=1`). The bridge into bubblewrap's
//! network namespace, the proxy variables for programs and the Landlock
//! port rule come next; until then nothing here is reachable by a program.

pub mod address;
pub mod proxy;
pub mod rules;
