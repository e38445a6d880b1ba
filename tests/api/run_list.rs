//! `GET /v1/runs`: a user key lists its own user's runs, an admin key everyone's; filters by
//! status, agent, user and conversation; pages with `next`; every bad parameter is a 400 naming it.

use serde_json::{Value, json};

use crate::support::{TestApp, spawn_app_with};

async fn keyed_app() -> TestApp {
    spawn_app_with(|config| {
        config["auth"] = json!({"keys": [
            {"key": "admin-secret", "admin": true},
            {"key": "alice-secret", "userId": "alice"},
            {"key": "bob-secret", "userId": "bob"}
        ]});
    })
    .await
}

async fn chat(app: &TestApp, key: &str, user: &str) -> String {
    let answer: Value = app
        .client
        .post(app.url(&format!("/api/{user}/chat")))
        .bearer_auth(key)
        .json(&json!({"message": "hello"}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    answer["run_id"].as_str().expect("run id").to_string()
}

async fn list(app: &TestApp, key: &str, query: &str) -> (u16, Value) {
    let response = app
        .client
        .get(app.url(&format!("/v1/runs{query}")))
        .bearer_auth(key)
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

fn run_ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|r| r["run_id"].as_str().expect("id").to_string())
        .collect()
}

#[tokio::test]
async fn each_key_lists_the_runs_it_may_see_newest_first_and_page_by_page() {
    let app = keyed_app().await;
    let first = chat(&app, "alice-secret", "alice").await;
    let second = chat(&app, "alice-secret", "alice").await;
    let bobs = chat(&app, "bob-secret", "bob").await;

    let (status, alice) = list(&app, "alice-secret", "").await;
    assert_eq!(status, 200, "{alice}");
    assert_eq!(run_ids(&alice), [second.clone(), first.clone()], "{alice}");
    let item = &alice["data"][0];
    assert_eq!(item["user_id"], "alice");
    assert_eq!(item["status"], "completed");
    assert_eq!(item["exit_reason"], "final_answer");
    assert!(item["output_tokens"].as_i64().unwrap_or(0) > 0, "{item}");
    assert!(alice["next"].is_null(), "one page: {alice}");

    let (_, admin) = list(&app, "admin-secret", "").await;
    assert_eq!(
        run_ids(&admin),
        [bobs.clone(), second.clone(), first.clone()]
    );
    let (_, only_bob) = list(&app, "admin-secret", "?user=bob").await;
    assert_eq!(run_ids(&only_bob), std::slice::from_ref(&bobs));
    let (status, refused) = list(&app, "alice-secret", "?user=bob").await;
    assert_eq!(status, 403, "{refused}");

    let (_, finished) = list(&app, "admin-secret", "?status=completed,failed&agent=chat").await;
    assert_eq!(run_ids(&finished).len(), 3, "{finished}");
    let (_, running) = list(&app, "admin-secret", "?status=running").await;
    assert!(run_ids(&running).is_empty(), "{running}");
    let conversation = admin["data"][0]["conversation_id"].as_str().expect("conv");
    let (_, in_conversation) = list(
        &app,
        "admin-secret",
        &format!("?conversation_id={conversation}"),
    )
    .await;
    assert_eq!(run_ids(&in_conversation), std::slice::from_ref(&bobs));

    let (_, page_one) = list(&app, "admin-secret", "?limit=2").await;
    assert_eq!(run_ids(&page_one), [bobs, second]);
    let next = page_one["next"].as_str().expect("a next page");
    let (_, page_two) = list(&app, "admin-secret", &format!("?limit=2&after={next}")).await;
    assert_eq!(run_ids(&page_two), [first]);
    assert!(page_two["next"].is_null());
}

#[tokio::test]
async fn bad_listing_parameters_are_refused_by_name_at_and_past_the_limits() {
    let app = keyed_app().await;
    for (query, param) in [
        ("?limit=0", "limit"),
        ("?limit=1001", "limit"),
        ("?status=done", "status"),
        ("?status=running,", "status"),
        ("?after=no-such-run", "after"),
        ("?after=", "after"),
        ("?after=12%7C", "after"),
    ] {
        let (status, body) = list(&app, "admin-secret", query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["param"], param, "{query}: {body}");
    }
    let (status, body) = list(&app, "admin-secret", "?limit=1000").await;
    assert_eq!(status, 200, "1000 is the largest page: {body}");
    let (status, _) = list(&app, "wrong-key", "").await;
    assert_eq!(status, 401);
}
