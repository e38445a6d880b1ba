//! MCP 2026-07-28 `tools/call` at `/mcp` beyond the basics (SPEC §15): progress notifications
//! with the caller's `progressToken` (on a plain call's SSE stream, and on a 2025-11-25 task's
//! `tasks/result` stream), the -32021 Missing Required Client Capability error for an agent that
//! only a task can serve (one asking for approvals), and the `Mcp-Param-*` header checks an
//! agent's `x-mcp-header` input properties ask for.

use base64::Engine;
use serde_json::{Value, json};

use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

const VERSION: &str = "2026-07-28";
const KEY: &str = "calls-key";
const TASKS: &str = "io.modelcontextprotocol/tasks";
const ECHOER: &str = "---\ndescription: Echoes\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\n---\nYou echo.\n";
const APPROVER: &str = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\napprovalTimeout: 10m\n---\nYou echo.\n";
/// An agent whose `region` and `limit` inputs are mirrored into `Mcp-Param-*` headers.
const ROUTED: &str = "---\ndescription: Routed by region\nmodels: llm/upstream-model\nfinalization: text\ninput:\n  format: json\n  schema:\n    type: object\n    properties:\n      region: {type: string, x-mcp-header: Region}\n      limit: {type: integer, x-mcp-header: Limit}\n      text: {type: string}\n    required: [text]\n---\nYou answer.\n";

/// The conformance suite's `slow_compute` fixture: `{seconds, label}` in, any answer out.
const SLOW_COMPUTE: &str = "---\ndescription: Computes slowly\nmodels: llm/upstream-model\nfinalization: text\ninput:\n  format: json\n  schema:\n    type: object\n    properties:\n      seconds: {type: number}\n      label: {type: string}\n---\nYou compute.\n";

async fn app() -> (TestApp, tempfile::TempDir) {
    let agents = [
        ("echoer", ECHOER),
        ("approver", APPROVER),
        ("routed", ROUTED),
    ];
    app_with(true, &agents).await
}

/// An app serving `agents` (name, file text) beside the test MCP server's tools; keyless when
/// `keyed` is false (loopback hosts only), as the conformance suite, which sends no key, needs.
async fn app_with(keyed: bool, agents: &[(&str, &str)]) -> (TestApp, tempfile::TempDir) {
    let extra = tempfile::tempdir().expect("agents dir");
    for (name, text) in agents {
        std::fs::write(extra.path().join(format!("{name}.ai")), text).expect("agent file");
    }
    let extra_path = extra.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(extra_path));
        if keyed {
            config["auth"] = json!({"keys": [{"key": KEY, "userId": "alice"}]});
        }
    })
    .await;
    (app, extra)
}

fn meta(with_tasks: bool, progress: Option<&str>) -> Value {
    let capabilities = if with_tasks {
        json!({"extensions": {TASKS: {}}})
    } else {
        json!({})
    };
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities
    });
    if let Some(token) = progress {
        meta["progressToken"] = json!(token);
    }
    meta
}

/// A 2026-07-28 `tools/call` of `agent` with the standard headers and `extra` ones; the status
/// and the body's text.
async fn call(
    app: &TestApp,
    agent: &str,
    arguments: Value,
    meta: Value,
    extra: &[(&str, &str)],
) -> (u16, String) {
    let mut request = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth(KEY)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", agent)
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": agent, "arguments": arguments, "_meta": meta}}));
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

/// The JSON messages of an SSE body (or the one JSON body).
fn messages_of(body: &str) -> Vec<Value> {
    let frames: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect();
    if frames.is_empty() {
        serde_json::from_str(body)
            .map(|v| vec![v])
            .unwrap_or_default()
    } else {
        frames
    }
}

fn push_echo(app: &TestApp) {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "test__echo",
        json!({"text": "hi"}).to_string(),
    )]));
    app.llm.push(Reply::text("Echoed hi."));
}

#[tokio::test]
async fn a_call_with_a_progress_token_gets_progress_notifications_then_its_result() {
    let (app, _dir) = app().await;
    push_echo(&app);
    let (status, body) = call(
        &app,
        "echoer",
        json!({"prompt": "echo hi"}),
        meta(false, Some("p-7")),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let messages = messages_of(&body);
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 3, "{body}");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "p-7")
    );
    let numbers: Vec<u64> = progress
        .iter()
        .filter_map(|p| p["params"]["progress"].as_u64())
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    assert!(
        progress
            .iter()
            .any(|p| p["params"]["message"] == "calling test__echo"),
        "{body}"
    );
    let last = messages.last().expect("a result");
    assert_eq!(last["id"], 7, "{body}");
    assert_eq!(last["result"]["resultType"], "complete");
    assert_eq!(last["result"]["content"][0]["text"], "Echoed hi.");

    // Without a token the same call is one JSON answer.
    app.llm.push(Reply::text("plain"));
    let (_, body) = call(
        &app,
        "echoer",
        json!({"prompt": "x"}),
        meta(false, None),
        &[],
    )
    .await;
    let messages = messages_of(&body);
    assert_eq!(messages.len(), 1, "{body}");
    assert_eq!(messages[0]["result"]["content"][0]["text"], "plain");
}

#[tokio::test]
async fn an_agent_asking_for_approvals_is_task_only_and_a_client_without_tasks_gets_32021() {
    let (app, _dir) = app().await;
    let list: Value = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth(KEY)
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/list")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta(false, None)}}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let support = |name: &str| {
        list["result"]["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == name))
            .map(|t| t["execution"]["taskSupport"].clone())
    };
    assert_eq!(support("approver"), Some(json!("required")), "{list}");
    assert_eq!(support("echoer"), Some(json!("optional")), "{list}");

    let (status, body) = call(
        &app,
        "approver",
        json!({"prompt": "echo hi"}),
        meta(false, None),
        &[],
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["error"]["code"], -32021, "{answer}");
    assert!(
        answer["error"]["data"]["requiredCapabilities"]["extensions"][TASKS].is_object(),
        "{answer}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("approver") && m.contains(TASKS)),
        "{answer}"
    );
    // No run was started for the refused call.
    assert!(app.llm.requests().is_empty());

    // Declaring the extension, the same call is a task.
    push_echo(&app);
    let (status, body) = call(
        &app,
        "approver",
        json!({"prompt": "echo hi"}),
        meta(true, None),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["result"]["resultType"], "task", "{answer}");
}

#[tokio::test]
async fn mcp_param_headers_must_match_the_arguments_they_mirror() {
    let (app, _dir) = app().await;
    let arguments = json!({"region": "eu-west", "limit": 42, "text": "hi"});
    let refused = [
        (vec![("mcp-param-limit", "42")], "Mcp-Param-Region"),
        (
            vec![("mcp-param-region", "us-east"), ("mcp-param-limit", "42")],
            "'us-east'",
        ),
        (
            vec![("mcp-param-region", "eu-west"), ("mcp-param-limit", "43")],
            "Mcp-Param-Limit",
        ),
        (
            vec![
                ("mcp-param-region", "=?base64?***?="),
                ("mcp-param-limit", "42"),
            ],
            "base64",
        ),
    ];
    for (headers, named) in refused {
        let (status, body) = call(
            &app,
            "routed",
            arguments.clone(),
            meta(false, None),
            &headers,
        )
        .await;
        assert_eq!(status, 400, "{headers:?}: {body}");
        let answer: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(answer["error"]["code"], -32020, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{headers:?}: {message}");
    }
    assert!(app.llm.requests().is_empty(), "a refused call ran");

    // Matching headers (one plain, one base64, a number written as 42.0) are served.
    let region = format!(
        "=?base64?{}?=",
        base64::engine::general_purpose::STANDARD.encode("eu-west")
    );
    app.llm.push(Reply::text("routed"));
    let headers = [
        ("mcp-param-region", region.as_str()),
        ("mcp-param-limit", "42.0"),
    ];
    let (status, body) = call(&app, "routed", arguments, meta(false, None), &headers).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("routed"), "{body}");
    // A value the body does not carry needs no header.
    app.llm.push(Reply::text("no region"));
    let (status, body) = call(
        &app,
        "routed",
        json!({"text": "hi"}),
        meta(false, None),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_2025_task_result_with_a_progress_token_streams_the_runs_progress() {
    let (app, _dir) = app().await;
    // The answer comes late, so tasks/result finds the run working.
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "test__echo",
        json!({"text": "hi"}).to_string(),
    )]));
    app.llm.push(
        Reply::text("Echoed hi.").with_first_byte_delay(std::time::Duration::from_millis(800)),
    );
    let post = |message: Value| {
        app.client
            .post(app.url("/mcp"))
            .bearer_auth(KEY)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&message)
            .send()
    };
    let created: Value = post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echoer", "arguments": {"prompt": "echo hi"}, "task": {"ttl": 60000}}}))
    .await
    .expect("sent")
    .json()
    .await
    .expect("json");
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_string();
    let body = post(json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result",
        "params": {"taskId": task_id, "_meta": {"progressToken": 99}}}))
    .await
    .expect("sent")
    .text()
    .await
    .expect("body");
    let messages = messages_of(&body);
    let last = messages.last().expect("result");
    assert_eq!(last["result"]["content"][0]["text"], "Echoed hi.", "{body}");
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(
        progress
            .iter()
            .any(|p| p["params"]["message"] == "calling test__echo"),
        "{body}"
    );
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == 99));
    assert_eq!(
        progress[0]["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
}

/// The 2026-07-28 scenarios of the conformance suite (0.2.0-alpha.12, `.ci/node-mcp-next`)
/// that a server whose tools are agents can pass whole. The suite names its fixtures: here
/// `failing_job` is an agent asking for approvals (so task-only) and `slow_compute` one taking
/// `{seconds, label}`. The others need the suite's own diagnostic tools (`greet`,
/// `test_logging_tool`, …) or prompts and resources, which agentd does not serve (README).
const CONFORMANCE_2026: [&str; 8] = [
    "tools-list",
    "http-header-validation",
    "http-custom-header-server-validation",
    "dns-rebinding-protection",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-required-task-error",
    "server-stateless",
];

/// `server-stateless` checks that need the suite's diagnostic tools, reported "Not testable".
const NEEDS_DIAGNOSTIC_TOOLS: [&str; 4] = [
    "sep-2575-server-rejects-undeclared-capability",
    "sep-2575-missing-capability-http-400",
    "sep-2575-http-server-no-independent-requests-on-stream",
    "sep-2575-server-no-log-without-loglevel",
];

/// The ids of the checks a suite's output reports as failed.
fn failed_checks(output: &str) -> Vec<String> {
    output
        .lines()
        .filter(|line| line.contains("] FAILURE"))
        .filter_map(|line| line.split('[').nth(1))
        .filter_map(|rest| rest.split(']').next())
        .map(|id| id.trim().to_string())
        .collect()
}

#[tokio::test]
async fn the_2026_conformance_scenarios_pass() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let node = root.join(".ci/node/node_modules/.bin/node");
    let suite =
        root.join(".ci/node-mcp-next/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        suite.exists(),
        "{} is missing: run scripts/test, which installs @modelcontextprotocol/conformance@0.2.0-alpha.12 there",
        suite.display()
    );
    // The suite calls the first tool listed with no arguments: `answer` takes none.
    let agents = [
        ("answer", SLOW_COMPUTE),
        ("echoer", ECHOER),
        ("routed", ROUTED),
        ("failing_job", APPROVER),
        ("slow_compute", SLOW_COMPUTE),
    ];
    let (app, _dir) = app_with(false, &agents).await;
    let url = app.url("/mcp");
    let suite = suite.display().to_string();
    for scenario in CONFORMANCE_2026 {
        let output = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            tokio::process::Command::new(&node)
                .args([&suite, "server", "--url", &url, "--scenario", scenario])
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("the suite ends within 2 minutes")
        .expect("the suite runs");
        let text = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        let text = crate::mcp_headend::without_ansi_colours(&text);
        let failed: Vec<String> = failed_checks(&text)
            .into_iter()
            .filter(|id| {
                scenario != "server-stateless" || !NEEDS_DIAGNOSTIC_TOOLS.contains(&id.as_str())
            })
            .collect();
        assert!(
            failed.is_empty() && text.contains("Passed:"),
            "{scenario}: {failed:?}\n{text}"
        );
    }
}
