//! LLM providers: the `Provider` trait every vendor implements, the request and streamed-delta
//! types the session loop speaks, and failure classification.
//!
//! A provider turns one [`LlmRequest`] into a stream of [`LlmDelta`]s and classifies every
//! failure exactly once as an [`LlmError`], so the session loop can decide retry, cycle or stop
//! without knowing any wire format. Providers never touch the conversation or emit events.

pub mod anthropic;
mod assembler;
pub mod attachments;
pub mod catalog;
pub mod failure;
pub mod google;
pub mod ndjson;
pub mod ollama;
pub mod openai;
pub mod parameters;
pub mod scripted;
pub mod settings;
pub mod sse;
pub mod stream;
pub mod tokens;
pub mod upstream;
mod wire_body;

pub use crate::vocabulary::{Attachment, AttachmentKind};
pub use assembler::{LlmResponse, ResponseAssembler};
pub use settings::{ReasoningLevel, ReasoningTokens, SamplingParams};

use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::Stream;
use serde::{Deserialize, Serialize};

/// A message in the OpenAI shape; the session's conversation and every provider request use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    /// Text content; `None` for an assistant message that only calls tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Reasoning the model produced with this message, kept so the next turn can see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// The vendor's opaque proof of that reasoning (Anthropic thinking `signature`, Gemini
    /// `thoughtSignature`); replayed with the reasoning so the model may continue from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_signature: Option<String>,
    /// Reasoning the vendor encrypted (Anthropic `redacted_thinking` `data`), replayed as given
    /// in the next request of a tool-use turn; never shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted_reasoning: Vec<String>,
    /// Files sent with the message (SPEC §11): metadata when stored, content once loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning: None,
            reasoning_signature: None,
            redacted_reasoning: Vec::new(),
            attachments: Vec::new(),
        }
    }
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A complete tool call requested by the model (arguments are the raw JSON text it produced).
/// Serialised in the OpenAI message shape, `{id, type: "function", function: {name,
/// arguments}}`, as stored conversations and results keep it (SPEC §5); read from that shape or
/// from the flat `{id, name, arguments}` earlier versions stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "OpenAiToolCall", from = "StoredToolCall")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// [`ToolCall`] in the OpenAI message shape.
#[derive(Serialize, Deserialize)]
struct OpenAiToolCall {
    id: String,
    #[serde(rename = "type", default = "function_type")]
    kind: String,
    function: OpenAiFunction,
}

#[derive(Serialize, Deserialize)]
struct OpenAiFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

fn function_type() -> String {
    "function".into()
}

/// Either shape a stored [`ToolCall`] may have.
#[derive(Deserialize)]
#[serde(untagged)]
enum StoredToolCall {
    OpenAi(OpenAiToolCall),
    Flat {
        id: String,
        name: String,
        #[serde(default)]
        arguments: String,
    },
}

impl From<ToolCall> for OpenAiToolCall {
    fn from(call: ToolCall) -> Self {
        Self {
            id: call.id,
            kind: function_type(),
            function: OpenAiFunction {
                name: call.name,
                arguments: call.arguments,
            },
        }
    }
}

impl From<StoredToolCall> for ToolCall {
    fn from(stored: StoredToolCall) -> Self {
        match stored {
            StoredToolCall::OpenAi(call) => Self {
                id: call.id,
                name: call.function.name,
                arguments: call.function.arguments,
            },
            StoredToolCall::Flat {
                id,
                name,
                arguments,
            } => Self {
                id,
                name,
                arguments,
            },
        }
    }
}

/// A tool offered to the model, in function-calling form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// One LLM call as the session prepares it.
#[derive(Debug, Clone)]
pub struct LlmRequest {
    /// The upstream model id (the part after `provider/` in an agent's `models`).
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolDefinition>,
    pub sampling: SamplingParams,
    /// Which tool the model must call, when a client asked (`tool_choice`); `auto` otherwise.
    pub tool_choice: Option<ToolChoice>,
    /// Inactivity timeout: reset by every streamed chunk.
    pub timeout: Duration,
    /// `llmResponseMaxBytes`: the most bytes of output the response may carry, and of its
    /// body when it is not streamed.
    pub max_response_bytes: usize,
}

/// A client's `tool_choice` as the providers are told it (SPEC §9.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Function(String),
}

impl ToolChoice {
    /// The OpenAI Chat Completions `tool_choice` value.
    pub fn openai_value(&self) -> serde_json::Value {
        match self {
            Self::Auto => serde_json::json!("auto"),
            Self::Required => serde_json::json!("required"),
            Self::Function(name) => {
                serde_json::json!({"type": "function", "function": {"name": name}})
            }
        }
    }

    /// The Anthropic Messages `tool_choice` value.
    pub fn anthropic_value(&self) -> serde_json::Value {
        match self {
            Self::Auto => serde_json::json!({"type": "auto"}),
            Self::Required => serde_json::json!({"type": "any"}),
            Self::Function(name) => serde_json::json!({"type": "tool", "name": name}),
        }
    }
}

/// Token usage as reported by the provider, normalised to the OpenAI convention whatever the
/// vendor: `input_tokens` counts the whole prompt, the cached part (`cached_tokens`, read from
/// the prompt cache) and the part written to the cache (`cache_write_tokens`) included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: u64,
    /// Prompt tokens written to the provider's cache by this call.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Output tokens spent reasoning (part of `output_tokens`), when the provider says.
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// What a routing provider (OpenRouter) reports about the call beyond tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseMetadata {
    /// The cost the provider charged, in USD; beats any cost computed from a price table.
    pub cost_usd: Option<f64>,
    /// The upstream that actually served the call (e.g. `Anthropic` behind OpenRouter).
    pub actual_provider: Option<String>,
    /// The model that actually answered, when the router reports one.
    pub actual_model: Option<String>,
}

impl ResponseMetadata {
    /// Fills what `other` knows, keeping what it does not.
    pub fn merge(&mut self, other: ResponseMetadata) {
        self.cost_usd = other.cost_usd.or(self.cost_usd);
        self.actual_provider = other.actual_provider.or(self.actual_provider.take());
        self.actual_model = other.actual_model.or(self.actual_model.take());
    }
}

/// Why the model stopped, normalised across vendors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Other(String),
}

impl StopReason {
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::ContentFilter => "content_filter",
            Self::Other(other) => other,
        }
    }

    pub fn from_openai(reason: &str) -> Self {
        match reason {
            "stop" | "end_turn" | "eos" | "end" | "stop_sequence" => Self::Stop,
            "length" | "max_tokens" => Self::Length,
            "tool_calls" | "function_call" | "tool_use" => Self::ToolCalls,
            "content_filter" | "refusal" => Self::ContentFilter,
            other => Self::Other(other.to_string()),
        }
    }
}

/// One piece of a streamed response.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmDelta {
    Text(String),
    Reasoning(String),
    /// A fragment of a tool call; fragments with the same `index` belong to one call.
    ToolCallFragment {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    /// Cumulative usage so far; a later `Usage` replaces an earlier one.
    Usage(Usage),
    /// The opaque signature of the reasoning streamed so far (see [`ChatMessage`]).
    ReasoningSignature(String),
    /// One block of encrypted reasoning (see [`ChatMessage::redacted_reasoning`]).
    RedactedReasoning(String),
    /// Cost and routing facts; merged into the response's [`ResponseMetadata`].
    Metadata(ResponseMetadata),
    Stop(StopReason),
}

/// Every provider failure, classified once at the provider edge.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("rate limited: {message}")]
    RateLimit {
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("authentication failed: {0}")]
    Auth(String),
    #[error("quota exceeded: {0}")]
    QuotaExceeded(String),
    #[error("model error: {0}")]
    Model(String),
    #[error("network error: {0}")]
    Network(String),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    /// The response passed `llmResponseMaxBytes` (an upstream that never stops, a huge body).
    /// Never retried: another attempt would cost as much again.
    #[error("response too large: {0}")]
    TooLarge(String),
}

impl LlmError {
    /// A short name of the kind of failure (OpenTelemetry's `error.type`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RateLimit { .. } => "rate_limited",
            Self::Auth(_) => "auth_failure",
            Self::QuotaExceeded(_) => "quota_exceeded",
            Self::Model(_) => "model_error",
            Self::Network(_) => "network_error",
            Self::Timeout(_) => "timeout",
            Self::InvalidResponse(_) => "invalid_response",
            Self::TooLarge(_) => "too_large",
        }
    }

    /// The same error with its message rewritten by `rewrite`.
    pub fn map_message(self, rewrite: impl Fn(String) -> String) -> Self {
        match self {
            Self::RateLimit {
                retry_after,
                message,
            } => Self::RateLimit {
                retry_after,
                message: rewrite(message),
            },
            Self::Auth(m) => Self::Auth(rewrite(m)),
            Self::QuotaExceeded(m) => Self::QuotaExceeded(rewrite(m)),
            Self::Model(m) => Self::Model(rewrite(m)),
            Self::Network(m) => Self::Network(rewrite(m)),
            Self::Timeout(m) => Self::Timeout(rewrite(m)),
            Self::InvalidResponse(m) => Self::InvalidResponse(rewrite(m)),
            Self::TooLarge(m) => Self::TooLarge(rewrite(m)),
        }
    }

    /// The same error with `hint` (what the user can do) appended to its message.
    pub fn with_hint(self, hint: &str) -> Self {
        self.map_message(|message| format!("{message} ({hint})"))
    }

    /// Fatal errors end the session at once; everything else may move to the next target.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Self::Auth(_) | Self::QuotaExceeded(_) | Self::TooLarge(_)
        )
    }
}

pub type DeltaStream = Pin<Box<dyn Stream<Item = Result<LlmDelta, LlmError>> + Send>>;

/// An LLM vendor adapter. Implementations must be cheap to share (`Arc<dyn Provider>`).
#[async_trait]
pub trait Provider: Send + Sync {
    /// Starts the call; the returned stream yields deltas until the response is complete.
    /// Errors before the first byte come back as `Err`; errors mid-stream as an `Err` item.
    async fn stream(&self, request: LlmRequest) -> Result<DeltaStream, LlmError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_are_kept_in_the_openai_shape_and_read_from_either() {
        let call = ToolCall {
            id: "c1".into(),
            name: "time__now".into(),
            arguments: "{}".into(),
        };
        let stored = serde_json::to_value(&call).expect("serialises");
        assert_eq!(
            stored,
            serde_json::json!({"id": "c1", "type": "function", "function": {"name": "time__now", "arguments": "{}"}})
        );
        let back: ToolCall = serde_json::from_value(stored).expect("reads back");
        assert_eq!(back, call);
        let flat = serde_json::json!({"id": "c1", "name": "time__now", "arguments": "{}"});
        assert_eq!(
            serde_json::from_value::<ToolCall>(flat).expect("old shape"),
            call
        );
    }

    #[test]
    fn stop_reasons_normalise_across_vendors() {
        assert_eq!(StopReason::from_openai("end_turn"), StopReason::Stop);
        assert_eq!(StopReason::from_openai("max_tokens"), StopReason::Length);
        assert_eq!(
            StopReason::from_openai("weird"),
            StopReason::Other("weird".into())
        );
    }
}
