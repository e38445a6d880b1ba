//! The Gemini provider against a `streamGenerateContent?alt=sse` mock.

use std::time::Duration;

use agentd::llm::{ChatMessage, Role, SamplingParams, StopReason, ToolCall, Usage};
use serde_json::{Value, json};

use super::{KEY, UNICODE, all_sampling, call, merged, provider, request};
use crate::support::mock_llm::{self, MockLlm, Reply};

fn config(mock: &MockLlm, extra: Value) -> Value {
    merged(
        json!({"type": "google", "baseUrl": format!("{}/v1beta", mock.origin()), "apiKey": KEY}),
        extra,
    )
}

fn script() -> Reply {
    Reply::tool_calls(vec![
        mock_llm::ToolCall::new("", "kb__search", r#"{"q":"мир"}"#),
        mock_llm::ToolCall::new("", "kb__fetch", r#"{"id":3}"#),
    ])
    .with_reasoning("Zwei Aufrufe — ✓")
    .with_signature("GEMINI-SIG")
    .with_text(UNICODE)
    .with_usage(50, 20, 16, 0)
}

#[tokio::test]
async fn thoughts_text_function_calls_and_usage_decode_from_split_frames() {
    let mock = MockLlm::start().await;
    mock.push(
        script()
            .split_every(5)
            .with_chunk_gap(Duration::from_millis(1)),
    );
    let p = provider(config(&mock, json!({})));
    let response = call(p.as_ref(), request("gemini-x", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert!(mock.received()[0].response_split_inside_utf8());
    assert_eq!(response.text, UNICODE);
    assert_eq!(response.reasoning, "Zwei Aufrufe — ✓");
    assert_eq!(response.reasoning_signature.as_deref(), Some("GEMINI-SIG"));
    let calls: Vec<(String, String)> = response
        .tool_calls
        .iter()
        .map(|c| (c.name.clone(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("kb__search".to_string(), r#"{"q":"мир"}"#.to_string()),
            ("kb__fetch".to_string(), r#"{"id":3}"#.to_string())
        ]
    );
    assert!(
        response.tool_calls.iter().all(|c| !c.id.is_empty()),
        "ids are made up when Gemini sends none"
    );
    assert_ne!(response.tool_calls[0].id, response.tool_calls[1].id);
    assert_eq!(response.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 50,
            output_tokens: 20,
            cached_tokens: 16,
            cache_write_tokens: 0,
            reasoning_tokens: 0
        })
    );
    let sent = &mock.received()[0];
    assert_eq!(sent.path, "/v1beta/models/gemini-x:streamGenerateContent");
    assert_eq!(sent.query, "alt=sse");
    assert_eq!(sent.headers["x-goog-api-key"], KEY);
    assert!(
        !sent.query.contains(KEY),
        "the key never travels in the URL"
    );
}

#[tokio::test]
async fn the_request_carries_generation_config_tools_and_named_function_responses() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text("a"));
    mock.push(Reply::text("b"));
    let p = provider(config(&mock, json!({})));
    let mut with_history = request("gemini-x", all_sampling());
    let mut assistant = ChatMessage::assistant("looking");
    assistant.reasoning_signature = Some("SIG-1".into());
    assistant.tool_calls = vec![ToolCall {
        id: "call_9".into(),
        name: "kb__search".into(),
        arguments: r#"{"q":"x"}"#.into(),
    }];
    let mut reply = ChatMessage::new(Role::Tool, "found it");
    reply.tool_call_id = Some("call_9".into());
    with_history.messages.extend([assistant, reply]);
    call(p.as_ref(), with_history).await.expect("first call");
    call(
        p.as_ref(),
        request("models/gemini-x", SamplingParams::default()),
    )
    .await
    .expect("second call");
    let sent = mock.body(0);
    assert_eq!(
        sent["generationConfig"],
        json!({"temperature": 0.25, "topP": 0.97, "topK": 40, "frequencyPenalty": 1.15,
               "maxOutputTokens": 20_000,
               "thinkingConfig": {"thinkingBudget": 16_000, "includeThoughts": true}})
    );
    assert_eq!(
        sent["systemInstruction"],
        json!({"parts": [{"text": "You are terse."}]})
    );
    assert_eq!(
        sent["tools"][0]["functionDeclarations"][0]["name"],
        "kb__search"
    );
    assert!(sent["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"].is_object());
    assert_eq!(
        sent["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Say hi"}]},
            {"role": "model", "parts": [{"text": "looking"},
                {"functionCall": {"name": "kb__search", "args": {"q": "x"}}, "thoughtSignature": "SIG-1"}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "kb__search", "response": {"content": "found it"}}}]},
        ])
    );
    let bare = &mock.received()[1];
    assert!(bare.body.get("generationConfig").is_none(), "{}", bare.body);
    assert_eq!(bare.path, "/v1beta/models/gemini-x:streamGenerateContent");
}

#[tokio::test]
async fn non_streaming_uses_generate_content() {
    let mock = MockLlm::start().await;
    mock.push(script());
    let p = provider(config(&mock, json!({"stream": false})));
    let response = call(p.as_ref(), request("gemini-x", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert_eq!(response.text, UNICODE);
    assert_eq!(response.tool_calls.len(), 2);
    let sent = &mock.received()[0];
    assert_eq!(sent.path, "/v1beta/models/gemini-x:generateContent");
    assert_eq!(sent.query, "");
}
