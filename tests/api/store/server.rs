//! What the running server stores: every run with its outcome and accounting, every event in
//! order with seq 1..n, and answers of cached agents served again without the LLM.

use agentd::store::{RunEventRecord, RunRecord};
use serde_json::{Value, json};

use super::cache_conformance::{delete_redis_keys, redis_url};
use crate::support::mock_llm::Reply;
use crate::support::{TestApp, json_frames, spawn_app, spawn_app_with, sse_data};

const CACHED_AGENT: &str = "---\ndescription: Answers from the cache when it can\nmodels: llm/upstream-model\nfinalization: text\ncache: 1h\n---\nYou answer briefly.\n";

async fn complete(app: &TestApp, model: &str, prompt: &str) -> (String, reqwest::Response) {
    app.start_run(
        "/v1/chat/completions",
        &json!({"model": model, "messages": [{"role": "user", "content": prompt}]}),
    )
    .await
}

async fn stored_run(app: &TestApp, run_id: &str) -> RunRecord {
    app.runtime.flush_recorder().await;
    app.runtime
        .store()
        .get_run(run_id)
        .await
        .expect("store")
        .expect("run recorded")
}

async fn stored_events(app: &TestApp, run_id: &str) -> Vec<RunEventRecord> {
    app.runtime.flush_recorder().await;
    app.runtime
        .store()
        .list_run_events(run_id, 0, 1000)
        .await
        .expect("events")
}

/// An app whose agents also include `cached.ai` (`cache: 1h`).
async fn app_with_cached_agent(adjust: impl FnOnce(&mut Value)) -> (TestApp, tempfile::TempDir) {
    let extra = tempfile::tempdir().expect("dir");
    std::fs::write(extra.path().join("cached.ai"), CACHED_AGENT).expect("agent");
    let dir = extra.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["agents"]
            .as_array_mut()
            .expect("agents list")
            .push(json!(dir));
        adjust(config);
    })
    .await;
    (app, extra)
}

#[tokio::test]
async fn every_completion_is_recorded_as_a_run_with_its_accounting() {
    let app = spawn_app().await;
    app.llm
        .push(Reply::text("stored answer").with_usage(7, 2, 0, 0));
    let (run_id, response) = complete(&app, "chat", "hi").await;
    let _: Value = response.json().await.expect("json");
    let run = stored_run(&app, &run_id).await;
    assert_eq!(run.agent, "chat");
    assert_eq!(run.status.as_str(), "completed");
    assert_eq!(run.exit_reason.as_deref(), Some("final_answer"));
    assert_eq!(run.success, Some(true));
    assert_eq!(
        (run.input_tokens, run.output_tokens, run.total_tokens),
        (7, 2, 9)
    );
    assert_eq!(run.turns, 1);
    assert!(run.duration_ms.is_some() && run.finished_at.is_some());
    assert_eq!(
        run.final_report
            .as_ref()
            .and_then(|r| r["content"].as_str()),
        Some("stored answer")
    );
    let result = run.result.expect("the AgentResult is kept");
    assert_eq!(result["run_id"], run_id.as_str());
    assert_eq!(result["exit_reason"], "final_answer");
    let accounting = app
        .runtime
        .store()
        .list_accounting(&run_id)
        .await
        .expect("accounting");
    assert_eq!(accounting.len(), 1);
    assert_eq!(
        (
            accounting[0].entry_type.as_str(),
            accounting[0].provider.as_deref(),
            accounting[0].model.as_deref(),
            accounting[0].status.as_str()
        ),
        ("llm", Some("llm"), Some("upstream-model"), "ok")
    );
    assert_eq!(accounting[0].entry.to_value()["tokens"]["inputTokens"], 7);

    for _ in 0..3 {
        app.llm
            .push(Reply::status(500, json!({"error": {"message": "x"}})));
    }
    let (failed_id, failed) = complete(&app, "chat", "hi").await;
    assert_eq!(failed.status(), 502);
    let run = stored_run(&app, &failed_id).await;
    assert_eq!(
        (run.status.as_str(), run.exit_reason.as_deref(), run.success),
        ("failed", Some("llm_error"), Some(false))
    );
    assert!(run.error.as_deref().is_some_and(|e| e.contains("HTTP 500")));
    let attempts = app
        .runtime
        .store()
        .list_accounting(&failed_id)
        .await
        .expect("accounting");
    assert_eq!(attempts.len(), 3, "one entry per failed attempt");
    assert!(attempts.iter().all(|a| a.status == "failed"));
}

#[tokio::test]
async fn a_runs_events_land_in_the_store_in_order_numbered_from_one() {
    let app = spawn_app().await;
    app.llm.push(
        Reply::text("one two three")
            .with_chunks(3)
            .with_reasoning("hmm"),
    );
    let (run_id, response) = app
        .start_run(
            "/v1/chat/completions",
            &json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "count"}]}),
        )
        .await;
    let streamed = json_frames(&sse_data(response).await);
    let events = stored_events(&app, &run_id).await;
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as i64).collect::<Vec<_>>());
    let kinds: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"run.started"));
    assert_eq!(kinds.last(), Some(&"run.finished"));
    for kind in [
        "turn.started",
        "thinking",
        "output",
        "accounting",
        "final_report",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    assert_eq!(events[0].data.to_value()["run_id"], run_id.as_str());
    let stored_text: String = events
        .iter()
        .filter(|e| e.event_type == "output")
        .filter_map(|e| e.data.to_value()["text"].as_str().map(str::to_owned))
        .collect();
    let streamed_text: String = streamed
        .iter()
        .filter_map(|f| f["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(stored_text, "one two three");
    assert_eq!(
        stored_text, streamed_text,
        "the store saw what the client saw"
    );
    assert_eq!(
        events
            .last()
            .map(|e| e.data.to_value()["exit_reason"].clone()),
        Some(json!("final_answer"))
    );
}

#[tokio::test]
async fn a_cached_agent_answers_an_identical_request_without_the_llm() {
    let (app, _agents) = app_with_cached_agent(|_| {}).await;
    app.llm.push(Reply::text("Paris").with_usage(20, 1, 0, 0));
    let (first_id, first) = complete(&app, "cached", "Capital of France?").await;
    let first: Value = first.json().await.expect("json");
    assert_eq!(app.llm.request_count(), 1);

    let (second_id, second) = complete(&app, "cached", "Capital of France?").await;
    let second: Value = second.json().await.expect("json");
    assert_eq!(app.llm.request_count(), 1, "no upstream request for a hit");
    assert_eq!(
        second["choices"][0]["message"]["content"],
        first["choices"][0]["message"]["content"]
    );
    assert_eq!(second["usage"]["total_tokens"], 0, "a hit uses no tokens");
    assert_ne!(first_id, second_id);
    let run = stored_run(&app, &second_id).await;
    assert_eq!(
        (run.status.as_str(), run.exit_reason.as_deref(), run.success),
        ("completed", Some("cached"), Some(true))
    );
    assert_eq!(
        run.result.as_ref().map(|r| r["exit_reason"].clone()),
        Some(json!("cached"))
    );
    let kinds: Vec<String> = stored_events(&app, &second_id)
        .await
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    assert_eq!(
        kinds,
        ["run.started", "output", "final_report", "run.finished"]
    );
    assert!(
        app.runtime
            .metrics()
            .render()
            .contains(r#"agentd_cache_hits_total{agent="cached"} 1"#)
    );

    // A different prompt, or an agent without `cache`, still goes upstream.
    app.llm.push(Reply::text("Rome"));
    complete(&app, "cached", "Capital of Italy?").await;
    app.llm.push(Reply::text("Paris"));
    complete(&app, "chat", "Capital of France?").await;
    assert_eq!(app.llm.request_count(), 3);
}

#[tokio::test]
async fn a_cached_hit_streams_like_a_run() {
    let (app, _agents) = app_with_cached_agent(|_| {}).await;
    app.llm.push(Reply::text("streamed once"));
    complete(&app, "cached", "stream me").await;
    let response = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "cached", "stream": true, "messages": [{"role": "user", "content": "stream me"}]}),
        )
        .await;
    let data = sse_data(response).await;
    let text: String = json_frames(&data)
        .iter()
        .filter_map(|f| f["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "streamed once");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(app.llm.request_count(), 1);
}

#[tokio::test]
async fn failed_runs_are_not_cached() {
    let (app, _agents) = app_with_cached_agent(|_| {}).await;
    for _ in 0..3 {
        app.llm
            .push(Reply::status(500, json!({"error": {"message": "down"}})));
    }
    let (_, failed) = complete(&app, "cached", "Capital of France?").await;
    assert_eq!(failed.status(), 502);
    app.llm.push(Reply::text("Paris"));
    let (run_id, ok) = complete(&app, "cached", "Capital of France?").await;
    assert_eq!(ok.status(), 200);
    assert_eq!(
        app.llm.request_count(),
        4,
        "the failure was not served from the cache"
    );
    assert_eq!(
        stored_run(&app, &run_id).await.exit_reason.as_deref(),
        Some("final_answer")
    );
}

#[tokio::test]
async fn the_redis_cache_backend_serves_hits_too() {
    let prefix = format!("agentd-test-{}:", uuid::Uuid::new_v4().simple());
    let redis = json!({"backend": "redis", "maxEntries": 10, "redis": {"url": redis_url(), "keyPrefix": prefix}});
    let (app, _agents) = app_with_cached_agent(|config| config["cache"] = redis).await;
    app.llm.push(Reply::text("from redis"));
    complete(&app, "cached", "q").await;
    let (run_id, second) = complete(&app, "cached", "q").await;
    let second: Value = second.json().await.expect("json");
    assert_eq!(second["choices"][0]["message"]["content"], "from redis");
    assert_eq!(app.llm.request_count(), 1);
    assert_eq!(
        stored_run(&app, &run_id).await.exit_reason.as_deref(),
        Some("cached")
    );
    delete_redis_keys(&prefix).await;
}

#[tokio::test]
async fn closing_the_runtime_writes_every_queued_event() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("last words").with_chunks(4));
    let (run_id, response) = complete(&app, "chat", "bye").await;
    let _: Value = response.json().await.expect("json");
    let url = app.runtime.config().store.url.clone();
    app.runtime.close().await;
    let reopened = agentd::store::open(&url).await.expect("reopen");
    let events = reopened
        .list_run_events(&run_id, 0, 1000)
        .await
        .expect("events");
    assert_eq!(
        events.last().map(|e| e.event_type.as_str()),
        Some("run.finished")
    );
    assert_eq!(events.len() as i64, events.last().map_or(0, |e| e.seq));
}
