//! The proxy served on loopback against an echo server that counts its
//! connections (the canary): what is let through, refused, bounded and
//! logged.

use super::*;
use tokio::io::AsyncReadExt;

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
