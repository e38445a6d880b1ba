//! The web frontends (issue 24): the page at `/` and its files (public, under a strict CSP),
//! `POST /v1/markdown` and `GET /v1/me`, AG-UI (every frame validated by the `ag-ui-protocol`
//! Python package, a run consumed by `@ag-ui/client`'s `HttpAgent`), the AI SDK UI message
//! stream (read by the `ai` package's own parser and transport, resumed mid-answer), and the
//! page itself in headless Chromium through Playwright (tests/web/page.py).
//!
//! The clients are installed by `.ci/run`: Python packages in `.ci/venv`, npm packages with
//! `npm ci --prefix tests/node`, Chromium from Debian. A test whose client is missing fails
//! saying how to install it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, json_frames, spawn_app_with};

const TOOL_AGENT: &str = "---\ndescription: Echoes with a tool\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\n---\nYou use your tools.\n";
const APPROVER_AGENT: &str = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\n---\nYou echo.\n";
const ADMIN_KEY: &str = "admin-key";
pub(crate) const ADA_KEY: &str = "ada-key";

/// The test app with keys (an admin, and one bound to user `ada`), the test MCP server and two
/// agents using it (`tooly`, and `approver`, whose echo waits for approval). Keep the directory
/// alive.
pub(crate) async fn spawn_web_app() -> (TestApp, tempfile::TempDir) {
    spawn_web_app_with(&[]).await
}

/// [`spawn_web_app`] with more agent files (`(file name, text)`).
pub(crate) async fn spawn_web_app_with(agents: &[(&str, &str)]) -> (TestApp, tempfile::TempDir) {
    let extra = tempfile::tempdir().expect("dir");
    std::fs::write(extra.path().join("tooly.ai"), TOOL_AGENT).expect("agent");
    std::fs::write(extra.path().join("approver.ai"), APPROVER_AGENT).expect("agent");
    for (name, text) in agents {
        std::fs::write(extra.path().join(name), text).expect("agent");
    }
    let extra_path = extra.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(extra_path));
        config["auth"] = json!({"keys": [
            {"key": ADMIN_KEY, "admin": true},
            {"key": ADA_KEY, "userId": "ada"},
        ]});
    })
    .await;
    (app, extra)
}

pub(crate) async fn post(app: &TestApp, key: &str, path: &str, body: &Value) -> reqwest::Response {
    app.client
        .post(app.url(path))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .expect("request")
}

pub(crate) async fn body_text(response: reqwest::Response) -> String {
    let mut body = String::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        body.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
    }
    body
}

pub(crate) fn data_frames(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|frame| {
            let data: Vec<&str> = frame
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

pub(crate) fn types(frames: &[Value]) -> Vec<&str> {
    frames.iter().filter_map(|f| f["type"].as_str()).collect()
}

// ---------- the clients ----------

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `.ci/venv/bin/python` with `ag-ui-protocol` and `playwright`, which `.ci/run` installs.
fn web_python() -> PathBuf {
    let python = repo().join(".ci/venv/bin/python");
    let ready = std::process::Command::new(&python)
        .args(["-c", "import ag_ui.core, playwright"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ready,
        "the web tests' Python packages are missing: `python3 -m venv .ci/venv && .ci/venv/bin/pip \
         install ag-ui-protocol==1.0.0 playwright==1.65.2` (or run .ci/run)"
    );
    python
}

pub(crate) async fn run_python(script: &str, args: &[String]) -> String {
    let python = tokio::task::spawn_blocking(web_python)
        .await
        .expect("python");
    let output = tokio::process::Command::new(python)
        .arg(repo().join(script))
        .args(args)
        .output()
        .await
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Runs `tests/node/SCRIPT` with node (as user `ada`'s key) and returns the JSON it printed last.
pub(crate) async fn run_node(script: &str, args: &[String]) -> Value {
    run_node_as(script, args, ADA_KEY).await
}

/// Runs `tests/node/SCRIPT` with node, `AGENTD_KEY` set to `key`, and returns the JSON it
/// printed last.
pub(crate) async fn run_node_as(script: &str, args: &[String], key: &str) -> Value {
    run_node_with(script, args, key, &[]).await
}

/// [`run_node_as`] with `envs` set too (`AI_PACKAGE=ai6` picks the previous AI SDK major).
pub(crate) async fn run_node_with(
    script: &str,
    args: &[String],
    key: &str,
    envs: &[(&str, &str)],
) -> Value {
    let node_dir = repo().join("tests/node");
    assert!(
        node_dir.join("node_modules/@ag-ui/client").exists()
            && node_dir.join("node_modules/ai").exists(),
        "the npm clients are missing: run scripts/test --setup-only (or `npm ci --prefix tests/node`)"
    );
    let output = tokio::process::Command::new("node")
        .arg(node_dir.join(script))
        .args(args)
        .env("AGENTD_KEY", key)
        .envs(envs.iter().copied())
        .current_dir(&node_dir)
        .output()
        .await
        .expect("node runs (install Node 20)");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{script} printed {stdout:?}: {e}"))
}

/// Every frame validates against the `ag-ui-protocol` event models (tests/web/ag_ui_frames.py).
pub(crate) async fn validate_ag_ui_frames(frames: &[Value]) {
    let file = tempfile::NamedTempFile::new().expect("file");
    std::fs::write(file.path(), serde_json::to_string(frames).expect("json")).expect("write");
    let checked = run_python(
        "tests/web/ag_ui_frames.py",
        &[file.path().display().to_string()],
    )
    .await;
    assert_eq!(
        checked.lines().filter(|l| l.ends_with(" ok")).count(),
        frames.len(),
        "{checked}"
    );
}

// ---------- the page and its calls ----------

#[tokio::test]
async fn the_page_and_its_files_are_public_under_a_strict_csp() {
    let (app, _dir) = spawn_web_app().await;
    let page = app.get("/").await;
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .expect("csp")
        .to_string();
    assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"));
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(
        page.headers()["content-type"]
            .to_str()
            .expect("type")
            .starts_with("text/html")
    );
    let html = page.text().await.expect("html");
    assert!(
        html.contains("/ui/app.js") && !html.contains("<script>"),
        "no inline script"
    );

    let script = app.get("/ui/app.js").await;
    assert_eq!(script.status(), 200);
    assert!(
        script.headers()["content-type"]
            .to_str()
            .expect("type")
            .starts_with("text/javascript")
    );
    assert_eq!(app.get("/ui/app.css").await.status(), 200);
    let missing = app.get("/ui/other.js").await;
    assert_eq!(missing.status(), 404);
    let error: Value = missing.json().await.expect("json");
    assert!(
        error["error"]["message"]
            .as_str()
            .expect("message")
            .contains("other.js")
    );

    assert_eq!(
        app.get("/v1/me").await.status(),
        401,
        "the API still needs a key"
    );
}

#[tokio::test]
async fn me_says_whether_the_key_is_an_admin_and_whose_it_is() {
    let (app, _dir) = spawn_web_app().await;
    for (key, admin, user) in [
        (ADMIN_KEY, true, Value::Null),
        (ADA_KEY, false, json!("ada")),
    ] {
        let me: Value = app
            .client
            .get(app.url("/v1/me"))
            .bearer_auth(key)
            .send()
            .await
            .expect("me")
            .json()
            .await
            .expect("json");
        assert_eq!(me["admin"], admin);
        assert_eq!(me["user_id"], user);
    }
}

#[tokio::test]
async fn markdown_is_rendered_with_model_html_as_text_up_to_its_limit() {
    let (app, _dir) = spawn_web_app().await;
    let answer: Value = post(
        &app,
        ADA_KEY,
        "/v1/markdown",
        &json!({"text": "# Hi\n\n**bold** <img src=x onerror=alert(1)><script>alert(2)</script> [x](javascript:alert(3))"}),
    )
    .await
    .json()
    .await
    .expect("json");
    let html = answer["html"].as_str().expect("html");
    assert!(
        html.contains("<h1>Hi</h1>") && html.contains("<strong>bold</strong>"),
        "{html}"
    );
    assert!(
        html.contains("&lt;script&gt;") && html.contains("&lt;img"),
        "shown as text: {html}"
    );
    assert!(!html.contains("<script") && !html.contains("<img") && !html.contains("javascript:"));

    let limit = agentd_markdown_limit();
    let at_limit = post(
        &app,
        ADA_KEY,
        "/v1/markdown",
        &json!({"text": "a".repeat(limit)}),
    )
    .await;
    assert_eq!(at_limit.status(), 200);
    let past = post(
        &app,
        ADA_KEY,
        "/v1/markdown",
        &json!({"text": "a".repeat(limit + 1)}),
    )
    .await;
    assert_eq!(past.status(), 400);
    let error: Value = past.json().await.expect("json");
    assert_eq!(error["error"]["param"], "text");
}

/// `MAX_MARKDOWN_BYTES` (256 KiB), which the server's request body limit must let through.
fn agentd_markdown_limit() -> usize {
    256 * 1024
}

// ---------- AG-UI ----------

pub(crate) fn ag_ui_input(thread: &str, prompt: &str) -> Value {
    json!({
        "threadId": thread, "runId": "client-run", "state": {}, "tools": [], "context": [],
        "forwardedProps": {},
        "messages": [{"id": "m1", "role": "user", "content": prompt}],
    })
}

#[tokio::test]
async fn every_ag_ui_frame_of_a_run_with_thinking_a_tool_and_an_error_validates() {
    let (app, _dir) = spawn_web_app().await;
    app.llm.push(
        Reply::tool_calls(vec![ToolCall::new(
            "c1",
            "test__echo",
            r#"{"text": "ping"}"#,
        )])
        .with_reasoning("I should echo."),
    );
    for _ in 0..8 {
        app.llm.push(Reply::status(
            500,
            json!({"error": {"message": "upstream broke"}}),
        ));
    }
    let response = post(
        &app,
        ADA_KEY,
        "/ag-ui/tooly",
        &ag_ui_input("thread-1", "Echo ping"),
    )
    .await;
    assert_eq!(response.status(), 200);
    let frames = json_frames(&data_frames(&body_text(response).await));
    let kinds = types(&frames);
    for expected in [
        "RUN_STARTED",
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "STEP_FINISHED",
    ] {
        assert!(kinds.contains(&expected), "{expected} missing: {kinds:?}");
    }
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"));
    assert_eq!(kinds.last(), Some(&"RUN_ERROR"), "{kinds:?}");
    assert_eq!(frames[0]["threadId"], "thread-1");
    assert_eq!(frames[0]["runId"], "client-run");
    let result = frames
        .iter()
        .find(|f| f["type"] == "TOOL_CALL_RESULT")
        .expect("result");
    assert_eq!(result["content"], "ping");
    let args = frames
        .iter()
        .find(|f| f["type"] == "TOOL_CALL_ARGS")
        .expect("args");
    assert_eq!(
        serde_json::from_str::<Value>(args["delta"].as_str().expect("delta")).expect("json"),
        json!({"text": "ping"})
    );

    validate_ag_ui_frames(&frames).await;

    // The thread is the user's conversation, kept by the server.
    let conversation: Value = app
        .client
        .get(app.url("/api/ada/conversations/thread-1"))
        .bearer_auth(ADA_KEY)
        .send()
        .await
        .expect("conversation")
        .json()
        .await
        .expect("json");
    assert_eq!(conversation["messages"][0]["content"], "Echo ping");
}

#[tokio::test]
async fn ag_ui_refuses_what_it_cannot_do_naming_the_field() {
    let (app, _dir) = spawn_web_app().await;
    let mut with_tools = ag_ui_input("t", "hi");
    with_tools["tools"] = json!([{"description": "asks", "parameters": {}}]);
    let cases = [
        (with_tools, "tools[0].name"),
        (
            json!({"threadId": "t", "runId": "r", "messages": [], "resume": [{"interruptId": "x"}]}),
            "resume[0].interruptId",
        ),
        (ag_ui_input("../etc", "hi"), "threadId"),
        (ag_ui_input(&"t".repeat(129), "hi"), "threadId"),
    ];
    for (input, param) in cases {
        let response = post(&app, ADA_KEY, "/ag-ui/chat", &input).await;
        assert_eq!(response.status(), 400, "{param}");
        let error: Value = response.json().await.expect("json");
        assert_eq!(error["error"]["param"], param, "{error}");
    }
    // A thread with nothing to answer is told in the stream, as AG-UI clients expect.
    let nothing = post(
        &app,
        ADA_KEY,
        "/ag-ui/chat",
        &json!({"threadId": "t", "runId": "r", "tools": null,
            "messages": [{"id": "a", "role": "assistant", "content": "hi"}]}),
    )
    .await;
    assert_eq!(nothing.status(), 200);
    let frames = json_frames(&data_frames(&body_text(nothing).await));
    assert_eq!(types(&frames), ["RUN_STARTED", "RUN_ERROR"]);
    assert!(
        frames[1]["message"]
            .as_str()
            .expect("message")
            .contains("user message")
    );
    let at_limit = post(
        &app,
        ADA_KEY,
        "/ag-ui/nope",
        &ag_ui_input(&"t".repeat(128), "hi"),
    )
    .await;
    assert_eq!(
        at_limit.status(),
        404,
        "a 128-character thread id passes; the agent does not exist"
    );
}

#[tokio::test]
async fn ag_ui_http_agent_consumes_a_run() {
    let (app, _dir) = spawn_web_app().await;
    app.llm
        .push(Reply::text_in_pieces(&["Hello ", "from ", "agentd"]).with_reasoning("thinking"));
    let seen = run_node(
        "ag_ui_client.mjs",
        &[
            app.address.clone(),
            "chat".into(),
            "Say hello".into(),
            "thread-node".into(),
        ],
    )
    .await;
    assert_eq!(seen["runError"], Value::Null, "{seen}");
    let kinds: Vec<&str> = seen["types"]
        .as_array()
        .expect("types")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"RUN_FINISHED"), "{kinds:?}");
    let texts: Vec<&str> = seen["newMessages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(texts, ["Hello from agentd"], "{seen}");
}

// ---------- the AI SDK UI message stream ----------

fn use_chat_body(chat_id: &str, prompt: &str) -> Value {
    json!({
        "id": chat_id, "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": prompt}]}],
    })
}

#[tokio::test]
async fn the_ai_sdk_stream_has_its_parts_header_and_done() {
    let (app, _dir) = spawn_web_app().await;
    app.llm.push(
        Reply::tool_calls(vec![ToolCall::new(
            "c1",
            "test__echo",
            r#"{"text": "pong"}"#,
        )])
        .with_reasoning("echo it"),
    );
    app.llm.push(Reply::text("Echoed."));
    let response = app
        .client
        .post(app.url("/api/ada/chat"))
        .bearer_auth(ADA_KEY)
        .header("accept", "text/x-ai-sdk-ui")
        .json(&json!({"message": "Echo pong", "agent": "tooly"}))
        .send()
        .await
        .expect("chat");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-vercel-ai-ui-message-stream"], "v1");
    let data = data_frames(&body_text(response).await);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let frames = json_frames(&data);
    let kinds = types(&frames);
    for expected in [
        "start",
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
        "text-start",
        "text-delta",
        "text-end",
    ] {
        assert!(kinds.contains(&expected), "{expected} missing: {kinds:?}");
    }
    assert_eq!(kinds.last(), Some(&"finish"));
    let output = frames
        .iter()
        .find(|f| f["type"] == "tool-output-available")
        .expect("output");
    assert_eq!(output["output"], "pong");
    let finish = frames.last().expect("finish");
    assert_eq!(finish["finishReason"], "stop");

    // `?protocol=ai-sdk` selects it too; a bad useChat body names the field.
    let bad = post(
        &app,
        ADA_KEY,
        "/api/ada/chat?protocol=ai-sdk",
        &json!({"id": "c", "messages": [{"role": "assistant", "parts": []}]}),
    )
    .await;
    assert_eq!(bad.status(), 400);
    let error: Value = bad.json().await.expect("json");
    assert_eq!(error["error"]["param"], "messages");
}

#[tokio::test]
async fn the_ai_package_reads_the_stream_sent_by_its_default_transport() {
    let (app, _dir) = spawn_web_app().await;
    app.llm
        .push(Reply::text_in_pieces(&["Hi ", "there", "!"]).with_reasoning("greet"));
    let seen = run_node(
        "ai_sdk_stream.mjs",
        &[
            app.address.clone(),
            "ada".into(),
            "chat-1".into(),
            "Hello".into(),
        ],
    )
    .await;
    assert_eq!(seen["errors"], json!([]), "{seen}");
    let parts = seen["message"]["parts"].as_array().expect("parts");
    let text: String = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(text, "Hi there!", "{seen}");
    assert!(parts.iter().any(|p| p["type"] == "reasoning"), "{seen}");
    assert_eq!(seen["message"]["metadata"]["status"], "completed", "{seen}");
    // The chat id is the user's conversation.
    let conversation = app
        .client
        .get(app.url("/api/ada/conversations/chat-1"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .expect("conversation");
    assert_eq!(conversation.status(), 200);
}

#[tokio::test]
async fn the_resume_route_continues_an_answer_in_progress() {
    let (app, _dir) = spawn_web_app().await;
    let words: Vec<String> = (0..12).map(|i| format!("w{i} ")).collect();
    let pieces: Vec<&str> = words.iter().map(String::as_str).collect();
    app.llm
        .push(Reply::text_in_pieces(&pieces).with_chunk_gap(Duration::from_millis(150)));
    let none = run_node(
        "ai_sdk_stream.mjs",
        &[
            app.address.clone(),
            "ada".into(),
            "chat-r".into(),
            "".into(),
            "resume".into(),
        ],
    )
    .await;
    assert_eq!(none["resumed"], false, "204 before any answer: {none}");

    let started = post(
        &app,
        ADA_KEY,
        "/api/ada/chat",
        &use_chat_body("chat-r", "Count"),
    )
    .await;
    assert_eq!(started.status(), 200);
    let mut stream = started.bytes_stream();
    let first = stream.next().await.expect("a first chunk").expect("chunk");
    assert!(String::from_utf8_lossy(&first).contains("\"start\""));
    drop(stream); // the client leaves mid-answer (a reload)

    let resumed = run_node(
        "ai_sdk_stream.mjs",
        &[
            app.address.clone(),
            "ada".into(),
            "chat-r".into(),
            "".into(),
            "resume".into(),
        ],
    )
    .await;
    assert_eq!(resumed["resumed"], true, "{resumed}");
    let text: String = resumed["message"]["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(text, pieces.concat(), "the whole answer, each word once");
}

// ---------- the page in a browser ----------

const LEAD_AGENT: &str = "---\ndescription: Asks its helper\nmodels: llm/upstream-model\nfinalization: text\nagents: [helper]\n---\nYou delegate.\n";
const HELPER_AGENT: &str =
    "---\ndescription: Helps\nmodels: llm/upstream-model\nfinalization: text\n---\nYou help.\n";

/// The answer tests/web/page.py watches render while it streams.
const MARKDOWN_PIECES: [&str; 6] = [
    "## Plan\n\n",
    "- one\n- two\n\n",
    "```python\nprint('hi')\n```\n\n",
    "| a | b |\n|---|---|\n",
    "| 1 | 2 |\n\n",
    "Hello **world**",
];

#[tokio::test]
async fn the_page_works_in_headless_chromium() {
    let (app, _dir) =
        spawn_web_app_with(&[("lead.ai", LEAD_AGENT), ("helper.ai", HELPER_AGENT)]).await;
    // 30 runs of another user, so the runs console has a second page.
    for n in 0..30 {
        app.llm.push(Reply::text(format!("bob answer {n}")));
        let sent = post(
            &app,
            ADMIN_KEY,
            "/api/bob/chat",
            &json!({"message": format!("bob {n}")}),
        )
        .await;
        assert_eq!(sent.status(), 200);
    }
    // The replies, in the order tests/web/page.py asks for them.
    app.llm
        .push(Reply::text_in_pieces(&MARKDOWN_PIECES).with_chunk_gap(Duration::from_millis(400)));
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "t1",
        "test__echo",
        r#"{"text": "ping"}"#,
    )]));
    app.llm.push(Reply::text("Echoed it."));
    app.llm.push(Reply::text(
        "Look: <img src=x onerror=\"window.__xss=1\"> <script>window.__xss=2</script> done",
    ));
    app.llm
        .push(Reply::text("Thought it through.").with_reasoning("Let me think step by step."));
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "a1",
        "test__echo",
        r#"{"text": "ping"}"#,
    )]));
    app.llm.push(Reply::text("Approved echo done."));
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "s1",
        "agent__helper",
        json!({"prompt": "find the number"}).to_string(),
    )]));
    app.llm.push(Reply::text("the number is 42"));
    app.llm.push(Reply::text("The helper found 42."));
    let words: Vec<String> = (0..20).map(|i| format!("word{i} ")).collect();
    let pieces: Vec<&str> = words.iter().map(String::as_str).collect();
    app.llm
        .push(Reply::text_in_pieces(&pieces).with_chunk_gap(Duration::from_millis(120)));
    let slow: Vec<String> = (0..40).map(|i| format!("slow{i} ")).collect();
    let slow: Vec<&str> = slow.iter().map(String::as_str).collect();
    app.llm
        .push(Reply::text_in_pieces(&slow).with_chunk_gap(Duration::from_millis(250)));
    app.llm.push(Reply::text("Regenerated answer."));
    app.llm.push(Reply::text("Edited answer."));
    app.llm.push(Reply::text(format!(
        "A long line:\n\n```text\n{}\n```\n\n| {} |\n|{}|\n| {} |\n\nand a long word {}",
        "x".repeat(300),
        ["column"; 12].join(" | "),
        ["---"; 12].join("|"),
        ["value"; 12].join(" | "),
        "y".repeat(120),
    )));
    let shots = repo().join("target/web-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let out = run_python(
        "tests/web/page.py",
        &[
            app.address.clone(),
            ADMIN_KEY.into(),
            pieces.concat(),
            shots.display().to_string(),
        ],
    )
    .await;
    for step in [
        "401 ok",
        "markdown ok",
        "tool ok",
        "xss ok",
        "thinking ok",
        "approval ok",
        "subagent ok",
        "reload ok",
        "stop ok",
        "regenerate ok",
        "edit ok",
        "conversations ok",
        "keyboard ok",
        "axe desktop chat ok",
        "runs ok",
        "axe desktop runs ok",
        "dark ok",
        "phone ok",
        "axe phone chat ok",
        "axe phone run detail ok",
        "console ok",
    ] {
        assert!(out.lines().any(|l| l == step), "{step} missing:\n{out}");
    }
}

#[tokio::test]
async fn a_failed_ai_sdk_answer_says_what_the_chat_says_never_internals() {
    let (app, _dir) = spawn_web_app().await;
    for _ in 0..8 {
        app.llm.push(Reply::status(
            500,
            json!({"error": {"message": "stack trace at db.internal:5432"}}),
        ));
    }
    let response = post(
        &app,
        ADA_KEY,
        "/api/ada/chat",
        &use_chat_body("chat-f", "Hi"),
    )
    .await;
    assert_eq!(response.status(), 200);
    let body = body_text(response).await;
    assert!(!body.contains("db.internal"), "{body}");
    let frames = json_frames(&data_frames(&body));
    let error = frames
        .iter()
        .find(|f| f["type"] == "error")
        .expect("an error part");
    assert_eq!(
        error["errorText"],
        "I'm having trouble connecting to my AI service. Please try again."
    );
    let finish = frames.last().expect("finish");
    assert_eq!(finish["finishReason"], "error");
    assert_eq!(finish["messageMetadata"]["exitReason"], "llm_error");
}

#[tokio::test]
async fn an_ag_ui_thread_without_a_user_sends_its_messages_as_history() {
    let (app, _dir) = spawn_web_app().await;
    app.llm.push(Reply::text("You are Ada."));
    let input = json!({
        "threadId": "loose", "runId": "r",
        "messages": [
            {"id": "1", "role": "user", "content": "My name is Ada."},
            {"id": "2", "role": "assistant", "content": "Hi Ada!"},
            {"id": "3", "role": "user", "content": [{"type": "text", "text": "Who am I?"}]},
        ],
    });
    let response = post(&app, ADMIN_KEY, "/ag-ui/chat", &input).await;
    assert_eq!(response.status(), 200);
    let frames = json_frames(&data_frames(&body_text(response).await));
    assert_eq!(types(&frames).last(), Some(&"RUN_FINISHED"));
    let sent: Vec<String> = app.llm.requests()[0]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert_eq!(sent[1..], ["My name is Ada.", "Hi Ada!", "Who am I?"]);

    // A user key may not name another user's thread.
    let mut other = ag_ui_input("t2", "hi");
    other["forwardedProps"] = json!({"userId": "bob"});
    let refused = post(&app, ADA_KEY, "/ag-ui/chat", &other).await;
    assert_eq!(refused.status(), 403);
}

#[tokio::test]
async fn the_first_visit_to_a_keyless_loopback_server_chats_at_once() {
    let app = crate::support::spawn_app().await;
    app.llm.push(Reply::text("Hi from the first visit."));
    let shots = repo().join("target/web-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let out = run_python(
        "tests/web/first_visit.py",
        &[app.address.clone(), shots.display().to_string()],
    )
    .await;
    assert!(out.lines().any(|l| l == "first visit ok"), "{out}");
    // The conversation is user `local`'s.
    let list: Value = app
        .get("/api/local/conversations")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1), "{list}");
}

/// Lighthouse (npm, in headless Chromium) scores the page's accessibility and best practices at
/// least 95, as a phone and as a desktop, on a keyless loopback server with a conversation open.
#[tokio::test]
async fn lighthouse_scores_the_page_at_least_95_for_accessibility_and_best_practices() {
    let app = crate::support::spawn_app().await;
    app.llm.push(Reply::text(
        "## Notes\n\n- a list\n- of things\n\n```rust\nfn main() {}\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |",
    ));
    let sent = app
        .post_json("/api/local/chat", &json!({"message": "Show me notes"}))
        .await;
    assert_eq!(sent.status(), 200);
    for form_factor in ["mobile", "desktop"] {
        let scores = run_node_as(
            "lighthouse.mjs",
            &[format!("{}/", app.address), form_factor.into()],
            "",
        )
        .await;
        println!("lighthouse {scores}");
        for category in ["accessibility", "best_practices"] {
            let score = scores[category].as_i64().unwrap_or_default();
            assert!(score >= 95, "{form_factor} {category} {score}: {scores}");
        }
    }
}

/// The checked-in bundle (src/http/web/assets/app.js) is what `web/build.mjs` builds from
/// web/src with web/'s lockfile, byte for byte.
#[tokio::test]
async fn the_page_bundle_rebuilds_byte_for_byte_from_the_lockfile() {
    let web = repo().join("web");
    assert!(
        web.join("node_modules/esbuild").exists(),
        "the page's build tools are missing: run scripts/test --setup-only (or `npm ci --prefix web`)"
    );
    let output = tokio::process::Command::new("node")
        .arg(web.join("build.mjs"))
        .arg("--check")
        .current_dir(&web)
        .output()
        .await
        .expect("node runs");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// SPEC §13 on the page: a message sent while an answer is coming shows as queued and is
/// answered after it (tests/web/queued_message.py).
#[tokio::test]
async fn the_page_shows_a_message_sent_while_answering_as_queued_then_answers_it() {
    let app = crate::support::spawn_app().await;
    let slow: Vec<String> = (0..12).map(|i| format!("slow{i} ")).collect();
    let slow: Vec<&str> = slow.iter().map(String::as_str).collect();
    app.llm
        .push(Reply::text_in_pieces(&slow).with_chunk_gap(Duration::from_millis(250)));
    app.llm.push(Reply::text("The second answer."));
    let shots = repo().join("target/web-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let out = run_python(
        "tests/web/queued_message.py",
        &[app.address.clone(), shots.display().to_string()],
    )
    .await;
    assert!(out.lines().any(|l| l == "queue ok"), "{out}");
    let requests = app.llm.requests();
    let queued = crate::attachments::last_user_content(&requests[1]);
    assert!(
        queued.to_string().contains("the queued file arrived"),
        "the queued message's file reached the upstream: {queued}"
    );
}

/// SPEC §13 on the console (tests/web/schedules.py): the Schedules tab lists the schedules, a
/// schedule opens with its due times, Run now fires it and links its run, Pause turns it off.
#[tokio::test]
async fn the_console_lists_schedules_runs_one_now_and_pauses_it() {
    let app = crate::support::spawn_app().await;
    for (prompt, cron, timezone) in [
        ("Weekly report", "0 9 * * 1", "Europe/Paris"),
        ("Half-hourly check", "*/30 * * * *", "UTC"),
    ] {
        let created = app
            .post_json(
                "/v1/schedules",
                &json!({"agent": "chat", "prompt": prompt, "cron": cron, "timezone": timezone}),
            )
            .await;
        assert_eq!(created.status(), 201, "{prompt}");
    }
    app.llm.push(Reply::text("The weekly report is ready."));
    let shots = repo().join("target/web-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let out = run_python(
        "tests/web/schedules.py",
        &[app.address.clone(), shots.display().to_string()],
    )
    .await;
    assert!(out.lines().any(|l| l == "schedules ok"), "{out}");
}

/// SPEC §11 on the page (tests/web/attachments.py): a PNG attached with the Attach button, an
/// image pasted and removed, a text file dropped, a refused file named with its reason; the
/// upstream receives the PNG's bytes as OpenAI's `image_url` data URL and the text file as
/// text, and the sent message, reloaded and reopened, shows its thumbnail and chip.
#[tokio::test]
async fn the_page_attaches_a_png_that_reaches_the_upstream_and_shows_again_when_reopened() {
    let (app, _dir) = spawn_web_app().await;
    app.llm.push(Reply::text("A red square."));
    let shots = repo().join("target/web-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let out = run_python(
        "tests/web/attachments.py",
        &[
            app.address.clone(),
            ADA_KEY.into(),
            shots.display().to_string(),
        ],
    )
    .await;
    for step in [
        "attach ok",
        "paste ok",
        "drop ok",
        "refused ok",
        "axe pending files ok",
        "sent ok",
        "axe sent files ok",
        "reload ok",
        "reopen ok",
    ] {
        assert!(out.lines().any(|l| l == step), "{step} missing:\n{out}");
    }
    let png64 = out
        .lines()
        .find_map(|l| l.strip_prefix("png "))
        .expect("the script names its PNG");
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 1, "one answer asked for");
    let parts = crate::attachments::last_user_content(&requests[0]);
    assert_eq!(parts[0]["text"], "What is in the picture?", "{parts}");
    assert_eq!(
        parts[1]["image_url"]["url"],
        format!("data:image/png;base64,{png64}"),
        "the PNG's bytes, in OpenAI's image form: {parts}"
    );
    assert!(
        parts[2]["text"]
            .as_str()
            .is_some_and(|t| t.contains("the square is red")),
        "{parts}"
    );
    assert_eq!(
        parts.as_array().map(Vec::len),
        Some(3),
        "the removed image is not sent"
    );
}
