//! Tool policies through whole runs, as a user sees them: the tool result cache (`cache`,
//! `toolsCache`) answers identical calls without calling the tool — whatever the order and
//! spacing of the arguments — never keeps empty or failed results, keeps users of `userScoped`
//! agents apart and works on Redis; `retries` tries a call that got no answer again (a 503
//! gateway, a refused connection) with every try accounted, never retries a tool's own error,
//! and stops at its limit. Bad policies are config errors naming the key.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::Query;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};

use agentd::config::parse_config;
use agentd::config::tools::validate_tools;

use crate::store::cache_conformance::{delete_redis_keys, redis_url};
use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

/// How many requests each upstream route has had.
#[derive(Default)]
struct Hits {
    lookup: AtomicUsize,
    empty: AtomicUsize,
    flaky: AtomicUsize,
    refuses: AtomicUsize,
}

/// An upstream with a lookup that numbers its answers, an empty answer, a gateway that fails
/// twice before it answers, and a 400.
async fn upstream() -> (String, Arc<Hits>) {
    let hits = Arc::new(Hits::default());
    let (lookup, empty, flaky, refuses) = (
        Arc::clone(&hits),
        Arc::clone(&hits),
        Arc::clone(&hits),
        Arc::clone(&hits),
    );
    let router = axum::Router::new()
        .route(
            "/lookup",
            get(
                move |Query(query): Query<std::collections::BTreeMap<String, String>>| async move {
                    let n = lookup.lookup.fetch_add(1, Ordering::SeqCst) + 1;
                    format!("found {} #{n}", query.get("q").cloned().unwrap_or_default())
                },
            ),
        )
        .route(
            "/empty",
            get(move || async move {
                empty.empty.fetch_add(1, Ordering::SeqCst);
                ""
            }),
        )
        .route(
            "/flaky",
            get(move || async move {
                let n = flaky.flaky.fetch_add(1, Ordering::SeqCst) + 1;
                if n <= 2 {
                    (StatusCode::SERVICE_UNAVAILABLE, "try later".to_string())
                } else {
                    (StatusCode::OK, format!("answered on try {n}"))
                }
            }),
        )
        .route(
            "/refuses",
            get(move || async move {
                refuses.refuses.fetch_add(1, Ordering::SeqCst);
                (StatusCode::BAD_REQUEST, "no such thing")
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

const TOOLS: &str = "[rest__lookup, rest__empty, rest__flaky, rest__refuses, rest__down]";

fn agent_file(extra: &str) -> String {
    format!(
        "---\ndescription: Looks things up\nmodels: llm/upstream-model\nfinalization: text\n\
         transport: native\ntools: {TOOLS}\n{extra}---\nYou look things up.\n"
    )
}

/// The REST tools of these tests, on `base`.
fn rest_tools(base: &str) -> Value {
    json!({
        "lookup": {
            "url": format!("{base}/lookup?q=${{parameters.q}}"),
            "parametersSchema": {"type": "object", "properties": {
                "q": {"type": "string"}, "page": {"type": "integer"}, "user_id": {"type": "string"}},
                "required": ["q"]},
            "cache": "1h",
        },
        "empty": {"url": format!("{base}/empty"), "cache": "1h"},
        "flaky": {"url": format!("{base}/flaky"), "retries": 2},
        "refuses": {"url": format!("{base}/refuses"), "cache": "1h", "retries": 3},
        // Nothing listens on port 9: every try is refused.
        "down": {"url": "http://127.0.0.1:9/down", "retries": 3},
    })
}

/// The app with the tools on `base`, the agents `looker` and `scoped` (userScoped), and the
/// config adjusted by `adjust`.
async fn app_with(base: &str, adjust: impl FnOnce(&mut Value)) -> (TestApp, tempfile::TempDir) {
    let agents = tempfile::tempdir().expect("agents");
    std::fs::write(agents.path().join("looker.ai"), agent_file("")).expect("agent");
    std::fs::write(
        agents.path().join("scoped.ai"),
        agent_file("userScoped: true\n"),
    )
    .expect("agent");
    let path = agents.path().display().to_string();
    let tools = rest_tools(base);
    let app = spawn_app_with(move |config| {
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(path));
        config["restTools"] = tools;
        adjust(config);
    })
    .await;
    (app, agents)
}

/// Runs `looker` once with the model calling `tool` with `arguments` (written as given), and
/// returns the run's result.
async fn run_calling(app: &TestApp, tool: &str, arguments: &str) -> Value {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1", tool, arguments,
    )]));
    app.llm.push(Reply::text("done"));
    let response = app
        .post_json("/v1/agents/looker/runs", &json!({"prompt": "look it up"}))
        .await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("result")
}

/// The accounting entries of `tool` in a run's result.
fn tool_entries(result: &Value, tool: &str) -> Vec<Value> {
    result["accounting"]
        .as_array()
        .expect("accounting")
        .iter()
        .filter(|entry| entry["type"] == "tool" && entry["command"] == tool)
        .cloned()
        .collect()
}

/// What the model was told by the tool in the last run: the last `tool` message it was sent.
fn last_tool_reply(app: &TestApp) -> String {
    app.llm
        .requests()
        .iter()
        .rev()
        .find_map(|request| {
            request["messages"].as_array().and_then(|messages| {
                messages
                    .iter()
                    .rev()
                    .find(|m| m["role"] == "tool")
                    .and_then(|m| m["content"].as_str().map(String::from))
            })
        })
        .expect("a tool reply was sent to the model")
}

/// Fails unless `/metrics` has `line`.
async fn assert_metric(app: &TestApp, line: &str) {
    let metrics = app.get("/metrics").await.text().await.expect("metrics");
    assert!(metrics.contains(line), "no {line} in {metrics}");
}

#[tokio::test]
async fn identical_calls_are_answered_from_the_tool_cache() {
    let (base, hits) = upstream().await;
    let (app, _agents) = app_with(&base, |_| {}).await;

    let first = run_calling(&app, "rest__lookup", r#"{"q": "rust", "page": 1}"#).await;
    assert_eq!(hits.lookup.load(Ordering::SeqCst), 1);
    assert_eq!(last_tool_reply(&app), "found rust #1");
    let entry = &tool_entries(&first, "rest__lookup")[0];
    assert!(entry.get("cached").is_none(), "a miss: {entry}");

    // The same arguments in another order and spacing: the tool is not called again.
    let second = run_calling(&app, "rest__lookup", r#"{ "page":1,"q":"rust" }"#).await;
    assert_eq!(
        hits.lookup.load(Ordering::SeqCst),
        1,
        "answered from the cache"
    );
    assert_eq!(last_tool_reply(&app), "found rust #1", "the cached answer");
    let entry = &tool_entries(&second, "rest__lookup")[0];
    assert_eq!(entry["cached"], true, "{entry}");
    assert_eq!(entry["status"], "ok");
    let run_id = second["run_id"].as_str().expect("run id");
    let events = app
        .get(&format!("/v1/runs/{run_id}/events"))
        .await
        .text()
        .await
        .expect("events");
    let finished = events
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|data| data["tool"] == "rest__lookup" && data.get("status").is_some())
        .expect("tool.finished");
    assert_eq!(finished["cached"], true, "{finished}");

    // Other arguments are another call.
    run_calling(&app, "rest__lookup", r#"{"q": "go", "page": 1}"#).await;
    assert_eq!(hits.lookup.load(Ordering::SeqCst), 2);
    assert_eq!(last_tool_reply(&app), "found go #2");

    // Empty and failed results are never kept.
    run_calling(&app, "rest__empty", "{}").await;
    run_calling(&app, "rest__empty", "{}").await;
    assert_eq!(hits.empty.load(Ordering::SeqCst), 2, "empty: not cached");
    run_calling(&app, "rest__refuses", "{}").await;
    let again = run_calling(&app, "rest__refuses", "{}").await;
    assert_eq!(hits.refuses.load(Ordering::SeqCst), 2, "failed: not cached");
    assert!(
        tool_entries(&again, "rest__refuses")[0]
            .get("cached")
            .is_none()
    );

    assert_metric(
        &app,
        r#"ai_agent_tool_cache_hits_total{agent="looker",server="rest",tool="rest__lookup"} 1"#,
    )
    .await;
    app.runtime.close().await;
}

#[tokio::test]
async fn user_scoped_agents_never_share_cached_results_across_users() {
    let (base, hits) = upstream().await;
    let (app, _agents) = app_with(&base, |_| {}).await;
    let ask = |user: &'static str| {
        let app = &app;
        async move {
            app.llm.push(Reply::tool_calls(vec![ToolCall::new(
                "call-1",
                "rest__lookup",
                r#"{"q": "orders"}"#,
            )]));
            app.llm.push(Reply::text("here"));
            let response = app
                .post_json(
                    &format!("/api/{user}/chat"),
                    &json!({"agent": "scoped", "message": "my orders"}),
                )
                .await;
            assert_eq!(response.status(), 200, "{user}");
            last_tool_reply(app)
        }
    };
    assert_eq!(ask("alice").await, "found orders #1");
    assert_eq!(
        ask("bob").await,
        "found orders #2",
        "bob's call reaches the tool"
    );
    assert_eq!(
        ask("alice").await,
        "found orders #1",
        "alice's own cached answer"
    );
    assert_eq!(hits.lookup.load(Ordering::SeqCst), 2);
    app.runtime.close().await;
}

#[tokio::test]
async fn the_tool_cache_lives_in_redis_when_the_cache_does() {
    crate::support::services::ensure_local_redis(6379);
    let (base, hits) = upstream().await;
    let prefix = format!("agentd-test:tools:{}:", uuid::Uuid::new_v4());
    let redis = json!({"backend": "redis", "redis": {"url": redis_url(), "keyPrefix": prefix}});
    let first_redis = redis.clone();
    let (first, _a) = app_with(&base, move |config| config["cache"] = first_redis).await;
    run_calling(&first, "rest__lookup", r#"{"q": "shared"}"#).await;
    first.runtime.close().await;
    // Another server (its own SQLite store) on the same Redis finds the result.
    let (second, _b) = app_with(&base, move |config| config["cache"] = redis).await;
    let result = run_calling(&second, "rest__lookup", r#"{"q":"shared"}"#).await;
    assert_eq!(
        hits.lookup.load(Ordering::SeqCst),
        1,
        "the second server hit Redis"
    );
    assert_eq!(tool_entries(&result, "rest__lookup")[0]["cached"], true);
    second.runtime.close().await;
    delete_redis_keys(&prefix).await;
}

#[tokio::test]
async fn a_call_that_gets_no_answer_is_tried_again_and_every_try_is_accounted() {
    let (base, hits) = upstream().await;
    let (app, _agents) = app_with(&base, |_| {}).await;
    let result = run_calling(&app, "rest__flaky", "{}").await;
    assert_eq!(
        hits.flaky.load(Ordering::SeqCst),
        3,
        "two 503s, then the answer"
    );
    assert_eq!(last_tool_reply(&app), "answered on try 3");
    let entries = tool_entries(&result, "rest__flaky");
    let summary: Vec<(Value, Value)> = entries
        .iter()
        .map(|e| (e["attempt"].clone(), e["status"].clone()))
        .collect();
    assert_eq!(
        summary,
        [
            (json!(1), json!("failed")),
            (json!(2), json!("failed")),
            (json!(3), json!("ok"))
        ]
    );
    assert!(
        entries[0]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("HTTP 503")),
        "{entries:?}"
    );
    assert_metric(
        &app,
        r#"ai_agent_tool_retries_total{agent="looker",server="rest",tool="rest__flaky"} 2"#,
    )
    .await;
    app.runtime.close().await;
}

#[tokio::test]
async fn a_tools_own_error_is_never_retried_and_retries_stop_at_their_limit() {
    let (base, hits) = upstream().await;
    let (app, _agents) = app_with(&base, |_| {}).await;
    let refused = run_calling(&app, "rest__refuses", "{}").await;
    assert_eq!(
        hits.refuses.load(Ordering::SeqCst),
        1,
        "a 400 is the tool's answer"
    );
    assert_eq!(tool_entries(&refused, "rest__refuses").len(), 1);

    // retries: 3 (the most allowed) against a port nobody listens on: four tries, then the
    // model hears why.
    let down = run_calling(&app, "rest__down", "{}").await;
    let entries = tool_entries(&down, "rest__down");
    let attempts: Vec<&Value> = entries.iter().map(|e| &e["attempt"]).collect();
    assert_eq!(attempts, [&json!(1), &json!(2), &json!(3), &json!(4)]);
    assert!(
        entries.iter().all(|e| e["status"] == "failed"),
        "{entries:?}"
    );
    assert!(
        last_tool_reply(&app).contains("request failed"),
        "{}",
        last_tool_reply(&app)
    );
    app.runtime.close().await;
}

#[test]
fn retries_past_three_and_bad_cache_ttls_are_named() {
    let parse = |config: Value| {
        let config = parse_config(config, "agentd.json")?;
        validate_tools(&config, "agentd.json")
    };
    let rest = |policy: Value| {
        let mut tool = json!({"url": "http://127.0.0.1:1/x"});
        for (key, value) in policy.as_object().expect("policy") {
            tool[key] = value.clone();
        }
        json!({"restTools": {"lookup": tool}})
    };
    assert!(parse(rest(json!({"retries": 3}))).is_ok(), "3 is the limit");
    let error = parse(rest(json!({"retries": 4})))
        .expect_err("past the limit")
        .to_string();
    assert!(error.contains("restTools.lookup.retries"), "{error}");
    assert!(error.contains("0 to 3"), "{error}");
    let error = parse(rest(json!({"cache": "soon"})))
        .expect_err("a bad TTL")
        .to_string();
    assert!(error.contains("cache must be off"), "{error}");
    let mcp = json!({"mcpServers": {"files": {"command": "true", "retries": 9}}});
    let error = parse(mcp).expect_err("mcp retries").to_string();
    assert!(error.contains("mcpServers.files.retries"), "{error}");
    let mcp = json!({"mcpServers": {"files": {"command": "true", "toolsCache": {"read": "5m"}, "cache": "off"}}});
    assert!(parse(mcp).is_ok());
    let a2a = json!({"a2aAgents": {"far": {"url": "http://127.0.0.1:1", "retries": 4}}});
    let error = parse(a2a).expect_err("a2a retries").to_string();
    assert!(error.contains("a2aAgents.far.retries"), "{error}");
}

#[tokio::test]
async fn an_mcp_servers_tools_cache_and_timeouts_retried_on_a_real_server() {
    let agents = tempfile::tempdir().expect("agents");
    std::fs::write(
        agents.path().join("mcp.ai"),
        "---\ndescription: Sleeps\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [test]\n---\nYou sleep.\n",
    )
    .expect("agent");
    let path = agents.path().display().to_string();
    let server = test_server_config(json!({
        "toolsCache": {"sleep": "1h"},
        "requestTimeout": "300ms",
        "retries": 1,
    }));
    let app = spawn_app_with(move |config| {
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(path));
        config["mcpServers"] = json!({"test": server});
    })
    .await;
    let run = |tool: &'static str, arguments: &'static str| {
        let app = &app;
        async move {
            app.llm
                .push(Reply::tool_calls(vec![ToolCall::new("c", tool, arguments)]));
            app.llm.push(Reply::text("done"));
            let response = app
                .post_json("/v1/agents/mcp/runs", &json!({"prompt": "go"}))
                .await;
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.expect("result")
        }
    };
    run("test__sleep", r#"{"ms": 1}"#).await;
    let cached = run("test__sleep", r#"{ "ms":1 }"#).await;
    assert_eq!(tool_entries(&cached, "test__sleep")[0]["cached"], true);
    run("test__stats", "{}").await;
    let stats: Value = serde_json::from_str(&last_tool_reply(&app)).expect("stats json");
    assert_eq!(stats["completed_sleeps"], 1, "the second sleep was cached");

    // A call past requestTimeout is a call without an answer: tried once more, then failed.
    let slow = run("test__sleep", r#"{"ms": 5000}"#).await;
    let entries = tool_entries(&slow, "test__sleep");
    let tries: Vec<(&Value, &Value)> = entries
        .iter()
        .map(|e| (&e["attempt"], &e["error"]))
        .collect();
    assert_eq!(
        tries,
        [
            (&json!(1), &json!("timeout")),
            (&json!(2), &json!("timeout"))
        ]
    );
    app.runtime.close().await;
}
