//! Health, readiness, models, metrics and the error format of unknown routes.

use serde_json::{Value, json};

use crate::support::spawn_app;

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

#[tokio::test]
async fn the_openapi_document_describes_every_route_the_router_serves() {
    let app = spawn_app().await;
    let document: Value = app.get("/openapi.json").await.json().await.expect("json");
    assert_eq!(document["openapi"], "3.1.0");
    let mut documented = 0;
    for operation in agentd::http::openapi::OPERATIONS {
        let path = operation
            .path
            .replace("{agent}", "chat")
            .replace("{run_id}", "r")
            .replace("{user_id}", "u")
            .replace("{id}", "c");
        let method = reqwest::Method::from_bytes(operation.method.to_uppercase().as_bytes())
            .expect("method");
        let response = app
            .client
            .request(method, app.url(&path))
            .send()
            .await
            .expect("sent");
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        assert!(
            status != 405 && !body.contains("No such route"),
            "{} {} is documented but not served: {status} {body}",
            operation.method,
            operation.path
        );
        assert!(document["paths"][operation.path][operation.method]["summary"].is_string());
        documented += 1;
    }
    assert_eq!(documented, 17);
}
