//! Client connections: the accept loop (HTTP/1.1 through hyper, `TCP_NODELAY`), the cap on
//! open connections and the 503 `overloaded` that refuses one past it, the timeouts that keep a
//! client from holding a connection it does not use (headers, keep-alive idleness, a request
//! body that stops, a response nobody reads), hyper's own answers to requests it cannot parse
//! in the JSON error shape ([`parse_errors`]), and closing connections at shutdown. It knows
//! nothing of routes or runs: it serves one finished [`Router`], and is told when to stop.

mod parse_errors;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_http::timeout::TimeoutBody;

use super::error::ApiError;
use crate::config::ServerConfig;
use parse_errors::JsonParseErrors;

/// Descriptors kept for everything but client connections (store, MCP servers, logs, listener).
const RESERVED_DESCRIPTORS: u64 = 512;
/// The smallest automatic connection cap, however low the open-file limit.
const MIN_AUTOMATIC_CONNECTIONS: usize = 32;
/// Refusals being written at once; past it a connection over the cap is closed unanswered, so
/// a flood cannot turn refusals into the thing that exhausts descriptors.
const MAX_REFUSALS_IN_FLIGHT: usize = 256;
/// How long a refusal (a 503 past the connection cap, hyper's answer to a request it could not
/// parse) may take to be written and its request read away: a socket closed with unread bytes
/// resets, and the client might lose the answer before reading it.
const REFUSAL_TIME: Duration = Duration::from_secs(1);
/// At shutdown, after the runs have drained, how long open connections get to finish writing
/// before they are dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// How clients may use their connections (`server.*` in the config).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    /// First request's headers, and any pause in a request body.
    pub header_read: Duration,
    /// Waiting for the next request on a keep-alive connection.
    pub idle: Duration,
    /// A response the client accepts no bytes of.
    pub write: Duration,
}

impl ConnectionLimits {
    /// The limits of `server`; `open_files` (the process's open-file limit) sets the automatic
    /// connection cap.
    pub fn from_config(server: &ServerConfig, open_files: u64) -> Self {
        Self {
            max_connections: server
                .max_connections
                .unwrap_or_else(|| automatic_max_connections(open_files)),
            header_read: Duration::from_secs(server.header_read_timeout_seconds),
            idle: Duration::from_secs(server.idle_timeout_seconds),
            write: Duration::from_secs(server.write_timeout_seconds),
        }
    }
}

/// Half the descriptors above the reserved ones: every streamed run also holds a connection to
/// its LLM upstream.
fn automatic_max_connections(open_files: u64) -> usize {
    let spare = open_files.saturating_sub(RESERVED_DESCRIPTORS) / 2;
    usize::try_from(spare)
        .unwrap_or(usize::MAX)
        .max(MIN_AUTOMATIC_CONNECTIONS)
}

/// Raises the soft open-file limit to the hard one (as Go programs and nginx do) and returns
/// it; the current soft limit when it cannot be raised or read.
pub fn raise_open_file_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(error) => {
                tracing::debug!(%error, soft, hard, "could not raise the open-file limit");
                soft
            }
        },
        Ok((soft, _)) => soft,
        Err(error) => {
            tracing::debug!(%error, "could not read the open-file limit");
            1024
        }
    }
}

/// Serves `router` on `listener` until `stop` resolves; then no connection is accepted, idle
/// keep-alive connections close at once, busy ones after their response, and whatever is
/// still open after [`CLOSE_GRACE`] is dropped, so no client can hold the shutdown.
/// Connections are not closed earlier (at the signal, while the runs drain): a request sent on
/// a pooled connection as it closes fails outright, where the drain answers it 503 with
/// Retry-After, which moves the client on.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()> + Send,
) {
    let closing_token = CancellationToken::new();
    let dropped = CancellationToken::new();
    let tracker = TaskTracker::new();
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    tokio::pin!(stop);
    loop {
        let (tcp, _peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    on_accept_error(error).await;
                    continue;
                }
            },
        };
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            match Arc::clone(&refusals).try_acquire_owned() {
                Ok(refusing) => {
                    tracker.spawn(async move {
                        refuse(tcp).await;
                        drop(refusing);
                    });
                }
                Err(_) => drop(tcp),
            }
            continue;
        };
        // Streamed frames are small writes: without TCP_NODELAY each one written while the
        // previous is unacknowledged waits for the client's delayed ACK (~40 ms on Linux).
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        let connection = Connection {
            // A clone shares the finished route table (what `into_make_service` hands every
            // connection); building the router per connection would cost ~13 KiB per stream.
            router: router.clone(),
            limits,
            closing: closing_token.clone(),
            dropped: dropped.clone(),
        };
        tracker.spawn(async move {
            connection.serve(tcp).await;
            drop(permit);
        });
    }
    drop(listener);
    closing_token.cancel();
    tracker.close();
    if tokio::time::timeout(CLOSE_GRACE, tracker.wait())
        .await
        .is_err()
    {
        tracing::info!(
            open = tracker.len(),
            "connections still open after the shutdown grace: closing them"
        );
        dropped.cancel();
        tracker.wait().await;
    }
}

/// Errors of one connection attempt are skipped; anything else (out of descriptors) pauses the
/// loop a little, as `axum::serve` does, rather than spinning.
async fn on_accept_error(error: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!(%error, "accepting a connection failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Answers a connection over the cap with 503 `overloaded`, `Retry-After: 1` and
/// `Connection: close`, without reading its request, then closes it.
async fn refuse(mut tcp: TcpStream) {
    let body = ApiError::overloaded(
        "Too many open connections (server.maxConnections); retry shortly",
        Some(1),
    )
    .body_text();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let written = async {
        tcp.write_all(answer.as_bytes()).await?;
        read_away(tcp).await
    };
    let _ = tokio::time::timeout(REFUSAL_TIME, written).await;
}

/// Ends the answer written on `tcp` and reads what the client still sends until it closes, so
/// closing does not reset the answer away. Callers bound the time it takes.
async fn read_away(mut tcp: TcpStream) -> io::Result<()> {
    tcp.shutdown().await?;
    let mut sink = [0u8; 4096];
    while tcp.read(&mut sink).await? > 0 {}
    Ok(())
}

/// One accepted connection and what it needs to be served.
struct Connection {
    router: Router,
    limits: ConnectionLimits,
    /// Shutdown began: finish the current response, then close.
    closing: CancellationToken,
    /// The shutdown grace is over: close now.
    dropped: CancellationToken,
}

impl Connection {
    async fn serve(self, tcp: TcpStream) {
        let Self {
            router,
            limits,
            closing,
            dropped,
        } = self;
        let first_request = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&first_request);
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            seen.store(true, Ordering::Relaxed);
            // A body that pauses longer than the header-read timeout fails the request.
            let request = request.map(|body| Body::new(TimeoutBody::new(limits.header_read, body)));
            tower::Service::call(&mut router.clone(), request)
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        // Hyper's header-read timer runs from the moment it waits for a request head, so on a
        // keep-alive connection it is the idle timeout; the first head's own deadline is below.
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.idle);
        let io = TokioIo::new(JsonParseErrors::new(StalledWrites::new(tcp, limits.write)));
        let mut connection = builder.serve_connection(io, service);
        let first_head = tokio::time::sleep(limits.header_read);
        tokio::pin!(first_head);
        let mut waiting_for_first_head = true;
        let mut shutting_down = false;
        loop {
            tokio::select! {
                served = &mut connection => {
                    let Err(error) = served else { return };
                    tracing::debug!(%error, "connection ended with an error");
                    if error.is_parse() || error.is_parse_too_large() {
                        // Hyper answered a request it could not parse (400, 414, 431) and
                        // stops reading: the rest of that request must not reset the answer.
                        let tcp = connection.into_parts().io.into_inner().into_inner().inner;
                        let _ = tokio::time::timeout(REFUSAL_TIME, read_away(tcp)).await;
                    }
                    return;
                }
                () = &mut first_head, if waiting_for_first_head => {
                    if !first_request.load(Ordering::Relaxed) {
                        tracing::debug!("no request headers within server.headerReadTimeoutSeconds: closing");
                        return;
                    }
                    waiting_for_first_head = false;
                }
                () = closing.cancelled(), if !shutting_down => {
                    Pin::new(&mut connection).graceful_shutdown();
                    shutting_down = true;
                }
                () = dropped.cancelled() => return,
            }
        }
    }
}

/// A socket whose writes fail with `TimedOut` once the peer has accepted no bytes for the write
/// timeout: hyper then closes the connection and drops the response, which tells the run its
/// client is gone. Only a write that would block starts the timer; writes that go through cost
/// a flag check.
struct StalledWrites<T> {
    inner: T,
    timeout: Duration,
    /// Armed while a write is pending; its deadline is when the peer counts as gone.
    stall: Pin<Box<Sleep>>,
    armed: bool,
}

impl<T> StalledWrites<T> {
    fn new(inner: T, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            stall: Box::pin(tokio::time::sleep(timeout)),
            armed: false,
        }
    }

    /// What to answer for a write that returned `poll`: progress disarms the timer, a pending
    /// write arms it (once) and fails when it runs out.
    fn watch<R>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if poll.is_ready() {
            self.armed = false;
            return poll;
        }
        if !self.armed {
            self.armed = true;
            let deadline = tokio::time::Instant::now() + self.timeout;
            self.stall.as_mut().reset(deadline);
        }
        ready!(self.stall.as_mut().poll(cx));
        tracing::info!(
            write_timeout_seconds = self.timeout.as_secs(),
            "the client accepted no bytes for server.writeTimeoutSeconds: closing its connection"
        );
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client stopped reading",
        )))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StalledWrites<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StalledWrites<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_automatic_cap_leaves_descriptors_for_upstreams_and_the_rest() {
        assert_eq!(automatic_max_connections(20_000), 9_744);
        assert_eq!(automatic_max_connections(1024), 256);
        assert_eq!(automatic_max_connections(100), MIN_AUTOMATIC_CONNECTIONS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_never_takes_fails_after_the_timeout() {
        let (near, _far) = tokio::io::duplex(8);
        let mut writes = StalledWrites::new(near, Duration::from_secs(30));
        writes
            .write_all(b"12345678")
            .await
            .expect("fits the buffer");
        let started = tokio::time::Instant::now();
        let error = writes
            .write_all(b"more")
            .await
            .expect_err("the peer never reads");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_taking_bytes_is_not_cut() {
        let (near, mut far) = tokio::io::duplex(8);
        let mut writes = StalledWrites::new(near, Duration::from_secs(30));
        let reader = tokio::spawn(async move {
            let mut taken = Vec::new();
            let mut chunk = [0u8; 4];
            loop {
                tokio::time::sleep(Duration::from_secs(20)).await;
                match far.read(&mut chunk).await {
                    Ok(0) | Err(_) => return taken,
                    Ok(n) => taken.extend_from_slice(&chunk[..n]),
                }
            }
        });
        writes
            .write_all(&[7u8; 24])
            .await
            .expect("every write progresses in time");
        drop(writes);
        assert_eq!(reader.await.expect("reader").len(), 24);
    }
}
