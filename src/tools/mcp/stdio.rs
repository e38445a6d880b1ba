//! The transport of a stdio MCP server: its stdin and stdout as JSON-RPC lines, with the child
//! process it owns. A server that writes a line longer than [`MAX_LINE_BYTES`] breaks the
//! protocol: its stdout is read no further and the transport ends, so the connection closes, the
//! process group is killed and the supervisor starts a fresh server. (rmcp's own transport
//! would drop such a line and keep reading, and a server flooding its stdout would keep agentd
//! busy reading and dropping for as long as it lives.)
//!
//! Closing follows the MCP stdio shutdown: stdin is closed, then SIGTERM, then SIGKILL, each
//! after [`EXIT_WAIT`]; a server that broke the line limit is killed at once.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{AsyncRwTransport, DEFAULT_MAX_LINE_LENGTH};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

/// The longest line (one JSON-RPC message) a server may write: rmcp's default, which matches
/// its limit on one streamable HTTP event.
pub(crate) const MAX_LINE_BYTES: usize = DEFAULT_MAX_LINE_LENGTH;
/// How long a closing server gets after stdin closes, and again after SIGTERM.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// A stdio server's transport and process.
pub(crate) struct ChildTransport {
    transport: AsyncRwTransport<RoleClient, LineLimited<ChildStdout>, ChildStdin>,
    /// Taken when the server has been shut down.
    child: Option<Box<dyn ChildWrapper>>,
    /// Set when the server wrote a line past the limit.
    broke_line_limit: Arc<AtomicBool>,
}

impl ChildTransport {
    /// Spawns `command` with piped stdin, stdout and stderr; returns the transport, the stderr
    /// to forward and the process id (the process group's, when `command` makes one).
    pub(crate) fn spawn(
        mut command: CommandWrap,
    ) -> io::Result<(Self, Option<ChildStderr>, Option<u32>)> {
        command
            .command_mut()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
            return Err(io::Error::other(
                "the server's stdin or stdout is not piped",
            ));
        };
        let stderr = child.stderr().take();
        let id = child.id();
        let broke_line_limit = Arc::new(AtomicBool::new(false));
        let stdout = LineLimited {
            inner: stdout,
            open_line: 0,
            max_line: MAX_LINE_BYTES,
            broke: Arc::clone(&broke_line_limit),
        };
        // The limit is ours (the stdout reader's); rmcp's own stays as a backstop only.
        let transport =
            AsyncRwTransport::new(stdout, stdin).with_max_line_length(MAX_LINE_BYTES * 2);
        let transport = Self {
            transport,
            child: Some(child),
            broke_line_limit,
        };
        Ok((transport, stderr, id))
    }

    /// Closes stdin and waits for the server to exit, then SIGTERM, then SIGKILL; a server that
    /// broke the line limit is killed at once.
    async fn shut_down(&mut self) -> io::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let closed = self.transport.close().await;
        if !self.broke_line_limit.load(Ordering::Relaxed) {
            if exited_within(&mut child, EXIT_WAIT).await {
                return closed;
            }
            #[cfg(unix)]
            if child
                .signal(nix::sys::signal::Signal::SIGTERM as i32)
                .is_ok()
                && exited_within(&mut child, EXIT_WAIT).await
            {
                return closed;
            }
        }
        Box::into_pin(child.kill()).await?;
        closed
    }
}

async fn exited_within(child: &mut Box<dyn ChildWrapper>, wait: Duration) -> bool {
    matches!(tokio::time::timeout(wait, child.wait()).await, Ok(Ok(_)))
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Killed and reaped in the background; without a runtime, killed only.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let _ = Box::into_pin(child.kill()).await;
                });
            }
            Err(_) => {
                let _ = child.start_kill();
            }
        }
    }
}

/// A reader that fails once a line (bytes after the last newline) passes `max_line`, and
/// stays failed: the rest of that output is never read.
struct LineLimited<R> {
    inner: R,
    open_line: usize,
    max_line: usize,
    broke: Arc<AtomicBool>,
}

impl<R: AsyncRead + Unpin> AsyncRead for LineLimited<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.broke.load(Ordering::Relaxed) {
            return Poll::Ready(Err(line_too_long(this.max_line)));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let mut lines = buf.filled()[before..].split(|b| *b == b'\n');
        let mut open = this
            .open_line
            .saturating_add(lines.next().map_or(0, <[u8]>::len));
        let mut longest = open;
        for line in lines {
            longest = longest.max(line.len());
            open = line.len();
        }
        this.open_line = open;
        if longest > this.max_line {
            // A failed read hands over no bytes.
            buf.set_filled(before);
            this.broke.store(true, Ordering::Relaxed);
            tracing::warn!(
                max_line_bytes = this.max_line,
                "an MCP server wrote a line past the limit: it is stopped and restarted"
            );
            return Poll::Ready(Err(line_too_long(this.max_line)));
        }
        Poll::Ready(Ok(()))
    }
}

fn line_too_long(max_line: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the server wrote a line longer than {max_line} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn limited(bytes: &'static [u8], max_line: usize) -> LineLimited<&'static [u8]> {
        LineLimited {
            inner: bytes,
            open_line: 0,
            max_line,
            broke: Arc::new(AtomicBool::new(false)),
        }
    }

    #[tokio::test]
    async fn lines_up_to_the_limit_are_read_and_a_longer_one_fails_for_good() {
        let mut text = String::new();
        limited(b"abcd\nabcd\nab", 4)
            .read_to_string(&mut text)
            .await
            .expect("no line passes 4 bytes");
        assert_eq!(text, "abcd\nabcd\nab");

        let mut past = limited(b"abcd\nabcde\nmore", 4); // one read: the long line is inside
        let mut rest = Vec::new();
        let error = past.read_to_end(&mut rest).await.expect_err("5 bytes");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(past.broke.load(Ordering::Relaxed));
        let mut again = [0u8; 4];
        assert!(past.read(&mut again).await.is_err(), "it stays failed");
    }
}
