//! The fault suite (issue 19): every upstream fault the mock can script, an MCP server that dies
//! mid-call, and SIGTERM under 50 live streams. Each asserts what agentd guarantees whatever
//! fails: every run ends with a stored result, its live stream ends with `run.finished`, the
//! stored events replay exactly what was streamed, and the process exits.
//!
//! The other faults of the suite live beside the code they exercise: a PostgreSQL restart and a
//! long outage (`store::outage`), SIGKILL and restart mid-run (`replicas`), slow, never-reading
//! and slowloris clients (`connections`), a cut retried stream (`retried_streams`).

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::binary::{Served, command, project, serve};
use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{MockLlm, Reply, ToolCall};
use crate::support::{TestApp, numbered_frames, run_id, spawn_app_with};

/// Two attempts per turn (`maxRetries` counts attempts), a short LLM timeout: every fault is seen within a few seconds.
const BRITTLE_AGENT: &str = "---\ndescription: Tries twice\nmodels: llm/upstream-model\nmaxRetries: 2\nllmTimeout: 2s\nfinalization: text\ntools: [test]\n---\nYou answer.\n";

type Frames = Vec<(i64, String, Value)>;

async fn brittle_app() -> TestApp {
    spawn_app_with(|config| {
        let agents = config["agents"][0]
            .as_str()
            .expect("agents dir")
            .to_string();
        std::fs::write(format!("{agents}/brittle.ai"), BRITTLE_AGENT).expect("agent file");
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
    })
    .await
}

/// Streams one run of `brittle` and returns its id and every frame the client saw.
async fn streamed_run(app: &TestApp) -> (String, Frames) {
    let (run_id, response) = app
        .start_run(
            "/v1/agents/brittle/runs",
            &json!({"prompt": "go", "stream": true}),
        )
        .await;
    let body = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the stream ends")
        .expect("body");
    (run_id, numbered_frames(&body))
}

/// The run is stored as ended, and its stored events are exactly the streamed ones.
async fn assert_ended_and_replayed(app: &TestApp, run_id: &str, live: &Frames) -> Value {
    assert_eq!(
        live.last().map(|f| f.1.as_str()),
        Some("run.finished"),
        "{live:?}"
    );
    let run = app.ended_run(run_id, Duration::from_secs(10)).await;
    let replay = app.get(&format!("/v1/runs/{run_id}/events")).await;
    let replay = numbered_frames(&replay.text().await.expect("replay"));
    assert_eq!(&replay, live, "stored events equal the streamed ones");
    run
}

fn answer(frames: &Frames) -> String {
    frames
        .iter()
        .filter(|f| f.1 == "output")
        .filter_map(|f| f.2["text"].as_str())
        .collect()
}

/// Every fault the mock scripts, named, with whether a retry can get past it.
fn upstream_faults() -> Vec<(&'static str, Reply, bool)> {
    let error = json!({"error": {"message": "upstream says no", "type": "server_error"}});
    vec![
        ("500", Reply::status(500, error.clone()), true),
        ("503", Reply::status(503, error.clone()), true),
        (
            "429",
            Reply::status(429, error.clone()).with_header("retry-after", "0"),
            true,
        ),
        ("401", Reply::status(401, error.clone()), false),
        ("cut mid-stream", Reply::cut_after(2), true),
        ("malformed frame", Reply::malformed(), true),
        ("never answers", Reply::hang(), true),
        ("handler panics", Reply::panic(), true),
        ("empty answer", Reply::empty(), true),
        (
            "error event in the stream",
            Reply::text("half").with_stream_error("server_error", "overloaded"),
            true,
        ),
        (
            "stalls mid-stream",
            Reply::text("a b c d").stall_before(2, Duration::from_secs(5)),
            true,
        ),
    ]
}

#[tokio::test]
async fn every_upstream_fault_ends_its_run_stored_exactly_as_streamed() {
    for (name, fault, retryable) in upstream_faults() {
        // Once: the retry answers (when a retry may).
        let app = brittle_app().await;
        app.llm.push(fault.clone());
        let (run_id, live) = streamed_run(&app).await;
        let run = assert_ended_and_replayed(&app, &run_id, &live).await;
        if retryable {
            assert_eq!(run["status"], "completed", "{name}: {run}");
            assert!(answer(&live).ends_with("mock answer"), "{name}: {live:?}");
        } else {
            assert_eq!(run["status"], "failed", "{name}: {run}");
        }

        // On every attempt: the run fails, and says so in its last events.
        let app = brittle_app().await;
        for _ in 0..4 {
            app.llm.push(fault.clone());
        }
        let (run_id, live) = streamed_run(&app).await;
        let run = assert_ended_and_replayed(&app, &run_id, &live).await;
        assert_eq!(run["status"], "failed", "{name} every time: {run}");
        assert!(run["exit_reason"].is_string(), "{name}: {run}");
    }
}

#[tokio::test]
async fn an_mcp_server_that_dies_mid_call_fails_that_call_and_the_run_answers() {
    let app = brittle_app().await;
    // One call is in flight when the other makes the server process exit.
    app.llm.push(Reply::tool_calls(vec![
        ToolCall::new("slow", "test__sleep", r#"{"ms": 10000}"#),
        ToolCall::new("die", "test__crash", "{}"),
    ]));
    app.llm.push(Reply::text("the tool server went away"));
    let (run_id, live) = streamed_run(&app).await;
    let run = assert_ended_and_replayed(&app, &run_id, &live).await;
    assert_eq!(run["status"], "completed", "{run}");
    let finished: Vec<&Value> = live
        .iter()
        .filter(|f| f.1 == "tool.finished")
        .map(|f| &f.2)
        .collect();
    assert_eq!(finished.len(), 2, "{live:?}");
    assert!(
        finished.iter().all(|t| t["status"] == "failed"),
        "{finished:?}"
    );
    assert_eq!(answer(&live), "the tool server went away");
    let told = app.llm.body(1).to_string();
    assert!(
        told.matches("\"role\":\"tool\"").count() == 2,
        "the model hears of both failed calls: {told}"
    );

    // The server is restarted for the next call.
    let echo = ToolCall::new("again", "test__echo", r#"{"text": "back"}"#);
    app.llm.push(Reply::tool_calls(vec![echo]));
    app.llm.push(Reply::text("done"));
    let (run_id, live) = streamed_run(&app).await;
    assert_ended_and_replayed(&app, &run_id, &live).await;
    let finished = live
        .iter()
        .find(|f| f.1 == "tool.finished")
        .expect("a call");
    assert_eq!(finished.2["status"], "ok", "{finished:?}");
    let output = finished.2["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("back"),
        "tool.finished carries the result: {finished:?}"
    );
}

/// `agentd serve` on a SQLite file in its project directory, draining for one second.
async fn serve_project(dir: &tempfile::TempDir) -> Served {
    let mut command = command(dir.path());
    command.args(["serve", "--config", "agentd.json"]);
    serve(command, |_| {}).await
}

/// Reads one live stream to its end; `started` is told once its first frame arrived.
async fn read_stream(
    response: reqwest::Response,
    started: tokio::sync::mpsc::Sender<()>,
) -> String {
    let mut body = String::new();
    let mut chunks = response.bytes_stream();
    let mut told = false;
    while let Some(Ok(chunk)) = chunks.next().await {
        body.push_str(&String::from_utf8_lossy(&chunk));
        if !told && body.contains("event: output") {
            told = true;
            let _ = started.send(()).await;
        }
    }
    body
}

#[tokio::test]
async fn sigterm_under_50_live_streams_ends_and_stores_every_run_and_exits() {
    const STREAMS: usize = 50;
    let slow = "word ".repeat(200);
    let llm = MockLlm::start_with(
        "127.0.0.1:0",
        Reply::text(slow.trim()).with_chunk_gap(Duration::from_millis(50)),
        false,
    )
    .await;
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0", "drainSeconds": 1, "maxConcurrentSessions": 64},
        "store": {"url": "sqlite://agentd.db"},
    }));
    let mut server = serve_project(&dir).await;
    let client = reqwest::Client::new();
    let (started, mut streaming) = tokio::sync::mpsc::channel(STREAMS);
    let mut readers = Vec::new();
    for _ in 0..STREAMS {
        let response = client
            .post(format!("http://{}/v1/agents/chat/runs", server.address))
            .json(&json!({"prompt": "talk", "stream": true}))
            .send()
            .await
            .expect("run started");
        assert_eq!(response.status(), 200);
        let id = run_id(&response);
        readers.push((id, tokio::spawn(read_stream(response, started.clone()))));
    }
    for _ in 0..STREAMS {
        tokio::time::timeout(Duration::from_secs(30), streaming.recv())
            .await
            .expect("every stream is live");
    }

    let pid = server.child.id().expect("pid").to_string();
    let signalled = std::process::Command::new("kill")
        .args(["-s", "TERM", &pid])
        .status()
        .expect("kill");
    assert!(signalled.success());
    let exit = tokio::time::timeout(Duration::from_secs(15), server.child.wait())
        .await
        .expect("the process exits")
        .expect("status");
    assert_eq!(exit.code(), Some(0));

    let mut live = Vec::new();
    for (id, reader) in readers {
        let body = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("no stream outlives the process")
            .expect("reader");
        let frames = numbered_frames(&body);
        let last = frames.last().expect("frames");
        assert_eq!(last.1, "run.finished", "{id}: {body}");
        assert_eq!(last.2["exit_reason"], "shutting_down", "{id}: {last:?}");
        live.push((id, frames));
    }

    // The next life of the process replays every run exactly as it was streamed.
    let server = serve_project(&dir).await;
    for (id, frames) in live {
        let run: Value = client
            .get(format!("http://{}/v1/runs/{id}", server.address))
            .send()
            .await
            .expect("run")
            .json()
            .await
            .expect("json");
        assert_eq!(run["status"], "cancelled", "{run}");
        assert_eq!(run["exit_reason"], "shutting_down", "{run}");
        let replay = client
            .get(format!("http://{}/v1/runs/{id}/events", server.address))
            .send()
            .await
            .expect("replay")
            .text()
            .await
            .expect("body");
        assert_eq!(numbered_frames(&replay), frames, "{id}");
    }
}
