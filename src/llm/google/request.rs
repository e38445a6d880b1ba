//! Building a Gemini `generateContent` request from our OpenAI-shaped conversation: system
//! messages become `systemInstruction`; turns become `contents` with `user`/`model` roles and
//! `text`, `functionCall` and `functionResponse` parts (consecutive turns of a role merged); a
//! stored `thoughtSignature` is replayed on the first function call (else the last text part).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::llm::parameters::ResolvedParams;
use crate::llm::upstream::{OptionalParam, WireBody};
use crate::llm::{ChatMessage, LlmRequest, Role};

/// Thinking budgets derived from a level stay within what Gemini models accept.
const MAX_THINKING_BUDGET: u32 = 32_768;
const MIN_THINKING_BUDGET: u32 = 1024;

const TEMPERATURE: OptionalParam = OptionalParam::at(&["generationConfig", "temperature"]);
const TOP_P: OptionalParam = OptionalParam::at(&["generationConfig", "topP"]);
const TOP_K: OptionalParam = OptionalParam::at(&["generationConfig", "topK"]);
const FREQUENCY_PENALTY: OptionalParam =
    OptionalParam::at(&["generationConfig", "frequencyPenalty"]);
const PRESENCE_PENALTY: OptionalParam = OptionalParam::at(&["generationConfig", "presencePenalty"]);
const STOP_SEQUENCES: OptionalParam = OptionalParam::at(&["generationConfig", "stopSequences"]);
const SEED: OptionalParam = OptionalParam::at(&["generationConfig", "seed"]);
const MAX_OUTPUT_TOKENS: OptionalParam =
    OptionalParam::at(&["generationConfig", "maxOutputTokens"]);
const THINKING_CONFIG: OptionalParam = OptionalParam::at(&["generationConfig", "thinkingConfig"]);

pub fn request_body(request: &LlmRequest, params: &ResolvedParams) -> WireBody {
    let mut body = Map::new();
    if let Some(system) = system_instruction(&request.messages) {
        body.insert("systemInstruction".into(), system);
    }
    body.insert("contents".into(), Value::Array(contents(&request.messages)));
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
            .collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    let mut body = WireBody::new(body);
    body.set_optional(TEMPERATURE, params.temperature.map(|v| json!(v)));
    body.set_optional(TOP_P, params.top_p.map(|v| json!(v)));
    body.set_optional(TOP_K, params.top_k.map(|v| json!(v)));
    // A request's `frequency_penalty` beats the agent's `repeat_penalty`; no `logit_bias`.
    let frequency = params.frequency_penalty.or(params.repeat_penalty);
    body.set_optional(FREQUENCY_PENALTY, frequency.map(|v| json!(v)));
    body.set_optional(PRESENCE_PENALTY, params.presence_penalty.map(|v| json!(v)));
    body.set_optional(STOP_SEQUENCES, params.stop.as_ref().map(|v| json!(v)));
    body.set_optional(SEED, params.seed.map(|v| json!(v)));
    body.set_optional(
        MAX_OUTPUT_TOKENS,
        params.max_output_tokens.map(|v| json!(v)),
    );
    let thinking = params
        .reasoning
        .as_ref()
        .and_then(|r| r.budget_tokens)
        .map(|budget| {
            let budget = budget.clamp(MIN_THINKING_BUDGET, MAX_THINKING_BUDGET);
            json!({"thinkingBudget": budget, "includeThoughts": true})
        });
    body.set_optional(THINKING_CONFIG, thinking);
    body
}

fn system_instruction(messages: &[ChatMessage]) -> Option<Value> {
    let parts: Vec<Value> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .filter_map(|m| m.content.as_deref())
        .filter(|t| !t.trim().is_empty())
        .map(|t| json!({"text": t}))
        .collect();
    (!parts.is_empty()).then(|| json!({"parts": parts}))
}

fn contents(conversation: &[ChatMessage]) -> Vec<Value> {
    // functionResponse names the function; our tool replies only carry the call id.
    let names: HashMap<&str, &str> = conversation
        .iter()
        .flat_map(|m| &m.tool_calls)
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in conversation {
        let (role, parts) = match message.role {
            Role::System => continue,
            Role::User => ("user", user_parts(message)),
            Role::Tool => {
                // The files a tool's result carried follow its response, inline.
                let mut parts = vec![function_response(message, &names)];
                parts.extend(crate::llm::attachments::gemini_parts(&message.attachments));
                ("user", parts)
            }
            Role::Assistant => ("model", model_parts(message)),
        };
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_parts)) if *last_role == role => last_parts.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    turns
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect()
}

/// A user message's attachments (`inline_data`), then its text.
fn user_parts(message: &ChatMessage) -> Vec<Value> {
    let mut parts = crate::llm::attachments::gemini_parts(&message.attachments);
    parts.extend(text_part(message.content.as_deref()));
    parts
}

fn text_part(text: Option<&str>) -> Vec<Value> {
    text.filter(|t| !t.is_empty())
        .map(|t| vec![json!({"text": t})])
        .unwrap_or_default()
}

fn function_response(message: &ChatMessage, names: &HashMap<&str, &str>) -> Value {
    let id = message.tool_call_id.as_deref().unwrap_or_default();
    let name = names.get(id).copied().unwrap_or(id);
    json!({"functionResponse": {
        "name": name,
        "response": {"content": message.content.clone().unwrap_or_default()},
    }})
}

fn model_parts(message: &ChatMessage) -> Vec<Value> {
    let mut parts = text_part(message.content.as_deref());
    let first_call = parts.len();
    for call in &message.tool_calls {
        let args = match serde_json::from_str::<Value>(&call.arguments) {
            Ok(value @ Value::Object(_)) => value,
            _ => json!({}),
        };
        parts.push(json!({"functionCall": {"name": call.name, "args": args}}));
    }
    if let Some(signature) = &message.reasoning_signature {
        let carrier = if message.tool_calls.is_empty() {
            parts.len().checked_sub(1)
        } else {
            Some(first_call)
        };
        if let Some(part) = carrier.and_then(|i| parts.get_mut(i)) {
            part["thoughtSignature"] = json!(signature);
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::parameters::ReasoningAsk;
    use crate::llm::{SamplingParams, ToolCall};
    use std::time::Duration;

    #[test]
    fn conversation_maps_to_contents_with_named_function_responses() {
        let mut assistant = ChatMessage::assistant("let me look");
        assistant.reasoning_signature = Some("SIG".into());
        assistant.tool_calls = vec![
            ToolCall {
                id: "c1".into(),
                name: "w__find".into(),
                arguments: r#"{"q":"x"}"#.into(),
            },
            ToolCall {
                id: "c2".into(),
                name: "w__get".into(),
                arguments: "{}".into(),
            },
        ];
        let mut r1 = ChatMessage::new(Role::Tool, "found");
        r1.tool_call_id = Some("c1".into());
        let mut r2 = ChatMessage::new(Role::Tool, "got");
        r2.tool_call_id = Some("c2".into());
        let request = LlmRequest {
            model: "gemini".into(),
            messages: vec![
                ChatMessage::system("be brief"),
                ChatMessage::user("hi"),
                assistant,
                r1,
                r2,
            ],
            tools: Vec::new(),
            sampling: SamplingParams::default(),
            tool_choice: None,
            timeout: Duration::from_secs(1),
            max_response_bytes: usize::MAX,
        };
        let params = ResolvedParams {
            top_k: Some(3),
            reasoning: Some(ReasoningAsk {
                effort: None,
                budget_tokens: Some(100_000),
            }),
            ..ResolvedParams::default()
        };
        let body = Value::Object(request_body(&request, &params).body);
        assert_eq!(
            body["systemInstruction"],
            json!({"parts": [{"text": "be brief"}]})
        );
        assert_eq!(
            body["contents"][1],
            json!({"role": "model", "parts": [
                {"text": "let me look"},
                {"functionCall": {"name": "w__find", "args": {"q": "x"}}, "thoughtSignature": "SIG"},
                {"functionCall": {"name": "w__get", "args": {}}},
            ]})
        );
        assert_eq!(
            body["contents"][2],
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "w__find", "response": {"content": "found"}}},
                {"functionResponse": {"name": "w__get", "response": {"content": "got"}}},
            ]})
        );
        assert_eq!(
            body["generationConfig"],
            json!({"topK": 3, "thinkingConfig": {"thinkingBudget": 32768, "includeThoughts": true}})
        );
        let budget_for = |asked: u32| {
            let params = ResolvedParams {
                reasoning: Some(ReasoningAsk {
                    effort: None,
                    budget_tokens: Some(asked),
                }),
                ..ResolvedParams::default()
            };
            request_body(&request, &params).body["generationConfig"]["thinkingConfig"]
                ["thinkingBudget"]
                .as_u64()
        };
        assert_eq!(budget_for(32_768), Some(32_768));
        assert_eq!(budget_for(32_769), Some(32_768));
        assert_eq!(budget_for(1024), Some(1024));
        assert_eq!(budget_for(1023), Some(1024));
        let every = crate::llm::parameters::ParameterPolicy::default()
            .resolve("gemini", &crate::llm::parameters::every_request_param());
        assert_eq!(
            request_body(&request, &every).body["generationConfig"],
            json!({"stopSequences": ["Observation:"], "presencePenalty": 0.5,
                "frequencyPenalty": -0.5, "seed": 42}),
            "everything but logit_bias"
        );
    }
}
