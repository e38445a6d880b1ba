//! The MCP headend at `/mcp` (SPEC §9.3) with clients no one here wrote: the official MCP Python
//! SDK (tests/sdk/mcp_client.py) lists and calls agents with progress and cancellation; plain
//! JSON-RPC POSTs show the stateless behaviour (no `initialize`, no session) and the auth.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app_with};

/// The MCP SDK the tests use, pinned (installed by `.ci/run`).
pub(crate) const MCP_SDK: &str = "mcp==2.3.0";

/// An agent whose model never answers, for cancellation.
pub(crate) const SLOW_AGENT: &str = "---\ndescription: Never finishes\nmodels: llm/upstream-model\nfinalization: text\n---\nYou wait.\n";
/// An agent with a structured input and a JSON output.
const JSON_AGENT: &str = "---\ndescription: Sums numbers\nmodels: llm/upstream-model\ntransport: native\ninput:\n  format: json\n  schema:\n    type: object\n    properties:\n      numbers: {type: array, items: {type: number}}\n    required: [numbers]\noutput:\n  format: json\n  schema:\n    type: object\n    properties:\n      sum: {type: number}\n    required: [sum]\n---\nYou add.\n";

/// `.ci/venv/bin/python` with `package` importable as `module`, installed once if missing.
pub(crate) fn venv_python(module: &str, package: &str) -> PathBuf {
    crate::support::python_tool::python_with("venv", &[module], &[package])
}

/// Runs `tests/sdk/SCRIPT` with the venv's Python; its stdout once it succeeded.
pub(crate) async fn run_python(
    module: &str,
    package: &str,
    script: &str,
    args: &[String],
) -> String {
    let (module, package) = (module.to_string(), package.to_string());
    let python = tokio::task::spawn_blocking(move || venv_python(&module, &package))
        .await
        .expect("venv");
    crate::support::python_tool::run_sdk_script(python, script, args).await
}

/// An app with an admin key, a key limited to `chat`, and the slow and JSON agents.
pub(crate) async fn app_with_agents() -> (TestApp, tempfile::TempDir) {
    let extra = tempfile::tempdir().expect("agents dir");
    std::fs::write(extra.path().join("slow.ai"), SLOW_AGENT).expect("slow agent");
    std::fs::write(extra.path().join("sum.ai"), JSON_AGENT).expect("sum agent");
    let extra_path = extra.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["agents"]
            .as_array_mut()
            .expect("agents list")
            .push(json!(extra_path));
        config["auth"] = json!({"keys": [
            {"key": "admin-key", "admin": true},
            {"key": "chat-key", "userId": "alice", "agents": ["chat"]}
        ]});
    })
    .await;
    (app, extra)
}

/// One JSON-RPC message POSTed to `/mcp` with `key`, answered as JSON.
async fn rpc(app: &TestApp, key: Option<&str>, message: Value) -> reqwest::Response {
    let mut request = app
        .client
        .post(app.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&message);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.expect("request sent")
}

/// The JSON-RPC answer of a POST, whether it came as JSON or as the last SSE `data:` frame.
async fn answer(response: reqwest::Response) -> Value {
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = response.text().await.expect("body");
    let text = if is_sse {
        body.lines()
            .rev()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
            .find(|data| data.contains("\"id\""))
            .unwrap_or_default()
            .to_string()
    } else {
        body
    };
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn the_official_python_sdk_lists_calls_follows_and_cancels_agents() {
    let (app, _agents) = app_with_agents().await;
    app.llm.push(Reply::text("Hello from the mock upstream!"));
    app.llm.push(Reply::hang());
    let args = [app.address.clone(), "admin-key".to_string()];
    let stdout = run_python("mcp", MCP_SDK, "mcp_client.py", &args).await;
    for check in [
        "tools/list ok",
        "tools/call ok",
        "progress ok",
        "unknown agent ok",
        "bad arguments ok",
        "cancel sent ok",
    ] {
        assert!(stdout.lines().any(|l| l == check), "{check}: {stdout}");
    }
    // The abandoned call's run ends cancelled.
    let mut status = Value::Null;
    for _ in 0..100 {
        let runs: Value = app
            .client
            .get(app.url("/v1/runs?agent=slow"))
            .bearer_auth("admin-key")
            .send()
            .await
            .expect("runs")
            .json()
            .await
            .expect("json");
        status = runs["data"][0]["status"].clone();
        if status == "cancelled" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, "cancelled");
}

#[tokio::test]
async fn stateless_requests_need_no_initialize_and_list_only_the_keys_agents() {
    let (app, _agents) = app_with_agents().await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let response = rpc(&app, None, list.clone()).await;
    assert_eq!(response.status(), 401, "no key");
    let response = rpc(&app, Some("chat-key"), list.clone()).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers().get("mcp-session-id").is_none(),
        "no session"
    );
    let tools = answer(response).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["chat"], "only the agents this key may use");

    let tools = answer(rpc(&app, Some("admin-key"), list).await).await;
    let sum = tools["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "sum")
        .expect("sum listed")
        .clone();
    assert_eq!(sum["inputSchema"]["required"], json!(["numbers"]));
    assert_eq!(sum["outputSchema"]["required"], json!(["sum"]));

    // A plain HTTP client that names no Accept is answered; JSON that is no MCP message is a
    // JSON-RPC Invalid Request, and a body that is no JSON a 4xx in agentd's error shape.
    let plain = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth("chat-key")
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(plain.status(), 200);
    assert_eq!(answer(plain).await["result"]["tools"][0]["name"], "chat");
    let not_mcp = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth("chat-key")
        .json(&json!({}))
        .send()
        .await
        .expect("sent");
    assert_eq!(answer(not_mcp).await["error"]["code"], -32600);
    let not_json = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth("chat-key")
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .expect("sent");
    assert!(not_json.status().is_client_error());
    let error: Value = not_json.json().await.expect("agentd's JSON error");
    assert!(error["error"]["message"].is_string(), "{error}");

    // A key may not call an agent it may not use: the error names it.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"prompt": "hi"}}});
    let error = answer(rpc(&app, Some("chat-key"), call).await).await;
    assert_eq!(error["error"]["code"], -32602, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("`slow`")
    );
}

#[tokio::test]
async fn a_json_agent_answers_with_structured_content_and_a_failed_run_is_an_error_result() {
    let (app, _agents) = app_with_agents().await;
    app.llm.push(Reply::tool_calls(vec![
        crate::support::mock_llm::ToolCall::new(
            "final",
            "agent__final_report",
            json!({"report_format": "json", "content_json": {"sum": 3}}).to_string(),
        ),
    ]));
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "sum", "arguments": {"numbers": [1, 2]}}});
    let result = answer(rpc(&app, Some("admin-key"), call).await).await;
    assert_eq!(
        result["result"]["structuredContent"],
        json!({"sum": 3}),
        "{result}"
    );
    assert_ne!(result["result"]["isError"], json!(true));
    let sent = app.llm.requests();
    let prompt = sent.last().expect("the model was asked").to_string();
    assert!(
        prompt.contains("numbers"),
        "the arguments reach the agent as JSON"
    );

    for _ in 0..6 {
        app.llm
            .push(Reply::status(500, json!({"error": {"message": "down"}})));
    }
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "chat", "arguments": {"prompt": "hi"}}});
    let result = answer(rpc(&app, Some("admin-key"), call).await).await;
    assert_eq!(result["result"]["isError"], json!(true), "{result}");
}

/// `.ci/node/node_modules/.bin/NAME`, which `.ci/run` installs; a clear failure otherwise.
fn node_tool(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".ci/node/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run .ci/run, or `cd .ci/node && npm install @modelcontextprotocol/inspector@2.12.0 @modelcontextprotocol/conformance@0.1.16 node@22`",
        path.display()
    );
    path
}

async fn run_node_tool(program: &Path, args: &[&str]) -> (bool, String) {
    let output = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new(program)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the tool ends within 3 minutes")
    .expect("the tool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), without_ansi_colours(&text))
}

/// `text` without the terminal colour sequences (`ESC [ … m`) the node tools print.
pub(crate) fn without_ansi_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut in_sequence = false;
    for c in text.chars() {
        match (in_sequence, c) {
            (false, '\u{1b}') => in_sequence = true,
            (true, 'm') => in_sequence = false,
            (true, _) => {}
            (false, c) => plain.push(c),
        }
    }
    plain
}

#[tokio::test]
async fn the_mcp_inspector_cli_lists_and_calls_agents() {
    let inspector = node_tool("mcp-inspector");
    let (app, _agents) = app_with_agents().await;
    app.llm.push(Reply::text("Hello from the mock upstream!"));
    let url = app.url("/mcp");
    let auth = "Authorization: Bearer admin-key";
    let (ok, listed) = run_node_tool(
        &inspector,
        &["--cli", &url, "--header", auth, "--method", "tools/list"],
    )
    .await;
    assert!(ok, "{listed}");
    let listed: Value = serde_json::from_str(&listed).expect("tools as JSON");
    assert!(
        listed["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t["name"] == "chat" && t["description"] == "A helpful chat agent"),
        "{listed}"
    );
    let (ok, called) = run_node_tool(
        &inspector,
        &[
            "--cli",
            &url,
            "--header",
            auth,
            "--method",
            "tools/call",
            "--tool-name",
            "chat",
            "--tool-arg",
            "prompt=Say hello",
        ],
    )
    .await;
    assert!(ok, "{called}");
    let called: Value = serde_json::from_str(&called).expect("result as JSON");
    assert_eq!(
        called["content"][0]["text"],
        "Hello from the mock upstream!"
    );
    let (ok, missing) = run_node_tool(&inspector, &["--cli", &url, "--method", "tools/list"]).await;
    // A 401 makes the inspector look for OAuth, which a CLI run cannot do: it fails for auth.
    assert!(
        !ok && (missing.contains("401") || missing.contains("auth_required")),
        "no key: {missing}"
    );
}

/// The conformance suite's server scenarios that apply to a server offering only tools whose
/// names and behaviour are the agents' (README "agentd for other agents" lists the others and
/// why they do not apply).
const CONFORMANCE_SCENARIOS: [&str; 8] = [
    "server-initialize",
    "ping",
    "tools-list",
    "completion-complete",
    "resources-list",
    "prompts-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

#[tokio::test]
async fn the_mcp_conformance_suite_passes_the_scenarios_of_a_tools_only_server() {
    // The suite needs Node 22 (`fs.globSync`); the npm `node` package provides it under .ci.
    let node = node_tool("node");
    let suite = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".ci/node/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    // Keyless: agentd then serves loopback hosts only, which dns-rebinding-protection checks.
    let app = spawn_app_with(|_| {}).await;
    let url = app.url("/mcp");
    for scenario in CONFORMANCE_SCENARIOS {
        let suite = suite.display().to_string();
        let (ok, output) = run_node_tool(
            &node,
            &[&suite, "server", "--url", &url, "--scenario", scenario],
        )
        .await;
        assert!(
            ok && output.contains(" 0 failed") && !output.contains("FAILURE"),
            "{scenario}: {output}"
        );
    }
}
