//! LLM providers: the `Provider` trait every vendor implements, the request and streamed-delta
//! types the session loop speaks, and failure classification.
//!
//! A provider turns one [`LlmRequest`] into a stream of [`LlmDelta`]s and classifies every
//! failure exactly once as an [`LlmError`], so the session loop can decide retry, cycle or stop
//! without knowing any wire format. Providers never touch the conversation or emit events.

pub mod openai;
pub mod sse;
pub mod tokens;

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
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning: None,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool offered to the model, in function-calling form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// Sampling parameters; `None` means "do not send", so the upstream default applies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingParams {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub repeat_penalty: Option<f64>,
    pub max_output_tokens: Option<u32>,
}

/// One LLM call as the session prepares it.
#[derive(Debug, Clone)]
pub struct LlmRequest {
    /// The upstream model id (the part after `provider/` in an agent's `models`).
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolDefinition>,
    pub sampling: SamplingParams,
    /// Inactivity timeout: reset by every streamed chunk.
    pub timeout: Duration,
}

/// Token usage as reported by the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
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
            "stop" | "end_turn" | "eos" | "end" => Self::Stop,
            "length" | "max_tokens" => Self::Length,
            "tool_calls" | "function_call" | "tool_use" => Self::ToolCalls,
            "content_filter" => Self::ContentFilter,
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
    Usage(Usage),
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
}

impl LlmError {
    /// Fatal errors end the session at once; everything else may move to the next target.
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::Auth(_) | Self::QuotaExceeded(_))
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

/// The assembled result of one streamed response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmResponse {
    pub text: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    pub stop_reason: Option<StopReason>,
}

/// Accumulates deltas into an [`LlmResponse`], assembling tool-call fragments by index.
#[derive(Debug, Default)]
pub struct ResponseAssembler {
    response: LlmResponse,
    /// Tool calls under construction keyed by stream index, in first-seen order.
    partial_calls: Vec<(usize, ToolCall)>,
}

impl ResponseAssembler {
    pub fn push(&mut self, delta: &LlmDelta) {
        match delta {
            LlmDelta::Text(t) => self.response.text.push_str(t),
            LlmDelta::Reasoning(t) => self.response.reasoning.push_str(t),
            LlmDelta::ToolCallFragment {
                index,
                id,
                name,
                arguments,
            } => self.push_fragment(*index, id.as_deref(), name.as_deref(), arguments),
            LlmDelta::Usage(u) => self.response.usage = Some(*u),
            LlmDelta::Stop(r) => self.response.stop_reason = Some(r.clone()),
        }
    }

    fn push_fragment(
        &mut self,
        index: usize,
        id: Option<&str>,
        name: Option<&str>,
        arguments: &str,
    ) {
        let position = self.partial_calls.iter().position(|(i, _)| *i == index);
        let call = match position {
            Some(p) => &mut self.partial_calls[p].1,
            None => {
                self.partial_calls.push((
                    index,
                    ToolCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    },
                ));
                let last = self.partial_calls.len() - 1;
                &mut self.partial_calls[last].1
            }
        };
        if let Some(id) = id.filter(|s| !s.is_empty()) {
            call.id = id.to_string();
        }
        if let Some(name) = name.filter(|s| !s.is_empty()) {
            call.name.push_str(name);
        }
        call.arguments.push_str(arguments);
    }

    pub fn finish(mut self) -> LlmResponse {
        self.response.tool_calls = self.partial_calls.into_iter().map(|(_, c)| c).collect();
        self.response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembler_joins_text_and_tool_fragments_by_index() {
        let mut a = ResponseAssembler::default();
        a.push(&LlmDelta::Text("Hel".into()));
        a.push(&LlmDelta::Text("lo".into()));
        a.push(&LlmDelta::ToolCallFragment {
            index: 0,
            id: Some("c1".into()),
            name: Some("t__a".into()),
            arguments: String::new(),
        });
        a.push(&LlmDelta::ToolCallFragment {
            index: 1,
            id: Some("c2".into()),
            name: Some("t__b".into()),
            arguments: "{}".into(),
        });
        a.push(&LlmDelta::ToolCallFragment {
            index: 0,
            id: None,
            name: None,
            arguments: "{\"x\":".into(),
        });
        a.push(&LlmDelta::ToolCallFragment {
            index: 0,
            id: None,
            name: None,
            arguments: "1}".into(),
        });
        a.push(&LlmDelta::Stop(StopReason::ToolCalls));
        let r = a.finish();
        assert_eq!(r.text, "Hello");
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(
            r.tool_calls[0],
            ToolCall {
                id: "c1".into(),
                name: "t__a".into(),
                arguments: "{\"x\":1}".into()
            }
        );
        assert_eq!(r.tool_calls[1].arguments, "{}");
        assert_eq!(r.stop_reason, Some(StopReason::ToolCalls));
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
