//! Decoding of newline-delimited JSON bodies (Ollama's `/api/chat` stream) into frames, one per
//! non-blank line. Each byte is scanned once, so cost grows linearly with the stream.

use futures_util::StreamExt;

use super::stream::{ByteStream, ChunkError, Frame, FrameRead};

pub struct LineReader {
    bytes: ByteStream,
    buffer: Vec<u8>,
    /// Start of the first line not yet returned.
    start: usize,
    /// Bytes of `buffer` before this index are known to hold no newline after `start`.
    scanned: usize,
    ended: bool,
}

impl LineReader {
    pub fn new(bytes: ByteStream) -> Self {
        Self {
            bytes,
            buffer: Vec::new(),
            start: 0,
            scanned: 0,
            ended: false,
        }
    }

    pub async fn next(&mut self) -> FrameRead {
        loop {
            if let Some(line) = self.take_line() {
                match line {
                    Ok(text) if text.trim().is_empty() => continue,
                    Ok(text) => {
                        return FrameRead::Frame(Frame {
                            event: None,
                            data: text,
                        });
                    }
                    Err(detail) => return FrameRead::Broken(detail),
                }
            }
            if self.ended {
                return FrameRead::End;
            }
            match self.bytes.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                Some(Err(ChunkError::Idle(_))) => return FrameRead::Idle,
                Some(Err(too_long @ ChunkError::LineTooLong { .. })) => {
                    return FrameRead::TooLarge(too_long.to_string());
                }
                Some(Err(error)) => return FrameRead::Broken(error.to_string()),
                // A last line without its newline still counts.
                None => {
                    self.ended = true;
                    if self.buffer.len() > self.start {
                        self.buffer.push(b'\n');
                    }
                }
            }
        }
    }

    /// The next complete line, if the buffer holds one. Lines are sliced out by offset and the
    /// buffer is compacted only when more bytes are needed, so no byte is copied twice.
    fn take_line(&mut self) -> Option<Result<String, String>> {
        let found = self.buffer[self.scanned..].iter().position(|b| *b == b'\n');
        let Some(offset) = found else {
            self.buffer.drain(..self.start);
            self.start = 0;
            self.scanned = self.buffer.len();
            return None;
        };
        let end = self.scanned + offset;
        let line = &self.buffer[self.start..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = std::str::from_utf8(line)
            .map(str::to_string)
            .map_err(|e| format!("line is not UTF-8: {e}"));
        self.start = end + 1;
        self.scanned = self.start;
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::stream::idle_guarded;
    use bytes::Bytes;
    use std::time::Duration;

    #[tokio::test]
    async fn lines_split_anywhere_are_joined_and_blank_lines_skipped() {
        let chunks: Vec<&'static [u8]> =
            vec![b"{\"a\":\"\xc3", b"\xa9\"}\n\n{\"b\"", b":2}\r\n{\"c\":3}"];
        let items = chunks
            .into_iter()
            .map(|c| Ok::<_, String>(Bytes::from_static(c)));
        let mut r = LineReader::new(idle_guarded(
            futures_util::stream::iter(items),
            Duration::from_secs(5),
        ));
        let mut lines = Vec::new();
        loop {
            match r.next().await {
                FrameRead::Frame(f) => lines.push(f.data),
                FrameRead::End => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(lines, ["{\"a\":\"é\"}", "{\"b\":2}", "{\"c\":3}"]);
    }
}
