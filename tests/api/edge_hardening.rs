//! The edges a hostile probe found soft (issue 35, items 6 and 17–20): invented HTTP methods fold
//! into one metrics label, MCP and A2A refuse a limited key with their own JSON-RPC code and the
//! wait, CORS lets a page on an allowed origin store secrets and speak MCP, client tool names
//! follow the providers' rule and cannot shadow internal tools on every headend, and requests
//! hyper itself refuses (a request line past its limit, a head past its buffer, a malformed
//! request) are answered in the JSON error shape.

use std::time::Duration;

use chrono::{Timelike, Utc};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app, spawn_app_with};

const ORIGIN: &str = "http://localhost:3000";

// ---- item 6: the metrics' method label -------------------------------------------------------

#[tokio::test]
async fn invented_methods_without_a_key_add_one_other_series_to_the_metrics() {
    let app = spawn_app_with(|config| {
        config["auth"] = json!({"keys": [{"key": "admin-key", "admin": true}]});
    })
    .await;
    const INVENTED: usize = 300;
    for n in 0..INVENTED {
        let method = reqwest::Method::from_bytes(format!("PROBE{n}").as_bytes()).expect("a token");
        let answer = app
            .client
            .request(method, app.url("/v1/models"))
            .send()
            .await
            .expect("sent");
        assert!(answer.status().is_client_error(), "{}", answer.status());
    }
    assert_eq!(app.get("/health").await.status(), 200);
    let scrape = app.get("/metrics").await.text().await.expect("scrape");
    let requests: Vec<&str> = scrape
        .lines()
        .filter(|line| line.starts_with("agentd_http_requests_total{"))
        .collect();
    assert!(
        !scrape.contains("PROBE"),
        "no invented method is a label value"
    );
    let other: Vec<&&str> = requests
        .iter()
        .filter(|line| line.contains(r#"method="other""#))
        .collect();
    assert_eq!(other.len(), 1, "one series for them all: {requests:#?}");
    assert!(other[0].ends_with(&format!(" {INVENTED}")), "{}", other[0]);
    assert!(
        requests
            .iter()
            .any(|line| line.contains(r#"method="GET",route="/health""#)),
        "standard methods keep their names: {requests:#?}"
    );
    let durations = scrape
        .lines()
        .filter(|line| line.starts_with("agentd_http_request_duration_seconds_count{"))
        .count();
    assert!(durations <= 3, "{durations} duration series");
}

// ---- item 17: MCP and A2A refusals to retry later --------------------------------------------

/// Waits out the end of a minute, so two requests land in one fixed window.
async fn early_in_a_minute() {
    let second = Utc::now().second();
    if second >= 50 {
        tokio::time::sleep(Duration::from_secs(u64::from(61 - second))).await;
    }
}

/// Two keys of one user, each allowed one run per minute.
async fn app_with_one_run_per_minute() -> TestApp {
    spawn_app_with(|config| {
        config["auth"] = json!({"keys": [
            {"key": "mcp-key", "id": "mcp", "userId": "alice", "limits": {"requestsPerMinute": 1}},
            {"key": "a2a-key", "id": "a2a", "userId": "alice", "limits": {"requestsPerMinute": 1}},
        ]});
    })
    .await
}

/// POSTs one JSON-RPC message with `key` (none when empty) and returns the JSON-RPC answer.
async fn post_as(app: &TestApp, key: &str, path: &str, body: &Value) -> Value {
    let mut request = app
        .client
        .post(app.url(path))
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if !key.is_empty() {
        request = request.bearer_auth(key);
    }
    let answer = request.send().await.expect("sent");
    let text = answer.text().await.expect("body");
    // MCP may answer one SSE frame; its `data:` line is the JSON-RPC message.
    let json = text
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or(&text);
    serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A refusal to retry later: its code, agentd's code in `data` and a wait within the minute.
fn assert_rate_limited(answer: &Value) {
    let error = &answer["error"];
    assert_eq!(error["code"], -32029, "{answer}");
    assert_eq!(error["data"]["code"], "rate_limited", "{answer}");
    let wait = error["data"]["retry_after_seconds"]
        .as_u64()
        .unwrap_or_else(|| panic!("a wait in seconds: {answer}"));
    assert!((1..=60).contains(&wait), "{answer}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("may start 1 run per minute")),
        "{answer}"
    );
}

#[tokio::test]
async fn a_limited_key_on_mcp_and_a2a_is_told_rate_limited_with_the_wait() {
    let app = app_with_one_run_per_minute().await;
    early_in_a_minute().await;
    let call = |id: u32| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "chat", "arguments": {"prompt": "hi"}}})
    };
    app.llm.push(Reply::text("first"));
    let first = post_as(&app, "mcp-key", "/mcp", &call(1)).await;
    assert_eq!(first["result"]["content"][0]["text"], "first", "{first}");
    assert_rate_limited(&post_as(&app, "mcp-key", "/mcp", &call(2)).await);

    let send = |id: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "message/send", "params": {"message": {
            "kind": "message", "messageId": id, "role": "user",
            "parts": [{"kind": "text", "text": "hi"}]}}})
    };
    app.llm.push(Reply::text("second"));
    let first = post_as(&app, "a2a-key", "/a2a/chat", &send("m1")).await;
    assert_eq!(first["result"]["status"]["state"], "completed", "{first}");
    assert_rate_limited(&post_as(&app, "a2a-key", "/a2a/chat", &send("m2")).await);
    let v1 = json!({"jsonrpc": "2.0", "id": "3", "method": "SendMessage", "params": {"message": {
        "messageId": "m3", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    assert_rate_limited(&post_as(&app, "a2a-key", "/a2a/chat", &v1).await);
}

#[tokio::test]
async fn an_overloaded_server_tells_mcp_and_a2a_clients_to_retry_with_its_own_code() {
    let app = spawn_app_with(|config| {
        config["server"] = json!({"maxConcurrentSessions": 1, "maxQueuedSessions": 0});
    })
    .await;
    app.llm.push(Reply::hang());
    let holder = app.client.clone();
    let hanging = tokio::spawn(
        holder
            .post(app.url("/v1/chat/completions"))
            .json(&json!({"model": "chat", "messages": [{"role": "user", "content": "hold"}]}))
            .send(),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while app.llm.requests().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "chat", "arguments": {"prompt": "hi"}}});
    let send = json!({"jsonrpc": "2.0", "id": "2", "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}});
    for (path, body) in [("/mcp", call), ("/a2a/chat", send)] {
        let answer = post_as(&app, "", path, &body).await;
        let error = &answer["error"];
        assert_eq!(error["code"], -32053, "{path}: {answer}");
        assert_eq!(error["data"]["code"], "overloaded", "{path}: {answer}");
        assert_eq!(error["data"]["retry_after_seconds"], 1, "{path}: {answer}");
    }
    hanging.abort();
}

// ---- item 18: CORS for every method and MCP's headers ----------------------------------------

async fn preflight(app: &TestApp, path: &str, method: &str, headers: &str) -> reqwest::Response {
    app.client
        .request(reqwest::Method::OPTIONS, app.url(path))
        .header("origin", ORIGIN)
        .header("access-control-request-method", method)
        .header("access-control-request-headers", headers)
        .send()
        .await
        .expect("sent")
}

fn header_list(response: &reqwest::Response, name: &str) -> Vec<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .split(',')
        .map(|item| item.trim().to_ascii_lowercase())
        .collect()
}

async fn app_with_cors() -> TestApp {
    spawn_app_with(|config| {
        config["server"] = json!({"corsOrigins": [ORIGIN]});
        config["auth"] = json!({"keys": [{"key": "alice-key", "userId": "alice"}]});
    })
    .await
}

#[tokio::test]
async fn a_page_on_an_allowed_origin_may_store_secrets_and_speak_mcp() {
    let app = app_with_cors().await;
    let secret = preflight(
        &app,
        "/api/alice/secrets/GITHUB_TOKEN",
        "PUT",
        "authorization,content-type",
    )
    .await;
    assert_eq!(secret.status(), 200);
    assert!(
        header_list(&secret, "access-control-allow-methods").contains(&"put".to_string()),
        "{:?}",
        secret.headers()
    );

    let mcp_headers = [
        "authorization",
        "content-type",
        "accept",
        "mcp-protocol-version",
        "mcp-session-id",
        "last-event-id",
    ];
    let mcp = preflight(&app, "/mcp", "POST", &mcp_headers.join(",")).await;
    assert_eq!(mcp.status(), 200);
    let allowed = header_list(&mcp, "access-control-allow-headers");
    for header in mcp_headers {
        assert!(
            allowed.contains(&header.to_string()),
            "{header}: {allowed:?}"
        );
    }

    let listed = app
        .client
        .post(app.url("/mcp"))
        .header("origin", ORIGIN)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .bearer_auth("alice-key")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(listed.status(), 200);
    assert_eq!(listed.headers()["access-control-allow-origin"], ORIGIN);
    assert!(
        header_list(&listed, "access-control-expose-headers")
            .contains(&"mcp-session-id".to_string()),
        "{:?}",
        listed.headers()
    );
}

#[tokio::test]
async fn every_documented_operation_passes_a_browsers_preflight() {
    let app = app_with_cors().await;
    let document: Value = app.get("/openapi.json").await.json().await.expect("json");
    let mut checked = 0;
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            let method = method.to_ascii_uppercase();
            let answer = preflight(&app, path, &method, "authorization,content-type").await;
            assert_eq!(answer.status(), 200, "{method} {path}");
            let allowed = header_list(&answer, "access-control-allow-methods");
            assert!(
                allowed.contains(&method.to_ascii_lowercase()),
                "{method} {path}: {allowed:?}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 23, "{checked} operations");
}

// ---- item 19: client tool names --------------------------------------------------------------

/// One headend that takes client tools: where it posts, how one tool is spelled and the
/// `param` naming a tool's name (Anthropic's error shape has no `param`: its message names the
/// tool).
struct ToolHeadend {
    path: &'static str,
    body: fn(tools: Vec<Value>) -> Value,
    tool: fn(name: &str) -> Value,
    name_param: Option<fn(index: usize) -> String>,
}

const HEADENDS: [ToolHeadend; 3] = [
    ToolHeadend {
        path: "/v1/chat/completions",
        body: |tools| json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}], "tools": tools}),
        tool: |name| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}),
        name_param: Some(|index| format!("tools[{index}].function.name")),
    },
    ToolHeadend {
        path: "/v1/responses",
        body: |tools| json!({"model": "chat", "input": "hi", "tools": tools}),
        tool: |name| json!({"type": "function", "name": name, "parameters": {"type": "object"}}),
        name_param: Some(|index| format!("tools[{index}].name")),
    },
    ToolHeadend {
        path: "/v1/messages",
        body: |tools| json!({"model": "chat", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], "tools": tools}),
        tool: |name| json!({"name": name, "input_schema": {"type": "object"}}),
        name_param: None,
    },
];

/// Posts `tools` to `headend`; the status and body.
async fn post_tools(app: &TestApp, headend: &ToolHeadend, tools: Vec<Value>) -> (u16, Value) {
    let answer = app.post_json(headend.path, &(headend.body)(tools)).await;
    let status = answer.status().as_u16();
    let text = answer.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(json!(text)))
}

#[tokio::test]
async fn client_tool_names_follow_the_providers_rule_on_every_headend() {
    let app = spawn_app().await;
    for headend in &HEADENDS {
        app.llm.push(Reply::text("ok"));
        let longest = "t".repeat(64);
        let (status, body) = post_tools(&app, headend, vec![(headend.tool)(&longest)]).await;
        assert_eq!(status, 200, "{}: 64 characters: {body}", headend.path);

        let refused = [
            ("t".repeat(65), "65"),
            ("get weather".to_string(), "letters, digits"),
            ("get.weather".to_string(), "letters, digits"),
            ("wetter_für_morgen".to_string(), "letters, digits"),
            ("agent__tool_output".to_string(), "internal tools"),
            ("agent__final_report".to_string(), "internal tools"),
            ("router__handoff-to".to_string(), "internal tools"),
        ];
        for (name, said) in refused {
            let tools = vec![(headend.tool)("fine_tool"), (headend.tool)(&name)];
            let (status, body) = post_tools(&app, headend, tools).await;
            assert_eq!(status, 400, "{} {name:?}: {body}", headend.path);
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(said),
                "{} {name:?}: {message}",
                headend.path
            );
            match headend.name_param {
                Some(param) => assert_eq!(
                    body["error"]["param"],
                    param(1),
                    "{} {name:?}: {body}",
                    headend.path
                ),
                None => assert!(
                    message.contains(&name) || message.contains("client tool 1 "),
                    "{} {name:?}: {message}",
                    headend.path
                ),
            }
        }
    }
    assert_eq!(
        app.llm.requests().len(),
        HEADENDS.len(),
        "no refused request reached the model"
    );
}

#[tokio::test]
async fn a_bad_client_tool_after_a_server_tool_is_named_at_its_own_index() {
    let app = spawn_app().await;
    let responses = json!({"model": "chat", "input": "hi", "tools": [
        {"type": "web_search"},
        {"type": "function", "name": "agent__tool_output"},
    ]});
    let answer = app.post_json("/v1/responses", &responses).await;
    assert_eq!(answer.status(), 400);
    let error: Value = answer.json().await.expect("json");
    assert_eq!(error["error"]["param"], "tools[1].name", "{error}");

    // Anthropic's error shape has no `param`; the message counts the tools as the client did.
    let messages = json!({"model": "chat", "max_tokens": 100,
    "messages": [{"role": "user", "content": "hi"}], "tools": [
        {"type": "web_search_20250305", "name": "web_search"},
        {"name": "t".repeat(65), "input_schema": {"type": "object"}},
    ]});
    let answer = app.post_json("/v1/messages", &messages).await;
    assert_eq!(answer.status(), 400);
    let error: Value = answer.json().await.expect("json");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("client tool 1 "), "{error}");
}

// ---- item 20: what hyper refuses, in the JSON error shape ------------------------------------

/// Sends `request` as raw bytes (reqwest cannot send a target past 64 KiB) and reads the answer
/// until the server closes the connection: the status line, the head and the body.
async fn raw_exchange(app: &TestApp, request: &[u8]) -> (String, String) {
    let address = app.address.trim_start_matches("http://").to_string();
    let mut tcp = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    let exchange = async {
        tcp.write_all(request).await?;
        let mut answer = Vec::new();
        tcp.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .expect("answered in time")
        .unwrap_or_else(|e| panic!("the request is answered, not reset: {e}"));
    let answer = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("a head and a body: {answer:?}"));
    (head.to_string(), body.to_string())
}

/// `GET /health?qqq…` whose request target is `length` bytes.
fn get_with_target_of(length: usize) -> Vec<u8> {
    let query = "q".repeat(length - "/health?".len());
    format!("GET /health?{query} HTTP/1.1\r\nhost: agentd\r\n\r\n").into_bytes()
}

/// Asserts the JSON error shape with `status` and `code`; returns the message.
fn json_error(head: &str, body: &str, status: u16, code: &str) -> String {
    assert!(
        head.starts_with(&format!("HTTP/1.1 {status} ")),
        "{head}\n\n{body}"
    );
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(head.contains("x-request-id: "), "{head}");
    let body: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    body["error"]["message"]
        .as_str()
        .expect("message")
        .to_string()
}

#[tokio::test]
async fn a_request_line_past_hypers_limit_is_a_414_in_the_json_error_shape() {
    let app = spawn_app().await;
    for length in [64 * 1024, 100 * 1024, 300 * 1024] {
        let (head, body) = raw_exchange(&app, &get_with_target_of(length)).await;
        let message = json_error(&head, &body, 414, "uri_too_long");
        assert!(message.contains("16384"), "{length}: {message}");
    }
    assert_eq!(app.get("/health").await.status(), 200, "the server goes on");
}

#[tokio::test]
async fn a_request_head_past_hypers_buffer_is_a_431_in_the_json_error_shape() {
    let app = spawn_app().await;
    for length in [1024 * 1024, 4 * 1024 * 1024] {
        let (head, body) = raw_exchange(&app, &get_with_target_of(length)).await;
        let message = json_error(&head, &body, 431, "request_head_too_large");
        assert!(
            message.contains("417792") && message.contains("16384"),
            "{length}: {message}"
        );
    }
    assert_eq!(app.get("/health").await.status(), 200, "the server goes on");
}

#[tokio::test]
async fn a_request_hyper_cannot_parse_is_a_400_in_the_json_error_shape() {
    let app = spawn_app().await;
    for request in [
        "GET / HTTP/9.9\r\nhost: x\r\n\r\n",
        "GET / HTTP/1.1\r\nbad header\r\n\r\n",
        "G(T / HTTP/1.1\r\nhost: x\r\n\r\n",
    ] {
        let (head, body) = raw_exchange(&app, request.as_bytes()).await;
        json_error(&head, &body, 400, "invalid_request");
    }
}

#[tokio::test]
async fn a_refused_media_type_is_the_callers_error_and_a_missing_field_is_named() {
    let app = spawn_app().await;
    let response = app
        .client
        .post(app.url("/mcp"))
        .header("content-type", "text/plain")
        .header("accept", "application/json, text/event-stream")
        .body("hello")
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 415);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");

    for (body, param) in [
        (
            json!({"messages": [{"role": "user", "content": "hi"}]}),
            "model",
        ),
        (json!({"model": "chat"}), "messages"),
        (
            json!({"model": "chat", "messages": [{"content": "hi"}]}),
            "messages[0].role",
        ),
    ] {
        let response = app.post_json("/v1/chat/completions", &body).await;
        assert_eq!(response.status(), 400, "{body}");
        let error: Value = response.json().await.expect("json");
        assert_eq!(error["error"]["param"], param, "{body}: {error}");
    }
}
