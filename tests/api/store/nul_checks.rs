//! NUL characters (U+0000) on both backends: from a client they are refused with 400 naming the
//! field; from a model they become U+FFFD before the event is numbered, so the live stream and
//! the stored events, run and result are the same on SQLite and PostgreSQL; and a row the store
//! refuses anyway is isolated, never holding back the other runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::store::{JsonText, RecorderMetrics, RecorderSettings, RunOutcome, RunRecorder, Store};
use prometheus::{IntCounterVec, Opts};
use serde_json::{Value, json};

use super::backends::Backend;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, json_frames, spawn_app_with, sse_data};

async fn app_on(backend: &Backend) -> TestApp {
    let url = backend.url.clone();
    spawn_app_with(|config| config["store"]["url"] = json!(url)).await
}

/// Asserts a 400 `invalid_request` whose `param` names `field`.
async fn refused(response: reqwest::Response, field: &str) {
    assert_eq!(response.status(), 400, "NUL in {field}");
    let body: Value = response.json().await.expect("json error");
    assert_eq!(body["error"]["code"], "invalid_request");
    assert_eq!(body["error"]["param"], field, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("NUL")),
        "{body}"
    );
}

pub async fn nul_from_a_client_is_refused_naming_the_field(backend: &Backend) {
    let app = app_on(backend).await;
    let completion = json!({"model": "chat", "messages": [{"role": "user", "content": "a\u{0}b"}]});
    let posts = [
        ("/v1/chat/completions", completion, "messages[0].content"),
        (
            "/v1/agents/chat/runs",
            json!({"prompt": "a\u{0}b"}),
            "prompt",
        ),
        ("/api/ada/chat", json!({"message": "a\u{0}b"}), "message"),
        (
            "/api/ada/chat",
            json!({"message": "hi", "conversation_id": "c\u{0}"}),
            "conversation_id",
        ),
        ("/api/a%00b/chat", json!({"message": "hi"}), "user_id"),
    ];
    for (path, body, field) in posts {
        refused(app.post_json(path, &body).await, field).await;
    }
    let gets = [
        ("/api/a%00b/conversations", "user_id"),
        ("/api/ada/conversations/c%00", "id"),
        ("/api/ada/conversations?before=x%00", "before"),
        ("/v1/runs/r%00", "run_id"),
    ];
    for (path, field) in gets {
        refused(app.get(path).await, field).await;
    }
    assert_eq!(app.llm.requests().len(), 0, "no run started");

    // Later requests are served and stored as usual.
    app.llm.push(Reply::text("fine"));
    let answer = app
        .post_json("/api/ada/chat", &json!({"message": "hello"}))
        .await;
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.expect("json");
    let conversation = answer["conversation_id"].as_str().expect("conversation");
    let stored = app
        .runtime
        .store()
        .list_messages("ada", conversation, 0, 100)
        .await
        .expect("history");
    assert_eq!(stored.len(), 2, "the message and the answer are stored");
    let listed = app
        .runtime
        .store()
        .list_conversations("ada", None, 10)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1, "only the accepted conversation exists");
}

pub async fn nul_from_a_model_is_streamed_and_stored_as_the_replacement_character(
    backend: &Backend,
) {
    let app = app_on(backend).await;
    // A tool call whose arguments hold the escape \u0000, then an answer holding NUL.
    app.llm.push(Reply::tool_calls(vec![ToolCall {
        id: "call-1".into(),
        name: "nope__tool".into(),
        arguments: r#"{"q":"x\u0000y"}"#.into(),
    }]));
    app.llm
        .push(Reply::text("before\u{0}after").with_reasoning("think\u{0}ing"));
    let (run_id, response) = app
        .start_run(
            "/v1/agents/chat/runs",
            &json!({"prompt": "q", "stream": true}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let live = json_frames(&sse_data(response).await);
    let live_text = serde_json::to_string(&live).expect("json");
    assert!(
        !live_text.contains("\\u0000"),
        "no NUL streamed: {live_text}"
    );
    assert!(live_text.contains("before\u{FFFD}after"), "{live_text}");
    assert!(
        live_text.contains("x\u{FFFD}y"),
        "the tool call's arguments: {live_text}"
    );

    app.runtime.flush_recorder().await;
    let store = app.runtime.store();
    let stored: Vec<Value> = store
        .list_run_events(&run_id, 0, 1000)
        .await
        .expect("events")
        .iter()
        .map(|event| event.data.to_value())
        .collect();
    assert_eq!(stored, live, "a replay is what the live client saw");
    // The stream's last frame is released once the run's end is stored: no wait, no flush.
    let run = store.get_run(&run_id).await.expect("run").expect("stored");
    assert_eq!(run.status.as_str(), "completed");
    assert_eq!(
        run.final_report
            .as_ref()
            .and_then(|r| r["content"].as_str()),
        Some("before\u{FFFD}after")
    );

    // The next run is stored as usual.
    let next_id = answered_run(&app, "plain").await;
    app.runtime.flush_recorder().await;
    let next = store.get_run(&next_id).await.expect("run").expect("stored");
    assert_eq!(next.status.as_str(), "completed");
}

/// Runs the `chat` agent, its answer `text`; returns the run's id once answered with 200.
pub(super) async fn answered_run(app: &TestApp, text: &str) -> String {
    app.llm.push(Reply::text(text));
    let (run_id, response) = app
        .start_run("/v1/agents/chat/runs", &json!({"prompt": "q"}))
        .await;
    assert_eq!(response.status(), 200);
    run_id
}

fn counter(name: &str, label: &str) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, name), &[label]).expect("counter")
}

/// Conformance's finished run, its final report saying `report`.
fn outcome(report: &str) -> RunOutcome {
    RunOutcome {
        final_report: Some(JsonText::of(&json!({"content": report}))),
        ..super::conformance::outcome()
    }
}

/// A NUL that reaches the store anyway (written past the session's replacement): the run is
/// stored as is where the backend can hold it (SQLite), else as a failed stand-in
/// (PostgreSQL), and every other run of its batches is stored; nothing stalls.
pub async fn a_row_the_store_refuses_never_holds_back_other_runs(backend: &Backend) {
    let store: Arc<dyn Store> = backend.open().await;
    let metrics = RecorderMetrics {
        dropped: counter("dropped", "reason"),
        refused: counter("refused", "kind"),
    };
    let recorder = RunRecorder::start(
        store.clone(),
        RecorderSettings::for_store(store.as_ref()),
        metrics.clone(),
    );
    let started = Instant::now();
    let mut answers = Vec::new();
    for n in 0..1000 {
        let run = super::conformance::new_run(&format!("run-{n}"), None);
        let report = if n == 500 { "nul\u{0}here" } else { "fine" };
        recorder.run_started(run.clone()).await;
        answers.push(recorder.run_finished(run, outcome(report)).await);
    }
    for answer in answers {
        tokio::time::timeout(Duration::from_secs(30), answer)
            .await
            .expect("every run's end is answered")
            .expect("answered");
    }
    let elapsed = started.elapsed();
    for n in (0..1000).filter(|n| *n != 500) {
        let run = store
            .get_run(&format!("run-{n}"))
            .await
            .expect("read")
            .unwrap_or_else(|| panic!("run-{n} stored"));
        assert_eq!(run.status.as_str(), "completed", "run-{n}");
    }
    let odd = store
        .get_run("run-500")
        .await
        .expect("read")
        .expect("stored");
    let refused = metrics.refused.with_label_values(&["run"]).get();
    match refused {
        0 => assert_eq!(
            odd.final_report
                .as_ref()
                .and_then(|r| r["content"].as_str()),
            Some("nul\u{0}here"),
            "kept as written where the backend holds NUL"
        ),
        _ => {
            assert_eq!(
                odd.status.as_str(),
                "failed",
                "a stand-in marks the refused run"
            );
            assert!(odd.error.as_deref().is_some_and(|e| e.contains("refused")));
        }
    }
    assert!(recorder.is_storing());
    eprintln!("1000 runs, one with a NUL: all stored in {elapsed:?}, {refused} refused");
    recorder.close().await;
}
