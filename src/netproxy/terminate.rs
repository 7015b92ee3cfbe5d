//! The relay of a tunnel nib terminates (a host with a brokered secret):
//! HTTP/1.1 requests read one by one from the program's TLS, each sent on
//! over the proxy's own TLS to the real server with the declared header
//! filled in ([`super::secrets::fill_request_head`]); request bodies pass
//! untouched. A request whose authority (its `Host`, an absolute-form
//! target) is not the tunnel's host gets `421` and is never filled, and one
//! framed two ways (`Content-Length` with `Transfer-Encoding`, differing
//! lengths) gets `400`. Responses come back with the real values scrubbed
//! out of their heads and bodies (as they are and encoded,
//! [`super::secrets::encoded_echoes`]); the request asks for them
//! unencoded (`Accept-Encoding: identity`) so that an echo can be seen,
//! and a response in a content coding anyway is answered `502` instead.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::secrets::{Scrubber, Secret, fill_request_head};

/// The longest head read.
const HEAD_LIMIT: usize = 64 * 1024;
/// How long a kept-alive connection waits for its next request.
const IDLE: Duration = Duration::from_secs(120);
/// The most read at once.
const PIECE: usize = 16 * 1024;

fn broken(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// A reader with what it read ahead.
struct Ahead<R> {
    r: R,
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Ahead<R> {
    /// Reads more; false at the end.
    async fn fill(&mut self) -> io::Result<bool> {
        let mut chunk = vec![0u8; PIECE];
        let n = self.r.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    /// The bytes before `at`, taken.
    fn take(&mut self, at: usize) -> Vec<u8> {
        let rest = self.buf.split_off(at);
        std::mem::replace(&mut self.buf, rest)
    }

    /// The next head, through its blank line; `None` at an end between
    /// messages.
    async fn head(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(end) = memchr::memmem::find(&self.buf, b"\r\n\r\n") {
                return Ok(Some(self.take(end + 4)));
            }
            if self.buf.len() > HEAD_LIMIT {
                return Err(broken("a head longer than 64 KiB"));
            }
            if !self.fill().await? {
                return match self.buf.is_empty() {
                    true => Ok(None),
                    false => Err(broken("the connection ended inside a head")),
                };
            }
        }
    }

    /// The next line, through its `\n`.
    async fn line(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf) {
                return Ok(self.take(i + 1));
            }
            if self.buf.len() > HEAD_LIMIT {
                return Err(broken("a chunk line longer than 64 KiB"));
            }
            if !self.fill().await? {
                return Err(broken("the connection ended inside a chunk line"));
            }
        }
    }

    /// Between 1 and `most` bytes; an error at the end.
    async fn some(&mut self, most: usize) -> io::Result<Vec<u8>> {
        if self.buf.is_empty() && !self.fill().await? {
            return Err(broken("the connection ended inside a body"));
        }
        let n = most.min(self.buf.len());
        Ok(self.take(n))
    }

    /// What comes next; empty at the end.
    async fn any(&mut self) -> io::Result<Vec<u8>> {
        if self.buf.is_empty() && !self.fill().await? {
            return Ok(Vec::new());
        }
        Ok(std::mem::take(&mut self.buf))
    }
}

/// How a message's body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

/// A head's first line and `(lowercase name, value)` pairs.
struct Head {
    first: String,
    fields: Vec<(String, String)>,
}

impl Head {
    fn read(bytes: &[u8]) -> Head {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = text.split("\r\n");
        let first = lines.next().unwrap_or_default().to_string();
        let fields = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Head { first, fields }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.fields
            .iter()
            .any(|(n, v)| n == name && v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }

    /// The body's framing when the message has one (RFC 9112 §6.3).
    fn framing(&self, otherwise: Body) -> io::Result<Body> {
        if self.has_token("transfer-encoding", "chunked") {
            return Ok(Body::Chunked);
        }
        match self.get("content-length") {
            Some(n) => n
                .parse()
                .map(Body::Length)
                .map_err(|_| broken("a bad Content-Length")),
            None => Ok(otherwise),
        }
    }
}

/// Why a request is not relayed: the status and the reason the program
/// reads.
type Refused = (&'static str, String);

/// The body framing of a request the relay passes on, or why not: a request
/// with both `Content-Length` and `Transfer-Encoding`, with two differing
/// lengths, or with a transfer coding other than a final `chunked` is
/// refused (RFC 9112 §6.3: the server and the relay could read its end at
/// different places, and the rest as another request).
fn request_framing(request: &Head) -> Result<Body, Refused> {
    let bad = |why: &str| ("400 Bad Request", why.to_string());
    let lengths: Vec<&str> = request
        .fields
        .iter()
        .filter(|(n, _)| n == "content-length")
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .collect();
    let codings: Vec<&str> = request
        .fields
        .iter()
        .filter(|(n, _)| n == "transfer-encoding")
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .collect();
    if !codings.is_empty() && !lengths.is_empty() {
        return Err(bad(
            "a request with both Content-Length and Transfer-Encoding is refused (RFC 9112 §6.3); nothing was sent. hint: send one of them",
        ));
    }
    if let Some(last) = codings.last() {
        if !last.eq_ignore_ascii_case("chunked")
            || codings[..codings.len() - 1]
                .iter()
                .any(|c| c.eq_ignore_ascii_case("chunked"))
        {
            return Err(bad(
                "a request's Transfer-Encoding must end in chunked, once; nothing was sent",
            ));
        }
        return Ok(Body::Chunked);
    }
    let Some(first) = lengths.first() else {
        return Ok(Body::None);
    };
    if lengths.iter().any(|l| l != first) {
        return Err(bad(
            "a request with two differing Content-Lengths is refused; nothing was sent",
        ));
    }
    if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(
            "a Content-Length that is not a number is refused; nothing was sent",
        ));
    }
    first
        .parse()
        .map(Body::Length)
        .map_err(|_| bad("a Content-Length that is not a number is refused; nothing was sent"))
}

/// Refuses a request head with a line the relay and a server could read
/// apart: a folded line (starting with a space or tab, obsolete since RFC
/// 7230, which some servers join to the field above it: `Host: h.example`
/// then ` evil.example`), or a line with no `:`.
fn check_lines(head: &str) -> Result<(), Refused> {
    let bad = head
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.is_empty())
        .find(|l| l.starts_with([' ', '\t']) || !l.contains(':'));
    match bad {
        Some(line) => Err((
            "400 Bad Request",
            format!("a folded or malformed header line ({line:?}) is refused; nothing was sent"),
        )),
        None => Ok(()),
    }
}

/// `host[:port]` split, brackets kept on an IPv6 address.
fn split_authority(a: &str) -> Option<(&str, Option<&str>)> {
    let a = a.rsplit_once('@').map_or(a, |(_, a)| a);
    if a.starts_with('[') {
        let end = a.find(']')?;
        let (h, rest) = a.split_at(end + 1);
        return match rest.strip_prefix(':') {
            Some(p) => Some((h, Some(p))),
            None if rest.is_empty() => Some((h, None)),
            None => None,
        };
    }
    Some(match a.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (a, None),
    })
}

/// Whether `a` (a `Host` value or a URL's authority) names the tunnel's
/// `host` and `port` (no port: the scheme's default, taken as the tunnel's).
fn names_tunnel(a: &str, host: &str, port: u16) -> bool {
    split_authority(a.trim()).is_some_and(|(h, p)| {
        h.eq_ignore_ascii_case(host) && p.is_none_or(|p| p.parse() == Ok(port))
    })
}

/// Refuses a request whose authority is not the tunnel's: its one `Host`
/// and, in absolute form, its target's authority must both name `host`
/// (and `port`). A front serving many names routes by them, so another
/// name would carry the real value to another host (domain fronting).
fn check_authority(request: &Head, host: &str, port: u16) -> Result<(), Refused> {
    let misdirected = |what: &str| {
        (
            "421 Misdirected Request",
            format!(
                "{what} is not {host}, the host this tunnel was opened to; nothing was sent and no secret was filled. hint: open a tunnel to each host you address"
            ),
        )
    };
    let hosts: Vec<&str> = request
        .fields
        .iter()
        .filter(|(n, _)| n == "host")
        .map(|(_, v)| v.as_str())
        .collect();
    match hosts.as_slice() {
        [one] if names_tunnel(one, host, port) => {}
        [one] => return Err(misdirected(&format!("the request's Host {one:?}"))),
        [] => {
            return Err((
                "400 Bad Request",
                "a request without a Host header is refused; nothing was sent".into(),
            ));
        }
        _ => {
            return Err((
                "400 Bad Request",
                "a request with more than one Host header is refused; nothing was sent".into(),
            ));
        }
    }
    let target = request.first.split(' ').nth(1).unwrap_or_default();
    if target.starts_with('/') || target == "*" {
        return Ok(());
    }
    let Some((_, rest)) = target.split_once("://") else {
        return Err((
            "400 Bad Request",
            format!(
                "{target:?} is not a request target a terminated tunnel relays; nothing was sent"
            ),
        ));
    };
    let auth = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if names_tunnel(auth, host, port) {
        Ok(())
    } else {
        Err(misdirected(&format!("the request's target {target:?}")))
    }
}

/// A response of nib's own, closing the connection.
async fn refuse<W: AsyncWrite + Unpin>(to: &mut W, (status, why): &Refused) {
    let body = format!("nib: {why}\n");
    let _ = to
        .write_all(
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await;
    let _ = to.flush().await;
}

/// What follows a response.
enum After {
    /// The next request on the same connection.
    Next,
    /// The connection ends.
    Close,
    /// A protocol switch: bytes pass both ways untouched from now on.
    Switch,
}

/// Relays requests from `client` to `server` (both TLS already) for
/// `host` (the tunnel's, on `port`), with its `secrets`, until either side
/// ends. A request naming another authority, or framed two ways, is
/// answered here and ends the connection; so does a response in a content
/// coding (an echo inside it could not be scrubbed).
pub async fn relay<C, S>(client: C, server: S, host: &str, port: u16, secrets: &[&Secret])
where
    C: AsyncRead + AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = secrets.iter().flat_map(|s| s.echoes()).collect();
    let (client_r, mut client_w) = tokio::io::split(client);
    let (server_r, mut server_w) = tokio::io::split(server);
    let mut client_r = Ahead {
        r: client_r,
        buf: Vec::new(),
    };
    let mut server_r = Ahead {
        r: server_r,
        buf: Vec::new(),
    };
    loop {
        let head = match tokio::time::timeout(IDLE, client_r.head()).await {
            Ok(Ok(Some(h))) => h,
            _ => break,
        };
        let Ok(text) = std::str::from_utf8(&head[..head.len() - 4]) else {
            let _ = client_w
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            break;
        };
        let request = Head::read(&head);
        let checked = check_lines(text)
            .and_then(|()| check_authority(&request, host, port))
            .and_then(|()| request_framing(&request));
        let body = match checked {
            Ok(body) => body,
            Err(refused) => {
                refuse(&mut client_w, &refused).await;
                break;
            }
        };
        let is_head = request.first.starts_with("HEAD ");
        let closing = request.has_token("connection", "close");
        let (filled, _stray) = fill_request_head(text, secrets);
        let outgoing = identity_encoding(&filled);
        if server_w.write_all(outgoing.as_bytes()).await.is_err() {
            break;
        }
        let after = {
            let sending = pass_body(&mut client_r, &mut server_w, body);
            let answering = relay_response(&mut server_r, &mut client_w, host, is_head, &pairs);
            tokio::pin!(sending, answering);
            let mut sent = false;
            let after = loop {
                tokio::select! {
                    r = &mut sending, if !sent => {
                        if r.is_err() { break After::Close; }
                        sent = true;
                    }
                    r = &mut answering => break r.unwrap_or(After::Close),
                }
            };
            // A response that came before the whole body (a refusal that
            // did not wait for it) ends the connection.
            if sent { after } else { After::Close }
        };
        match after {
            After::Next if !closing => continue,
            After::Switch => {
                switch(client_r, client_w, server_r, server_w).await;
                return;
            }
            _ => break,
        }
    }
    let _ = client_w.shutdown().await;
    let _ = server_w.shutdown().await;
}

/// The request head (without its blank line) asking for an unencoded
/// response, with the blank line.
fn identity_encoding(head: &str) -> String {
    let mut out = String::with_capacity(head.len() + 40);
    for line in head.split("\r\n") {
        let name = line.split(':').next().unwrap_or_default().trim();
        if name.eq_ignore_ascii_case("accept-encoding") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Accept-Encoding: identity\r\n\r\n");
    out
}

/// Copies a request body as it is framed.
async fn pass_body<R, W>(from: &mut Ahead<R>, to: &mut W, body: Body) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    match body {
        Body::None | Body::UntilClose => {}
        Body::Length(mut left) => {
            while left > 0 {
                let piece = from
                    .some(usize::try_from(left).unwrap_or(PIECE).min(PIECE))
                    .await?;
                left -= piece.len() as u64;
                to.write_all(&piece).await?;
            }
        }
        Body::Chunked => loop {
            let line = from.line().await?;
            to.write_all(&line).await?;
            let size = chunk_size(&line)?;
            if size == 0 {
                // Trailers, through the blank line.
                loop {
                    let t = from.line().await?;
                    to.write_all(&t).await?;
                    if t == b"\r\n" || t == b"\n" {
                        break;
                    }
                }
                break;
            }
            let mut left = size + 2;
            while left > 0 {
                let piece = from
                    .some(usize::try_from(left).unwrap_or(PIECE).min(PIECE))
                    .await?;
                left -= piece.len() as u64;
                to.write_all(&piece).await?;
            }
        },
    }
    to.flush().await
}

fn chunk_size(line: &[u8]) -> io::Result<u64> {
    let text = std::str::from_utf8(line).map_err(|_| broken("a bad chunk size"))?;
    let hex = text.split(';').next().unwrap_or_default().trim();
    u64::from_str_radix(hex, 16).map_err(|_| broken("a bad chunk size"))
}

/// Relays interim responses and the final one, scrubbed of `pairs`.
async fn relay_response<R, W>(
    from: &mut Ahead<R>,
    to: &mut W,
    host: &str,
    is_head: bool,
    pairs: &[(Vec<u8>, Vec<u8>)],
) -> io::Result<After>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let head = from
            .head()
            .await?
            .ok_or_else(|| broken("the server ended before answering"))?;
        let response = Head::read(&head);
        let status: u16 = response
            .first
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| broken("a bad status line"))?;
        let bodiless = is_head || status == 204 || status == 304 || status < 200;
        if !bodiless && let Some(coding) = content_coding(&response) {
            refuse(
                to,
                &(
                    "502 Bad Gateway",
                    format!(
                        "{host} answered in {coding} though nib asked for an unencoded answer (Accept-Encoding: identity); an encoded answer from a host with a brokered secret is not passed on, since nib could not keep the secret out of it. Nothing of the answer reached the program. hint: ask without compression, or for a form the host sends unencoded"
                    ),
                ),
            )
            .await;
            return Ok(After::Close);
        }
        let mut scrub = Scrubber::new(pairs.to_vec());
        let mut out = scrub.push(&head);
        out.extend(scrub.finish());
        to.write_all(&out).await?;
        if status == 101 {
            to.flush().await?;
            return Ok(After::Switch);
        }
        if (100..200).contains(&status) {
            to.flush().await?;
            continue;
        }
        let body = if is_head || status == 204 || status == 304 {
            Body::None
        } else {
            response.framing(Body::UntilClose)?
        };
        scrub_body(from, to, body, pairs).await?;
        to.flush().await?;
        let closing = response.has_token("connection", "close")
            || body == Body::UntilClose
            || (response.first.starts_with("HTTP/1.0")
                && !response.has_token("connection", "keep-alive"));
        return Ok(if closing { After::Close } else { After::Next });
    }
}

/// The coding a response's body is in when it is not plain bytes: a
/// `Content-Encoding` other than `identity`, or a transfer coding other
/// than `chunked`.
fn content_coding(response: &Head) -> Option<String> {
    let listed = |name: &str, plain: &str| {
        response
            .fields
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case(plain))
            .map(str::to_string)
    };
    listed("content-encoding", "identity")
        .map(|c| format!("Content-Encoding: {c}"))
        .or_else(|| {
            listed("transfer-encoding", "chunked").map(|c| format!("Transfer-Encoding: {c}"))
        })
}

/// Copies a response body as it is framed, scrubbed; a chunked body is
/// sent on in chunks of what the scrubber gives.
async fn scrub_body<R, W>(
    from: &mut Ahead<R>,
    to: &mut W,
    body: Body,
    pairs: &[(Vec<u8>, Vec<u8>)],
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut scrub = Scrubber::new(pairs.to_vec());
    match body {
        Body::None => {}
        Body::Length(mut left) => {
            while left > 0 {
                let piece = from
                    .some(usize::try_from(left).unwrap_or(PIECE).min(PIECE))
                    .await?;
                left -= piece.len() as u64;
                to.write_all(&scrub.push(&piece)).await?;
            }
            to.write_all(&scrub.finish()).await?;
        }
        Body::UntilClose => loop {
            let piece = from.any().await?;
            if piece.is_empty() {
                to.write_all(&scrub.finish()).await?;
                break;
            }
            to.write_all(&scrub.push(&piece)).await?;
        },
        Body::Chunked => loop {
            let size = chunk_size(&from.line().await?)?;
            if size == 0 {
                write_chunk(to, &scrub.finish()).await?;
                to.write_all(b"0\r\n").await?;
                loop {
                    let t = from.line().await?;
                    let mut s = Scrubber::new(pairs.to_vec());
                    let mut out = s.push(&t);
                    out.extend(s.finish());
                    to.write_all(&out).await?;
                    if t == b"\r\n" || t == b"\n" {
                        break;
                    }
                }
                break;
            }
            let mut left = size;
            while left > 0 {
                let piece = from
                    .some(usize::try_from(left).unwrap_or(PIECE).min(PIECE))
                    .await?;
                left -= piece.len() as u64;
                write_chunk(to, &scrub.push(&piece)).await?;
            }
            // The chunk's own line end.
            from.line().await?;
        },
    }
    Ok(())
}

async fn write_chunk<W: AsyncWrite + Unpin>(to: &mut W, data: &[u8]) -> io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    to.write_all(format!("{:x}\r\n", data.len()).as_bytes())
        .await?;
    to.write_all(data).await?;
    to.write_all(b"\r\n").await
}

/// After a protocol switch: what was read ahead, then both ways untouched.
async fn switch<CR, CW, SR, SW>(
    mut client_r: Ahead<CR>,
    mut client_w: CW,
    mut server_r: Ahead<SR>,
    mut server_w: SW,
) where
    CR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin,
    SR: AsyncRead + Unpin,
    SW: AsyncWrite + Unpin,
{
    let up = async {
        server_w
            .write_all(&std::mem::take(&mut client_r.buf))
            .await?;
        tokio::io::copy(&mut client_r.r, &mut server_w).await?;
        server_w.shutdown().await
    };
    let down = async {
        client_w
            .write_all(&std::mem::take(&mut server_r.buf))
            .await?;
        tokio::io::copy(&mut server_r.r, &mut client_w).await?;
        client_w.shutdown().await
    };
    let _ = tokio::join!(up, down);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netproxy::secrets::Secrets;

    const REAL: &str = "ghp_R3alT0kenValue0123456789abcdefABCD";

    /// Reads from `s` until `buf` holds `want` more bytes than at the start
    /// or ends with `end`.
    async fn read_until<R: AsyncRead + Unpin>(s: &mut R, buf: &mut Vec<u8>, end: &[u8]) {
        let mut chunk = [0u8; 4096];
        while !buf.ends_with(end) {
            let n = s.read(&mut chunk).await.unwrap();
            assert!(n > 0, "ended early: {}", String::from_utf8_lossy(buf));
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// One exchange through the relay for `h.example:443` holding REAL:
    /// the program sends `request` (its placeholder in place of `{ph}`);
    /// the server, if a head reaches it, answers `response`. Returns what
    /// the server got and what the program got.
    async fn exchange(request: &str, response: &str) -> (String, String) {
        let secrets = Secrets::parse("GH_TOKEN@h.example", |_| Some(REAL.into()), |_| true);
        let ph = secrets.accepted[0].placeholder.clone();
        let for_host = secrets.for_host("h.example");
        let (mut program, relay_client) = tokio::io::duplex(1 << 16);
        let (relay_server, mut server) = tokio::io::duplex(1 << 16);
        let relay = relay(relay_client, relay_server, "h.example", 443, &for_host);
        let drive = async {
            program
                .write_all(request.replace("{ph}", &ph).as_bytes())
                .await
                .unwrap();
            // No next request: the relay ends after this one.
            program.shutdown().await.unwrap();
            let mut got = Vec::new();
            let mut chunk = [0u8; 4096];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match tokio::time::timeout(Duration::from_millis(500), server.read(&mut chunk))
                    .await
                {
                    Ok(Ok(n)) if n > 0 => got.extend_from_slice(&chunk[..n]),
                    _ => break,
                }
            }
            if !got.is_empty() {
                server
                    .write_all(response.replace("{REAL}", REAL).as_bytes())
                    .await
                    .unwrap();
                let _ = server.shutdown().await;
            }
            let mut answer = Vec::new();
            let _ = program.read_to_end(&mut answer).await;
            (
                String::from_utf8_lossy(&got).into_owned(),
                String::from_utf8_lossy(&answer).into_owned(),
            )
        };
        let ((), out) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(relay, drive)
        })
        .await
        .expect("the relay and the test ended");
        out
    }

    const OK: &str = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

    /// Domain fronting: a request on h.example's tunnel naming another host
    /// (Host, or an absolute-form target) is answered 421 and never sent,
    /// so the real value is never filled for it.
    #[tokio::test]
    async fn a_request_for_another_authority_is_refused_and_never_filled() {
        for request in [
            "GET / HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer {ph}\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h.example:8443\r\nAuthorization: Bearer {ph}\r\n\r\n",
            "GET https://evil.example/x HTTP/1.1\r\nHost: h.example\r\nAuthorization: Bearer {ph}\r\n\r\n",
            "GET https://h.example@evil.example/ HTTP/1.1\r\nHost: h.example\r\nAuthorization: Bearer {ph}\r\n\r\n",
        ] {
            let (server, program) = exchange(request, OK).await;
            assert!(server.is_empty(), "{request}: the server got {server}");
            assert!(program.starts_with("HTTP/1.1 421 "), "{request}: {program}");
            assert!(program.contains("not h.example"), "{program}");
        }
        for (request, status) in [
            (
                "GET / HTTP/1.1\r\nAuthorization: Bearer {ph}\r\n\r\n",
                "400",
            ),
            (
                "GET / HTTP/1.1\r\nHost: h.example\r\nHost: evil.example\r\nAuthorization: Bearer {ph}\r\n\r\n",
                "400",
            ),
        ] {
            let (server, program) = exchange(request, OK).await;
            assert!(server.is_empty(), "{request}: the server got {server}");
            assert!(
                program.starts_with(&format!("HTTP/1.1 {status} ")),
                "{program}"
            );
        }
        // The tunnel's own name, in either form and any case, is filled.
        for request in [
            "GET / HTTP/1.1\r\nHost: H.example:443\r\nAuthorization: Bearer {ph}\r\n\r\n",
            "GET https://h.example/x HTTP/1.1\r\nHost: h.example\r\nAuthorization: Bearer {ph}\r\n\r\n",
        ] {
            let (server, program) = exchange(request, OK).await;
            assert!(server.contains(&format!("Bearer {REAL}")), "{server}");
            assert!(program.ends_with("ok"), "{program}");
        }
    }

    /// RFC 9112 §6.3: a request framed two ways is refused, not forwarded;
    /// so is a length with a sign, a folded line and a line with no colon.
    #[tokio::test]
    async fn a_request_framed_two_ways_gets_400() {
        for request in [
            "POST / HTTP/1.1\r\nHost: h.example\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h.example\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h.example\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            "POST / HTTP/1.1\r\nHost: h.example\r\nContent-Length: 5, 6\r\n\r\nhello!",
            "POST / HTTP/1.1\r\nHost: h.example\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h.example\r\nContent-Length: +5\r\n\r\nhello",
            "GET / HTTP/1.1\r\nHost: h.example\r\n evil.example\r\nAuthorization: Bearer {ph}\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h.example\r\nno colon here\r\n\r\n",
        ] {
            let (server, program) = exchange(request, OK).await;
            assert!(server.is_empty(), "{request}: the server got {server}");
            assert!(program.starts_with("HTTP/1.1 400 "), "{request}: {program}");
        }
        let (server, program) = exchange(
            "POST / HTTP/1.1\r\nHost: h.example\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
            OK,
        )
        .await;
        assert!(server.starts_with("POST / "), "{server}");
        assert!(program.ends_with("ok"), "{program}");
    }

    /// An answer in a content coding is not passed on (an echo inside it
    /// could not be scrubbed): the program gets a 502 saying why.
    #[tokio::test]
    async fn an_encoded_answer_is_refused_with_a_502_that_says_why() {
        for response in [
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 38\r\n\r\n{REAL}",
            "HTTP/1.1 200 OK\r\nContent-Encoding: identity, br\r\nContent-Length: 38\r\n\r\n{REAL}",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n26\r\n{REAL}\r\n0\r\n\r\n",
        ] {
            let (server, program) = exchange(
                "GET / HTTP/1.1\r\nHost: h.example\r\nAuthorization: Bearer {ph}\r\n\r\n",
                response,
            )
            .await;
            assert!(server.contains("Accept-Encoding: identity"), "{server}");
            assert!(
                program.starts_with("HTTP/1.1 502 "),
                "{response}: {program}"
            );
            assert!(program.contains("not passed on"), "{program}");
            assert!(
                !program.contains(REAL) && !program.contains("200 OK"),
                "{program}"
            );
        }
        // identity is plain bytes, scrubbed as ever.
        let (_, program) = exchange(
            "GET / HTTP/1.1\r\nHost: h.example\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Length: 38\r\n\r\n{REAL}",
        )
        .await;
        assert!(program.starts_with("HTTP/1.1 200 OK"), "{program}");
        assert!(!program.contains(REAL), "{program}");
    }

    #[tokio::test]
    async fn requests_are_relayed_one_by_one_with_the_header_filled_and_echoes_scrubbed() {
        let secrets = Secrets::parse("GH_TOKEN@h.example", |_| Some(REAL.into()), |_| true);
        let ph = secrets.accepted[0].placeholder.clone();
        let for_host = secrets.for_host("h.example");
        let (mut program, relay_client) = tokio::io::duplex(1 << 16);
        let (relay_server, mut server) = tokio::io::duplex(1 << 16);
        let relay = relay(relay_client, relay_server, "h.example", 443, &for_host);
        let drive = async {
            // 1: a body of known length that holds the placeholder.
            let body = format!("{{\"comment\":\"{ph}\"}}");
            program
                .write_all(
                    format!(
                        "POST /issues HTTP/1.1\r\nHost: h.example\r\nAuthorization: Bearer {ph}\r\nAccept-Encoding: gzip\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            let mut got = Vec::new();
            read_until(&mut server, &mut got, body.as_bytes()).await;
            let got = String::from_utf8(got).unwrap();
            assert!(
                got.contains(&format!("Authorization: Bearer {REAL}\r\n")),
                "{got}"
            );
            assert!(
                got.contains("Accept-Encoding: identity\r\n") && !got.contains("gzip"),
                "{got}"
            );
            // The body passes untouched: the placeholder, never the value.
            assert!(got.ends_with(&format!("\r\n\r\n{body}")), "{got}");
            // The server echoes the value, cut across chunks.
            let (a, b) = REAL.split_at(10);
            server
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nX-Echo: {REAL}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\nsaw {a}\r\n{:x}\r\n{b}!\r\n0\r\n\r\n",
                        4 + a.len(),
                        b.len() + 1
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            let mut answer = Vec::new();
            read_until(&mut program, &mut answer, b"0\r\n\r\n").await;
            let answer = String::from_utf8(answer).unwrap();
            assert!(!answer.contains(REAL), "{answer}");
            assert!(answer.contains(&format!("X-Echo: {ph}\r\n")), "{answer}");
            let unchunked: String = answer
                .split("\r\n")
                .skip_while(|l| !l.is_empty())
                .skip(1)
                .collect::<Vec<_>>()
                .chunks(2)
                .filter_map(|c| c.get(1).copied())
                .collect();
            assert_eq!(unchunked, format!("saw {ph}!"), "{answer}");

            // 2: a chunked body on the same connection, then close.
            program
                .write_all(
                    format!(
                        "PUT /x HTTP/1.1\r\nHost: h.example\r\nX-Token: {ph}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            let mut got = Vec::new();
            read_until(&mut server, &mut got, b"0\r\n\r\n").await;
            let got = String::from_utf8(got).unwrap();
            assert!(got.starts_with("PUT /x HTTP/1.1\r\n"), "{got}");
            // An undeclared header keeps the placeholder.
            assert!(
                got.contains(&format!("X-Token: {ph}\r\n")) && !got.contains(REAL),
                "{got}"
            );
            server
                .write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
                .await
                .unwrap();
            let mut answer = Vec::new();
            read_until(&mut program, &mut answer, b"\r\n\r\n").await;
            assert!(answer.starts_with(b"HTTP/1.1 204"));
            // The relay ends the connection after a request that asked to.
            let mut rest = Vec::new();
            assert_eq!(program.read_to_end(&mut rest).await.unwrap(), 0);
        };
        tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(relay, drive)
        })
        .await
        .expect("the relay and the test ended");
    }
}
