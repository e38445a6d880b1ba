//! Building a Messages API request from our OpenAI-shaped conversation: system messages become
//! `system`; assistant tool calls become `tool_use` blocks; tool replies become `tool_result`
//! blocks in a user message (consecutive ones merged, as the API wants one user turn); signed
//! reasoning is replayed as a `thinking` block; the last block carries `cache_control`.

use serde_json::{Map, Value, json};

use crate::llm::parameters::ResolvedParams;
use crate::llm::upstream::{OptionalParam, WireBody};
use crate::llm::{ChatMessage, LlmRequest, Role};

/// `max_tokens` is required by the API; this applies when neither agent nor model sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

const TEMPERATURE: OptionalParam = OptionalParam::at(&["temperature"]);
const TOP_P: OptionalParam = OptionalParam::at(&["top_p"]);
const TOP_K: OptionalParam = OptionalParam::at(&["top_k"]);
const THINKING: OptionalParam = OptionalParam::at(&["thinking"]);
const STOP_SEQUENCES: OptionalParam = OptionalParam::at(&["stop_sequences"]);

/// Anthropic refuses non-streamed requests that may run past ten minutes, which it judges by
/// `max_tokens`; from this size on the response is streamed whatever the config says.
pub const STREAM_FROM_MAX_TOKENS: u32 = 21_333;

/// How a request is shaped beyond the conversation.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub stream: bool,
    pub prompt_caching: bool,
}

pub fn request_body(request: &LlmRequest, params: &ResolvedParams, shape: &Shape) -> WireBody {
    let max_tokens = params.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let thinking_budget = thinking_budget(request, params, max_tokens);
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if let Some(system) = system_prompt(&request.messages, shape.prompt_caching) {
        body.insert("system".into(), system);
    }
    body.insert(
        "messages".into(),
        Value::Array(messages(&request.messages, shape.prompt_caching)),
    );
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = request.tool_choice.clone().unwrap_or_default();
        body.insert("tool_choice".into(), choice.anthropic_value());
    }
    if shape.stream {
        body.insert("stream".into(), json!(true));
    }
    let mut body = WireBody::new(body);
    // The only request parameter of [`crate::llm::parameters::RequestParam`] the API takes.
    body.set_optional(STOP_SEQUENCES, params.stop.as_ref().map(|v| json!(v)));
    match thinking_budget {
        Some(budget) => {
            body.set_optional(
                THINKING,
                Some(json!({"type": "enabled", "budget_tokens": budget})),
            );
            // Thinking refuses temperature and top_k, and top_p below 0.95.
            body.set_optional(TOP_P, params.top_p.filter(|p| *p >= 0.95).map(|v| json!(v)));
        }
        None => {
            body.set_optional(TEMPERATURE, params.temperature.map(|v| json!(v)));
            body.set_optional(TOP_P, params.top_p.map(|v| json!(v)));
            body.set_optional(TOP_K, params.top_k.map(|v| json!(v)));
        }
    }
    body
}

/// The thinking budget to send, if thinking can be on for this request: the budget must leave
/// room for the answer within `max_tokens`, and a conversation in the middle of a tool loop
/// whose last assistant turn has no signed thinking cannot switch thinking on.
fn thinking_budget(request: &LlmRequest, params: &ResolvedParams, max_tokens: u32) -> Option<u32> {
    let wanted = params.reasoning.as_ref()?.budget_tokens?;
    let room = max_tokens.saturating_sub(MIN_THINKING_BUDGET);
    let budget = wanted.max(MIN_THINKING_BUDGET).min(room);
    if budget < MIN_THINKING_BUDGET {
        return None;
    }
    let last_assistant = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant);
    let unsigned_tool_turn = last_assistant.is_some_and(|m| {
        !m.tool_calls.is_empty()
            && m.reasoning_signature.is_none()
            && m.redacted_reasoning.is_empty()
    });
    (!unsigned_tool_turn).then_some(budget)
}

fn system_prompt(messages: &[ChatMessage], caching: bool) -> Option<Value> {
    let text = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .filter_map(|m| m.content.as_deref())
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    if text.is_empty() {
        return None;
    }
    if caching {
        Some(json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]))
    } else {
        Some(json!(text))
    }
}

/// User/assistant turns with their content blocks; consecutive turns of one role are merged.
fn messages(conversation: &[ChatMessage], caching: bool) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in conversation {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", user_blocks(message)),
            Role::Tool => ("user", vec![tool_result_block(message)]),
            Role::Assistant => ("assistant", assistant_blocks(message)),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    if caching
        && let Some(block) = turns
            .last_mut()
            .and_then(|(_, blocks)| blocks.last_mut())
            .and_then(Value::as_object_mut)
    {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// A user message's attachments, then its text.
fn user_blocks(message: &ChatMessage) -> Vec<Value> {
    let mut blocks = crate::llm::attachments::anthropic_blocks(&message.attachments);
    blocks.extend(text_block(message.content.as_deref()));
    blocks
}

fn text_block(text: Option<&str>) -> Vec<Value> {
    // The API rejects empty text blocks.
    text.filter(|t| !t.is_empty())
        .map(|t| vec![json!({"type": "text", "text": t})])
        .unwrap_or_default()
}

fn tool_result_block(message: &ChatMessage) -> Value {
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
    });
    let text = message.content.as_deref().filter(|c| !c.is_empty());
    if message.attachments.is_empty() {
        if let Some(content) = text {
            block["content"] = json!(content);
        }
    } else {
        // The files a tool's result carried go inside its result, as image / document blocks.
        let mut content = text_block(text);
        content.extend(crate::llm::attachments::anthropic_blocks(
            &message.attachments,
        ));
        block["content"] = Value::Array(content);
    }
    block
}

fn assistant_blocks(message: &ChatMessage) -> Vec<Value> {
    let mut blocks: Vec<Value> = message
        .redacted_reasoning
        .iter()
        .map(|data| json!({"type": "redacted_thinking", "data": data}))
        .collect();
    // Unsigned reasoning (from another vendor, or a stream that lost it) cannot be replayed.
    if let (Some(thinking), Some(signature)) = (&message.reasoning, &message.reasoning_signature) {
        blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
    }
    blocks.extend(text_block(message.content.as_deref()));
    for call in &message.tool_calls {
        blocks.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": tool_input(&call.arguments),
        }));
    }
    blocks
}

/// `input` must be an object; arguments the model wrote badly are replayed as `{}` (the tool
/// result already told the model what was wrong).
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::parameters::ReasoningAsk;
    use crate::llm::{SamplingParams, ToolCall};
    use std::time::Duration;

    fn tool_turn(signature: Option<&str>) -> Vec<ChatMessage> {
        let mut assistant = ChatMessage::assistant("");
        assistant.content = None;
        assistant.reasoning = Some("think".into());
        assistant.reasoning_signature = signature.map(str::to_string);
        assistant.tool_calls = vec![
            ToolCall {
                id: "t1".into(),
                name: "a__x".into(),
                arguments: r#"{"q":1}"#.into(),
            },
            ToolCall {
                id: "t2".into(),
                name: "a__y".into(),
                arguments: "not json".into(),
            },
        ];
        let mut first = ChatMessage::new(Role::Tool, "one");
        first.tool_call_id = Some("t1".into());
        let mut second = ChatMessage::new(Role::Tool, "");
        second.tool_call_id = Some("t2".into());
        vec![
            ChatMessage::system("sys"),
            ChatMessage::user("go"),
            assistant,
            first,
            second,
            ChatMessage::user("and then?"),
        ]
    }

    fn request(messages: Vec<ChatMessage>) -> LlmRequest {
        LlmRequest {
            model: "claude".into(),
            messages,
            tools: Vec::new(),
            sampling: SamplingParams::default(),
            tool_choice: None,
            timeout: Duration::from_secs(1),
            max_response_bytes: usize::MAX,
        }
    }

    fn thinking_params(budget: u32) -> ResolvedParams {
        ResolvedParams {
            temperature: Some(0.2),
            top_k: Some(5),
            max_output_tokens: Some(16_000),
            reasoning: Some(ReasoningAsk {
                effort: None,
                budget_tokens: Some(budget),
            }),
            ..ResolvedParams::default()
        }
    }

    #[test]
    fn stop_is_the_only_request_parameter_sent() {
        let params = crate::llm::parameters::ParameterPolicy::default()
            .resolve("claude", &crate::llm::parameters::every_request_param());
        let shape = Shape {
            stream: false,
            prompt_caching: false,
        };
        let body = request_body(&request(tool_turn(None)), &params, &shape).body;
        assert_eq!(body["stop_sequences"], json!(["Observation:"]));
        for absent in [
            "stop",
            "seed",
            "presence_penalty",
            "frequency_penalty",
            "logit_bias",
        ] {
            assert!(body.get(absent).is_none(), "{absent}");
        }
    }

    #[test]
    fn conversation_maps_to_blocks_with_merged_tool_results_and_cache_marker() {
        let shape = Shape {
            stream: true,
            prompt_caching: true,
        };
        let body = request_body(
            &request(tool_turn(Some("sig"))),
            &ResolvedParams::default(),
            &shape,
        )
        .body;
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
        let messages = body["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), 3, "{messages:#?}");
        assert_eq!(
            messages[1]["content"],
            json!([
                {"type": "thinking", "thinking": "think", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "a__x", "input": {"q": 1}},
                {"type": "tool_use", "id": "t2", "name": "a__y", "input": {}},
            ])
        );
        assert_eq!(
            messages[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
                {"type": "tool_result", "tool_use_id": "t2"},
                {"type": "text", "text": "and then?", "cache_control": {"type": "ephemeral"}},
            ]})
        );
    }

    #[test]
    fn redacted_thinking_is_replayed_first_and_keeps_thinking_on() {
        let shape = Shape {
            stream: false,
            prompt_caching: false,
        };
        let mut messages = tool_turn(None);
        messages[2].reasoning = None;
        messages[2].redacted_reasoning = vec!["ENC1".into(), "ENC2".into()];
        let body = request_body(&request(messages), &thinking_params(4000), &shape).body;
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 4000}),
            "a tool turn whose reasoning was redacted is still a signed one"
        );
        let content = &body["messages"][1]["content"];
        assert_eq!(
            content[0],
            json!({"type": "redacted_thinking", "data": "ENC1"})
        );
        assert_eq!(
            content[1],
            json!({"type": "redacted_thinking", "data": "ENC2"})
        );
        assert_eq!(content[2]["type"], "tool_use");
    }

    #[test]
    fn thinking_replaces_temperature_and_needs_a_signed_tool_turn() {
        let shape = Shape {
            stream: false,
            prompt_caching: false,
        };
        let body = request_body(
            &request(tool_turn(Some("sig"))),
            &thinking_params(4000),
            &shape,
        )
        .body;
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 4000})
        );
        assert!(body.get("temperature").is_none() && body.get("top_k").is_none());
        assert_eq!(body["system"], "sys");
        assert!(body.get("stream").is_none());

        let unsigned = request_body(&request(tool_turn(None)), &thinking_params(4000), &shape).body;
        assert!(unsigned.get("thinking").is_none());
        assert_eq!(unsigned["temperature"], 0.2);
        let content = unsigned["messages"][1]["content"]
            .as_array()
            .expect("blocks");
        assert!(content.iter().all(|b| b["type"] != "thinking"));

        let budget_at = |max_tokens: u32| {
            let params = ResolvedParams {
                max_output_tokens: Some(max_tokens),
                ..thinking_params(1024)
            };
            request_body(&request(vec![ChatMessage::user("q")]), &params, &shape)
                .body
                .get("thinking")
                .and_then(|t| t["budget_tokens"].as_u64())
        };
        assert_eq!(
            budget_at(2048),
            Some(1024),
            "just room for the minimum budget"
        );
        assert_eq!(budget_at(2047), None, "no room: thinking stays off");

        let huge = request_body(
            &request(vec![ChatMessage::user("q")]),
            &thinking_params(50_000),
            &shape,
        )
        .body;
        assert_eq!(huge["thinking"]["budget_tokens"], 16_000 - 1024);
    }
}
