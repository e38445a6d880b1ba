//! `POST /v1/chat/completions`: the exact OpenAI wire format, streaming and not, the history
//! and overrides that reach the upstream, errors before and after a stream starts, and
//! cancellation when the client goes away.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{json_frames, spawn_app, sse_data};

fn ask(content: &str) -> Value {
    json!({"model": "chat", "messages": [{"role": "user", "content": content}]})
}

#[tokio::test]
async fn non_streaming_answer_has_the_openai_shape() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::text("Hello there").with_usage(12, 3, 2, 0));
    let response = app.post_json("/v1/chat/completions", &ask("hi")).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-agentd-run-id"));
    let body: Value = response.json().await.expect("json");
    assert!(body["id"].as_str().expect("id").starts_with("chatcmpl-"));
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "chat");
    assert_eq!(
        body["choices"][0]["message"],
        json!({"role": "assistant", "content": "Hello there"})
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15, "prompt_tokens_details": {"cached_tokens": 2}})
    );
}

#[tokio::test]
async fn the_upstream_gets_the_agent_prompt_history_and_model() {
    let app = spawn_app().await;
    let body = json!({
        "model": "chat",
        "messages": [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "salut"},
            {"role": "user", "content": "how are you?"},
        ],
        "temperature": 0.2, "top_p": 0.9, "max_tokens": 50,
    });
    assert_eq!(
        app.post_json("/v1/chat/completions", &body).await.status(),
        200
    );
    let sent = &app.llm.requests()[0];
    assert_eq!(sent["model"], "upstream-model");
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "salut"},
            {"role": "user", "content": "how are you?"},
        ])
    );
    assert_eq!(sent["temperature"], 0.2);
    assert_eq!(sent["top_p"], 0.9);
    assert_eq!(sent["max_tokens"], 50);
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    assert!(
        sent.get("tools").is_none(),
        "no tool list is sent when the agent has no tools"
    );
    assert_eq!(
        app.llm.request_headers()[0]["authorization"],
        "Bearer test-key"
    );
}

#[tokio::test]
async fn streaming_sends_the_exact_chunk_sequence() {
    let app = spawn_app().await;
    app.llm.push(
        Reply::text("Hello brave world")
            .with_reasoning("Let me think")
            .with_usage(9, 4, 0, 0),
    );
    let body = json!({"model": "chat", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}]});
    let response = app.post_json("/v1/chat/completions", &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let data = sse_data(response).await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let frames = json_frames(&data);
    let id = frames[0]["id"].as_str().expect("id").to_string();
    for frame in &frames {
        assert_eq!(frame["object"], "chat.completion.chunk");
        assert_eq!(frame["id"], id.as_str());
        assert_eq!(frame["model"], "chat");
    }
    let deltas: Vec<Value> = frames
        .iter()
        .filter_map(|f| f["choices"].get(0).map(|c| c["delta"].clone()))
        .collect();
    assert_eq!(deltas[0], json!({"role": "assistant", "content": ""}));
    let reasoning: String = deltas
        .iter()
        .filter_map(|d| d["reasoning_content"].as_str())
        .collect();
    let content: String = deltas
        .iter()
        .filter_map(|d| d["content"].as_str())
        .collect();
    assert_eq!(reasoning, "Let me think");
    assert_eq!(content, "Hello brave world");
    let first_content = deltas
        .iter()
        .position(|d| d["content"].as_str().is_some_and(|c| !c.is_empty()))
        .expect("content");
    let last_reasoning = deltas
        .iter()
        .rposition(|d| d.get("reasoning_content").is_some())
        .expect("reasoning");
    assert!(
        last_reasoning < first_content,
        "thinking streams before the answer"
    );
    let finish = &frames[frames.len() - 2];
    assert_eq!(
        finish["choices"][0],
        json!({"index": 0, "delta": {}, "finish_reason": "stop"})
    );
    for frame in &frames[..frames.len() - 2] {
        assert_eq!(frame["choices"][0]["finish_reason"], Value::Null);
    }
    let usage = &frames[frames.len() - 1];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 9);
    assert_eq!(usage["usage"]["completion_tokens"], 4);
    assert_eq!(usage["usage"]["total_tokens"], 13);
}

#[tokio::test]
async fn streaming_without_include_usage_has_no_usage_chunk() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("one two three"));
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let data = sse_data(app.post_json("/v1/chat/completions", &body).await).await;
    let frames = json_frames(&data);
    assert!(
        frames.iter().all(|f| f.get("usage").is_none()),
        "{frames:?}"
    );
    assert_eq!(
        frames.last().expect("finish")["choices"][0]["finish_reason"],
        "stop"
    );
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
}

async fn assert_error(response: reqwest::Response, status: u16, code: &str, param: Option<&str>) {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.expect("error body is JSON");
    let error = &body["error"];
    assert_eq!(error["code"], code, "{body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(error["type"].is_string(), "{body}");
    assert_eq!(error["param"].as_str(), param, "{body}");
}

#[tokio::test]
async fn bad_requests_get_the_spec_error_format() {
    let app = spawn_app().await;
    let url = app.url("/v1/chat/completions");
    let bad_json = app
        .client
        .post(&url)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("sent");
    assert_error(bad_json, 400, "invalid_request", None).await;
    let empty_body = app.client.post(&url).send().await.expect("sent");
    assert_error(empty_body, 400, "invalid_request", None).await;
    let missing_model = app
        .post_json("/v1/chat/completions", &json!({"messages": []}))
        .await;
    assert_error(missing_model, 400, "invalid_request", Some("model")).await;
    let unknown = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "nope", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_error(unknown, 404, "unknown_model", Some("model")).await;
    let empty = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "messages": []}),
        )
        .await;
    assert_error(empty, 400, "invalid_request", Some("messages")).await;
    let wrong_type = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "messages": [{"role": 5}]}),
        )
        .await;
    assert_error(wrong_type, 400, "invalid_request", Some("messages[0].role")).await;
    assert_eq!(
        app.llm.request_count(),
        0,
        "no bad request reaches the upstream"
    );
}

#[tokio::test]
async fn bodies_at_the_limit_pass_and_past_it_get_413() {
    let limit = 2048;
    let app =
        crate::support::spawn_app_with(|c| c["server"] = json!({"requestBodyLimitBytes": limit}))
            .await;
    let at_limit = padded_request(limit);
    assert_eq!(at_limit.len(), limit);
    let ok = app
        .client
        .post(app.url("/v1/chat/completions"))
        .body(at_limit)
        .send()
        .await
        .expect("sent");
    assert_eq!(ok.status(), 200);
    let over = app
        .client
        .post(app.url("/v1/chat/completions"))
        .body(padded_request(limit + 1))
        .send()
        .await
        .expect("sent");
    assert_error(over, 413, "payload_too_large", None).await;
}

/// A valid request of exactly `size` bytes.
fn padded_request(size: usize) -> String {
    let skeleton =
        json!({"model": "chat", "messages": [{"role": "user", "content": ""}]}).to_string();
    let filler = "x".repeat(size - skeleton.len());
    json!({"model": "chat", "messages": [{"role": "user", "content": filler}]}).to_string()
}

#[tokio::test]
async fn upstream_failures_become_502_after_every_attempt() {
    let app = spawn_app().await;
    for _ in 0..3 {
        app.llm.push(Reply::status(
            500,
            json!({"error": {"message": "upstream exploded"}}),
        ));
    }
    let response = app.post_json("/v1/chat/completions", &ask("hi")).await;
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["code"], "upstream_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("upstream exploded")
    );
    assert_eq!(
        app.llm.request_count(),
        3,
        "maxRetries (3) attempts, no more"
    );
}

#[tokio::test]
async fn upstream_auth_failure_is_not_retried() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::status(401, json!({"error": {"message": "bad key"}})));
    let response = app.post_json("/v1/chat/completions", &ask("hi")).await;
    assert_eq!(response.status(), 502);
    assert_eq!(app.llm.request_count(), 1);
}

#[tokio::test]
async fn a_failed_attempt_moves_to_the_next_target() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::status(503, json!({"error": {"message": "busy"}})));
    app.llm.push(Reply::text("from the second target"));
    let body = json!({"model": "fallback", "messages": [{"role": "user", "content": "hi"}]});
    let response: Value = app
        .post_json("/v1/chat/completions", &body)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        response["choices"][0]["message"]["content"],
        "from the second target"
    );
    let models: Vec<Value> = app
        .llm
        .requests()
        .iter()
        .map(|r| r["model"].clone())
        .collect();
    assert_eq!(models, vec![json!("first"), json!("second")]);
}

#[tokio::test]
async fn an_error_after_the_stream_started_is_an_error_frame() {
    let app = spawn_app().await;
    for _ in 0..3 {
        app.llm
            .push(Reply::status(500, json!({"error": {"message": "down"}})));
    }
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let response = app.post_json("/v1/chat/completions", &body).await;
    assert_eq!(
        response.status(),
        200,
        "the stream starts before the upstream answers"
    );
    let data = sse_data(response).await;
    let frames = json_frames(&data);
    assert_eq!(frames[0]["choices"][0]["delta"]["role"], "assistant");
    let error = frames
        .iter()
        .find(|f| f.get("error").is_some())
        .expect("an error frame");
    assert_eq!(error["error"]["code"], "upstream_error");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
}

#[tokio::test]
async fn a_cut_upstream_stream_is_retried() {
    let app = spawn_app().await;
    app.llm.push(Reply::cut_after(2));
    app.llm.push(Reply::text("complete answer"));
    let response: Value = app
        .post_json("/v1/chat/completions", &ask("hi"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        response["choices"][0]["message"]["content"],
        "complete answer"
    );
    assert_eq!(app.llm.request_count(), 2);
}

#[tokio::test]
async fn client_disconnect_cancels_the_run() {
    let app = spawn_app().await;
    app.llm.push(
        Reply::text("a b c d e f g h i j k l m n o p q r s t")
            .with_chunk_gap(Duration::from_millis(100)),
    );
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let (run_id, response) = app.start_run("/v1/chat/completions", &body).await;
    let mut stream = response.bytes_stream();
    let _first = stream.next().await.expect("first chunk");
    drop(stream);
    let mut status = String::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Some(run) = app.runtime.store().get_run(&run_id).await.expect("store") {
            status = run.status.to_string();
            if status != "running" {
                break;
            }
        }
    }
    assert_eq!(status, "cancelled");
}

fn final_report_call(arguments: Value) -> Reply {
    Reply::tool_calls(vec![crate::support::mock_llm::ToolCall::new(
        "final",
        "agent__final_report",
        arguments.to_string(),
    )])
}

#[tokio::test]
async fn response_format_json_schema_selects_json_output_with_that_schema() {
    let app = spawn_app().await;
    app.llm.push(final_report_call(
        json!({"report_format": "json", "content_json": {"city": "Paris"}}),
    ));
    let schema =
        json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    let body = json!({"model": "report", "messages": [{"role": "user", "content": "capital of France?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}});
    let response: Value = app
        .post_json("/v1/chat/completions", &body)
        .await
        .json()
        .await
        .expect("json");
    let content = response["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    assert_eq!(
        serde_json::from_str::<Value>(content).expect("JSON answer"),
        json!({"city": "Paris"})
    );
    let tool = &app.llm.requests()[0]["tools"][0]["function"]["parameters"];
    assert_eq!(tool["properties"]["report_format"]["const"], "json");
    assert_eq!(tool["properties"]["content_json"], schema);
    let bad = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "report", "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "n"}}}),
        )
        .await;
    assert_eq!(bad.status(), 400);
    let bad: Value = bad.json().await.expect("json");
    assert_eq!(bad["error"]["param"], "response_format.json_schema.schema");
}

#[tokio::test]
async fn progress_is_rendered_into_reasoning_content() {
    let app = spawn_app().await;
    app.llm.push(Reply::tool_calls(vec![
        crate::support::mock_llm::ToolCall::new("c1", "lookup__find", "{}"),
    ]));
    app.llm.push(final_report_call(
        json!({"report_format": "markdown", "report_content": "found it"}),
    ));
    let body = json!({"model": "report", "stream": true, "messages": [{"role": "user", "content": "search"}]});
    let frames = json_frames(&sse_data(app.post_json("/v1/chat/completions", &body).await).await);
    let reasoning: String = frames
        .iter()
        .filter_map(|f| f["choices"][0]["delta"]["reasoning_content"].as_str())
        .collect();
    assert!(
        reasoning.contains("- calling `lookup__find`"),
        "{reasoning}"
    );
    assert!(reasoning.contains("`lookup__find` failed"), "{reasoning}");
    assert!(reasoning.contains("### Turn 2"), "{reasoning}");
    let content: String = frames
        .iter()
        .filter_map(|f| f["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "found it");
}

#[tokio::test]
async fn a_client_disconnect_cancels_the_upstream_request_promptly() {
    let app = spawn_app().await;
    let mut delays = Vec::new();
    for _ in 0..3 {
        app.llm
            .push(Reply::text("tok ".repeat(500)).with_chunk_gap(Duration::from_millis(5)));
        let body = json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
        let response = app.post_json("/v1/chat/completions", &body).await;
        let mut stream = response.bytes_stream();
        for _ in 0..3 {
            let _ = stream.next().await;
        }
        let before = app.llm.abandoned().len();
        let dropped = std::time::Instant::now();
        drop(stream);
        let mut waited = None;
        for _ in 0..400 {
            if let Some(at) = app.llm.abandoned().get(before) {
                waited = Some(at.duration_since(dropped));
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        delays.push(waited.expect("the upstream request was abandoned"));
    }
    delays.sort();
    // The median of three: one slow scheduling hiccup on a shared CI box does not decide it.
    eprintln!("upstream cancelled after {delays:?}");
    assert!(
        delays[1] <= Duration::from_millis(100),
        "upstream cancelled after {delays:?}"
    );
}

#[tokio::test]
async fn json_schema_asked_of_a_text_agent_is_answered_through_the_report_tool_and_validated() {
    let extra = tempfile::tempdir().expect("dir");
    let text_agent = extra.path().join("native-chat.ai");
    std::fs::write(
        &text_agent,
        "---\ndescription: Answers in text\nmodels: llm/upstream-model\ntransport: native\nfinalization: text\n---\nYou answer.\n",
    )
    .expect("agent file");
    let app = crate::support::spawn_app_with(|config| {
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(extra.path().display().to_string()));
    })
    .await;
    let schema =
        json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    // The first answer breaks the schema and is refused; the second one fits.
    app.llm.push(final_report_call(
        json!({"report_format": "json", "content_json": {"town": "Paris"}}),
    ));
    app.llm.push(final_report_call(
        json!({"report_format": "json", "content_json": {"city": "Paris"}}),
    ));
    let body = json!({"model": "native-chat", "messages": [{"role": "user", "content": "capital of France?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}});
    let response: Value = app
        .post_json("/v1/chat/completions", &body)
        .await
        .json()
        .await
        .expect("json");
    let content = response["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    assert_eq!(
        serde_json::from_str::<Value>(content)
            .unwrap_or_else(|e| panic!("a JSON answer, not free text: {e}: {response}")),
        json!({"city": "Paris"})
    );
    let offered = &app.llm.requests()[0]["tools"];
    assert!(
        offered.to_string().contains("content_json"),
        "the text agent is given the report tool for this run: {offered}"
    );
    assert_eq!(
        app.llm.requests().len(),
        2,
        "the schema-breaking answer was retried"
    );

    // Without response_format the same agent still answers in free text.
    app.llm.push(Reply::text("Paris."));
    let plain: Value = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "native-chat", "messages": [{"role": "user", "content": "capital?"}]}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(plain["choices"][0]["message"]["content"], "Paris.");
}

#[tokio::test]
async fn a_json_schema_run_answered_in_prose_fails_visibly_and_is_not_stored_as_success() {
    let app = spawn_app().await;
    for _ in 0..12 {
        app.llm.push(Reply::text("The capital of France is Paris."));
    }
    let schema =
        json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    let body = json!({"model": "report", "messages": [{"role": "user", "content": "capital of France?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}});
    let response = app.post_json("/v1/chat/completions", &body).await;
    let status = response.status();
    let run_id = crate::support::run_id(&response);
    let text = response.text().await.expect("body");
    assert_eq!(status, 502, "{text}");
    let error: Value = serde_json::from_str(&text).expect("an error body");
    assert_eq!(error["error"]["code"], "schema_validation_failed", "{text}");
    assert!(
        text.contains("not valid JSON"),
        "the error says what is wrong: {text}"
    );
    let run = app.ended_run(&run_id, Duration::from_secs(10)).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["exit_reason"], "schema_validation_failed", "{run}");

    let calls = app.llm.requests().len();
    assert!(calls < 12, "the run ended within its turns: {calls}");

    // A JSON answer in text (fenced, as models write it) fits the schema and is the answer.
    let app = spawn_app().await;
    for _ in 0..calls {
        app.llm
            .push(Reply::text("```json\n{\"city\": \"Paris\"}\n```"));
    }
    let answer: Value = app
        .post_json("/v1/chat/completions", &body)
        .await
        .json()
        .await
        .expect("json");
    let content = answer["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    assert_eq!(
        serde_json::from_str::<Value>(content).expect("JSON"),
        json!({"city": "Paris"})
    );
}

/// Issue 37 item 3: what older OpenAI clients send.
fn older_client_ask() -> Value {
    json!({
        "model": "chat",
        "messages": [{"role": "user", "content": "hi"}],
        "stop": "Observation:",
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "seed": 42,
        "logit_bias": {"50256": -100},
    })
}

#[tokio::test]
async fn older_clients_parameters_reach_a_model_that_takes_them() {
    let app = spawn_app().await;
    let response = app
        .post_json("/v1/chat/completions", &older_client_ask())
        .await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers().get("x-agentd-warning").is_none(),
        "an OpenAI-compatible model takes every one"
    );
    let sent = &app.llm.requests()[0];
    assert_eq!(sent["stop"], json!(["Observation:"]));
    assert_eq!(sent["presence_penalty"], 0.5);
    assert_eq!(sent["frequency_penalty"], -0.5);
    assert_eq!(sent["seed"], 42);
    assert_eq!(sent["logit_bias"], json!({"50256": -100.0}));
    let mut asked = older_client_ask();
    asked["logprobs"] = json!(true);
    asked["top_logprobs"] = json!(2);
    asked["stop"] = json!(["A", "B", "C", "D"]);
    let response = app.post_json("/v1/chat/completions", &asked).await;
    assert_eq!(response.status(), 200, "four stop sequences are allowed");
    assert_eq!(
        response.headers()["x-agentd-warning"],
        "ignored parameters: logprobs, top_logprobs"
    );
    let body: Value = response.json().await.expect("json");
    assert!(body["choices"][0].get("logprobs").is_none(), "{body}");
    assert_eq!(app.llm.requests()[1]["stop"], json!(["A", "B", "C", "D"]));
}

/// An agent whose model is behind an Anthropic provider (the mock speaks Messages too).
const CLAUDE_AGENT: &str =
    "---\ndescription: On Claude\nmodels: claude/claude-x\nfinalization: text\n---\nYou answer.\n";

#[tokio::test]
async fn parameters_a_model_does_not_take_are_dropped_and_named_in_a_warning() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("claude.ai"), CLAUDE_AGENT).expect("agent");
    let agents = dir.path().display().to_string();
    let app = crate::support::spawn_app_with(|config| {
        let origin = config["providers"]["llm"]["baseUrl"]
            .as_str()
            .expect("base url")
            .trim_end_matches("/v1")
            .to_string();
        config["providers"]["claude"] =
            json!({"type": "anthropic", "baseUrl": origin, "apiKey": "k"});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents));
    })
    .await;
    let mut asked = older_client_ask();
    asked["model"] = json!("claude");
    asked["stream"] = json!(true);
    let response = app.post_json("/v1/chat/completions", &asked).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["x-agentd-warning"],
        "ignored parameters: presence_penalty, frequency_penalty, seed, logit_bias"
    );
    let data = sse_data(response).await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let sent = &app.llm.requests()[0];
    assert_eq!(sent["stop_sequences"], json!(["Observation:"]));
    for dropped in [
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
    ] {
        assert!(
            sent.get(dropped).is_none(),
            "{dropped} reached Anthropic: {sent}"
        );
    }
}

#[tokio::test]
async fn out_of_range_parameters_are_refused_naming_them() {
    let app = spawn_app().await;
    let cases = [
        (json!({"stop": ["A", "B", "C", "D", "E"]}), "stop"),
        (json!({"presence_penalty": 2.5}), "presence_penalty"),
        (json!({"frequency_penalty": -2.1}), "frequency_penalty"),
        (json!({"temperature": 2.5}), "temperature"),
        (json!({"logit_bias": {"50256": 101}}), "logit_bias"),
        (json!({"logit_bias": {"word": 1}}), "logit_bias"),
        (json!({"top_logprobs": 21}), "top_logprobs"),
        (json!({"n": 0}), "n"),
        (json!({"n": 9}), "n"),
        (json!({"n": 2, "stream": true}), "n"),
        (json!({"audio": {"voice": "alloy"}}), "audio"),
    ];
    for (extra, param) in cases {
        let mut asked = ask("hi");
        for (key, value) in extra.as_object().expect("object") {
            asked[key] = value.clone();
        }
        let response = app.post_json("/v1/chat/completions", &asked).await;
        assert_error(response, 400, "invalid_request", Some(param)).await;
    }
    assert_eq!(
        app.llm.request_count(),
        0,
        "no refused request reaches the model"
    );
}

#[tokio::test]
async fn n_choices_are_the_answers_of_as_many_recorded_runs() {
    let app = spawn_app().await;
    for i in 0..8 {
        app.llm
            .push(Reply::text(format!("answer {i}")).with_usage(10, 2, 1, 0));
    }
    let mut asked = ask("hi");
    asked["n"] = json!(8);
    let response = app.post_json("/v1/chat/completions", &asked).await;
    assert_eq!(response.status(), 200);
    let run_ids: Vec<String> = response.headers()["x-agentd-run-id"]
        .to_str()
        .expect("text")
        .split(", ")
        .map(str::to_string)
        .collect();
    let body: Value = response.json().await.expect("json");
    let choices = body["choices"].as_array().expect("choices");
    assert_eq!(choices.len(), 8, "{body}");
    let mut answers: Vec<&str> = choices
        .iter()
        .zip(0..)
        .map(|(choice, index)| {
            assert_eq!(choice["index"], index);
            assert_eq!(choice["finish_reason"], "stop");
            choice["message"]["content"].as_str().expect("content")
        })
        .collect();
    answers.sort_unstable();
    let expected: Vec<String> = (0..8).map(|i| format!("answer {i}")).collect();
    assert_eq!(answers, expected);
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 80, "completion_tokens": 16, "total_tokens": 96, "prompt_tokens_details": {"cached_tokens": 8}})
    );
    assert_eq!(run_ids.len(), 8);
    assert_eq!(body["id"], format!("chatcmpl-{}", run_ids[0]));
    for run_id in &run_ids {
        let run = app.ended_run(run_id, Duration::from_secs(10)).await;
        assert_eq!(run["status"], "completed", "{run}");
    }
}

#[tokio::test]
async fn choices_that_cannot_all_start_start_none() {
    let app = crate::support::spawn_app_with(|config| {
        config["server"] = json!({"maxConcurrentSessions": 2, "maxQueuedSessions": 0});
    })
    .await;
    app.llm.push(Reply::hang());
    app.llm.push(Reply::hang());
    let mut asked = ask("hi");
    asked["n"] = json!(3);
    let response = app.post_json("/v1/chat/completions", &asked).await;
    assert_error(response, 503, "overloaded", None).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let runs: Value = app.get("/v1/runs").await.json().await.expect("json");
        let statuses: Vec<&str> = runs["data"]
            .as_array()
            .expect("runs")
            .iter()
            .filter_map(|run| run["status"].as_str())
            .collect();
        if statuses.len() == 2 && statuses.iter().all(|s| *s == "cancelled") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the runs already started are not cancelled: {runs}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn complete_ask(prompt: &str) -> Value {
    json!({"model": "chat", "prompt": prompt, "max_tokens": 40, "temperature": 0.1, "stop": ["\nuser:"]})
}

#[tokio::test]
async fn text_completions_answer_with_the_legacy_shape_through_a_run() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("Paris.").with_usage(7, 2, 0, 0));
    let response = app
        .post_json("/v1/completions", &complete_ask("The capital of France?"))
        .await;
    assert_eq!(response.status(), 200);
    let run_id = crate::support::run_id(&response);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["id"], format!("cmpl-{run_id}"));
    assert_eq!(body["object"], "text_completion");
    assert_eq!(body["model"], "chat");
    assert!(body["created"].is_i64());
    assert_eq!(
        body["choices"],
        json!([{"text": "Paris.", "index": 0, "logprobs": null, "finish_reason": "stop"}])
    );
    assert_eq!(body["usage"]["total_tokens"], 9);
    let sent = &app.llm.requests()[0];
    assert_eq!(
        sent["messages"][1],
        json!({"role": "user", "content": "The capital of France?"})
    );
    assert_eq!(sent["stop"], json!(["\nuser:"]));
    assert_eq!(sent["max_tokens"], 40);
    assert_eq!(sent["temperature"], 0.1);
    let run = app.ended_run(&run_id, Duration::from_secs(5)).await;
    assert_eq!(run["status"], "completed");
}

#[tokio::test]
async fn streamed_text_completions_are_text_completion_frames_then_done() {
    let app = spawn_app().await;
    app.llm.push(
        Reply::text_in_pieces(&["Hello ", "brave ", "world"])
            .with_reasoning("thinking")
            .with_usage(5, 3, 0, 0),
    );
    let mut asked = complete_ask("hi");
    asked["stream"] = json!(true);
    asked["stream_options"] = json!({"include_usage": true});
    let response = app.post_json("/v1/completions", &asked).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-agentd-run-id"));
    let data = sse_data(response).await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let frames = json_frames(&data[..data.len() - 1]);
    let text: String = frames
        .iter()
        .filter_map(|f| f["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "Hello brave world", "reasoning has no place here");
    for frame in &frames {
        assert_eq!(frame["object"], "text_completion", "{frame}");
    }
    let finish = &frames[frames.len() - 2];
    assert_eq!(
        finish["choices"],
        json!([{"text": "", "index": 0, "logprobs": null, "finish_reason": "stop"}])
    );
    let usage = &frames[frames.len() - 1];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 8);
}

#[tokio::test]
async fn text_completions_refuse_what_an_agent_cannot_do_and_warn_of_what_it_ignores() {
    let app = spawn_app().await;
    let cases = [
        (json!({"echo": true}), "echo"),
        (json!({"suffix": "end"}), "suffix"),
        (json!({"prompt": ["a", "b"]}), "prompt"),
        (json!({"prompt": ""}), "prompt"),
        (json!({"logprobs": 6}), "logprobs"),
        (json!({"n": 2, "stream": true}), "n"),
        (json!({"n": 9}), "n"),
        (json!({"stop": ["1", "2", "3", "4", "5"]}), "stop"),
    ];
    for (extra, param) in cases {
        let mut asked = complete_ask("hi");
        for (key, value) in extra.as_object().expect("object") {
            asked[key] = value.clone();
        }
        let response = app.post_json("/v1/completions", &asked).await;
        assert_error(response, 400, "invalid_request", Some(param)).await;
    }
    assert_eq!(app.llm.request_count(), 0);
    app.llm.push(Reply::text("one"));
    app.llm.push(Reply::text("two"));
    let mut asked = complete_ask("hi");
    asked["n"] = json!(2);
    asked["best_of"] = json!(2);
    asked["logprobs"] = json!(1);
    asked["echo"] = json!(false);
    asked["prompt"] = json!(["hi"]);
    let response = app.post_json("/v1/completions", &asked).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["x-agentd-warning"],
        "ignored parameters: logprobs, best_of"
    );
    let body: Value = response.json().await.expect("json");
    let mut texts: Vec<&str> = body["choices"]
        .as_array()
        .expect("choices")
        .iter()
        .map(|c| c["text"].as_str().expect("text"))
        .collect();
    texts.sort_unstable();
    assert_eq!(texts, ["one", "two"]);
}
