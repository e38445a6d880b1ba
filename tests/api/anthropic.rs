//! `POST /v1/messages` and the Anthropic-shaped `GET /v1/models`: the exact event sequence, the
//! non-streaming message, Anthropic-shaped errors, the request shapes Claude Code sends (system
//! turns in `messages`, betas, fields agentd does not use, deferred tools) and
//! `server.defaultAgent` answering model names that are no agent.

use serde_json::{Value, json};

use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{spawn_app, spawn_app_with};

/// `(event, data)` of every SSE frame.
async fn sse_events(response: reqwest::Response) -> Vec<(String, Value)> {
    let body = response.text().await.expect("body");
    body.split("\n\n")
        .filter_map(|frame| {
            let event = frame
                .lines()
                .find_map(|l| l.strip_prefix("event: "))?
                .to_string();
            let data = frame.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((event, serde_json::from_str(data).expect("data is JSON")))
        })
        .collect()
}

#[tokio::test]
async fn streaming_sends_thinking_then_text_blocks_and_the_closing_events() {
    let app = spawn_app().await;
    app.llm.push(
        Reply::text("Hello there")
            .with_reasoning("Let me think")
            .with_usage(11, 4, 0, 0),
    );
    let body = json!({"model": "chat", "max_tokens": 100, "stream": true, "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]});
    let response = app.post_json("/v1/messages", &body).await;
    assert_eq!(response.status(), 200);
    let events = sse_events(response).await;
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    let mut expected = vec!["message_start", "content_block_start"];
    let thinking_deltas = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "thinking_delta")
        .count();
    let text_deltas = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "text_delta")
        .count();
    expected.extend(std::iter::repeat_n("content_block_delta", thinking_deltas));
    expected.extend(["content_block_stop", "content_block_start"]);
    expected.extend(std::iter::repeat_n("content_block_delta", text_deltas));
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(kinds, expected);
    assert_eq!(events[0].1["message"]["role"], "assistant");
    assert_eq!(
        events[1].1,
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}})
    );
    let text_start = events
        .iter()
        .find(|(k, d)| k == "content_block_start" && d["index"] == 1)
        .expect("text block");
    assert_eq!(
        text_start.1["content_block"],
        json!({"type": "text", "text": ""})
    );
    let text: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    let thinking: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["thinking"].as_str())
        .collect();
    assert_eq!(
        (thinking.as_str(), text.as_str()),
        ("Let me think", "Hello there")
    );
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["output_tokens"], 4);
    let sent = &app.llm.requests()[0]["messages"];
    assert_eq!(sent[1], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(app.llm.requests()[0]["max_tokens"], 100);
}

#[tokio::test]
async fn non_streaming_returns_a_message() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::text("Fine answer").with_usage(5, 2, 0, 0));
    let body = json!({"model": "chat", "max_tokens": 50, "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}]});
    let response = app.post_json("/v1/messages", &body).await;
    assert_eq!(response.status(), 200);
    let message: Value = response.json().await.expect("json");
    assert_eq!(message["type"], "message");
    assert!(message["id"].as_str().expect("id").starts_with("msg_"));
    assert_eq!(
        message["content"],
        json!([{"type": "text", "text": "Fine answer"}])
    );
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(message["usage"]["input_tokens"], 5);
}

#[tokio::test]
async fn errors_use_the_anthropic_shape() {
    let app = spawn_app().await;
    let unknown = app.post_json("/v1/messages", &json!({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        unknown.json::<Value>().await.expect("json")["error"]["type"],
        "not_found_error"
    );
    let bad = app
        .client
        .post(app.url("/v1/messages"))
        .body("{oops")
        .send()
        .await
        .expect("sent");
    assert_eq!(bad.status(), 400);
    let bad: Value = bad.json().await.expect("json");
    assert_eq!(
        (bad["type"].as_str(), bad["error"]["type"].as_str()),
        (Some("error"), Some("invalid_request_error"))
    );
    let tools = app
        .post_json("/v1/messages", &json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "tools": [{"input_schema": {"type": "object"}}]}))
        .await;
    assert_eq!(
        tools.status(),
        400,
        "a client tool needs a name (SPEC §9.2)"
    );
    assert!(
        tools.json::<Value>().await.expect("json")["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("has no name")
    );
    for _ in 0..3 {
        app.llm
            .push(Reply::status(500, json!({"error": {"message": "down"}})));
    }
    let failed = app
        .post_json(
            "/v1/messages",
            &json!({"model": "chat", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(failed.status(), 502);
    assert_eq!(
        failed.json::<Value>().await.expect("json")["error"]["type"],
        "api_error"
    );
}

#[tokio::test]
async fn a_failure_mid_stream_is_an_error_event() {
    let app = spawn_app().await;
    for _ in 0..3 {
        app.llm
            .push(Reply::status(500, json!({"error": {"message": "down"}})));
    }
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let events = sse_events(app.post_json("/v1/messages", &body).await).await;
    assert_eq!(
        events.first().map(|(k, _)| k.as_str()),
        Some("message_start")
    );
    let (kind, data) = events.last().expect("error");
    assert_eq!(kind, "error");
    assert_eq!(data["error"]["type"], "api_error");
}

#[tokio::test]
async fn models_take_the_anthropic_shape_when_asked() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(app.url("/v1/models"))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .expect("sent");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["data"][0]["type"], "model");
    assert_eq!(body["data"][0]["id"], "chat");
    assert_eq!(body["data"][0]["display_name"], "A helpful chat agent");
    assert_eq!(body["has_more"], false);
}

/// The role and text of every message the model was sent, after the agent's system prompt.
fn sent_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"].as_array().expect("messages")[1..]
        .iter()
        .map(|m| {
            let text = m["content"].as_str().unwrap_or_default().to_string();
            (m["role"].as_str().expect("role").to_string(), text)
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(role, text)| (role.to_string(), text.to_string()))
        .collect()
}

#[tokio::test]
async fn system_turns_in_messages_join_the_system_prompt_or_keep_their_place() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("ok"));
    let body = json!({"model": "chat", "max_tokens": 100,
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332;"},
                   {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "system", "content": "Leading rule."},
            {"role": "user", "content": "first"},
            {"role": "system", "content": [{"type": "text", "text": "Between turns.", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"}, {"type": "text", "text": "answer"}]},
            {"role": "user", "content": [{"type": "text", "text": "second", "cache_control": {"type": "ephemeral"}}]},
            {"role": "system", "content": "After the prompt."}]});
    let response = app.post_json("/v1/messages", &body).await;
    assert_eq!(
        response.status(),
        200,
        "{}",
        response.text().await.unwrap_or_default()
    );
    assert_eq!(
        sent_messages(&app.llm.requests()[0]),
        pairs(&[
            ("system", "Be brief.\n\nLeading rule."),
            ("user", "first"),
            ("system", "Between turns."),
            ("assistant", "answer"),
            ("system", "After the prompt."),
            ("user", "second"),
        ]),
        "the billing line is dropped, a trailing system turn goes just before the prompt"
    );
    let only_system = app
        .post_json(
            "/v1/messages",
            &json!({"model": "chat", "messages": [{"role": "system", "content": "x"}]}),
        )
        .await;
    assert_eq!(only_system.status(), 400);
    let error: Value = only_system.json().await.expect("json");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .expect("message")
            .contains("only system messages"),
        "{error}"
    );
}

#[tokio::test]
async fn unknown_betas_and_the_fields_claude_code_sends_are_accepted() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("accepted"));
    let body = json!({"model": "chat", "max_tokens": 1000, "stream": true,
        "metadata": {"user_id": "{\"device_id\":\"d\",\"session_id\":\"s\"}"},
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "medium"},
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
        "tools": [{"name": "Bash", "description": "Runs a command", "cache_control": {"type": "ephemeral"},
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
                     {"role": "system", "content": [{"type": "text", "text": "# Environment"}]}]});
    let response = app
        .client
        .post(app.url("/v1/messages?beta=true"))
        .header("anthropic-version", "2023-06-01")
        .header(
            "anthropic-beta",
            "claude-code-20250219,context-management-2025-06-27,mid-conversation-system-2099-01-01,no-such-beta",
        )
        .json(&body)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let events = sse_events(response).await;
    let text: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "accepted");
    let sent = &app.llm.requests()[0];
    assert_eq!(sent["tools"][0]["function"]["name"], "Bash");
    assert_eq!(sent["max_tokens"], 1000);
}

#[tokio::test]
async fn a_max_tokens_sized_for_claude_leaves_the_agents_window_room() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("roomy"));
    let tools = json!([{"name": "Bash", "input_schema": {"type": "object"}}]);
    let body = json!({"model": "chat", "max_tokens": 128000, "tools": tools,
        "messages": [{"role": "user", "content": "hi"}]});
    let message: Value = app
        .post_json("/v1/messages", &body)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(message["content"][0]["text"], "roomy");
    let sent = &app.llm.requests()[0];
    // A quarter of the default 131072-token window; all of 128000 would force a final turn.
    assert_eq!(sent["max_tokens"], 32768);
    assert_eq!(
        sent["tools"][0]["function"]["name"], "Bash",
        "not forced to a final turn"
    );
    for (asked, sent) in [(32767, 32767), (32768, 32768), (32769, 32768)] {
        app.llm.push(Reply::text("ok"));
        let body = json!({"model": "chat", "max_tokens": asked, "messages": [{"role": "user", "content": "hi"}]});
        app.post_json("/v1/messages", &body).await;
        let last = app.llm.requests().last().cloned().expect("a request");
        assert_eq!(last["max_tokens"], sent, "max_tokens {asked}");
    }
    // An agent with its own output limit keeps it.
    app.llm.push(Reply::text("tight"));
    let body = json!({"model": "tight", "max_tokens": 128000, "messages": [{"role": "user", "content": "hi"}]});
    app.post_json("/v1/messages", &body).await;
    assert_eq!(app.llm.requests()[4]["max_tokens"], 100);
}

#[tokio::test]
async fn deferred_tools_wait_for_a_tool_reference_and_results_may_hold_blocks() {
    let app = spawn_app().await;
    let tools = json!([
        {"name": "ToolSearch", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}},
        {"name": "WebFetch", "defer_loading": true, "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}}}]);
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "toolu_search",
        "ToolSearch",
        r#"{"query": "select:WebFetch"}"#,
    )]));
    let first: Value = app
        .post_json(
            "/v1/messages",
            &json!({"model": "chat", "max_tokens": 100, "tools": tools,
            "messages": [{"role": "user", "content": "fetch it"}]}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(first["stop_reason"], "tool_use", "{first}");
    let offered = |n: usize| -> Vec<String> {
        app.llm.requests()[n]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(offered(0), ["ToolSearch"]);
    app.llm.push(Reply::text("loaded"));
    let second = app
        .post_json("/v1/messages", &json!({"model": "chat", "max_tokens": 100, "tools": tools, "messages": [
            {"role": "user", "content": "fetch it"},
            {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_search", "is_error": false,
                "cache_control": {"type": "ephemeral"},
                "content": [{"type": "tool_reference", "tool_name": "WebFetch"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]}]}))
        .await;
    assert_eq!(
        second.status(),
        200,
        "{}",
        second.text().await.unwrap_or_default()
    );
    assert_eq!(offered(1), ["ToolSearch", "WebFetch"]);
    let messages = app.llm.requests()[1]["messages"].clone();
    let result = messages
        .as_array()
        .expect("messages")
        .last()
        .expect("result")
        .clone();
    assert_eq!(
        result,
        json!({"role": "tool", "tool_call_id": "toolu_search",
            "content": "Tool loaded: WebFetch\n[image not shown: agentd passes text]"})
    );
    let bad = app
        .post_json(
            "/v1/messages",
            &json!({"model": "chat", "max_tokens": 100, "messages": [
            {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_search",
                "content": [{"type": "video"}]}]}]}),
        )
        .await;
    assert_eq!(bad.status(), 400);
    let bad: Value = bad.json().await.expect("json");
    assert!(
        bad["error"]["message"]
            .as_str()
            .expect("message")
            .contains("\"video\""),
        "{bad}"
    );
}

#[tokio::test]
async fn a_model_that_names_no_agent_is_404_without_a_default_agent() {
    let app = spawn_app().await;
    let body = json!({"model": "claude-opus-5-5", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]});
    for path in ["/v1/messages", "/v1/messages/count_tokens"] {
        let response = app.post_json(path, &body).await;
        assert_eq!(response.status(), 404, "{path}");
        let error: Value = response.json().await.expect("json");
        assert_eq!(error["error"]["type"], "not_found_error");
        assert!(
            error["error"]["message"]
                .as_str()
                .expect("message")
                .contains("`claude-opus-5-5`"),
            "{error}"
        );
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn the_default_agent_answers_model_names_that_are_no_agent_on_every_headend() {
    let app = spawn_app_with(|config| config["server"] = json!({"defaultAgent": "chat"})).await;
    for text in ["messages", "chat completions", "responses"] {
        app.llm.push(Reply::text(text));
    }
    let asks = [
        (
            "/v1/messages",
            json!({"model": "claude-opus-5-5", "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}),
        ),
        ("/v1/responses", json!({"model": "gpt-5", "input": "hi"})),
    ];
    let mut answers = Vec::new();
    for (path, body) in &asks {
        let (run_id, response) = app.start_run(path, body).await;
        assert_eq!(response.status(), 200, "{path}");
        answers.push(response.json::<Value>().await.expect("json"));
        let run = app
            .ended_run(&run_id, std::time::Duration::from_secs(10))
            .await;
        assert_eq!(run["agent"], "chat", "{path}: {run}");
    }
    assert_eq!(answers[0]["content"][0]["text"], "messages");
    assert_eq!(
        answers[0]["model"], "claude-opus-5-5",
        "the reply names the model asked for"
    );
    assert_eq!(
        answers[1]["choices"][0]["message"]["content"],
        "chat completions"
    );
    let count: Value = app
        .post_json(
            "/v1/messages/count_tokens",
            &json!({"model": "claude-haiku", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert!(
        count["input_tokens"].as_u64().is_some_and(|n| n > 0),
        "{count}"
    );
    // An agent's own name still picks that agent.
    app.llm.push(Reply::text("tight answer"));
    let named: Value = app
        .post_json(
            "/v1/messages",
            &json!({"model": "tight", "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(named["content"][0]["text"], "tight answer");
    let system = app.llm.requests()[3]["messages"][0]["content"].clone();
    assert!(
        system
            .as_str()
            .is_some_and(|s| s.starts_with("You answer.")),
        "the tight agent ran: {system}"
    );
}

/// An error put in Anthropic's shape keeps the headers the layers inside set: a 405 names the
/// methods the route takes (RFC 9110 `Allow`), and every answer carries its request id.
#[tokio::test]
async fn a_wrong_method_on_an_anthropic_route_is_anthropic_shaped_and_keeps_its_allow_header() {
    let app = spawn_app().await;
    for path in ["/v1/messages", "/v1/messages/count_tokens"] {
        let response = app
            .client
            .put(app.url(path))
            .header("x-request-id", "req-405")
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 405, "{path}");
        let allow = response.headers().get("allow").map(|v| v.to_str().ok());
        assert_eq!(allow, Some(Some("POST")), "{path}");
        assert_eq!(
            response.headers().get("x-request-id").map(|v| v.as_bytes()),
            Some(&b"req-405"[..]),
            "{path}"
        );
        assert_eq!(
            response.headers().get("content-type").map(|v| v.as_bytes()),
            Some(&b"application/json"[..]),
            "{path}"
        );
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["type"], "error", "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    }
}
