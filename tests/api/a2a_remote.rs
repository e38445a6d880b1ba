//! agentd calling another agentd process as a remote A2A agent (`a2aAgents` → `a2a__<name>`):
//! the card describes the tool, the call streams, the remote's progress arrives as progress
//! events, its answer is the tool result, its task and cost are in the accounting entry; a
//! remote that fails is a tool failure the model sees, and a call that times out cancels the
//! remote task.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::binary::{Served, command, project, serve};
use crate::support::mock_llm::{MockLlm, Reply, ToolCall};
use crate::support::numbered_frames;

const EXPERT_AGENT: &str = "---\ndescription: Knows the answer to everything\nmodels: llm/upstream-model\nfinalization: text\n---\nYou know.\n";
const ASKER_AGENT: &str = "---\ndescription: Asks the expert\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [a2a__expert]\n---\nYou ask.\n";
const IMPATIENT_AGENT: &str = "---\ndescription: Asks the slow expert, briefly\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntoolTimeout: 2s\ntools: [a2a__slow]\n---\nYou ask.\n";

/// The remote agentd: a real process with the `expert` and `slow` agents behind a key.
async fn remote_agentd(llm: &MockLlm) -> (Served, tempfile::TempDir) {
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "auth": {"keys": [{"key": "remote-key", "admin": true}]},
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite::memory:"},
    }));
    std::fs::write(dir.path().join("agents/expert.ai"), EXPERT_AGENT).expect("expert");
    std::fs::write(dir.path().join("agents/slow.ai"), EXPERT_AGENT).expect("slow");
    let mut agentd = command(dir.path());
    agentd.args(["serve", "--config", "agentd.json"]);
    (serve(agentd, |_| {}).await, dir)
}

/// The local agentd, a process too, whose agents call the remote ones; the remote key comes
/// from `${REMOTE_AGENTD_KEY}` in its environment.
async fn local_agentd(remote: &str, llm: &MockLlm) -> (Served, tempfile::TempDir) {
    let headers = json!({"Authorization": "Bearer ${REMOTE_AGENTD_KEY}"});
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite::memory:"},
        "a2aAgents": {
            "expert": {"url": format!("http://{remote}/a2a/expert"), "headers": headers},
            "slow": {"url": format!("http://{remote}/a2a/slow"), "headers": headers},
        },
    }));
    std::fs::write(dir.path().join("agents/asker.ai"), ASKER_AGENT).expect("asker");
    std::fs::write(dir.path().join("agents/impatient.ai"), IMPATIENT_AGENT).expect("impatient");
    let mut agentd = command(dir.path());
    agentd
        .env("REMOTE_AGENTD_KEY", "remote-key")
        .args(["serve", "--config", "agentd.json"]);
    (serve(agentd, |_| {}).await, dir)
}

async fn run_events(local: &str, agent: &str) -> Vec<(i64, String, Value)> {
    let response = reqwest::Client::new()
        .post(format!("http://{local}/v1/agents/{agent}/runs"))
        .json(&json!({"prompt": "ask the expert", "stream": true}))
        .send()
        .await
        .expect("run");
    assert_eq!(response.status(), 200);
    numbered_frames(&response.text().await.expect("events"))
}

fn ask(tool: &str) -> Reply {
    Reply::tool_calls(vec![ToolCall::new(
        "ask-1",
        tool,
        json!({"prompt": "What is the answer?"}).to_string(),
    )])
}

async fn remote_runs(remote: &str, agent: &str) -> Value {
    reqwest::Client::new()
        .get(format!("http://{remote}/v1/runs?agent={agent}"))
        .bearer_auth("remote-key")
        .send()
        .await
        .expect("remote runs")
        .json()
        .await
        .expect("json")
}

#[tokio::test]
async fn an_agent_calls_another_agentd_process_as_a_remote_a2a_agent() {
    let remote_llm = MockLlm::start().await;
    remote_llm.push(Reply::text("The answer is 42."));
    let (remote, _remote_dir) = remote_agentd(&remote_llm).await;
    let llm = MockLlm::start().await;
    let (local, _local_dir) = local_agentd(&remote.address, &llm).await;
    llm.push(ask("a2a__expert"));
    llm.push(Reply::text("The expert says 42."));

    let events = run_events(&local.address, "asker").await;
    // The tool the model saw was described from the remote card.
    let offered = llm.body(0).to_string();
    assert!(offered.contains("a2a__expert") && offered.contains("Knows the answer to everything"));
    let progress: Vec<&Value> = events
        .iter()
        .filter(|(_, kind, data)| kind == "progress" && data["agent"] == "a2a__expert")
        .map(|(_, _, data)| data)
        .collect();
    assert!(
        progress.iter().any(|p| p["message"] == "turn 1"),
        "the remote's progress is forwarded: {events:?}"
    );
    let finished = events
        .iter()
        .find(|(_, kind, _)| kind == "tool.finished")
        .map(|(_, _, data)| data.clone())
        .expect("tool.finished");
    assert_eq!(finished["status"], "ok", "{finished}");
    assert_eq!(finished["output"], "The answer is 42.");
    let accounting = events
        .iter()
        .find(|(_, kind, data)| kind == "accounting" && data["command"] == "a2a__expert")
        .map(|(_, _, data)| data.clone())
        .expect("the call's accounting entry");
    assert!(
        accounting["details"]["remoteTaskId"].is_string(),
        "{accounting}"
    );
    assert!(
        accounting["details"]["remoteCostUsd"].is_number(),
        "{accounting}"
    );
    let (_, _, last) = events.last().expect("events");
    assert_eq!(last["status"], "completed");
    // The model received the remote answer as the tool result.
    assert!(llm.body(1).to_string().contains("The answer is 42."));

    let remote_runs = remote_runs(&remote.address, "expert").await;
    assert_eq!(
        remote_runs["data"][0]["status"], "completed",
        "{remote_runs}"
    );
}

#[tokio::test]
async fn a_failing_remote_is_a_tool_failure_the_model_sees() {
    let remote_llm = MockLlm::start().await;
    for _ in 0..8 {
        remote_llm.push(Reply::status(
            400,
            json!({"error": {"message": "bad request upstream"}}),
        ));
    }
    let (remote, _remote_dir) = remote_agentd(&remote_llm).await;
    let llm = MockLlm::start().await;
    let (local, _local_dir) = local_agentd(&remote.address, &llm).await;
    llm.push(ask("a2a__expert"));
    llm.push(Reply::text("The expert failed."));
    let events = run_events(&local.address, "asker").await;
    let finished = events
        .iter()
        .find(|(_, kind, _)| kind == "tool.finished")
        .map(|(_, _, data)| data.clone())
        .expect("tool.finished");
    assert_eq!(finished["status"], "failed", "{finished}");
    assert!(
        finished["error"]
            .as_str()
            .unwrap_or_default()
            .contains("the remote task failed"),
        "{finished}"
    );
    assert!(llm.body(1).to_string().contains("the remote task failed"));
}

#[tokio::test]
async fn a_timed_out_call_is_a_tool_failure_and_cancels_the_remote_task() {
    let remote_llm = MockLlm::start().await;
    remote_llm.push(Reply::hang());
    let (remote, _remote_dir) = remote_agentd(&remote_llm).await;
    let llm = MockLlm::start().await;
    let (local, _local_dir) = local_agentd(&remote.address, &llm).await;
    llm.push(ask("a2a__slow"));
    llm.push(Reply::text("The expert was too slow."));
    let events = run_events(&local.address, "impatient").await;
    let finished = events
        .iter()
        .find(|(_, kind, _)| kind == "tool.finished")
        .map(|(_, _, data)| data.clone())
        .expect("tool.finished");
    assert_eq!(finished["status"], "failed");
    assert_eq!(finished["error"], "timeout");
    let mut status = Value::Null;
    for _ in 0..100 {
        status = remote_runs(&remote.address, "slow").await["data"][0]["status"].clone();
        if status == "cancelled" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        status, "cancelled",
        "the abandoned remote task is cancelled"
    );
}
