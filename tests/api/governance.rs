//! Governance over HTTP (SPEC §14), on SQLite and PostgreSQL: the audit rows the API's acts
//! leave (secret changes, cancels, admins reading another user's data), `GET /v1/audit` as JSON
//! lines and CSV with its filters and limits, `GET /v1/audit/verify`, and `GET /v1/usage`
//! summing what runs used per group, a user seeing only its own.

use serde_json::{Value, json};

use crate::store::backends::Backend;
use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app_with};

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

async fn app(store_url: &str) -> TestApp {
    let url = store_url.to_string();
    spawn_app_with(move |config| {
        config["store"] = json!({"url": url});
        config["secrets"] = json!({"key": KEY_HEX});
        config["auth"] = json!({"keys": [
            {"key": "gov-admin", "admin": true, "id": "root"},
            {"key": "gov-alice", "userId": "alice", "id": "alice-key"},
            {"key": "gov-bob", "userId": "bob", "id": "bob-key"},
        ]});
    })
    .await
}

async fn call(
    app: &TestApp,
    method: reqwest::Method,
    key: &str,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = app.client.request(method, app.url(path)).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.expect("sent")
}

async fn audit_lines(app: &TestApp, query: &str) -> Vec<Value> {
    let response = call(
        app,
        reqwest::Method::GET,
        "gov-admin",
        &format!("/v1/audit{query}"),
        None,
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/x-ndjson",
        "JSON lines by default"
    );
    let body = response.text().await.expect("body");
    body.lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

async fn error_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json().await.expect("error body"))
}

async fn audited_acts_are_listed_filtered_exported_and_verified(store_url: &str) {
    let app = app(store_url).await;
    let put = call(
        &app,
        reqwest::Method::PUT,
        "gov-alice",
        "/api/alice/secrets/TOKEN",
        Some(json!({"value": "s3cret-value"})),
    )
    .await;
    assert_eq!(put.status(), 204);
    let deleted = call(
        &app,
        reqwest::Method::DELETE,
        "gov-alice",
        "/api/alice/secrets/TOKEN",
        None,
    )
    .await;
    assert_eq!(deleted.status(), 204);
    // The admin reads alice's conversations; alice reading her own is not audited.
    let read = call(
        &app,
        reqwest::Method::GET,
        "gov-admin",
        "/api/alice/conversations",
        None,
    )
    .await;
    assert_eq!(read.status(), 200);
    let own = call(
        &app,
        reqwest::Method::GET,
        "gov-alice",
        "/api/alice/conversations",
        None,
    )
    .await;
    assert_eq!(own.status(), 200);

    let rows = audit_lines(&app, "").await;
    let acts: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap_or_default(),
                r["actor_key"].as_str().unwrap_or_default(),
                r["target"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        acts,
        [
            ("secret.set", "alice-key", "user:alice/secret:TOKEN"),
            ("secret.deleted", "alice-key", "user:alice/secret:TOKEN"),
            ("admin.read", "root", "user:alice"),
        ]
    );
    assert_eq!(rows[0]["actor_user"], "alice");
    assert_eq!(rows[0]["outcome"], "success");
    assert!(
        rows[0]["request_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    assert_eq!(rows[2]["details"]["route"], "/api/{user_id}/conversations");
    assert_eq!(rows[1]["prev_hash"], rows[0]["hash"]);
    let everything = serde_json::to_string(&rows).expect("json");
    assert!(
        !everything.contains("s3cret-value"),
        "never a secret's value"
    );

    let by_action = audit_lines(&app, "?action=admin.read").await;
    assert_eq!(by_action.len(), 1);
    let by_actor = audit_lines(&app, "?actor=alice-key&limit=1").await;
    assert_eq!(by_actor.len(), 1);
    let future = audit_lines(&app, "?from=2999-01-01").await;
    assert!(future.is_empty());

    let csv = app
        .client
        .get(app.url("/v1/audit"))
        .bearer_auth("gov-admin")
        .header("accept", "text/csv")
        .send()
        .await
        .expect("csv");
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .is_ok_and(|t| t.starts_with("text/csv"))
    );
    let csv = csv.text().await.expect("csv body");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("seq,at,actor_user,actor_key,action,target,request_id,outcome,details,prev_hash,hash")
    );
    assert_eq!(lines.count(), 3);

    let verified: Value = call(
        &app,
        reqwest::Method::GET,
        "gov-admin",
        "/v1/audit/verify",
        None,
    )
    .await
    .json()
    .await
    .expect("verification");
    assert_eq!(verified["ok"], true, "{verified}");
    assert_eq!(verified["rows"], 3);

    // An inverted range holds no row: an empty answer, not an error.
    let inverted = call(
        &app,
        reqwest::Method::GET,
        "gov-admin",
        "/v1/audit?from=2026-02-01&to=2026-01-01",
        None,
    )
    .await;
    assert_eq!(inverted.status(), 200);
    assert_eq!(inverted.text().await.expect("body"), "");
    for (query, param) in [
        ("?from=yesterday", "from"),
        ("?action=key.invented", "action"),
        ("?limit=0", "limit"),
        ("?limit=10001", "limit"),
        ("?after=-1", "after"),
    ] {
        let (status, body) = error_of(
            call(
                &app,
                reqwest::Method::GET,
                "gov-admin",
                &format!("/v1/audit{query}"),
                None,
            )
            .await,
        )
        .await;
        assert_eq!(
            (status, body["error"]["param"].as_str()),
            (400, Some(param)),
            "{query}: {body}"
        );
    }
    let at_the_limit = call(
        &app,
        reqwest::Method::GET,
        "gov-admin",
        "/v1/audit?limit=10000",
        None,
    )
    .await;
    assert_eq!(at_the_limit.status(), 200);
    let (status, _) =
        error_of(call(&app, reqwest::Method::GET, "gov-alice", "/v1/audit", None).await).await;
    assert_eq!(status, 403);
}

async fn usage_sums_what_runs_used_and_users_see_their_own(store_url: &str) {
    let app = app(store_url).await;
    app.llm.push(Reply::text("one").with_usage(100, 10, 40, 0));
    app.llm.push(Reply::text("two").with_usage(200, 20, 0, 0));
    for (key, user) in [("gov-alice", "alice"), ("gov-bob", "bob")] {
        let response = call(
            &app,
            reqwest::Method::POST,
            key,
            &format!("/api/{user}/chat"),
            Some(json!({"message": "hi", "agent": "chat"})),
        )
        .await;
        assert_eq!(response.status(), 200);
    }
    let report: Value = call(
        &app,
        reqwest::Method::GET,
        "gov-admin",
        "/v1/usage?group_by=user",
        None,
    )
    .await
    .json()
    .await
    .expect("report");
    let rows = report["data"].as_array().expect("rows");
    let summary: Vec<(String, i64, i64, i64)> = rows
        .iter()
        .map(|r| {
            (
                r["group"].as_str().unwrap_or_default().to_string(),
                r["runs"].as_i64().unwrap_or_default(),
                r["input_tokens"].as_i64().unwrap_or_default(),
                r["total_tokens"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("alice".to_string(), 1, 100, 110),
            ("bob".to_string(), 1, 200, 220)
        ],
        "{report}"
    );
    assert_eq!(rows[0]["cached_tokens"], 40);
    assert_eq!(report["group_by"], "user");

    let alices: Value = call(
        &app,
        reqwest::Method::GET,
        "gov-alice",
        "/v1/usage?group_by=key",
        None,
    )
    .await
    .json()
    .await
    .expect("report");
    let groups: Vec<&str> = alices["data"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["group"].as_str())
        .collect();
    assert_eq!(groups, ["alice-key"], "alice sees only her own");
    let (status, body) = error_of(
        call(
            &app,
            reqwest::Method::GET,
            "gov-alice",
            "/v1/usage?user=bob",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (403, Some("user"))
    );
    let (status, body) = error_of(
        call(
            &app,
            reqwest::Method::GET,
            "gov-admin",
            "/v1/usage?group_by=planet",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("group_by"))
    );
}

#[tokio::test]
async fn audit_over_http_on_sqlite() {
    audited_acts_are_listed_filtered_exported_and_verified("sqlite::memory:").await;
}

#[tokio::test]
async fn audit_over_http_on_postgres() {
    let backend = Backend::postgres().await;
    audited_acts_are_listed_filtered_exported_and_verified(&backend.url).await;
}

#[tokio::test]
async fn usage_over_http_on_sqlite() {
    usage_sums_what_runs_used_and_users_see_their_own("sqlite::memory:").await;
}

#[tokio::test]
async fn usage_over_http_on_postgres() {
    let backend = Backend::postgres().await;
    usage_sums_what_runs_used_and_users_see_their_own(&backend.url).await;
}
