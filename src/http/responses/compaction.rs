//! The two Responses routes that read a conversation without running it (SPEC §15):
//! `POST /v1/responses/input_tokens` counts what a request would send the model on its first
//! call (its `input_image` and `input_file` parts measured as the run would send them, never
//! stored), and `POST /v1/responses/compact` shortens a conversation to its user messages and one
//! `compaction` item. agentd's compaction item keeps the assistant's answers as text (tool
//! calls, their results and reasoning are dropped); sent back as input it expands to those
//! answers, so the next response reads the conversation without the tool traffic.

use std::sync::Arc;

use axum::extract::{Extension, State};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::wire::{InputTokensDetails, OutputTokensDetails, ResponseUsage};
use super::{attachments, conversations, input, instructions_and_previous, user_key};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiJson, ErrorBody};
use crate::http::wire::string_constant;
use crate::llm::{ChatMessage, Role};
use crate::runtime::Runtime;

/// What marks agentd's own `encrypted_content` (a version, so a later format can differ).
const COMPACTION_PREFIX: &str = "agentd.compaction.v1.";

/// The body of `input_tokens` and `compact`: a response request's conversation parts (its
/// other fields, `tools`, `truncation`, `reasoning`…, are accepted and ignored).
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ConversationRequest {
    /// The agent whose model and tools count (see `GET /v1/models`).
    #[serde(default)]
    #[schema(value_type = String, required, min_length = 1)]
    pub model: Option<String>,
    /// A prompt, or input items as `POST /v1/responses` takes them.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    #[serde(default)]
    pub instructions: Option<String>,
    /// A stored response whose conversation comes before `input`.
    #[serde(default)]
    pub previous_response_id: Option<String>,
    /// The caller's conversation (`conv_…` or `{"id": …}`) whose items come before `input`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub conversation: Option<Value>,
}

string_constant!(InputTokensKind::InputTokens = "response.input_tokens");
string_constant!(CompactionKind::Compaction = "response.compaction");

/// `POST /v1/responses/input_tokens`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct InputTokenCount {
    pub object: InputTokensKind,
    pub input_tokens: u64,
}

/// `POST /v1/responses/compact`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct CompactedResponse {
    /// `cmp_` and a fresh id.
    pub id: String,
    pub object: CompactionKind,
    pub created_at: i64,
    /// The user messages, in order, then one `compaction` item.
    #[schema(value_type = Vec<Object>)]
    pub output: Vec<Value>,
    pub usage: ResponseUsage,
}

/// The conversation a request describes: instructions, then the previous response's or the
/// conversation's messages, then `input`.
async fn conversation_of(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    body: &ConversationRequest,
) -> Result<Vec<ChatMessage>, ApiError> {
    let named = conversations::named_in(
        runtime,
        caller,
        body.conversation.as_ref(),
        body.previous_response_id.as_deref(),
    )
    .await?;
    let mut messages = instructions_and_previous(
        runtime,
        caller,
        body.instructions.as_deref(),
        body.previous_response_id.as_deref(),
        // Compacting never waits for or ends a response still answering.
        crate::config::BusyPolicy::Reject,
    )
    .await?;
    if let Some(id) = named {
        messages.extend(
            runtime
                .conversation_history(&user_key(caller), &id)
                .await
                .map_err(ApiError::store)?,
        );
    }
    let items = input::input_items(body.input.as_ref())?;
    messages.extend(input::read_history(&items, "input")?);
    Ok(messages)
}

fn model_of(body: &ConversationRequest) -> Result<&str, ApiError> {
    body.model
        .as_deref()
        .filter(|model| !model.is_empty())
        .ok_or_else(|| {
            ApiError::invalid_request("`model` is required: the agent whose model counts")
                .with_param("model")
        })
}

#[utoipa::path(
    post,
    path = "/v1/responses/input_tokens",
    tag = "responses",
    summary = "Count the input tokens a Responses request would send",
    request_body = ConversationRequest,
    responses(
        (status = 200, description = "The count, with the agent's system prompt and tools", body = InputTokenCount),
        ErrorBody,
    ),
)]
pub async fn count_input_tokens(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<ConversationRequest>,
) -> Result<axum::Json<InputTokenCount>, ApiError> {
    let agent = caller.model_agent(&runtime, model_of(&body)?)?;
    let mut history = conversation_of(&runtime, &caller, &body).await?;
    let prompt = match history.last() {
        Some(last) if last.role == Role::User => {
            history.pop().and_then(|m| m.content).unwrap_or_default()
        }
        _ => String::new(),
    };
    // Every file of the input counts the same wherever it sits, so all go with the prompt.
    let items = input::input_items(body.input.as_ref())?;
    let files = attachments::measured_of_items(&runtime, &caller, &agent, &items).await?;
    let input_tokens = runtime
        .count_input_tokens(&agent, history, prompt, files)
        .await;
    Ok(axum::Json(InputTokenCount {
        object: InputTokensKind::InputTokens,
        input_tokens,
    }))
}

#[utoipa::path(
    post,
    path = "/v1/responses/compact",
    tag = "responses",
    summary = "Compact a conversation: its user messages and one compaction item",
    request_body = ConversationRequest,
    responses(
        (status = 200, description = "The compacted conversation; send its `output` as the next request's input", body = CompactedResponse),
        ErrorBody,
    ),
)]
pub async fn compact_response(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<ConversationRequest>,
) -> Result<axum::Json<CompactedResponse>, ApiError> {
    let agent = caller.model_agent(&runtime, model_of(&body)?)?;
    let messages = conversation_of(&runtime, &caller, &body).await?;
    if messages.is_empty() {
        return Err(ApiError::invalid_request(
            "there is nothing to compact: send `input`, `previous_response_id` or `conversation`",
        )
        .with_param("input"));
    }
    let input_tokens = runtime
        .count_input_tokens(&agent, messages.clone(), String::new(), Vec::new())
        .await;
    let id = format!("cmp_{}", uuid::Uuid::now_v7().simple());
    let (output, kept) = compacted(&messages, &id);
    let output_tokens = runtime
        .count_input_tokens(&agent, kept, String::new(), Vec::new())
        .await;
    Ok(axum::Json(CompactedResponse {
        id,
        object: CompactionKind::Compaction,
        created_at: chrono::Utc::now().timestamp(),
        output,
        usage: ResponseUsage {
            input_tokens,
            input_tokens_details: InputTokensDetails { cached_tokens: 0 },
            output_tokens,
            output_tokens_details: OutputTokensDetails {
                reasoning_tokens: 0,
            },
            total_tokens: input_tokens + output_tokens,
        },
    }))
}

/// The compacted items (user messages, then the compaction item) and the messages they read
/// back as.
fn compacted(messages: &[ChatMessage], id: &str) -> (Vec<Value>, Vec<ChatMessage>) {
    let text = |m: &ChatMessage| m.content.clone().filter(|t| !t.trim().is_empty());
    let mut output = Vec::new();
    let mut kept = Vec::new();
    let mut answers = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        match (message.role, text(message)) {
            (Role::User, Some(content)) => {
                output.push(json!({
                    "type": "message",
                    "id": format!("{id}_{index}"),
                    "role": "user",
                    "status": "completed",
                    "content": [{"type": "input_text", "text": content}],
                }));
                kept.push(ChatMessage::user(content));
            }
            (Role::Assistant, Some(content)) => answers.push(content),
            _ => {}
        }
    }
    let kept_answers: Vec<ChatMessage> = answers.iter().map(ChatMessage::assistant).collect();
    let encoded = serde_json::to_vec(&answers).unwrap_or_default();
    output.push(json!({
        "type": "compaction",
        "id": format!("{id}_compaction"),
        "encrypted_content": format!("{COMPACTION_PREFIX}{}", URL_SAFE_NO_PAD.encode(encoded)),
    }));
    kept.extend(kept_answers);
    (output, kept)
}

/// The assistant answers an agentd `compaction` item keeps; none for another server's item.
pub(super) fn expand(item: &Value) -> Vec<ChatMessage> {
    let answers = item
        .get("encrypted_content")
        .and_then(Value::as_str)
        .and_then(|content| content.strip_prefix(COMPACTION_PREFIX))
        .and_then(|encoded| URL_SAFE_NO_PAD.decode(encoded).ok())
        .and_then(|bytes| serde_json::from_slice::<Vec<String>>(&bytes).ok())
        .unwrap_or_default();
    answers.iter().map(ChatMessage::assistant).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compaction_keeps_user_messages_and_expands_to_the_answers() {
        let mut call = ChatMessage::assistant("");
        call.content = None;
        let messages = vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("one"),
            call,
            ChatMessage::new(Role::Tool, "result"),
            ChatMessage::assistant("answer one"),
            ChatMessage::user("two"),
        ];
        let (output, _) = compacted(&messages, "cmp_x");
        assert_eq!(output.len(), 3);
        assert_eq!(output[0]["content"][0]["text"], "one");
        assert_eq!(output[1]["content"][0]["text"], "two");
        let expanded = expand(&output[2]);
        assert_eq!(expanded.len(), 1);
        assert_eq!(expanded[0].content.as_deref(), Some("answer one"));
    }

    #[test]
    fn another_servers_compaction_item_expands_to_nothing() {
        assert!(expand(&json!({"type": "compaction", "encrypted_content": "gAAAA"})).is_empty());
        assert!(expand(&json!({"type": "compaction"})).is_empty());
    }
}
