//! Webhooks (SPEC §13, issue 41) with a real receiver: a Python server verifying every message
//! with the Standard Webhooks reference library (`standardwebhooks`, installed by scripts/test)
//! that fails each message's first attempt. A finished run's message reaches the configured
//! receiver and the run's own `webhook`, signed; the failed attempt is retried with the same
//! `webhook-id` and delivered; `GET /v1/webhooks/deliveries` lists it. A run's webhook the
//! address guard refuses, or one the server cannot sign, is a 400 naming the field.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::mock_llm::Reply;
use crate::support::spawn_app_with;

/// A Standard Webhooks secret (the specification's example).
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The receiver process and the attempts it reports.
struct Receiver {
    port: u16,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    _child: tokio::process::Child,
}

impl Receiver {
    async fn start() -> Self {
        let python = std::env::var("AGENTD_TEST_WEBHOOKS_PYTHON")
            .unwrap_or_else(|_| ".ci/venv-webhooks/bin/python".into());
        let mut child = tokio::process::Command::new(python)
            .args(["tests/webhooks/receiver.py", SECRET])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the receiver starts (scripts/test installs standardwebhooks)");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = lines
            .next_line()
            .await
            .expect("read")
            .expect("a port")
            .parse()
            .expect("port");
        Self {
            port,
            lines,
            _child: child,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The next attempt the receiver reports.
    async fn attempt(&mut self, within: Duration) -> Value {
        let line = tokio::time::timeout(within, self.lines.next_line())
            .await
            .expect("an attempt in time")
            .expect("read")
            .expect("a line");
        serde_json::from_str(&line).expect("json")
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs_f64()
}

#[tokio::test]
async fn a_finished_run_is_announced_signed_and_retried_with_the_same_id() {
    let mut receiver = Receiver::start().await;
    let configured = receiver.url("/configured");
    let app = spawn_app_with(|config| {
        config["webhooks"] =
            json!([{"url": configured, "events": ["run.finished"], "secret": SECRET}]);
        config["webhookDelivery"] = json!({"allowPrivateAddresses": true, "secret": SECRET});
    })
    .await;
    app.llm.push(Reply::text("done"));
    let response = app
        .post_json(
            "/v1/agents/chat/runs",
            &json!({"prompt": "hi", "webhook": {"url": receiver.url("/per-run")}}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let ended = unix_now();
    let result: Value = response.json().await.expect("json");
    let run_id = result["run_id"].as_str().expect("run id").to_string();

    let started = Instant::now();
    let mut attempts = Vec::new();
    while attempts.len() < 4 {
        attempts.push(receiver.attempt(Duration::from_secs(20)).await);
    }
    let waited = started.elapsed();
    for attempt in &attempts {
        assert_eq!(attempt["verified"], true, "{attempt}");
        assert_eq!(attempt["type"], "run.finished", "{attempt}");
        assert_eq!(attempt["run_id"], run_id.as_str(), "{attempt}");
    }
    for path in ["/configured", "/per-run"] {
        let of_path: Vec<&Value> = attempts.iter().filter(|a| a["path"] == path).collect();
        assert_eq!(of_path.len(), 2, "{path}: {attempts:?}");
        assert_eq!(
            of_path[0]["id"], of_path[1]["id"],
            "a retry keeps the webhook-id"
        );
        assert_eq!(
            (
                of_path[0]["attempt"].as_i64(),
                of_path[1]["attempt"].as_i64()
            ),
            (Some(1), Some(2))
        );
        let first_delay = of_path[0]["arrived"].as_f64().expect("time") - ended;
        let retry_gap = of_path[1]["arrived"].as_f64().expect("time")
            - of_path[0]["arrived"].as_f64().expect("time");
        eprintln!(
            "{path}: first attempt {first_delay:.3} s after the run ended, retry {retry_gap:.3} s later"
        );
        assert!(first_delay < 2.0, "{first_delay}");
        assert!((4.5..8.0).contains(&retry_gap), "{retry_gap}");
    }
    eprintln!("all four attempts within {waited:?}");

    // The receiver answers before the outbox records its answer: read until both are recorded.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let deliveries = loop {
        let deliveries: Value = app
            .get("/v1/webhooks/deliveries")
            .await
            .json()
            .await
            .expect("json");
        let recorded = deliveries["data"]
            .as_array()
            .is_some_and(|d| d.iter().all(|d| d["status"] == "delivered"));
        if recorded || tokio::time::Instant::now() > deadline {
            break deliveries;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let data = deliveries["data"].as_array().expect("data");
    assert_eq!(data.len(), 2, "{deliveries}");
    for delivery in data {
        assert_eq!(delivery["status"], "delivered", "{delivery}");
        assert_eq!(delivery["attempts"], 2, "{delivery}");
        assert_eq!(delivery["last_status"], 204, "{delivery}");
        assert_eq!(delivery["event"], "run.finished");
    }
}

#[tokio::test]
async fn a_runs_webhook_is_checked_before_the_run_starts() {
    // No secret for per-run webhooks: refused naming `webhook`.
    let unsigned = spawn_app_with(|_| {}).await;
    let response = unsigned
        .post_json(
            "/v1/agents/chat/runs",
            &json!({"prompt": "hi", "webhook": {"url": "https://example.com/hook"}}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["param"], "webhook", "{body}");

    // The address guard refuses loopback and metadata addresses.
    let guarded = spawn_app_with(|config| {
        config["webhookDelivery"] = json!({"secret": SECRET});
    })
    .await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://169.254.169.254/latest",
        "ftp://example.com/",
    ] {
        let response = guarded
            .post_json(
                "/v1/agents/chat/runs",
                &json!({"prompt": "hi", "webhook": {"url": url}}),
            )
            .await;
        assert_eq!(response.status(), 400, "{url}");
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["error"]["param"], "webhook.url", "{body}");
    }
}

/// SPEC §13: a background response's end is announced as OpenAI announces it
/// (`response.completed`, `response.cancelled`), checked by the OpenAI SDK's own
/// `webhooks.unwrap` in tests/sdk/responses_webhook.py.
#[tokio::test]
async fn a_background_response_is_announced_as_openai_announces_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}/openai");
    let app = spawn_app_with(|config| {
        config["webhooks"] = json!([{"url": url, "secret": SECRET,
            "events": ["response.completed", "response.failed", "response.cancelled"]}]);
        config["webhookDelivery"] = json!({"allowPrivateAddresses": true});
    })
    .await;
    app.llm.push(Reply::text("hello"));
    app.llm.push(Reply::hang());
    let args = [
        app.address.clone(),
        "unused".to_string(),
        SECRET.to_string(),
        port.to_string(),
    ];
    let stdout =
        crate::mcp_headend::run_python("openai", "openai==3.52.0", "responses_webhook.py", &args)
            .await;
    for check in ["completed announced ok", "cancelled announced ok"] {
        assert!(stdout.lines().any(|l| l == check), "{check}: {stdout}");
    }
    let deliveries: Value = app
        .get("/v1/webhooks/deliveries")
        .await
        .json()
        .await
        .expect("json");
    let events: Vec<&str> = deliveries["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|d| d["event"].as_str())
        .collect();
    assert_eq!(
        events,
        ["response.cancelled", "response.completed"],
        "only the subscribed events, newest first: {deliveries}"
    );
}

/// An agent whose `test__echo` calls wait for a person.
const APPROVER: &str = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\napprovalTimeout: 10m\n---\nYou echo.\n";

/// The attempts the receiver reports until one of each `(path, type)` in `wanted` came.
async fn attempts_until(receiver: &mut Receiver, wanted: &[(&str, &str)]) -> Vec<Value> {
    let mut attempts: Vec<Value> = Vec::new();
    while !wanted.iter().all(|(path, kind)| {
        attempts
            .iter()
            .any(|a| a["path"] == *path && a["type"] == *kind)
    }) {
        attempts.push(receiver.attempt(Duration::from_secs(20)).await);
    }
    attempts
}

/// SPEC §13: `webhook: {url}` on a per-user chat message and on a background response; the
/// response's own webhook hears `response.completed` although its run waited for an approval
/// and was resumed (its webhook kept with the run while it waited).
#[tokio::test]
async fn a_chat_message_and_a_resumed_background_response_are_announced_to_their_own_webhooks() {
    let mut receiver = Receiver::start().await;
    let agents = tempfile::tempdir().expect("dir");
    std::fs::write(agents.path().join("approver.ai"), APPROVER).expect("agent");
    let agents_path = agents.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["mcpServers"] = json!({"test": crate::support::mcp::test_server_config(json!({}))});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents_path));
        config["webhookDelivery"] = json!({"allowPrivateAddresses": true, "secret": SECRET});
    })
    .await;

    app.llm.push(Reply::text("hello"));
    let chat = app
        .post_json(
            "/api/alice/chat",
            &json!({"message": "hi", "webhook": {"url": receiver.url("/chat")}}),
        )
        .await;
    assert_eq!(chat.status(), 200);

    app.llm.push(Reply::tool_calls(vec![
        crate::support::mock_llm::ToolCall::new(
            "call-1",
            "test__echo",
            json!({"text": "hi"}).to_string(),
        ),
    ]));
    app.llm.push(Reply::text("It said hi."));
    let response = app
        .post_json(
            "/v1/responses",
            &json!({"model": "approver", "input": "echo hi", "background": true,
                "webhook": {"url": receiver.url("/response")}}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    let run_id = body["id"]
        .as_str()
        .and_then(|id| id.strip_prefix("resp_"))
        .expect("a response id")
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let run: Value = app
            .get(&format!("/v1/runs/{run_id}"))
            .await
            .json()
            .await
            .expect("json");
        if run["status"] == "waiting_approval" {
            break;
        }
        assert!(Instant::now() < deadline, "the run waits: {run}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let decided = app
        .post_json(
            &format!("/v1/runs/{run_id}/approvals/call-1"),
            &json!({"decision": "approve"}),
        )
        .await;
    assert!(decided.status().is_success(), "{:?}", decided.text().await);

    let attempts = attempts_until(
        &mut receiver,
        &[
            ("/chat", "run.finished"),
            ("/response", "run.waiting_approval"),
            ("/response", "response.completed"),
        ],
    )
    .await;
    for attempt in &attempts {
        assert_eq!(attempt["verified"], true, "{attempt}");
    }
}

/// A response's own webhook goes with `background: true` only.
#[tokio::test]
async fn a_foreground_response_with_a_webhook_is_refused_naming_it() {
    let app = spawn_app_with(|config| {
        config["webhookDelivery"] = json!({"allowPrivateAddresses": true, "secret": SECRET});
    })
    .await;
    let response = app
        .post_json(
            "/v1/responses",
            &json!({"model": "chat", "input": "hi", "webhook": {"url": "http://127.0.0.1:9/x"}}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["param"], "webhook", "{body}");
}

/// Measurement (printed, never asserted on time): the delay from a run's end (its answer read
/// by the client) to its webhook's first attempt at the receiver, p50/p99 over 20 runs.
#[tokio::test]
async fn webhook_delivery_delay_is_measured() {
    const RUNS: usize = 20;
    let mut receiver = Receiver::start().await;
    let app = spawn_app_with(|config| {
        config["webhookDelivery"] = json!({"allowPrivateAddresses": true, "secret": SECRET});
    })
    .await;
    let mut ended = std::collections::HashMap::new();
    for _ in 0..RUNS {
        app.llm.push(Reply::text("done"));
        let response = app
            .post_json(
                "/v1/agents/chat/runs",
                &json!({"prompt": "hi", "webhook": {"url": receiver.url("/per-run")}}),
            )
            .await;
        assert_eq!(response.status(), 200);
        let at = unix_now();
        let result: Value = response.json().await.expect("json");
        ended.insert(result["run_id"].as_str().expect("run id").to_string(), at);
    }
    let mut delays = Vec::new();
    while delays.len() < RUNS {
        let attempt = receiver.attempt(Duration::from_secs(20)).await;
        if attempt["attempt"].as_i64() != Some(1) {
            continue;
        }
        let run_id = attempt["run_id"].as_str().expect("run id");
        let end = ended.get(run_id).copied().expect("one of ours");
        let arrived = attempt["arrived"].as_f64().expect("time");
        delays.push(((arrived - end) * 1000.0).round() as i64);
    }
    delays.sort_unstable();
    let rank = |p: usize| delays[(RUNS * p).div_ceil(100).max(1) - 1];
    eprintln!(
        "webhook first attempt after the run ended, {RUNS} runs: p50 {} ms, p99 {} ms",
        rank(50),
        rank(99)
    );
}
