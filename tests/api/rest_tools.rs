//! REST tools against a small axum upstream: URL-encoded parameters, a single-placeholder JSON
//! body, templated headers, validation, missing parameters, error statuses with a capped
//! excerpt, the response size limit at and past it, and the timeout.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd::config::parse_config;
use agentd::telemetry::Metrics;
use agentd::tools::queue::ToolQueues;
use agentd::tools::rest::{MAX_RESPONSE_BYTES, RestTools};
use agentd::tools::{ToolOutcome, ToolProvider};
use axum::extract::{Path, RawQuery, Request};
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(30);

/// What the upstream saw of the last request.
#[derive(Default, Clone, Debug)]
struct Seen {
    raw_query: Option<String>,
    body: String,
    headers: BTreeMap<String, String>,
}

async fn upstream() -> (String, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let search_seen = Arc::clone(&seen);
    let items_seen = Arc::clone(&seen);
    let router = axum::Router::new()
        .route(
            "/search",
            get(move |RawQuery(query): RawQuery| async move {
                if let Ok(mut seen) = search_seen.lock() {
                    seen.raw_query = query.clone();
                }
                format!("results for {}", query.unwrap_or_default())
            }),
        )
        .route(
            "/items/{id}",
            post(move |Path(id): Path<String>, request: Request| async move {
                let headers = request
                    .headers()
                    .iter()
                    .map(|(n, v)| {
                        (
                            n.to_string(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect();
                let body = axum::body::to_bytes(request.into_body(), usize::MAX)
                    .await
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                if let Ok(mut seen) = items_seen.lock() {
                    seen.body = body;
                    seen.headers = headers;
                }
                format!("stored {id}")
            }),
        )
        .route(
            "/bytes/{n}",
            get(|Path(n): Path<usize>| async move { "y".repeat(n) }),
        )
        .route(
            "/broken",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "e".repeat(1000)) }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(20)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (base, seen)
}

fn tools(rest_tools: Value) -> RestTools {
    let config = parse_config(json!({"restTools": rest_tools}), "test").expect("config");
    let metrics = Metrics::new().expect("metrics");
    let queues = ToolQueues::new(&config.queues, &metrics);
    RestTools::build(&config.rest_tools, &queues).expect("tools build")
}

#[tokio::test]
async fn url_parameters_are_encoded_and_the_answer_returned() {
    let (base, seen) = upstream().await;
    let rest = tools(json!({"search": {
        "description": "Searches",
        "url": format!("{base}/search?q=${{parameters.q}}&page=${{parameters.page}}"),
        "parametersSchema": {"type": "object", "properties": {
            "q": {"type": "string"}, "page": {"type": "integer"}}, "required": ["q", "page"]},
    }}));
    let definitions = rest.list_tools().await;
    assert_eq!(definitions[0].name, "rest__search");
    assert_eq!(definitions[0].parameters["required"], json!(["q", "page"]));
    let outcome = rest
        .call(
            "search",
            json!({"q": "fish & chips/é?", "page": 2}),
            TIMEOUT,
        )
        .await;
    let raw = seen.lock().expect("seen").raw_query.clone().expect("query");
    assert_eq!(raw, "q=fish%20%26%20chips%2F%C3%A9%3F&page=2");
    assert_eq!(outcome, ToolOutcome::Ok(format!("results for {raw}")));
}

#[tokio::test]
async fn a_single_placeholder_body_is_sent_as_raw_json_with_templated_headers() {
    let (base, seen) = upstream().await;
    let rest = tools(json!({"store": {
        "method": "POST",
        "url": format!("{base}/items/${{parameters.id}}"),
        "headers": {"X-Trace": "trace-${parameters.id}"},
        "bodyTemplate": "${parameters.item}",
        "parametersSchema": {"type": "object", "properties": {
            "id": {"type": "string"}, "item": {"type": "object"}}, "required": ["id", "item"]},
    }}));
    let item = json!({"name": "lamp", "tags": ["a", "b"], "price": 12.5});
    let outcome = rest
        .call("store", json!({"id": "a b", "item": item}), TIMEOUT)
        .await;
    assert_eq!(outcome, ToolOutcome::Ok("stored a b".into()));
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(
        serde_json::from_str::<Value>(&seen.body).expect("JSON body"),
        item
    );
    assert_eq!(seen.headers["content-type"], "application/json");
    assert_eq!(seen.headers["x-trace"], "trace-a b");
}

#[tokio::test]
async fn invalid_and_missing_parameters_fail_before_any_request() {
    let (base, seen) = upstream().await;
    let rest = tools(json!({"search": {
        "url": format!("{base}/search?q=${{parameters.q}}&lang=${{parameters.lang}}"),
        "parametersSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    }}));
    let invalid = rest.call("search", json!({"q": 3}), TIMEOUT).await;
    assert!(
        matches!(&invalid, ToolOutcome::Failed(r) if r.starts_with("invalid arguments: /q: 3 is not of type \"string\"")),
        "{invalid:?}"
    );
    let missing = rest.call("search", json!({"q": "x"}), TIMEOUT).await;
    assert_eq!(
        missing,
        ToolOutcome::Failed("url: missing parameter \"lang\"".into())
    );
    assert!(
        seen.lock().expect("seen").raw_query.is_none(),
        "no request was made"
    );
}

#[tokio::test]
async fn an_error_status_fails_with_a_short_excerpt() {
    let (base, _) = upstream().await;
    let rest = tools(json!({"broken": {"url": format!("{base}/broken")}}));
    let ToolOutcome::Failed(reason) = rest.call("broken", json!({}), TIMEOUT).await else {
        panic!("a 500 must fail")
    };
    assert_eq!(
        reason,
        format!("HTTP 500 Internal Server Error: {}", "e".repeat(500)),
        "the excerpt stops at 500 characters"
    );
}

#[tokio::test]
async fn responses_up_to_the_limit_are_returned_and_larger_ones_fail() {
    let (base, _) = upstream().await;
    let rest = tools(json!({"bytes": {
        "url": format!("{base}/bytes/${{parameters.n}}"),
        "parametersSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    }}));
    match rest
        .call("bytes", json!({"n": MAX_RESPONSE_BYTES}), TIMEOUT)
        .await
    {
        ToolOutcome::Ok(text) => assert_eq!(text.len(), MAX_RESPONSE_BYTES),
        failed => panic!("at the limit: {failed:?}"),
    }
    let past = rest
        .call("bytes", json!({"n": MAX_RESPONSE_BYTES + 1}), TIMEOUT)
        .await;
    assert_eq!(
        past,
        ToolOutcome::Failed(format!(
            "the response is larger than {MAX_RESPONSE_BYTES} bytes"
        ))
    );
}

#[tokio::test]
async fn the_tool_timeout_ends_a_slow_request() {
    let (base, _) = upstream().await;
    let rest = tools(json!({"slow": {"url": format!("{base}/slow"), "timeout": "200ms"}}));
    let started = Instant::now();
    assert_eq!(
        rest.call("slow", json!({}), TIMEOUT).await,
        ToolOutcome::Unreachable("timeout".into())
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let uncapped = tools(json!({"slow": {"url": format!("{base}/slow")}}));
    assert_eq!(
        uncapped
            .call("slow", json!({}), Duration::from_millis(200))
            .await,
        ToolOutcome::Unreachable("timeout".into()),
        "the agent's tool timeout applies too"
    );
}

#[test]
fn a_parameters_schema_that_does_not_compile_is_a_start_error() {
    let config = parse_config(
        json!({"restTools": {"odd": {"url": "http://x", "parametersSchema": {"type": "nope"}}}}),
        "test",
    )
    .expect("config");
    let metrics = Metrics::new().expect("metrics");
    let queues = ToolQueues::new(&config.queues, &metrics);
    let err = RestTools::build(&config.rest_tools, &queues)
        .err()
        .expect("fails")
        .to_string();
    assert!(err.starts_with("restTools.odd.parametersSchema"), "{err}");
}
