//! Hyper's own answers, in agentd's JSON error shape. A request hyper cannot parse never reaches
//! the router: a request line past hyper's fixed 65,534-byte limit (414), a head past its read
//! buffer (431), a malformed method, path, version or header (400). Hyper answers those itself
//! with an empty body, which no layer can change, and closes the connection. [`JsonParseErrors`]
//! sits between hyper and the socket and replaces exactly those answers, as hyper writes them,
//! with the same status and agentd's `{"error": {…}}` body.
//!
//! Only a write that is, in full, such an answer is replaced: a status line of 400, 414 or 431
//! followed by nothing but `content-length: 0`, `date` and `connection` headers. The router's
//! own error answers always carry a JSON body, so none of them looks like that.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::http::error::ApiError;
use crate::http::layers::MAX_URI_BYTES;

/// Hyper's limit on a request target; past it, hyper answers 414 itself.
const HYPER_MAX_URI_BYTES: usize = 65_534;
/// Hyper's default read buffer: a request head that does not fit is answered 431.
const HYPER_MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;
/// Longer writes are never one of hyper's bodiless answers (a status line and two short
/// headers), so they are passed on unexamined.
const MAX_ANSWER_HEAD_BYTES: usize = 256;

/// A socket whose writes of hyper's bodiless parse-error answers become JSON error answers.
pub struct JsonParseErrors<T> {
    inner: T,
    /// The replacement answer being written, and how much of it is written already.
    replacement: Vec<u8>,
    written: usize,
}

impl<T> JsonParseErrors<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            replacement: Vec::new(),
            written: 0,
        }
    }

    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: AsyncWrite + Unpin> JsonParseErrors<T> {
    /// Writes what is left of a replacement answer; ready once all of it is written.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.replacement.len() {
            let rest = &self.replacement[self.written..];
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, rest))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `head` (all `head.len()` bytes, as far as hyper knows) and writes its
    /// replacement in its place.
    fn replace(&mut self, cx: &mut Context<'_>, head: &[u8], answer: Vec<u8>) -> usize {
        self.replacement = answer;
        self.written = 0;
        // Whatever does not go now goes on hyper's flush, which follows every answer; an error
        // shows there too.
        let _ = self.poll_replacement(cx);
        head.len()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonParseErrors<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_replacement(cx))?;
        if let Some(answer) = json_answer(buf) {
            return Poll::Ready(Ok(self.replace(cx, buf, answer)));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_replacement(cx))?;
        if let Some(first) = bufs.iter().find(|buf| !buf.is_empty())
            && let Some(answer) = json_answer(first)
        {
            return Poll::Ready(Ok(self.replace(cx, first, answer)));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_replacement(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_replacement(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The JSON answer replacing `written`, when `written` is one of hyper's bodiless parse-error
/// answers.
fn json_answer(written: &[u8]) -> Option<Vec<u8>> {
    // Byte checks first: this runs on every write of every connection.
    let status = parse_error_status(written)?;
    let head = std::str::from_utf8(written)
        .ok()?
        .strip_suffix("\r\n\r\n")?;
    let (_status_line, headers) = head.split_once("\r\n")?;
    let mut date = None;
    let mut bodiless = false;
    for line in headers.split("\r\n") {
        let (name, value) = line.split_once(':')?;
        match (name.to_ascii_lowercase().as_str(), value.trim()) {
            ("content-length", "0") => bodiless = true,
            ("date", value) => date = Some(value),
            ("connection", _) => {}
            _ => return None,
        }
    }
    if !bodiless {
        return None;
    }
    let body = error_for(status).body_text();
    let date = date
        .map(|date| format!("date: {date}\r\n"))
        .unwrap_or_default();
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\nx-request-id: {}\r\n{date}\r\n{body}",
        body.len(),
        uuid::Uuid::new_v4(),
    );
    Some(answer.into_bytes())
}

/// The status of `written` when it starts like an answer hyper writes for a request it could
/// not parse (`HTTP/1.x 400 `, `414 ` or `431 `) and is short enough to be a head alone.
fn parse_error_status(written: &[u8]) -> Option<StatusCode> {
    if written.len() > MAX_ANSWER_HEAD_BYTES || !written.starts_with(b"HTTP/1.") {
        return None;
    }
    match written.get(8..13)? {
        b" 400 " => Some(StatusCode::BAD_REQUEST),
        b" 414 " => Some(StatusCode::URI_TOO_LONG),
        b" 431 " => Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
        _ => None,
    }
}

/// What a client is told for each of hyper's refusals.
fn error_for(status: StatusCode) -> ApiError {
    match status {
        StatusCode::URI_TOO_LONG => ApiError::uri_longer_than(HYPER_MAX_URI_BYTES, MAX_URI_BYTES),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => {
            ApiError::request_head_too_large(HYPER_MAX_HEAD_BYTES, MAX_URI_BYTES)
        }
        _ => ApiError::invalid_request(
            "The request is not valid HTTP/1.1: its method, path, version or a header is malformed",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const HYPER_414: &[u8] =
        b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: Tue, 01 Jul 2025 10:00:00 GMT\r\n\r\n";

    async fn through_the_socket(written: &[u8]) -> String {
        let (near, mut far) = tokio::io::duplex(64 * 1024);
        let mut socket = JsonParseErrors::new(near);
        socket.write_all(written).await.expect("written");
        socket.flush().await.expect("flushed");
        drop(socket);
        let mut seen = String::new();
        far.read_to_string(&mut seen).await.expect("read");
        seen
    }

    #[tokio::test]
    async fn hypers_bodiless_414_becomes_the_json_error() {
        let seen = through_the_socket(HYPER_414).await;
        let (head, body) = seen.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert!(
            head.contains("date: Tue, 01 Jul 2025 10:00:00 GMT"),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(body["error"]["code"], "uri_too_long");
    }

    #[tokio::test]
    async fn every_other_write_passes_unchanged() {
        for written in [
            &b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 414 URI Too Long\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
            b"{\"error\": \"HTTP/1.1 414\"}",
        ] {
            let seen = through_the_socket(written).await;
            assert_eq!(seen.as_bytes(), written);
        }
    }
}
