//! The wire format of AG-UI (SPEC §9.4): the `RunAgentInput` a client posts, and the events
//! agentd streams back, built from [`UiPart`]s. Types and frame building only; the handler
//! lives in the parent module.

use crate::http::shared::attachments::ChatAttachment;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::http::shared::ui::{RunEnd, UiPart};
use crate::runtime::WaitingCallRef;
use crate::vocabulary::RunStatus;

/// The prefix of an interrupt's id: `approval_<run id without dashes>_<call id>`.
pub const INTERRUPT_PREFIX: &str = "approval";

/// The `{agent}` of `POST /ag-ui/{agent}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct AgUiPath {
    /// The agent that runs.
    pub agent: String,
}

/// AG-UI `RunAgentInput`. Its other fields (`state`, `context`, `parentRunId`,
/// `protocolVersion`) are accepted and ignored: agentd agents keep no shared state.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation: one of the caller's conversations, created under this id when new.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub thread_id: String,
    /// The client's id for this run; the events carry it.
    #[schema(min_length = 1)]
    pub run_id: String,
    /// The thread's messages; the last user message is the prompt (without one the stream is
    /// `RUN_STARTED`, `RUN_ERROR` and no run starts). Without a user (a key not bound to one
    /// and no `forwardedProps.userId`) the earlier ones are the history.
    #[serde(default)]
    pub messages: Vec<AgUiMessage>,
    /// Client tools (SPEC §9.2), `{name, description, parameters}`: offered to the model beside
    /// the agent's own; a call to one ends the run with `TOOL_CALL_START`/`_ARGS`/`_END` for
    /// the client to run, answered by a `role: "tool"` message in the next run's `messages`.
    #[serde(default)]
    #[schema(value_type = Option<Vec<AgUiTool>>)]
    pub tools: Option<Vec<Value>>,
    /// `userId` names the user whose conversation the thread is, for a key not bound to one.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub forwarded_props: Option<Value>,
    /// The client's state: agentd keeps none, and gives it back in the `STATE_SNAPSHOT` before
    /// an interrupt.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub state: Option<Value>,
    /// Answers to the interrupts of a run waiting for tool approvals, `{interruptId, status,
    /// payload}`: `payload` is AG-UI 1.0's `{approved, editedArgs?, reason?}` (or agentd's
    /// earlier `{decision: "approve"|"deny", arguments?, reason?}`); `status: "cancelled"`
    /// denies. Every waiting call of the run is answered at once; the stream then follows the
    /// resumed run.
    #[serde(default)]
    #[schema(value_type = Option<Vec<ResumeEntry>>)]
    pub resume: Option<Vec<Value>>,
}

/// A client tool, as the document describes it (the handler reads the JSON itself, so each
/// refusal names its field): names as the providers take them, parameters a JSON schema of an
/// object.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "a schema only")]
pub struct AgUiTool {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    pub description: Option<String>,
    /// A JSON schema of an object (`{"type": "object", "properties": {…}}`); none means no
    /// arguments.
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Value>,
}

/// An answer to an interrupt, as the document describes it (read by the handler).
#[derive(Debug, ToSchema)]
#[serde(rename_all = "camelCase")]
#[expect(dead_code, reason = "a schema only")]
pub struct ResumeEntry {
    /// The interrupt's `id`: `approval_<run id without dashes>_<call id>`.
    #[schema(pattern = "^approval_[0-9a-f]{32}_.+$")]
    pub interrupt_id: String,
    /// `resolved` (the default) or `cancelled` (denies).
    #[schema(value_type = Option<String>, pattern = "^(resolved|cancelled)$")]
    pub status: Option<String>,
    /// Required unless `status` is `cancelled`.
    pub payload: Option<ResumePayload>,
}

/// The decision `payload`: the body of `POST /v1/runs/{run_id}/approvals/{call_id}`.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "a schema only")]
pub struct ResumePayload {
    pub decision: crate::http::shared::approvals::DecisionKind,
    /// With `approve`: the arguments the tool runs with instead of the model's.
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<Value>,
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

/// One AG-UI message; `role`, text `content`, an assistant's `toolCalls` and a tool message's
/// `toolCallId` are read (`id` and the rest are ignored).
#[derive(Debug, Deserialize, ToSchema)]
pub struct AgUiMessage {
    /// The client's id of the message (kept for the snapshot before an interrupt).
    #[serde(default)]
    pub id: Option<String>,
    /// `user`, `assistant`, `system`, `developer`, `tool`, …
    pub role: String,
    /// Text, or a list of content parts whose `text` parts are read.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub content: Option<Value>,
    /// An assistant message's calls: `{id, type: "function", function: {name, arguments}}`.
    #[serde(default, rename = "toolCalls")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Option<Vec<Value>>,
    /// A tool message's call.
    #[serde(default, rename = "toolCallId")]
    pub tool_call_id: Option<String>,
}

impl AgUiMessage {
    /// The message's `binary` parts (AG-UI 1.0 multimodal input: `mimeType` with `data`
    /// (base64), `url` or `id` (a Files API file), `filename`), each with its path under `field`.
    pub fn files(&self, field: &str) -> Vec<(String, ChatAttachment)> {
        let Some(Value::Array(parts)) = &self.content else {
            return Vec::new();
        };
        let text =
            |part: &Value, key: &str| part.get(key).and_then(Value::as_str).map(str::to_string);
        parts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.get("type").and_then(Value::as_str) == Some("binary"))
            .map(|(index, part)| {
                let file = ChatAttachment {
                    name: text(part, "filename"),
                    media_type: text(part, "mimeType"),
                    data: text(part, "data"),
                    url: text(part, "url"),
                    file_id: text(part, "id"),
                };
                (format!("{field}[{index}]"), file)
            })
            .collect()
    }

    /// The message's text: the string content, or its text parts joined.
    pub fn text(&self) -> String {
        match &self.content {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }
}

/// Ids the frames of one run carry.
pub struct FrameIds<'a> {
    pub thread_id: &'a str,
    pub run_id: &'a str,
}

/// The AG-UI events one part becomes.
pub fn frames(part: UiPart, ids: &FrameIds<'_>) -> Vec<Value> {
    match part {
        UiPart::RunStarted { .. } => vec![json!({
            "type": "RUN_STARTED", "threadId": ids.thread_id, "runId": ids.run_id,
            "protocolVersion": "1.0",
        })],
        UiPart::StepStarted { step } => {
            vec![json!({"type": "STEP_STARTED", "stepName": format!("turn {step}")})]
        }
        UiPart::StepFinished { step } => {
            vec![json!({"type": "STEP_FINISHED", "stepName": format!("turn {step}")})]
        }
        UiPart::TextStart { id } => {
            vec![json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"})]
        }
        UiPart::TextDelta { id, delta } => {
            vec![json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": delta})]
        }
        UiPart::TextEnd { id } => vec![json!({"type": "TEXT_MESSAGE_END", "messageId": id})],
        UiPart::ReasoningStart { id } => vec![
            json!({"type": "REASONING_START", "messageId": id}),
            json!({"type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning"}),
        ],
        UiPart::ReasoningDelta { id, delta } => {
            vec![json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": id, "delta": delta})]
        }
        UiPart::ReasoningEnd { id } => vec![
            json!({"type": "REASONING_MESSAGE_END", "messageId": id}),
            json!({"type": "REASONING_END", "messageId": id}),
        ],
        UiPart::ToolCall {
            call_id,
            tool,
            arguments,
            parent_message_id,
        } => tool_call_frames(call_id, tool, &arguments, parent_message_id),
        UiPart::ToolResult {
            call_id,
            output,
            error,
        } => vec![json!({
            "type": "TOOL_CALL_RESULT",
            "messageId": format!("{}-tool-{call_id}", ids.run_id),
            "toolCallId": call_id,
            "content": match error { Some(error) if output.is_empty() => format!("error: {error}"), _ => output },
            "role": "tool",
        })],
        // The call proposed (AG-UI 1.0: the interrupt's `toolCallId` binds to this sequence; the
        // resumed run answers it with `TOOL_CALL_RESULT`), then agentd's own event.
        UiPart::ApprovalRequested {
            call_id,
            tool,
            arguments,
            expires_at,
        } => {
            let mut frames = tool_call_frames(call_id.clone(), tool.clone(), &arguments, None);
            frames.push(json!({
                "type": "CUSTOM", "name": "agentd.approval_requested",
                "value": {"call_id": call_id, "tool": tool, "arguments": arguments, "expires_at": expires_at},
            }));
            frames
        }
        UiPart::ApprovalDecided { call_id, decision } => vec![json!({
            "type": "CUSTOM", "name": "agentd.approval_decided",
            "value": {"call_id": call_id, "decision": decision},
        })],
        UiPart::Progress(progress) => {
            vec![json!({"type": "CUSTOM", "name": "agentd.progress", "value": progress})]
        }
        UiPart::Source {
            call_id,
            file_id,
            name,
            media_type,
        } => vec![json!({
            "type": "CUSTOM", "name": "agentd.source",
            "value": {"toolCallId": call_id, "fileId": file_id, "name": name, "mediaType": media_type},
        })],
        UiPart::SourceUrl {
            call_id,
            url,
            title,
        } => vec![json!({
            "type": "CUSTOM", "name": "agentd.source",
            "value": {"toolCallId": call_id, "url": url, "title": title},
        })],
        UiPart::Finished(end) => vec![finished_frame(end, ids)],
    }
}

fn tool_call_frames(
    call_id: String,
    tool: String,
    arguments: &Value,
    parent_message_id: Option<String>,
) -> Vec<Value> {
    let mut start = json!({"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": tool});
    if let Some(parent) = parent_message_id {
        start["parentMessageId"] = Value::String(parent);
    }
    vec![
        start,
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments.to_string()}),
        json!({"type": "TOOL_CALL_END", "toolCallId": call_id}),
    ]
}

/// What a `resume` entry's `payload` holds (AG-UI 1.0's approve-with-edits): `editedArgs`
/// replaces the call's arguments whole; `reason` is kept with the decision.
fn resume_payload_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "editedArgs": {"type": "object", "description": "Full replacement of the tool args. Not merged."},
            "reason": {"type": "string"},
        },
        "required": ["approved"],
    })
}

/// `RUN_FINISHED` (success, cancelled, or an interrupt per pending approval) or `RUN_ERROR`.
fn finished_frame(end: RunEnd, ids: &FrameIds<'_>) -> Value {
    let usage = json!([{
        "inputTokens": end.input_tokens, "outputTokens": end.output_tokens,
        "totalTokens": end.total_tokens,
    }]);
    if end.is_failure() {
        return json!({
            "type": "RUN_ERROR",
            "code": end.reason_name(),
            "message": end.error.unwrap_or_else(|| "The run failed".into()),
            "usage": usage,
        });
    }
    let mut frame = json!({
        "type": "RUN_FINISHED", "threadId": ids.thread_id, "runId": ids.run_id, "usage": usage,
    });
    if let Some(answer) = end.answer {
        frame["result"] = Value::String(answer);
    }
    if !end.pending_approvals.is_empty() {
        let interrupts: Vec<Value> = end
            .pending_approvals
            .iter()
            .map(|p| {
                let id = WaitingCallRef::new(&p.run_id, &p.call_id).encode(INTERRUPT_PREFIX);
                let mut interrupt = json!({
                    "id": id, "reason": "tool_call", "toolCallId": p.call_id,
                    "responseSchema": resume_payload_schema(),
                    "message": format!("Approve or deny the call of `{}` with {}", p.tool, p.arguments),
                });
                if let Some(expires_at) = &p.expires_at {
                    interrupt["expiresAt"] = Value::String(expires_at.clone());
                }
                interrupt
            })
            .collect();
        frame["outcome"] = json!({"type": "interrupt", "interrupts": interrupts});
    } else if end.status == RunStatus::Cancelled {
        frame["outcome"] = json!({"type": "cancelled"});
    } else {
        frame["outcome"] = json!({"type": "success"});
    }
    frame
}

/// What the client needs to resume from, sent before an interrupting `RUN_FINISHED` (AG-UI
/// 1.0): its own state given back, and the thread's messages with this run's answer so far.
pub fn interrupt_snapshots(state: &Value, messages: Vec<Value>) -> [Value; 2] {
    [
        json!({"type": "STATE_SNAPSHOT", "snapshot": state}),
        json!({"type": "MESSAGES_SNAPSHOT", "messages": messages}),
    ]
}

/// An input message as a snapshot holds it.
pub fn snapshot_message(index: usize, message: &AgUiMessage) -> Value {
    let mut out = json!({
        "id": message.id.clone().unwrap_or_else(|| format!("input-{index}")),
        "role": message.role,
    });
    if let Some(content) = &message.content {
        out["content"] = content.clone();
    }
    if let Some(calls) = &message.tool_calls {
        out["toolCalls"] = Value::Array(calls.clone());
    }
    if let Some(call) = &message.tool_call_id {
        out["toolCallId"] = Value::String(call.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::shared::ui::PendingApproval;

    const IDS: FrameIds<'static> = FrameIds {
        thread_id: "t",
        run_id: "r",
    };

    use crate::vocabulary::ExitReason;

    fn end(status: &str) -> RunEnd {
        RunEnd::new(
            RunStatus::parse(status).expect("a status"),
            Some(ExitReason::FinalAnswer),
        )
    }

    #[test]
    fn a_run_waiting_for_approval_finishes_with_one_interrupt_per_call() {
        let mut waiting = end("waiting_approval");
        waiting.pending_approvals = vec![PendingApproval {
            run_id: "0192e4a0-0000-7000-8000-000000000001".into(),
            call_id: "c1".into(),
            tool: "rm".into(),
            arguments: json!({"path": "/tmp/x"}),
            expires_at: None,
        }];
        let frame = &frames(UiPart::Finished(waiting), &IDS)[0];
        assert_eq!(frame["type"], "RUN_FINISHED");
        assert_eq!(frame["outcome"]["type"], "interrupt");
        let interrupt = &frame["outcome"]["interrupts"][0];
        assert_eq!(interrupt["toolCallId"], "c1");
        assert_eq!(
            interrupt["id"],
            "approval_0192e4a0000070008000000000000001_c1"
        );
        assert_eq!(interrupt["reason"], "tool_call");
        assert_eq!(interrupt["responseSchema"]["required"], json!(["approved"]));
        assert!(interrupt.get("expiresAt").is_none(), "absent, never null");
    }

    #[test]
    fn cancelled_runs_finish_cancelled_and_failed_runs_error() {
        let cancelled = &frames(UiPart::Finished(end("cancelled")), &IDS)[0];
        assert_eq!(cancelled["outcome"]["type"], "cancelled");
        let mut failed = end("failed");
        failed.error = Some("upstream broke".into());
        let error = &frames(UiPart::Finished(failed), &IDS)[0];
        assert_eq!(error["type"], "RUN_ERROR");
        assert_eq!(error["message"], "upstream broke");
        let done = &frames(UiPart::Finished(end("completed")), &IDS)[0];
        assert_eq!(done["outcome"], json!({"type": "success"}));
    }
}
