//! Turns a run's events (SPEC §4.2, typed, live or replayed from the store)
//! into the Responses stream (SPEC §9.1) and the `response` object it builds. Deterministic:
//! the same events always give the same frames and `sequence_number`s, so a stream resumed
//! with `starting_after` on any replica continues exactly where the client stopped.
//!
//! A response is one stretch of its run (see [`Runtime::follow_until_wait`]): it ends with the
//! run, or where the run waits for tool approvals — then with one `mcp_approval_request` item
//! per waiting call and `response.completed`, as OpenAI ends a response at a hosted MCP
//! approval. The response that answers them follows the same run from after the wait.
//!
//! Owns no I/O: the handlers feed it events and write what it returns.
//!
//! [`Runtime::follow_until_wait`]: crate::runtime::Runtime::follow_until_wait

use std::collections::HashMap;

use serde_json::Value;

use super::wire::{
    IncompleteDetails, InputTokensDetails, ItemStatus, OutputItem, OutputText, OutputTextKind,
    OutputTokensDetails, ResponseError, ResponseObject, ResponseStatus, ResponseStreamEvent,
    ResponseStreamFrame, ResponseUsage, SummaryText, SummaryTextKind,
};
use crate::agent::AgentEvent;
use crate::agent::events::{ApprovalRequested, ToolFinished, ToolStarted};
use crate::http::error::ApiError;
use crate::http::shared::drive::{Frame, StreamEnd, Translator};
use crate::http::wire::AssistantRole;
use crate::runtime::WaitingCallRef;
use crate::vocabulary::RunEvent;
use crate::vocabulary::result::{ExitReason, ReportStatus, RunSummary};

/// The prefix of an `mcp_approval_request` item's id (OpenAI's).
pub const APPROVAL_REQUEST_PREFIX: &str = "mcpr";

/// The item being streamed: one text or reasoning item is open at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Message(usize),
    Reasoning(usize),
}

/// The response of one run, as its events have built it so far.
pub struct ResponseProjector {
    response: ResponseObject,
    run_id: String,
    /// The seq the stretch starts after.
    after: i64,
    /// Item ids are the run's id plus the item's position: the same on every replay.
    item_prefix: String,
    next_sequence: u64,
    open: Option<Open>,
    /// `call_id` → output index of the `mcp_call` item of a tool that is running.
    running_tools: HashMap<String, usize>,
    /// agentd's failure report, shown as the message when no answer text came.
    failure_report: Option<String>,
    wrote_text: bool,
    /// Whether the stretch holds calls waiting for approval.
    waiting: bool,
    finished: bool,
    /// The run's `run.finished`, once it came.
    summary: Option<RunSummary>,
    /// A stream resumed with `starting_after` leaves out the frames up to that number.
    starting_after: u64,
}

impl ResponseProjector {
    /// A projector for `response` (its request fields set, no output yet), the stretch of the
    /// run's events after seq `after`.
    pub fn new(response: ResponseObject, run_id: &str, after: i64) -> Self {
        let run = run_id.replace('-', "");
        Self {
            response,
            run_id: run_id.to_string(),
            after,
            // A later stretch of the same run numbers its items apart from the first one's.
            item_prefix: if after > 0 {
                format!("{run}s{after}")
            } else {
                run
            },
            next_sequence: 0,
            open: None,
            running_tools: HashMap::new(),
            failure_report: None,
            wrote_text: false,
            waiting: false,
            finished: false,
            summary: None,
            starting_after: 0,
        }
    }

    /// The stream from after frame `sequence_number` (`starting_after`; 0: all of it).
    pub fn starting_after(mut self, sequence_number: u64) -> Self {
        self.starting_after = sequence_number;
        self
    }

    /// The frames a resumed stream shows, as server-sent events named by their `type`.
    fn shown(&self, frames: Vec<ResponseStreamFrame>, out: &mut Vec<Frame>) {
        let after = self.starting_after;
        let shown = frames
            .iter()
            .filter(|frame| after == 0 || frame.sequence_number > after);
        // Plain data only: serialisation cannot fail.
        out.extend(shown.map(|frame| {
            Frame::named(
                frame.event.name(),
                serde_json::to_string(frame).unwrap_or_default(),
            )
        }));
    }

    /// The run this response is a stretch of.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The seq of the run's event this response's stretch starts after.
    pub fn after(&self) -> i64 {
        self.after
    }

    /// The run's end, once its `run.finished` event came.
    pub fn summary(&self) -> Option<&RunSummary> {
        self.summary.as_ref()
    }

    /// The response as it stands.
    pub fn response(&self) -> &ResponseObject {
        &self.response
    }

    /// `response.created` and `response.in_progress`: the first two frames of every stream.
    pub fn start(&mut self) -> Vec<ResponseStreamFrame> {
        let created = self.snapshot();
        self.response.status = ResponseStatus::InProgress;
        let in_progress = self.snapshot();
        vec![
            self.frame(ResponseStreamEvent::Created { response: created }),
            self.frame(ResponseStreamEvent::InProgress {
                response: in_progress,
            }),
        ]
    }

    /// The frames one run event adds.
    pub fn apply(&mut self, event: &AgentEvent) -> Vec<ResponseStreamFrame> {
        if self.finished {
            return Vec::new();
        }
        match event {
            AgentEvent::Thinking(delta) => self.reasoning_delta(&delta.text),
            AgentEvent::Output(delta) => self.text_delta(&delta.appended_text()),
            AgentEvent::ToolStarted(tool) => self.tool_started(tool),
            AgentEvent::ToolFinished(tool) => self.tool_finished(tool),
            AgentEvent::ApprovalRequested(waiting) => self.approval_requested(waiting),
            AgentEvent::FinalReport(report) => {
                if report.status == ReportStatus::Failure {
                    self.failure_report.clone_from(&report.content);
                }
                Vec::new()
            }
            AgentEvent::RunFinished(summary) => self.finish(summary),
            _ => Vec::new(),
        }
    }

    /// The frames that close a stretch whose events stopped before `run.finished`: a run that
    /// waits for approvals ends the response `completed` with its `mcp_approval_request`
    /// items; anything else broke off.
    pub fn end_of_stretch(&mut self) -> Vec<ResponseStreamFrame> {
        if self.finished {
            return Vec::new();
        }
        if !self.waiting {
            return self.fail("internal_error", "the run ended without a final event");
        }
        let mut frames = self.close_open();
        self.finished = true;
        self.response.status = ResponseStatus::Completed;
        let response = self.snapshot();
        frames.push(self.frame(ResponseStreamEvent::Completed { response }));
        frames
    }

    /// An `error` event and `response.failed`: the stream broke before the run's end.
    pub fn fail(&mut self, code: &str, message: &str) -> Vec<ResponseStreamFrame> {
        if self.finished {
            return Vec::new();
        }
        let mut frames = self.close_open();
        frames.push(self.frame(ResponseStreamEvent::Error {
            code: code.to_string(),
            message: message.to_string(),
            param: None,
        }));
        self.response.status = ResponseStatus::Failed;
        self.response.error = Some(ResponseError {
            code: code.to_string(),
            message: message.to_string(),
        });
        self.finished = true;
        let response = self.snapshot();
        frames.push(self.frame(ResponseStreamEvent::Failed { response }));
        frames
    }

    fn frame(&mut self, event: ResponseStreamEvent) -> ResponseStreamFrame {
        let sequence_number = self.next_sequence;
        self.next_sequence += 1;
        ResponseStreamFrame {
            event,
            sequence_number,
        }
    }

    fn snapshot(&self) -> Box<ResponseObject> {
        Box::new(self.response.clone())
    }

    fn item_id(&self, prefix: &str, index: usize) -> String {
        format!("{prefix}_{}{index:03}", self.item_prefix)
    }

    fn add_item(&mut self, item: OutputItem) -> (usize, ResponseStreamFrame) {
        let index = self.response.output.len();
        self.response.output.push(item.clone());
        let frame = self.frame(ResponseStreamEvent::OutputItemAdded {
            output_index: index,
            item,
        });
        (index, frame)
    }

    fn reasoning_delta(&mut self, delta: &str) -> Vec<ResponseStreamFrame> {
        if delta.is_empty() {
            return Vec::new();
        }
        let mut frames = Vec::new();
        let index = match self.open {
            Some(Open::Reasoning(index)) => index,
            _ => {
                frames.extend(self.close_open());
                let id = self.item_id("rs", self.response.output.len());
                let (index, added) = self.add_item(OutputItem::Reasoning {
                    id: id.clone(),
                    summary: vec![summary("")],
                });
                frames.push(added);
                frames.push(self.frame(ResponseStreamEvent::ReasoningSummaryPartAdded {
                    item_id: id,
                    output_index: index,
                    summary_index: 0,
                    part: summary(""),
                }));
                self.open = Some(Open::Reasoning(index));
                index
            }
        };
        if let Some(OutputItem::Reasoning { summary, id }) = self.response.output.get_mut(index)
            && let Some(part) = summary.first_mut()
        {
            part.text.push_str(delta);
            let item_id = id.clone();
            frames.push(self.frame(ResponseStreamEvent::ReasoningSummaryTextDelta {
                item_id,
                output_index: index,
                summary_index: 0,
                delta: delta.to_string(),
            }));
        }
        frames
    }

    fn text_delta(&mut self, delta: &str) -> Vec<ResponseStreamFrame> {
        if delta.is_empty() {
            return Vec::new();
        }
        self.wrote_text = true;
        let mut frames = Vec::new();
        let index = match self.open {
            Some(Open::Message(index)) => index,
            _ => {
                frames.extend(self.close_open());
                let id = self.item_id("msg", self.response.output.len());
                let (index, added) = self.add_item(OutputItem::Message {
                    id: id.clone(),
                    status: ItemStatus::InProgress,
                    role: AssistantRole::Assistant,
                    content: Vec::new(),
                });
                frames.push(added);
                frames.push(self.frame(ResponseStreamEvent::ContentPartAdded {
                    item_id: id,
                    output_index: index,
                    content_index: 0,
                    part: output_text(""),
                }));
                if let Some(OutputItem::Message { content, .. }) =
                    self.response.output.get_mut(index)
                {
                    content.push(output_text(""));
                }
                self.open = Some(Open::Message(index));
                index
            }
        };
        if let Some(OutputItem::Message { content, id, .. }) = self.response.output.get_mut(index)
            && let Some(part) = content.first_mut()
        {
            part.text.push_str(delta);
            let item_id = id.clone();
            frames.push(self.frame(ResponseStreamEvent::OutputTextDelta {
                item_id,
                output_index: index,
                content_index: 0,
                delta: delta.to_string(),
                logprobs: Vec::new(),
            }));
        }
        frames
    }

    /// The `.done` frames of the open text or reasoning item.
    fn close_open(&mut self) -> Vec<ResponseStreamFrame> {
        let Some(open) = self.open.take() else {
            return Vec::new();
        };
        let mut frames = Vec::new();
        match open {
            Open::Message(index) => {
                let Some(OutputItem::Message {
                    id,
                    content,
                    status,
                    ..
                }) = self.response.output.get_mut(index)
                else {
                    return frames;
                };
                *status = ItemStatus::Completed;
                let item_id = id.clone();
                let part = content.first().cloned().unwrap_or_else(|| output_text(""));
                frames.push(self.frame(ResponseStreamEvent::OutputTextDone {
                    item_id: item_id.clone(),
                    output_index: index,
                    content_index: 0,
                    text: part.text.clone(),
                    logprobs: Vec::new(),
                }));
                frames.push(self.frame(ResponseStreamEvent::ContentPartDone {
                    item_id,
                    output_index: index,
                    content_index: 0,
                    part,
                }));
            }
            Open::Reasoning(index) => {
                let Some(OutputItem::Reasoning { id, summary: parts }) =
                    self.response.output.get(index)
                else {
                    return frames;
                };
                let item_id = id.clone();
                let part = parts.first().cloned().unwrap_or_else(|| summary(""));
                frames.push(self.frame(ResponseStreamEvent::ReasoningSummaryTextDone {
                    item_id: item_id.clone(),
                    output_index: index,
                    summary_index: 0,
                    text: part.text.clone(),
                }));
                frames.push(self.frame(ResponseStreamEvent::ReasoningSummaryPartDone {
                    item_id,
                    output_index: index,
                    summary_index: 0,
                    part,
                }));
            }
        }
        let index = match open {
            Open::Message(index) | Open::Reasoning(index) => index,
        };
        if let Some(item) = self.response.output.get(index).cloned() {
            frames.push(self.frame(ResponseStreamEvent::OutputItemDone {
                output_index: index,
                item,
            }));
        }
        frames
    }

    fn tool_started(&mut self, tool: &ToolStarted) -> Vec<ResponseStreamFrame> {
        let mut frames = self.close_open();
        let id = self.item_id("mcp", self.response.output.len());
        let (index, added) = self.add_item(OutputItem::McpCall {
            id: id.clone(),
            status: ItemStatus::InProgress,
            server_label: tool.server.clone(),
            name: tool.tool.clone(),
            arguments: arguments_text(&tool.arguments),
            output: None,
            error: None,
        });
        frames.push(added);
        frames.push(self.frame(ResponseStreamEvent::McpCallInProgress {
            item_id: id,
            output_index: index,
        }));
        self.running_tools.insert(tool.call_id.clone(), index);
        frames
    }

    fn tool_finished(&mut self, tool: &ToolFinished) -> Vec<ResponseStreamFrame> {
        let Some(index) = self.running_tools.remove(&tool.call_id) else {
            return Vec::new();
        };
        let ok = tool.status == "ok";
        let Some(OutputItem::McpCall {
            id,
            status,
            output,
            error,
            ..
        }) = self.response.output.get_mut(index)
        else {
            return Vec::new();
        };
        *status = if ok {
            ItemStatus::Completed
        } else {
            ItemStatus::Failed
        };
        *output = Some(tool.output.clone());
        error.clone_from(&tool.error);
        let item_id = id.clone();
        let item = self.response.output[index].clone();
        let progress = if ok {
            ResponseStreamEvent::McpCallCompleted {
                item_id,
                output_index: index,
            }
        } else {
            ResponseStreamEvent::McpCallFailed {
                item_id,
                output_index: index,
            }
        };
        vec![
            self.frame(progress),
            self.frame(ResponseStreamEvent::OutputItemDone {
                output_index: index,
                item,
            }),
        ]
    }

    fn approval_requested(&mut self, waiting: &ApprovalRequested) -> Vec<ResponseStreamFrame> {
        let mut frames = self.close_open();
        let item = OutputItem::McpApprovalRequest {
            id: WaitingCallRef::new(&self.run_id, &waiting.call_id).encode(APPROVAL_REQUEST_PREFIX),
            server_label: waiting.server.clone(),
            name: waiting.tool.clone(),
            arguments: arguments_text(&waiting.arguments),
        };
        let (index, added) = self.add_item(item.clone());
        frames.push(added);
        frames.push(self.frame(ResponseStreamEvent::OutputItemDone {
            output_index: index,
            item,
        }));
        self.waiting = true;
        frames
    }

    fn client_calls(&mut self, summary: &RunSummary) -> Vec<ResponseStreamFrame> {
        let mut frames = Vec::new();
        for call in &summary.client_tool_calls {
            let id = self.item_id("fc", self.response.output.len());
            let (index, added) = self.add_item(OutputItem::FunctionCall {
                id: id.clone(),
                status: ItemStatus::InProgress,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: String::new(),
            });
            frames.push(added);
            frames.push(self.frame(ResponseStreamEvent::FunctionCallArgumentsDelta {
                item_id: id.clone(),
                output_index: index,
                delta: call.arguments.clone(),
            }));
            frames.push(self.frame(ResponseStreamEvent::FunctionCallArgumentsDone {
                item_id: id.clone(),
                output_index: index,
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            }));
            let item = OutputItem::FunctionCall {
                id,
                status: ItemStatus::Completed,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            };
            self.response.output[index] = item.clone();
            frames.push(self.frame(ResponseStreamEvent::OutputItemDone {
                output_index: index,
                item,
            }));
        }
        frames
    }

    /// The run ended: the failure report as text when nothing was said, the client's calls,
    /// then exactly one terminal event.
    fn finish(&mut self, summary: &RunSummary) -> Vec<ResponseStreamFrame> {
        let mut frames = Vec::new();
        if let (Some(report), false) = (self.failure_report.take(), self.wrote_text) {
            frames.extend(self.text_delta(&report));
        }
        frames.extend(self.close_open());
        frames.extend(self.client_calls(summary));
        self.response.usage = Some(usage_of(summary));
        self.finished = true;
        let (status, error, incomplete) = outcome(summary);
        self.summary = Some(summary.clone());
        if status == ResponseStatus::Failed {
            // The error in OpenAI's words, as a non-streamed request would get it.
            let api = ApiError::from_run(summary);
            frames.push(self.frame(ResponseStreamEvent::Error {
                code: api.code.to_string(),
                message: api.message,
                param: None,
            }));
        }
        self.response.status = status;
        self.response.error = error;
        self.response.incomplete_details = incomplete;
        let response = self.snapshot();
        let terminal = match status {
            ResponseStatus::Completed => ResponseStreamEvent::Completed { response },
            ResponseStatus::Incomplete => ResponseStreamEvent::Incomplete { response },
            _ => ResponseStreamEvent::Failed { response },
        };
        frames.push(self.frame(terminal));
        frames
    }
}

/// Status, error and incompleteness of a finished run's response.
fn outcome(
    summary: &RunSummary,
) -> (
    ResponseStatus,
    Option<ResponseError>,
    Option<IncompleteDetails>,
) {
    match summary.exit_reason {
        ExitReason::MaxTurns | ExitReason::ContextLimit => (
            ResponseStatus::Incomplete,
            None,
            Some(IncompleteDetails {
                reason: "max_output_tokens".into(),
            }),
        ),
        ExitReason::Cancelled | ExitReason::ShuttingDown => (
            ResponseStatus::Cancelled,
            Some(ResponseError {
                code: summary.exit_reason.as_str().into(),
                message: summary
                    .error
                    .clone()
                    .unwrap_or_else(|| "the response was cancelled".into()),
            }),
            None,
        ),
        _ if summary.success => (ResponseStatus::Completed, None, None),
        reason => (
            ResponseStatus::Failed,
            Some(ResponseError {
                code: reason.as_str().into(),
                message: summary
                    .error
                    .clone()
                    .unwrap_or_else(|| "the run failed".into()),
            }),
            None,
        ),
    }
}

/// The Responses API's translator: the projector's frames as server-sent events.
impl Translator for ResponseProjector {
    fn open(&mut self, out: &mut Vec<Frame>) {
        let frames = self.start();
        self.shown(frames, out);
    }

    fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        let frames = self.apply(&event.event);
        self.shown(frames, out);
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn end(&mut self, end: StreamEnd, out: &mut Vec<Frame>) {
        let frames = match end {
            StreamEnd::Stopped => self.end_of_stretch(),
            StreamEnd::Failed(error) => self.fail("stream_interrupted", &error.to_string()),
        };
        self.shown(frames, out);
    }
}

fn usage_of(summary: &RunSummary) -> ResponseUsage {
    let usage = &summary.usage;
    ResponseUsage {
        input_tokens: usage.input_tokens,
        input_tokens_details: InputTokensDetails {
            cached_tokens: usage.cached_tokens,
        },
        output_tokens: usage.output_tokens,
        output_tokens_details: OutputTokensDetails {
            reasoning_tokens: 0,
        },
        total_tokens: usage.input_tokens + usage.output_tokens,
    }
}

/// A tool call's arguments as JSON text.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        value => value.to_string(),
    }
}

fn output_text(text: &str) -> OutputText {
    OutputText {
        kind: OutputTextKind::OutputText,
        text: text.to_string(),
        annotations: Vec::new(),
        logprobs: Vec::new(),
    }
}

fn summary(text: &str) -> SummaryText {
    SummaryText {
        kind: SummaryTextKind::SummaryText,
        text: text.to_string(),
    }
}
