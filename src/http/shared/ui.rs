//! The event→part logic shared by the UI protocols (AG-UI, the AI SDK UI message stream): a run's
//! events (SPEC §4.2), live or replayed from the store, become [`UiPart`]s — messages that open,
//! grow and close, steps, tool calls with their results, approvals, and the run's end. Each
//! protocol only renders these parts as its own frames; none of them reads run events itself.
//!
//! The translator reads typed [`AgentEvent`]s, the form both a live event and a stored one take
//! ([`RunEvent`]), so a resumed stream goes through the same code as a live one. It never fails.

use serde_json::Value;

use crate::agent::AgentEvent;
use crate::agent::events::{
    ApprovalDecided, ApprovalRequested, Progress, RunStarted, TextDelta, ToolFinished, ToolStarted,
    TurnStarted,
};
use crate::http::shared::drive::{Frame, StreamEnd, Translator};
use crate::vocabulary::result::{EntryStatus, RunSummary};
use crate::vocabulary::{ExitReason, RunEvent, RunStatus};

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
    /// A file a tool's result carried (an MCP `image` or `resource`), as the run keeps it: a
    /// source of the answer, readable at `GET /v1/files/{file_id}/content`.
    Source {
        call_id: String,
        file_id: String,
        name: String,
        media_type: String,
    },
    /// A web page a tool's result named (an MCP `resource_link` or an embedded resource with an
    /// http(s) URI): a source of the answer, by URL.
    SourceUrl {
        call_id: String,
        url: String,
        title: Option<String>,
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
    /// Progress (sub-agents, task status, a queued or joined message), as the run event
    /// carries it.
    Progress(Box<Progress>),
    Finished(RunEnd),
}

/// How a run ended, or paused for approvals.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    /// `completed`, `failed`, `cancelled`, or `waiting_approval` for a stream that ended with
    /// approvals pending.
    pub status: RunStatus,
    /// Why the run ended; `None` while it waits for approvals.
    pub exit_reason: Option<ExitReason>,
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
    /// An end with `status` and `exit_reason` and nothing else to say yet.
    pub fn new(status: RunStatus, exit_reason: Option<ExitReason>) -> Self {
        Self {
            status,
            exit_reason,
            error: None,
            answer: None,
            input_tokens: 0,
            output_tokens: 0,
            total_tokens: 0,
            cost_usd: 0.0,
            pending_approvals: Vec::new(),
        }
    }

    pub fn is_failure(&self) -> bool {
        self.status == RunStatus::Failed
    }

    /// The name of why it ended, or of its status while it waits (`waiting_approval`).
    pub fn reason_name(&self) -> &'static str {
        self.exit_reason
            .map_or(self.status.as_str(), |reason| reason.as_str())
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

    /// The parts one event becomes.
    pub fn translate(&mut self, event: &AgentEvent) -> Vec<UiPart> {
        let mut parts = Vec::new();
        if self.finished {
            return parts;
        }
        match event {
            AgentEvent::RunStarted(started) => self.run_started(started, &mut parts),
            AgentEvent::TurnStarted(turn) => self.turn_started(turn, &mut parts),
            AgentEvent::Output(delta) => self.delta(OpenBlock::Text, delta, &mut parts),
            AgentEvent::Thinking(delta) => self.delta(OpenBlock::Reasoning, delta, &mut parts),
            AgentEvent::Progress(progress) => parts.push(UiPart::Progress(progress.clone())),
            AgentEvent::ToolStarted(tool) => self.tool_started(tool, &mut parts),
            AgentEvent::ToolFinished(tool) => self.tool_finished(tool, &mut parts),
            AgentEvent::ApprovalRequested(waiting) => self.approval_requested(waiting, &mut parts),
            AgentEvent::ApprovalDecided(decided) => self.approval_decided(decided, &mut parts),
            AgentEvent::FinalReport(report) => self.answer = report.content.clone(),
            AgentEvent::Error(error) => self.last_error = Some(error.message.clone()),
            AgentEvent::RunFinished(summary) => self.run_finished(summary, &mut parts),
            // A crossed budget ends the run: `run.finished` says so.
            AgentEvent::Accounting(_) | AgentEvent::BudgetExceeded(_) => {}
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
                error: Some(
                    self.last_error
                        .clone()
                        .unwrap_or_else(|| "The run's events stopped before it finished".into()),
                ),
                ..RunEnd::new(RunStatus::Failed, Some(ExitReason::InternalError))
            }
        } else {
            RunEnd {
                pending_approvals: self.pending.clone(),
                ..RunEnd::new(RunStatus::WaitingApproval, None)
            }
        };
        self.finished = true;
        parts.push(UiPart::Finished(end));
        parts
    }

    fn run_started(&mut self, started: &RunStarted, parts: &mut Vec<UiPart>) {
        self.run_id.clone_from(&started.run_id);
        parts.push(UiPart::RunStarted {
            run_id: self.run_id.clone(),
            conversation_id: started.conversation_id.clone(),
        });
    }

    fn turn_started(&mut self, turn: &TurnStarted, parts: &mut Vec<UiPart>) {
        let step = u64::from(turn.turn);
        if self.step == Some(step) {
            // A retried attempt of the same turn stays in its step.
            return;
        }
        self.close_step(parts);
        self.step = Some(step);
        parts.push(UiPart::StepStarted { step });
    }

    fn delta(&mut self, block: OpenBlock, delta: &TextDelta, parts: &mut Vec<UiPart>) {
        // An append-only client sees a replacing retry after a blank line.
        let delta = delta.appended_text().into_owned();
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

    /// The open text message, which a tool call follows.
    fn open_text(&self) -> Option<String> {
        match &self.open {
            Some((OpenBlock::Text, id)) => Some(id.clone()),
            _ => None,
        }
    }

    fn tool_started(&mut self, tool: &ToolStarted, parts: &mut Vec<UiPart>) {
        let parent_message_id = self.open_text();
        self.close_block(parts);
        parts.push(UiPart::ToolCall {
            call_id: tool.call_id.clone(),
            tool: tool.tool.clone(),
            arguments: tool.arguments.clone(),
            parent_message_id,
        });
    }

    fn tool_finished(&mut self, tool: &ToolFinished, parts: &mut Vec<UiPart>) {
        let failed = tool.status == EntryStatus::Failed;
        let error = failed.then(|| {
            tool.error
                .clone()
                .unwrap_or_else(|| "The tool failed without saying why".into())
        });
        parts.push(UiPart::ToolResult {
            call_id: tool.call_id.clone(),
            output: tool.output.clone(),
            error,
        });
        parts.extend(tool.attachments.iter().map(|file| UiPart::Source {
            call_id: tool.call_id.clone(),
            file_id: file.file_id.clone(),
            name: file.name.clone(),
            media_type: file.media_type.clone(),
        }));
        parts.extend(tool.sources.iter().map(|source| UiPart::SourceUrl {
            call_id: tool.call_id.clone(),
            url: source.url.clone(),
            title: source.title.clone(),
        }));
    }

    fn approval_requested(&mut self, waiting: &ApprovalRequested, parts: &mut Vec<UiPart>) {
        self.close_block(parts);
        let approval = PendingApproval {
            run_id: self.run_id.clone(),
            call_id: waiting.call_id.clone(),
            tool: waiting.tool.clone(),
            arguments: waiting.arguments.clone(),
            expires_at: Some(waiting.expires_at.clone()),
        };
        parts.push(UiPart::ApprovalRequested {
            call_id: approval.call_id.clone(),
            tool: approval.tool.clone(),
            arguments: approval.arguments.clone(),
            expires_at: approval.expires_at.clone(),
        });
        self.pending.push(approval);
    }

    fn approval_decided(&mut self, decided: &ApprovalDecided, parts: &mut Vec<UiPart>) {
        self.pending.retain(|p| p.call_id != decided.call_id);
        parts.push(UiPart::ApprovalDecided {
            call_id: decided.call_id.clone(),
            decision: decided.decision.clone(),
        });
    }

    fn run_finished(&mut self, summary: &RunSummary, parts: &mut Vec<UiPart>) {
        let parent_message_id = self.open_text();
        self.close_block(parts);
        // Client tools (SPEC §9.2): the calls the client is to run end the run, without results.
        for call in &summary.client_tool_calls {
            parts.push(UiPart::ToolCall {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: serde_json::from_str(&call.arguments)
                    .unwrap_or_else(|_| Value::String(call.arguments.clone())),
                parent_message_id: parent_message_id.clone(),
            });
        }
        self.close_step(parts);
        let failed = summary.status == RunStatus::Failed;
        let error = failed.then(|| {
            summary
                .error
                .clone()
                .or_else(|| self.last_error.clone())
                .unwrap_or_else(|| "The run failed".into())
        });
        self.finished = true;
        parts.push(UiPart::Finished(RunEnd {
            status: summary.status,
            exit_reason: Some(summary.exit_reason),
            error,
            answer: self.answer.take(),
            input_tokens: summary.usage.input_tokens,
            output_tokens: summary.usage.output_tokens,
            total_tokens: summary.usage.total_tokens,
            cost_usd: summary.cost_usd,
            pending_approvals: std::mem::take(&mut self.pending),
        }));
    }
}

/// How a UI protocol writes its parts.
pub trait UiRender: Send + 'static {
    /// The frames of one part.
    fn render(&self, part: UiPart, out: &mut Vec<Frame>);

    /// The frames after the last part.
    fn close(&self, _out: &mut Vec<Frame>) {}
}

/// The translator of a UI protocol: a run's events as [`UiPart`]s, rendered by `R`.
pub struct UiFrames<R: UiRender> {
    parts: UiTranslator,
    render: R,
    /// Parts shown before any event (a resumed run's start).
    prelude: Vec<UiPart>,
}

impl<R: UiRender> UiFrames<R> {
    pub fn new(run_id: impl Into<String>, render: R) -> Self {
        Self {
            parts: UiTranslator::new(run_id),
            render,
            prelude: Vec::new(),
        }
    }

    /// Shows `part` before the first event.
    pub fn starting_with(mut self, part: UiPart) -> Self {
        self.prelude.push(part);
        self
    }

    fn render_all(&self, parts: Vec<UiPart>, out: &mut Vec<Frame>) {
        for part in parts {
            self.render.render(part, out);
        }
    }
}

impl<R: UiRender> Translator for UiFrames<R> {
    fn open(&mut self, out: &mut Vec<Frame>) {
        let prelude = std::mem::take(&mut self.prelude);
        self.render_all(prelude, out);
    }

    fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        let parts = self.parts.translate(&event.event);
        self.render_all(parts, out);
        if self.parts.is_finished() {
            self.render.close(out);
        }
    }

    fn is_finished(&self) -> bool {
        self.parts.is_finished()
    }

    fn end(&mut self, end: StreamEnd, out: &mut Vec<Frame>) {
        if let StreamEnd::Failed(error) = end {
            self.parts.last_error = Some(error.to_string());
        }
        let parts = self.parts.end_of_stream();
        self.render_all(parts, out);
        self.render.close(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::events::fixtures::event;
    use serde_json::json;

    fn translate_one(translator: &mut UiTranslator, kind: &str, data: &Value) -> Vec<UiPart> {
        translator.translate(&event(kind, data.clone()))
    }

    fn translate_all(events: &[(&str, Value)]) -> Vec<UiPart> {
        let mut translator = UiTranslator::new("r");
        events
            .iter()
            .flat_map(|(kind, data)| translate_one(&mut translator, kind, data))
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
        translate_one(
            &mut translator,
            "error",
            &json!({"code": "llm_error", "message": "upstream 500"}),
        );
        let parts = translate_one(
            &mut translator,
            "run.finished",
            &json!({"status": "failed"}),
        );
        assert!(
            matches!(&parts[0], UiPart::Finished(end) if end.error.as_deref() == Some("upstream 500"))
        );
        assert!(
            translator
                .translate(&event("output", json!({"text": "late"})))
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
        translate_one(
            &mut translator,
            "tool.approval_requested",
            &json!({"call_id": "c1", "tool": "rm", "arguments": {"path": "/"}}),
        );
        let parts = translator.end_of_stream();
        let Some(UiPart::Finished(end)) = parts.last() else {
            panic!("no end: {parts:?}");
        };
        assert_eq!(end.status, RunStatus::WaitingApproval);
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
