//! Health, readiness, models, metrics, the error format of unknown routes, and the OpenAPI
//! document: every route in it, valid by `openapi-spec-validator` (PyPI), and its snapshot.

use serde_json::{Value, json};

use crate::support::python_tool::{PythonTool, installed};
use crate::support::spawn_app;

/// The OpenAPI validator the document must pass, pinned (`.ci/run` installs the same).
const OPENAPI_SPEC_VALIDATOR: PythonTool = PythonTool {
    binary: "openapi-spec-validator",
    package: "openapi-spec-validator",
    version: "0.9.0",
    env_var: "AGENTD_TEST_OPENAPI_SPEC_VALIDATOR",
};

#[tokio::test]
async fn health_and_ready_answer() {
    let app = spawn_app().await;
    let health = app.get("/health").await;
    assert_eq!(health.status(), 200);
    assert_eq!(
        health.json::<Value>().await.expect("json"),
        json!({"status": "ok"})
    );
    let ready = app.get("/ready").await;
    assert_eq!(ready.status(), 200);
    assert_eq!(
        ready.json::<Value>().await.expect("json"),
        json!({"status": "ready"})
    );
}

#[tokio::test]
async fn models_lists_every_agent_as_a_model() {
    let app = spawn_app().await;
    let response = app.get("/v1/models").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["object"], "list");
    let ids: Vec<&str> = body["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|m| m["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, vec!["chat", "fallback", "report", "tight"]);
    for model in body["data"].as_array().expect("data") {
        assert_eq!(model["object"], "model");
        assert_eq!(model["owned_by"], "agentd");
        assert!(model["created"].as_i64().expect("created") > 0);
    }
}

#[tokio::test]
async fn unknown_route_is_a_json_404() {
    let app = spawn_app().await;
    let response = app.get("/v1/nope").await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["code"], "not_found");
    let wrong_method = app.get("/v1/chat/completions").await;
    assert_eq!(wrong_method.status(), 405);
    assert_eq!(
        wrong_method.json::<Value>().await.expect("json")["error"]["code"],
        "invalid_request"
    );
}

#[tokio::test]
async fn an_unknown_route_points_to_the_openapi_document() {
    let app = spawn_app().await;
    let body: Value = app.get("/v1/nope").await.json().await.expect("json");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains("/openapi.json"), "{message}");
    assert!(!message.contains("SPEC"), "{message}");
}

#[tokio::test]
async fn metrics_count_requests_by_route_template_and_sessions() {
    let app = spawn_app().await;
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(
        app.post_json("/v1/chat/completions", &body).await.status(),
        200
    );
    app.get("/v1/does/not/exist/123").await;
    let response = app.get("/metrics").await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .expect("ct")
            .starts_with("text/plain")
    );
    let text = response.text().await.expect("text");
    assert!(text.contains(r#"agentd_http_requests_total{method="POST",route="/v1/chat/completions",status="200"} 1"#), "{text}");
    assert!(
        text.contains(
            r#"agentd_http_requests_total{method="GET",route="unmatched",status="404"} 1"#
        ),
        "{text}"
    );
    assert!(
        !text.contains("/v1/does/not/exist"),
        "raw paths must never become labels"
    );
    assert!(text.contains("agentd_sessions_active 0"), "{text}");
    assert!(
        text.contains(r#"agentd_overhead_seconds_count{agent="chat"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"agentd_sessions_total{agent="chat",exit_reason="final_answer"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"ai_agent_llm_requests_total{agent="chat",model="upstream-model",provider="llm",status="ok"} 1"#), "{text}");
}

#[tokio::test]
async fn a_context_guard_trip_shows_in_the_metrics() {
    let app = spawn_app().await;
    let long = "word ".repeat(2000);
    let body = json!({"model": "tight", "messages": [{"role": "user", "content": long}]});
    assert_eq!(
        app.post_json("/v1/chat/completions", &body).await.status(),
        200
    );
    let text = app.get("/metrics").await.text().await.expect("text");
    let series = r#"ai_agent_context_guard_events_total{agent="tight",model="upstream-model",outcome="forced_final",provider="llm",trigger="turn_preflight"} 1"#;
    assert!(text.contains(series), "{text}");
    assert!(text.contains(r#"ai_agent_context_guard_remaining_tokens{agent="tight",model="upstream-model",outcome="over_after_shrink",provider="llm",trigger="turn_preflight"} -"#), "{text}");
    assert!(
        text.contains(r#"ai_agent_final_report_total{agent="tight",status="success"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn tool_names_the_model_made_up_never_become_label_values() {
    let app = spawn_app().await;
    let call = crate::support::mock_llm::ToolCall::new("c1", "invented__tool_name_42", "{}");
    app.llm
        .push(crate::support::mock_llm::Reply::tool_calls(vec![call]));
    let report = json!({"report_format": "markdown", "report_content": "done"}).to_string();
    app.llm
        .push(crate::support::mock_llm::Reply::tool_calls(vec![
            crate::support::mock_llm::ToolCall::new("f", "agent__final_report", report),
        ]));
    let body = json!({"model": "report", "messages": [{"role": "user", "content": "go"}]});
    assert_eq!(
        app.post_json("/v1/chat/completions", &body).await.status(),
        200
    );
    let text = app.get("/metrics").await.text().await.expect("text");
    assert!(!text.contains("invented__tool_name_42"), "{text}");
    assert!(
        text.contains(
            r#"ai_agent_tool_errors_total{agent="report",server="unknown",tool="unknown"} 1"#
        ),
        "{text}"
    );
}

/// A documented path with its parameters filled in, so the router can match it.
fn concrete(path: &str) -> String {
    path.replace("{agent}", "chat")
        .replace("{run_id}", "r")
        .replace("{user_id}", "u")
        .replace("{id}", "c")
        .replace("{model}", "chat")
}

/// Whether the app serves `method path`: neither the 405 of a known path nor the 404 fallback.
async fn is_served(app: &crate::support::TestApp, method: &str, path: &str) -> (bool, String) {
    let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
    let response = app
        .client
        .request(method, app.url(&concrete(path)))
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    let served = status != 405 && !body.contains("No such route");
    (served, format!("{status} {body}"))
}

const METHODS: [&str; 6] = ["get", "post", "put", "patch", "delete", "options"];

#[tokio::test]
async fn every_operation_of_the_openapi_document_is_served() {
    let app = spawn_app().await;
    let document: Value = app.get("/openapi.json").await.json().await.expect("json");
    assert_eq!(document["openapi"], "3.1.0");
    let mut documented = 0;
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            assert!(METHODS.contains(&method.as_str()), "{method} {path}");
            let (served, answer) = is_served(&app, method, path).await;
            assert!(
                served,
                "{method} {path} is documented but not served: {answer}"
            );
            assert!(operation["summary"].is_string(), "{method} {path}");
            documented += 1;
        }
    }
    // A floor, not a count: the routes of later work add to it.
    assert!(documented >= 23, "{documented} operations");
}

/// The paths axum's router holds. utoipa-axum cannot list the routes of an `OpenApiRouter`
/// (a plain `.route()` on it bypasses the document), but axum's `Router` prints its route table
/// in its `Debug` output (`path_router: … paths: {RouteId(0): "/health", …}`, then the
/// `fallback_router`'s catch-all paths): every quoted string before the fallback router that
/// starts with `/` is a served path.
fn router_paths() -> Vec<String> {
    let (router, _) = agentd::http::routes().split_for_parts();
    let printed = format!("{router:?}");
    let (served, _fallback) = printed
        .split_once("fallback_router")
        .expect("axum's Router prints its path router, then its fallback router");
    let mut paths: Vec<String> = served
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|quoted| quoted.starts_with('/'))
        .map(str::to_string)
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

#[tokio::test]
async fn every_route_the_router_serves_is_in_the_openapi_document() {
    let paths = router_paths();
    let app = spawn_app().await;
    let document: Value = app.get("/openapi.json").await.json().await.expect("json");
    for path in &paths {
        let item = &document["paths"][path.as_str()];
        assert!(item.is_object(), "{path} is served but not documented");
        for method in METHODS {
            if is_served(&app, method, path).await.0 {
                assert!(
                    item[method].is_object(),
                    "{method} {path} is served but not documented"
                );
            }
        }
    }
    // Guards the Debug parsing itself: a change in axum's output must not make this test empty.
    assert!(paths.len() >= 22, "{paths:?}");
}

/// The whole contract: a change to any body, route or description shows in review as a change
/// of `snapshots/api__operations__openapi_document.snap`.
#[tokio::test]
async fn the_openapi_document_matches_its_snapshot() {
    let app = spawn_app().await;
    let document: Value = app.get("/openapi.json").await.json().await.expect("json");
    insta::assert_json_snapshot!("openapi_document", document);
}

/// `openapi-spec-validator` checks what schemathesis and the snapshot do not: the document
/// against the OpenAPI 3.1 schema and its rules (every path parameter in its path, unique
/// operation ids, resolvable references).
#[tokio::test]
async fn the_openapi_document_passes_openapi_spec_validator() {
    let validator = installed(&OPENAPI_SPEC_VALIDATOR);
    let app = spawn_app().await;
    let document = app.get("/openapi.json").await.text().await.expect("text");
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, document).expect("written");
    let checked = tokio::process::Command::new(validator)
        .args(["--validation-errors", "all"])
        .arg(&path)
        .output()
        .await
        .expect("openapi-spec-validator runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(checked.status.success(), "{said}");
    assert!(said.trim_end().ends_with("OK"), "{said}");
}
