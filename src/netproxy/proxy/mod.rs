//! The filtering proxy programs reach the network through: HTTP `CONNECT`
//! for TLS and anything else over TCP (a tunnel: the proxy sees the host
//! and port, never the bytes), and plain HTTP requests in absolute form,
//! forwarded one per connection. The proxy resolves names itself, so a
//! name cannot lead a program to an address the rules keep out
//! ([`HostRules::check_address`]); every refusal is answered `403` at once
//! and recorded once per host in the [`NetLog`] for the call's answer.
//!
//! This file owns the proxy itself: its rules and resolver, the session's
//! and each call's connection limits, the user's answers, and serving a
//! client from its request to its upstream. The request head is read and
//! answered in `request`; a tunnel's two sides are joined, or terminated
//! for brokered secrets, in `tunnel`; what was reached and refused is kept
//! in `netlog`.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::hosts::{HostRules, Refusal};
use netlog::CALLS_KEPT;
use request::{Ask, answer, call_token, parse, read_head};
use tunnel::{Rewound, UPSTREAM_TIMEOUT, join_halves, terminate};

mod netlog;
mod request;
mod tunnel;

pub use netlog::NetLog;

/// A client must send its request head within this time (slow clients
/// cannot hold connections open).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections the proxy holds at once for the session (each
/// takes two descriptors of the broker's, the client's and the upstream's).
const SESSION_CONNECTIONS: usize = 1024;
/// The most one call (one worker's token, or all connections without a
/// token together) holds at once.
const CALL_CONNECTIONS: usize = 256;

/// After a failed `accept` (out of descriptors, say), the proxy waits this
/// long and accepts again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The connections the session may hold at once: two descriptors each, at
/// most a quarter of the broker's open-file limit in all (and never more
/// than [`SESSION_CONNECTIONS`]) — the kept Landlock grants take another
/// quarter at most, and the rest stays for the tools and the workers.
fn session_budget() -> usize {
    // Two descriptors each: at most half of them, as a quarter in connections.
    (nib_sandbox::open_files_quarter() / 2).clamp(8, SESSION_CONNECTIONS)
}

/// One connection counted against a limit while it lives.
struct Held(Arc<AtomicUsize>);

impl Held {
    /// A place under `limit` in `count`, or `None` when it is full.
    fn take(count: &Arc<AtomicUsize>, limit: usize) -> Option<Held> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Held(Arc::clone(count)))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How the proxy turns a name into addresses (the system's resolver; tests
/// give names of their own).
pub trait Resolve: Send + Sync {
    /// The addresses of `host`, port included.
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

/// The system's resolver (getaddrinfo).
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        use std::net::ToSocketAddrs;
        Ok((host.trim_start_matches('[').trim_end_matches(']'), port)
            .to_socket_addrs()?
            .collect())
    }
}

/// The proxy: its rules, resolver and log.
pub struct Proxy {
    rules: HostRules,
    resolver: Arc<dyn Resolve>,
    log: Arc<NetLog>,
    head_timeout: Duration,
    /// Unlisted hosts are put to the user (NIB_CONFIRM_NETWORK).
    confirm: bool,
    /// Hosts the user allowed for this session.
    allowed: Mutex<BTreeSet<String>>,
    /// Connections held now, in all.
    open: Arc<AtomicUsize>,
    /// Connections held now, by call token ("" for those without one).
    per_call: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    /// The session's and a call's limits (tests lower them).
    limits: (Option<usize>, usize),
    /// Brokered secrets: their hosts' tunnels are terminated.
    brokered: Option<Arc<super::brokering::Brokered>>,
}

impl Proxy {
    /// A proxy with these rules.
    pub fn new(rules: HostRules, resolver: Arc<dyn Resolve>) -> Proxy {
        Proxy {
            rules,
            resolver,
            log: Arc::default(),
            head_timeout: HEAD_TIMEOUT,
            confirm: false,
            allowed: Mutex::default(),
            open: Arc::default(),
            per_call: Mutex::default(),
            limits: (None, CALL_CONNECTIONS),
            brokered: None,
        }
    }

    /// The same proxy, terminating the tunnels to hosts with a brokered
    /// secret in force and refusing plain requests that carry a placeholder.
    pub fn brokering(mut self, brokered: Arc<super::brokering::Brokered>) -> Proxy {
        self.brokered = Some(brokered);
        self
    }

    /// The authority and secrets for `host` when its tunnel is terminated.
    fn terminated(
        &self,
        host: &str,
    ) -> Option<(&super::tls::Authority, Vec<&super::secrets::Secret>)> {
        let b = self.brokered.as_deref()?;
        let secrets = b
            .secrets
            .for_host(host.trim_start_matches('[').trim_end_matches(']'));
        (!secrets.is_empty()).then_some((b.authority.as_ref()?, secrets))
    }

    /// The same proxy holding at most `session` connections at once, and
    /// `call` for one call.
    pub fn with_limits(mut self, session: usize, call: usize) -> Proxy {
        self.limits = (Some(session), call);
        self
    }

    /// A place for a new connection in the session, or `None` when the
    /// session holds all it may.
    fn admit(&self) -> Option<Held> {
        Held::take(&self.open, self.limits.0.unwrap_or_else(session_budget))
    }

    /// A place for one more connection of the call `token` names.
    fn admit_call(&self, token: &str) -> Option<Held> {
        let count = {
            let mut calls = self.per_call.lock().ok()?;
            // Calls that hold nothing any more are forgotten.
            if calls.len() > CALLS_KEPT {
                calls.retain(|_, c| c.load(Ordering::Acquire) > 0);
            }
            Arc::clone(calls.entry(token.to_string()).or_default())
        };
        Held::take(&count, self.limits.1)
    }

    /// The same proxy, putting hosts not on the list to the user through
    /// the asker [`super::set_asker`] installs (refused when there is none).
    pub fn confirming(mut self, confirm: bool) -> Proxy {
        self.confirm = confirm;
        self
    }

    /// Allows `host` for the rest of the session (the user approved it).
    pub fn allow(&self, host: &str) {
        if let Ok(mut a) = self.allowed.lock() {
            a.insert(host.to_ascii_lowercase());
        }
    }

    /// Whether the user allows `host` (asked once per host and session);
    /// `None` when the user cannot be asked.
    async fn user_allows(&self, host: &str, port: u16) -> Option<bool> {
        let host = host.to_ascii_lowercase();
        if self.allowed.lock().is_ok_and(|a| a.contains(&host)) {
            return Some(true);
        }
        let ask = super::asker::asker()?;
        let what = format!("{host}:{port}");
        let yes = tokio::task::spawn_blocking(move || ask(&what))
            .await
            .unwrap_or(false);
        if yes && let Ok(mut a) = self.allowed.lock() {
            a.insert(host);
        }
        Some(yes)
    }

    /// The same proxy with another limit on how long a client may take to
    /// send its request head.
    pub fn with_head_timeout(mut self, t: Duration) -> Proxy {
        self.head_timeout = t;
        self
    }

    /// What the proxy reached and refused.
    pub fn log(&self) -> Arc<NetLog> {
        Arc::clone(&self.log)
    }

    /// The next client `accept` gives that has a place in the session: a
    /// failed accept (no descriptor left, say) waits a moment and accepts
    /// again, and a client past the session's limit is closed at once.
    async fn next_admitted<S, F>(&self, accept: impl Fn() -> F) -> (S, Held)
    where
        F: std::future::Future<Output = io::Result<S>>,
    {
        loop {
            match accept().await {
                Ok(s) => match self.admit() {
                    Some(held) => return (s, held),
                    None => drop(s),
                },
                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
            }
        }
    }

    /// Serves clients from `listener` for as long as the process runs.
    pub async fn serve_tcp(self: Arc<Self>, listener: tokio::net::TcpListener) {
        loop {
            let (s, held) = self
                .next_admitted(|| async { listener.accept().await.map(|(s, _)| s) })
                .await;
            // Small writes (TLS records) go out at once: with Nagle's
            // algorithm against the peer's delayed ACK, each round trip
            // through the tunnel waited ~40 ms.
            let _ = s.set_nodelay(true);
            let me = Arc::clone(&self);
            tokio::spawn(async move { me.handle(s, held).await });
        }
    }

    /// Serves clients from a Unix socket (bound into a sandbox).
    pub async fn serve_unix(self: Arc<Self>, listener: tokio::net::UnixListener) {
        loop {
            let (s, held) = self
                .next_admitted(|| async { listener.accept().await.map(|(s, _)| s) })
                .await;
            let me = Arc::clone(&self);
            tokio::spawn(async move { me.handle(s, held).await });
        }
    }

    /// The upstream for `host:port`, or why not.
    async fn open(
        &self,
        host: &str,
        port: u16,
        call: Option<&str>,
    ) -> Result<TcpStream, (String, String)> {
        let refuse = |why: Refusal| {
            self.log.block(host, port, &why, call);
            (
                "403 Forbidden".to_string(),
                format!("blocked {host}:{port} — {why}"),
            )
        };
        match self.rules.check_host(host) {
            Ok(()) => {}
            Err(Refusal::NotAllowed) if self.confirm => match self.user_allows(host, port).await {
                Some(true) => {}
                Some(false) => return Err(refuse(Refusal::Declined)),
                None => return Err(refuse(Refusal::NotAllowed)),
            },
            Err(why) => return Err(refuse(why)),
        }
        let resolver = Arc::clone(&self.resolver);
        let name = host.to_string();
        let addrs = tokio::time::timeout(
            UPSTREAM_TIMEOUT,
            tokio::task::spawn_blocking(move || resolver.resolve(&name, port)),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(Result::ok)
        .unwrap_or_default();
        if addrs.is_empty() {
            return Err(("502 Bad Gateway".into(), format!("{host} did not resolve")));
        }
        let mut first_refusal = None;
        for addr in addrs {
            if let Err(why) = self.rules.check_address(host, addr.ip()) {
                first_refusal.get_or_insert(why);
                continue;
            }
            if let Ok(Ok(s)) =
                tokio::time::timeout(UPSTREAM_TIMEOUT, TcpStream::connect(addr)).await
            {
                let _ = s.set_nodelay(true);
                self.log.reach(host, port);
                return Ok(s);
            }
        }
        match first_refusal {
            Some(why) => Err(refuse(why)),
            None => Err((
                "502 Bad Gateway".into(),
                format!("{host}:{port} refused the connection"),
            )),
        }
    }

    /// Serves one client while `_session` holds its place in the session.
    async fn handle<S: AsyncRead + AsyncWrite + Unpin>(&self, mut client: S, _session: Held) {
        let Ok(Ok((head, rest))) =
            tokio::time::timeout(self.head_timeout, read_head(&mut client)).await
        else {
            let _ = client.shutdown().await;
            return;
        };
        let call = call_token(&head);
        let Some(_call) = self.admit_call(call.as_deref().unwrap_or_default()) else {
            return answer(
                &mut client,
                "503 Service Unavailable",
                &format!(
                    "this call holds {} connections through nib's proxy already, the most one call may; nothing was sent",
                    self.limits.1
                ),
            )
            .await;
        };
        let ask = match parse(&head) {
            Ok(a) => a,
            Err(why) => return answer(&mut client, "400 Bad Request", why).await,
        };
        let (host, port) = match &ask {
            Ask::Tunnel { host, port } | Ask::Forward { host, port, .. } => (host.clone(), *port),
        };
        // A placeholder in a plain request goes nowhere: not to a host the
        // secret is not declared for, and not in clear text to one it is.
        if let (Ask::Forward { head, .. }, Some(b)) = (&ask, &self.brokered)
            && (b.secrets.holds_placeholder(head) || b.secrets.holds_placeholder(&rest))
        {
            let why = Refusal::Placeholder;
            self.log.block(&host, port, &why, call.as_deref());
            return answer(
                &mut client,
                "403 Forbidden",
                &format!("blocked {host}:{port} — {why}; nothing was sent"),
            )
            .await;
        }
        let mut upstream = match self.open(&host, port, call.as_deref()).await {
            Ok(s) => s,
            Err((status, why)) => return answer(&mut client, &status, &why).await,
        };
        match ask {
            Ask::Tunnel { .. } => {
                if client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                if let Some((authority, secrets)) = self.terminated(&host) {
                    let refused = |why: &Refusal| self.log.block(&host, port, why, call.as_deref());
                    return terminate(
                        authority,
                        &secrets,
                        &host,
                        port,
                        Rewound::new(rest, client),
                        upstream,
                        refused,
                    )
                    .await;
                }
            }
            Ask::Forward { head, .. } => {
                if upstream.write_all(&head).await.is_err() {
                    return;
                }
            }
        }
        if !rest.is_empty() && upstream.write_all(&rest).await.is_err() {
            return;
        }
        join_halves(client, upstream).await;
    }
}

#[cfg(test)]
mod tests;
