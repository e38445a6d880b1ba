//! Run budgets enforced mid-run (SPEC §14): a run that keeps calling tools is stopped by the
//! agent's `maxToolCalls`, a request's `maxTokens` lower than the agent's applies, and the run
//! ends with `run.budget_exceeded`, `exit_reason: budget_exceeded` and the contract's synthetic
//! failure report; budgets that are not positive or past the limit are refused naming the
//! limit.

use serde_json::{Value, json};

use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

const LOOPER: &str = "---\ndescription: Calls a tool forever\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [rest__ping]\nmaxTurns: 20\nbudget:\n  maxToolCalls: 2\n  maxTokens: 100000\n---\nYou loop.\n";

async fn ping_upstream() -> String {
    let router = axum::Router::new().route(
        "/ping",
        axum::routing::get(|| async { axum::Json(json!({"pong": true})) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}/ping")
}

async fn app() -> (TestApp, tempfile::TempDir) {
    let ping = ping_upstream().await;
    let agents = tempfile::tempdir().expect("agents");
    std::fs::write(agents.path().join("looper.ai"), LOOPER).expect("agent");
    let path = agents.path().display().to_string();
    let app = spawn_app_with(move |config| {
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(path));
        config["restTools"] = json!({"ping": {"url": ping, "description": "Ping"}});
    })
    .await;
    (app, agents)
}

fn tool_call(n: usize) -> Reply {
    Reply::tool_calls(vec![ToolCall::new(format!("c{n}"), "rest__ping", "{}")])
        .with_usage(1000, 10, 0, 0)
}

async fn events_of(app: &TestApp, run_id: &str) -> Vec<(String, Value)> {
    let body = app
        .get(&format!("/v1/runs/{run_id}/events"))
        .await
        .text()
        .await
        .expect("events");
    crate::support::numbered_frames(&body)
        .into_iter()
        .map(|(_, kind, data)| (kind, data))
        .collect()
}

#[tokio::test]
async fn the_agents_tool_call_budget_stops_a_looping_run_with_the_synthetic_report() {
    let (app, _agents) = app().await;
    for n in 0..10 {
        app.llm.push(tool_call(n));
    }
    let response = app
        .post_json("/v1/agents/looper/runs", &json!({"prompt": "loop"}))
        .await;
    assert_eq!(response.status(), 200);
    let result: Value = response.json().await.expect("result");
    assert_eq!(result["exit_reason"], "budget_exceeded", "{result}");
    assert_eq!(result["success"], false);
    assert_eq!(result["final_report"]["status"], "failure");
    assert_eq!(
        result["final_report"]["metadata"]["reason"],
        "budget_exceeded"
    );
    let tool_calls = result["accounting"]
        .as_array()
        .expect("accounting")
        .iter()
        .filter(|entry| entry["type"] == "tool")
        .count();
    assert_eq!(tool_calls, 2, "stopped at the limit, not past it");
    let run_id = result["run_id"].as_str().expect("run id").to_string();
    let events = events_of(&app, &run_id).await;
    let exceeded = events
        .iter()
        .find(|(kind, _)| kind == "run.budget_exceeded")
        .map(|(_, data)| data.clone())
        .expect("run.budget_exceeded");
    assert_eq!(exceeded["limit"], "maxToolCalls");
    assert_eq!(exceeded["allowed"], 2.0);
    assert_eq!(exceeded["used"], 2.0);
    let finished = events.last().expect("events");
    assert_eq!(finished.0, "run.finished");
    assert_eq!(finished.1["exit_reason"], "budget_exceeded");
}

#[tokio::test]
async fn a_requests_lower_token_budget_applies_over_the_agents() {
    let (app, _agents) = app().await;
    for n in 0..5 {
        app.llm.push(tool_call(n));
    }
    let response = app
        .post_json(
            "/v1/agents/looper/runs",
            &json!({"prompt": "loop", "budget": {"maxTokens": 1500}}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let result: Value = response.json().await.expect("result");
    assert_eq!(result["exit_reason"], "budget_exceeded", "{result}");
    assert_eq!(
        result["usage"]["total_tokens"], 2020,
        "two calls of 1010: the second crossed 1500"
    );
}

#[tokio::test]
async fn budgets_are_checked_at_and_past_their_limits() {
    let (app, _agents) = app().await;
    for (budget, param) in [
        (json!({"maxTokens": 0}), "budget.maxTokens"),
        (json!({"maxCostUsd": -1.0}), "budget.maxCostUsd"),
        (
            json!({"maxToolCalls": 1_000_000_000_001_u64}),
            "budget.maxToolCalls",
        ),
        (
            json!({"maxDurationSeconds": 0}),
            "budget.maxDurationSeconds",
        ),
    ] {
        let response = app
            .post_json(
                "/v1/agents/looper/runs",
                &json!({"prompt": "loop", "budget": budget}),
            )
            .await;
        assert_eq!(response.status(), 400, "{budget}");
        let body: Value = response.json().await.expect("error");
        assert_eq!(body["error"]["param"], param, "{body}");
    }
    let unknown = app
        .post_json(
            "/v1/agents/looper/runs",
            &json!({"prompt": "loop", "budget": {"maxBananas": 1}}),
        )
        .await;
    assert_eq!(unknown.status(), 400);
    app.llm.push(Reply::text("done"));
    let at_the_limit = app
        .post_json(
            "/v1/agents/looper/runs",
            &json!({"prompt": "loop", "budget": {"maxToolCalls": 1_000_000_000_000_u64}}),
        )
        .await;
    assert_eq!(at_the_limit.status(), 200);
    let result: Value = at_the_limit.json().await.expect("result");
    assert_eq!(result["success"], true, "{result}");
}
