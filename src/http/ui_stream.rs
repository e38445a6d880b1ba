//! The event→part logic shared by the UI protocols (AG-UI, the AI SDK UI message stream): a run's
//! events (SPEC §4.2), live or replayed from the store, become [`UiPart`]s — messages that open,
//! grow and close, steps, tool calls with their results, approvals, and the run's end. Each
//! protocol only renders these parts as its own frames; none of them reads run events itself.
//!
//! The translator works on an event's type and JSON data, the form both a live
//! [`AgentEvent`](crate::agent::AgentEvent) and a stored event have, so a resumed stream goes
//! through the same code as a live one. It never fails: an event it cannot read is skipped.

use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use serde_json::Value;

use crate::agent::AgentEvent;
use crate::config::OnDisconnect;
use crate::llm::ToolCall;
use crate::runtime::{FollowError, FollowedEvent, RunHandle, Runtime};
use tokio_util::sync::DropGuard;

/// One thing a UI protocol shows, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum UiPart {
    RunStarted {
        run_id: String,
        conversation_id: Option<String>,
    },
    StepStarted {
        step: u64,
    },
    StepFinished {
        step: u64,
    },
    TextStart {
        id: String,
    },
    TextDelta {
        id: String,
        delta: String,
    },
    TextEnd {
        id: String,
    },
    ReasoningStart {
        id: String,
    },
    ReasoningDelta {
        id: String,
        delta: String,
    },
    ReasoningEnd {
        id: String,
    },
    /// An agent tool call, whole (agentd executes it; its arguments are known at once).
    ToolCall {
        call_id: String,
        tool: String,
        arguments: Value,
        /// The assistant text message the call follows, when one is open.
        parent_message_id: Option<String>,
    },
    ToolResult {
        call_id: String,
        output: String,
        /// Set when the tool failed.
        error: Option<String>,
    },
    ApprovalRequested {
        call_id: String,
        tool: String,
        arguments: Value,
        expires_at: Option<String>,
    },
    ApprovalDecided {
        call_id: String,
        decision: String,
    },
    /// Sub-agent progress, as the run event carries it.
    Progress(Value),
    Finished(RunEnd),
}

/// How a run ended, or paused for approvals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunEnd {
    /// `completed`, `failed`, `cancelled`, or `waiting_approval` for a stream that ended with
    /// approvals pending.
    pub status: String,
    pub exit_reason: String,
    /// What went wrong, in words, for a failed run.
    pub error: Option<String>,
    /// The final answer's text, when there is one.
    pub answer: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cost_usd: f64,
    /// Tool calls still waiting for a decision.
    pub pending_approvals: Vec<PendingApproval>,
}

impl RunEnd {
    pub fn is_failure(&self) -> bool {
        self.status == "failed"
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PendingApproval {
    /// agentd's run that waits.
    pub run_id: String,
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub expires_at: Option<String>,
}

/// Which kind of message is open.
#[derive(Debug, Clone, Copy, PartialEq)]
enum OpenBlock {
    Text,
    Reasoning,
}

/// Turns one run's events into [`UiPart`]s, keeping which message and step are open.
#[derive(Debug, Default)]
pub struct UiTranslator {
    run_id: String,
    open: Option<(OpenBlock, String)>,
    step: Option<u64>,
    blocks: u64,
    last_error: Option<String>,
    answer: Option<String>,
    pending: Vec<PendingApproval>,
    finished: bool,
}

impl UiTranslator {
    pub fn new(run_id: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            ..Self::default()
        }
    }

    /// Whether the run's end was translated.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The parts one event (its SPEC §4.2 type and data) becomes.
    pub fn translate(&mut self, kind: &str, data: &Value) -> Vec<UiPart> {
        let mut parts = Vec::new();
        if self.finished {
            return parts;
        }
        match kind {
            "run.started" => self.run_started(data, &mut parts),
            "turn.started" => self.turn_started(data, &mut parts),
            "output" => self.delta(OpenBlock::Text, data, &mut parts),
            "thinking" => self.delta(OpenBlock::Reasoning, data, &mut parts),
            "progress" => parts.push(UiPart::Progress(data.clone())),
            "tool.started" => self.tool_started(data, &mut parts),
            "tool.finished" => self.tool_finished(data, &mut parts),
            "tool.approval_requested" => self.approval_requested(data, &mut parts),
            "tool.approval_decided" => self.approval_decided(data, &mut parts),
            "final_report" => self.answer = text(data, "content"),
            "error" => self.last_error = text(data, "message"),
            "run.finished" => self.run_finished(data, &mut parts),
            _ => {}
        }
        parts
    }

    /// The parts that close a stream that ended without `run.finished`: a run waiting for
    /// approvals (its stream pauses there), or one whose events stopped.
    pub fn end_of_stream(&mut self) -> Vec<UiPart> {
        let mut parts = Vec::new();
        if self.finished {
            return parts;
        }
        self.close_step(&mut parts);
        let end = if self.pending.is_empty() {
            RunEnd {
                status: "failed".into(),
                exit_reason: "internal_error".into(),
                error: Some(
                    self.last_error
                        .clone()
                        .unwrap_or_else(|| "The run's events stopped before it finished".into()),
                ),
                ..RunEnd::default()
            }
        } else {
            RunEnd {
                status: "waiting_approval".into(),
                exit_reason: "waiting_approval".into(),
                pending_approvals: self.pending.clone(),
                ..RunEnd::default()
            }
        };
        self.finished = true;
        parts.push(UiPart::Finished(end));
        parts
    }

    fn run_started(&mut self, data: &Value, parts: &mut Vec<UiPart>) {
        if let Some(run_id) = text(data, "run_id") {
            self.run_id = run_id;
        }
        parts.push(UiPart::RunStarted {
            run_id: self.run_id.clone(),
            conversation_id: text(data, "conversation_id"),
        });
    }

    fn turn_started(&mut self, data: &Value, parts: &mut Vec<UiPart>) {
        let step = data.get("turn").and_then(Value::as_u64).unwrap_or(1);
        if self.step == Some(step) {
            // A retried attempt of the same turn stays in its step.
            return;
        }
        self.close_step(parts);
        self.step = Some(step);
        parts.push(UiPart::StepStarted { step });
    }

    fn delta(&mut self, block: OpenBlock, data: &Value, parts: &mut Vec<UiPart>) {
        let Some(delta) = text(data, "text") else {
            return;
        };
        let replace = data.get("replace").and_then(Value::as_bool) == Some(true);
        // An append-only client sees a replacing retry after a blank line.
        let delta = if replace {
            format!("\n\n{delta}")
        } else {
            delta
        };
        if delta.is_empty() {
            return;
        }
        let id = self.open_block(block, parts);
        parts.push(match block {
            OpenBlock::Text => UiPart::TextDelta { id, delta },
            OpenBlock::Reasoning => UiPart::ReasoningDelta { id, delta },
        });
    }

    /// The id of the open message of this kind, opening one (and closing another) as needed.
    fn open_block(&mut self, block: OpenBlock, parts: &mut Vec<UiPart>) -> String {
        if let Some((open, id)) = &self.open
            && *open == block
        {
            return id.clone();
        }
        self.close_block(parts);
        if self.step.is_none() {
            self.step = Some(1);
            parts.push(UiPart::StepStarted { step: 1 });
        }
        self.blocks += 1;
        let id = match block {
            OpenBlock::Text => format!("{}-text-{}", self.run_id, self.blocks),
            OpenBlock::Reasoning => format!("{}-reasoning-{}", self.run_id, self.blocks),
        };
        parts.push(match block {
            OpenBlock::Text => UiPart::TextStart { id: id.clone() },
            OpenBlock::Reasoning => UiPart::ReasoningStart { id: id.clone() },
        });
        self.open = Some((block, id.clone()));
        id
    }

    fn close_block(&mut self, parts: &mut Vec<UiPart>) {
        match self.open.take() {
            Some((OpenBlock::Text, id)) => parts.push(UiPart::TextEnd { id }),
            Some((OpenBlock::Reasoning, id)) => parts.push(UiPart::ReasoningEnd { id }),
            None => {}
        }
    }

    fn close_step(&mut self, parts: &mut Vec<UiPart>) {
        self.close_block(parts);
        if let Some(step) = self.step.take() {
            parts.push(UiPart::StepFinished { step });
        }
    }

    fn tool_started(&mut self, data: &Value, parts: &mut Vec<UiPart>) {
        let parent_message_id = match &self.open {
            Some((OpenBlock::Text, id)) => Some(id.clone()),
            _ => None,
        };
        self.close_block(parts);
        parts.push(UiPart::ToolCall {
            call_id: text(data, "call_id").unwrap_or_default(),
            tool: text(data, "tool").unwrap_or_default(),
            arguments: data.get("arguments").cloned().unwrap_or(Value::Null),
            parent_message_id,
        });
    }

    fn tool_finished(&mut self, data: &Value, parts: &mut Vec<UiPart>) {
        let failed = text(data, "status").as_deref() == Some("failed");
        let error = failed.then(|| {
            text(data, "error").unwrap_or_else(|| "The tool failed without saying why".into())
        });
        parts.push(UiPart::ToolResult {
            call_id: text(data, "call_id").unwrap_or_default(),
            output: text(data, "output").unwrap_or_default(),
            error,
        });
    }

    fn approval_requested(&mut self, data: &Value, parts: &mut Vec<UiPart>) {
        self.close_block(parts);
        let approval = PendingApproval {
            run_id: self.run_id.clone(),
            call_id: text(data, "call_id").unwrap_or_default(),
            tool: text(data, "tool").unwrap_or_default(),
            arguments: data.get("arguments").cloned().unwrap_or(Value::Null),
            expires_at: text(data, "expires_at"),
        };
        parts.push(UiPart::ApprovalRequested {
            call_id: approval.call_id.clone(),
            tool: approval.tool.clone(),
            arguments: approval.arguments.clone(),
            expires_at: approval.expires_at.clone(),
        });
        self.pending.push(approval);
    }

    fn approval_decided(&mut self, data: &Value, parts: &mut Vec<UiPart>) {
        let call_id = text(data, "call_id").unwrap_or_default();
        self.pending.retain(|p| p.call_id != call_id);
        parts.push(UiPart::ApprovalDecided {
            call_id,
            decision: text(data, "decision").unwrap_or_default(),
        });
    }

    fn run_finished(&mut self, data: &Value, parts: &mut Vec<UiPart>) {
        let parent_message_id = match &self.open {
            Some((OpenBlock::Text, id)) => Some(id.clone()),
            _ => None,
        };
        self.close_block(parts);
        // Client tools (SPEC §9.2): the calls the client is to run end the run, without results.
        let client_calls = data.get("client_tool_calls").and_then(Value::as_array);
        let client_calls = client_calls
            .into_iter()
            .flatten()
            .filter_map(|call| serde_json::from_value::<ToolCall>(call.clone()).ok());
        for call in client_calls {
            parts.push(UiPart::ToolCall {
                call_id: call.id,
                tool: call.name,
                arguments: serde_json::from_str(&call.arguments)
                    .unwrap_or(Value::String(call.arguments)),
                parent_message_id: parent_message_id.clone(),
            });
        }
        self.close_step(parts);
        let usage = data.get("usage");
        let count = |field: &str| {
            usage
                .and_then(|u| u.get(field))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let status = text(data, "status").unwrap_or_else(|| "failed".into());
        let error = (status == "failed").then(|| {
            text(data, "error")
                .or_else(|| self.last_error.clone())
                .unwrap_or_else(|| "The run failed".into())
        });
        self.finished = true;
        parts.push(UiPart::Finished(RunEnd {
            status,
            exit_reason: text(data, "exit_reason").unwrap_or_default(),
            error,
            answer: self.answer.take(),
            input_tokens: count("input_tokens"),
            output_tokens: count("output_tokens"),
            total_tokens: count("total_tokens"),
            cost_usd: data.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0),
            pending_approvals: std::mem::take(&mut self.pending),
        }));
    }
}

/// One run event as the UI protocols read it: its SPEC §4.2 type and JSON data.
pub type RunEventJson = (String, Value);

/// The events of a run this request started, until `run.finished`; a client that leaves
/// cancels the run unless `on_disconnect` lets it continue.
pub fn live_events(
    handle: RunHandle,
    on_disconnect: OnDisconnect,
) -> impl Stream<Item = RunEventJson> + Send + 'static {
    async_stream::stream! {
        let _cancel_on_drop = (on_disconnect == OnDisconnect::Cancel).then(|| handle.abort_on_drop());
        let mut events = handle.events;
        while let Some(event) = events.recv().await {
            let finished = matches!(event, AgentEvent::RunFinished(_));
            let data = serde_json::from_str(event.data().as_str()).unwrap_or(Value::Null);
            yield (event.kind().to_string(), data);
            if finished {
                return;
            }
        }
    }
}

/// A run's stored events after `after`, then live ones, until `run.finished` (any replica);
/// a failure to read them ends the stream with an `error` event saying so.
pub fn followed_events(
    runtime: &Arc<Runtime>,
    run_id: String,
    after: i64,
) -> impl Stream<Item = RunEventJson> + Send + 'static + use<> {
    runtime.follow_run_events(run_id, after).map(event_json)
}

/// Like [`followed_events`], up to the run's end or its next wait for approvals
/// ([`Runtime::follow_until_wait`]): the stream of a protocol whose answer ends at the wait
/// (then [`UiTranslator::end_of_stream`] shows the pending calls). `abort_guard` (a client that
/// leaves cancels the run) goes with the stream, unless the stream ended at a wait.
pub fn stretch_events(
    runtime: &Arc<Runtime>,
    run_id: String,
    after: i64,
    abort_guard: Option<DropGuard>,
) -> impl Stream<Item = RunEventJson> + Send + 'static + use<> {
    let events = runtime.follow_until_wait(run_id, after);
    async_stream::stream! {
        let mut abort_guard = abort_guard;
        let mut waiting = false;
        futures_util::pin_mut!(events);
        while let Some(event) = events.next().await {
            let (kind, data) = event_json(event);
            waiting = kind == "tool.approval_requested";
            let finished = kind == "run.finished";
            yield (kind, data);
            if finished {
                return;
            }
        }
        if waiting {
            drop(abort_guard.take().map(DropGuard::disarm));
        }
    }
}

fn event_json(event: Result<FollowedEvent, FollowError>) -> RunEventJson {
    match event {
        Ok(event) => (
            event.kind.to_string(),
            serde_json::from_str(event.data.as_str()).unwrap_or(Value::Null),
        ),
        Err(error) => (
            "error".to_string(),
            serde_json::json!({"code": "follow_failed", "message": error.to_string()}),
        ),
    }
}

/// The parts of a run's events, closed by [`UiTranslator::end_of_stream`] when the events stop
/// before the run's end.
pub fn ui_parts(
    run_id: String,
    events: impl Stream<Item = RunEventJson> + Send + 'static,
) -> impl Stream<Item = UiPart> + Send + 'static {
    async_stream::stream! {
        let mut translator = UiTranslator::new(run_id);
        futures_util::pin_mut!(events);
        while let Some((kind, data)) = events.next().await {
            for part in translator.translate(&kind, &data) {
                yield part;
            }
            if translator.is_finished() {
                return;
            }
        }
        for part in translator.end_of_stream() {
            yield part;
        }
    }
}

fn text(data: &Value, field: &str) -> Option<String> {
    data.get(field).and_then(Value::as_str).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn translate_all(events: &[(&str, Value)]) -> Vec<UiPart> {
        let mut translator = UiTranslator::new("r");
        events
            .iter()
            .flat_map(|(kind, data)| translator.translate(kind, data))
            .collect()
    }

    #[test]
    fn text_thinking_and_tools_open_and_close_messages_within_steps() {
        let parts = translate_all(&[
            (
                "run.started",
                json!({"run_id": "r", "conversation_id": "c"}),
            ),
            ("turn.started", json!({"turn": 1})),
            ("thinking", json!({"text": "hmm"})),
            ("output", json!({"text": "Hi"})),
            (
                "tool.started",
                json!({"call_id": "t1", "tool": "now", "arguments": {}}),
            ),
            (
                "tool.finished",
                json!({"call_id": "t1", "status": "ok", "output": "12:00"}),
            ),
            ("turn.started", json!({"turn": 2})),
            ("output", json!({"text": "Done"})),
            (
                "run.finished",
                json!({"status": "completed", "usage": {"total_tokens": 5}}),
            ),
        ]);
        let names: Vec<String> = parts
            .iter()
            .map(|p| {
                format!("{p:?}")
                    .split([' ', '('])
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        assert_eq!(
            names,
            [
                "RunStarted",
                "StepStarted",
                "ReasoningStart",
                "ReasoningDelta",
                "ReasoningEnd",
                "TextStart",
                "TextDelta",
                "TextEnd",
                "ToolCall",
                "ToolResult",
                "StepFinished",
                "StepStarted",
                "TextStart",
                "TextDelta",
                "TextEnd",
                "StepFinished",
                "Finished"
            ]
        );
        assert!(
            matches!(&parts[8], UiPart::ToolCall { parent_message_id: Some(id), .. } if id == "r-text-2")
        );
    }

    #[test]
    fn a_failed_run_carries_the_last_error_and_nothing_follows_the_end() {
        let mut translator = UiTranslator::new("r");
        translator.translate(
            "error",
            &json!({"code": "llm_error", "message": "upstream 500"}),
        );
        let parts = translator.translate("run.finished", &json!({"status": "failed"}));
        assert!(
            matches!(&parts[0], UiPart::Finished(end) if end.error.as_deref() == Some("upstream 500"))
        );
        assert!(
            translator
                .translate("output", &json!({"text": "late"}))
                .is_empty()
        );
        assert!(translator.end_of_stream().is_empty());
    }

    #[test]
    fn client_tool_calls_close_the_run_as_calls_without_results() {
        let parts = translate_all(&[
            ("turn.started", json!({"turn": 1})),
            (
                "run.finished",
                json!({"status": "completed", "exit_reason": "client_tool_calls",
                    "client_tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
            ),
        ]);
        assert_eq!(
            parts[1],
            UiPart::ToolCall {
                call_id: "c1".into(),
                tool: "get_weather".into(),
                arguments: json!({"city": "Paris"}),
                parent_message_id: None,
            }
        );
        assert_eq!(parts[2], UiPart::StepFinished { step: 1 });
        assert!(matches!(parts[3], UiPart::Finished(_)));
        assert_eq!(parts.len(), 4);
    }

    #[test]
    fn a_stream_that_pauses_for_approval_ends_waiting_with_the_pending_call() {
        let mut translator = UiTranslator::new("r");
        translator.translate(
            "tool.approval_requested",
            &json!({"call_id": "c1", "tool": "rm", "arguments": {"path": "/"}}),
        );
        let parts = translator.end_of_stream();
        let Some(UiPart::Finished(end)) = parts.last() else {
            panic!("no end: {parts:?}");
        };
        assert_eq!(end.status, "waiting_approval");
        assert_eq!(end.pending_approvals[0].call_id, "c1");
    }

    #[test]
    fn a_replacing_retry_starts_after_a_blank_line_and_empty_deltas_are_dropped() {
        let parts = translate_all(&[
            ("output", json!({"text": ""})),
            ("output", json!({"text": "again", "replace": true})),
        ]);
        assert!(parts.contains(&UiPart::TextDelta {
            id: "r-text-1".into(),
            delta: "\n\nagain".into()
        }));
        assert_eq!(parts.len(), 3, "step, start, one delta: {parts:?}");
    }
}
