//! The wire format of the Vercel AI SDK UI message stream (SPEC §9.6): the body `useChat`'s
//! default transport posts, and the stream's parts built from [`UiPart`]s. Types and frame
//! building only; the handlers live in the parent module.

use crate::http::shared::attachments::ChatAttachment;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::http::shared::ui::{RunEnd, UiPart};
use crate::vocabulary::{ExitReason, RunStatus};

/// The header that tells the AI SDK the response is a UI message stream.
pub const STREAM_HEADER: &str = "x-vercel-ai-ui-message-stream";
/// The `Accept` value (or `?protocol=ai-sdk`) that selects this protocol on the chat route.
pub const ACCEPT_VALUE: &str = "text/x-ai-sdk-ui";

/// `GET /api/{user_id}/chat/{conversation_id}/stream`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct StreamPath {
    /// The user whose conversation it is (the same rule as in `UserPath`).
    #[param(pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._@+:-]{1,128}$")]
    pub user_id: String,
    /// The conversation (the AI SDK's chat id) whose answer in progress is resumed.
    pub conversation_id: String,
}

/// The body `useChat`'s default transport sends (`messageId` and other fields are ignored).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UseChatRequest {
    /// The chat id: one of the user's conversations, created under this id when new.
    pub id: String,
    /// The chat's messages; the last user message is the prompt (the rest is stored).
    pub messages: Vec<UiMessage>,
    /// `submit-message` or `regenerate-message`.
    #[serde(default)]
    pub trigger: Option<String>,
    /// The agent that answers (a `body` field of the transport); the conversation's, else `chat`.
    #[serde(default)]
    pub agent: Option<String>,
    /// What this message does when the conversation is still answering another (SPEC §13):
    /// `enqueue` (answered after it), `reject` (409 `conversation_busy`), `interrupt` (the
    /// answer in progress ends with its partial answer stored) or `steer` (the answer in
    /// progress stops and one answer covers both); the agent's `busy` by default.
    #[serde(default)]
    pub busy: Option<crate::config::BusyPolicy>,
}

/// One `UIMessage`; only `role` and its `text` parts are read (`id`, `metadata` are ignored).
#[derive(Debug, Deserialize, ToSchema)]
pub struct UiMessage {
    pub role: String,
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub parts: Vec<Value>,
}

impl UiMessage {
    /// The message's `file` parts (`{type: "file", mediaType, url, filename?}`; `url` is a
    /// `data:` URL or an `https` one), each with its part's path under `field`.
    pub fn files(&self, field: &str) -> Vec<(String, ChatAttachment)> {
        let text =
            |part: &Value, key: &str| part.get(key).and_then(Value::as_str).map(str::to_string);
        self.parts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.get("type").and_then(Value::as_str) == Some("file"))
            .map(|(index, part)| {
                let file = ChatAttachment {
                    name: text(part, "filename"),
                    media_type: text(part, "mediaType"),
                    data: None,
                    url: text(part, "url"),
                    file_id: None,
                };
                (format!("{field}[{index}]"), file)
            })
            .collect()
    }

    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The UI message chunks one part becomes.
pub fn chunks(part: UiPart) -> Vec<Value> {
    match part {
        UiPart::RunStarted {
            run_id,
            conversation_id,
        } => vec![json!({
            "type": "start", "messageId": run_id,
            "messageMetadata": {"runId": run_id, "conversationId": conversation_id},
        })],
        UiPart::StepStarted { .. } => vec![json!({"type": "start-step"})],
        UiPart::StepFinished { .. } => vec![json!({"type": "finish-step"})],
        UiPart::TextStart { id } => vec![json!({"type": "text-start", "id": id})],
        UiPart::TextDelta { id, delta } => {
            vec![json!({"type": "text-delta", "id": id, "delta": delta})]
        }
        UiPart::TextEnd { id } => vec![json!({"type": "text-end", "id": id})],
        UiPart::ReasoningStart { id } => vec![json!({"type": "reasoning-start", "id": id})],
        UiPart::ReasoningDelta { id, delta } => {
            vec![json!({"type": "reasoning-delta", "id": id, "delta": delta})]
        }
        UiPart::ReasoningEnd { id } => vec![json!({"type": "reasoning-end", "id": id})],
        UiPart::ToolCall {
            call_id,
            tool,
            arguments,
            ..
        } => vec![json!({
            "type": "tool-input-available", "toolCallId": call_id, "toolName": tool,
            "input": arguments, "providerExecuted": true, "dynamic": true,
        })],
        UiPart::ToolResult {
            call_id,
            output,
            error: None,
        } => vec![json!({
            "type": "tool-output-available", "toolCallId": call_id, "output": output,
            "providerExecuted": true, "dynamic": true,
        })],
        UiPart::ToolResult {
            call_id,
            error: Some(error),
            ..
        } => vec![json!({
            "type": "tool-output-error", "toolCallId": call_id, "errorText": error,
            "providerExecuted": true, "dynamic": true,
        })],
        UiPart::Source {
            call_id,
            file_id,
            name,
            media_type,
        } => vec![json!({
            "type": "source-document", "sourceId": file_id, "mediaType": media_type,
            "title": name, "filename": name,
            "providerMetadata": {"agentd": {
                "toolCallId": call_id, "url": format!("/v1/files/{file_id}/content"),
            }},
        })],
        UiPart::SourceUrl {
            call_id,
            url,
            title,
        } => {
            let mut part = json!({
                "type": "source-url", "sourceId": format!("{call_id}:{url}"), "url": url,
                "providerMetadata": {"agentd": {"toolCallId": call_id}},
            });
            if let Some(title) = title {
                part["title"] = json!(title);
            }
            vec![part]
        }
        UiPart::ApprovalRequested {
            call_id,
            tool,
            arguments,
            ..
        } => vec![
            json!({
                "type": "tool-input-available", "toolCallId": call_id, "toolName": tool,
                "input": arguments, "providerExecuted": true, "dynamic": true,
            }),
            json!({"type": "tool-approval-request", "approvalId": call_id, "toolCallId": call_id}),
        ],
        UiPart::ApprovalDecided { call_id, decision } => vec![json!({
            "type": "data-approval", "id": call_id,
            "data": {"callId": call_id, "decision": decision},
        })],
        UiPart::Progress(progress) => {
            vec![json!({"type": "data-progress", "data": progress, "transient": true})]
        }
        UiPart::Finished(end) => finish_chunks(end),
    }
}

/// `error` (for a failed run) then `finish` with the run's usage and cost as metadata.
fn finish_chunks(end: RunEnd) -> Vec<Value> {
    let finish_reason = match (end.status, end.exit_reason) {
        (RunStatus::Failed, _) => "error",
        (_, Some(ExitReason::MaxTurns | ExitReason::ContextLimit)) => "length",
        (RunStatus::WaitingApproval, _) => "tool-calls",
        (RunStatus::Cancelled, _) => "other",
        _ => "stop",
    };
    let metadata = json!({
        "status": end.status, "exitReason": end.reason_name(),
        "usage": {"inputTokens": end.input_tokens, "outputTokens": end.output_tokens, "totalTokens": end.total_tokens},
        "costUsd": end.cost_usd,
    });
    let mut chunks = Vec::new();
    if let Some(error) = end.error {
        chunks.push(json!({"type": "error", "errorText": error}));
    }
    chunks.push(
        json!({"type": "finish", "finishReason": finish_reason, "messageMetadata": metadata}),
    );
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finish_reason(status: &str, exit_reason: &str) -> Value {
        let status = RunStatus::parse(status).expect("a status");
        let end = RunEnd {
            error: (status == RunStatus::Failed).then(|| "broke".to_string()),
            ..RunEnd::new(status, ExitReason::parse(exit_reason))
        };
        let chunks = chunks(UiPart::Finished(end));
        chunks
            .last()
            .map(|c| c["finishReason"].clone())
            .unwrap_or_default()
    }

    #[test]
    fn finish_reasons_follow_how_the_run_ended() {
        assert_eq!(finish_reason("completed", "final_answer"), "stop");
        assert_eq!(finish_reason("completed", "max_turns"), "length");
        assert_eq!(finish_reason("failed", "llm_error"), "error");
        assert_eq!(finish_reason("cancelled", "cancelled"), "other");
        assert_eq!(
            finish_reason("waiting_approval", "waiting_approval"),
            "tool-calls"
        );
    }

    #[test]
    fn an_approval_request_names_its_tool_call_first() {
        let parts = chunks(UiPart::ApprovalRequested {
            call_id: "c1".into(),
            tool: "rm".into(),
            arguments: json!({}),
            expires_at: None,
        });
        assert_eq!(parts[0]["type"], "tool-input-available");
        assert_eq!(parts[1]["type"], "tool-approval-request");
        assert_eq!(parts[1]["toolCallId"], "c1");
    }

    #[test]
    fn only_text_parts_of_a_message_are_its_text() {
        let message: UiMessage = serde_json::from_value(json!({
            "role": "user",
            "parts": [{"type": "text", "text": "a"}, {"type": "file", "url": "x"}, {"type": "text", "text": "b"}],
        }))
        .expect("message");
        assert_eq!(message.text(), "a\nb");
    }
}
