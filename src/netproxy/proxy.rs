//! The filtering proxy programs reach the network through: HTTP `CONNECT`
//! for TLS and anything else over TCP (a tunnel: the proxy sees the host
//! and port, never the bytes), and plain HTTP requests in absolute form,
//! forwarded one per connection. The proxy resolves names itself, so a
//! name cannot lead a program to an address the rules keep out
//! ([`HostRules::check_address`]); every refusal is answered `403` at once
//! and recorded once per host in the [`NetLog`] for the call's answer.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::hosts::{HostRules, Refusal};

/// A client must send its request head within this time (slow clients
/// cannot hold connections open).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest request head accepted.
const HEAD_LIMIT: usize = 16 * 1024;
/// Resolving and connecting each get this long.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections the proxy holds at once for the session (each
/// takes two descriptors of the broker's, the client's and the upstream's).
const SESSION_CONNECTIONS: usize = 1024;
/// The most one call (one worker's token, or all connections without a
/// token together) holds at once.
const CALL_CONNECTIONS: usize = 256;
/// How long a tunnel lives on once one of its sides has ended.
const HALF_CLOSED_GRACE: Duration = Duration::from_secs(10);
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

/// The most calls whose refusals are kept until the call takes them (a
/// background call's are never taken).
const CALLS_KEPT: usize = 256;
/// The most refusals kept for one call, and for the session: what a program
/// asks for is the program's to choose, so the log is bounded in entries…
const REFUSALS_KEPT: usize = 32;
const SESSION_REFUSALS_KEPT: usize = 256;
/// …and in the length of each name it keeps (a DNS name has at most 253).
const NAME_KEPT: usize = 255;

/// `host:port` as kept in the log: at most [`NAME_KEPT`] bytes of the host,
/// cut on a character boundary and marked.
fn kept_name(host: &str, port: u16) -> String {
    if host.len() <= NAME_KEPT {
        return format!("{host}:{port}");
    }
    let mut end = NAME_KEPT;
    while !host.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…:{port}", &host[..end])
}

/// Hosts reached and refused, in order, each once — for the session and,
/// by the token of the worker that asked, for each call.
#[derive(Debug, Default)]
pub struct NetLog {
    reached: Mutex<BTreeSet<String>>,
    blocked: Mutex<Vec<(String, String)>>,
    by_call: Mutex<HashMap<String, Vec<(String, String)>>>,
}

impl NetLog {
    fn reach(&self, host: &str, port: u16) {
        if let Ok(mut r) = self.reached.lock()
            && r.len() < SESSION_REFUSALS_KEPT
        {
            r.insert(kept_name(host, port));
        }
    }

    fn block(&self, host: &str, port: u16, why: &Refusal, call: Option<&str>) {
        let key = kept_name(host, port);
        let entry = (key.clone(), why.to_string());
        if let Ok(mut b) = self.blocked.lock()
            && b.len() < SESSION_REFUSALS_KEPT
            && !b.iter().any(|(k, _)| *k == key)
        {
            b.push(entry.clone());
        }
        if let Some(call) = call
            && call.len() <= NAME_KEPT
            && let Ok(mut calls) = self.by_call.lock()
            && (calls.len() < CALLS_KEPT || calls.contains_key(call))
        {
            let list = calls.entry(call.to_string()).or_default();
            if list.len() < REFUSALS_KEPT && !list.iter().any(|(k, _)| *k == key) {
                list.push(entry);
            }
        }
    }

    /// `(host:port, why)` refused for the call whose worker has `token`,
    /// each once, in order; taken (asked again, they are gone).
    pub fn take_call(&self, token: &str) -> Vec<(String, String)> {
        self.by_call
            .lock()
            .ok()
            .and_then(|mut c| c.remove(token))
            .unwrap_or_default()
    }

    /// `host:port` reached so far.
    pub fn reached(&self) -> Vec<String> {
        self.reached
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// `(host:port, why)` refused so far, in order.
    pub fn blocked(&self) -> Vec<(String, String)> {
        self.blocked.lock().map(|b| b.clone()).unwrap_or_default()
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

/// What a client asked for.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    /// `CONNECT host:port`.
    Tunnel { host: String, port: u16 },
    /// A plain HTTP request; `head` is rewritten to origin form.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

/// Splits `host:port` (`[v6]:port` too).
fn authority(a: &str, default_port: Option<u16>) -> Option<(String, u16)> {
    if let Some(rest) = a.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default_port?,
        };
        return Some((format!("[{h}]"), port));
    }
    match a.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h.to_string(), p.parse().ok()?)),
        None => Some((a.to_string(), default_port?)),
        _ => None,
    }
}

/// Reads the request head: the request and any bytes after it.
fn parse(head: &[u8]) -> Result<Ask, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not text")?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v)) if v.starts_with("HTTP/1.") => (m, t, v),
        _ => return Err("not an HTTP/1 request"),
    };
    if method == "CONNECT" {
        let (host, port) = authority(target, None).ok_or("CONNECT needs host:port")?;
        return Ok(Ask::Tunnel { host, port });
    }
    let rest = target
        .strip_prefix("http://")
        .ok_or("a proxy request names its URL in full (http://host/path)")?;
    let (auth, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let auth = auth.rsplit_once('@').map_or(auth, |(_, a)| a);
    let (host, port) = authority(auth, Some(80)).ok_or("a bad host in the URL")?;
    let lines: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
    framed_once(&lines)?;
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(Ask::Forward {
        host,
        port,
        head: out.into_bytes(),
    })
}

/// Refuses a plain request framed two ways (RFC 9112 §6.3): with both
/// `Content-Length` and `Transfer-Encoding`, or with differing lengths —
/// the server and the proxy could end its body at different places.
fn framed_once(lines: &[&str]) -> Result<(), &'static str> {
    let values = |name: &str| -> Vec<&str> {
        lines
            .iter()
            .filter_map(|l| l.split_once(':'))
            .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .collect()
    };
    let lengths = values("content-length");
    if !lengths.is_empty() && !values("transfer-encoding").is_empty() {
        return Err(
            "a request with both Content-Length and Transfer-Encoding is refused (RFC 9112 §6.3); nothing was sent",
        );
    }
    if lengths.windows(2).any(|w| w[0] != w[1]) {
        return Err("a request with two differing Content-Lengths is refused; nothing was sent");
    }
    Ok(())
}

/// Copies both ways until both end; once one side has ended, the other
/// gets [`HALF_CLOSED_GRACE`] to finish, so a tunnel whose client is gone
/// does not hold its place (and two descriptors) while the far end stays
/// silent.
async fn join_halves<S: AsyncRead + AsyncWrite + Unpin>(client: S, mut upstream: TcpStream) {
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut up_read, mut up_write) = upstream.split();
    let to_upstream = async {
        let _ = tokio::io::copy(&mut client_read, &mut up_write).await;
        let _ = up_write.shutdown().await;
    };
    let to_client = async {
        let _ = tokio::io::copy(&mut up_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::pin!(to_upstream, to_client);
    tokio::select! {
        () = &mut to_upstream => {
            let _ = tokio::time::timeout(HALF_CLOSED_GRACE, to_client).await;
        }
        () = &mut to_client => {
            let _ = tokio::time::timeout(HALF_CLOSED_GRACE, to_upstream).await;
        }
    }
}

/// The worker token a request names (`Proxy-Authorization: Basic` of
/// `nib:TOKEN`, from the proxy variables' address), if it names one.
fn call_token(head: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(head).ok()?;
    let value = text.split("\r\n").skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("proxy-authorization")
            .then(|| value.trim())
    })?;
    let pair = super::secrets::basic_pair(value)?;
    let (user, token) = pair.split_once(':')?;
    (user == nib_sandbox::PROXY_USER && !token.is_empty()).then(|| token.to_string())
}

/// Reads until the end of the head; returns it and what followed it.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the request ended",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            buf.truncate(end);
            return Ok((buf, rest));
        }
        if buf.len() > HEAD_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
    }
}

async fn answer<S: AsyncWrite + Unpin>(s: &mut S, status: &str, why: &str) {
    let body = format!("nib: {why}\n");
    let _ = s
        .write_all(
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await;
    let _ = s.shutdown().await;
}

/// The program's side of a tunnel: what was read past the `CONNECT` head,
/// then the stream.
struct Rewound<S> {
    ahead: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Rewound<S> {
    fn new(ahead: Vec<u8>, inner: S) -> Rewound<S> {
        Rewound {
            ahead,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewound<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        if self.at < self.ahead.len() {
            let n = buf.remaining().min(self.ahead.len() - self.at);
            let at = self.at;
            buf.put_slice(&self.ahead[at..at + n]);
            self.at += n;
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewound<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A tunnel to `host` terminated on both sides: the program's TLS under
/// the session authority's certificate for `host`, the proxy's own to the
/// real server (verified against the system's roots), and the relay
/// between them. When the real server does not verify, the program's
/// request is answered `502` with the reason, and `refused` records it.
async fn terminate<S: AsyncRead + AsyncWrite + Unpin>(
    authority: &super::tls::Authority,
    secrets: &[&super::secrets::Secret],
    host: &str,
    port: u16,
    client: S,
    upstream: TcpStream,
    refused: impl Fn(&Refusal),
) {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(name) = tokio_rustls::rustls::pki_types::ServerName::try_from(bare.to_string()) else {
        return;
    };
    let server = tokio::time::timeout(
        UPSTREAM_TIMEOUT,
        authority.connector().connect(name, upstream),
    )
    .await;
    let Ok(acceptor) = authority.acceptor(bare) else {
        return;
    };
    let Ok(Ok(mut client)) = tokio::time::timeout(UPSTREAM_TIMEOUT, acceptor.accept(client)).await
    else {
        return;
    };
    match server {
        Ok(Ok(server)) => super::terminate::relay(client, server, host, port, secrets).await,
        failed => {
            // No verified server: the program's request is read and
            // answered here, saying why; nothing reached the server.
            let why = match failed {
                Ok(Err(e)) => e.to_string(),
                _ => "no answer in time".to_string(),
            };
            let refusal = Refusal::Unverified;
            refused(&refusal);
            let _ = tokio::time::timeout(UPSTREAM_TIMEOUT, read_head(&mut client)).await;
            answer(
                &mut client,
                "502 Bad Gateway",
                &format!("{host}: {refusal} ({why})"),
            )
            .await;
        }
    }
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
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_in_both_forms() {
        assert_eq!(
            parse(b"CONNECT crates.example:443 HTTP/1.1\r\nHost: crates.example:443"),
            Ok(Ask::Tunnel {
                host: "crates.example".into(),
                port: 443
            })
        );
        assert_eq!(
            parse(b"CONNECT [::1]:8443 HTTP/1.1"),
            Ok(Ask::Tunnel {
                host: "[::1]".into(),
                port: 8443
            })
        );
        let Ok(Ask::Forward { host, port, head }) = parse(
            b"GET http://user@pkg.example:8080/a/b?c HTTP/1.1\r\nHost: pkg.example\r\nProxy-Authorization: x\r\nConnection: keep-alive",
        ) else {
            panic!("a forward")
        };
        assert_eq!((host.as_str(), port), ("pkg.example", 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a/b?c HTTP/1.1\r\nHost: pkg.example\r\nConnection: close\r\n\r\n"
        );
        assert!(parse(b"GET /x HTTP/1.1").is_err());
        // Framed two ways: refused (RFC 9112 §6.3).
        for head in [
            "POST http://pkg.example/ HTTP/1.1\r\nHost: pkg.example\r\nContent-Length: 4\r\nTransfer-Encoding: chunked",
            "POST http://pkg.example/ HTTP/1.1\r\nHost: pkg.example\r\ntransfer-encoding: chunked\r\ncontent-length: 4",
            "POST http://pkg.example/ HTTP/1.1\r\nHost: pkg.example\r\nContent-Length: 4\r\nContent-Length: 5",
        ] {
            assert!(
                parse(head.as_bytes()).is_err_and(|e| e.contains("refused")),
                "{head}"
            );
        }
        assert!(
            parse(b"POST http://pkg.example/ HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 4")
                .is_ok()
        );
        assert!(parse(b"CONNECT nohost HTTP/1.1").is_err());
        assert!(parse(b"garbage").is_err());
    }

    /// Test names: each maps to one address.
    struct Names(Vec<(&'static str, SocketAddr)>);

    impl Resolve for Names {
        fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
            let found: Vec<SocketAddr> = self
                .0
                .iter()
                .filter(|(n, _)| *n == host)
                .map(|(_, a)| SocketAddr::new(a.ip(), port))
                .collect();
            if found.is_empty() {
                Err(io::Error::new(io::ErrorKind::NotFound, "no such test name"))
            } else {
                Ok(found)
            }
        }
    }

    /// An echo server that counts its connections (the canary).
    async fn echo() -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = Arc::clone(&count);
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        (addr, count)
    }

    async fn proxy(allow: &str, names: Names) -> (SocketAddr, Arc<NetLog>) {
        proxy_limited(allow, names, SESSION_CONNECTIONS, CALL_CONNECTIONS).await
    }

    async fn proxy_limited(
        allow: &str,
        names: Names,
        session: usize,
        call: usize,
    ) -> (SocketAddr, Arc<NetLog>) {
        let (rules, unread) = HostRules::new(Some(allow), &["denied.test".to_string()]);
        assert!(unread.is_empty());
        let p = Arc::new(
            Proxy::new(rules, Arc::new(names))
                .with_head_timeout(Duration::from_millis(300))
                .with_limits(session, call),
        );
        let log = p.log();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(p.serve_tcp(l));
        (addr, log)
    }

    /// Sends `head` and returns the proxy's answer line and the stream.
    async fn ask(proxy: SocketAddr, head: &str) -> (String, TcpStream) {
        let mut s = TcpStream::connect(proxy).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while !line.ends_with(b"\r\n\r\n") {
            if s.read(&mut b).await.unwrap() == 0 {
                break;
            }
            line.push(b[0]);
        }
        // A refusal's reason is its body; the proxy closes after it.
        if !line.starts_with(b"HTTP/1.1 200") {
            let _ = s.read_to_end(&mut line).await;
        }
        (String::from_utf8_lossy(&line).into_owned(), s)
    }

    #[tokio::test]
    async fn allowed_hosts_tunnel_and_the_rest_never_reach_the_server() {
        let (up, count) = echo().await;
        let names = Names(vec![
            ("allowed.test", up),
            ("sub.wild.test", up),
            ("denied.test", up),
            ("meta.test", "169.254.169.254:80".parse().unwrap()),
        ]);
        let (p, log) = proxy("allowed.test, *.wild.test, meta.test, denied.test", names).await;
        let port = up.port();

        let (ok, mut s) = ask(p, &format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n")).await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        s.write_all(b"ping").await.unwrap();
        let mut back = [0u8; 4];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"ping");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);

        // A wildcard does not open loopback; deny wins; metadata never;
        // unlisted names and addresses are refused before any lookup.
        for (target, why) in [
            (
                format!("sub.wild.test:{port}"),
                "loopback or private address not listed",
            ),
            (format!("denied.test:{port}"), "on the deny list"),
            ("meta.test:80".to_string(), "link-local or metadata"),
            (format!("other.test:{port}"), "not in NIB_SANDBOX_NETWORK"),
            (format!("127.0.0.1:{port}"), "an address not listed"),
        ] {
            let (refused, _) = ask(p, &format!("CONNECT {target} HTTP/1.1\r\n\r\n")).await;
            assert!(refused.starts_with("HTTP/1.1 403"), "{target}: {refused}");
            assert!(refused.contains(why), "{target}: {refused}");
        }
        let (again, _) = ask(p, &format!("CONNECT other.test:{port} HTTP/1.1\r\n\r\n")).await;
        assert!(again.starts_with("HTTP/1.1 403"));
        assert_eq!(
            count.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "the canary saw no other connection"
        );
        let blocked = log.blocked();
        assert_eq!(blocked.len(), 5, "each host once: {blocked:?}");
        assert_eq!(log.reached(), vec![format!("allowed.test:{port}")]);
    }

    #[tokio::test]
    async fn plain_http_is_forwarded_in_origin_form() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = l.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let (head, _) = read_head(&mut s).await.unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
                .await
                .unwrap();
            String::from_utf8(head).unwrap()
        });
        let (p, _) = proxy("web.test", Names(vec![("web.test", up)])).await;
        let (status, mut s) = ask(
            p,
            &format!("GET http://web.test:{}/path?q=1 HTTP/1.1\r\nHost: web.test\r\nProxy-Connection: keep-alive\r\n\r\n", up.port()),
        )
        .await;
        assert!(status.starts_with("HTTP/1.1 200 OK"), "{status}");
        let mut body = String::new();
        s.read_to_string(&mut body).await.unwrap();
        assert_eq!(body, "hi");
        assert_eq!(
            server.await.unwrap(),
            "GET /path?q=1 HTTP/1.1\r\nHost: web.test\r\nConnection: close"
        );
    }

    #[tokio::test]
    async fn slow_clients_are_dropped_and_a_hundred_tunnels_run_at_once() {
        let (up, count) = echo().await;
        let (p, _) = proxy("allowed.test", Names(vec![("allowed.test", up)])).await;
        // Connects and never sends a head: closed after the head timeout.
        let mut slow = TcpStream::connect(p).await.unwrap();
        let mut b = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), slow.read(&mut b)).await;
        assert!(
            matches!(n, Ok(Ok(0))),
            "the proxy closed the slow client: {n:?}"
        );

        let mut tasks = Vec::new();
        for i in 0..100u32 {
            tasks.push(tokio::spawn(async move {
                let (ok, mut s) = ask(
                    p,
                    &format!("CONNECT allowed.test:{} HTTP/1.1\r\n\r\n", up.port()),
                )
                .await;
                assert!(ok.starts_with("HTTP/1.1 200"));
                let msg = format!("tunnel {i:03}");
                s.write_all(msg.as_bytes()).await.unwrap();
                let mut back = vec![0u8; msg.len()];
                s.read_exact(&mut back).await.unwrap();
                assert_eq!(back, msg.as_bytes());
                // Half of the clients leave mid-stream.
                if i % 2 == 0 {
                    drop(s);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 100);
    }

    /// `Proxy-Authorization` naming worker `token`, as curl sends it.
    fn as_call(token: &str) -> String {
        use base64::Engine;
        format!(
            "Proxy-Authorization: Basic {}\r\n",
            base64::engine::general_purpose::STANDARD.encode(format!("nib:{token}"))
        )
    }

    #[test]
    fn a_requests_worker_is_read_from_its_proxy_credentials() {
        let head = format!("CONNECT a.test:443 HTTP/1.1\r\n{}", as_call("abc123"));
        assert_eq!(
            call_token(head.trim_end().as_bytes()),
            Some("abc123".into())
        );
        assert_eq!(call_token(b"CONNECT a.test:443 HTTP/1.1"), None);
        let other = "CONNECT a.test:443 HTTP/1.1\r\nProxy-Authorization: Basic dXNlcjpwdw==";
        assert_eq!(
            call_token(other.as_bytes()),
            None,
            "another user is no worker"
        );
    }

    #[tokio::test]
    async fn each_call_gets_its_own_refusals() {
        let (up, _) = echo().await;
        let (p, log) = proxy("allowed.test", Names(vec![("allowed.test", up)])).await;
        let port = up.port();
        for (call, host) in [("one", "a.test"), ("two", "b.test"), ("one", "c.test")] {
            let head = format!("CONNECT {host}:{port} HTTP/1.1\r\n{}\r\n", as_call(call));
            let (refused, _) = ask(p, &head).await;
            assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        }
        let (no_token, _) = ask(p, &format!("CONNECT d.test:{port} HTTP/1.1\r\n\r\n")).await;
        assert!(no_token.starts_with("HTTP/1.1 403"), "{no_token}");
        let hosts = |v: Vec<(String, String)>| v.into_iter().map(|(h, _)| h).collect::<Vec<_>>();
        assert_eq!(
            hosts(log.take_call("one")),
            [format!("a.test:{port}"), format!("c.test:{port}")]
        );
        assert_eq!(hosts(log.take_call("two")), [format!("b.test:{port}")]);
        assert!(log.take_call("one").is_empty(), "taken once");
        assert_eq!(log.blocked().len(), 4, "the session's list keeps them all");
    }

    #[tokio::test]
    async fn connections_are_bounded_per_call_and_per_session_and_freed_when_they_end() {
        let (up, count) = echo().await;
        let (p, _) = proxy_limited("allowed.test", Names(vec![("allowed.test", up)]), 3, 2).await;
        let port = up.port();
        let connect = |call: &str| {
            format!(
                "CONNECT allowed.test:{port} HTTP/1.1\r\n{}\r\n",
                as_call(call)
            )
        };
        let (a1, s1) = ask(p, &connect("a")).await;
        let (a2, s2) = ask(p, &connect("a")).await;
        assert!(a1.starts_with("HTTP/1.1 200") && a2.starts_with("HTTP/1.1 200"));
        let (a3, _) = ask(p, &connect("a")).await;
        assert!(a3.starts_with("HTTP/1.1 503"), "{a3}");
        assert!(a3.contains("the most one call may"), "{a3}");
        // Another call still gets its place, until the session is full.
        let (b1, _b1) = ask(p, &connect("b")).await;
        assert!(b1.starts_with("HTTP/1.1 200"), "{b1}");
        // Past the session's limit a connection is closed unanswered.
        let mut full = TcpStream::connect(p).await.unwrap();
        let _ = full.write_all(connect("c").as_bytes()).await;
        let mut got = Vec::new();
        let _ = full.read_to_end(&mut got).await;
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 3);
        // Closed tunnels give their places back.
        drop((s1, s2));
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (again, _s) = ask(p, &connect("a")).await;
        assert!(again.starts_with("HTTP/1.1 200"), "{again}");
    }
}
