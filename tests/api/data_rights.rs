//! Data rights (SPEC §14): `GET /api/{user}/export` holds the user's conversations, runs and
//! secret names and nobody else's; `DELETE /api/{user}` erases all of it (another user's data
//! stays) and leaves an audit tombstone of counts only.

use serde_json::{Value, json};

use crate::support::{TestApp, spawn_app_with};

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

async fn app() -> TestApp {
    spawn_app_with(|config| {
        config["secrets"] = json!({"key": KEY_HEX});
        config["auth"] = json!({"keys": [
            {"key": "dr-admin", "admin": true, "id": "root"},
            {"key": "dr-alice", "userId": "alice", "id": "alice-key"},
            {"key": "dr-bob", "userId": "bob", "id": "bob-key"},
        ]});
    })
    .await
}

async fn send(
    app: &TestApp,
    method: reqwest::Method,
    key: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = app.client.request(method, app.url(path)).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_user_exports_and_erases_their_data_and_only_theirs() {
    let app = app().await;
    app.llm.push(secretless_reply("alice's answer"));
    app.llm.push(secretless_reply("bob's answer"));
    for user in ["alice", "bob"] {
        let (status, _) = send(
            &app,
            reqwest::Method::POST,
            &format!("dr-{user}"),
            &format!("/api/{user}/chat"),
            Some(json!({"message": format!("hello from {user}"), "agent": "chat"})),
        )
        .await;
        assert_eq!(status, 200);
    }
    let (status, _) = send(
        &app,
        reqwest::Method::PUT,
        "dr-alice",
        "/api/alice/secrets/TOKEN",
        Some(json!({"value": "the-value"})),
    )
    .await;
    assert_eq!(status, 204);

    let form = reqwest::multipart::Form::new()
        .text("purpose", "user_data")
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"alice's notes".to_vec())
                .file_name("notes.txt")
                .mime_str("text/plain")
                .expect("mime"),
        );
    let uploaded = app
        .client
        .post(app.url("/v1/files"))
        .bearer_auth("dr-alice")
        .multipart(form)
        .send()
        .await
        .expect("sent");
    assert_eq!(uploaded.status(), 200);
    let (status, schedule) = send(
        &app,
        reqwest::Method::POST,
        "dr-alice",
        "/v1/schedules",
        Some(json!({"agent": "chat", "prompt": "morning summary", "cron": "0 8 * * *"})),
    )
    .await;
    assert_eq!(status, 201, "{schedule}");

    let (status, export) = send(
        &app,
        reqwest::Method::GET,
        "dr-alice",
        "/api/alice/export",
        None,
    )
    .await;
    assert_eq!(status, 200, "{export}");
    assert_eq!(export["files"][0]["filename"], "notes.txt", "{export}");
    assert_eq!(export["files"][0]["bytes"], 13);
    assert_eq!(export["schedules"][0]["prompt"], "morning summary");
    assert_eq!(export["schedules"][0]["cron"], "0 8 * * *");
    let text = export.to_string();
    assert!(
        text.contains("hello from alice") && text.contains("alice's answer"),
        "{text}"
    );
    assert!(!text.contains("bob"), "nobody else's data: {text}");
    assert!(!text.contains("the-value"), "secret names only");
    assert_eq!(export["secrets"][0]["name"], "TOKEN");
    assert_eq!(export["runs"].as_array().map(Vec::len), Some(1));
    let (status, _) = send(
        &app,
        reqwest::Method::GET,
        "dr-bob",
        "/api/alice/export",
        None,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = send(&app, reqwest::Method::DELETE, "dr-bob", "/api/alice", None).await;
    assert_eq!(status, 403);

    let (status, erased) = send(
        &app,
        reqwest::Method::DELETE,
        "dr-alice",
        "/api/alice",
        None,
    )
    .await;
    assert_eq!(status, 200, "{erased}");
    assert_eq!(erased["erased"]["runs"], 1);
    assert_eq!(erased["erased"]["conversations"], 1);
    assert_eq!(erased["erased"]["secrets"], 1);
    assert_eq!(erased["erased"]["files"], 1);
    assert_eq!(erased["erased"]["schedules"], 1);
    let (_, after) = send(
        &app,
        reqwest::Method::GET,
        "dr-alice",
        "/api/alice/export",
        None,
    )
    .await;
    assert_eq!(after["runs"], json!([]));
    assert_eq!(after["conversations"], json!([]));
    assert_eq!(after["secrets"], json!([]));
    assert_eq!(after["files"], json!([]));
    assert_eq!(after["schedules"], json!([]));
    let (_, bobs) = send(
        &app,
        reqwest::Method::GET,
        "dr-bob",
        "/api/bob/export",
        None,
    )
    .await;
    assert_eq!(
        bobs["runs"].as_array().map(Vec::len),
        Some(1),
        "bob's data stays"
    );

    let audit = app
        .client
        .get(app.url("/v1/audit?action=user.erased"))
        .bearer_auth("dr-admin")
        .send()
        .await
        .expect("audit")
        .text()
        .await
        .expect("body");
    let row: Value =
        serde_json::from_str(audit.lines().next().expect("a tombstone")).expect("json");
    assert_eq!(row["target"], "user:alice");
    assert_eq!(row["details"]["runs"], 1);
    assert!(
        !audit.contains("hello from alice"),
        "a tombstone without content"
    );
}

/// A cached agent: its answers are kept in Redis, keyed by (among the rest) the user.
const CACHED: &str = "---\ndescription: Cached\nmodels: llm/upstream-model\nfinalization: text\ncache: 1h\n---\nYou answer.\n";

#[tokio::test]
async fn erasing_a_user_removes_their_answers_from_the_redis_cache_and_no_one_elses() {
    crate::support::services::ensure_local_redis(6379);
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("cached.ai"), CACHED).expect("agent");
    let agents = dir.path().display().to_string();
    let prefix = format!("agentd:erase:{}:", uuid::Uuid::new_v4());
    let app = spawn_app_with(|config| {
        config["auth"] = json!({"keys": [
            {"key": "dr-alice", "userId": "alice", "id": "alice-key"},
            {"key": "dr-bob", "userId": "bob", "id": "bob-key"},
        ]});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents));
        config["cache"] = json!({"backend": "redis",
            "redis": {"url": "redis://127.0.0.1:6379", "keyPrefix": prefix}});
    })
    .await;
    let ask = json!({"model": "cached", "messages": [{"role": "user", "content": "my plan?"}]});
    for (key, answer) in [("dr-alice", "alice's plan"), ("dr-bob", "bob's plan")] {
        app.llm.push(secretless_reply(answer));
        for _ in 0..2 {
            let (status, body) = send(
                &app,
                reqwest::Method::POST,
                key,
                "/v1/chat/completions",
                Some(ask.clone()),
            )
            .await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["choices"][0]["message"]["content"], answer);
        }
    }
    assert_eq!(app.llm.request_count(), 2, "each second ask is a cache hit");

    let (status, erased) = send(
        &app,
        reqwest::Method::DELETE,
        "dr-alice",
        "/api/alice",
        None,
    )
    .await;
    assert_eq!(status, 200, "{erased}");
    assert_eq!(erased["erased"]["redis_cache_entries"], 1, "{erased}");

    app.llm.push(secretless_reply("alice's new plan"));
    let (_, body) = send(
        &app,
        reqwest::Method::POST,
        "dr-alice",
        "/v1/chat/completions",
        Some(ask.clone()),
    )
    .await;
    assert_eq!(
        body["choices"][0]["message"]["content"], "alice's new plan",
        "alice's cached answer is gone"
    );
    let (_, body) = send(
        &app,
        reqwest::Method::POST,
        "dr-bob",
        "/v1/chat/completions",
        Some(ask),
    )
    .await;
    assert_eq!(
        body["choices"][0]["message"]["content"], "bob's plan",
        "bob's stays cached"
    );
    assert_eq!(app.llm.request_count(), 3);
}

fn secretless_reply(text: &str) -> crate::support::mock_llm::Reply {
    crate::support::mock_llm::Reply::text(text)
}
