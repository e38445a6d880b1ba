//! Per-key limits (`auth.keys[].limits`, SPEC §7) as clients see them: past `requestsPerMinute`
//! or `concurrentRuns` a 429 `rate_limited` with `Retry-After`, past a daily budget a 429
//! `budget_exceeded`, a run already started always completes, each key counted on its own. The
//! same checks run on SQLite and PostgreSQL; two servers on one PostgreSQL database, or on one
//! Redis, share the counts.

use std::time::Duration;

use chrono::{Timelike, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::cli::agentd;
use crate::store::backends::Backend;
use crate::store::cache_conformance::{delete_redis_keys, redis_url};
use crate::support::binary::project;
use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app_with};

const LIMITED_KEY: &str = "limited-key";
const OTHER_KEY: &str = "other-key";
/// Long enough to be sure a second request arrives while the first run is in flight.
const SLOW_RUN: Duration = Duration::from_millis(1500);

/// A server on `store_url` whose two keys (`limited`, `other`) have the same `limits`; pricing
/// makes every token cost one dollar.
async fn spawn_limited(store_url: &str, limits: Value, adjust: impl FnOnce(&mut Value)) -> TestApp {
    spawn_app_with(|config| {
        config["store"]["url"] = json!(store_url);
        config["auth"] = json!({"keys": [
            {"key": LIMITED_KEY, "id": "limited", "limits": limits},
            {"key": OTHER_KEY, "id": "other", "limits": limits},
        ]});
        config["pricing"] =
            json!({"llm": {"upstream-model": {"unit": "per_1k", "prompt": 1000.0, "completion": 1000.0}}});
        adjust(config);
    })
    .await
}

fn chat_body() -> Value {
    json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]})
}

async fn chat_as(app: &TestApp, key: &str) -> reqwest::Response {
    app.client
        .post(app.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&chat_body())
        .send()
        .await
        .expect("request sent")
}

/// Asserts a 429 with `code` and returns its `Retry-After` seconds.
async fn refused(response: reqwest::Response, code: &str) -> u64 {
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after = response.headers()["retry-after"]
        .to_str()
        .expect("text")
        .parse()
        .expect("Retry-After is whole seconds");
    let body: Value = response.json().await.expect("json body");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    retry_after
}

async fn answered(response: reqwest::Response) {
    let status = response.status();
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        response.text().await.unwrap_or_default()
    );
}

/// Starts a slow run as `key` and returns once the mock LLM has its request (the run holds
/// its slot); the task ends with the run's response.
async fn run_in_flight(
    app: &TestApp,
    key: &str,
    reply: Reply,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let seen = app.llm.received().len();
    app.llm.push(reply.with_first_byte_delay(SLOW_RUN));
    let (client, url, key) = (
        app.client.clone(),
        app.url("/v1/chat/completions"),
        key.to_string(),
    );
    let task = tokio::spawn(async move {
        client
            .post(url)
            .bearer_auth(key)
            .json(&chat_body())
            .send()
            .await
            .expect("request sent")
    });
    wait_for_requests(app, seen + 1).await;
    task
}

async fn wait_for_requests(app: &TestApp, count: usize) {
    for _ in 0..200 {
        if app.llm.received().len() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the mock LLM never got request {count}");
}

/// Waits out the end of a minute, so a few requests land in one fixed window.
async fn early_in_a_minute() {
    let second = Utc::now().second();
    if second >= 50 {
        tokio::time::sleep(Duration::from_secs(u64::from(61 - second))).await;
    }
}

pub async fn requests_past_the_minute_limit_are_refused_until_the_next_window(backend: &Backend) {
    let app = spawn_limited(&backend.url, json!({"requestsPerMinute": 2}), |_| {}).await;
    early_in_a_minute().await;
    answered(chat_as(&app, LIMITED_KEY).await).await;
    answered(chat_as(&app, LIMITED_KEY).await).await;
    let retry_after = refused(chat_as(&app, LIMITED_KEY).await, "rate_limited").await;
    let seconds_left = 60 - u64::from(Utc::now().second());
    assert!(
        (1..=60).contains(&retry_after) && retry_after.abs_diff(seconds_left) <= 2,
        "Retry-After {retry_after}, the window ends in {seconds_left} s"
    );
    answered(chat_as(&app, OTHER_KEY).await).await;
    // Every headend starts runs through the same limiter; Anthropic clients see their shape.
    let runs = app
        .client
        .post(app.url("/v1/agents/chat/runs"))
        .bearer_auth(LIMITED_KEY)
        .json(&json!({"prompt": "hi"}))
        .send()
        .await
        .expect("request sent");
    refused(runs, "rate_limited").await;
    let messages = app
        .client
        .post(app.url("/v1/messages"))
        .header("x-api-key", LIMITED_KEY)
        .json(&json!({"model": "chat", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("request sent");
    assert_eq!(messages.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(messages.headers().contains_key("retry-after"));
    let body: Value = messages.json().await.expect("json body");
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
}

pub async fn a_key_at_its_concurrent_runs_is_refused_until_its_run_ends(backend: &Backend) {
    let app = spawn_limited(&backend.url, json!({"concurrentRuns": 1}), |_| {}).await;
    let first = run_in_flight(&app, LIMITED_KEY, Reply::text("slow answer")).await;
    let retry_after = refused(chat_as(&app, LIMITED_KEY).await, "rate_limited").await;
    assert_eq!(retry_after, 1);
    answered(chat_as(&app, OTHER_KEY).await).await;
    answered(first.await.expect("first run")).await;
    answered(chat_as(&app, LIMITED_KEY).await).await;
}

pub async fn a_run_crossing_the_token_budget_completes_and_the_next_is_refused(backend: &Backend) {
    let app = spawn_limited(&backend.url, json!({"tokensPerDay": 100}), |_| {}).await;
    let crossing = run_in_flight(
        &app,
        LIMITED_KEY,
        Reply::text("a long answer").with_usage(80, 40, 0, 0),
    )
    .await;
    // Admitted while the first run is in flight: nothing is used yet.
    answered(chat_as(&app, LIMITED_KEY).await).await;
    let finished = crossing.await.expect("crossing run");
    answered(finished).await;
    let retry_after = refused(chat_as(&app, LIMITED_KEY).await, "budget_exceeded").await;
    let now = Utc::now();
    let until_midnight = 86_400 - u64::from(now.num_seconds_from_midnight());
    assert!(
        retry_after.abs_diff(until_midnight) <= 2,
        "Retry-After {retry_after}, next UTC day in {until_midnight} s"
    );
    answered(chat_as(&app, OTHER_KEY).await).await;
}

pub async fn a_key_past_its_cost_budget_is_refused(backend: &Backend) {
    let app = spawn_limited(&backend.url, json!({"costUsdPerDay": 10.0}), |_| {}).await;
    // 15 tokens at one dollar each.
    app.llm.push(Reply::text("pricey").with_usage(10, 5, 0, 0));
    answered(chat_as(&app, LIMITED_KEY).await).await;
    let response = chat_as(&app, LIMITED_KEY).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = response.json().await.expect("json body");
    assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("costUsdPerDay")),
        "{body}"
    );
    answered(chat_as(&app, OTHER_KEY).await).await;
}

/// One test per check and store, so a failure names both.
macro_rules! on_both_stores {
    ($($check:ident),* $(,)?) => {
        mod sqlite_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(&super::Backend::sqlite()).await;
                }
            )*
        }
        mod postgres_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(&super::Backend::postgres().await).await;
                }
            )*
        }
    };
}

on_both_stores!(
    requests_past_the_minute_limit_are_refused_until_the_next_window,
    a_key_at_its_concurrent_runs_is_refused_until_its_run_ends,
    a_run_crossing_the_token_budget_completes_and_the_next_is_refused,
    a_key_past_its_cost_budget_is_refused,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_database_share_concurrent_runs_and_requests() {
    let backend = Backend::postgres().await;
    let limits = json!({"concurrentRuns": 1, "requestsPerMinute": 3});
    let first = spawn_limited(&backend.url, limits.clone(), |_| {}).await;
    let second = spawn_limited(&backend.url, limits, |_| {}).await;
    early_in_a_minute().await;
    let in_flight = run_in_flight(&first, LIMITED_KEY, Reply::text("slow")).await;
    refused(chat_as(&second, LIMITED_KEY).await, "rate_limited").await;
    answered(in_flight.await.expect("run")).await;
    answered(chat_as(&second, LIMITED_KEY).await).await;
    // Three requests counted so far, on both servers together.
    let retry_after = refused(chat_as(&first, LIMITED_KEY).await, "rate_limited").await;
    assert!(
        retry_after > 1,
        "the minute window, not a run slot: {retry_after}"
    );
}

async fn me_of(app: &TestApp) -> Value {
    app.client
        .get(app.url("/v1/me"))
        .bearer_auth(LIMITED_KEY)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json")
}

/// `GET /v1/me` tells a key what is left of each of its limits: this minute's requests, the runs
/// it may start now, today's tokens; reading it counts nothing.
async fn me_says_what_is_left_of_each_limit(store: Backend, adjust: impl FnOnce(&mut Value)) {
    let limits = json!({"requestsPerMinute": 5, "concurrentRuns": 2, "tokensPerDay": 1000});
    let app = spawn_limited(&store.url, limits, adjust).await;
    early_in_a_minute().await;
    let me = me_of(&app).await;
    assert_eq!(me["limits"]["requests_left_this_minute"], 5, "{me}");
    assert_eq!(me["limits"]["runs_left_now"], 2, "{me}");
    app.llm.push(Reply::text("one").with_usage(10, 5, 0, 0));
    answered(chat_as(&app, LIMITED_KEY).await).await;
    let in_flight = run_in_flight(
        &app,
        LIMITED_KEY,
        Reply::text("slow").with_usage(10, 5, 0, 0),
    )
    .await;
    let me = me_of(&app).await;
    assert_eq!(me["limits"]["requests_left_this_minute"], 3, "{me}");
    assert_eq!(me["limits"]["runs_left_now"], 1, "one run in flight: {me}");
    assert_eq!(me["limits"]["tokens_left_today"], 985, "{me}");
    answered(in_flight.await.expect("run")).await;
    let me = me_of(&app).await;
    assert_eq!(me["limits"]["runs_left_now"], 2, "{me}");
    assert_eq!(
        me["limits"]["requests_left_this_minute"], 3,
        "reading /v1/me counts no request: {me}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn me_says_what_is_left_of_each_limit_on_sqlite() {
    me_says_what_is_left_of_each_limit(Backend::sqlite(), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn me_says_what_is_left_of_each_limit_on_postgres() {
    me_says_what_is_left_of_each_limit(Backend::postgres().await, |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn me_says_what_is_left_of_each_limit_in_redis() {
    let prefix = format!("agentd-test-{}:", uuid::Uuid::new_v4().simple());
    let redis = json!({"backend": "redis", "redis": {"url": redis_url(), "keyPrefix": prefix}});
    me_says_what_is_left_of_each_limit(Backend::sqlite(), |config| config["cache"] = redis).await;
    delete_redis_keys(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_redis_cache_two_servers_share_the_counts_in_redis() {
    let prefix = format!("agentd-test-{}:", uuid::Uuid::new_v4().simple());
    let use_redis = |config: &mut Value| {
        config["cache"] =
            json!({"backend": "redis", "redis": {"url": redis_url(), "keyPrefix": prefix}});
    };
    // Each server has a store of its own: only Redis can make them agree.
    let (first_store, second_store) = (Backend::sqlite(), Backend::sqlite());
    let limits = json!({"concurrentRuns": 1, "tokensPerDay": 10});
    let first = spawn_limited(&first_store.url, limits.clone(), use_redis).await;
    let second = spawn_limited(&second_store.url, limits, use_redis).await;
    let in_flight = run_in_flight(
        &first,
        LIMITED_KEY,
        Reply::text("slow").with_usage(10, 5, 0, 0),
    )
    .await;
    refused(chat_as(&second, LIMITED_KEY).await, "rate_limited").await;
    answered(in_flight.await.expect("run")).await;
    refused(chat_as(&second, LIMITED_KEY).await, "budget_exceeded").await;
    answered(chat_as(&second, OTHER_KEY).await).await;
    delete_redis_keys(&prefix).await;
}

#[tokio::test]
async fn check_names_a_bad_limits_key_and_a_non_positive_limit() {
    for (limits, path) in [
        (
            json!({"requestsPerHour": 5}),
            "auth.keys[0].limits.requestsPerHour",
        ),
        (
            json!({"concurrentRuns": 0}),
            "auth.keys[0].limits.concurrentRuns",
        ),
    ] {
        let config = json!({
            "providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}},
            "agents": ["agents"],
            "auth": {"keys": [{"key": "k", "limits": limits}]},
        });
        let dir = project(&config);
        let out = agentd(dir.path(), &["check", "--config", "agentd.json"]).await;
        assert_eq!(out.code, 4, "{}", out.stderr);
        assert!(
            out.stderr.contains("agentd.json") && out.stderr.contains(path),
            "{path}: {}",
            out.stderr
        );
    }
}
