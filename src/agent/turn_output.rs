//! What clients already have of a turn's streamed answer, so an attempt retried after a stream
//! broke off does not send it twice (`echo: echo: hello`): while the retry repeats what was
//! streamed, nothing is sent; once it goes past it, only the new text is. When the retry says
//! something else, the text streamed so far cannot be taken back: the retry's text is sent as a
//! replacement (`replace: true` on the `output` event; headends that cannot replace text show it
//! after a blank line).

/// The text of this turn the clients have, across its attempts.
#[derive(Debug, Default)]
pub(super) struct TurnOutput {
    sent: String,
}

/// One attempt's text as it streams, checked against what the turn already sent. Each piece
/// costs its own length, whatever the length of the answer so far.
#[derive(Debug)]
pub(super) struct AttemptOutput<'a> {
    turn: &'a mut TurnOutput,
    /// The attempt's text so far (for a replacement).
    produced: String,
    /// How much of the turn's sent text this attempt has repeated so far.
    matched: usize,
    diverged: bool,
}

/// What to send for a piece of an attempt's text.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum OutputPiece {
    /// New text after what clients have.
    Append(String),
    /// The attempt's whole text so far, in place of what clients have of this turn.
    Replace(String),
}

impl TurnOutput {
    pub fn attempt(&mut self) -> AttemptOutput<'_> {
        AttemptOutput {
            turn: self,
            produced: String::new(),
            matched: 0,
            diverged: false,
        }
    }
}

impl AttemptOutput<'_> {
    /// What of `text` (the attempt's next piece) clients do not have yet.
    pub fn admit(&mut self, text: &str) -> Option<OutputPiece> {
        if text.is_empty() {
            return None;
        }
        self.produced.push_str(text);
        let sent = &mut self.turn.sent;
        if self.diverged {
            sent.push_str(text);
            return Some(OutputPiece::Append(text.to_string()));
        }
        // The part of `text` that falls inside what an earlier attempt streamed.
        let overlap = text.len().min(sent.len() - self.matched);
        let repeated =
            sent.as_bytes()[self.matched..self.matched + overlap] == text.as_bytes()[..overlap];
        // Equal bytes of valid UTF-8 end on a character boundary, so `get` always succeeds.
        let Some(new) = text.get(overlap..).filter(|_| repeated) else {
            self.diverged = true;
            sent.clone_from(&self.produced);
            return Some(OutputPiece::Replace(self.produced.clone()));
        };
        self.matched += overlap;
        if new.is_empty() {
            return None;
        }
        sent.push_str(new);
        self.matched += new.len();
        Some(OutputPiece::Append(new.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(attempt: &mut AttemptOutput<'_>, pieces: &[&str]) -> Vec<OutputPiece> {
        pieces.iter().filter_map(|p| attempt.admit(p)).collect()
    }

    #[test]
    fn a_first_attempt_streams_everything() {
        let mut turn = TurnOutput::default();
        let mut attempt = turn.attempt();
        assert_eq!(
            send(&mut attempt, &["echo", ": ", "", "hi"]),
            [
                OutputPiece::Append("echo".into()),
                OutputPiece::Append(": ".into()),
                OutputPiece::Append("hi".into())
            ]
        );
    }

    #[test]
    fn a_retry_repeating_what_was_streamed_sends_only_what_is_new() {
        let mut turn = TurnOutput::default();
        send(&mut turn.attempt(), &["echo", ": ", "hel"]);
        let mut retry = turn.attempt();
        let sent = send(&mut retry, &["ec", "ho: h", "ello ✓", " world"]);
        assert_eq!(
            sent,
            [
                OutputPiece::Append("lo ✓".into()),
                OutputPiece::Append(" world".into())
            ]
        );
        assert_eq!(turn.sent, "echo: hello ✓ world");
    }

    #[test]
    fn a_retry_that_says_something_else_replaces_the_turns_text() {
        let mut turn = TurnOutput::default();
        send(&mut turn.attempt(), &["The answer is 4"]);
        let mut retry = turn.attempt();
        let sent = send(&mut retry, &["The ans", "wer: 42", "!"]);
        assert_eq!(
            sent,
            [
                OutputPiece::Replace("The answer: 42".into()),
                OutputPiece::Append("!".into())
            ]
        );
        assert_eq!(turn.sent, "The answer: 42!");
    }

    #[test]
    fn a_long_answer_in_small_pieces_costs_its_length() {
        let mut turn = TurnOutput::default();
        let mut attempt = turn.attempt();
        let piece = "word ";
        for _ in 0..200_000 {
            assert!(attempt.admit(piece).is_some());
        }
        assert_eq!(turn.sent.len(), 200_000 * piece.len());
    }

    #[test]
    fn a_shorter_retry_that_stops_inside_what_was_sent_sends_nothing() {
        let mut turn = TurnOutput::default();
        send(&mut turn.attempt(), &["hello world"]);
        assert!(send(&mut turn.attempt(), &["hello"]).is_empty());
    }
}
