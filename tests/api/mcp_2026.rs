//! MCP 2026-07-28 at `/mcp` (SPEC §15): requests with their version in `_meta` and no
//! `initialize`, `server/discover`, `resultType` and cache hints, the `Mcp-Method` / `Mcp-Name`
//! checks, and the Tasks extension over durable runs (`tools/call` answered with a task,
//! `tasks/get` until completed, `tasks/cancel`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_headend::app_with_agents;
use crate::support::TestApp;
use crate::support::mock_llm::Reply;

const VERSION: &str = "2026-07-28";

fn meta(with_tasks: bool) -> Value {
    let mut capabilities = json!({});
    if with_tasks {
        capabilities = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    }
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities
    })
}

/// POSTs `method` with `params` (and `_meta`) and the headers the transport asks for.
async fn call(
    app: &TestApp,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    with_tasks: bool,
) -> (u16, Value) {
    params["_meta"] = meta(with_tasks);
    let mut request = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth("admin-key")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", method)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

#[tokio::test]
async fn discover_and_tools_list_need_no_initialize_and_carry_result_type_and_cache_hints() {
    let (app, _dir) = app_with_agents().await;
    let (status, discover) = call(&app, "server/discover", None, json!({}), false).await;
    assert_eq!(status, 200, "{discover}");
    let result = &discover["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"][0], VERSION);
    assert!(result["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object());
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "agentd"
    );
    let (status, list) = call(&app, "tools/list", None, json!({}), false).await;
    assert_eq!(status, 200, "{list}");
    let result = &list["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["cacheScope"], "private");
    assert!(result["ttlMs"].as_u64().is_some());
    assert!(
        result["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "sum"))
    );
}

#[tokio::test]
async fn mismatched_or_missing_headers_and_unknown_versions_are_refused_with_400() {
    let (app, _dir) = app_with_agents().await;
    let (status, answer) = call(
        &app,
        "tools/call",
        Some("other"),
        json!({"name": "chat", "arguments": {"prompt": "hi"}}),
        false,
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], -32020);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Mcp-Name")
    );
    let (status, answer) = call(
        &app,
        "tools/call",
        None,
        json!({"name": "chat", "arguments": {"prompt": "hi"}}),
        false,
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], -32020);
    let response = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth("admin-key")
        .header("mcp-method", "tools/list")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01"}}}))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status().as_u16(), 400);
    let answer: Value = response.json().await.expect("json");
    assert_eq!(answer["error"]["code"], -32022);
    assert_eq!(answer["error"]["data"]["requested"], "1900-01-01");
}

#[tokio::test]
async fn a_plain_call_answers_the_report_and_a_tasks_client_gets_a_task_it_polls_to_completion() {
    let (app, _dir) = app_with_agents().await;
    app.llm.push(Reply::text("plain answer"));
    let (status, answer) = call(
        &app,
        "tools/call",
        Some("chat"),
        json!({"name": "chat", "arguments": {"prompt": "hi"}}),
        false,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete");
    assert_eq!(answer["result"]["content"][0]["text"], "plain answer");

    app.llm.push(Reply::text("task answer"));
    let (_, created) = call(
        &app,
        "tools/call",
        Some("chat"),
        json!({"name": "chat", "arguments": {"prompt": "hi"}}),
        true,
    )
    .await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    let task_id = task["taskId"].as_str().expect("taskId").to_string();
    let mut last = Value::Null;
    for _ in 0..100 {
        let (_, got) = call(
            &app,
            "tasks/get",
            Some(&task_id),
            json!({"taskId": task_id}),
            true,
        )
        .await;
        last = got["result"].clone();
        if last["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["resultType"], "complete");
    assert_eq!(last["result"]["content"][0]["text"], "task answer");
    // The task is the run: the runs API knows it.
    let run: Value = app
        .client
        .get(app.url(&format!("/v1/runs/{task_id}")))
        .bearer_auth("admin-key")
        .send()
        .await
        .expect("run")
        .json()
        .await
        .expect("json");
    assert_eq!(run["status"], "completed", "{run}");
}

#[tokio::test]
async fn a_task_is_cancelled_with_tasks_cancel_and_unknown_tasks_are_invalid_params() {
    let (app, _dir) = app_with_agents().await;
    app.llm.push(Reply::hang());
    let (_, created) = call(
        &app,
        "tools/call",
        Some("slow"),
        json!({"name": "slow", "arguments": {"prompt": "wait"}}),
        true,
    )
    .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_string();
    let (status, ack) = call(
        &app,
        "tasks/cancel",
        Some(&task_id),
        json!({"taskId": task_id}),
        true,
    )
    .await;
    assert_eq!(status, 200, "{ack}");
    assert_eq!(ack["result"]["resultType"], "complete");
    let mut last = Value::Null;
    for _ in 0..100 {
        let (_, got) = call(
            &app,
            "tasks/get",
            Some(&task_id),
            json!({"taskId": task_id}),
            true,
        )
        .await;
        last = got["result"].clone();
        if last["status"] == "cancelled" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["status"], "cancelled", "{last}");
    let (_, missing) = call(
        &app,
        "tasks/get",
        Some("nope"),
        json!({"taskId": "nope"}),
        true,
    )
    .await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
}
