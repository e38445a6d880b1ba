//! `POST /v1/messages` and the Anthropic-shaped `GET /v1/models`: the exact event sequence, the
//! non-streaming message, and Anthropic-shaped errors.

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::spawn_app;

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
