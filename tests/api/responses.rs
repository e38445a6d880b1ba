//! `/v1/responses` (SPEC §9.1) and client tools on every headend (SPEC §9.2): the response
//! object and every streamed event checked field by field, `mcp_call` items for the agent's
//! tools, `function_call` items for the client's and their continuation (after
//! `previous_response_id` and replayed whole by a stateless client), background responses with
//! cancel and `starting_after` resume, per-user scoping, and every 400 the issue lists.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, json_frames, spawn_app, spawn_app_with, sse_data};

const ECHO_AGENT: &str = "---\ndescription: Echoes with its tool\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\n---\nYou echo.\n";

fn weather_tool() -> Value {
    json!({"type": "function", "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}})
}

async fn post(app: &TestApp, body: &Value) -> (u16, Value) {
    let response = app.post_json("/v1/responses", body).await;
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

/// `(event name, data)` of every frame of a Responses stream.
pub(crate) async fn events(response: reqwest::Response) -> Vec<(String, Value)> {
    let body = response.text().await.expect("body");
    body.split("\n\n")
        .filter_map(|frame| {
            let event = frame.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = frame.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((event.to_string(), serde_json::from_str(data).expect("json")))
        })
        .collect()
}

pub(crate) fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(name, _)| name.as_str()).collect()
}

#[tokio::test]
async fn a_response_has_openais_shape_and_is_stored() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::text("Hello there").with_usage(12, 3, 2, 0));
    let (status, body) = post(
        &app,
        &json!({"model": "chat", "input": "hi", "metadata": {"topic": "greeting"}, "instructions": "Be kind.",
            "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "low"}, "prompt_cache_key": "k"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let id = body["id"].as_str().expect("id");
    assert!(id.starts_with("resp_"));
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["model"], "chat");
    assert_eq!(body["metadata"], json!({"topic": "greeting"}));
    assert_eq!(body["instructions"], "Be kind.");
    assert_eq!(body["error"], Value::Null);
    assert_eq!(body["output"].as_array().expect("output").len(), 1);
    let message = &body["output"][0];
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["status"], "completed");
    assert_eq!(
        message["content"],
        json!([{"type": "output_text", "text": "Hello there", "annotations": [], "logprobs": []}])
    );
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 12, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 3,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15})
    );
    let sent = &app.llm.requests()[0];
    assert_eq!(
        sent["messages"][1],
        json!({"role": "system", "content": "Be kind."})
    );
    let stored: Value = app
        .get(&format!("/v1/responses/{id}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(stored, body, "GET answers the same object");
    let items: Value = app
        .get(&format!("/v1/responses/{id}/input_items"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(items["object"], "list");
    assert_eq!(items["data"][0]["type"], "message");
    assert_eq!(items["data"][0]["content"], "hi");
    assert_eq!(items["first_id"], items["data"][0]["id"]);
    let run_id = id.trim_start_matches("resp_");
    let run: Value = app
        .get(&format!("/v1/runs/{run_id}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(run["status"], "completed", "a response is a run");
}

#[tokio::test]
async fn every_streamed_event_matches_the_spec_field_by_field() {
    let app = spawn_app().await;
    app.llm.push(
        Reply::text_in_pieces(&["Hel", "lo"])
            .with_reasoning("thinking")
            .with_usage(5, 2, 0, 0),
    );
    let response = app
        .post_json(
            "/v1/responses",
            &json!({"model": "chat", "input": "hi", "stream": true}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let events = events(response).await;
    for (index, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], name.as_str(), "the event name is its type");
        assert_eq!(data["sequence_number"], index, "numbered from 0: {data}");
    }
    let names = names(&events);
    assert_eq!(names[..2], ["response.created", "response.in_progress"]);
    assert_eq!(events[0].1["response"]["status"], "in_progress");
    assert_eq!(
        events[0].1["response"]["text"],
        json!({"format": {"type": "text"}})
    );
    assert_eq!(events[1].1["response"]["status"], "in_progress");
    let reasoning_at = names
        .iter()
        .position(|n| *n == "response.reasoning_summary_text.delta")
        .expect("reasoning");
    let (_, added) = &events[reasoning_at - 2];
    assert_eq!(added["type"], "response.output_item.added");
    assert_eq!(added["output_index"], 0);
    assert_eq!(added["item"]["type"], "reasoning");
    let item_id = added["item"]["id"].clone();
    assert_eq!(
        events[reasoning_at - 1].1["type"],
        "response.reasoning_summary_part.added"
    );
    let delta = &events[reasoning_at].1;
    assert_eq!(delta["item_id"], item_id);
    assert_eq!(delta["summary_index"], 0);
    let text: String = events
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .map(|(_, d)| {
            assert_eq!(d["output_index"], 1);
            assert_eq!(d["content_index"], 0);
            d["delta"].as_str().expect("delta").to_string()
        })
        .collect();
    assert_eq!(text, "Hello");
    let done = events
        .iter()
        .find(|(n, _)| n == "response.output_text.done")
        .expect("text done");
    assert_eq!(done.1["text"], "Hello");
    let item_done: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "response.output_item.done")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(item_done.len(), 2);
    assert_eq!(item_done[0]["item"]["summary"][0]["text"], "thinking");
    assert_eq!(item_done[1]["item"]["content"][0]["text"], "Hello");
    let terminal: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| {
            matches!(
                *n,
                "response.completed" | "response.incomplete" | "response.failed"
            )
        })
        .collect();
    assert_eq!(
        terminal,
        ["response.completed"],
        "exactly one terminal event"
    );
    let (last, completed) = events.last().expect("events");
    assert_eq!(last, "response.completed");
    assert_eq!(completed["response"]["status"], "completed");
    assert_eq!(completed["response"]["usage"]["total_tokens"], 7);
    assert_eq!(
        completed["response"]["output"].as_array().map(Vec::len),
        Some(2)
    );
}

#[tokio::test]
async fn the_agents_own_tools_become_mcp_call_items_with_their_output() {
    let extra = tempfile::tempdir().expect("dir");
    std::fs::write(extra.path().join("echo.ai"), ECHO_AGENT).expect("agent");
    let extra_path = extra.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(extra_path));
    })
    .await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c1",
        "test__echo",
        r#"{"text": "ping"}"#,
    )]));
    app.llm.push(Reply::text("It said ping"));
    let response = app
        .post_json(
            "/v1/responses",
            &json!({"model": "echo", "input": "echo ping", "stream": true}),
        )
        .await;
    let events = events(response).await;
    let names = names(&events);
    let at = names
        .iter()
        .position(|n| *n == "response.mcp_call.in_progress")
        .expect("in progress");
    assert_eq!(events[at - 1].1["item"]["type"], "mcp_call");
    assert_eq!(events[at - 1].1["item"]["status"], "in_progress");
    assert_eq!(names[at + 1], "response.mcp_call.completed");
    let (_, done) = &events[at + 2];
    assert_eq!(done["type"], "response.output_item.done");
    let item = &done["item"];
    assert_eq!(item["name"], "test__echo");
    assert_eq!(item["server_label"], "test");
    assert_eq!(item["status"], "completed");
    assert!(
        item["output"].as_str().expect("output").contains("ping"),
        "{item}"
    );
    assert_eq!(item["error"], Value::Null);
    let (_, completed) = events.last().expect("events");
    let output = completed["response"]["output"].as_array().expect("output");
    assert_eq!(output[0]["type"], "mcp_call");
    assert_eq!(output[1]["content"][0]["text"], "It said ping");
}

#[tokio::test]
async fn a_client_tool_call_ends_the_response_and_previous_response_id_continues_it() {
    let app = spawn_app().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call_1",
        "get_weather",
        r#"{"city": "Paris"}"#,
    )]));
    let (status, first) = post(
        &app,
        &json!({"model": "chat", "input": "Weather in Paris?", "tools": [weather_tool(),
            {"type": "web_search"}, {"type": "namespace", "name": "ns"}]}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["status"], "completed");
    assert_eq!(
        first["output"],
        json!([{"type": "function_call", "id": first["output"][0]["id"], "status": "completed",
            "call_id": "call_1", "name": "get_weather", "arguments": r#"{"city": "Paris"}"#}])
    );
    let offered = &app.llm.requests()[0]["tools"];
    let offered: Vec<&str> = offered
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(
        offered,
        ["get_weather"],
        "hosted tool types are not offered"
    );
    app.llm.push(Reply::text("Sunny in Paris"));
    let (status, second) = post(
        &app,
        &json!({"model": "chat", "previous_response_id": first["id"], "tools": [weather_tool()],
            "input": [{"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["output"][0]["content"][0]["text"], "Sunny in Paris");
    assert_eq!(second["previous_response_id"], first["id"]);
    let sent = &app.llm.requests()[1]["messages"];
    let sent = sent.as_array().expect("messages");
    assert_eq!(
        sent[1],
        json!({"role": "user", "content": "Weather in Paris?"})
    );
    assert_eq!(sent[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        sent[3],
        json!({"role": "tool", "content": "sunny", "tool_call_id": "call_1"})
    );
    assert_eq!(sent.len(), 4, "the continuation adds no user message");
    // A third request continues the second.
    app.llm.push(Reply::text("You asked about Paris"));
    let (status, third) = post(
        &app,
        &json!({"model": "chat", "previous_response_id": second["id"], "input": "What did I ask?"}),
    )
    .await;
    assert_eq!(status, 200, "{third}");
    let sent = app.llm.requests()[2]["messages"].clone();
    assert_eq!(sent.as_array().map(Vec::len), Some(6), "{sent}");
}

#[tokio::test]
async fn a_stateless_client_replays_the_whole_conversation() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("It is sunny"));
    let (status, body) = post(
        &app,
        &json!({"model": "chat", "store": false, "tools": [weather_tool()], "client_metadata": {"x": "y"},
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
                {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c9", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
                {"type": "function_call_output", "call_id": "c9", "output": "sunny"},
            ]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["store"], false);
    assert_eq!(body["output"][0]["content"][0]["text"], "It is sunny");
    let id = body["id"].as_str().expect("id");
    assert_eq!(
        app.get(&format!("/v1/responses/{id}")).await.status(),
        404,
        "store: false keeps nothing"
    );
}

#[tokio::test]
async fn the_turn_budget_spans_the_requests_of_a_tool_loop() {
    let app = spawn_app_with(|_| {}).await;
    // `chat` has the default maxTurns; a replayed loop that used them all gets one final turn
    // without tools.
    let mut input = vec![json!({"role": "user", "content": "loop"})];
    for turn in 0..12 {
        let call_id = format!("c{turn}");
        input.push(json!({"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": "{}"}));
        input.push(json!({"type": "function_call_output", "call_id": call_id, "output": "again"}));
    }
    app.llm.push(Reply::text("giving up"));
    let (status, body) = post(
        &app,
        &json!({"model": "chat", "store": false, "tools": [weather_tool()], "input": input}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let sent = &app.llm.requests()[0];
    assert!(
        sent.get("tools").is_none(),
        "the final turn offers no tools: {}",
        sent["tools"]
    );
}

#[tokio::test]
async fn bad_client_tools_and_outputs_are_400s_naming_the_field() {
    let app = spawn_app().await;
    let cases = [
        (
            json!({"model": "chat", "input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]}),
            "input[0].call_id",
        ),
        (
            json!({"model": "chat", "input": "x", "tools": [{"type": "function", "parameters": {}}]}),
            "tools[0].name",
        ),
        (
            json!({"model": "chat", "input": "x", "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": 7}}}}]}),
            "tools[0].parameters",
        ),
        (
            json!({"model": "report", "input": "x", "tools": [{"type": "function", "name": "agent__final_report"}]}),
            "tools[0].name",
        ),
        (
            json!({"model": "chat", "input": "x", "tools": [weather_tool()], "tool_choice": {"type": "function", "name": "other"}}),
            "tool_choice",
        ),
        (json!({"model": "chat"}), "input"),
        (
            json!({"model": "chat", "input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}}),
            "text.format.schema",
        ),
        (
            json!({"model": "chat", "input": "x", "background": true, "store": false}),
            "background",
        ),
        (
            json!({"model": "chat", "input": "x", "previous_response_id": "resp_missing"}),
            "previous_response_id",
        ),
    ];
    for (body, param) in cases {
        let (status, error) = post(&app, &body).await;
        assert!(
            status == 400 || (status == 404 && param == "previous_response_id"),
            "{status} for {body}: {error}"
        );
        assert_eq!(error["error"]["param"], param, "{body}: {error}");
    }
    assert!(
        app.llm.requests().is_empty(),
        "no bad request reached the model"
    );
}

#[tokio::test]
async fn tool_choice_reaches_the_provider() {
    let app = spawn_app().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c1",
        "get_weather",
        "{}",
    )]));
    let (status, _) = post(
        &app,
        &json!({"model": "chat", "input": "x", "tools": [weather_tool()],
            "tool_choice": {"type": "function", "name": "get_weather"}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        app.llm.requests()[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
}

#[tokio::test]
async fn json_schema_output_is_the_message() {
    let app = spawn_app().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "final",
        "agent__final_report",
        json!({"report_format": "json", "content_json": {"city": "Paris"}}).to_string(),
    )]));
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false});
    let (status, body) = post(
        &app,
        &json!({"model": "report", "input": "city?",
            "text": {"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": true}}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let text = body["output"][0]["content"][0]["text"]
        .as_str()
        .expect("text");
    assert_eq!(
        serde_json::from_str::<Value>(text).expect("json"),
        json!({"city": "Paris"})
    );
}

#[tokio::test]
async fn a_background_response_is_cancelled_and_resumed_after_a_sequence_number() {
    let app = spawn_app().await;
    app.llm.push(Reply::text_in_pieces(&["a", "b", "c"]));
    let (status, body) = post(
        &app,
        &json!({"model": "chat", "input": "go", "background": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(matches!(
        body["status"].as_str(),
        Some("queued" | "in_progress")
    ));
    let id = body["id"].as_str().expect("id").to_string();
    let all = events(app.get(&format!("/v1/responses/{id}?stream=true")).await).await;
    assert_eq!(
        all.last().map(|(n, _)| n.as_str()),
        Some("response.completed")
    );
    let resumed = events(
        app.get(&format!("/v1/responses/{id}?stream=true&starting_after=3"))
            .await,
    )
    .await;
    assert_eq!(resumed[0].1["sequence_number"], 4);
    assert_eq!(resumed.len(), all.len() - 4);
    for ((_, a), (_, b)) in all[4..].iter().zip(&resumed) {
        assert_eq!(a, b, "a resumed stream repeats the same frames");
    }
    // A hanging run is cancelled.
    app.llm.push(Reply::hang());
    let (_, body) = post(
        &app,
        &json!({"model": "chat", "input": "wait", "background": true}),
    )
    .await;
    let id = body["id"].as_str().expect("id").to_string();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancelled: Value = app
        .client
        .post(app.url(&format!("/v1/responses/{id}/cancel")))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
}

#[tokio::test]
async fn responses_belong_to_their_user_and_delete_removes_them() {
    let app = spawn_app_with(|config| {
        config["auth"] = json!({"keys": [
            {"key": "alice-secret", "userId": "alice"},
            {"key": "bob-secret", "userId": "bob"}
        ]});
    })
    .await;
    app.llm.push(Reply::text("for alice"));
    let body: Value = app
        .client
        .post(app.url("/v1/responses"))
        .bearer_auth("alice-secret")
        .json(&json!({"model": "chat", "input": "hi"}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let id = body["id"].as_str().expect("id");
    let as_user =
        |key: &'static str, path: String| app.client.get(app.url(&path)).bearer_auth(key).send();
    assert_eq!(
        as_user("bob-secret", format!("/v1/responses/{id}"))
            .await
            .expect("sent")
            .status(),
        404
    );
    let continued = app
        .client
        .post(app.url("/v1/responses"))
        .bearer_auth("bob-secret")
        .json(&json!({"model": "chat", "input": "hi", "previous_response_id": id}))
        .send()
        .await
        .expect("sent");
    assert_eq!(continued.status(), 404, "another user's response is a 404");
    let deleted: Value = app
        .client
        .delete(app.url(&format!("/v1/responses/{id}")))
        .bearer_auth("alice-secret")
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(
        deleted,
        json!({"id": id, "object": "response", "deleted": true})
    );
    assert_eq!(
        as_user("alice-secret", format!("/v1/responses/{id}"))
            .await
            .expect("sent")
            .status(),
        404
    );
}

#[tokio::test]
async fn chat_completions_end_with_client_tool_calls_and_continue_from_tool_messages() {
    let app = spawn_app().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call_7",
        "get_weather",
        r#"{"city":"Rome"}"#,
    )]));
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
    let first: Value = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "messages": [{"role": "user", "content": "Rome?"}], "tools": tools}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        first["choices"][0]["finish_reason"], "tool_calls",
        "{first}"
    );
    assert_eq!(
        first["choices"][0]["message"]["tool_calls"],
        json!([{"id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}])
    );
    app.llm.push(Reply::text("Warm in Rome"));
    let frames = json_frames(
        &sse_data(
            app.post_json(
                "/v1/chat/completions",
                &json!({"model": "chat", "stream": true, "tools": tools, "messages": [
                    {"role": "user", "content": "Rome?"},
                    {"role": "assistant", "content": null, "tool_calls": first["choices"][0]["message"]["tool_calls"]},
                    {"role": "tool", "tool_call_id": "call_7", "content": "warm"},
                ]}),
            )
            .await,
        )
        .await,
    );
    let text: String = frames
        .iter()
        .filter_map(|f| f["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Warm in Rome");
    let bad = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "tools": tools, "messages": [
                {"role": "user", "content": "Rome?"},
                {"role": "tool", "tool_call_id": "ghost", "content": "warm"},
            ]}),
        )
        .await;
    assert_eq!(bad.status(), 400);
    let bad: Value = bad.json().await.expect("json");
    assert_eq!(bad["error"]["param"], "messages[1].tool_call_id");
}

#[tokio::test]
async fn streamed_chat_completions_send_client_tool_calls_as_deltas() {
    let app = spawn_app().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call_8",
        "get_weather",
        "{}",
    )]));
    let tools = json!([{"type": "function", "function": {"name": "get_weather"}}]);
    let frames = json_frames(
        &sse_data(
            app.post_json(
                "/v1/chat/completions",
                &json!({"model": "chat", "stream": true, "tools": tools, "messages": [{"role": "user", "content": "?"}]}),
            )
            .await,
        )
        .await,
    );
    let calls = frames
        .iter()
        .find_map(|f| f["choices"][0]["delta"].get("tool_calls"))
        .expect("a tool call delta");
    assert_eq!(calls[0]["index"], 0);
    assert_eq!(calls[0]["id"], "call_8");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let last = frames
        .iter()
        .rev()
        .find_map(|f| f["choices"][0]["finish_reason"].as_str())
        .expect("finish");
    assert_eq!(last, "tool_calls");
}

#[tokio::test]
async fn anthropic_messages_end_with_tool_use_and_continue_from_tool_result() {
    let app = spawn_app().await;
    let tools = json!([{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"type": "web_search_20250305", "name": "web_search"}]);
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "toolu_1",
        "get_weather",
        r#"{"city":"Oslo"}"#,
    )]));
    let first: Value = app
        .post_json(
            "/v1/messages",
            &json!({"model": "chat", "max_tokens": 100, "tools": tools, "tool_choice": {"type": "any"},
                "messages": [{"role": "user", "content": "Oslo?"}]}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(first["stop_reason"], "tool_use", "{first}");
    assert_eq!(
        first["content"],
        json!([{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}])
    );
    assert_eq!(app.llm.requests()[0]["tool_choice"], "required");
    app.llm.push(Reply::text("Cold in Oslo"));
    let response = app
        .post_json(
            "/v1/messages",
            &json!({"model": "chat", "max_tokens": 100, "stream": true, "tools": tools, "messages": [
                {"role": "user", "content": "Oslo?"},
                {"role": "assistant", "content": first["content"]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "cold"}]},
            ]}),
        )
        .await;
    let frames = json_frames(&sse_data(response).await);
    let text: String = frames
        .iter()
        .filter_map(|f| f["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "Cold in Oslo");
    let sent = &app.llm.requests()[1]["messages"];
    assert_eq!(sent[2]["tool_calls"][0]["id"], "toolu_1");
    assert_eq!(
        sent[3],
        json!({"role": "tool", "content": "cold", "tool_call_id": "toolu_1"})
    );
    // Streamed, a tool call is a tool_use block with its arguments as input_json_delta.
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "toolu_2",
        "get_weather",
        "{}",
    )]));
    let response = app
        .post_json(
            "/v1/messages",
            &json!({"model": "chat", "max_tokens": 100, "stream": true, "tools": tools,
                "messages": [{"role": "user", "content": "again"}]}),
        )
        .await;
    let frames = json_frames(&sse_data(response).await);
    let start = frames
        .iter()
        .find(|f| f["type"] == "content_block_start" && f["content_block"]["type"] == "tool_use")
        .expect("tool_use block");
    assert_eq!(start["content_block"]["id"], "toolu_2");
    assert!(
        frames
            .iter()
            .any(|f| f["delta"]["type"] == "input_json_delta")
    );
    let delta = frames
        .iter()
        .find(|f| f["type"] == "message_delta")
        .expect("delta");
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn a_failed_run_is_an_openai_error_or_an_error_event_and_response_failed() {
    let app = spawn_app().await;
    for _ in 0..3 {
        app.llm
            .push(Reply::status(500, json!({"error": {"message": "down"}})));
    }
    let (status, body) = post(&app, &json!({"model": "chat", "input": "x"})).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_error");
    for _ in 0..3 {
        app.llm
            .push(Reply::status(500, json!({"error": {"message": "down"}})));
    }
    let response = app
        .post_json(
            "/v1/responses",
            &json!({"model": "chat", "input": "x", "stream": true}),
        )
        .await;
    let events = events(response).await;
    let names = names(&events);
    assert_eq!(
        names[names.len() - 2..],
        ["error", "response.failed"],
        "{names:?}"
    );
    assert_eq!(events[names.len() - 2].1["code"], "upstream_error");
    let failed = &events.last().expect("events").1["response"];
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], "llm_error");
}

#[tokio::test]
async fn metadata_pairs_and_tool_names_are_limited_at_their_bounds() {
    let app = spawn_app().await;
    let pairs = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("k{i}"), json!("v")))
            .collect::<serde_json::Map<String, Value>>()
            .into()
    };
    app.llm.push(Reply::text("ok"));
    let (status, body) = post(
        &app,
        &json!({"model": "chat", "input": "x", "metadata": pairs(16)}),
    )
    .await;
    assert_eq!(status, 200, "16 pairs are allowed: {body}");
    let (status, body) = post(
        &app,
        &json!({"model": "chat", "input": "x", "metadata": pairs(17)}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("metadata"))
    );
    let (status, body) = post(
        &app,
        &json!({"model": "chat", "input": "x", "metadata": {"n": 1}}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("metadata.n"))
    );
    let named = |name: String| json!({"model": "chat", "input": "x", "tools": [{"type": "function", "name": name}]});
    app.llm.push(Reply::text("ok"));
    let (status, body) = post(&app, &named("t".repeat(64))).await;
    assert_eq!(status, 200, "a 64-character tool name is allowed: {body}");
    let (status, body) = post(&app, &named("t".repeat(65))).await;
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("tools[0].name"))
    );
}

#[tokio::test]
async fn the_document_lists_every_responses_route() {
    let app = spawn_app().await;
    let document: Value = app.get("/openapi.json").await.json().await.expect("json");
    let paths = &document["paths"];
    assert!(paths["/v1/responses"]["post"].is_object());
    assert!(paths["/v1/responses/{response_id}"]["get"].is_object());
    assert!(paths["/v1/responses/{response_id}"]["delete"].is_object());
    assert!(paths["/v1/responses/{response_id}/cancel"]["post"].is_object());
    assert!(paths["/v1/responses/{response_id}/input_items"]["get"].is_object());
    assert!(document["components"]["schemas"]["ResponseStreamFrame"].is_object());
}
