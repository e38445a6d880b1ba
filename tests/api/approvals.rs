//! Tool approvals (SPEC §8) over HTTP: a call matching the agent's `approve:` patterns is not
//! executed; the run emits `tool.approval_requested`, reads `waiting_approval` and holds no
//! session; `POST /v1/runs/{id}/approvals/{call}` approves (with edited arguments, checked
//! against the tool's schema), denies with a reason the model sees, or comes too late (409);
//! the run then goes on with one continuous event sequence. Also: another user's decision (403)
//! and an admin's (ok), two calls in one turn where one waits, expiry by the sweeper, cancel of
//! a waiting run, and a full restart of the only replica between request and decision.

use std::time::Duration;

use serde_json::{Value, json};

use agentd::config::{AgentRegistry, parse_config};
use agentd::runtime::Runtime;

use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{MockLlm, Reply, ToolCall};
use crate::support::numbered_frames;

const APPROVER: &str = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\napprovalTimeout: 10m\n---\nYou echo.\n";
const HASTY: &str = "---\ndescription: Waits two seconds for approvals\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__ech*]\napprovalTimeout: 2s\n---\nYou echo.\n";

/// Waits for a raise after its first tool call (SPEC §14, `onBudget: wait` by default).
const BUDGETED: &str = "---\ndescription: Echoes once per budget\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\nbudget:\n  maxToolCalls: 1\n---\nYou echo.\n";

const ADMIN: &str = "admin-secret";
const ALICE: &str = "alice-secret";
const BOB: &str = "bob-secret";

/// One agentd on a store in `dir`, against `llm`; restartable on the same store.
struct Server {
    address: String,
    client: reqwest::Client,
    runtime: std::sync::Arc<Runtime>,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<()>,
}

async fn serve(dir: &std::path::Path, llm: &MockLlm) -> Server {
    let agents = dir.join("agents");
    std::fs::create_dir_all(&agents).expect("agents dir");
    std::fs::write(agents.join("approver.ai"), APPROVER).expect("agent");
    std::fs::write(agents.join("hasty.ai"), HASTY).expect("agent");
    let config = json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url(), "apiKey": "k"}},
        "store": {"url": format!("sqlite://{}", dir.join("agentd.db").display())},
        "agents": [agents.display().to_string()],
        "mcpServers": {"test": test_server_config(json!({}))},
        "server": {"heartbeatSeconds": 1},
        "auth": {"keys": [
            {"key": ADMIN, "admin": true, "id": "ops"},
            {"key": ALICE, "userId": "alice"},
            {"key": BOB, "userId": "bob"}
        ]},
    });
    let config = parse_config(config, "test config").expect("config");
    let registry = AgentRegistry::load(&config).expect("agents");
    let runtime = Runtime::start(config, registry).await.expect("runtime");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served_runtime = runtime.clone();
    let served = tokio::spawn(async move {
        let _ = agentd::http::serve(listener, served_runtime, async {
            let _ = stopped.await;
        })
        .await;
    });
    Server {
        address,
        client: reqwest::Client::new(),
        runtime,
        stop,
        served,
    }
}

impl Server {
    async fn post(&self, key: &str, path: &str, body: &Value) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}{path}", self.address))
            .bearer_auth(key)
            .json(body)
            .send()
            .await
            .expect("sent");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.address))
            .bearer_auth(key)
            .send()
            .await
            .expect("sent");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Starts a background run of `agent` for the key's user; returns its id.
    async fn start(&self, key: &str, agent: &str) -> String {
        let (status, body) = self
            .post(
                key,
                &format!("/v1/agents/{agent}/runs"),
                &json!({"prompt": "echo hi", "background": true}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        body["run_id"].as_str().expect("run id").to_string()
    }

    /// The run once its status is `status`; fails after 20 s.
    async fn run_when(&self, run_id: &str, status: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (_, run) = self.get(ADMIN, &format!("/v1/runs/{run_id}")).await;
            if run["status"] == status {
                return run;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "run {run_id} is not {status}: {run}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    async fn decide(&self, key: &str, run_id: &str, call_id: &str, body: Value) -> (u16, Value) {
        self.post(
            key,
            &format!("/v1/runs/{run_id}/approvals/{call_id}"),
            &body,
        )
        .await
    }

    /// Every event of the run, `(id, event, data)`, replayed until `run.finished`.
    async fn events(&self, run_id: &str) -> Vec<(i64, String, Value)> {
        let body = self
            .client
            .get(format!("{}/v1/runs/{run_id}/events", self.address))
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("sent")
            .text()
            .await
            .expect("body");
        numbered_frames(&body)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.served.await;
        self.runtime.close().await;
    }
}

fn echo_call(id: &str, text: &str) -> ToolCall {
    ToolCall::new(id, "test__echo", json!({"text": text}).to_string())
}

/// The `tool` message replying to `call_id` in the model's last request.
pub(crate) fn tool_reply(llm: &MockLlm, call_id: &str) -> String {
    let requests = llm.requests();
    let last = requests.last().expect("a request");
    last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no reply to {call_id} in {last}"))
        .to_string()
}

fn kinds(events: &[(i64, String, Value)]) -> Vec<&str> {
    events.iter().map(|(_, kind, _)| kind.as_str()).collect()
}

fn assert_numbered_1_to_n(events: &[(i64, String, Value)]) {
    let ids: Vec<i64> = events.iter().map(|(id, _, _)| *id).collect();
    let expected: Vec<i64> = (1..=events.len() as i64).collect();
    assert_eq!(ids, expected, "one continuous event sequence");
}

#[tokio::test]
async fn an_approved_call_runs_after_the_decision_and_the_run_completes() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    llm.push(Reply::text("It said hi."));
    let run_id = server.start(ALICE, "approver").await;
    let waiting = server.run_when(&run_id, "waiting_approval").await;
    assert_eq!(waiting["status"], "waiting_approval");
    assert_eq!(llm.requests().len(), 1, "the model waits too");

    let (status, listed) = server.get(ALICE, "/v1/runs?status=waiting_approval").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["data"][0]["run_id"], run_id.as_str());
    let (_, pending) = server
        .get(ALICE, &format!("/v1/runs/{run_id}/approvals"))
        .await;
    assert_eq!(pending["data"][0]["call_id"], "call-1");
    assert_eq!(pending["data"][0]["arguments"], json!({"text": "hi"}));

    let (status, decided) = server
        .decide(ALICE, &run_id, "call-1", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["decision"], "approve");
    let run = server.run_when(&run_id, "completed").await;
    assert_eq!(run["result"]["final_report"]["content"], "It said hi.");
    assert_eq!(tool_reply(&llm, "call-1"), "hi");

    let events = server.events(&run_id).await;
    assert_numbered_1_to_n(&events);
    let kinds = kinds(&events);
    let requested = kinds
        .iter()
        .position(|k| *k == "tool.approval_requested")
        .expect("requested");
    let decided = kinds
        .iter()
        .position(|k| *k == "tool.approval_decided")
        .expect("decided");
    let started = kinds
        .iter()
        .position(|k| *k == "tool.started")
        .expect("started");
    assert!(requested < decided && decided < started, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "run.started").count(), 1);
    assert_eq!(kinds.last(), Some(&"run.finished"));
    assert_eq!(events[decided].2["by"], "alice");
    assert!(events[requested].2["expires_at"].is_string());

    let (status, again) = server
        .decide(ALICE, &run_id, "call-1", json!({"decision": "deny"}))
        .await;
    assert_eq!(status, 409, "{again}");

    let metrics = server
        .client
        .get(format!("{}/metrics", server.address))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("text");
    for line in [
        "agentd_approvals_requested_total{agent=\"approver\"} 1",
        "agentd_approvals_decided_total{decision=\"approve\"} 1",
        "agentd_approval_wait_seconds_count{decision=\"approve\"} 1",
        "agentd_runs_waiting_approval 0",
    ] {
        assert!(metrics.contains(line), "no {line} in\n{metrics}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_per_user_chat_answers_once_its_waiting_call_is_decided_and_keeps_the_answer() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = std::sync::Arc::new(serve(dir.path(), &llm).await);
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    llm.push(Reply::text("Approved and done."));
    let asking = std::sync::Arc::clone(&server);
    let chat = tokio::spawn(async move {
        asking
            .post(
                ALICE,
                "/api/alice/chat",
                &json!({"message": "echo hi", "agent": "approver"}),
            )
            .await
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let waiting = loop {
        let (_, listed) = server.get(ALICE, "/api/alice/approvals").await;
        if let Some(first) = listed["data"].get(0) {
            break first.clone();
        }
        assert!(std::time::Instant::now() < deadline, "nothing waits");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let run_id = waiting["run_id"].as_str().expect("run id");
    let (status, _) = server
        .decide(ALICE, run_id, "call-1", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 200);
    let (status, answer) = chat.await.expect("chat");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"], "Approved and done.");
    assert_eq!(answer["run_id"], run_id);
    let conversation = answer["conversation_id"].as_str().expect("conversation");
    let (_, stored) = server
        .get(ALICE, &format!("/api/alice/conversations/{conversation}"))
        .await;
    assert!(
        stored.to_string().contains("Approved and done."),
        "the answer is kept: {stored}"
    );
    if let Ok(server) = std::sync::Arc::try_unwrap(server) {
        server.stop().await;
    }
}

#[tokio::test]
async fn a_denial_tells_the_model_the_reason_and_the_tool_never_runs() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    llm.push(Reply::text("Fine, I will not."));
    let run_id = server.start(ALICE, "approver").await;
    server.run_when(&run_id, "waiting_approval").await;
    let (status, body) = server
        .decide(
            ALICE,
            &run_id,
            "call-1",
            json!({"decision": "deny", "reason": "not on a Friday"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    server.run_when(&run_id, "completed").await;
    assert_eq!(tool_reply(&llm, "call-1"), "denied: not on a Friday");
    let events = server.events(&run_id).await;
    assert!(!kinds(&events).contains(&"tool.started"));
    let decided = events
        .iter()
        .find(|(_, kind, _)| kind == "tool.approval_decided")
        .expect("decided");
    assert_eq!(decided.2["decision"], "deny");
    assert_eq!(decided.2["reason"], "not on a Friday");
    server.stop().await;
}

#[tokio::test]
async fn edited_arguments_reach_the_tool_and_a_schema_failing_edit_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "rm -rf")]));
    llm.push(Reply::text("Done."));
    let run_id = server.start(ALICE, "approver").await;
    server.run_when(&run_id, "waiting_approval").await;
    let (status, error) = server
        .decide(
            ALICE,
            &run_id,
            "call-1",
            json!({"decision": "approve", "arguments": {"text": 5}}),
        )
        .await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["param"], "arguments");
    assert!(
        error["error"]["message"]
            .as_str()
            .expect("message")
            .contains("test__echo"),
        "{error}"
    );
    let (_, pending) = server
        .get(ALICE, &format!("/v1/runs/{run_id}/approvals"))
        .await;
    assert_eq!(
        pending["data"].as_array().map(Vec::len),
        Some(1),
        "still pending"
    );
    let (status, body) = server
        .decide(
            ALICE,
            &run_id,
            "call-1",
            json!({"decision": "approve", "arguments": {"text": "ls"}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["arguments_edited"], json!({"text": "ls"}));
    assert_eq!(
        body["arguments"],
        json!({"text": "rm -rf"}),
        "what the model asked"
    );
    server.run_when(&run_id, "completed").await;
    assert_eq!(tool_reply(&llm, "call-1"), "ls");
    server.stop().await;
}

#[tokio::test]
async fn another_user_may_not_decide_and_an_admin_may() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    llm.push(Reply::text("ok"));
    let run_id = server.start(ALICE, "approver").await;
    server.run_when(&run_id, "waiting_approval").await;
    let (status, _) = server
        .decide(BOB, &run_id, "call-1", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 403);
    let (status, _) = server
        .decide(
            ALICE,
            &run_id,
            "no-such-call",
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = server
        .decide(
            ALICE,
            "no-such-run",
            "call-1",
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, error) = server
        .decide(ALICE, &run_id, "call-1", json!({"decision": "maybe"}))
        .await;
    assert_eq!(status, 400, "{error}");
    let (status, _) = server
        .decide(ADMIN, &run_id, "call-1", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 200);
    server.run_when(&run_id, "completed").await;
    let events = server.events(&run_id).await;
    let decided = events
        .iter()
        .find(|(_, kind, _)| kind == "tool.approval_decided")
        .expect("decided");
    // The decider is named: the admin key bound to no user by its id.
    assert_eq!(decided.2["by"], "key:ops");
    server.stop().await;
}

#[tokio::test]
async fn of_two_calls_in_one_turn_the_free_one_runs_at_once_and_the_other_waits() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![
        ToolCall::new("free", "test__stats", "{}"),
        echo_call("gated", "hi"),
    ]));
    llm.push(Reply::text("Both done."));
    let run_id = server.start(ALICE, "approver").await;
    server.run_when(&run_id, "waiting_approval").await;
    let (_, pending) = server
        .get(ALICE, &format!("/v1/runs/{run_id}/approvals"))
        .await;
    assert_eq!(pending["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(pending["data"][0]["call_id"], "gated");
    let (status, _) = server
        .decide(ALICE, &run_id, "gated", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 200);
    server.run_when(&run_id, "completed").await;
    let events = server.events(&run_id).await;
    let finished_free = events
        .iter()
        .position(|(_, k, d)| k == "tool.finished" && d["call_id"] == "free")
        .expect("free ran");
    let requested = events
        .iter()
        .position(|(_, k, _)| k == "tool.approval_requested")
        .expect("requested");
    assert!(
        finished_free < requested,
        "the free call ran before the wait"
    );
    assert!(tool_reply(&llm, "free").contains("max_in_flight"));
    assert_eq!(tool_reply(&llm, "gated"), "hi");
    // The replies follow the order of the calls.
    let last = llm.requests().last().cloned().expect("request");
    let tool_ids: Vec<&str> = last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(tool_ids, ["free", "gated"]);
    server.stop().await;
}

#[tokio::test]
async fn a_wait_past_the_approval_timeout_ends_as_expired_and_the_model_is_told() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    llm.push(Reply::text("Nobody answered."));
    let run_id = server.start(ALICE, "hasty").await;
    server.run_when(&run_id, "waiting_approval").await;
    server.run_when(&run_id, "completed").await;
    assert_eq!(tool_reply(&llm, "call-1"), "denied: approval timed out");
    let events = server.events(&run_id).await;
    assert_numbered_1_to_n(&events);
    let decided = events
        .iter()
        .find(|(_, kind, _)| kind == "tool.approval_decided")
        .expect("decided");
    assert_eq!(decided.2["decision"], "expired");
    assert_eq!(decided.2["by"], "agentd");
    let (status, error) = server
        .decide(ALICE, &run_id, "call-1", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 409, "{error}");
    server.stop().await;
}

#[tokio::test]
async fn cancelling_a_waiting_run_ends_it_cancelled() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    let run_id = server.start(ALICE, "approver").await;
    server.run_when(&run_id, "waiting_approval").await;
    let (status, body) = server
        .post(ALICE, &format!("/v1/runs/{run_id}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 202, "{body}");
    let run = server.run_when(&run_id, "cancelled").await;
    assert_eq!(run["result"]["exit_reason"], "cancelled");
    let events = server.events(&run_id).await;
    assert_numbered_1_to_n(&events);
    assert_eq!(kinds(&events).last(), Some(&"run.finished"));
    let (status, _) = server
        .decide(ALICE, &run_id, "call-1", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 409);
    server.stop().await;
}

#[tokio::test]
async fn a_waiting_run_survives_a_full_restart_of_its_only_replica() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let first = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call(
        "call-1",
        "after restart",
    )]));
    llm.push(Reply::text("Back again."));
    let run_id = first.start(ALICE, "approver").await;
    first.run_when(&run_id, "waiting_approval").await;
    first.stop().await;

    let second = serve(dir.path(), &llm).await;
    let waiting = second.run_when(&run_id, "waiting_approval").await;
    assert_eq!(
        waiting["status"], "waiting_approval",
        "not ended as owner_lost"
    );
    let (status, body) = second
        .decide(ALICE, &run_id, "call-1", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let run = second.run_when(&run_id, "completed").await;
    assert_eq!(run["result"]["final_report"]["content"], "Back again.");
    assert_eq!(tool_reply(&llm, "call-1"), "after restart");
    let events = second.events(&run_id).await;
    assert_numbered_1_to_n(&events);
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| **k == "run.started")
            .count(),
        1
    );
    // Accounting is summed over both halves: two LLM calls and the tool.
    let accounting = run["result"]["accounting"].as_array().expect("accounting");
    assert_eq!(accounting.iter().filter(|e| e["type"] == "llm").count(), 2);
    assert_eq!(accounting.iter().filter(|e| e["type"] == "tool").count(), 1);
    second.stop().await;
}

/// Reads an SSE body until `needle` has arrived; returns everything read so far.
async fn read_until(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    body: &mut String,
    needle: &str,
) {
    use futures_util::StreamExt;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !body.contains(needle) {
        let chunk = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} in {body}"));
        match chunk {
            Some(chunk) => body.push_str(&String::from_utf8_lossy(&chunk.expect("chunk"))),
            None => panic!("the stream ended before {needle:?}: {body}"),
        }
    }
}

#[tokio::test]
async fn the_stream_that_started_a_run_carries_it_through_the_wait_to_its_end() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    llm.push(Reply::text("It said hi."));
    let response = server
        .client
        .post(format!("{}/v1/agents/approver/runs", server.address))
        .bearer_auth(ALICE)
        .json(&json!({"prompt": "echo hi", "stream": true}))
        .send()
        .await
        .expect("sent");
    let run_id = crate::support::run_id(&response);
    let mut stream = response.bytes_stream();
    let mut body = String::new();
    read_until(&mut stream, &mut body, "event: tool.approval_requested").await;
    server.run_when(&run_id, "waiting_approval").await;
    let (_, listed) = server.get(ALICE, "/api/alice/approvals").await;
    assert_eq!(listed["data"][0]["run_id"], run_id.as_str(), "{listed}");
    assert_eq!(listed["data"][0]["tool"], "test__echo");
    let (status, _) = server.get(BOB, "/api/alice/approvals").await;
    assert_eq!(status, 403);
    let (status, _) = server
        .decide(ALICE, &run_id, "call-1", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 200);
    read_until(&mut stream, &mut body, "event: run.finished").await;
    let frames = numbered_frames(&body);
    assert_numbered_1_to_n(&frames);
    assert!(kinds(&frames).contains(&"tool.finished"));
    assert_eq!(
        frames,
        server.events(&run_id).await,
        "the stored events are the streamed ones"
    );
    server.stop().await;
}

#[tokio::test]
async fn chat_completions_names_the_waiting_call_in_a_progress_line_and_the_run_in_a_header() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    llm.push(Reply::text("It said hi."));
    let response = server
        .client
        .post(format!("{}/v1/chat/completions", server.address))
        .bearer_auth(ALICE)
        .json(&json!({"model": "approver", "stream": true,
            "messages": [{"role": "user", "content": "echo hi"}]}))
        .send()
        .await
        .expect("sent");
    let run_id = crate::support::run_id(&response);
    let mut stream = response.bytes_stream();
    let mut body = String::new();
    read_until(&mut stream, &mut body, "waiting for approval").await;
    assert!(
        body.contains(&format!("POST /v1/runs/{run_id}/approvals/call-1")),
        "{body}"
    );
    let (status, _) = server
        .decide(ALICE, &run_id, "call-1", json!({"decision": "approve"}))
        .await;
    assert_eq!(status, 200);
    read_until(&mut stream, &mut body, "[DONE]").await;
    assert!(
        body.contains("\"content\":\"said \""),
        "the answer streams on: {body}"
    );
    assert!(body.contains("\"finish_reason\":\"stop\""), "{body}");
    server.stop().await;
}

/// Two `agentd serve` processes on one fresh PostgreSQL database, with the approving agent.
async fn postgres_replicas(
    llm: &MockLlm,
) -> (
    crate::store::backends::Backend,
    tempfile::TempDir,
    crate::support::binary::Served,
    crate::support::binary::Served,
) {
    use crate::support::binary;
    let database = crate::store::backends::Backend::postgres().await;
    let dir = binary::project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "mcpServers": {"test": test_server_config(json!({}))},
        "server": {"listen": "127.0.0.1:0", "heartbeatSeconds": 1, "ownerTimeoutSeconds": 3},
        "store": {"url": database.url},
    }));
    std::fs::write(dir.path().join("agents/approver.ai"), APPROVER).expect("agent");
    std::fs::write(dir.path().join("agents/budgeted.ai"), BUDGETED).expect("agent");
    let start = || {
        let mut command = binary::command(dir.path());
        command.args(["serve", "--config", "agentd.json"]);
        binary::serve(command, |_| {})
    };
    let a = start().await;
    let b = start().await;
    (database, dir, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_on_a_killed_replica_completes_on_the_replica_that_gets_the_decision() {
    let llm = MockLlm::start().await;
    let (_database, _dir, mut a, b) = postgres_replicas(&llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "from B")]));
    llm.push(Reply::text("Finished on B."));
    let client = reqwest::Client::new();
    let run_id = start_on(&client, &a, "approver").await;
    run_on_when(&client, &b, &run_id, "waiting_approval").await;
    kill(&mut a).await;
    // Past the owner timeout: a waiting run is not an orphan.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        run_on(&client, &b, &run_id).await["status"],
        "waiting_approval"
    );

    let decided = client
        .post(format!(
            "http://{}/v1/runs/{run_id}/approvals/call-1",
            b.address
        ))
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(decided.status(), 200);
    let run = run_on_when(&client, &b, &run_id, "completed").await;
    assert_eq!(run["result"]["final_report"]["content"], "Finished on B.");
    assert_eq!(
        tool_reply(&llm, "call-1"),
        "from B",
        "the tool's real result"
    );
    let events = replayed_on(&client, &b, &run_id).await;
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| **k == "run.started")
            .count(),
        1
    );
    assert_eq!(kinds(&events).last(), Some(&"run.finished"));
    assert!(kinds(&events).contains(&"tool.finished"));
}

/// Starts a background run of `agent` on `served`; returns its id.
async fn start_on(
    client: &reqwest::Client,
    served: &crate::support::binary::Served,
    agent: &str,
) -> String {
    let accepted: Value = client
        .post(format!("http://{}/v1/agents/{agent}/runs", served.address))
        .json(&json!({"prompt": "echo", "background": true}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    accepted["run_id"].as_str().expect("run id").to_string()
}

/// The run as `served` shows it.
async fn run_on(
    client: &reqwest::Client,
    served: &crate::support::binary::Served,
    run_id: &str,
) -> Value {
    client
        .get(format!("http://{}/v1/runs/{run_id}", served.address))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .unwrap_or(Value::Null)
}

/// The run once `served` shows it with `status`; fails after 30 s.
async fn run_on_when(
    client: &reqwest::Client,
    served: &crate::support::binary::Served,
    run_id: &str,
    status: &str,
) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let run = run_on(client, served, run_id).await;
        if run["status"] == status {
            return run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never {status}: {run}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Kills a replica at once (SIGKILL) and reaps it.
async fn kill(served: &mut crate::support::binary::Served) {
    let pid = served.child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let _ = served.child.wait().await;
}

/// Every event of the run as `served` replays it, checked numbered 1..n.
async fn replayed_on(
    client: &reqwest::Client,
    served: &crate::support::binary::Served,
    run_id: &str,
) -> Vec<(i64, String, Value)> {
    let body = client
        .get(format!("http://{}/v1/runs/{run_id}/events", served.address))
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("body");
    let events = numbered_frames(&body);
    assert_numbered_1_to_n(&events);
    events
}

/// A project for `agentd run` / `agentd check` with the approving agent and the test server.
fn cli_project(llm_base: &str, agent: &str) -> tempfile::TempDir {
    let dir = crate::support::binary::project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm_base}},
        "agents": ["agents"],
        "mcpServers": {"test": test_server_config(json!({}))},
    }));
    std::fs::write(dir.path().join("agents/approver.ai"), agent).expect("agent");
    dir
}

#[tokio::test]
async fn agentd_run_on_a_terminal_asks_and_runs_the_tool_with_the_edited_arguments() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let llm = MockLlm::start().await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "model text")]));
    llm.push(Reply::text("The tool said what you typed."));
    let dir = cli_project(&llm.base_url(), APPROVER);
    // `script` gives agentd a pseudo-terminal and passes our input to it.
    let agentd = env!("CARGO_BIN_EXE_agentd");
    let mut child = tokio::process::Command::new("script")
        .args([
            "-qfec",
            &format!("{agentd} run approver 'echo something' --config agentd.json"),
            "/dev/null",
        ])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("script runs (util-linux)");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut seen = String::new();
    let mut buffer = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut answered = Vec::new();
    loop {
        let read = tokio::time::timeout_at(deadline, stdout.read(&mut buffer))
            .await
            .unwrap_or_else(|_| panic!("agentd run never finished: {seen}"))
            .expect("read");
        if read == 0 {
            break;
        }
        seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
        for (question, answer) in [
            ("[a]pprove, [d]eny or [e]dit the arguments?", "e\n"),
            (
                "arguments as one line of JSON:",
                "{\"text\": \"typed at the terminal\"}\n",
            ),
        ] {
            if seen.matches(question).count() > answered.iter().filter(|q| **q == question).count()
            {
                stdin.write_all(answer.as_bytes()).await.expect("answer");
                stdin.flush().await.expect("flush");
                answered.push(question);
            }
        }
    }
    let status = child.wait().await.expect("exit");
    assert!(seen.contains("wants to call `test__echo`"), "{seen}");
    assert!(seen.contains("The tool said what you typed."), "{seen}");
    assert!(status.success(), "{seen}");
    assert_eq!(tool_reply(&llm, "call-1"), "typed at the terminal");
}

#[tokio::test]
async fn agentd_run_without_a_terminal_follows_the_flags_or_denies_saying_why() {
    let llm = MockLlm::start().await;
    let dir = cli_project(&llm.base_url(), APPROVER);
    let run = |extra: &'static [&'static str]| {
        let mut command = crate::support::binary::command(dir.path());
        command
            .args(["run", "approver", "echo", "--config", "agentd.json"])
            .args(extra)
            .stdin(std::process::Stdio::null());
        command.output()
    };
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "approved")]));
    llm.push(Reply::text("ok"));
    let out = run(&["--approve-all"]).await.expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(tool_reply(&llm, "call-1"), "approved");

    llm.push(Reply::tool_calls(vec![echo_call("call-2", "x")]));
    llm.push(Reply::text("ok"));
    let out = run(&["--deny-all"]).await.expect("runs");
    assert!(out.status.success());
    assert_eq!(tool_reply(&llm, "call-2"), "denied: denied by --deny-all");

    llm.push(Reply::tool_calls(vec![echo_call("call-3", "x")]));
    llm.push(Reply::text("ok"));
    let out = run(&[]).await.expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("there is no terminal to ask"), "{stderr}");
    assert!(
        tool_reply(&llm, "call-3").contains("use --approve-all or --deny-all"),
        "the model is told why"
    );
}

#[tokio::test]
async fn agentd_check_names_an_approve_pattern_that_matches_no_tool() {
    let llm = MockLlm::start().await;
    let agent = APPROVER.replace("approve: [test__echo]", "approve: [github__create_*]");
    let dir = cli_project(&llm.base_url(), &agent);
    let out = crate::support::binary::command(dir.path())
        .args(["check", "--config", "agentd.json"])
        .output()
        .await
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("approver.ai"), "{stderr}");
    assert!(
        stderr.contains("\"github__create_*\" matches no tool"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_sub_agent_that_needs_approvals_is_refused_at_load() {
    let llm = MockLlm::start().await;
    let dir = cli_project(&llm.base_url(), APPROVER);
    std::fs::write(
        dir.path().join("agents/boss.ai"),
        "---\ndescription: Delegates\nmodels: llm/m\nagents: [approver]\n---\nYou delegate.\n",
    )
    .expect("agent");
    let out = crate::support::binary::command(dir.path())
        .args(["check", "--config", "agentd.json"])
        .output()
        .await
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("agent approver needs tool approvals")
            && stderr.contains("sub-agent of boss"),
        "{stderr}"
    );
}

mod session_side {
    //! The session library alone, on tokio's paused clock: a run that waits returns a
    //! checkpoint (JSON round trip included) and emits no `run.finished`; resumed with no
    //! decision the wait counts as expired; time before the wait is added to `duration_ms`; a
    //! session that cannot wait denies at once.

    use std::sync::Arc;

    use agentd::agent::approval::{Checkpoint, DecidedCall, Decision, SessionEnd};
    use agentd::agent::{AgentEvent, EventSink, ProviderSet, Session};
    use agentd::tools::ToolRegistry;

    use crate::support::mock_llm::Reply;
    use crate::support::scripted::{Harness, agent, calls};

    /// A text agent whose `test__echo` calls wait (set on the spec: the harness's config has
    /// no MCP server for load-time checks to find).
    fn waiting_agent() -> Arc<agentd::config::AgentSpec> {
        let mut spec = (*agent("finalization: text\nmaxTurns: 5")).clone();
        spec.approvals.patterns = vec!["test__echo".into()];
        Arc::new(spec)
    }

    fn session(harness: &Harness, sink: EventSink) -> Session {
        let mut providers = ProviderSet::default();
        providers.insert("a", harness.llm.clone());
        let mut registry = ToolRegistry::default();
        registry.add(harness.tools.clone());
        Session::new(providers, registry, sink, harness.control.clone()).waiting_for_approvals()
    }

    async fn collect(
        run: impl std::future::Future<Output = SessionEnd>,
        receiver: tokio::sync::mpsc::Receiver<AgentEvent>,
    ) -> (SessionEnd, Vec<AgentEvent>) {
        let mut receiver = receiver;
        let collector = tokio::spawn(async move {
            let mut events = Vec::new();
            while let Some(event) = receiver.recv().await {
                events.push(event);
            }
            events
        });
        let end = run.await;
        (end, collector.await.expect("events"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_with_no_decision_resumes_as_expired_and_keeps_the_time_before_it() {
        let harness = Harness::new(vec![
            calls(&[("slow", "test__slow", r#"{"ms": 5000}"#)]),
            calls(&[("gated", "test__echo", r#"{"x": 1}"#)]),
            Reply::text("Nobody approved."),
        ]);
        let spec = waiting_agent();
        let (sink, receiver) = EventSink::channel(64);
        let first = session(&harness, sink);
        let (end, events) = collect(
            async move { first.run_or_wait(Harness::request(spec, "go")).await },
            receiver,
        )
        .await;
        let SessionEnd::Waiting(checkpoint) = end else {
            panic!("the run should wait: {end:?}");
        };
        assert!(
            events
                .iter()
                .any(|e| matches!(e, AgentEvent::ApprovalRequested(r) if r.call_id == "gated"))
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, AgentEvent::RunFinished(_)))
        );
        assert_eq!(checkpoint.waiting.pending.len(), 1);
        let stored = serde_json::to_string(&*checkpoint).expect("json");
        let mut checkpoint: Checkpoint = serde_json::from_str(&stored).expect("read back");
        // As if the first half had run for five seconds (durations are wall-clock time).
        checkpoint.elapsed_ms = 5000;
        assert!(
            harness.tools.calls().iter().all(|(name, _)| name != "echo"),
            "not executed"
        );

        let (sink, receiver) = EventSink::channel(64);
        let second = session(&harness, sink);
        let spec = waiting_agent();
        let request = checkpoint.request(spec);
        let (end, events) = collect(
            async move { second.resume(request, checkpoint, Vec::new()).await },
            receiver,
        )
        .await;
        let SessionEnd::Finished(result) = end else {
            panic!("the run should finish");
        };
        assert!(result.success, "{result:?}");
        assert!(result.duration_ms >= 5000, "time before the wait counts");
        assert_eq!(result.turns, 3);
        let last = harness.llm.requests().last().cloned().expect("request");
        let replies: Vec<String> = last
            .messages
            .iter()
            .filter(|m| m.tool_call_id.as_deref() == Some("gated"))
            .filter_map(|m| m.content.clone())
            .collect();
        assert_eq!(replies, ["denied: approval timed out"]);
        assert!(events.iter().any(|e| matches!(e, AgentEvent::ApprovalDecided(d) if d.decision == "expired" && d.by == "agentd")));
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, AgentEvent::RunStarted(_))),
            "one run.started per run"
        );
        let llm_entries = result
            .accounting
            .iter()
            .filter(|e| matches!(e, agentd::vocabulary::result::AccountingEntry::Llm(_)))
            .count();
        assert_eq!(llm_entries, 3, "accounting of both halves");
    }

    #[tokio::test(start_paused = true)]
    async fn an_approval_with_edited_arguments_runs_the_tool_with_them() {
        let harness = Harness::new(vec![
            calls(&[("gated", "test__echo", r#"{"x": 1}"#)]),
            Reply::text("ok"),
        ]);
        let (sink, receiver) = EventSink::channel(64);
        let first = session(&harness, sink);
        let spec = waiting_agent();
        let (end, _) = collect(
            async move { first.run_or_wait(Harness::request(spec, "go")).await },
            receiver,
        )
        .await;
        let SessionEnd::Waiting(checkpoint) = end else {
            panic!("the run should wait");
        };
        let edited = serde_json::json!({"x": 2}).as_object().cloned();
        let decision = DecidedCall {
            call_id: "gated".into(),
            decision: Decision::Approve {
                arguments: edited,
                note: None,
            },
            by: "alice".into(),
        };
        let (sink, _receiver) = EventSink::channel(64);
        let request = checkpoint.request(waiting_agent());
        let end = session(&harness, sink)
            .resume(request, *checkpoint, vec![decision])
            .await;
        assert!(
            matches!(end, SessionEnd::Finished(ref r) if r.success),
            "{end:?}"
        );
        assert_eq!(
            harness.tools.calls(),
            [("echo".to_string(), serde_json::json!({"x": 2}))]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_needs_approval_never_runs_inside_a_batch() {
        let batch = serde_json::json!({"calls": [
            {"id": "1", "tool": "test__echo", "parameters": {"x": 1}}
        ]})
        .to_string();
        let harness = Harness::new(vec![
            calls(&[("b", agentd::agent::internal_tools::BATCH_TOOL, &batch)]),
            crate::support::scripted::final_report("markdown", "done"),
        ]);
        let mut spec = (*agent("maxTurns: 5")).clone();
        spec.approvals.patterns = vec!["test__echo".into()];
        let (sink, receiver) = EventSink::channel(64);
        let first = session(&harness, sink);
        let (end, _) = collect(
            async move {
                first
                    .run_or_wait(Harness::request(Arc::new(spec), "go"))
                    .await
            },
            receiver,
        )
        .await;
        assert!(
            matches!(end, SessionEnd::Finished(ref r) if r.success),
            "{end:?}"
        );
        assert!(harness.tools.calls().is_empty(), "the batch did not run it");
        let last = harness.llm.requests().last().cloned().expect("request");
        let reply = last
            .messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some("b"))
            .and_then(|m| m.content.clone())
            .expect("batch reply");
        assert!(reply.contains("NEEDS_APPROVAL"), "{reply}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_that_cannot_wait_denies_at_once() {
        let harness = Harness::new(vec![
            calls(&[("gated", "test__echo", "{}")]),
            Reply::text("ok"),
        ]);
        let (result, _) = harness.run(Harness::request(waiting_agent(), "go")).await;
        assert!(result.success);
        let last = harness.llm.requests().last().cloned().expect("request");
        let reply = last
            .messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some("gated"))
            .and_then(|m| m.content.clone())
            .expect("reply");
        assert!(
            reply.starts_with("denied: this tool needs a person's approval"),
            "{reply}"
        );
        assert!(harness.tools.calls().is_empty());
        let _ = Arc::strong_count(&harness.llm);
    }
}

#[tokio::test]
async fn a_decision_body_is_checked_field_by_field() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    llm.push(Reply::text("ok"));
    let run_id = server.start(ALICE, "approver").await;
    server.run_when(&run_id, "waiting_approval").await;
    let too_long = "r".repeat(4097);
    for (body, named) in [
        (json!({"decision": "deny", "color": "red"}), "color"),
        (json!({"decision": "maybe"}), "maybe"),
        (json!({}), "decision"),
        (json!({"decision": "deny", "reason": too_long}), "4096"),
    ] {
        let (status, error) = server.decide(ALICE, &run_id, "call-1", body.clone()).await;
        assert_eq!(status, 400, "{body}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{body}: {message}");
    }
    let at_limit = "r".repeat(4096);
    let (status, _) = server
        .decide(
            ALICE,
            &run_id,
            "call-1",
            json!({"decision": "deny", "reason": at_limit}),
        )
        .await;
    assert_eq!(status, 200, "a reason of exactly 4096 characters is taken");
    let events = {
        server.run_when(&run_id, "completed").await;
        server.events(&run_id).await
    };
    let decided = events
        .iter()
        .find(|(_, kind, _)| kind == "tool.approval_decided")
        .expect("decided");
    assert_eq!(decided.2["reason"].as_str().map(str::len), Some(4096));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_its_budget_on_a_killed_replica_is_raised_once_on_another() {
    let llm = MockLlm::start().await;
    let (_database, _dir, mut a, b) = postgres_replicas(&llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "first")]));
    llm.push(Reply::tool_calls(vec![echo_call("call-2", "second")]));
    llm.push(Reply::text("Raised and finished on B."));
    let client = reqwest::Client::new();
    let run_id = start_on(&client, &a, "budgeted").await;
    run_on_when(&client, &b, &run_id, "waiting_budget").await;
    kill(&mut a).await;
    // Past the owner timeout: a run waiting for its budget is not an orphan.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        run_on(&client, &b, &run_id).await["status"],
        "waiting_budget"
    );

    let raise = || async {
        client
            .post(format!("http://{}/v1/runs/{run_id}/budget", b.address))
            .json(&json!({"raise": {"maxToolCalls": 5}}))
            .send()
            .await
            .expect("sent")
            .status()
            .as_u16()
    };
    let (first, second) = tokio::join!(raise(), raise());
    let mut statuses = [first, second];
    statuses.sort_unstable();
    assert_eq!(statuses, [202, 409], "exactly one raise takes the run");
    let run = run_on_when(&client, &b, &run_id, "completed").await;
    assert_eq!(
        run["result"]["final_report"]["content"],
        "Raised and finished on B."
    );
    assert_eq!(
        tool_reply(&llm, "call-2"),
        "second",
        "the second call ran on B"
    );
    let events = replayed_on(&client, &b, &run_id).await;
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| **k == "run.budget_exceeded")
            .count(),
        1
    );
    assert_eq!(kinds(&events).last(), Some(&"run.finished"));
}

impl Server {
    /// A 2026-07-28 MCP request with the Tasks extension declared, as `key`.
    async fn mcp(&self, key: &str, method: &str, name: &str, mut params: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        });
        let response = self
            .client
            .post(format!("{}/mcp", self.address))
            .bearer_auth(key)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .header("mcp-name", name)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .expect("sent");
        response.json().await.expect("json")
    }

    async fn mcp_task_when(&self, key: &str, task_id: &str, status: &str) -> Value {
        let mut last = Value::Null;
        for _ in 0..100 {
            let got = self
                .mcp(key, "tasks/get", task_id, json!({"taskId": task_id}))
                .await;
            last = got["result"].clone();
            if last["status"] == status {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("task never {status}: {last}");
    }
}

#[tokio::test]
async fn an_mcp_task_waiting_for_approval_is_input_required_and_tasks_update_approves_it() {
    let dir = tempfile::tempdir().expect("dir");
    let llm = MockLlm::start().await;
    let server = serve(dir.path(), &llm).await;
    llm.push(Reply::tool_calls(vec![echo_call("call-1", "hi")]));
    llm.push(Reply::text("It said hi."));
    let created = server
        .mcp(
            ALICE,
            "tools/call",
            "approver",
            json!({"name": "approver", "arguments": {"prompt": "echo hi"}}),
        )
        .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_string();
    let waiting = server
        .mcp_task_when(ALICE, &task_id, "input_required")
        .await;
    let request = &waiting["inputRequests"]["call-1"];
    assert_eq!(request["method"], "elicitation/create", "{waiting}");
    // Another user cannot see the task.
    let hidden = server
        .mcp(BOB, "tasks/get", &task_id, json!({"taskId": task_id}))
        .await;
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
    let ack = server
        .mcp(
            ALICE,
            "tasks/update",
            &task_id,
            json!({"taskId": task_id, "inputResponses": {
                "call-1": {"action": "accept", "content": {"decision": "approve"}}
            }}),
        )
        .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = server.mcp_task_when(ALICE, &task_id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "It said hi.");
    assert_eq!(tool_reply(&llm, "call-1"), "hi");
    server.stop().await;
}
