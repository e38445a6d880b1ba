//! Per-user tool credentials: `PUT/GET/DELETE /api/{user_id}/secrets[/{name}]` (who may, the
//! limits at and past them, values never answered, logged or stored in the clear, 503 naming
//! `secrets.key` without a key), a REST tool whose `Authorization` header reads
//! `${caller.secret.TOKEN}` run for two users with different secrets and for one without, an
//! HTTP MCP server getting each user's headers on a connection of its own, and a bad
//! `secrets.key` named at load.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::config::parse_config;
use agentd::telemetry::Metrics;
use agentd::tools::caller::{SecretSource, ToolCaller};
use agentd::tools::mcp::McpServer;
use agentd::tools::queue::ToolQueues;
use agentd::tools::{ToolOutcome, ToolProvider};
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::support::binary::{command, project, serve};
use crate::support::mcp_server::serve_http;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const TIMEOUT: Duration = Duration::from_secs(30);

fn with_keys(config: &mut Value) {
    config["secrets"] = json!({"key": KEY_HEX});
    config["auth"] = json!({"keys": [
        {"key": "admin-key", "admin": true},
        {"key": "alice-key", "userId": "alice"},
    ]});
}

async fn keyed_app() -> TestApp {
    spawn_app_with(with_keys).await
}

async fn put(app: &TestApp, key: &str, user: &str, name: &str, body: &Value) -> (u16, Value) {
    let response = app
        .client
        .put(app.url(&format!("/api/{user}/secrets/{name}")))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .expect("sent");
    answer(response).await
}

async fn send(app: &TestApp, method: reqwest::Method, key: &str, path: &str) -> (u16, Value) {
    let response = app
        .client
        .request(method, app.url(path))
        .bearer_auth(key)
        .send()
        .await
        .expect("sent");
    answer(response).await
}

async fn answer(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_user_sets_lists_and_deletes_their_own_secrets_and_never_reads_a_value() {
    let app = keyed_app().await;
    let value = json!({"value": "ghp_alice_only"});
    assert_eq!(
        put(&app, "alice-key", "alice", "GITHUB_TOKEN", &value)
            .await
            .0,
        204
    );
    assert_eq!(
        put(&app, "alice-key", "alice", "other-1", &value).await.0,
        204
    );
    let (status, body) = put(&app, "alice-key", "bob", "GITHUB_TOKEN", &value).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    assert_eq!(
        put(&app, "admin-key", "bob", "GITHUB_TOKEN", &value)
            .await
            .0,
        204
    );
    assert_eq!(
        send(&app, reqwest::Method::GET, "alice-key", "/api/bob/secrets")
            .await
            .0,
        403
    );

    let response = app
        .client
        .get(app.url("/api/alice/secrets"))
        .bearer_auth("alice-key")
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("body");
    assert!(
        !text.contains("ghp_alice_only"),
        "a value was answered: {text}"
    );
    let list: Value = serde_json::from_str(&text).expect("json");
    let names: Vec<&str> = list["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["GITHUB_TOKEN", "other-1"]);
    assert!(list["data"][0]["updated_at"].is_string(), "{list}");
    assert_eq!(
        list["data"][0].as_object().expect("entry").len(),
        2,
        "names and times only: {list}"
    );

    // Replacing keeps one entry; deleting answers 204 once, then 404.
    let replaced = json!({"value": "ghp_new"});
    assert_eq!(
        put(&app, "alice-key", "alice", "GITHUB_TOKEN", &replaced)
            .await
            .0,
        204
    );
    let path = "/api/alice/secrets/GITHUB_TOKEN";
    assert_eq!(
        send(&app, reqwest::Method::DELETE, "alice-key", path)
            .await
            .0,
        204
    );
    let (status, body) = send(&app, reqwest::Method::DELETE, "alice-key", path).await;
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (404, Some("name"))
    );
    let (_, list) = send(
        &app,
        reqwest::Method::GET,
        "admin-key",
        "/api/alice/secrets",
    )
    .await;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1), "{list}");
    let (_, bobs) = send(&app, reqwest::Method::GET, "admin-key", "/api/bob/secrets").await;
    assert_eq!(bobs["data"][0]["name"], "GITHUB_TOKEN");

    // Sealed at rest: the store file never holds a value in the clear.
    app.runtime.close().await;
    let file = app
        .runtime
        .config()
        .store
        .url
        .trim_start_matches("sqlite://")
        .to_string();
    let mut db = std::fs::read(&file).expect("the store file");
    db.extend(std::fs::read(format!("{file}-wal")).unwrap_or_default());
    for clear in ["ghp_alice_only", "ghp_new"] {
        assert!(
            !db.windows(clear.len()).any(|w| w == clear.as_bytes()),
            "{clear} is stored in the clear"
        );
    }
}

#[tokio::test]
async fn names_and_values_are_checked_at_and_past_their_limits() {
    let app = keyed_app().await;
    let at = |name: &str, value: String| (name.to_string(), json!({"value": value}));
    let accepted = [
        at(&"N".repeat(64), "v".into()),
        at("a-b_C9", "x".repeat(8192)),
        at("one", "é".repeat(4096)),
    ];
    for (name, body) in &accepted {
        assert_eq!(
            put(&app, "alice-key", "alice", name, body).await.0,
            204,
            "{name}"
        );
    }
    let refused = [
        (at(&"N".repeat(65), "v".into()), "name"),
        (at("a.b", "v".into()), "name"),
        (at("sp%20ace", "v".into()), "name"),
        (at("ok", String::new()), "value"),
        (at("ok", "x".repeat(8193)), "value"),
        (at("ok", "nul\u{0}here".into()), "value"),
        (
            (String::from("ok"), json!({"value": "v", "extra": 1})),
            "extra",
        ),
        ((String::from("ok"), json!({"value": 5})), "value"),
        ((String::from("ok"), json!({})), ""),
    ];
    for ((name, body), param) in &refused {
        let (status, error) = put(&app, "alice-key", "alice", name, body).await;
        assert_eq!(status, 400, "{name} {body}: {error}");
        if !param.is_empty() {
            assert_eq!(error["error"]["param"], *param, "{name}: {error}");
        }
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(
            !message.contains("xxxxxxxx"),
            "a value in the error: {message}"
        );
    }
    let (status, error) = send(
        &app,
        reqwest::Method::DELETE,
        "alice-key",
        "/api/alice/secrets/a.b",
    )
    .await;
    assert_eq!(
        (status, error["error"]["param"].as_str()),
        (400, Some("name"))
    );
}

#[tokio::test]
async fn without_a_key_the_routes_answer_503_naming_secrets_key() {
    let app = spawn_app_with(|_| {}).await;
    let (status, error) = put(&app, "", "alice", "T", &json!({"value": "v"})).await;
    assert_eq!(status, 503, "{error}");
    assert_eq!(error["error"]["code"], "not_configured");
    assert_eq!(error["error"]["param"], "secrets.key");
    for (method, path) in [
        (reqwest::Method::GET, "/api/alice/secrets"),
        (reqwest::Method::DELETE, "/api/alice/secrets/T"),
    ] {
        let (status, error) = send(&app, method, "", path).await;
        assert_eq!(
            (status, error["error"]["param"].as_str()),
            (503, Some("secrets.key"))
        );
    }
}

#[test]
fn a_bad_secrets_key_is_named_at_load() {
    for key in ["short", "abcd".repeat(15).as_str(), &"zz".repeat(32)] {
        let error = parse_config(json!({"secrets": {"key": key}}), "agentd.json")
            .expect_err("refused")
            .to_string();
        assert!(error.contains("secrets.key"), "{error}");
        assert!(!error.contains(key), "the key is quoted: {error}");
    }
    parse_config(json!({"secrets": {"key": KEY_HEX}}), "agentd.json").expect("hex key");
    parse_config(json!({"secrets": {"key": ""}}), "agentd.json").expect("empty: no key");
}

/// An upstream whose `/whoami/{user}` answers only `Bearer token-of-{user}`; counts requests.
async fn checking_upstream() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    let router = axum::Router::new().route(
        "/whoami/{user}",
        get(move |Path(user): Path<String>, headers: HeaderMap| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                let expected = format!("Bearer token-of-{user}");
                match headers.get("authorization").and_then(|v| v.to_str().ok()) {
                    Some(sent) if sent == expected => (StatusCode::OK, format!("you are {user}")),
                    _ => (StatusCode::UNAUTHORIZED, "bad token".to_string()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (base, hits)
}

fn tool_replies(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(String::from))
        .collect()
}

/// The tool reply the model got in a run for `user` (`None`: a run with no user).
async fn whoami_as(app: &TestApp, user: Option<&str>) -> String {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c1",
        "rest__whoami",
        "{}",
    )]));
    app.llm.push(Reply::text("done"));
    let response = match user {
        Some(user) => {
            app.client
                .post(app.url(&format!("/api/{user}/chat")))
                .bearer_auth("admin-key")
                .json(&json!({"message": "who am I?", "agent": "github"}))
                .send()
                .await
        }
        None => {
            app.client
                .post(app.url("/v1/agents/github/runs"))
                .bearer_auth("admin-key")
                .json(&json!({"prompt": "who am I?"}))
                .send()
                .await
        }
    }
    .expect("run");
    assert_eq!(response.status(), 200);
    let last = app.llm.requests().last().cloned().expect("a request");
    tool_replies(&last).pop().expect("a tool reply")
}

#[tokio::test]
async fn a_rest_tool_sends_each_users_own_secret_and_a_missing_one_fails_the_call() {
    let (base, hits) = checking_upstream().await;
    let agents = tempfile::tempdir().expect("agents");
    std::fs::write(
        agents.path().join("github.ai"),
        "---\ndescription: Asks who the user is\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [rest__whoami]\n---\nYou ask.\n",
    )
    .expect("agent");
    let path = agents.path().display().to_string();
    let app = spawn_app_with(move |config| {
        with_keys(config);
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(path));
        config["restTools"] = json!({"whoami": {
            "description": "Who the caller is",
            "url": format!("{base}/whoami/${{caller.userId}}"),
            "headers": {"Authorization": "Bearer ${caller.secret.TOKEN}"},
            "cache": "1h",
        }});
    })
    .await;
    for user in ["alice", "bob"] {
        let body = json!({"value": format!("token-of-{user}")});
        assert_eq!(put(&app, "admin-key", user, "TOKEN", &body).await.0, 204);
    }
    assert_eq!(whoami_as(&app, Some("alice")).await, "you are alice");
    assert_eq!(whoami_as(&app, Some("bob")).await, "you are bob");
    // Cached per user: alice again is answered from the cache, bob's answer is not hers.
    assert_eq!(whoami_as(&app, Some("alice")).await, "you are alice");
    assert_eq!(hits.load(Ordering::SeqCst), 2);

    let reply = whoami_as(&app, Some("carol")).await;
    assert_eq!(
        reply,
        "(tool failed: the secret TOKEN is not set for this user: PUT /api/carol/secrets/TOKEN)"
    );
    let reply = whoami_as(&app, None).await;
    assert!(
        reply.starts_with("(tool failed: ") && reply.contains("no user"),
        "{reply}"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "the tool was never called for them"
    );
    app.runtime.close().await;
}

/// Secrets of two users, read by an HTTP MCP server's headers.
struct TwoUsers;

#[async_trait::async_trait]
impl SecretSource for TwoUsers {
    async fn secret(&self, user_id: &str, name: &str) -> Result<Option<SecretString>, String> {
        Ok(match (user_id, name) {
            ("alice" | "bob", "T") => Some(SecretString::from(format!("t-{user_id}"))),
            _ => None,
        })
    }
}

#[tokio::test]
async fn an_http_mcp_server_gets_each_users_headers_on_their_own_connection() {
    let http = serve_http().await.expect("http test server");
    let config = parse_config(
        json!({"mcpServers": {"web": {"url": http.url, "headers": {
            "X-User": "${caller.userId}", "X-Token": "${caller.secret.T}", "X-Team": "blue"}}}}),
        "test",
    )
    .expect("config");
    let metrics = Metrics::new().expect("metrics");
    let queues = ToolQueues::new(&config.queues, &metrics);
    let queue = queues.get("default").expect("queue");
    let server = McpServer::start("web", &config.mcp_servers["web"], queue)
        .await
        .expect("the shared connection starts without the caller's headers");
    assert!(
        server
            .list_tools()
            .await
            .iter()
            .any(|t| t.name == "web__echo"),
        "the model is offered the tools"
    );
    let caller = |user: Option<&str>| ToolCaller {
        user_id: user.map(str::to_string),
        secrets: Some(Arc::new(TwoUsers)),
    };
    let echo = |who: ToolCaller| {
        let server = Arc::clone(&server);
        async move {
            server
                .call_reporting("echo", json!({"text": "hi"}), TIMEOUT, Arc::default(), &who)
                .await
        }
    };
    for user in ["alice", "bob", "alice"] {
        assert_eq!(
            echo(caller(Some(user))).await,
            ToolOutcome::Ok("hi".into()),
            "{user}"
        );
    }
    let seen = http.seen_headers.lock().expect("headers").clone();
    let count =
        |name: &str, value: &str| seen.iter().filter(|(n, v)| n == name && v == value).count();
    for user in ["alice", "bob"] {
        assert!(count("x-user", user) > 0, "{user}'s id: {seen:?}");
        assert!(
            count("x-token", &format!("t-{user}")) > 0,
            "{user}'s token: {seen:?}"
        );
    }
    assert!(count("x-team", "blue") > 0);
    assert!(
        !seen.iter().any(|(n, v)| n == "x-user" && v.contains("${")),
        "the shared connection sends no placeholder: {seen:?}"
    );
    let missing = echo(caller(Some("carol"))).await;
    assert_eq!(
        missing,
        ToolOutcome::Failed(
            "the secret T is not set for this user: PUT /api/carol/secrets/T".into()
        )
    );
    assert!(
        matches!(echo(caller(None)).await, ToolOutcome::Failed(reason) if reason.contains("no user"))
    );
    server.shutdown().await;
    http.stop.cancel();
}

#[tokio::test]
async fn a_stdio_mcp_server_may_not_use_caller_placeholders() {
    let error = parse_config(
        json!({"mcpServers": {"fs": {"command": "srv", "env": {"TOKEN": "${caller.secret.T}"}}}}),
        "agentd.json",
    )
    .and_then(|config| {
        agentd::config::tools::validate_tools(&config, "agentd.json").map(|_| config)
    })
    .expect_err("refused")
    .to_string();
    assert!(
        error.contains("mcpServers.fs.env.TOKEN") && error.contains("stdio"),
        "{error}"
    );
}

/// The real binary at debug level: a stored value and the body carrying it appear in no log line.
#[tokio::test]
async fn a_secret_value_never_reaches_the_log() {
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9"}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite::memory:"},
        "secrets": {"key": KEY_HEX},
    }));
    let mut agentd = command(dir.path());
    agentd
        .env("RUST_LOG", "debug")
        .args(["serve", "--config", "agentd.json"]);
    let before = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&before);
    let mut served = serve(agentd, move |line| {
        if let Ok(mut lines) = kept.lock() {
            lines.push(line.to_string());
        }
    })
    .await;
    let client = reqwest::Client::new();
    let base = format!("http://{}", served.address);
    let secret = "sk-live-NEVER-LOGGED-4711";
    let response = client
        .put(format!("{base}/api/alice/secrets/TOKEN"))
        .json(&json!({"value": secret}))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 204);
    let response = client
        .put(format!("{base}/api/alice/secrets/bad.name"))
        .json(&json!({"value": secret}))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 400);
    let listed = client
        .get(format!("{base}/api/alice/secrets"))
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("body");
    assert!(!listed.contains(secret));
    // The request lines of all three are logged by now (each is written before its answer).
    // At debug level the background loops (schedules, webhooks, retention) log without pause,
    // so the log is read for a fixed while rather than until it falls quiet.
    let mut lines = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while let Ok(Some(line)) = tokio::time::timeout_at(deadline, served.log.recv()).await {
        lines.push(line);
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("/api/{user_id}/secrets/{name}") || l.contains("request")),
        "the requests were logged: {lines:?}"
    );
    let all: Vec<String> = before
        .lock()
        .expect("lines")
        .iter()
        .cloned()
        .chain(lines)
        .collect();
    assert!(
        !all.iter().any(|l| l.contains(secret)),
        "the value was logged: {all:?}"
    );
    let _ = served.child.kill().await;
}
