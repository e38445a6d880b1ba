//! Graceful shutdown of `agentd serve` (the real binary): SIGTERM during a streaming run lets it
//! run for `server.drainSeconds`, then cancels it; the client gets an `error` frame with code
//! `shutting_down`, the run is stored with exit reason `shutting_down`, and the process exits 0. A second signal exits at once.

use std::time::{Duration, Instant};

use crate::support::binary::{Served, command, project, serve};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::run_id;
use futures_util::StreamExt;
use serde_json::json;

struct Server {
    child: tokio::process::Child,
    address: String,
    dir: tempfile::TempDir,
}

/// Starts `agentd serve` on a free port against `llm`, with the given drain time; the store is
/// `agentd.db` in the project directory.
async fn start(llm: &MockLlm, drain_seconds: u64) -> Server {
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0", "drainSeconds": drain_seconds},
        "store": {"url": "sqlite://agentd.db"},
    }));
    let mut command = command(dir.path());
    command.args(["serve", "--config", "agentd.json"]);
    let Served { child, address, .. } = serve(command, |_| {}).await;
    Server {
        child,
        address,
        dir,
    }
}

/// Starts a streaming chat completion on `server`.
async fn stream_chat(server: &Server) -> reqwest::Response {
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    reqwest::Client::new()
        .post(format!("http://{}/v1/chat/completions", server.address))
        .json(&body)
        .send()
        .await
        .expect("chat request sent")
}

fn signal(server: &Server, name: &str) {
    let pid = server.child.id().expect("pid").to_string();
    let status = std::process::Command::new("kill")
        .args(["-s", name, &pid])
        .status()
        .expect("kill");
    assert!(status.success());
}

#[tokio::test]
async fn sigterm_drains_then_cancels_and_tells_streaming_clients() {
    let llm = MockLlm::start().await;
    let slow = "word ".repeat(100);
    llm.push(Reply::text(slow.trim()).with_chunk_gap(Duration::from_millis(100)));
    let mut server = start(&llm, 1).await;
    let response = stream_chat(&server).await;
    let run_id = run_id(&response);
    let mut stream = response.bytes_stream();
    let mut received =
        String::from_utf8_lossy(&stream.next().await.expect("first chunk").expect("bytes"))
            .into_owned();
    let signalled = Instant::now();
    signal(&server, "TERM");
    while let Some(chunk) = stream.next().await {
        received.push_str(&String::from_utf8_lossy(&chunk.expect("bytes")));
    }
    assert!(
        received.contains("\"code\":\"shutting_down\""),
        "{received}"
    );
    assert!(received.trim_end().ends_with("data: [DONE]"));
    let exit = tokio::time::timeout(Duration::from_secs(15), server.child.wait())
        .await
        .expect("exits")
        .expect("status");
    assert_eq!(exit.code(), Some(0));
    let took = signalled.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "the run had its drain time: {took:?}"
    );
    assert!(
        took < Duration::from_secs(8),
        "the drain time bounds the shutdown: {took:?}"
    );
    let url = format!("sqlite://{}", server.dir.path().join("agentd.db").display());
    let store = agentd::store::open(&url).await.expect("store");
    let run = store
        .get_run(&run_id)
        .await
        .expect("query")
        .expect("the run is stored");
    assert_eq!(run.status.as_str(), "cancelled");
    assert_eq!(run.exit_reason.as_deref(), Some("shutting_down"));
}

#[tokio::test]
async fn a_run_that_ends_within_the_drain_time_completes_normally() {
    let llm = MockLlm::start().await;
    llm.push(Reply::text("almost done now").with_chunk_gap(Duration::from_millis(100)));
    let mut server = start(&llm, 10).await;
    let response = stream_chat(&server).await;
    let mut stream = response.bytes_stream();
    let mut received = String::new();
    let first = stream.next().await.expect("first").expect("bytes");
    received.push_str(&String::from_utf8_lossy(&first));
    signal(&server, "TERM");
    while let Some(chunk) = stream.next().await {
        received.push_str(&String::from_utf8_lossy(&chunk.expect("bytes")));
    }
    assert!(
        received.contains("\"finish_reason\":\"stop\""),
        "{received}"
    );
    assert!(!received.contains("shutting_down"));
    let exit = tokio::time::timeout(Duration::from_secs(15), server.child.wait())
        .await
        .expect("exits")
        .expect("status");
    assert_eq!(exit.code(), Some(0));
}

#[tokio::test]
async fn a_second_signal_exits_at_once() {
    let llm = MockLlm::start().await;
    llm.push(Reply::text("word ".repeat(200)).with_chunk_gap(Duration::from_millis(100)));
    let mut server = start(&llm, 60).await;
    let response = stream_chat(&server).await;
    let mut stream = response.bytes_stream();
    let _ = stream.next().await;
    signal(&server, "TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = Instant::now();
    signal(&server, "INT");
    let exit = tokio::time::timeout(Duration::from_secs(5), server.child.wait())
        .await
        .expect("exits")
        .expect("status");
    assert!(second.elapsed() < Duration::from_secs(3));
    assert_eq!(exit.code(), Some(130));
}
