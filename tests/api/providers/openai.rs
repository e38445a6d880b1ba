//! The OpenAI dialects (`openai`, `openai-compatible`, `openrouter`) against a Chat Completions
//! mock that cuts its SSE body into 7-byte (or smaller) chunks.

use std::time::Duration;

use agentd::llm::{SamplingParams, StopReason, ToolCall, Usage};
use serde_json::{Value, json};

use super::{KEY, UNICODE, all_sampling, call, merged, provider, request};
use crate::support::mock_llm::openai::{self, Dialect, Indices};
use crate::support::mock_llm::{self, MockLlm, Reply};

fn compatible(mock: &MockLlm, extra: Value) -> Value {
    merged(
        json!({"type": "openai-compatible", "baseUrl": format!("{}/v1", mock.origin()), "apiKey": KEY}),
        extra,
    )
}

fn two_calls() -> Vec<mock_llm::ToolCall> {
    vec![
        mock_llm::ToolCall::new("call_a", "kb__search", r#"{"q":"Grüße — ✓"}"#),
        mock_llm::ToolCall::new("call_b", "kb__fetch", r#"{"id":42,"deep":{"x":[1,2]}}"#),
    ]
}

fn expected_calls() -> Vec<ToolCall> {
    two_calls()
        .into_iter()
        .map(|c| ToolCall {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        })
        .collect()
}

#[tokio::test]
async fn text_reasoning_and_usage_survive_splits_inside_json_and_utf8() {
    let mock = MockLlm::start().await;
    let script = Reply::text(UNICODE)
        .with_reasoning("Denke nach… ✓")
        .with_usage(30, 12, 8, 3);
    mock.push(
        script
            .split_every(5)
            .with_chunk_gap(Duration::from_millis(1)),
    );
    let p = provider(compatible(&mock, json!({})));
    let response = call(p.as_ref(), request("m", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert_eq!(response.text, UNICODE);
    assert_eq!(response.reasoning, "Denke nach… ✓");
    assert_eq!(response.stop_reason, Some(StopReason::Stop));
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 30,
            output_tokens: 12,
            cached_tokens: 8,
            cache_write_tokens: 3,
            reasoning_tokens: 0
        })
    );
    let sent = &mock.received()[0];
    assert!(
        sent.response_split_inside_utf8(),
        "the mock must cut a character"
    );
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.headers["authorization"], format!("Bearer {KEY}"));
}

#[tokio::test]
async fn the_reasoning_field_is_read_too() {
    let mock = MockLlm::start().await;
    let dialect = Dialect {
        reasoning_field: "reasoning",
        ..Dialect::default()
    };
    mock.push(
        Reply::text("ok")
            .with_reasoning("because")
            .with_dialect(dialect),
    );
    let p = provider(compatible(&mock, json!({})));
    let response = call(p.as_ref(), request("m", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert_eq!(response.reasoning, "because");
}

#[tokio::test]
async fn parallel_tool_calls_assemble_in_every_index_dialect() {
    for indices in [Indices::Proper, Indices::Missing, Indices::Shared] {
        let mock = MockLlm::start().await;
        let dialect = Dialect {
            indices,
            ..Dialect::default()
        };
        mock.push(Reply::tool_calls(two_calls()).with_dialect(dialect));
        let p = provider(compatible(&mock, json!({})));
        let response = call(p.as_ref(), request("m", SamplingParams::default()))
            .await
            .expect("call succeeds");
        assert_eq!(response.tool_calls, expected_calls(), "{indices:?}");
        assert_eq!(
            response.stop_reason,
            Some(StopReason::ToolCalls),
            "{indices:?}"
        );
    }
}

#[tokio::test]
async fn non_streaming_responses_decode_the_same() {
    let mock = MockLlm::start().await;
    let script = Reply::tool_calls(two_calls()).with_text(UNICODE);
    mock.push(script);
    let p = provider(compatible(&mock, json!({"stream": false})));
    let response = call(p.as_ref(), request("m", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert_eq!(response.text, UNICODE);
    assert_eq!(response.tool_calls, expected_calls());
    let sent = mock.body(0);
    assert!(sent.get("stream").is_none() && sent.get("stream_options").is_none());
}

#[tokio::test]
async fn compatible_servers_get_every_parameter_or_none() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text("a"));
    mock.push(Reply::text("b"));
    let p = provider(compatible(&mock, json!({})));
    call(p.as_ref(), request("m", all_sampling()))
        .await
        .expect("first call");
    call(p.as_ref(), request("m", SamplingParams::default()))
        .await
        .expect("second call");
    let full = mock.body(0);
    assert_eq!(full["temperature"], 0.25);
    assert_eq!(full["top_p"], 0.97);
    assert_eq!(full["top_k"], 40);
    assert_eq!(full["frequency_penalty"], 1.15);
    assert_eq!(full["max_tokens"], 20_000);
    assert_eq!(full["reasoning_effort"], "high");
    assert_eq!(full["stream"], true);
    assert_eq!(full["stream_options"], json!({"include_usage": true}));
    assert_eq!(full["tools"][0]["function"]["name"], "kb__search");
    assert_eq!(
        full["messages"][0],
        json!({"role": "system", "content": "You are terse."})
    );
    let bare = mock.body(1);
    for absent in [
        "temperature",
        "top_p",
        "top_k",
        "frequency_penalty",
        "max_tokens",
        "reasoning_effort",
    ] {
        assert!(bare.get(absent).is_none(), "{absent} was sent: {bare}");
    }
}

#[tokio::test]
async fn openai_itself_gets_its_own_parameter_names_and_model_overrides_apply() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text("a"));
    let p = provider(json!({
        "type": "openai", "baseUrl": format!("{}/v1", mock.origin()), "apiKey": KEY,
        "includeUsage": false,
        "models": {"o-mini": {"overrides": {"temperature": null, "top_p": 1}, "reasoning": ["low", "low", "medium", "medium"]}},
    }));
    call(p.as_ref(), request("o-mini", all_sampling()))
        .await
        .expect("call succeeds");
    let sent = mock.body(0);
    assert_eq!(sent["max_completion_tokens"], 20_000);
    assert!(sent.get("max_tokens").is_none() && sent.get("top_k").is_none());
    assert!(sent.get("temperature").is_none(), "null override omits it");
    assert_eq!(sent["top_p"], 1.0, "a number override forces it");
    assert_eq!(
        sent["reasoning_effort"], "medium",
        "the model maps high to medium"
    );
    assert!(sent.get("stream_options").is_none(), "includeUsage: false");
}

#[tokio::test]
async fn a_rejected_parameter_is_dropped_retried_and_never_sent_again() {
    let mock = MockLlm::start().await;
    mock.push(Reply::status(
        400,
        openai::error(
            "invalid_request_error",
            None,
            "Unrecognized request argument supplied: top_k",
        ),
    ));
    mock.push(Reply::text("first"));
    mock.push(Reply::text("second"));
    let p = provider(compatible(&mock, json!({})));
    let first = call(p.as_ref(), request("m", all_sampling()))
        .await
        .expect("the retry without top_k succeeds");
    assert_eq!(first.text, "first");
    let second = call(p.as_ref(), request("m", all_sampling()))
        .await
        .expect("second call");
    assert_eq!(second.text, "second");
    let received = mock.received();
    assert_eq!(received.len(), 3, "one rejection, then no more");
    assert_eq!(received[0].body["top_k"], 40);
    for later in &received[1..] {
        assert!(later.body.get("top_k").is_none());
        assert_eq!(later.body["temperature"], 0.25, "other parameters stay");
    }
}

#[tokio::test]
async fn a_400_naming_no_optional_parameter_is_a_model_error() {
    let mock = MockLlm::start().await;
    mock.push(Reply::status(
        400,
        openai::error("invalid_request_error", None, "messages: too long"),
    ));
    let p = provider(compatible(&mock, json!({})));
    let error = call(p.as_ref(), request("m", all_sampling()))
        .await
        .expect_err("fails");
    assert!(
        matches!(&error, agentd::llm::LlmError::Model(m) if m.contains("too long")),
        "{error:?}"
    );
    assert_eq!(mock.received().len(), 1);
}

#[tokio::test]
async fn openrouter_sends_its_headers_and_reports_cost_and_the_serving_route() {
    let mock = MockLlm::start().await;
    let dialect = Dialect {
        reasoning_field: "reasoning",
        ..Dialect::openrouter()
    };
    mock.push(
        Reply::text(UNICODE)
            .with_reasoning("hm")
            .with_dialect(dialect),
    );
    mock.push(Reply::text("whole").with_dialect(dialect));
    let p = provider(
        json!({"type": "openrouter", "baseUrl": format!("{}/api/v1", mock.origin()), "apiKey": KEY}),
    );
    let response = call(
        p.as_ref(),
        request("anthropic/claude-sonnet-4", all_sampling()),
    )
    .await
    .expect("call succeeds");
    assert_eq!(response.text, UNICODE);
    assert_eq!(
        response.metadata.cost_usd,
        Some(openai::OPENROUTER_ROUTE.cost)
    );
    assert_eq!(
        response.metadata.actual_provider.as_deref(),
        Some(openai::OPENROUTER_ROUTE.provider)
    );
    assert_eq!(
        response.metadata.actual_model.as_deref(),
        Some(openai::OPENROUTER_ROUTE.model)
    );
    let sent = &mock.received()[0];
    assert_eq!(sent.path, "/api/v1/chat/completions");
    assert_eq!(sent.headers["http-referer"], "https://github.com/agentd");
    assert_eq!(sent.headers["x-title"], "agentd");
    assert_eq!(sent.body["reasoning"], json!({"effort": "high"}));
    assert_eq!(sent.body["usage"], json!({"include": true}));
    assert_eq!(sent.body["repetition_penalty"], 1.15);
    assert!(sent.body.get("reasoning_effort").is_none());

    let q = provider(
        json!({"type": "openrouter", "baseUrl": format!("{}/api/v1", mock.origin()), "stream": false, "headers": {"X-Title": "my app"}}),
    );
    let whole = call(q.as_ref(), request("x/y", SamplingParams::default()))
        .await
        .expect("non-streaming call");
    assert_eq!(whole.metadata.cost_usd, Some(openai::OPENROUTER_ROUTE.cost));
    assert_eq!(
        whole.metadata.actual_model.as_deref(),
        Some(openai::OPENROUTER_ROUTE.model)
    );
    assert_eq!(mock.received()[1].headers["x-title"], "my app");
}
