//! Every provider against the scripted mock LLM speaking its vendor's wire format, cut into small
//! pieces: what it decodes from real chunk boundaries, what it sends upstream, and how it
//! classifies every failure.

mod anthropic;
mod errors;
mod google;
mod ollama;
mod openai;

use std::sync::Arc;
use std::time::Duration;

use agentd::config::parse_config;
use agentd::llm::catalog::build_providers;
use agentd::llm::{
    ChatMessage, LlmError, LlmRequest, LlmResponse, Provider, ResponseAssembler, SamplingParams,
    ToolDefinition,
};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Multi-byte text: 2-, 3- and 4-byte UTF-8 sequences, so byte splits land inside characters.
pub const UNICODE: &str = "Grüße, мир — ✓ 🌍 done";
pub const KEY: &str = "sk-wire-test-key-0123456789";

/// `base` with the keys of `extra` added (or replaced).
pub fn merged(mut base: Value, extra: Value) -> Value {
    if let (Some(base), Value::Object(extra)) = (base.as_object_mut(), extra) {
        base.extend(extra);
    }
    base
}

/// Builds provider `p` from a provider config object (type, baseUrl, …).
pub fn provider(config: Value) -> Arc<dyn Provider> {
    let config = parse_config(json!({"providers": {"p": config}}), "provider test")
        .expect("provider config is valid");
    build_providers(&config.providers)
        .expect("provider builds")
        .remove("p")
        .expect("provider p")
}

pub fn tool() -> ToolDefinition {
    ToolDefinition {
        name: "kb__search".into(),
        description: "Searches the knowledge base".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }
}

pub fn request(model: &str, sampling: SamplingParams) -> LlmRequest {
    LlmRequest {
        model: model.into(),
        messages: vec![
            ChatMessage::system("You are terse."),
            ChatMessage::user("Say hi"),
        ],
        tools: vec![tool()],
        sampling,
        tool_choice: None,
        timeout: Duration::from_secs(5),
        max_response_bytes: 8 * 1024 * 1024,
    }
}

/// Runs one call and assembles its deltas, as the session does.
pub async fn call(provider: &dyn Provider, request: LlmRequest) -> Result<LlmResponse, LlmError> {
    let mut assembler = ResponseAssembler::bounded(request.max_response_bytes);
    let mut stream = provider.stream(request).await?;
    while let Some(delta) = stream.next().await {
        assembler.push(&delta?)?;
    }
    Ok(assembler.finish())
}

/// Every sampling parameter an agent sets, reasoning `high` (a request's `stop`, penalties,
/// `seed` and `logit_bias` are the providers' unit tests').
pub fn all_sampling() -> SamplingParams {
    SamplingParams {
        temperature: Some(0.25),
        top_p: Some(0.97),
        top_k: Some(40),
        repeat_penalty: Some(1.15),
        max_output_tokens: Some(20_000),
        reasoning: Some(agentd::llm::ReasoningLevel::High),
        ..SamplingParams::default()
    }
}
