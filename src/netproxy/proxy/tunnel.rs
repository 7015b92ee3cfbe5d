//! A tunnel's two sides once the upstream is open: joined byte for byte
//! ([`join_halves`], the other side given a grace once one ends), or, for a
//! host with a brokered secret, terminated on both sides ([`terminate`]:
//! the session authority's certificate to the program, a verified TLS
//! connection to the server, [`crate::netproxy::terminate::relay`] between
//! them). Opening the upstream and deciding which is the proxy's.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::request::{answer, read_head};
use crate::netproxy::hosts::Refusal;

/// Resolving and connecting each get this long.
pub(super) const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a tunnel lives on once one of its sides has ended.
const HALF_CLOSED_GRACE: Duration = Duration::from_secs(10);

/// Copies both ways until both end; once one side has ended, the other
/// gets [`HALF_CLOSED_GRACE`] to finish, so a tunnel whose client is gone
/// does not hold its place (and two descriptors) while the far end stays
/// silent.
pub(super) async fn join_halves<S: AsyncRead + AsyncWrite + Unpin>(
    client: S,
    mut upstream: TcpStream,
) {
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

/// The program's side of a tunnel: what was read past the `CONNECT` head,
/// then the stream.
pub(super) struct Rewound<S> {
    ahead: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Rewound<S> {
    pub(super) fn new(ahead: Vec<u8>, inner: S) -> Rewound<S> {
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
pub(super) async fn terminate<S: AsyncRead + AsyncWrite + Unpin>(
    authority: &crate::netproxy::tls::Authority,
    secrets: &[&crate::netproxy::secrets::Secret],
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
        Ok(Ok(server)) => {
            crate::netproxy::terminate::relay(client, server, host, port, secrets).await
        }
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
