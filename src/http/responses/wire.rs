//! The OpenAI Responses wire format agentd speaks (SPEC §9.1): the `POST /v1/responses` body,
//! the `response` object with its output items, the streamed events (each with
//! `sequence_number`) and the input-item list. Types only; the handlers, the input reader and
//! the event projector live beside this file.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::http::wire::{AssistantRole, ListObject, string_constant};

/// `POST /v1/responses`; `model` names an agent. `include`, `truncation` and
/// `prompt_cache_key` are read and checked; fields agentd has no use for (`reasoning`,
/// `client_metadata`, `service_tier`, …) are accepted and ignored, as stateless clients (Codex,
/// the Agents SDK) send them.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct CreateResponse {
    /// The agent to run (see `GET /v1/models`).
    pub model: String,
    /// A prompt, or input items: `message` (also without `type`), `function_call`,
    /// `function_call_output`, `mcp_approval_response` (`{approval_request_id, approve,
    /// reason?}`: decides a call the run waits on; the response then follows that run on);
    /// `reasoning` and other items a client replays are skipped.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// Added to the agent's system prompt for this response.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Continue the conversation of this stored response (the caller's own).
    #[serde(default)]
    pub previous_response_id: Option<String>,
    /// The caller's conversation (`conv_…`, or `{"id": …}`) this response continues and adds
    /// to: the alternative to `previous_response_id` (SPEC §15).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub conversation: Option<Value>,
    /// Extra output to include (`reasoning.encrypted_content`, …): accepted; agentd's output
    /// carries what it has.
    #[serde(default)]
    pub include: Option<Vec<String>>,
    /// `auto` or `disabled`: accepted; the agent's context guard keeps the window either way.
    #[serde(default)]
    pub truncation: Option<Truncation>,
    /// A provider-side cache hint: accepted and ignored (agentd's own cache keys by request).
    #[serde(default)]
    pub prompt_cache_key: Option<String>,
    #[serde(default)]
    pub stream: Option<bool>,
    /// Answer at once (`queued`) and run on without the client.
    #[serde(default)]
    pub background: Option<bool>,
    /// What this request does when its `conversation` or `previous_response_id` is still
    /// answering (SPEC §13): `enqueue` (answered after it), `reject` (409 `conversation_busy`
    /// naming `busy`), `interrupt` (the answer in progress ends with its partial answer stored)
    /// or `steer` (a `conversation` only: the answer in progress stops and one answer covers
    /// both; 400 with `previous_response_id`); the agent's `busy` by default.
    #[serde(default)]
    pub busy: Option<crate::config::BusyPolicy>,
    /// A background response's own webhook receiver (`background: true` only, 400 naming
    /// `webhook` otherwise): told `response.completed`, `response.failed` or
    /// `response.cancelled` when it ends, also after a wait for approval (SPEC §13), signed
    /// with the server's `webhookDelivery.secret`.
    #[serde(default)]
    pub webhook: Option<crate::http::webhooks::RunWebhook>,
    /// Keep the response for `GET`, `previous_response_id` and `input_items` (default true).
    #[serde(default)]
    pub store: Option<bool>,
    /// `text.format`: `text`, `json_object` or `json_schema` (`{name, schema, strict?}`).
    #[serde(default)]
    pub text: Option<TextOptions>,
    /// Overrides the agent's output token limit.
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    pub max_output_tokens: Option<u32>,
    /// Overrides the agent's temperature.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Overrides the agent's top_p.
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Client tools: `function` tools are offered to the model (SPEC §9.2); other tool types
    /// (hosted tools, namespaces, `mcp`) are tolerated and not offered.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// `auto`, `none`, `required` or `{"type": "function", "name"}`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    /// Up to 16 string pairs, echoed in the response.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    /// With an admin key, the user the response is for (like the `x-agentd-user` header); with
    /// another key its own user, or ignored.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub user: Option<Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct TextOptions {
    #[serde(default)]
    pub format: Option<TextFormat>,
}

/// `truncation`: what to do with a conversation past the model's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Truncation {
    Auto,
    #[default]
    Disabled,
}

/// The conversation a response belongs to, as echoed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ConversationRef {
    pub id: String,
}

/// The answer's format.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TextFormat {
    /// `text`, `json_object` or `json_schema`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The JSON schema of the answer (`json_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

string_constant!(ResponseKind::Response = "response");

/// A response's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    Queued,
    InProgress,
    Completed,
    Incomplete,
    Failed,
    Cancelled,
}

/// The `response` object.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ResponseObject {
    /// `resp_` followed by the run id (and, for a response continuing a run after a wait for
    /// approvals, `_<seq>`).
    pub id: String,
    pub object: ResponseKind,
    /// Unix seconds.
    pub created_at: i64,
    pub status: ResponseStatus,
    pub background: bool,
    #[schema(required)]
    pub error: Option<ResponseError>,
    #[schema(required)]
    pub incomplete_details: Option<IncompleteDetails>,
    #[schema(required)]
    pub instructions: Option<String>,
    #[schema(required)]
    pub max_output_tokens: Option<u32>,
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// The agent.
    pub model: String,
    pub output: Vec<OutputItem>,
    pub parallel_tool_calls: bool,
    #[schema(required)]
    pub previous_response_id: Option<String>,
    pub store: bool,
    #[schema(required)]
    pub temperature: Option<f64>,
    #[schema(required)]
    pub top_p: Option<f64>,
    pub text: TextOptions,
    #[schema(value_type = Object)]
    pub tool_choice: Value,
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<Value>,
    /// As sent (default `disabled`); the agent's context guard manages the window either way.
    pub truncation: Truncation,
    /// The conversation the response added to, when it named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<ConversationRef>,
    #[schema(required)]
    pub usage: Option<ResponseUsage>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ResponseError {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct IncompleteDetails {
    /// `max_output_tokens`: the agent ran out of turns or context before answering.
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ResponseUsage {
    pub input_tokens: u64,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InputTokensDetails {
    pub cached_tokens: u64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u64,
}

/// An item's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    InProgress,
    Completed,
    Failed,
}

/// One output item.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    /// The answer.
    Message {
        id: String,
        status: ItemStatus,
        role: AssistantRole,
        content: Vec<OutputText>,
    },
    /// The model's thinking, as summary text.
    Reasoning {
        id: String,
        summary: Vec<SummaryText>,
    },
    /// A tool agentd ran itself.
    McpCall {
        id: String,
        status: ItemStatus,
        /// The tool's server (MCP server, REST tools, `agent` for sub-agents).
        server_label: String,
        name: String,
        /// The arguments as JSON text.
        arguments: String,
        #[schema(required)]
        output: Option<String>,
        #[schema(required)]
        error: Option<String>,
    },
    /// A call of an agent tool that waits for a person's approval (SPEC §8): the response ends
    /// with it (`completed`); answer it with an `mcp_approval_response` item naming `id` and
    /// `previous_response_id`. `id` is `mcpr_<run id without dashes>_<call id>`, so a
    /// `store: false` client that replays this item with its answer needs nothing else.
    McpApprovalRequest {
        id: String,
        /// The tool's server (MCP server, REST tools, `agent` for sub-agents).
        server_label: String,
        name: String,
        /// The arguments as JSON text.
        arguments: String,
    },
    /// A client tool for the client to run; answer it with a `function_call_output` item.
    FunctionCall {
        id: String,
        status: ItemStatus,
        call_id: String,
        name: String,
        /// The arguments as JSON text.
        arguments: String,
    },
}

/// `{"type": "output_text", "text", "annotations": []}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OutputText {
    #[serde(rename = "type")]
    pub kind: OutputTextKind,
    pub text: String,
    #[schema(value_type = Vec<Object>)]
    pub annotations: Vec<Value>,
    #[schema(value_type = Vec<Object>)]
    pub logprobs: Vec<Value>,
}

string_constant!(OutputTextKind::OutputText = "output_text");
string_constant!(SummaryTextKind::SummaryText = "summary_text");

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SummaryText {
    #[serde(rename = "type")]
    pub kind: SummaryTextKind,
    pub text: String,
}

/// One streamed event: `event: <type>` and this as `data`, numbered from 0 by
/// `sequence_number`; the same run always gives the same numbers, so `starting_after` resumes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ResponseStreamFrame {
    #[serde(flatten)]
    pub event: ResponseStreamEvent,
    pub sequence_number: u64,
}

/// The streamed events (SPEC §9.1); exactly one of `response.completed`,
/// `response.incomplete`, `response.failed` ends a stream.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "type")]
pub enum ResponseStreamEvent {
    #[serde(rename = "response.created")]
    Created { response: Box<ResponseObject> },
    #[serde(rename = "response.in_progress")]
    InProgress { response: Box<ResponseObject> },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputText,
    },
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputText,
    },
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
        #[schema(value_type = Vec<Object>)]
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
        #[schema(value_type = Vec<Object>)]
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.reasoning_summary_part.added")]
    ReasoningSummaryPartAdded {
        item_id: String,
        output_index: usize,
        summary_index: usize,
        part: SummaryText,
    },
    #[serde(rename = "response.reasoning_summary_part.done")]
    ReasoningSummaryPartDone {
        item_id: String,
        output_index: usize,
        summary_index: usize,
        part: SummaryText,
    },
    #[serde(rename = "response.reasoning_summary_text.delta")]
    ReasoningSummaryTextDelta {
        item_id: String,
        output_index: usize,
        summary_index: usize,
        delta: String,
    },
    #[serde(rename = "response.reasoning_summary_text.done")]
    ReasoningSummaryTextDone {
        item_id: String,
        output_index: usize,
        summary_index: usize,
        text: String,
    },
    #[serde(rename = "response.mcp_call.in_progress")]
    McpCallInProgress {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_call.completed")]
    McpCallCompleted {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_call.failed")]
    McpCallFailed {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone {
        item_id: String,
        output_index: usize,
        name: String,
        arguments: String,
    },
    #[serde(rename = "response.completed")]
    Completed { response: Box<ResponseObject> },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Box<ResponseObject> },
    #[serde(rename = "response.failed")]
    Failed { response: Box<ResponseObject> },
    /// A failure after the stream began (it is followed by `response.failed`).
    #[serde(rename = "error")]
    Error {
        code: String,
        message: String,
        #[schema(required)]
        param: Option<String>,
    },
}

impl ResponseStreamEvent {
    /// The SSE `event:` name, equal to the `type` field.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Created { .. } => "response.created",
            Self::InProgress { .. } => "response.in_progress",
            Self::OutputItemAdded { .. } => "response.output_item.added",
            Self::OutputItemDone { .. } => "response.output_item.done",
            Self::ContentPartAdded { .. } => "response.content_part.added",
            Self::ContentPartDone { .. } => "response.content_part.done",
            Self::OutputTextDelta { .. } => "response.output_text.delta",
            Self::OutputTextDone { .. } => "response.output_text.done",
            Self::ReasoningSummaryPartAdded { .. } => "response.reasoning_summary_part.added",
            Self::ReasoningSummaryPartDone { .. } => "response.reasoning_summary_part.done",
            Self::ReasoningSummaryTextDelta { .. } => "response.reasoning_summary_text.delta",
            Self::ReasoningSummaryTextDone { .. } => "response.reasoning_summary_text.done",
            Self::McpCallInProgress { .. } => "response.mcp_call.in_progress",
            Self::McpCallCompleted { .. } => "response.mcp_call.completed",
            Self::McpCallFailed { .. } => "response.mcp_call.failed",
            Self::FunctionCallArgumentsDelta { .. } => "response.function_call_arguments.delta",
            Self::FunctionCallArgumentsDone { .. } => "response.function_call_arguments.done",
            Self::Completed { .. } => "response.completed",
            Self::Incomplete { .. } => "response.incomplete",
            Self::Failed { .. } => "response.failed",
            Self::Error { .. } => "error",
        }
    }
}

/// `GET /v1/responses/{id}/input_items`.
#[derive(Debug, Serialize, ToSchema)]
pub struct InputItemList {
    pub object: ListObject,
    /// The request's input items, each with an `id`.
    #[schema(value_type = Vec<Object>)]
    pub data: Vec<Value>,
    #[schema(required)]
    pub first_id: Option<String>,
    #[schema(required)]
    pub last_id: Option<String>,
    pub has_more: bool,
}

string_constant!(DeletedKind::Response = "response");

/// `DELETE /v1/responses/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedResponse {
    pub id: String,
    pub object: DeletedKind,
    pub deleted: bool,
}

/// `GET /v1/responses/{id}` query.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RetrieveQuery {
    /// Stream the response's events (replayed, then live) instead of the object.
    #[serde(default)]
    pub stream: Option<bool>,
    /// With `stream`: only events after this `sequence_number`.
    #[serde(default)]
    pub starting_after: Option<u64>,
}

/// The `{response_id}` of a route.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ResponsePath {
    /// The response's id (`resp_…`).
    pub response_id: String,
}
