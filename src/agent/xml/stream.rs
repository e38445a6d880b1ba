//! Streams the inside of the final tag to clients as it arrives: text outside matched tags is not
//! the answer and is held back. Chunk boundaries may fall anywhere, even inside a tag, so a tail
//! that could begin a tag is kept until the next chunk decides it.

/// Filters text deltas down to the payload of `<ai-agent-NONCE-FINAL …>…</ai-agent-NONCE-FINAL>`.
#[derive(Debug)]
pub struct FinalTagStream {
    opening: String,
    closing: String,
    state: State,
    buffer: String,
    streamed_any: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Outside,
    /// Inside `<ai-agent-NONCE-FINAL`, before its `>`.
    InOpening,
    /// In the payload, before any non-whitespace character.
    PayloadStart,
    Inside,
}

impl FinalTagStream {
    pub fn new(nonce: &str) -> Self {
        Self {
            opening: format!("<ai-agent-{nonce}-FINAL"),
            closing: format!("</ai-agent-{nonce}-FINAL>"),
            state: State::Outside,
            buffer: String::new(),
            streamed_any: false,
        }
    }

    /// Whether any payload text has been emitted.
    pub fn streamed_any(&self) -> bool {
        self.streamed_any
    }

    /// Feeds one delta; returns the payload text it completes (possibly empty).
    pub fn push(&mut self, delta: &str) -> String {
        self.buffer.push_str(delta);
        let mut out = String::new();
        loop {
            let progressed = match self.state {
                State::Outside => self.skip_to_opening(),
                State::InOpening => self.skip_opening_header(),
                State::PayloadStart => self.skip_leading_whitespace(),
                State::Inside => self.take_payload(&mut out),
            };
            if !progressed {
                break;
            }
        }
        if !out.is_empty() {
            self.streamed_any = true;
        }
        out
    }

    /// The end of the stream: an unclosed tag's held-back tail is payload too.
    pub fn finish(&mut self) -> String {
        let out = if self.state == State::Inside {
            std::mem::take(&mut self.buffer)
        } else {
            String::new()
        };
        self.buffer.clear();
        if !out.is_empty() {
            self.streamed_any = true;
        }
        out
    }

    fn skip_to_opening(&mut self) -> bool {
        if let Some(at) = self.buffer.find(&self.opening) {
            self.buffer.drain(..at + self.opening.len());
            self.state = State::InOpening;
            return true;
        }
        let keep = longest_prefix_suffix(&self.buffer, &self.opening);
        let cut = self.buffer.len() - keep;
        self.buffer.drain(..cut);
        false
    }

    fn skip_opening_header(&mut self) -> bool {
        match self.buffer.find('>') {
            Some(at) => {
                self.buffer.drain(..=at);
                self.state = State::PayloadStart;
                true
            }
            None => false,
        }
    }

    fn skip_leading_whitespace(&mut self) -> bool {
        let trimmed = self.buffer.trim_start().len();
        let cut = self.buffer.len() - trimmed;
        self.buffer.drain(..cut);
        if self.buffer.is_empty() {
            return false;
        }
        self.state = State::Inside;
        true
    }

    fn take_payload(&mut self, out: &mut String) -> bool {
        if let Some(at) = self.buffer.find(&self.closing) {
            out.push_str(&self.buffer[..at]);
            self.buffer.drain(..at + self.closing.len());
            self.state = State::Outside;
            return true;
        }
        let keep = longest_prefix_suffix(&self.buffer, &self.closing);
        let cut = self.buffer.len() - keep;
        out.push_str(&self.buffer[..cut]);
        self.buffer.drain(..cut);
        false
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `pattern`.
fn longest_prefix_suffix(text: &str, pattern: &str) -> usize {
    let max = text.len().min(pattern.len().saturating_sub(1));
    (1..=max)
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n)
                && pattern
                    .as_bytes()
                    .starts_with(&text.as_bytes()[text.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_all(chunks: &[&str]) -> String {
        let mut filter = FinalTagStream::new("0a1b2c3d");
        let mut out: String = chunks.iter().map(|c| filter.push(c)).collect();
        out.push_str(&filter.finish());
        out
    }

    #[test]
    fn only_the_final_payload_is_streamed() {
        let text = "thinking aloud <ai-agent-0a1b2c3d-FINAL format=\"markdown\">\n# Title\nbody</ai-agent-0a1b2c3d-FINAL> after";
        assert_eq!(stream_all(&[text]), "# Title\nbody");
    }

    #[test]
    fn tags_split_across_every_possible_chunk_boundary_still_match() {
        let text = "pre <ai-agent-0a1b2c3d-FINAL format=\"text\">héllo wörld</ai-agent-0a1b2c3d-FINAL> post";
        let chars: Vec<char> = text.chars().collect();
        for split in 1..chars.len() {
            let (a, b) = chars.split_at(split);
            let (a, b): (String, String) = (a.iter().collect(), b.iter().collect());
            assert_eq!(stream_all(&[&a, &b]), "héllo wörld", "split at {split}");
        }
        let singles: Vec<String> = chars.iter().map(|c| c.to_string()).collect();
        let singles: Vec<&str> = singles.iter().map(String::as_str).collect();
        assert_eq!(stream_all(&singles), "héllo wörld");
    }

    #[test]
    fn an_unclosed_tag_streams_to_the_end() {
        assert_eq!(
            stream_all(&["<ai-agent-0a1b2c3d-FINAL>partial answer </ai-agent-0a1b"]),
            "partial answer </ai-agent-0a1b"
        );
    }

    #[test]
    fn text_without_a_tag_streams_nothing() {
        let mut filter = FinalTagStream::new("0a1b2c3d");
        assert_eq!(filter.push("just talking <ai-agent-"), "");
        assert_eq!(filter.finish(), "");
        assert!(!filter.streamed_any());
    }
}
