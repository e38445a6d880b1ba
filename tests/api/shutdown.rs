//! Graceful shutdown of `agentd serve` (the real binary): SIGTERM during a streaming run lets it
//! run for `server.drainSeconds`, then cancels it; the client gets an `error` frame with code
//! `shutting_down`, the run is stored, and the process exits 0. A second signal exits at once.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use crate::support::CHAT_AGENT;
use crate::support::mock_llm::{MockLlm, Reply};

struct Server {
    child: tokio::process::Child,
    address: String,
    dir: tempfile::TempDir,
}

/// Starts `agentd serve` on a free port against `llm`, with the given drain time.
async fn start(llm: &MockLlm, drain_seconds: u64) -> Server {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir(dir.path().join("agents")).expect("agents");
    std::fs::write(dir.path().join("agents/chat.ai"), CHAT_AGENT).expect("agent");
    let config = json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0", "drainSeconds": drain_seconds},
        "store": {"url": format!("sqlite://{}", dir.path().join("agentd.db").display())},
    });
    std::fs::write(dir.path().join("agentd.json"), config.to_string()).expect("config");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["serve", "--config", "agentd.json"])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("agentd starts");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let address = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("agentd listening") {
                let (_, rest) = line.split_once("address=")?;
                return rest.split_whitespace().next().map(str::to_string);
            }
        }
        None
    })
    .await
    .expect("agentd listens in time")
    .expect("the address is logged");
    // Keep draining stderr so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Server {
        child,
        address,
        dir,
    }
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
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/chat/completions", server.address))
        .json(&body)
        .send()
        .await
        .expect("sent");
    let run_id = response.headers()["x-agentd-run-id"]
        .to_str()
        .expect("run id")
        .to_string();
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
    assert_eq!(run.status, "cancelled");
    assert_eq!(run.exit_reason.as_deref(), Some("cancelled"));
}

#[tokio::test]
async fn a_run_that_ends_within_the_drain_time_completes_normally() {
    let llm = MockLlm::start().await;
    llm.push(Reply::text("almost done now").with_chunk_gap(Duration::from_millis(100)));
    let mut server = start(&llm, 10).await;
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/chat/completions", server.address))
        .json(&body)
        .send()
        .await
        .expect("sent");
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
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/chat/completions", server.address))
        .json(&body)
        .send()
        .await
        .expect("sent");
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
