//! MCP 2025-11-25 Tasks (SEP-1686) at `/mcp` with the MCP Python SDK's experimental task client
//! (`mcp` 1.30.0 in `.ci/venv-mcp-tasks`, tests/sdk/mcp_tasks.py): an agent run as a task
//! polled to `completed` and read with `tasks/result`; an approval as `input_required`,
//! answered through the `elicitation/create` that `tasks/result` sends; `tasks/cancel`, and a
//! second cancel refused. Plain JSON-RPC shows the refusals by name.

use serde_json::{Value, json};

use crate::mcp_headend::SLOW_AGENT;
use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with_agents_and};

/// The last `mcp` release with the experimental Tasks client (2.x speaks 2026-07-28).
const MCP_TASKS_SDK: &str = "mcp==1.30.0";
const APPROVER: &str = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\napprovalTimeout: 10m\n---\nYou echo.\n";
const KEY: &str = "tasks-key";

async fn app() -> (TestApp, tempfile::TempDir) {
    let agents = [("approver.ai", APPROVER), ("slow.ai", SLOW_AGENT)];
    spawn_app_with_agents_and(&agents, |config| {
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
        config["auth"] = json!({"keys": [{"key": KEY, "userId": "alice"}]});
    })
    .await
}

/// The script's `name: value` lines for `scenario`.
async fn run_client(app: &TestApp, scenario: &str) -> String {
    let python = tokio::task::spawn_blocking(|| {
        crate::support::python_tool::python_with("venv-mcp-tasks", &["mcp"], &[MCP_TASKS_SDK])
    })
    .await
    .expect("venv");
    let args = [app.address.clone(), KEY.to_string(), scenario.to_string()];
    crate::support::python_tool::run_sdk_script(python, "mcp_tasks.py", &args).await
}

#[tokio::test]
async fn the_python_sdk_runs_an_agent_as_a_task_and_reads_its_result() {
    let (app, _dir) = app().await;
    app.llm.push(Reply::text("Hello from a task."));
    let out = run_client(&app, "complete").await;
    assert!(out.contains("created: working"), "{out}");
    assert!(out.contains("polled: completed"), "{out}");
    assert!(out.contains("result: Hello from a task."), "{out}");
    assert!(out.contains("is error: False"), "{out}");
}

#[tokio::test]
async fn an_approval_is_input_required_and_answered_through_the_result_streams_elicitation() {
    let (app, _dir) = app().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "test__echo",
        json!({"text": "hi"}).to_string(),
    )]));
    app.llm.push(Reply::text("Echoed hi."));
    let out = run_client(&app, "approve").await;
    assert!(out.contains("polled: input_required"), "{out}");
    assert!(out.contains("elicitations: 1"), "{out}");
    assert!(out.contains("task id matches: True"), "{out}");
    assert!(out.contains("result: Echoed hi."), "{out}");
    assert!(out.contains("final: completed"), "{out}");
    // The echo ran: its result reached the model's second turn.
    let requests = app.llm.requests();
    assert!(
        requests
            .last()
            .is_some_and(|r| r.to_string().contains("hi")),
        "{requests:?}"
    );
}

#[tokio::test]
async fn a_task_is_cancelled_once_and_a_second_cancel_is_refused() {
    let (app, _dir) = app().await;
    // The model never answers, so the task is still working when the cancel comes (with the
    // default reply the run could end first).
    app.llm.push(Reply::hang());
    let out = run_client(&app, "cancel").await;
    assert!(out.contains("working: working"), "{out}");
    assert!(out.contains("cancel answered: True"), "{out}");
    assert!(out.contains("final: cancelled"), "{out}");
    assert!(
        out.contains("second cancel: refused") && out.contains("already cancelled"),
        "{out}"
    );
}

async fn rpc(app: &TestApp, message: Value) -> Value {
    app.client
        .post(app.url("/mcp"))
        .bearer_auth(KEY)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&message)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json")
}

#[tokio::test]
async fn task_requests_name_what_is_wrong() {
    let (app, _dir) = app().await;
    let unknown = rpc(
        &app,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "nope"}}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no task `nope`")),
        "{unknown}"
    );
    let missing = rpc(
        &app,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {}}),
    )
    .await;
    assert_eq!(
        missing["error"]["message"], "params.taskId: missing",
        "{missing}"
    );
    let no_agent = rpc(
        &app,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "ghost", "arguments": {"prompt": "x"}, "task": {"ttl": 1000}}}),
    )
    .await;
    assert!(
        no_agent["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no agent named `ghost`")),
        "{no_agent}"
    );
}
