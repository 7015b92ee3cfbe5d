//! The client's side of HTTP: the request head read within its limit, what
//! it asks for ([`Ask`]: a `CONNECT` tunnel or a plain request rewritten to
//! origin form, refused when framed two ways), the worker token its proxy
//! credentials name, and a short answer with a status and why. Whether the
//! host may be reached is the proxy's.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The longest request head accepted.
const HEAD_LIMIT: usize = 16 * 1024;

/// What a client asked for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ask {
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
pub(super) fn parse(head: &[u8]) -> Result<Ask, &'static str> {
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

/// The worker token a request names (`Proxy-Authorization: Basic` of
/// `nib:TOKEN`, from the proxy variables' address), if it names one.
pub(super) fn call_token(head: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(head).ok()?;
    let value = text.split("\r\n").skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("proxy-authorization")
            .then(|| value.trim())
    })?;
    let pair = crate::netproxy::secrets::basic_pair(value)?;
    let (user, token) = pair.split_once(':')?;
    (user == nib_sandbox::PROXY_USER && !token.is_empty()).then(|| token.to_string())
}

/// Reads until the end of the head; returns it and what followed it.
pub(super) async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> io::Result<(Vec<u8>, Vec<u8>)> {
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

/// Answers the client `status` with `why` as the body, and closes.
pub(super) async fn answer<S: AsyncWrite + Unpin>(s: &mut S, status: &str, why: &str) {
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
}
