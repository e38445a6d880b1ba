//! The Anthropic Messages wire format agentd speaks: the request it accepts, the `message`
//! answer, every streamed event (`message_start`, `content_block_start/delta/stop`,
//! `message_delta`, `message_stop`), Anthropic's error body and its model list. Types only; the
//! handler and the event translator live in the parent module. Events borrow their strings, so a
//! streamed token costs one serialised frame and no JSON tree.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

use utoipa::openapi::{self, RefOr};
use utoipa::{IntoResponses, ToSchema};

use crate::http::wire::{AssistantRole, string_constant};
use crate::vocabulary::result::UsageTotals;

/// `POST /v1/messages`; `model` names an agent (or, when it names none, `server.defaultAgent`
/// answers). The other fields of Anthropic's API (`thinking`, `context_management`,
/// `output_config`, `metadata`, `stop_sequences`, …) are accepted and not used: the agent's
/// own settings decide its reasoning, context and output.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MessagesRequest {
    /// The agent to run (see `GET /v1/models`).
    pub model: String,
    /// The conversation: earlier messages become the history, the last (a user message) the
    /// prompt.
    #[schema(min_items = 1)]
    pub messages: Vec<AnthropicMessage>,
    /// Put before the history as a system message.
    #[serde(default)]
    pub system: Option<TextOrBlocks>,
    /// The answer's output token limit, at most the agent's own limit — or, when it sets none,
    /// a quarter of its smallest context window (clients size this for Claude models).
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub stream: Option<bool>,
    /// Overrides the agent's temperature.
    pub temperature: Option<f64>,
    /// Overrides the agent's top_p.
    pub top_p: Option<f64>,
    /// Client tools (SPEC §9.2): `{name, description?, input_schema}` tools are offered to the
    /// model beside the agent's own; a call to one ends the answer with `stop_reason:
    /// "tool_use"`. Anthropic's server tools (with a `type`) are tolerated and not offered.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// `{"type": "auto" | "any" | "none"}` or `{"type": "tool", "name"}`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
}

/// `POST /v1/messages/count_tokens`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenCount {
    pub input_tokens: u64,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct AnthropicMessage {
    /// `user`, `assistant` or `system` (a system turn: leading ones join the system prompt,
    /// later ones stay in the conversation).
    pub role: String,
    pub content: TextOrBlocks,
}

/// Text, or content blocks: `text` is read, `thinking` skipped, tool blocks read as calls and
/// results, any other type refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum TextOrBlocks {
    Text(String),
    Blocks(Vec<RequestContentBlock>),
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct RequestContentBlock {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
    /// A `tool_use` block's call id.
    #[serde(default)]
    pub id: Option<String>,
    /// A `tool_use` block's tool.
    #[serde(default)]
    pub name: Option<String>,
    /// A `tool_use` block's arguments.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// The call a `tool_result` block answers.
    #[serde(default)]
    pub tool_use_id: Option<String>,
    /// A `tool_result` block's result: text, or text, `tool_reference`, image and document
    /// blocks (the last two become a line saying they are not shown).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub content: Option<Value>,
    /// An `image` or `document` block's content (SPEC §11).
    #[serde(default)]
    pub source: Option<BlockSource>,
    /// A `document` block's title, kept as the file's name.
    #[serde(default)]
    pub title: Option<String>,
}

/// Where an `image` or `document` block's content is: `base64` (`media_type`, `data`), `url`,
/// `text` (`data`) or `file` (`file_id` of the Files API).
#[derive(Debug, Deserialize, ToSchema)]
pub struct BlockSource {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub data: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub file_id: Option<String>,
}

string_constant!(MessageType::Message = "message");
string_constant!(ErrorType::Error = "error");
string_constant!(ModelType::Model = "model");

/// The non-streamed answer, and (empty, without a stop reason) the `message` of `message_start`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Message<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub role: AssistantRole,
    pub model: &'a str,
    pub content: Vec<ContentBlock<'a>>,
    #[schema(required)]
    pub stop_reason: Option<StopReason>,
    /// Always null: agents stop on their own.
    #[schema(required)]
    pub stop_sequence: Option<&'a str>,
    pub usage: MessageUsage,
}

/// Why the answer ended: `end_turn` (an answer) or `max_tokens` (turns or context exhausted; the
/// text is the agent's failure report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    /// The model called client tools: run them and answer with `tool_result` blocks.
    ToolUse,
}

/// A block of the answer: the model's thinking, then the text.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock<'a> {
    Thinking {
        thinking: &'a str,
    },
    Text {
        text: &'a str,
    },
    /// A call to a client tool.
    ToolUse {
        id: &'a str,
        name: &'a str,
        #[schema(value_type = Object)]
        input: Value,
    },
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MessageUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Absent in `message_start`, whose usage is not known yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub cache_read_input_tokens: Option<u64>,
}

impl MessageUsage {
    /// The zero usage `message_start` announces.
    pub const NOT_YET_KNOWN: Self = Self {
        input_tokens: 0,
        output_tokens: 0,
        cache_read_input_tokens: None,
    };
}

impl From<&UsageTotals> for MessageUsage {
    fn from(usage: &UsageTotals) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_input_tokens: Some(usage.cached_tokens),
        }
    }
}

/// One streamed event; the SSE `event:` name equals its `type` (see [`StreamEvent::name`]).
/// A failure after the stream started is an `error` event holding an [`AnthropicErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent<'a> {
    MessageStart {
        message: Message<'a>,
    },
    ContentBlockStart {
        index: usize,
        content_block: ContentBlock<'a>,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta<'a>,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        usage: MessageUsage,
    },
    MessageStop,
}

impl StreamEvent<'_> {
    /// The SSE `event:` name, equal to the `type` field.
    pub fn name(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
        }
    }
}

/// The text a `content_block_delta` adds to the open block.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[expect(
    clippy::enum_variant_names,
    reason = "the wire names: text_delta, thinking_delta, input_json_delta"
)]
pub enum BlockDelta<'a> {
    TextDelta {
        text: &'a str,
    },
    ThinkingDelta {
        thinking: &'a str,
    },
    /// A client tool call's arguments (JSON text).
    InputJsonDelta {
        partial_json: &'a str,
    },
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MessageDelta {
    pub stop_reason: StopReason,
    /// Always null: agents stop on their own.
    #[schema(required)]
    pub stop_sequence: Option<String>,
}

/// Anthropic's error body, `{"type": "error", "error": {"type", "message"}}`, so its SDK maps
/// errors to its exception classes; also the data of a streamed `error` event.
#[derive(Debug, Serialize, ToSchema)]
pub struct AnthropicErrorBody<'a> {
    #[serde(rename = "type")]
    pub kind: ErrorType,
    pub error: AnthropicErrorDetail<'a>,
}

/// In the handler's `responses(…, AnthropicErrorBody)`: every error status, as `default`.
impl IntoResponses for AnthropicErrorBody<'_> {
    fn responses() -> BTreeMap<String, RefOr<openapi::Response>> {
        crate::http::error::error_responses::<Self>("An error, in Anthropic's shape")
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AnthropicErrorDetail<'a> {
    /// `invalid_request_error`, `authentication_error`, `permission_error`, `not_found_error`,
    /// `request_too_large`, `rate_limit_error`, `overloaded_error` or `api_error`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub message: &'a str,
}

/// `GET /v1/models` with `anthropic-version`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AnthropicModelList {
    pub data: Vec<AnthropicModel>,
    pub has_more: bool,
    /// Null when there are no agents.
    #[schema(required)]
    pub first_id: Option<String>,
    #[schema(required)]
    pub last_id: Option<String>,
}

/// An agent as an Anthropic model.
#[derive(Debug, Serialize, ToSchema)]
pub struct AnthropicModel {
    #[serde(rename = "type")]
    pub kind: ModelType,
    /// The agent's name.
    pub id: String,
    /// The agent's description, or its name when it has none.
    pub display_name: String,
    /// When this server started (RFC 3339).
    pub created_at: String,
}
