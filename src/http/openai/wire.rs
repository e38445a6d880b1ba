//! The OpenAI wire format agentd speaks: the Chat Completions request it accepts, the
//! `chat.completion` answer, the streamed `chat.completion.chunk` frames and the model list.
//! Types only; the handlers and the event translator live in the parent module. Streamed chunks
//! borrow their strings, so a token costs one serialised frame and no JSON tree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::http::wire::{AssistantRole, ListObject, string_constant};
use crate::vocabulary::result::UsageTotals;

/// `POST /v1/chat/completions`; `model` names an agent.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatCompletionRequest {
    /// The agent to run (see `GET /v1/models`).
    pub model: String,
    /// The conversation: earlier messages become the history, the last (a user message) the
    /// prompt.
    #[schema(min_items = 1)]
    pub messages: Vec<RequestMessage>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Overrides the agent's output token limit.
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    pub max_tokens: Option<u32>,
    /// Like `max_tokens`, which it takes precedence over.
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
    /// Answers to give, each from a run of its own (1 to 8; 1 with `stream: true`).
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    #[schema(minimum = 1, maximum = 8)]
    pub n: Option<u32>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// Accepted and ignored (with `x-agentd-warning`): agentd returns no log probabilities.
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// Accepted and ignored like `logprobs`; 0 to 20.
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    #[schema(minimum = 0, maximum = 20)]
    pub top_logprobs: Option<u32>,
    /// Client tools (SPEC §9.2): offered to the model beside the agent's own; a call to one
    /// ends the answer with `finish_reason: "tool_calls"`.
    #[serde(default)]
    pub tools: Option<Vec<ChatTool>>,
    /// `auto`, `none`, `required` or `{"type": "function", "function": {"name"}}`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    /// Parameters agentd cannot honour; a request that sets one gets 400 naming it.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unsupported: UnsupportedParams,
}

/// The sampling parameters both OpenAI completion endpoints take, and `user`. `stop`, the
/// penalties, `seed` and `logit_bias` reach the models that take them; a request whose agent
/// has a model that does not is answered with `x-agentd-warning` naming them.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SamplingFields {
    /// Overrides the agent's temperature; 0 to 2.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    /// Overrides the agent's top_p; 0 to 1.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1)]
    pub top_p: Option<f64>,
    /// Up to 4 sequences that end the model's output.
    #[serde(default)]
    pub stop: Option<StopSequences>,
    /// -2 to 2.
    #[serde(default)]
    #[schema(minimum = -2, maximum = 2)]
    pub presence_penalty: Option<f64>,
    /// -2 to 2.
    #[serde(default)]
    #[schema(minimum = -2, maximum = 2)]
    pub frequency_penalty: Option<f64>,
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_signed")]
    pub seed: Option<i64>,
    /// Token id to a bias from -100 to 100.
    #[serde(default)]
    #[schema(value_type = Option<std::collections::HashMap<String, f64>>)]
    pub logit_bias: Option<BTreeMap<String, f64>>,
    /// With an admin key, the user the request acts for (like the `x-agentd-user` header);
    /// with another key its own user, or ignored with `x-agentd-warning`.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub user: Option<Value>,
}

/// `stop`: one sequence or a list of them.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum StopSequences {
    One(String),
    Many(Vec<String>),
}

impl StopSequences {
    /// The non-empty sequences.
    pub fn sequences(&self) -> Vec<String> {
        match self {
            Self::One(one) => vec![one.clone()],
            Self::Many(many) => many.clone(),
        }
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect()
    }
}

/// Chat Completions parameters with an effect agentd cannot give (audio, other output
/// modalities, predicted outputs). Parameters without such an effect (`store`, `metadata`,
/// `service_tier`, …) are accepted and ignored.
#[derive(Debug, Default, Deserialize)]
pub struct UnsupportedParams {
    #[serde(default)]
    pub audio: Option<Value>,
    #[serde(default)]
    pub modalities: Option<Vec<String>>,
    #[serde(default)]
    pub prediction: Option<Value>,
}

impl UnsupportedParams {
    /// The first parameter set to something agentd would have to ignore.
    pub fn first_set(&self) -> Option<&'static str> {
        let set = |value: &Option<Value>| value.as_ref().is_some_and(|v| !is_empty(v));
        [
            ("audio", set(&self.audio)),
            (
                "modalities",
                self.modalities
                    .as_ref()
                    .is_some_and(|m| m.iter().any(|kind| kind != "text")),
            ),
            ("prediction", set(&self.prediction)),
        ]
        .into_iter()
        .find_map(|(name, set)| set.then_some(name))
    }
}

/// `null`, `[]`, `{}`, `""` and `0`: a parameter left at its no-effect value.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
        Value::String(text) => text.is_empty(),
        Value::Number(number) => number.as_f64() == Some(0.0),
        Value::Bool(_) => false,
    }
}

/// `response_format`: `text`, `json_object`, or `json_schema` with `{name, schema, strict?}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ResponseFormat {
    /// `text`, `json_object` or `json_schema`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub json_schema: Option<JsonSchemaFormat>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct JsonSchemaFormat {
    /// The JSON schema the answer must satisfy; required for `json_schema`.
    #[serde(default)]
    pub schema: Option<Value>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct StreamOptions {
    /// Send a usage chunk before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct RequestMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
    #[serde(default)]
    pub tool_calls: Option<Vec<RequestToolCall>>,
    /// Required on a `tool` message.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// Text, or parts: text, `image_url` and `file` (other part types are refused).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ContentPart {
    /// `text`, `image_url` or `file`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
    /// An `image_url` part's image: an `https` URL (fetched by agentd) or a `data:` URL.
    #[serde(default)]
    pub image_url: Option<ImageUrlPart>,
    /// A `file` part: inline `file_data` (base64 or a `data:` URL) with its `filename`, or a
    /// `file_id` of the Files API.
    #[serde(default)]
    pub file: Option<FilePart>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ImageUrlPart {
    /// (`detail` is accepted and not passed on.)
    pub url: String,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct FilePart {
    #[serde(default)]
    pub file_data: Option<String>,
    #[serde(default)]
    pub file_id: Option<String>,
    #[serde(default)]
    pub filename: Option<String>,
}

/// A client tool: `{"type": "function", "function": {"name", "description"?, "parameters"?}}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatTool {
    /// Only `function`.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    pub function: ChatToolFunction,
}

fn function_kind() -> String {
    "function".into()
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatToolFunction {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// JSON schema of the arguments (an object); `{}` when absent.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct RequestToolCall {
    pub id: String,
    pub function: RequestFunction,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct RequestFunction {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

string_constant!(ModelObject::Model = "model");
string_constant!(CompletionObject::ChatCompletion = "chat.completion");
string_constant!(ChunkObject::ChatCompletionChunk = "chat.completion.chunk");

#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    pub object: ListObject,
    pub data: Vec<Model>,
}

/// An agent as an OpenAI model.
#[derive(Debug, Serialize, ToSchema)]
pub struct Model {
    /// The agent's name.
    pub id: String,
    pub object: ModelObject,
    /// When this server started (Unix seconds).
    pub created: i64,
    /// Always `agentd`.
    pub owned_by: &'static str,
}

/// Why the answer ended: `stop` (an answer) or `length` (turns or context exhausted; the text
/// is the agent's failure report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    Stop,
    Length,
    /// The model called client tools: run them and send their results as `tool` messages.
    #[serde(rename = "tool_calls")]
    ToolCalls,
}

/// A call to a client tool, in the answer or (with `index`) a streamed delta.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ResponseToolCall {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub index: Option<u32>,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    pub function: ResponseFunction,
}

string_constant!(FunctionKind::Function = "function");

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ResponseFunction {
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// The non-streamed answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatCompletion<'a> {
    pub id: &'a str,
    pub object: CompletionObject,
    pub created: i64,
    pub model: &'a str,
    /// One per `n`, in order.
    pub choices: Vec<CompletionChoice>,
    /// Summed over the choices' runs.
    pub usage: CompletionUsage,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CompletionChoice {
    pub index: u32,
    pub message: AssistantMessage,
    pub finish_reason: FinishReason,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AssistantMessage {
    pub role: AssistantRole,
    pub content: String,
    /// The model's reasoning (thinking) during the run, as streamed `reasoning_content` deltas
    /// carry it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// The client tools the model called (`finish_reason: "tool_calls"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub tool_calls: Option<Vec<ResponseToolCall>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CompletionUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub prompt_tokens_details: PromptTokensDetails,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PromptTokensDetails {
    pub cached_tokens: u64,
}

impl From<&UsageTotals> for CompletionUsage {
    fn from(usage: &UsageTotals) -> Self {
        Self {
            prompt_tokens: usage.input_tokens,
            completion_tokens: usage.output_tokens,
            total_tokens: usage.input_tokens + usage.output_tokens,
            prompt_tokens_details: PromptTokensDetails {
                cached_tokens: usage.cached_tokens,
            },
        }
    }
}

impl CompletionUsage {
    /// The usage of several runs (the choices of one request) added up.
    pub fn sum<'a>(usages: impl IntoIterator<Item = &'a UsageTotals>) -> Self {
        usages
            .into_iter()
            .fold(Self::from(&UsageTotals::default()), |sum, usage| {
                let one = Self::from(usage);
                Self {
                    prompt_tokens: sum.prompt_tokens + one.prompt_tokens,
                    completion_tokens: sum.completion_tokens + one.completion_tokens,
                    total_tokens: sum.total_tokens + one.total_tokens,
                    prompt_tokens_details: PromptTokensDetails {
                        cached_tokens: sum.prompt_tokens_details.cached_tokens
                            + one.prompt_tokens_details.cached_tokens,
                    },
                }
            })
    }
}

/// One streamed `data:` frame: a delta in its one choice, or (with
/// `stream_options.include_usage`) no choices and the usage, just before `[DONE]`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatCompletionChunk<'a> {
    pub id: &'a str,
    pub object: ChunkObject,
    pub created: i64,
    pub model: &'a str,
    pub choices: &'a [ChunkChoice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub usage: Option<CompletionUsage>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChunkChoice<'a> {
    pub index: u32,
    pub delta: Delta<'a>,
    /// Null until the last chunk.
    #[schema(required)]
    pub finish_reason: Option<FinishReason>,
}

/// What a chunk adds: the role (first chunk), answer text, or reasoning text (thinking, and
/// progress lines unless the agent turns them off).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub role: Option<AssistantRole>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub tool_calls: Option<Vec<ResponseToolCall>>,
}

/// Text deltas as the serialised frame has them (the stream writes them through
/// `Completion::text_chunk`; tests compare the two).
#[cfg(test)]
impl<'a> Delta<'a> {
    pub fn content(text: &'a str) -> Self {
        Self {
            content: Some(text),
            ..Self::default()
        }
    }

    pub fn reasoning(text: &'a str) -> Self {
        Self {
            reasoning_content: Some(text),
            ..Self::default()
        }
    }
}

/// `POST /v1/completions` (OpenAI's legacy text completions); `model` names an agent and the
/// prompt is its task.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TextCompletionRequest {
    /// The agent to run (see `GET /v1/models`).
    pub model: String,
    /// The task: a string, or a list holding one string.
    pub prompt: Prompt,
    /// Overrides the agent's output token limit.
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Answers to give, each from a run of its own (1 to 8; 1 with `stream: true`).
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    #[schema(minimum = 1, maximum = 8)]
    pub n: Option<u32>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// Accepted and ignored (with `x-agentd-warning`): agentd returns no log probabilities.
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    #[schema(minimum = 0, maximum = 5)]
    pub logprobs: Option<u32>,
    /// Accepted and ignored with `x-agentd-warning` above 1: answers are not ranked.
    #[serde(default, deserialize_with = "crate::http::wire::optional_whole_number")]
    #[schema(minimum = 1, maximum = 8)]
    pub best_of: Option<u32>,
    /// Only `false`: an agent answers the prompt, it does not continue its text.
    #[serde(default)]
    pub echo: Option<bool>,
    /// Only empty: an agent does not fill in text between a prompt and a suffix.
    #[serde(default)]
    pub suffix: Option<String>,
}

/// A completion prompt: text, or a list of texts (agentd takes one).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Texts(Vec<String>),
}

string_constant!(TextCompletionObject::TextCompletion = "text_completion");

/// The answer of `POST /v1/completions`, and (one choice, no usage but in the last) each
/// streamed `data:` frame.
#[derive(Debug, Serialize, ToSchema)]
pub struct TextCompletion<'a> {
    pub id: &'a str,
    pub object: TextCompletionObject,
    pub created: i64,
    pub model: &'a str,
    pub choices: Vec<TextChoice<'a>>,
    /// Summed over the choices' runs; in a stream only in the usage frame
    /// (`stream_options.include_usage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub usage: Option<CompletionUsage>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TextChoice<'a> {
    pub text: &'a str,
    pub index: u32,
    /// Always null: agentd returns no log probabilities.
    #[schema(value_type = Option<Object>)]
    pub logprobs: Option<()>,
    /// `stop` (an answer) or `length` (turns or context exhausted); null until the last
    /// streamed frame.
    #[schema(required)]
    pub finish_reason: Option<FinishReason>,
}
