//! Decoding of upstream `text/event-stream` bodies into SSE events, with an inactivity timeout.
//!
//! Built on `sse-stream` (linear-time parsing, unlike a re-parse of the whole buffer per chunk).
//! This module knows nothing about any vendor's JSON; providers interpret `data`.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use sse_stream::{Sse, SseByteStream};

/// What reading the next event produced.
#[derive(Debug)]
pub enum SseRead {
    Event(Sse),
    /// The body ended cleanly.
    End,
    /// No bytes arrived within the inactivity timeout.
    Idle,
    /// The connection broke or the framing was invalid.
    Broken(String),
}

/// Upstream events of one response, read with a timeout that every event resets.
pub struct UpstreamEvents {
    inner: std::pin::Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>,
    idle_timeout: Duration,
}

impl UpstreamEvents {
    pub fn new(response: reqwest::Response, idle_timeout: Duration) -> Self {
        Self {
            inner: Box::pin(SseByteStream::new(response.bytes_stream())),
            idle_timeout,
        }
    }

    pub async fn next(&mut self) -> SseRead {
        match tokio::time::timeout(self.idle_timeout, self.inner.next()).await {
            Err(_) => SseRead::Idle,
            Ok(None) => SseRead::End,
            Ok(Some(Ok(event))) => SseRead::Event(event),
            Ok(Some(Err(e))) => SseRead::Broken(e.to_string()),
        }
    }
}
