//! The runs API (SPEC §4, §4.2): agents, runs as JSON or SSE (`id: seq`, `event: type`), run
//! status, replay and resume with `Last-Event-ID`, cancellation, `onDisconnect` and `requestId`.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{TestApp, numbered_frames as frames, run_id, spawn_app, spawn_app_with};

async fn read_all(response: reqwest::Response) -> Vec<(i64, String, Value)> {
    frames(&response.text().await.expect("body"))
}

async fn wait_until_finished(app: &TestApp, run_id: &str) -> Value {
    app.ended_run(run_id, Duration::from_secs(5)).await
}

#[tokio::test]
async fn agents_are_listed_and_described() {
    let app = spawn_app().await;
    let list: Value = app.get("/v1/agents").await.json().await.expect("json");
    let names: Vec<&str> = list["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|a| a["name"].as_str().expect("name"))
        .collect();
    assert!(
        names.contains(&"chat") && names.contains(&"report"),
        "{names:?}"
    );
    let chat: Value = app.get("/v1/agents/chat").await.json().await.expect("json");
    assert_eq!(chat["description"], "A helpful chat agent");
    assert_eq!(chat["models"], json!(["llm/upstream-model"]));
    assert_eq!(app.get("/v1/agents/nope").await.status(), 404);
}

#[tokio::test]
async fn a_json_run_returns_the_agent_result_and_is_readable_later() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("the answer"));
    let (run_id, response) = app
        .start_run("/v1/agents/chat/runs", &json!({"prompt": "question"}))
        .await;
    assert_eq!(response.status(), 200);
    let result: Value = response.json().await.expect("json");
    assert_eq!(
        (result["run_id"].as_str(), result["success"].as_bool()),
        (Some(run_id.as_str()), Some(true))
    );
    assert_eq!(result["final_report"]["content"], "the answer");
    assert_eq!(result["exit_reason"], "final_answer");
    let run = wait_until_finished(&app, &run_id).await;
    assert_eq!(run["status"], "completed");
    assert_eq!(run["result"]["final_report"]["content"], "the answer");
    assert_eq!(
        run["result"], result,
        "the stored run gives back the whole AgentResult, accounting included"
    );
    assert_eq!(
        run["result"]["accounting"].as_array().map(Vec::len),
        Some(1)
    );
    let empty = app
        .post_json("/v1/agents/chat/runs", &json!({"prompt": "  "}))
        .await;
    assert_eq!(empty.status(), 400);
    let unknown_field = app
        .post_json(
            "/v1/agents/chat/runs",
            &json!({"prompt": "x", "promt": "y"}),
        )
        .await;
    assert_eq!(unknown_field.status(), 400);
    assert_eq!(app.get("/v1/runs/no-such-run").await.status(), 404);
}

#[tokio::test]
async fn a_streamed_run_numbers_its_events_and_replays_them_identically() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("one two three"));
    let (run_id, response) = app
        .start_run(
            "/v1/agents/chat/runs",
            &json!({"prompt": "q", "stream": true}),
        )
        .await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let live = read_all(response).await;
    let ids: Vec<i64> = live.iter().map(|f| f.0).collect();
    assert_eq!(
        ids,
        (1..=live.len() as i64).collect::<Vec<_>>(),
        "ids are 1, 2, 3…"
    );
    assert_eq!(live.first().map(|f| f.1.as_str()), Some("run.started"));
    assert_eq!(live.last().map(|f| f.1.as_str()), Some("run.finished"));
    let output: String = live
        .iter()
        .filter(|f| f.1 == "output")
        .filter_map(|f| f.2["text"].as_str())
        .collect();
    assert_eq!(output, "one two three");
    wait_until_finished(&app, &run_id).await;
    let replay = read_all(app.get(&format!("/v1/runs/{run_id}/events")).await).await;
    assert_eq!(
        replay, live,
        "the stored events are exactly the streamed ones"
    );
    let resumed = app
        .client
        .get(app.url(&format!("/v1/runs/{run_id}/events")))
        .header("Last-Event-ID", "3")
        .send()
        .await
        .expect("sent");
    assert_eq!(read_all(resumed).await, live[3..].to_vec());
    let bad = app
        .client
        .get(app.url(&format!("/v1/runs/{run_id}/events")))
        .header("Last-Event-ID", "x")
        .send()
        .await
        .expect("sent");
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn a_client_that_reconnects_with_last_event_id_loses_and_repeats_nothing() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::text("tok ".repeat(40)).with_chunk_gap(Duration::from_millis(20)));
    let body = json!({"prompt": "q", "stream": true, "onDisconnect": "continue"});
    let (run_id, response) = app.start_run("/v1/agents/chat/runs", &body).await;
    let mut stream = response.bytes_stream();
    let mut first = String::new();
    while frames(&first).len() < 5 {
        first.push_str(&String::from_utf8_lossy(
            &stream.next().await.expect("chunk").expect("bytes"),
        ));
    }
    drop(stream);
    let seen = frames(&first);
    let last = seen.last().expect("frame").0;
    let rest = app
        .client
        .get(app.url(&format!("/v1/runs/{run_id}/events")))
        .header("Last-Event-ID", last.to_string())
        .send()
        .await
        .expect("sent");
    let rest = read_all(rest).await;
    let ids: Vec<i64> = seen.iter().chain(rest.iter()).map(|f| f.0).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "no event lost or repeated"
    );
    assert_eq!(rest.last().map(|f| f.1.as_str()), Some("run.finished"));
    assert_eq!(
        rest.last().expect("last").2["status"],
        "completed",
        "onDisconnect: continue kept the run going"
    );
}

#[tokio::test]
async fn leaving_a_stream_cancels_the_run_by_default() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::text("tok ".repeat(100)).with_chunk_gap(Duration::from_millis(50)));
    let (run_id, response) = app
        .start_run(
            "/v1/agents/chat/runs",
            &json!({"prompt": "q", "stream": true}),
        )
        .await;
    let mut stream = response.bytes_stream();
    let _ = stream.next().await;
    drop(stream);
    assert_eq!(
        wait_until_finished(&app, &run_id).await["status"],
        "cancelled"
    );
}

#[tokio::test]
async fn a_running_run_can_be_aborted_once() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::text("tok ".repeat(200)).with_chunk_gap(Duration::from_millis(50)));
    let body = json!({"prompt": "q", "stream": true, "onDisconnect": "continue"});
    let (run_id, response) = app.start_run("/v1/agents/chat/runs", &body).await;
    drop(response);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let bad_mode = app
        .post_json(
            &format!("/v1/runs/{run_id}/cancel"),
            &json!({"mode": "explode"}),
        )
        .await;
    assert_eq!(bad_mode.status(), 400);
    let cancel = app
        .post_json(
            &format!("/v1/runs/{run_id}/cancel"),
            &json!({"mode": "abort"}),
        )
        .await;
    assert_eq!(cancel.status(), 202);
    let run = wait_until_finished(&app, &run_id).await;
    assert_eq!(
        (run["status"].as_str(), run["exit_reason"].as_str()),
        (Some("cancelled"), Some("cancelled"))
    );
    let again = app
        .post_json(&format!("/v1/runs/{run_id}/cancel"), &json!({}))
        .await;
    assert_eq!(again.status(), 409);
}

#[tokio::test]
async fn a_stop_says_what_it_does_and_lets_the_answer_finish() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::text("tok ".repeat(20)).with_chunk_gap(Duration::from_millis(50)));
    let body = json!({"prompt": "q", "stream": true, "onDisconnect": "continue"});
    let (run_id, response) = app.start_run("/v1/agents/chat/runs", &body).await;
    drop(response);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stop: Value = app
        .post_json(
            &format!("/v1/runs/{run_id}/cancel"),
            &json!({"mode": "stop"}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(stop["status"], "stopping", "{stop}");
    assert!(
        stop["detail"]
            .as_str()
            .is_some_and(|d| d.contains("last turn")),
        "{stop}"
    );
    let run = wait_until_finished(&app, &run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        run["result"]["final_report"]["content"],
        "tok ".repeat(20),
        "{run}"
    );
}

#[tokio::test]
async fn the_same_request_id_joins_the_first_run() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("only once"));
    let body = json!({"prompt": "q", "requestId": "order-17"});
    let first: Value = app
        .post_json("/v1/agents/chat/runs", &body)
        .await
        .json()
        .await
        .expect("json");
    let second: Value = app
        .post_json("/v1/agents/chat/runs", &body)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(second["run_id"], first["run_id"]);
    assert_eq!(second["result"]["final_report"]["content"], "only once");
    assert_eq!(
        app.llm.request_count(),
        1,
        "the retry did not run the agent again"
    );
    let replayed = read_all(
        app.post_json(
            "/v1/agents/chat/runs",
            &json!({"prompt": "q", "requestId": "order-17", "stream": true}),
        )
        .await,
    )
    .await;
    assert_eq!(replayed.last().map(|f| f.1.as_str()), Some("run.finished"));
}

#[tokio::test]
async fn user_keys_only_see_their_own_runs() {
    let app = spawn_app_with(|config| {
        config["auth"] =
            json!({"keys": [{"key": "alice", "userId": "alice"}, {"key": "bob", "userId": "bob"}]});
    })
    .await;
    let run = app
        .client
        .post(app.url("/v1/agents/chat/runs"))
        .bearer_auth("alice")
        .json(&json!({"prompt": "q"}))
        .send()
        .await
        .expect("sent");
    let run_id = run_id(&run);
    let _: Value = run.json().await.expect("json");
    let url = app.url(&format!("/v1/runs/{run_id}"));
    assert_eq!(
        app.client
            .get(&url)
            .bearer_auth("alice")
            .send()
            .await
            .expect("sent")
            .status(),
        200
    );
    assert_eq!(
        app.client
            .get(&url)
            .bearer_auth("bob")
            .send()
            .await
            .expect("sent")
            .status(),
        403
    );
    let events = app.url(&format!("/v1/runs/{run_id}/events"));
    assert_eq!(
        app.client
            .get(&events)
            .bearer_auth("bob")
            .send()
            .await
            .expect("sent")
            .status(),
        403
    );
    let cancel = app.url(&format!("/v1/runs/{run_id}/cancel"));
    assert_eq!(
        app.client
            .post(&cancel)
            .bearer_auth("bob")
            .send()
            .await
            .expect("sent")
            .status(),
        403
    );
}

#[tokio::test]
async fn an_output_schema_that_does_not_compile_is_refused_before_the_run() {
    let app = spawn_app().await;
    let bad = json!({"type": "object", "properties": {"n": {"type": "no-such-type"}}});
    let response = app
        .post_json(
            "/v1/agents/chat/runs",
            &json!({"prompt": "hi", "format": "json", "schema": bad}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["param"], "schema");
    let completions = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": bad}}}),
        )
        .await;
    assert_eq!(completions.status(), 400);
    let body: Value = completions.json().await.expect("json");
    assert_eq!(body["error"]["param"], "response_format.json_schema.schema");
    let unknown_format = app
        .post_json(
            "/v1/agents/chat/runs",
            &json!({"prompt": "hi", "format": "pdf"}),
        )
        .await;
    assert_eq!(unknown_format.status(), 400);
    assert_eq!(app.llm.request_count(), 0, "no run started");
}
