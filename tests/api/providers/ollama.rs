//! The Ollama provider against a native `/api/chat` NDJSON mock.

use std::time::Duration;

use agentd::llm::{SamplingParams, StopReason, Usage};
use serde_json::{Value, json};

use super::{UNICODE, all_sampling, call, merged, provider, request};
use crate::support::wire::ollama;
use crate::support::wire::{Call, Script, WireMock, WireReply};

fn config(base_url: String, extra: Value) -> Value {
    merged(json!({"type": "ollama", "baseUrl": base_url}), extra)
}

fn script() -> Script {
    Script::calls(vec![
        Call::new("", "kb__search", r#"{"q":"✓"}"#),
        Call::new("", "kb__fetch", r#"{"id":1}"#),
    ])
    .with_reasoning("Hmm — ja.", None)
    .with_text(UNICODE)
    .with_usage(21, 9, 0, 0)
}

#[tokio::test]
async fn thinking_text_tool_calls_and_counts_decode_from_split_lines() {
    let mock = WireMock::start().await;
    let reply = WireReply::ndjson(&ollama::ndjson(&script()))
        .split_every(5)
        .with_gap(Duration::from_millis(1));
    assert!(reply.splits_inside_utf8());
    mock.push(reply);
    // Older configs pointed `ollama` at its OpenAI endpoint; the native API is used anyway.
    let p = provider(config(format!("{}/v1", mock.base_url), json!({})));
    let response = call(p.as_ref(), request("qwen3", SamplingParams::default()))
        .await
        .expect("call succeeds");
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
    let mock = WireMock::start().await;
    mock.push(WireReply::ndjson(&ollama::ndjson(&Script::text("a"))));
    let p = provider(config(
        mock.base_url.clone(),
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
    let mock = WireMock::start().await;
    mock.push(WireReply::json(&ollama::json(&script())));
    let p = provider(config(mock.base_url.clone(), json!({"stream": false})));
    let response = call(p.as_ref(), request("qwen3", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert_eq!(response.text, UNICODE);
    assert_eq!(response.reasoning, "Hmm — ja.");
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(mock.body(0)["stream"], false);
}
