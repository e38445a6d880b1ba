//! Run budgets enforced mid-run (SPEC §14): a run that keeps calling tools is stopped by the
//! agent's `maxToolCalls`, a request's `maxTokens` lower than the agent's applies, and the run
//! ends with `run.budget_exceeded`, `exit_reason: budget_exceeded` and the contract's synthetic
//! failure report (`onBudget: fail`), or parks `waiting_budget` until its budget is raised
//! (`POST /v1/runs/{id}/budget`, the default); budgets that are not positive or past the limit
//! are refused naming the limit.

use serde_json::{Value, json};

use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

const LOOPER: &str = "---\ndescription: Calls a tool forever\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [rest__ping]\nmaxTurns: 20\nonBudget: fail\nbudget:\n  maxToolCalls: 2\n  maxTokens: 100000\n---\nYou loop.\n";
/// Calls a tool every turn for 20 turns, with no budget of its own.
const SPENDER: &str = "---\ndescription: Spends\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [rest__ping]\nmaxTurns: 20\n---\nYou spend.\n";
/// The same agent with the default `onBudget`: it waits for a raise.
const WAITER: &str = "---\ndescription: Calls a tool and waits at its budget\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [rest__ping]\nmaxTurns: 20\nbudget:\n  maxToolCalls: 2\n---\nYou loop.\n";

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
    app_with_auth(None).await
}

/// The looping agents against a ping tool, with `auth` in the config when given.
async fn app_with_auth(auth: Option<Value>) -> (TestApp, tempfile::TempDir) {
    let ping = ping_upstream().await;
    let agents = tempfile::tempdir().expect("agents");
    std::fs::write(agents.path().join("looper.ai"), LOOPER).expect("agent");
    std::fs::write(agents.path().join("waiter.ai"), WAITER).expect("agent");
    std::fs::write(agents.path().join("spender.ai"), SPENDER).expect("agent");
    let path = agents.path().display().to_string();
    let app = spawn_app_with(move |config| {
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(path));
        config["restTools"] = json!({"ping": {"url": ping, "description": "Ping"}});
        if let Some(auth) = auth {
            config["auth"] = auth;
        }
    })
    .await;
    (app, agents)
}

/// How many tool calls a result's accounting holds.
fn tool_calls(result: &Value) -> usize {
    result["accounting"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["type"] == "tool")
        .count()
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
    assert_eq!(tool_calls(&result), 2, "stopped at the limit, not past it");
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
    assert_eq!(
        tool_calls(&result),
        1,
        "the model call that crossed the budget runs none of its tools"
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

async fn status_of(app: &TestApp, run_id: &str) -> Value {
    app.get(&format!("/v1/runs/{run_id}"))
        .await
        .json()
        .await
        .expect("run")
}

async fn wait_for_status(app: &TestApp, run_id: &str, wanted: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let run = status_of(app, run_id).await;
        if run["status"] == wanted {
            return run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {run_id} never reached {wanted}: {run}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn waiting_run(app: &TestApp) -> String {
    let response = app
        .post_json(
            "/v1/agents/waiter/runs",
            &json!({"prompt": "loop", "background": true}),
        )
        .await;
    assert_eq!(response.status(), 202);
    let accepted: Value = response.json().await.expect("accepted");
    let run_id = accepted["run_id"].as_str().expect("run id").to_string();
    wait_for_status(app, &run_id, "waiting_budget").await;
    run_id
}

async fn raise(app: &TestApp, run_id: &str, raise: Value) -> reqwest::Response {
    app.post_json(
        &format!("/v1/runs/{run_id}/budget"),
        &json!({ "raise": raise }),
    )
    .await
}

#[tokio::test]
async fn a_run_at_its_budget_waits_for_a_raise_and_goes_on_where_it_stopped() {
    let (app, _agents) = app().await;
    for n in 0..4 {
        app.llm.push(tool_call(n));
    }
    app.llm.push(Reply::text("done at last"));
    let run_id = waiting_run(&app).await;
    let events = events_of_so_far(&app, &run_id).await;
    assert!(events.iter().any(|(kind, _)| kind == "run.budget_exceeded"));
    assert!(!events.iter().any(|(kind, _)| kind == "run.finished"));

    // A raise that names nothing, or leaves the run past its budget, is refused; it still waits.
    let empty = raise(&app, &run_id, json!({})).await;
    assert_eq!(empty.status(), 400);
    let body: Value = empty.json().await.expect("error");
    assert_eq!(body["error"]["param"], "raise", "{body}");
    let at_used = raise(&app, &run_id, json!({"maxToolCalls": 2})).await;
    assert_eq!(at_used.status(), 409);
    let body: Value = at_used.json().await.expect("error");
    assert_eq!(body["error"]["param"], "raise.maxToolCalls", "{body}");
    let negative = raise(&app, &run_id, json!({"maxToolCalls": 0})).await;
    assert_eq!(negative.status(), 400);
    wait_for_status(&app, &run_id, "waiting_budget").await;

    // Raised by one call: the run makes it and waits again; raised enough, it finishes.
    let raised = raise(&app, &run_id, json!({"maxToolCalls": 3})).await;
    assert_eq!(raised.status(), 202);
    let answer: Value = raised.json().await.expect("answer");
    assert_eq!(answer["budget"]["maxToolCalls"], 3, "{answer}");
    let mut again = String::new();
    for _ in 0..400 {
        let run = status_of(&app, &run_id).await;
        let exceeded = events_of_so_far(&app, &run_id)
            .await
            .iter()
            .filter(|(kind, _)| kind == "run.budget_exceeded")
            .count();
        if run["status"] == "waiting_budget" && exceeded == 2 {
            again = run["status"].as_str().unwrap_or_default().to_string();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(again, "waiting_budget", "parked again at the raised limit");
    let twice = raise(&app, &run_id, json!({"maxToolCalls": 10})).await;
    assert_eq!(twice.status(), 202);
    let run = wait_for_status(&app, &run_id, "completed").await;
    let result = &run["result"];
    assert_eq!(result["success"], true, "{run}");
    assert_eq!(
        tool_calls(result),
        4,
        "2 before the first raise, 1, then 1 more"
    );
    let late = raise(&app, &run_id, json!({"maxToolCalls": 20})).await;
    assert_eq!(late.status(), 409, "a finished run waits for nothing");
    let audit = app
        .get("/v1/audit?action=budget.raised")
        .await
        .text()
        .await
        .expect("audit");
    assert_eq!(audit.lines().count(), 2, "{audit}");
}

#[tokio::test]
async fn a_run_waiting_for_its_budget_can_be_cancelled_and_unknown_runs_are_named() {
    let (app, _agents) = app().await;
    for n in 0..3 {
        app.llm.push(tool_call(n));
    }
    let run_id = waiting_run(&app).await;
    let cancel = app
        .post_json(&format!("/v1/runs/{run_id}/cancel"), &json!({}))
        .await;
    assert_eq!(cancel.status(), 202);
    wait_for_status(&app, &run_id, "cancelled").await;
    let gone = raise(&app, "no-such-run", json!({"maxToolCalls": 5})).await;
    assert_eq!(gone.status(), 404);
    let listed: Value = app
        .get("/v1/runs?status=waiting_budget")
        .await
        .json()
        .await
        .expect("list");
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(0), "{listed}");
}

/// The run's events stored so far, read from the store (the events stream of a waiting run
/// goes on until it finishes).
async fn events_of_so_far(app: &TestApp, run_id: &str) -> Vec<(String, Value)> {
    app.runtime
        .store()
        .list_run_events(run_id, 0, 1000)
        .await
        .expect("events")
        .into_iter()
        .map(|event| {
            let data = serde_json::from_str(event.data.as_str()).unwrap_or(Value::Null);
            (event.event_type, data)
        })
        .collect()
}

#[tokio::test]
async fn a_keys_run_budget_applies_to_every_run_of_the_key() {
    let (app, _agents) = app_with_auth(Some(json!({"keys": [
        {"key": "frugal-key", "userId": "frugal", "limits": {"runBudget": {"maxToolCalls": 1}}},
        {"key": "free-key", "userId": "free"}
    ]})))
    .await;
    for n in 0..6 {
        app.llm.push(tool_call(n));
    }
    let run_with = |key: &'static str| {
        app.client
            .post(app.url("/v1/agents/looper/runs"))
            .bearer_auth(key)
            .json(&json!({"prompt": "loop"}))
            .send()
    };
    let frugal: Value = run_with("frugal-key")
        .await
        .expect("sent")
        .json()
        .await
        .expect("result");
    assert_eq!(frugal["exit_reason"], "budget_exceeded", "{frugal}");
    assert_eq!(tool_calls(&frugal), 1, "the key's 1, not the agent's 2");
    let free: Value = run_with("free-key")
        .await
        .expect("sent")
        .json()
        .await
        .expect("result");
    assert_eq!(tool_calls(&free), 2, "the agent's own budget: {free}");
}

/// A key's daily budget is charged call by call and read before each call by every run of the
/// key: 50 runs at once, each able to spend 2,000 tokens, pass a 1,000-token day by at most one
/// call (100 tokens) each instead of spending 100,000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_runs_pass_their_keys_daily_budget_by_at_most_one_call_each() {
    const RUNS: usize = 50;
    const CALL_TOKENS: u64 = 100;
    const DAY_TOKENS: u64 = 1000;
    let (app, _agents) = app_with_auth(Some(json!({"keys": [
        {"key": "daily-key", "id": "daily", "userId": "daily", "limits": {"tokensPerDay": DAY_TOKENS}}
    ]})))
    .await;
    for n in 0..RUNS * 20 {
        app.llm.push(
            Reply::tool_calls(vec![ToolCall::new(format!("c{n}"), "rest__ping", "{}")])
                .with_usage(90, 10, 0, 0),
        );
    }
    let runs = (0..RUNS).map(|_| {
        app.client
            .post(app.url("/v1/agents/spender/runs"))
            .bearer_auth("daily-key")
            .json(&json!({"prompt": "spend"}))
            .send()
    });
    let answers = futures_util::future::join_all(runs).await;
    let (mut spent, mut stopped, mut refused) = (0, 0, 0);
    for answer in answers {
        let answer = answer.expect("sent");
        if answer.status() == 429 {
            refused += 1;
            continue;
        }
        let result: Value = answer.json().await.expect("result");
        assert_eq!(result["exit_reason"], "budget_exceeded", "{result}");
        stopped += 1;
        spent += result["usage"]["total_tokens"].as_u64().expect("tokens");
    }
    eprintln!(
        "{RUNS} runs of one key, {DAY_TOKENS} tokens a day: {stopped} stopped mid-run, \
         {refused} refused at admission, {spent} tokens spent (overshoot {})",
        spent.saturating_sub(DAY_TOKENS)
    );
    assert!(spent >= DAY_TOKENS, "the budget was reached: {spent}");
    assert!(
        spent <= DAY_TOKENS + stopped as u64 * CALL_TOKENS,
        "at most one call past the budget per run: {spent} tokens for {stopped} runs"
    );
}

#[tokio::test]
async fn a_turn_asking_for_more_tool_calls_than_the_budget_allows_runs_only_those() {
    let (app, _agents) = app().await;
    app.llm.push(
        Reply::tool_calls(
            (0..3)
                .map(|n| ToolCall::new(format!("c{n}"), "rest__ping", "{}"))
                .collect(),
        )
        .with_usage(1000, 10, 0, 0),
    );
    let response = app
        .post_json("/v1/agents/looper/runs", &json!({"prompt": "loop"}))
        .await;
    let result: Value = response.json().await.expect("result");
    assert_eq!(result["exit_reason"], "budget_exceeded", "{result}");
    assert_eq!(tool_calls(&result), 2, "the budget's 2 of the 3 asked for");
    let events = events_of(&app, result["run_id"].as_str().expect("run id")).await;
    let exceeded = events
        .iter()
        .find(|(kind, _)| kind == "run.budget_exceeded")
        .map(|(_, data)| data.clone())
        .expect("run.budget_exceeded");
    assert_eq!(exceeded["used"], 2.0, "{exceeded}");
}
