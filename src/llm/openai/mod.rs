//! The OpenAI Chat Completions provider, used for OpenAI itself, OpenRouter and every server that
//! speaks the dialect (vLLM, llama.cpp, LM Studio, Ollama's `/v1`, the test mock).
//!
//! Owns the request body and the per-dialect parameter names; stream decoding lives in
//! [`decode`]. The dialects differ only in what they accept:
//! - `openai`: `max_completion_tokens`, no `top_k`, `reasoning_effort`;
//! - `openai-compatible`: `max_tokens`, `top_k`, `reasoning_effort`;
//! - `openrouter`: `max_tokens`, `top_k`, `repetition_penalty`, `reasoning: {effort|max_tokens}`,
//!   `usage: {include: true}` (its cost), `HTTP-Referer`/`X-Title` headers, and the provider and
//!   model that actually served the call reported as [`super::ResponseMetadata`].

pub mod decode;
mod wire;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::attachments;
use super::parameters::{ParameterPolicy, ResolvedParams};
use super::upstream::{
    Connection, Framing, KeyHeader, OptionalParam, Reading, Upstream, UpstreamSetupError, WireBody,
    endpoint,
};
use super::{ChatMessage, DeltaStream, LlmError, LlmRequest, Provider, Role, ToolDefinition};
use decode::{ChunkDecoder, decode_completion};

/// Which flavour of the Chat Completions API the endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Compatible,
    OpenRouter,
}

/// Settings of one OpenAI-compatible endpoint.
#[derive(Clone)]
pub struct OpenAiSettings {
    /// Base URL up to and including `/v1`; `/chat/completions` is appended.
    pub connection: Connection,
    /// Ask for the usage chunk (`stream_options.include_usage`); some servers reject it.
    pub include_usage: bool,
    pub dialect: Dialect,
}

pub struct OpenAiProvider {
    upstream: Upstream,
    url: reqwest::Url,
    settings: OpenAiSettings,
    policy: ParameterPolicy,
}

const STREAM_OPTIONS: OptionalParam = OptionalParam::at(&["stream_options"]);
const TEMPERATURE: OptionalParam = OptionalParam::at(&["temperature"]);
const TOP_P: OptionalParam = OptionalParam::at(&["top_p"]);
const TOP_K: OptionalParam = OptionalParam::at(&["top_k"]);
const FREQUENCY_PENALTY: OptionalParam = OptionalParam::at(&["frequency_penalty"]);
const REPETITION_PENALTY: OptionalParam = OptionalParam::at(&["repetition_penalty"]);
const PRESENCE_PENALTY: OptionalParam = OptionalParam::at(&["presence_penalty"]);
const STOP: OptionalParam = OptionalParam::at(&["stop"]);
const SEED: OptionalParam = OptionalParam::at(&["seed"]);
const LOGIT_BIAS: OptionalParam = OptionalParam::at(&["logit_bias"]);
const MAX_TOKENS: OptionalParam = OptionalParam::at(&["max_tokens"]);
const MAX_COMPLETION_TOKENS: OptionalParam = OptionalParam::at(&["max_completion_tokens"]);
const REASONING_EFFORT: OptionalParam = OptionalParam::at(&["reasoning_effort"]);
const OPENROUTER_REASONING: OptionalParam = OptionalParam::at(&["reasoning"]);
const OPENROUTER_USAGE: OptionalParam = OptionalParam::at(&["usage"]);

/// OpenRouter ranks apps by these; configured `headers` replace them.
const OPENROUTER_REFERER: &str = "https://github.com/agentd";
const OPENROUTER_TITLE: &str = "agentd";

impl OpenAiProvider {
    pub fn new(
        client: reqwest::Client,
        provider: &str,
        settings: OpenAiSettings,
        policy: ParameterPolicy,
    ) -> Result<Self, UpstreamSetupError> {
        let defaults: &[(&str, &str)] = match settings.dialect {
            Dialect::OpenRouter => &[
                ("HTTP-Referer", OPENROUTER_REFERER),
                ("X-Title", OPENROUTER_TITLE),
            ],
            Dialect::OpenAi | Dialect::Compatible => &[],
        };
        let upstream = Upstream::connect(
            client,
            provider,
            &settings.connection,
            KeyHeader::Bearer,
            defaults,
        )?;
        let url = endpoint(format!(
            "{}/chat/completions",
            settings.connection.base_url.trim_end_matches('/')
        ))?;
        Ok(Self {
            upstream,
            url,
            settings,
            policy,
        })
    }

    fn request_body(&self, request: &LlmRequest) -> WireBody {
        let params = self.policy.resolve(&request.model, &request.sampling);
        let replay_field = self.policy.interleaved_field(&request.model);
        let messages = wire_messages(&request.messages, replay_field.as_deref());
        let mut body = Map::new();
        body.insert("model".into(), json!(request.model));
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            body.insert("tools".into(), function_tools(&request.tools));
            let choice = request.tool_choice.clone().unwrap_or_default();
            body.insert("tool_choice".into(), choice.openai_value());
        }
        let mut body = WireBody::new(body);
        if self.settings.connection.stream {
            body.body.insert("stream".into(), json!(true));
            body.set_optional(
                STREAM_OPTIONS,
                self.settings
                    .include_usage
                    .then(|| json!({"include_usage": true})),
            );
        }
        self.set_sampling(&mut body, &params);
        body
    }

    fn set_sampling(&self, body: &mut WireBody, params: &ResolvedParams) {
        let dialect = self.settings.dialect;
        body.set_optional(TEMPERATURE, params.temperature.map(|v| json!(v)));
        body.set_optional(TOP_P, params.top_p.map(|v| json!(v)));
        // OpenAI itself rejects top_k; the compatible servers mostly accept it.
        if dialect != Dialect::OpenAi {
            body.set_optional(TOP_K, params.top_k.map(|v| json!(v)));
        }
        // A request's `frequency_penalty` beats the agent's `repeat_penalty`, which OpenAI and
        // the compatible servers only know as `frequency_penalty`.
        let frequency = match dialect {
            Dialect::OpenRouter => {
                body.set_optional(REPETITION_PENALTY, params.repeat_penalty.map(|v| json!(v)));
                params.frequency_penalty
            }
            Dialect::OpenAi | Dialect::Compatible => {
                params.frequency_penalty.or(params.repeat_penalty)
            }
        };
        body.set_optional(FREQUENCY_PENALTY, frequency.map(|v| json!(v)));
        body.set_optional(PRESENCE_PENALTY, params.presence_penalty.map(|v| json!(v)));
        body.set_optional(STOP, params.stop.as_ref().map(|v| json!(v)));
        body.set_optional(SEED, params.seed.map(|v| json!(v)));
        body.set_optional(LOGIT_BIAS, params.logit_bias.as_ref().map(|v| json!(v)));
        let max_tokens = match dialect {
            Dialect::OpenAi => MAX_COMPLETION_TOKENS,
            Dialect::Compatible | Dialect::OpenRouter => MAX_TOKENS,
        };
        body.set_optional(max_tokens, params.max_output_tokens.map(|v| json!(v)));
        let reasoning = params.reasoning.as_ref();
        match dialect {
            Dialect::OpenRouter => {
                let value = reasoning.and_then(|r| match (&r.effort, r.budget_tokens) {
                    (Some(effort), _) => Some(json!({"effort": effort})),
                    (None, Some(budget)) => Some(json!({"max_tokens": budget})),
                    (None, None) => None,
                });
                body.set_optional(OPENROUTER_REASONING, value);
                body.set_optional(OPENROUTER_USAGE, Some(json!({"include": true})));
            }
            Dialect::OpenAi | Dialect::Compatible => body.set_optional(
                REASONING_EFFORT,
                reasoning.and_then(|r| r.effort.clone()).map(Value::String),
            ),
        }
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    async fn stream(&self, request: LlmRequest) -> Result<DeltaStream, LlmError> {
        let body = self.request_body(&request);
        let report_routing = self.settings.dialect == Dialect::OpenRouter;
        let reading = if self.settings.connection.stream {
            Reading::Stream(Framing::Sse, ChunkDecoder::new(report_routing))
        } else {
            Reading::Whole(Box::new(move |text: &str| {
                decode_completion(text, report_routing)
            }))
        };
        self.upstream
            .exchange(&self.url, &request, body, reading)
            .await
    }
}

/// Tools in the `{"type": "function", "function": {…}}` form (also Ollama's).
pub(crate) fn function_tools(tools: &[ToolDefinition]) -> Value {
    tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
        .collect()
}

/// The conversation in Chat Completions form. Tool messages are text only there: the files
/// tools' results carried follow the run of tool messages as one user message naming them.
fn wire_messages(messages: &[ChatMessage], replay_field: Option<&str>) -> Vec<Value> {
    let mut wire = Vec::with_capacity(messages.len());
    let mut tool_files: Vec<Value> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if message.role == Role::Tool && !message.attachments.is_empty() {
            let call = message.tool_call_id.as_deref().unwrap_or_default();
            let names: Vec<&str> = message
                .attachments
                .iter()
                .map(|a| a.name.as_str())
                .collect();
            let intro = format!("The files of tool call {call}: {}", names.join(", "));
            let parts = attachments::openai_parts(Some(&intro), &message.attachments);
            tool_files.extend(parts.as_array().into_iter().flatten().cloned());
            let mut text_only = message.clone();
            text_only.attachments.clear();
            wire.push(wire_message(&text_only, replay_field));
        } else {
            wire.push(wire_message(message, replay_field));
        }
        let run_ends = messages
            .get(index + 1)
            .is_none_or(|next| next.role != Role::Tool);
        if run_ends && !tool_files.is_empty() {
            wire.push(json!({"role": "user", "content": std::mem::take(&mut tool_files)}));
        }
    }
    wire
}

/// One conversation message in Chat Completions form. `replay_field` names the field that
/// carries an assistant's earlier reasoning back to models configured `interleaved`.
fn wire_message(message: &ChatMessage, replay_field: Option<&str>) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut wire = Map::new();
    wire.insert("role".into(), json!(role));
    let content = if message.attachments.is_empty() {
        message.content.as_ref().map_or(Value::Null, |c| json!(c))
    } else {
        attachments::openai_parts(message.content.as_deref(), &message.attachments)
    };
    wire.insert("content".into(), content);
    if !message.tool_calls.is_empty() {
        let calls: Vec<Value> = message
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        wire.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &message.tool_call_id {
        wire.insert("tool_call_id".into(), json!(id));
    }
    if let (Some(field), Some(reasoning)) = (replay_field, &message.reasoning)
        && message.role == Role::Assistant
    {
        wire.insert(field.to_string(), json!(reasoning));
    }
    Value::Object(wire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ReasoningLevel, parse_config};
    use crate::llm::SamplingParams;
    use std::time::Duration;

    fn provider(dialect: Dialect, config: Value) -> OpenAiProvider {
        let config = parse_config(json!({"providers": {"p": config}}), "t").expect("config");
        let settings = OpenAiSettings {
            connection: Connection {
                base_url: "http://127.0.0.1:9/v1".into(),
                api_key: None,
                extra_headers: Vec::new(),
                stream: true,
            },
            include_usage: true,
            dialect,
        };
        let policy = ParameterPolicy::from_config(&config.providers["p"], 4096);
        OpenAiProvider::new(reqwest::Client::new(), "p", settings, policy).expect("provider")
    }

    fn request(sampling: SamplingParams) -> LlmRequest {
        let mut assistant = ChatMessage::assistant("a");
        assistant.reasoning = Some("because".into());
        LlmRequest {
            model: "m".into(),
            messages: vec![ChatMessage::user("q"), assistant],
            tools: Vec::new(),
            sampling,
            tool_choice: None,
            timeout: Duration::from_secs(1),
            max_response_bytes: usize::MAX,
        }
    }

    fn all_params() -> SamplingParams {
        SamplingParams {
            temperature: Some(0.5),
            top_p: Some(0.9),
            top_k: Some(30),
            repeat_penalty: Some(1.1),
            max_output_tokens: Some(900),
            reasoning: Some(ReasoningLevel::High),
            ..SamplingParams::default()
        }
    }

    #[test]
    fn every_dialect_sends_every_request_parameter() {
        for (dialect, kind) in [
            (Dialect::OpenAi, "openai"),
            (Dialect::Compatible, "openai-compatible"),
            (Dialect::OpenRouter, "openrouter"),
        ] {
            let body = provider(dialect, json!({"type": kind}))
                .request_body(&request(crate::llm::parameters::every_request_param()))
                .body;
            assert_eq!(body["stop"], json!(["Observation:"]), "{kind}");
            assert_eq!(body["presence_penalty"], 0.5, "{kind}");
            assert_eq!(body["frequency_penalty"], -0.5, "{kind}");
            assert_eq!(body["seed"], 42, "{kind}");
            assert_eq!(body["logit_bias"], json!({"50256": -100.0}), "{kind}");
        }
        let both = SamplingParams {
            frequency_penalty: Some(0.25),
            ..all_params()
        };
        let openai = provider(Dialect::OpenAi, json!({"type": "openai"}))
            .request_body(&request(both))
            .body;
        assert_eq!(
            openai["frequency_penalty"], 0.25,
            "the request's beats the agent's"
        );
    }

    #[test]
    fn dialects_name_parameters_their_way() {
        let openai = provider(Dialect::OpenAi, json!({"type": "openai"}))
            .request_body(&request(all_params()))
            .body;
        assert_eq!(openai["max_completion_tokens"], 900);
        assert_eq!(openai["reasoning_effort"], "high");
        assert_eq!(openai["frequency_penalty"], 1.1);
        assert!(openai.get("top_k").is_none() && openai.get("max_tokens").is_none());
        assert_eq!(openai["stream_options"], json!({"include_usage": true}));

        let router = provider(Dialect::OpenRouter, json!({"type": "openrouter"}))
            .request_body(&request(all_params()))
            .body;
        assert_eq!(router["max_tokens"], 900);
        assert_eq!(router["top_k"], 30);
        assert_eq!(router["repetition_penalty"], 1.1);
        assert_eq!(router["reasoning"], json!({"effort": "high"}));
        assert_eq!(router["usage"], json!({"include": true}));
        assert!(router.get("reasoning_effort").is_none());
    }

    #[test]
    fn interleaved_models_get_their_reasoning_back() {
        let plain = provider(Dialect::Compatible, json!({"type": "openai-compatible"}))
            .request_body(&request(SamplingParams::default()))
            .body;
        assert!(plain["messages"][1].get("reasoning_content").is_none());
        assert!(plain.get("temperature").is_none(), "unset is not sent");
        let replaying = provider(
            Dialect::Compatible,
            json!({"type": "openai-compatible", "models": {"m": {"interleaved": "reasoning"}}}),
        )
        .request_body(&request(SamplingParams::default()))
        .body;
        assert_eq!(replaying["messages"][1]["reasoning"], "because");
    }

    #[test]
    fn tool_files_follow_the_run_of_tool_replies_as_one_user_message() {
        let image = crate::vocabulary::Attachment {
            name: "shot-1.png".into(),
            media_type: "image/png".into(),
            bytes: 3,
            sha256: "00".repeat(32),
            file_id: "file-1".into(),
            content: Some(std::sync::Arc::from(b"PNG".as_slice())),
            url: None,
            text_form: None,
        };
        let mut first = ChatMessage::new(Role::Tool, "[image image/png]");
        first.tool_call_id = Some("call-1".into());
        first.attachments = vec![image];
        let mut second = ChatMessage::new(Role::Tool, "done");
        second.tool_call_id = Some("call-2".into());
        let wire = wire_messages(&[first, second, ChatMessage::user("next")], None);
        let roles: Vec<&str> = wire.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["tool", "tool", "user", "user"]);
        assert_eq!(
            wire[0]["content"], "[image image/png]",
            "tool messages stay text"
        );
        assert_eq!(
            wire[2]["content"][0]["text"],
            "The files of tool call call-1: shot-1.png"
        );
        assert_eq!(
            wire[2]["content"][1]["image_url"]["url"],
            "data:image/png;base64,UE5H"
        );
    }
}
