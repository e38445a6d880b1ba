//! From a response body to [`LlmDelta`]s, shared by every provider: an inactivity timeout that
//! every received chunk resets, framing (SSE events or NDJSON lines), and the loop that feeds
//! frames to a vendor's [`FrameDecoder`] and classifies how the stream ended.
//!
//! Vendor JSON is the decoders' business; this module never looks inside a frame.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use super::failure::Secrets;
use super::ndjson::LineReader;
use super::sse::SseReader;
use super::{DeltaStream, LlmDelta, LlmError};

/// Why the body stopped yielding bytes before its end.
#[derive(Debug, thiserror::Error)]
pub enum ChunkError {
    #[error("no data from the upstream for {} ms", .0.as_millis())]
    Idle(Duration),
    #[error("{0}")]
    Transport(String),
}

/// A response body as chunks, each read with the inactivity timeout.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, ChunkError>> + Send>>;

/// Wraps a body so that waiting longer than `idle` for the next chunk ends it with
/// [`ChunkError::Idle`]. Every chunk restarts the wait, so a slow but live stream never times out.
pub fn idle_guarded<S, E>(body: S, idle: Duration) -> ByteStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::fmt::Display,
{
    let body = Box::pin(body);
    Box::pin(futures_util::stream::unfold(
        Some(body),
        move |body| async move {
            let mut body = body?;
            match tokio::time::timeout(idle, body.next()).await {
                Err(_) => Some((Err(ChunkError::Idle(idle)), None)),
                Ok(None) => None,
                Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some(body))),
                Ok(Some(Err(e))) => Some((Err(ChunkError::Transport(e.to_string())), None)),
            }
        },
    ))
}

/// The body of a reqwest response, idle-guarded; transport errors never name the URL.
pub fn response_bytes(response: reqwest::Response, idle: Duration) -> ByteStream {
    idle_guarded(
        response
            .bytes_stream()
            .map(|r| r.map_err(|e| e.without_url().to_string())),
        idle,
    )
}

/// One unit of a streamed body: an SSE event (`event` and `data`) or one NDJSON line (`data`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frame {
    pub event: Option<String>,
    pub data: String,
}

/// What reading the next frame produced.
#[derive(Debug)]
pub enum FrameRead {
    Frame(Frame),
    /// The body ended cleanly.
    End,
    /// No bytes arrived within the inactivity timeout.
    Idle,
    /// The connection broke or the framing was invalid.
    Broken(String),
}

/// How a body is cut into frames.
pub enum Frames {
    Sse(SseReader),
    Lines(LineReader),
}

impl Frames {
    pub fn sse(bytes: ByteStream) -> Self {
        Self::Sse(SseReader::new(bytes))
    }

    pub fn lines(bytes: ByteStream) -> Self {
        Self::Lines(LineReader::new(bytes))
    }

    pub async fn next(&mut self) -> FrameRead {
        match self {
            Self::Sse(reader) => reader.next().await,
            Self::Lines(reader) => reader.next().await,
        }
    }
}

/// Whether to keep reading after a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The response is complete (`[DONE]`, `message_stop`, `done: true`).
    Done,
}

/// A vendor's stream format: frames in, deltas out.
pub trait FrameDecoder: Send + 'static {
    fn decode(&mut self, frame: &Frame, out: &mut VecDeque<LlmDelta>) -> Result<Flow, LlmError>;

    /// Deltas still held back when the response completes (e.g. usage reported in pieces).
    fn finish(&mut self, _out: &mut VecDeque<LlmDelta>) {}

    /// Whether a body that ends now (without its end marker) still holds a whole response.
    fn is_complete(&self) -> bool;
}

struct DecodeState<D> {
    frames: Frames,
    decoder: D,
    pending: VecDeque<LlmDelta>,
    done: bool,
    secrets: Arc<Secrets>,
}

/// Runs `decoder` over `frames` until the response completes or fails. A body that stops early
/// is a retryable [`LlmError::Network`]; silence past the inactivity timeout is
/// [`LlmError::Timeout`]. Error messages are redacted with `secrets`.
pub fn decode_frames<D: FrameDecoder>(
    frames: Frames,
    decoder: D,
    secrets: Arc<Secrets>,
) -> DeltaStream {
    let state = DecodeState {
        frames,
        decoder,
        pending: VecDeque::new(),
        done: false,
        secrets,
    };
    Box::pin(futures_util::stream::unfold(state, next_delta))
}

async fn next_delta<D: FrameDecoder>(
    mut state: DecodeState<D>,
) -> Option<(Result<LlmDelta, LlmError>, DecodeState<D>)> {
    loop {
        if let Some(delta) = state.pending.pop_front() {
            return Some((Ok(delta), state));
        }
        if state.done {
            return None;
        }
        let failure = match state.frames.next().await {
            FrameRead::Frame(frame) => match state.decoder.decode(&frame, &mut state.pending) {
                Ok(Flow::Continue) => continue,
                Ok(Flow::Done) => {
                    state.done = true;
                    state.decoder.finish(&mut state.pending);
                    continue;
                }
                Err(e) => e,
            },
            FrameRead::End if state.decoder.is_complete() => {
                state.done = true;
                state.decoder.finish(&mut state.pending);
                continue;
            }
            FrameRead::End => {
                LlmError::Network("stream ended before the response was complete".into())
            }
            FrameRead::Idle => {
                LlmError::Timeout("no data from the upstream within the inactivity timeout".into())
            }
            FrameRead::Broken(detail) => LlmError::Network(format!("stream broke: {detail}")),
        };
        state.done = true;
        state.pending.clear();
        let failure = state.secrets.redact_error(failure);
        return Some((Err(failure), state));
    }
}

/// Parses a frame's data as JSON, or names the frame as malformed.
pub fn frame_json(data: &str) -> Result<serde_json::Value, LlmError> {
    serde_json::from_str(data).map_err(|e| {
        LlmError::InvalidResponse(format!(
            "stream frame is not JSON ({e}): {}",
            super::failure::truncate(data, 200)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn every_chunk_resets_the_inactivity_timeout() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, String>>(4);
        let mut guarded = idle_guarded(
            tokio_stream::wrappers::ReceiverStream::new(rx),
            Duration::from_secs(10),
        );
        let feeder = tokio::spawn(async move {
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_secs(9)).await;
                let _ = tx.send(Ok(Bytes::from_static(b"x"))).await;
            }
            tokio::time::sleep(Duration::from_secs(11)).await;
            drop(tx);
        });
        for _ in 0..3 {
            assert!(matches!(guarded.next().await, Some(Ok(_))));
        }
        assert!(matches!(
            guarded.next().await,
            Some(Err(ChunkError::Idle(_)))
        ));
        assert!(guarded.next().await.is_none());
        feeder.abort();
    }
}
