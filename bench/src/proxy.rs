//! The network proxy (`--only proxy`): a tunnel against a direct request, curl over HTTPS, a tunnel terminated for a brokered secret, the server's memory with 100 tunnels open.

use super::*;

/// A loopback server for the proxy rows: `ok` answers each request and
/// closes; `hold` keeps every connection open until the client leaves.
pub(crate) fn loopback_server(hold: bool) -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut buf = [0u8; 4096];
                if hold {
                    while c.read(&mut buf).is_ok_and(|n| n > 0) {}
                    return;
                }
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let _ = c.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    Ok(port)
}

/// Reads until the end of an HTTP head (and whatever came with it).
pub(crate) fn read_head(s: &mut std::net::TcpStream) -> Result<String> {
    use std::io::Read;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

/// HTTPS for real: curl fetching a file from `openssl s_server` (a
/// self-signed certificate for 127.0.0.1) through the proxy at `proxy_port`
/// and directly, interleaved; skipped when openssl or curl is missing.
pub(crate) fn https_through_the_proxy(
    nib: &Path,
    scratch: &Path,
    dir: &Path,
    proxy_port: u16,
    n: usize,
) -> Result<()> {
    if !have("openssl") || !have("curl") {
        println!("  proxy: openssl or curl missing; the HTTPS row is skipped");
        return Ok(());
    }
    write(&dir.join("hello.txt"), "hello\n")?;
    // A CA and a certificate for 127.0.0.1 it signed (rustls, which nib's
    // proxy verifies a brokered host with, takes no self-signed leaf).
    write(
        &dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )?;
    let openssl = |args: &[&str]| -> Result<()> {
        let made = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())?;
        if made.success() {
            Ok(())
        } else {
            Err(format!("openssl {args:?} failed"))
        }
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=nib-bench CA",
    ])?;
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=127.0.0.1",
    ])?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        "cert.pem",
        "-extfile",
        "leaf.ext",
    ])?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let mut tls = Command::new("openssl")
        .args(["s_server", "-accept", &format!("127.0.0.1:{port}")])
        .args(["-cert", "cert.pem", "-key", "key.pem", "-WWW", "-quiet"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(10) {
            let _ = tls.kill();
            return Err("openssl s_server did not start".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("https://127.0.0.1:{port}/hello.txt");
    write(&dir.join("s_server.url"), &url)?;
    let proxy = format!("http://127.0.0.1:{proxy_port}");
    // curl through `via` (or straight), trusting `ca`, with `header` when given.
    let curl = |via: Option<&str>, ca: &Path, header: Option<&str>| -> Result<Duration> {
        let mut c = Command::new("curl");
        c.args(["-sf", "-o", "/dev/null", "--cacert"])
            .arg(ca)
            .current_dir(dir);
        match via {
            Some(p) => c.args(["--proxy", p]),
            None => c.args(["--noproxy", "*"]),
        };
        if let Some(h) = header {
            c.args(["-H", h]);
        }
        let started = Instant::now();
        let ok = c.arg(&url).status().map_err(|e| e.to_string())?;
        if !ok.success() {
            return Err(format!("curl {url} failed ({ok})"));
        }
        Ok(started.elapsed())
    };
    let cert = dir.join("ca.pem");
    let mut proxied = || -> Result<(Duration, usize)> { Ok((curl(Some(&proxy), &cert, None)?, 0)) };
    let mut bases: Baselines<'_> = vec![(
        "curl straight to the server".into(),
        Box::new(|| curl(None, &cert, None)),
    )];
    let result = interleave(n.min(30), Some(&mut proxied), &mut bases);
    let terminated = result.and_then(|(s, _, b)| {
        Row {
            scenario: "curl over HTTPS through the proxy (openssl s_server, loopback)".into(),
            nib: s,
            chars: None,
            baselines: b,
        }
        .print();
        terminated_tunnel(nib, scratch, dir, &proxy, n, &curl)
    });
    let _ = tls.kill();
    let _ = tls.wait();
    terminated
}

/// The test server's URL, from the port file `https_through_the_proxy`
/// leaves beside its certificate.
pub(crate) fn url_of(dir: &Path) -> Result<String> {
    std::fs::read_to_string(dir.join("s_server.url")).map_err(|e| e.to_string())
}

/// One HTTPS GET of `url` through the proxy at `proxy` (`http://HOST:PORT`)
/// with `header`, over a rustls client of `config`; the time to the whole
/// answer.
pub(crate) fn tls_get(
    config: &std::sync::Arc<rustls::ClientConfig>,
    proxy: &str,
    url: &str,
    header: &str,
) -> Result<Duration> {
    use std::io::{Read, Write};
    let target = url.trim_start_matches("https://");
    let (authority, path) = target.split_once('/').unwrap_or((target, ""));
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    let started = Instant::now();
    let mut tcp = std::net::TcpStream::connect(proxy.trim_start_matches("http://"))
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    tcp.write_all(format!("CONNECT {authority} HTTP/1.1\r\n\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let head = read_head(&mut tcp)?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("the proxy said {head:?}"));
    }
    let name =
        rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let conn = rustls::ClientConnection::new(std::sync::Arc::clone(config), name)
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(
        format!(
            "GET /{path} HTTP/1.1\r\nHost: {authority}\r\n{header}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    // The server closes without TLS's close_notify: what arrived counts.
    let _ = tls.read_to_end(&mut answer);
    if !answer.starts_with(b"HTTP/1.") {
        return Err(format!("no answer: {:?}", String::from_utf8_lossy(&answer)));
    }
    Ok(started.elapsed())
}

/// The brokered secret's cost on the wire alone: a client whose trust (the
/// bundle at `bundle`) is loaded once, through the terminating proxy and
/// through the opaque one.
pub(crate) fn tls_through(
    terminating: &str,
    opaque: &str,
    bundle: &Path,
    header: &str,
    url: &str,
    n: usize,
) -> Result<()> {
    let pem = std::fs::read(bundle).map_err(|e| e.to_string())?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem).flatten() {
        let cert: rustls::pki_types::CertificateDer<'static> = cert;
        let _ = roots.add(cert);
    }
    let config = std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let mut through =
        || -> Result<(Duration, usize)> { Ok((tls_get(&config, terminating, url, header)?, 0)) };
    let mut bases: Baselines<'_> = vec![(
        "the same through an opaque tunnel".into(),
        Box::new(|| tls_get(&config, opaque, url, header)),
    )];
    let (s, _, b) = interleave(n, Some(&mut through), &mut bases)?;
    Row {
        scenario: "HTTPS request (trust loaded once), tunnel terminated to fill a brokered secret"
            .into(),
        nib: s,
        chars: None,
        baselines: b,
    }
    .print();
    Ok(())
}

/// A curl to the test server: through a proxy or straight, trusting a
/// bundle, with a header.
pub(crate) type Curl<'a> = dyn Fn(Option<&str>, &Path, Option<&str>) -> Result<Duration> + 'a;

/// A brokered secret's cost on the wire (NIB_SANDBOX_SECRETS): curl with
/// the placeholder in `Authorization` through a second nib whose proxy
/// terminates the server's tunnel and fills the real token in, against the
/// same request through `opaque`, the first nib's proxy, which only tunnels.
pub(crate) fn terminated_tunnel(
    nib: &Path,
    scratch: &Path,
    dir: &Path,
    opaque: &str,
    n: usize,
    curl: &Curl<'_>,
) -> Result<()> {
    let cert = dir.join("ca.pem");
    let cert_text = cert.to_string_lossy().into_owned();
    let mut server = Server::spawn_with(
        nib,
        dir,
        &scratch.join("proxy-secrets-state"),
        &[
            ("NIB_SANDBOX", "1"),
            ("NIB_SANDBOX_NETWORK", "127.0.0.1"),
            ("NIB_SANDBOX_SECRETS", "BENCH_TOKEN@127.0.0.1"),
            ("BENCH_TOKEN", "bench_R3alT0ken0123456789"),
            // nib's proxy trusts the test server's certificate.
            ("SSL_CERT_FILE", &cert_text),
        ],
    )?;
    server.initialize()?;
    let said = server.call(
        "nibash",
        json!({"command": "echo $HTTP_PROXY; echo $SSL_CERT_FILE; echo $BENCH_TOKEN"}),
    )?;
    let lines: Vec<&str> = said.lines().map(str::trim).collect();
    let (Some(proxy), Some(bundle), Some(placeholder)) = (
        lines
            .first()
            .and_then(|l| l.rsplit_once('@'))
            .map(|(_, a)| format!("http://{a}")),
        lines.get(1).filter(|b| b.ends_with("bundle.pem")),
        lines.get(2),
    ) else {
        println!("  proxy: no brokered secret here ({said:?}); the terminated row is skipped");
        return Ok(());
    };
    let header = format!("Authorization: Bearer {placeholder}");
    tls_through(&proxy, opaque, Path::new(bundle), &header, &url_of(dir)?, n)?;
    // Both curls trust the same bundle (the system's roots, the test
    // server's CA, the session's authority): parsing it is curl's own cost
    // (tens of milliseconds for a system bundle), not the proxy's.
    let bundle = PathBuf::from(bundle);
    let mut through =
        || -> Result<(Duration, usize)> { Ok((curl(Some(&proxy), &bundle, Some(&header))?, 0)) };
    let mut bases: Baselines<'_> = vec![(
        "the same through an opaque tunnel".into(),
        Box::new(|| curl(Some(opaque), &bundle, Some(&header))),
    )];
    let (s, _, b) = interleave(n.min(30), Some(&mut through), &mut bases)?;
    Row {
        scenario: "curl over HTTPS, tunnel terminated to fill a brokered secret".into(),
        nib: s,
        chars: None,
        baselines: b,
    }
    .print();
    Ok(())
}

/// The network allowlist's proxy: what a request through a `CONNECT`
/// tunnel (the way HTTPS goes) adds over a direct one to a loopback server,
/// and the server's memory with 100 tunnels open.
pub(crate) fn proxy_scenarios(nib: &Path, scratch: &Path, n: usize) -> Result<()> {
    use std::io::{Read, Write};
    let dir = scratch.join("proxy");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let up = loopback_server(false)?;
    let hold = loopback_server(true)?;
    let state = scratch.join("proxy-state");
    let mut server = Server::spawn_with(
        nib,
        &dir,
        &state,
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_NETWORK", "127.0.0.1")],
    )?;
    server.initialize()?;
    let said = server.call("nibash", json!({"command": "echo $HTTP_PROXY"}))?;
    let Some(port) = said
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
    else {
        println!("  proxy: programs got no proxy here ({said:?}); skipped");
        return Ok(());
    };
    let request = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{up}\r\n\r\n");
    let get = |s: &mut std::net::TcpStream| -> Result<()> {
        s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
        if answer.ends_with("ok") {
            Ok(())
        } else {
            Err(format!("unexpected answer {answer:?}"))
        }
    };
    let mut tunnelled = || -> Result<(Duration, usize)> {
        let started = Instant::now();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        s.write_all(format!("CONNECT 127.0.0.1:{up} HTTP/1.1\r\n\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        let head = read_head(&mut s)?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("the proxy said {head:?}"));
        }
        get(&mut s)?;
        Ok((started.elapsed(), 0))
    };
    let mut bases: Baselines<'_> = vec![(
        "the same request direct".into(),
        Box::new(|| {
            let started = Instant::now();
            let mut s =
                std::net::TcpStream::connect(("127.0.0.1", up)).map_err(|e| e.to_string())?;
            get(&mut s)?;
            Ok(started.elapsed())
        }),
    )];
    let (s, _, b) = interleave(n, Some(&mut tunnelled), &mut bases)?;
    Row {
        scenario: "request through the proxy's CONNECT tunnel (as HTTPS goes), loopback server"
            .into(),
        nib: s,
        chars: None,
        baselines: b,
    }
    .print();
    https_through_the_proxy(nib, scratch, &dir, port, n)?;
    let pid = server.child.id();
    let before = status_kib(pid, "VmRSS:").unwrap_or(0);
    let mut open = Vec::new();
    for _ in 0..100 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        s.write_all(format!("CONNECT 127.0.0.1:{hold} HTTP/1.1\r\n\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        let head = read_head(&mut s)?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("tunnel refused: {head:?}"));
        }
        s.write_all(b"hello").map_err(|e| e.to_string())?;
        open.push(s);
    }
    let with = status_kib(pid, "VmRSS:").unwrap_or(0);
    drop(open);
    println!(
        "  proxy: server resident memory {:.1} MiB before, {:.1} MiB with 100 tunnels open (+{} KiB)",
        before as f64 / 1024.0,
        with as f64 / 1024.0,
        with.saturating_sub(before)
    );
    Ok(())
}
