//! The layers around every route: CORS from `server.corsOrigins` (preflight answered before
//! authentication), the `x-request-id` taken or made and returned, and the one log line per
//! request of the real binary (method, route template, status, latency, key id, request id —
//! never the key).

use std::time::Duration;

use serde_json::json;

use crate::support::mock_llm::MockLlm;
use crate::support::{TestApp, binary, spawn_app, spawn_app_with};

const ORIGIN: &str = "http://localhost:3000";

/// `GET path` with one extra header.
async fn get_with(app: &TestApp, path: &str, name: &str, value: &str) -> reqwest::Response {
    app.client
        .get(app.url(path))
        .header(name, value)
        .send()
        .await
        .expect("sent")
}

#[tokio::test]
async fn a_configured_origin_may_call_agentd_and_its_preflight_needs_no_key() {
    let app = spawn_app_with(|config| {
        config["server"] = json!({"corsOrigins": [ORIGIN]});
        config["auth"] = json!({"keys": [{"key": "admin-key", "admin": true}]});
    })
    .await;
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/v1/chat/completions"))
        .header("origin", ORIGIN)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(preflight.status(), 200, "no key is asked of a preflight");
    let headers = preflight.headers();
    assert_eq!(headers["access-control-allow-origin"], ORIGIN);
    let allowed = headers["access-control-allow-headers"]
        .to_str()
        .expect("text");
    assert!(allowed.contains("authorization") && allowed.contains("content-type"));
    assert!(
        headers["access-control-allow-methods"]
            .to_str()
            .expect("text")
            .contains("POST")
    );

    let listed = app
        .client
        .get(app.url("/v1/models"))
        .header("origin", ORIGIN)
        .bearer_auth("admin-key")
        .send()
        .await
        .expect("sent");
    assert_eq!(listed.status(), 200);
    assert_eq!(listed.headers()["access-control-allow-origin"], ORIGIN);
    let exposed = listed.headers()["access-control-expose-headers"]
        .to_str()
        .expect("text");
    assert!(
        exposed.contains("x-agentd-run-id"),
        "scripts may read the run id"
    );

    let refused = get_with(&app, "/v1/models", "origin", ORIGIN).await;
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.headers()["access-control-allow-origin"],
        ORIGIN,
        "the page can read why it was refused"
    );

    let other = get_with(&app, "/health", "origin", "http://evil.example").await;
    assert!(
        other.headers().get("access-control-allow-origin").is_none(),
        "an origin not in the list gets no CORS headers"
    );
}

#[tokio::test]
async fn without_cors_origins_no_page_on_another_origin_may_read_answers() {
    let app = spawn_app().await;
    let response = get_with(&app, "/v1/models", "origin", ORIGIN).await;
    assert_eq!(response.status(), 200);
    assert!(
        response
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

#[tokio::test]
async fn a_star_allows_every_origin() {
    let app = spawn_app_with(|config| config["server"] = json!({"corsOrigins": ["*"]})).await;
    let response = get_with(&app, "/v1/models", "origin", "https://anywhere.example").await;
    assert_eq!(response.headers()["access-control-allow-origin"], "*");
}

#[test]
fn a_malformed_origin_is_a_config_error_naming_the_entry() {
    let error = agentd::config::parse_config(
        json!({"server": {"corsOrigins": [ORIGIN, "https://app.example.com/"]}}),
        "agentd.json",
    )
    .expect_err("a path is not part of an origin");
    let text = error.to_string();
    assert!(
        text.contains("server.corsOrigins[1]") && text.contains("scheme://host[:port]"),
        "{text}"
    );
}

#[tokio::test]
async fn every_answer_carries_the_request_id_the_client_sent_or_a_new_one() {
    let app = spawn_app().await;
    let given = get_with(&app, "/health", "x-request-id", "trace-me-42").await;
    assert_eq!(given.headers()["x-request-id"], "trace-me-42");

    let made = app.get("/no/such/route").await;
    assert_eq!(made.status(), 404);
    let id = made.headers()["x-request-id"].to_str().expect("text");
    assert!(
        uuid::Uuid::parse_str(id).is_ok(),
        "a fresh id is made: {id}"
    );

    for unusable in ["x".repeat(129), "has space".to_string()] {
        let replaced = get_with(&app, "/health", "x-request-id", &unusable).await;
        let id = replaced.headers()["x-request-id"].to_str().expect("text");
        assert_ne!(id, unusable);
        assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    }
    let at_limit = "y".repeat(128);
    let kept = get_with(&app, "/health", "x-request-id", &at_limit).await;
    assert_eq!(kept.headers()["x-request-id"], at_limit.as_str());
}

#[tokio::test]
async fn a_request_target_past_16_kib_is_a_414_in_the_json_error_shape() {
    let app = spawn_app().await;
    let target = |length: usize| format!("/health?{}", "q".repeat(length - "/health?".len()));

    let at_limit = app.get(&target(16 * 1024)).await;
    assert_eq!(at_limit.status(), 200);

    let past = app.get(&target(16 * 1024 + 1)).await;
    assert_eq!(past.status(), 414);
    assert!(past.headers().contains_key("x-request-id"));
    let body: serde_json::Value = past.json().await.expect("a JSON body");
    assert_eq!(body["error"]["code"], "uri_too_long");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("16385") && message.contains("16384"),
        "{message}"
    );
}

#[tokio::test]
async fn the_404_body_points_to_what_a_user_has() {
    let app = spawn_app().await;
    let body = app.get("/v2/nothing").await.text().await.expect("text");
    assert!(body.contains("/openapi.json"), "{body}");
    assert!(!body.contains("SPEC"), "{body}");
}

#[tokio::test]
async fn the_binary_logs_one_line_per_request_with_its_key_id_and_never_the_key() {
    let llm = MockLlm::start().await;
    let dir = binary::project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0"},
        "auth": {"keys": [
            {"key": "sk-admin-very-secret", "admin": true},
            {"key": "sk-alice-very-secret", "userId": "alice", "id": "alice-laptop"},
        ]},
        "store": {"url": "sqlite://agentd.db"},
    }));
    let mut seen = Vec::new();
    let mut command = binary::command(dir.path());
    command.args(["serve", "--config", "agentd.json"]);
    let mut served = binary::serve(command, |line| seen.push(line.to_string())).await;
    let address = served.address.clone();
    let client = reqwest::Client::new();
    let chat = client
        .post(format!("http://{address}/v1/chat/completions"))
        .bearer_auth("sk-alice-very-secret")
        .header("x-request-id", "req-alice-1")
        .json(&json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("sent");
    assert_eq!(chat.status(), 200);
    let runs = client
        .get(format!("http://{address}/v1/runs/some-run"))
        .bearer_auth("sk-admin-very-secret")
        .header("x-request-id", "req-admin-2")
        .send()
        .await
        .expect("sent");
    assert_eq!(runs.status(), 404);

    let found = tokio::time::timeout(Duration::from_secs(20), async {
        let mut found = (None, None);
        while let Some(line) = served.log.recv().await {
            if line.contains("message=request ") && line.contains("request_id=req-alice-1") {
                found.0 = Some(line.clone());
            }
            if line.contains("message=request ") && line.contains("request_id=req-admin-2") {
                found.1 = Some(line.clone());
            }
            seen.push(line);
            if let (Some(a), Some(b)) = &found {
                return (a.clone(), b.clone());
            }
        }
        panic!("no request lines in {seen:?}");
    })
    .await
    .expect("the request lines are logged in time");
    let (alice, admin) = found;
    for expected in [
        "method=POST",
        "route=/v1/chat/completions",
        "status=200",
        "latency_ms=",
        "key_id=alice-laptop",
    ] {
        assert!(alice.contains(expected), "{expected} in {alice}");
    }
    for expected in [
        "method=GET",
        "route=/v1/runs/{run_id}",
        "status=404",
        "key_id=keys[0]",
    ] {
        assert!(admin.contains(expected), "{expected} in {admin}");
    }
    let _ = served.child.start_kill();
    let _ = served.child.wait().await;
    while let Some(line) = served.log.recv().await {
        seen.push(line);
    }
    let all = seen.join("\n") + &alice + &admin;
    assert!(
        !all.contains("very-secret"),
        "a key reached the log:\n{all}"
    );
}
