//! The Ollama provider over its native `POST /api/chat` (NDJSON stream, or one JSON body):
//! sampling in `options` (`num_predict`, `repeat_penalty`, …), `think` for reasoning models,
//! whole tool calls with object arguments, usage from `prompt_eval_count`/`eval_count`.
//!
//! A base URL ending in `/v1` (Ollama's OpenAI endpoint, which older configs named) or `/api`
//! is accepted and normalised to the server root.

use std::collections::{HashMap, VecDeque};

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::failure::{classify_error_body, truncate};
use super::openai::function_tools;
use super::parameters::{ParameterPolicy, ResolvedParams};
use super::stream::{Flow, Frame, FrameDecoder, frame_json};
use super::upstream::{
    Connection, Framing, KeyHeader, OptionalParam, Reading, Upstream, UpstreamSetupError, WireBody,
    endpoint, strip_base,
};
use super::{
    ChatMessage, DeltaStream, LlmDelta, LlmError, LlmRequest, Provider, Role, StopReason, Usage,
};

pub struct OllamaProvider {
    upstream: Upstream,
    url: reqwest::Url,
    stream: bool,
    policy: ParameterPolicy,
}

const TEMPERATURE: OptionalParam = OptionalParam::at(&["options", "temperature"]);
const TOP_P: OptionalParam = OptionalParam::at(&["options", "top_p"]);
const TOP_K: OptionalParam = OptionalParam::at(&["options", "top_k"]);
const REPEAT_PENALTY: OptionalParam = OptionalParam::at(&["options", "repeat_penalty"]);
const PRESENCE_PENALTY: OptionalParam = OptionalParam::at(&["options", "presence_penalty"]);
const FREQUENCY_PENALTY: OptionalParam = OptionalParam::at(&["options", "frequency_penalty"]);
const STOP: OptionalParam = OptionalParam::at(&["options", "stop"]);
const SEED: OptionalParam = OptionalParam::at(&["options", "seed"]);
const NUM_PREDICT: OptionalParam = OptionalParam::at(&["options", "num_predict"]);
const THINK: OptionalParam = OptionalParam::at(&["think"]);

impl OllamaProvider {
    /// `connection.base_url` is the server root (`http://127.0.0.1:11434`); an API key, if
    /// set, goes as a bearer token for Ollama behind an authenticating proxy.
    pub fn new(
        client: reqwest::Client,
        provider: &str,
        connection: &Connection,
        policy: ParameterPolicy,
    ) -> Result<Self, UpstreamSetupError> {
        let upstream = Upstream::connect(client, provider, connection, KeyHeader::Bearer, &[])?;
        let root = strip_base(&strip_base(&connection.base_url, "/v1"), "/api");
        Ok(Self {
            upstream,
            url: endpoint(format!("{root}/api/chat"))?,
            stream: connection.stream,
            policy,
        })
    }
}

#[async_trait]
impl Provider for OllamaProvider {
    async fn stream(&self, request: LlmRequest) -> Result<DeltaStream, LlmError> {
        let params = self.policy.resolve(&request.model, &request.sampling);
        let body = request_body(&request, &params, self.stream);
        let reading = if self.stream {
            Reading::Stream(Framing::Lines, LineDecoder::default())
        } else {
            Reading::Whole(Box::new(decode_whole))
        };
        self.upstream
            .exchange(&self.url, &request, body, reading)
            .await
    }
}

/// A non-streamed body is one line that must be the last.
fn decode_whole(text: &str) -> Result<Vec<LlmDelta>, LlmError> {
    let mut out = VecDeque::new();
    let frame = Frame {
        event: None,
        data: text.to_string(),
    };
    match LineDecoder::default().decode(&frame, &mut out)? {
        Flow::Done => Ok(out.into()),
        Flow::Continue => Err(LlmError::InvalidResponse(
            "response is not marked done".into(),
        )),
    }
}

fn request_body(request: &LlmRequest, params: &ResolvedParams, stream: bool) -> WireBody {
    let names: HashMap<&str, &str> = request
        .messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| wire_message(m, &names))
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(stream));
    if !request.tools.is_empty() {
        body.insert("tools".into(), function_tools(&request.tools));
    }
    let mut body = WireBody::new(body);
    body.set_optional(TEMPERATURE, params.temperature.map(|v| json!(v)));
    body.set_optional(TOP_P, params.top_p.map(|v| json!(v)));
    body.set_optional(TOP_K, params.top_k.map(|v| json!(v)));
    body.set_optional(REPEAT_PENALTY, params.repeat_penalty.map(|v| json!(v)));
    body.set_optional(PRESENCE_PENALTY, params.presence_penalty.map(|v| json!(v)));
    body.set_optional(
        FREQUENCY_PENALTY,
        params.frequency_penalty.map(|v| json!(v)),
    );
    body.set_optional(STOP, params.stop.as_ref().map(|v| json!(v)));
    body.set_optional(SEED, params.seed.map(|v| json!(v)));
    body.set_optional(NUM_PREDICT, params.max_output_tokens.map(|v| json!(v)));
    body.set_optional(THINK, params.reasoning.as_ref().map(|_| json!(true)));
    body
}

fn wire_message(message: &ChatMessage, names: &HashMap<&str, &str>) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut content = message.content.clone().unwrap_or_default();
    let (images, texts) = super::attachments::ollama_parts(&message.attachments);
    for text in texts {
        content = if content.is_empty() {
            text
        } else {
            format!("{text}\n\n{content}")
        };
    }
    let mut wire = json!({"role": role, "content": content});
    if !images.is_empty() {
        wire["images"] = Value::Array(images);
    }
    if !message.tool_calls.is_empty() {
        let calls: Vec<Value> = message
            .tool_calls
            .iter()
            .map(|c| {
                let arguments = serde_json::from_str::<Value>(&c.arguments)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                json!({"function": {"name": c.name, "arguments": arguments}})
            })
            .collect();
        wire["tool_calls"] = Value::Array(calls);
    }
    if let Some(name) = message.tool_call_id.as_deref().and_then(|id| names.get(id)) {
        wire["tool_name"] = json!(name);
    }
    wire
}

/// Decodes `/api/chat` lines: `{"message":{…},"done":false}` … `{"done":true,…counts}`.
#[derive(Default)]
struct LineDecoder {
    tool_calls: usize,
}

impl FrameDecoder for LineDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut VecDeque<LlmDelta>) -> Result<Flow, LlmError> {
        let line = frame_json(&frame.data)?;
        if let Some(error) = classify_error_body(&line) {
            return Err(error);
        }
        let message = line.get("message").unwrap_or(&Value::Null);
        let text = |key: &str| {
            message
                .get(key)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
        };
        if let Some(thinking) = text("thinking") {
            out.push_back(LlmDelta::Reasoning(thinking.to_string()));
        }
        if let Some(content) = text("content") {
            out.push_back(LlmDelta::Text(content.to_string()));
        }
        for call in message
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.push_call(call, out);
        }
        match line.get("done").and_then(Value::as_bool) {
            Some(true) => {
                out.push_back(LlmDelta::Stop(self.stop_reason(&line)));
                out.push_back(LlmDelta::Usage(Usage {
                    input_tokens: count(&line, "prompt_eval_count"),
                    output_tokens: count(&line, "eval_count"),
                    ..Usage::default()
                }));
                Ok(Flow::Done)
            }
            Some(false) => Ok(Flow::Continue),
            None => Err(LlmError::InvalidResponse(format!(
                "line has no `done`: {}",
                truncate(&frame.data, 200)
            ))),
        }
    }

    fn is_complete(&self) -> bool {
        false
    }
}

impl LineDecoder {
    fn push_call(&mut self, call: &Value, out: &mut VecDeque<LlmDelta>) {
        let index = self.tool_calls;
        self.tool_calls += 1;
        let function = call.get("function").unwrap_or(&Value::Null);
        let arguments = match function.get("arguments") {
            Some(Value::String(text)) => text.clone(),
            Some(value) if !value.is_null() => value.to_string(),
            _ => "{}".to_string(),
        };
        out.push_back(LlmDelta::ToolCallFragment {
            index,
            id: call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            name: function
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string),
            arguments,
        });
    }

    fn stop_reason(&self, line: &Value) -> StopReason {
        match line.get("done_reason").and_then(Value::as_str) {
            _ if self.tool_calls > 0 => StopReason::ToolCalls,
            Some(reason) => StopReason::from_openai(reason),
            None => StopReason::Stop,
        }
    }
}

fn count(line: &Value, key: &str) -> u64 {
    line.get(key).and_then(Value::as_u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::parameters::ReasoningAsk;
    use crate::llm::{SamplingParams, ToolCall};
    use std::time::Duration;

    #[test]
    fn body_puts_sampling_in_options_and_names_tool_replies() {
        let mut assistant = ChatMessage::assistant("");
        assistant.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "t__x".into(),
            arguments: r#"{"a":1}"#.into(),
        }];
        let mut reply = ChatMessage::new(Role::Tool, "42");
        reply.tool_call_id = Some("c1".into());
        let request = LlmRequest {
            model: "qwen3".into(),
            messages: vec![ChatMessage::user("q"), assistant, reply],
            tools: Vec::new(),
            sampling: SamplingParams::default(),
            tool_choice: None,
            timeout: Duration::from_secs(1),
            max_response_bytes: usize::MAX,
        };
        let params = ResolvedParams {
            repeat_penalty: Some(1.1),
            max_output_tokens: Some(64),
            reasoning: Some(ReasoningAsk {
                effort: Some("low".into()),
                budget_tokens: None,
            }),
            ..ResolvedParams::default()
        };
        let body = Value::Object(request_body(&request, &params, true).body);
        assert_eq!(
            body["options"],
            json!({"repeat_penalty": 1.1, "num_predict": 64})
        );
        assert_eq!(body["think"], true);
        assert_eq!(
            body["messages"][1]["tool_calls"],
            json!([{"function": {"name": "t__x", "arguments": {"a": 1}}}])
        );
        assert_eq!(body["messages"][2]["tool_name"], "t__x");
        let bare = Value::Object(request_body(&request, &ResolvedParams::default(), false).body);
        assert!(bare.get("options").is_none() && bare.get("think").is_none());
        let every = super::super::parameters::ParameterPolicy::default()
            .resolve("qwen3", &super::super::parameters::every_request_param());
        let body = Value::Object(request_body(&request, &every, false).body);
        assert_eq!(
            body["options"],
            json!({"presence_penalty": 0.5, "frequency_penalty": -0.5,
                "stop": ["Observation:"], "seed": 42}),
            "everything but logit_bias"
        );
    }

    #[test]
    fn lines_decode_until_done() {
        let mut decoder = LineDecoder::default();
        let mut out = VecDeque::new();
        let lines = [
            r#"{"message":{"role":"assistant","content":"","thinking":"hm"},"done":false}"#,
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"t","arguments":{"k":"v"}}}]},"done":false}"#,
            r#"{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":9,"eval_count":4}"#,
        ];
        let mut flows = Vec::new();
        for line in lines {
            let frame = Frame {
                event: None,
                data: line.into(),
            };
            flows.push(decoder.decode(&frame, &mut out).expect("decodes"));
        }
        assert_eq!(flows, [Flow::Continue, Flow::Continue, Flow::Done]);
        let deltas: Vec<LlmDelta> = std::mem::take(&mut out).into();
        assert_eq!(deltas[0], LlmDelta::Reasoning("hm".into()));
        assert!(
            matches!(&deltas[1], LlmDelta::ToolCallFragment { arguments, .. } if arguments == "{\"k\":\"v\"}")
        );
        assert_eq!(deltas[2], LlmDelta::Stop(StopReason::ToolCalls));
        assert_eq!(
            deltas[3],
            LlmDelta::Usage(Usage {
                input_tokens: 9,
                output_tokens: 4,
                ..Usage::default()
            })
        );
        let frame = Frame {
            event: None,
            data: r#"{"error":"model 'nope' not found"}"#.into(),
        };
        assert!(
            matches!(decoder.decode(&frame, &mut out), Err(LlmError::Model(m)) if m.contains("nope"))
        );
    }
}
