//! Decoding of upstream `text/event-stream` bodies into frames (event name + data).
//!
//! Built on `sse-stream`, whose parser consumes each byte once (no re-scan of a growing buffer),
//! so decoding cost grows linearly with the stream (`bench/sse_decoder.rs` measures it).
//! This module knows nothing about any vendor's JSON; providers interpret `data`.

use futures_util::StreamExt;
use sse_stream::{Sse, SseByteStream};

use super::stream::{ByteStream, ChunkError, Frame, FrameRead};

/// The SSE events of one response body.
pub struct SseReader {
    inner: SseByteStream<ByteStream>,
}

impl SseReader {
    pub fn new(bytes: ByteStream) -> Self {
        Self {
            inner: SseByteStream::new(bytes),
        }
    }

    /// The next event that carries data; comment-only and metadata-only blocks are skipped.
    pub async fn next(&mut self) -> FrameRead {
        loop {
            return match self.inner.next().await {
                None => FrameRead::End,
                Some(Ok(Sse { data: None, .. })) => continue,
                Some(Ok(Sse { event, data, .. })) => FrameRead::Frame(Frame {
                    event,
                    data: data.unwrap_or_default(),
                }),
                Some(Err(sse_stream::Error::Body(source))) => {
                    match source.downcast_ref::<ChunkError>() {
                        Some(ChunkError::Idle(_)) => FrameRead::Idle,
                        Some(too_long @ ChunkError::LineTooLong { .. }) => {
                            FrameRead::TooLarge(too_long.to_string())
                        }
                        _ => FrameRead::Broken(source.to_string()),
                    }
                }
                Some(Err(other)) => FrameRead::Broken(other.to_string()),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::stream::idle_guarded;
    use bytes::Bytes;
    use std::time::Duration;

    fn reader(chunks: Vec<&'static [u8]>) -> SseReader {
        let items = chunks
            .into_iter()
            .map(|c| Ok::<_, String>(Bytes::from_static(c)));
        SseReader::new(idle_guarded(
            futures_util::stream::iter(items),
            Duration::from_secs(5),
        ))
    }

    #[tokio::test]
    async fn events_split_anywhere_are_joined() {
        // "é" is two bytes; the split falls between them.
        let mut r = reader(vec![
            b"event: a\nda",
            b"ta: {\"t\":\"\xc3",
            b"\xa9\"}\n",
            b"\n: comment\n\ndata: x\n\n",
        ]);
        let first = match r.next().await {
            FrameRead::Frame(f) => f,
            other => panic!("{other:?}"),
        };
        assert_eq!(first.event.as_deref(), Some("a"));
        assert_eq!(first.data, "{\"t\":\"é\"}");
        assert!(matches!(r.next().await, FrameRead::Frame(f) if f.data == "x"));
        assert!(matches!(r.next().await, FrameRead::End));
    }
}
