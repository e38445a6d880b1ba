//! The Ollama provider against a native `/api/chat` NDJSON mock.

use std::time::Duration;

use agentd::llm::{SamplingParams, StopReason, Usage};
use serde_json::{Value, json};

use super::{UNICODE, all_sampling, call, merged, provider, request};
use crate::support::mock_llm::{self, MockLlm, Reply};

fn config(base_url: String, extra: Value) -> Value {
    merged(json!({"type": "ollama", "baseUrl": base_url}), extra)
}

fn script() -> Reply {
    Reply::tool_calls(vec![
        mock_llm::ToolCall::new("", "kb__search", r#"{"q":"✓"}"#),
        mock_llm::ToolCall::new("", "kb__fetch", r#"{"id":1}"#),
    ])
    .with_reasoning("Hmm — ja.")
    .with_text(UNICODE)
    .with_usage(21, 9, 0, 0)
}

#[tokio::test]
async fn thinking_text_tool_calls_and_counts_decode_from_split_lines() {
    let mock = MockLlm::start().await;
    mock.push(
        script()
            .split_every(5)
            .with_chunk_gap(Duration::from_millis(1)),
    );
    // Older configs pointed `ollama` at its OpenAI endpoint; the native API is used anyway.
    let p = provider(config(format!("{}/v1", mock.origin()), json!({})));
    let response = call(p.as_ref(), request("qwen3", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert!(mock.received()[0].response_split_inside_utf8());
    assert_eq!(response.text, UNICODE);
    assert_eq!(response.reasoning, "Hmm — ja.");
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(response.tool_calls[0].arguments, r#"{"q":"✓"}"#);
    assert_eq!(response.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 21,
            output_tokens: 9,
            ..Usage::default()
        })
    );
    assert_eq!(mock.received()[0].path, "/api/chat");
}

#[tokio::test]
async fn sampling_goes_into_options_and_overrides_apply() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text("a"));
    let p = provider(config(
        mock.origin(),
        json!({"models": {"qwen3": {"overrides": {"repeat_penalty": null, "topK": 5}}}}),
    ));
    call(p.as_ref(), request("qwen3", all_sampling()))
        .await
        .expect("call succeeds");
    let sent = mock.body(0);
    assert_eq!(
        sent["options"],
        json!({"temperature": 0.25, "top_p": 0.97, "top_k": 5, "num_predict": 20_000})
    );
    assert_eq!(sent["think"], true);
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["tools"][0]["function"]["name"], "kb__search");
}

#[tokio::test]
async fn non_streaming_decodes_one_object() {
    let mock = MockLlm::start().await;
    mock.push(script());
    let p = provider(config(mock.origin(), json!({"stream": false})));
    let response = call(p.as_ref(), request("qwen3", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert_eq!(response.text, UNICODE);
    assert_eq!(response.reasoning, "Hmm — ja.");
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(mock.body(0)["stream"], false);
}
