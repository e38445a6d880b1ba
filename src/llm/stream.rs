//! From a response body to [`LlmDelta`]s, shared by every provider: an inactivity timeout that
//! every received chunk resets, framing (SSE events or NDJSON lines), and the loop that feeds
//! frames to a vendor's [`FrameDecoder`] and classifies how the stream ended.
//!
//! Vendor JSON is the decoders' business; this module never looks inside a frame. It bounds the
//! length of a line, so an upstream that never ends one cannot make a framer buffer without end.

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
    #[error(
        "a line of the response passed {} bytes without ending (twice llmResponseMaxBytes of {max_response_bytes} bytes, plus 64 KiB)",
        frame_bound(*.max_response_bytes)
    )]
    LineTooLong { max_response_bytes: usize },
}

/// Room for a frame's own fields (ids, usage, the JSON around the delta) beyond its output.
const FRAME_FIELDS_BYTES: usize = 64 * 1024;

/// The longest body (or streamed line) a response bounded to `max_response_bytes` of output
/// may need: its output escaped as JSON (twice the bytes covers every common escape) plus the
/// frame's own fields. The output itself is held to `max_response_bytes` by the assembler.
pub fn frame_bound(max_response_bytes: usize) -> usize {
    max_response_bytes
        .saturating_mul(2)
        .saturating_add(FRAME_FIELDS_BYTES)
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

/// The body of a reqwest response, idle-guarded and with lines of at most
/// [`frame_bound`]`(max_response_bytes)` bytes; transport errors never name the URL.
pub fn response_bytes(
    response: reqwest::Response,
    idle: Duration,
    max_response_bytes: usize,
) -> ByteStream {
    line_bounded(
        idle_guarded(
            response
                .bytes_stream()
                .map(|r| r.map_err(|e| e.without_url().to_string())),
            idle,
        ),
        max_response_bytes,
    )
}

/// Ends `bytes` with [`ChunkError::LineTooLong`] once a line (up to a CR or LF) passes
/// [`frame_bound`]`(max_response_bytes)` bytes. Each chunk is scanned once.
pub fn line_bounded(bytes: ByteStream, max_response_bytes: usize) -> ByteStream {
    let max_line = frame_bound(max_response_bytes);
    Box::pin(futures_util::stream::unfold(
        Some((bytes, 0usize)),
        move |state| async move {
            let (mut bytes, open_line) = state?;
            let chunk = match bytes.next().await? {
                Ok(chunk) => chunk,
                Err(error) => return Some((Err(error), None)),
            };
            let (longest, open_line) = line_lengths(open_line, &chunk, max_line);
            if longest > max_line {
                return Some((Err(ChunkError::LineTooLong { max_response_bytes }), None));
            }
            Some((Ok(chunk), Some((bytes, open_line))))
        },
    ))
}

/// The longest line `chunk` holds or continues (the line `open_line` bytes long so far
/// included), as far as it matters against `max_line`, and the length of the line still open at
/// its end. Only the ends of the chunk are scanned unless the lines between its first and last
/// line end could pass `max_line` together.
fn line_lengths(open_line: usize, chunk: &[u8], max_line: usize) -> (usize, usize) {
    let is_end = |b: &u8| matches!(b, b'\n' | b'\r');
    let Some(first) = chunk.iter().position(is_end) else {
        let open = open_line.saturating_add(chunk.len());
        return (open, open);
    };
    let last = chunk.iter().rposition(is_end).unwrap_or(first);
    let open = chunk.len() - last - 1;
    let inner = &chunk[first + 1..last.max(first + 1)];
    let longest_inner = if inner.len() > max_line {
        inner.split(is_end).map(<[u8]>::len).max().unwrap_or(0)
    } else {
        0
    };
    let longest = open_line.saturating_add(first).max(longest_inner).max(open);
    (longest, open)
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
    /// A line passed the bound on its length.
    TooLarge(String),
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
            FrameRead::TooLarge(detail) => LlmError::TooLarge(detail),
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

    #[test]
    fn line_lengths_carry_the_open_line_and_look_inside_only_when_it_matters() {
        assert_eq!(line_lengths(0, b"abc", 10), (3, 3));
        assert_eq!(line_lengths(5, b"ab\ncd", 10), (7, 2));
        assert_eq!(line_lengths(0, b"abc\n", 10), (3, 0));
        assert_eq!(line_lengths(0, b"a\r\nbbbbbbbbbbbb\nc", 5), (12, 1));
        assert_eq!(
            line_lengths(0, b"a\nbb\ncc\nd", 5),
            (1, 1),
            "inner lines shorter than the bound are not measured"
        );
    }

    fn chunk_of(length: usize) -> Bytes {
        Bytes::from(vec![b'x'; length])
    }

    #[tokio::test]
    async fn lines_up_to_the_bound_pass_and_a_longer_one_ends_the_body() {
        // A bound of 1 byte of output allows lines of 2 + 64 KiB bytes.
        let bound = frame_bound(1);
        let half = Bytes::from(vec![b'x'; bound / 2]);
        let rest = chunk_of(bound - bound / 2);
        let within: Vec<Result<Bytes, ChunkError>> = vec![
            Ok(half.clone()),
            Ok(rest.clone()),
            Ok(Bytes::from_static(b"\r\n")),
            Ok(chunk_of(bound)),
            Ok(Bytes::from_static(b"\r")),
            Ok(chunk_of(bound)),
        ];
        let mut within = line_bounded(Box::pin(futures_util::stream::iter(within)), 1);
        while let Some(chunk) = within.next().await {
            chunk.expect("no line passes the bound");
        }
        let mut inside = b"ok\n".to_vec();
        inside.extend(vec![b'x'; bound + 1]);
        inside.extend_from_slice(b"\nok");
        let inside: Vec<Result<Bytes, ChunkError>> = vec![Ok(Bytes::from(inside))];
        let mut inside = line_bounded(Box::pin(futures_util::stream::iter(inside)), 1);
        assert!(
            matches!(
                inside.next().await,
                Some(Err(ChunkError::LineTooLong { .. }))
            ),
            "a long line between two others in one chunk"
        );
        let past: Vec<Result<Bytes, ChunkError>> =
            vec![Ok(half), Ok(rest), Ok(chunk_of(1)), Ok(chunk_of(1))];
        let mut past = line_bounded(Box::pin(futures_util::stream::iter(past)), 1);
        assert!(matches!(past.next().await, Some(Ok(_))));
        assert!(
            matches!(past.next().await, Some(Ok(_))),
            "exactly the bound"
        );
        let error = past.next().await;
        assert!(
            matches!(&error, Some(Err(e @ ChunkError::LineTooLong { .. }))
                if e.to_string().contains("llmResponseMaxBytes of 1 bytes")),
            "one byte more: {error:?}"
        );
        assert!(past.next().await.is_none(), "the body ends there");
    }
}
