//! MCP 2026-07-28 `subscriptions/listen` with the Tasks extension's `taskIds` (SPEC §15): a
//! client subscribed to its task hears each change of its state (`notifications/tasks`, the
//! `DetailedTask` `tasks/get` would answer) as it happens, an approval's `input_required` and
//! the `tasks/update` that answers it included, and the subscription ends with its result when
//! the task has. Tasks the key may not see are left out of the acknowledgement; a client without
//! the extension, or without a filter, is refused.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

const VERSION: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
const ALICE: &str = "alice-key";
const BOB: &str = "bob-key";
const APPROVER: &str = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\napprovalTimeout: 10m\n---\nYou echo.\n";

async fn app() -> (TestApp, tempfile::TempDir) {
    let extra = tempfile::tempdir().expect("agents dir");
    std::fs::write(extra.path().join("approver.ai"), APPROVER).expect("agent file");
    let extra_path = extra.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(extra_path));
        config["auth"] = json!({"keys": [
            {"key": ALICE, "userId": "alice"},
            {"key": BOB, "userId": "bob"},
        ]});
    })
    .await;
    (app, extra)
}

fn meta(with_tasks: bool) -> Value {
    let extensions = if with_tasks {
        json!({TASKS: {}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions}
    })
}

/// A 2026-07-28 request (`name` is the `Mcp-Name` its method carries, if any).
async fn post(
    app: &TestApp,
    key: &str,
    id: u64,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    with_tasks: bool,
) -> reqwest::Response {
    params["_meta"] = meta(with_tasks);
    let mut request = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    request
        .json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .send()
        .await
        .expect("sent")
}

/// Reads the JSON messages of an SSE body as they arrive.
struct Messages {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Messages {
    fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200, "a stream starts");
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert!(kind.starts_with("text/event-stream"), "{kind}");
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next message, `None` when the stream ended (within 20 s).
    async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let raw: String = self.buffer.drain(..end + 2).collect();
                    let data = raw.lines().find_map(|l| l.strip_prefix("data:"));
                    if let Some(message) = data.and_then(|d| serde_json::from_str(d.trim()).ok()) {
                        return Some(message);
                    }
                    continue;
                }
                let chunk = self.body.next().await?.ok()?;
                self.buffer.push_str(&String::from_utf8_lossy(&chunk));
            }
        })
        .await
        .expect("a message within 20 s")
    }

    /// The next `notifications/tasks`' status, its params kept.
    async fn next_task(&mut self) -> Value {
        let message = self.next().await.expect("a notification");
        assert_eq!(message["method"], "notifications/tasks", "{message}");
        message["params"].clone()
    }
}

async fn start_task(app: &TestApp) -> String {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "test__echo",
        json!({"text": "hi"}).to_string(),
    )]));
    app.llm.push(Reply::text("It said hi."));
    let created: Value = post(
        app,
        ALICE,
        1,
        "tools/call",
        Some("approver"),
        json!({"name": "approver", "arguments": {"prompt": "echo hi"}}),
        true,
    )
    .await
    .json()
    .await
    .expect("json");
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_string()
}

#[tokio::test]
async fn a_subscriber_hears_its_task_wait_for_approval_resume_and_complete_then_the_end() {
    let (app, _dir) = app().await;
    let task = start_task(&app).await;
    let response = post(
        &app,
        ALICE,
        9,
        "subscriptions/listen",
        None,
        json!({"notifications": {"taskIds": [task, "no-such-task", task]}}),
        true,
    )
    .await;
    let mut messages = Messages::new(response);
    let ack = messages.next().await.expect("acknowledged");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], 9, "{ack}");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"taskIds": [task]}),
        "{ack}"
    );

    // Its state now, then each change: the wait for approval with the call to decide.
    let mut state = messages.next_task().await;
    assert_eq!(state["taskId"], task.as_str());
    assert_eq!(state["_meta"][SUBSCRIPTION_ID], 9, "{state}");
    if state["status"] == "working" {
        state = messages.next_task().await;
    }
    assert_eq!(state["status"], "input_required", "{state}");
    assert_eq!(
        state["inputRequests"]["call-1"]["method"], "elicitation/create",
        "{state}"
    );
    let ack: Value = post(
        &app,
        ALICE,
        2,
        "tasks/update",
        Some(&task),
        json!({"taskId": task, "inputResponses": {
            "call-1": {"action": "accept", "content": {"decision": "approve"}}
        }}),
        true,
    )
    .await
    .json()
    .await
    .expect("json");
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let mut state = messages.next_task().await;
    if state["status"] == "working" {
        assert!(state.get("inputRequests").is_none(), "{state}");
        state = messages.next_task().await;
    }
    assert_eq!(state["status"], "completed", "{state}");
    assert_eq!(
        state["result"]["content"][0]["text"], "It said hi.",
        "{state}"
    );
    let end = messages.next().await.expect("the subscription's result");
    assert_eq!(end["id"], 9, "{end}");
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    assert_eq!(end["result"]["_meta"][SUBSCRIPTION_ID], 9, "{end}");
    assert!(messages.next().await.is_none(), "the stream ends");
}

#[tokio::test]
async fn another_users_task_is_left_out_and_bad_subscriptions_are_refused() {
    let (app, _dir) = app().await;
    let task = start_task(&app).await;
    // Bob may not see Alice's task: acknowledged without it, and ended at once.
    let mut messages = Messages::new(
        post(
            &app,
            BOB,
            3,
            "subscriptions/listen",
            None,
            json!({"notifications": {"taskIds": [task]}}),
            true,
        )
        .await,
    );
    let ack = messages.next().await.expect("acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"taskIds": []}),
        "{ack}"
    );
    let end = messages.next().await.expect("ended");
    assert_eq!(end["id"], 3, "{end}");
    assert!(messages.next().await.is_none());

    // Only notifications agentd does not send: acknowledged empty.
    let mut messages = Messages::new(
        post(
            &app,
            ALICE,
            4,
            "subscriptions/listen",
            None,
            json!({"notifications": {"toolsListChanged": true}}),
            false,
        )
        .await,
    );
    let ack = messages.next().await.expect("acknowledged");
    assert_eq!(ack["params"]["notifications"], json!({}), "{ack}");

    // Task ids without the extension: -32021 naming it.
    let refused: Value = post(
        &app,
        ALICE,
        5,
        "subscriptions/listen",
        None,
        json!({"notifications": {"taskIds": [task]}}),
        false,
    )
    .await
    .json()
    .await
    .expect("json");
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"][TASKS],
        json!({}),
        "{refused}"
    );
    // No filter, or a bad one: -32602 naming the field.
    for (params, field) in [
        (json!({}), "params.notifications"),
        (
            json!({"notifications": {"taskIds": "x"}}),
            "params.notifications.taskIds",
        ),
    ] {
        let refused: Value = post(&app, ALICE, 6, "subscriptions/listen", None, params, true)
            .await
            .json()
            .await
            .expect("json");
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(field), "{refused}");
    }
}
