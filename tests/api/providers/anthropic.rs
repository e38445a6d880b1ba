//! The Anthropic provider against a Messages API mock: streamed events cut into small chunks,
//! the request it builds (system, tool_use/tool_result, thinking, cache_control), the thinking
//! signature's round trip through a real session, and `agentd` serving through it.

use std::sync::Arc;
use std::time::Duration;

use agentd::agent::{EventSink, ProviderSet, RunControl, Session};
use agentd::llm::{ChatMessage, LlmError, Role, SamplingParams, StopReason, ToolCall, Usage};
use agentd::tools::ToolRegistry;
use serde_json::{Value, json};

use super::{KEY, UNICODE, all_sampling, call, merged, provider, request};
use crate::support::mock_llm::{self, MockLlm, Reply};
use crate::support::scripted::{Harness, TestTools, agent};

fn config(mock: &MockLlm, extra: Value) -> Value {
    merged(
        json!({"type": "anthropic", "baseUrl": mock.origin(), "apiKey": KEY}),
        extra,
    )
}

fn thinking_tool_turn() -> Reply {
    Reply::tool_calls(vec![
        mock_llm::ToolCall::new("toolu_1", "kb__search", r#"{"q":"Grüße ✓"}"#),
        mock_llm::ToolCall::new("toolu_2", "kb__fetch", r#"{"id":7}"#),
    ])
    .with_reasoning("I should look this up — twice.")
    .with_signature("EqQBCkYIBxgCKkD+sig==")
    .with_text(UNICODE)
    .with_usage(12, 34, 1000, 200)
}

#[tokio::test]
async fn thinking_text_parallel_tools_and_cache_usage_decode_from_split_events() {
    let mock = MockLlm::start().await;
    mock.push(
        thinking_tool_turn()
            .split_every(5)
            .with_chunk_gap(Duration::from_millis(1)),
    );
    let p = provider(config(&mock, json!({})));
    let response = call(p.as_ref(), request("claude-x", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert!(mock.received()[0].response_split_inside_utf8());
    assert_eq!(response.text, UNICODE);
    assert_eq!(response.reasoning, "I should look this up — twice.");
    assert_eq!(
        response.reasoning_signature.as_deref(),
        Some("EqQBCkYIBxgCKkD+sig==")
    );
    assert_eq!(
        response.tool_calls,
        vec![
            ToolCall {
                id: "toolu_1".into(),
                name: "kb__search".into(),
                arguments: r#"{"q":"Grüße ✓"}"#.into()
            },
            ToolCall {
                id: "toolu_2".into(),
                name: "kb__fetch".into(),
                arguments: r#"{"id":7}"#.into()
            },
        ]
    );
    assert_eq!(response.stop_reason, Some(StopReason::ToolCalls));
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 1212,
            output_tokens: 34,
            cached_tokens: 1000,
            cache_write_tokens: 200,
            reasoning_tokens: 0
        }),
        "input counts the cached and cache-written prompt too"
    );
    let sent = &mock.received()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.headers["x-api-key"], KEY);
    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
    assert!(!sent.headers.contains_key("authorization"));
}

#[tokio::test]
async fn the_request_maps_system_tools_thinking_and_cache_control() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text("a"));
    mock.push(Reply::text("b"));
    let p = provider(config(&mock, json!({})));
    call(p.as_ref(), request("claude-x", all_sampling()))
        .await
        .expect("with thinking");
    call(p.as_ref(), request("claude-x", SamplingParams::default()))
        .await
        .expect("plain");
    let thinking = mock.body(0);
    assert_eq!(
        thinking["system"],
        json!([{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        thinking["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Say hi", "cache_control": {"type": "ephemeral"}}]}])
    );
    assert_eq!(thinking["max_tokens"], 20_000);
    assert_eq!(
        thinking["thinking"],
        json!({"type": "enabled", "budget_tokens": 16_000}),
        "high = 80 % of max output tokens"
    );
    assert!(
        thinking.get("temperature").is_none() && thinking.get("top_k").is_none(),
        "thinking refuses them: {thinking}"
    );
    assert_eq!(thinking["top_p"], 0.97);
    assert_eq!(
        thinking["tools"],
        json!([{"name": "kb__search", "description": "Searches the knowledge base",
                "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}])
    );
    assert_eq!(thinking["stream"], true);
    let plain = mock.body(1);
    assert!(plain.get("thinking").is_none());
    assert_eq!(
        plain["max_tokens"], 8192,
        "max_tokens is required: a default applies"
    );
    assert!(plain.get("temperature").is_none() && plain.get("top_p").is_none());
}

#[tokio::test]
async fn cache_strategy_none_sends_no_cache_control_and_non_streaming_decodes() {
    let mock = MockLlm::start().await;
    mock.push(thinking_tool_turn());
    let p = provider(config(
        &mock,
        json!({"cacheStrategy": "none", "stream": false}),
    ));
    let response = call(p.as_ref(), request("claude-x", SamplingParams::default()))
        .await
        .expect("call succeeds");
    assert_eq!(response.text, UNICODE);
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(
        response.reasoning_signature.as_deref(),
        Some("EqQBCkYIBxgCKkD+sig==")
    );
    assert_eq!(response.usage.map(|u| u.cached_tokens), Some(1000));
    let sent = mock.body(0).to_string();
    assert!(!sent.contains("cache_control"), "{sent}");
    assert!(!sent.contains("\"stream\""), "{sent}");

    // Long outputs are streamed anyway: the API refuses them as one body.
    mock.push(Reply::text("long"));
    let long = SamplingParams {
        max_output_tokens: Some(21_333),
        ..SamplingParams::default()
    };
    let response = call(p.as_ref(), request("claude-x", long))
        .await
        .expect("streamed call succeeds");
    assert_eq!(response.text, "long");
    assert_eq!(mock.body(1)["stream"], true);
}

#[tokio::test]
async fn error_events_mid_stream_are_classified() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text("partial answer").with_stream_error("overloaded_error", "Overloaded"));
    mock.push(Reply::text("partial answer").with_stream_error("rate_limit_error", "Too many"));
    let p = provider(config(&mock, json!({})));
    let overloaded = call(p.as_ref(), request("claude-x", SamplingParams::default())).await;
    assert_eq!(overloaded, Err(LlmError::Model("Overloaded".into())));
    let limited = call(p.as_ref(), request("claude-x", SamplingParams::default())).await;
    assert!(
        matches!(limited, Err(LlmError::RateLimit { .. })),
        "{limited:?}"
    );
}

/// A session calls a tool with thinking on; the next request must replay the signed thinking
/// block before the tool_use blocks, and the tool results as one user turn.
#[tokio::test]
async fn the_thinking_signature_round_trips_through_a_session() {
    let mock = MockLlm::start().await;
    let first = Reply::tool_calls(vec![
        mock_llm::ToolCall::new("toolu_a", "test__echo", r#"{"n":1}"#),
        mock_llm::ToolCall::new("toolu_b", "test__echo", r#"{"n":2}"#),
    ])
    .with_reasoning("Echo twice.")
    .with_signature("SIG-round-trip");
    mock.push(first);
    mock.push(Reply::text("all echoed"));
    let mut providers = ProviderSet::default();
    providers.insert("a", provider(config(&mock, json!({}))));
    let mut tools = ToolRegistry::default();
    tools.add(Arc::new(TestTools::default()));
    let (sink, mut events) = EventSink::channel(256);
    let drain = tokio::spawn(async move { while events.recv().await.is_some() {} });
    let spec = agent("finalization: text\nreasoning: medium\nmaxOutputTokens: 4096");
    let result = Session::new(providers, tools, sink, RunControl::default())
        .run(Harness::request(spec, "echo twice"))
        .await;
    drain.abort();
    let answer = result
        .conversation
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .and_then(|m| m.content.clone());
    assert_eq!(answer.as_deref(), Some("all echoed"), "{result:?}");
    let stored: Vec<&ChatMessage> = result
        .conversation
        .iter()
        .filter(|m| m.reasoning_signature.is_some())
        .collect();
    assert_eq!(stored.len(), 1, "the signature is kept with its message");

    let second = mock.body(1);
    assert_eq!(
        second["thinking"],
        json!({"type": "enabled", "budget_tokens": 2457})
    );
    let messages = second["messages"].as_array().expect("messages");
    let assistant = &messages[1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "Echo twice.", "signature": "SIG-round-trip"})
    );
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(assistant["content"][1]["input"], json!({"n": 1}));
    let results = messages[2]["content"].as_array().expect("tool results");
    let kinds: Vec<(&str, &str)> = results
        .iter()
        .map(|b| {
            (
                b["type"].as_str().unwrap_or_default(),
                b["tool_use_id"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [("tool_result", "toolu_a"), ("tool_result", "toolu_b")],
        "both results in one user turn"
    );
    assert_eq!(messages.len(), 3);
}

/// `agentd serve` with an `anthropic` provider answers OpenAI-style chat requests through it.
#[tokio::test]
async fn the_server_serves_an_agent_through_an_anthropic_provider() {
    let mock = MockLlm::start().await;
    mock.push(Reply::text(UNICODE));
    let base = mock.origin();
    let app = crate::support::spawn_app_with(|config| {
        config["providers"]["llm"] = json!({"type": "anthropic", "baseUrl": base, "apiKey": KEY});
    })
    .await;
    let response = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("JSON body");
    assert_eq!(body["choices"][0]["message"]["content"], UNICODE);
    assert_eq!(mock.body(0)["model"], "upstream-model");
}
