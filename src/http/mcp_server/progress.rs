//! `notifications/progress` for the requests agentd answers itself (the 2026-07-28 `tools/call`
//! and the 2025-11-25 `tasks/result`): the caller's `_meta.progressToken`, and a translator
//! turning a run's events into progress frames on the request's SSE stream. rmcp's own
//! `tools/call` reports through its peer with the same messages ([`progress_message`]).

use serde_json::{Value, json};

use crate::http::shared::drive::{Frame, StreamEnd, Translator};
use crate::vocabulary::{AgentEvent, RunEvent};

/// The progress token a request carries in `params._meta`: a string or an integer, as the
/// protocol allows; anything else asks for no progress.
pub(super) fn progress_token(params: &Value) -> Option<Value> {
    params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned()
}

/// What one run event says to a client following the call, if anything.
pub(super) fn progress_message(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::TurnStarted(turn) if turn.is_retry => {
            Some(format!("turn {} (retry {})", turn.turn, turn.attempt))
        }
        AgentEvent::TurnStarted(turn) => Some(format!("turn {}", turn.turn)),
        AgentEvent::ToolStarted(tool) => Some(format!("calling {}", tool.tool)),
        AgentEvent::ToolFinished(tool) => Some(format!(
            "{} {} in {} ms",
            tool.tool, tool.status, tool.latency_ms
        )),
        AgentEvent::Progress(progress) => {
            let what = progress.kind.in_words();
            Some(match &progress.message {
                Some(message) => format!("{} {what}: {message}", progress.agent),
                None => format!("{} {what}", progress.agent),
            })
        }
        _ => None,
    }
}

/// Progress notifications for one request's token, numbered from 1 (progress only grows).
pub(super) struct Progress {
    token: Value,
    sent: u32,
    /// `_meta` every notification carries (a task's `related-task`), if any.
    meta: Option<Value>,
}

impl Progress {
    pub(super) fn new(token: Value, meta: Option<Value>) -> Self {
        Self {
            token,
            sent: 0,
            meta,
        }
    }

    /// The notification `event` makes, if it says anything.
    pub(super) fn notification(&mut self, event: &AgentEvent) -> Option<Frame> {
        let message = progress_message(event)?;
        self.sent += 1;
        let mut params = json!({
            "progressToken": self.token,
            "progress": self.sent,
            "message": message,
        });
        if let Some(meta) = &self.meta {
            params["_meta"] = meta.clone();
        }
        let notification =
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params});
        Some(Frame::data(notification.to_string()))
    }
}

/// A run's progress as a stream's frames, until it finishes.
pub(super) struct ProgressFrames {
    progress: Progress,
    finished: bool,
}

impl ProgressFrames {
    pub(super) fn new(token: Value) -> Self {
        Self {
            progress: Progress::new(token, None),
            finished: false,
        }
    }
}

impl Translator for ProgressFrames {
    fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        if matches!(event.event, AgentEvent::RunFinished(_)) {
            self.finished = true;
        }
        out.extend(self.progress.notification(&event.event));
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn end(&mut self, _end: StreamEnd, _out: &mut Vec<Frame>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_or_integer_token_is_taken_and_anything_else_asks_for_none() {
        let with = |token: Value| json!({"_meta": {"progressToken": token}});
        assert_eq!(progress_token(&with(json!("p1"))), Some(json!("p1")));
        assert_eq!(progress_token(&with(json!(7))), Some(json!(7)));
        assert_eq!(progress_token(&with(json!(1.5))), None);
        assert_eq!(progress_token(&with(json!({"a": 1}))), None);
        assert_eq!(progress_token(&json!({})), None);
    }
}
