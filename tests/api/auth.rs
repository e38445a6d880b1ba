//! API keys (SPEC §2, §4): 401 without or with a wrong key, both header forms accepted, public
//! operational routes, per-key agent allow-lists (403), and no auth at all when no keys exist.

use serde_json::{Value, json};

use crate::support::{TestApp, run_id, spawn_app, spawn_app_with};

async fn keyed_app() -> TestApp {
    spawn_app_with(|config| {
        config["auth"] = json!({"keys": [
            {"key": "admin-secret", "admin": true},
            {"key": "alice-secret", "userId": "alice", "agents": ["chat"]}
        ]});
    })
    .await
}

fn ask(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

async fn error_code(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("json");
    (
        status,
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

#[tokio::test]
async fn requests_without_a_valid_key_are_rejected() {
    let app = keyed_app().await;
    let url = app.url("/v1/chat/completions");
    let missing = app
        .client
        .post(&url)
        .json(&ask("chat"))
        .send()
        .await
        .expect("sent");
    assert_eq!(error_code(missing).await, (401, "unauthorized".into()));
    let wrong = app
        .client
        .post(&url)
        .bearer_auth("nope")
        .json(&ask("chat"))
        .send()
        .await
        .expect("sent");
    assert_eq!(error_code(wrong).await, (401, "unauthorized".into()));
    let models = app
        .client
        .get(app.url("/v1/models"))
        .send()
        .await
        .expect("sent");
    assert_eq!(models.status(), 401);
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn bearer_and_x_api_key_both_work_and_operations_stay_public() {
    let app = keyed_app().await;
    let url = app.url("/v1/chat/completions");
    let bearer = app
        .client
        .post(&url)
        .bearer_auth("admin-secret")
        .json(&ask("chat"))
        .send()
        .await
        .expect("sent");
    assert_eq!(bearer.status(), 200);
    let header = app
        .client
        .post(&url)
        .header("x-api-key", "admin-secret")
        .json(&ask("fallback"))
        .send()
        .await
        .expect("sent");
    assert_eq!(header.status(), 200);
    for path in ["/health", "/ready", "/metrics"] {
        assert_eq!(app.get(path).await.status(), 200, "{path} is public");
    }
}

#[tokio::test]
async fn a_key_may_only_use_its_allowed_agents() {
    let app = keyed_app().await;
    let url = app.url("/v1/chat/completions");
    let allowed = app
        .client
        .post(&url)
        .bearer_auth("alice-secret")
        .json(&ask("chat"))
        .send()
        .await
        .expect("sent");
    assert_eq!(allowed.status(), 200);
    let run_id = run_id(&allowed);
    app.runtime.flush_recorder().await;
    let run = app
        .runtime
        .store()
        .get_run(&run_id)
        .await
        .expect("store")
        .expect("run");
    assert_eq!(
        run.user_id.as_deref(),
        Some("alice"),
        "runs are recorded for the key's user"
    );
    let denied = app
        .client
        .post(&url)
        .bearer_auth("alice-secret")
        .json(&ask("fallback"))
        .send()
        .await
        .expect("sent");
    assert_eq!(error_code(denied).await, (403, "forbidden".into()));
    let anthropic = app
        .client
        .post(app.url("/v1/messages"))
        .header("x-api-key", "alice-secret")
        .json(&ask("fallback"))
        .send()
        .await
        .expect("sent");
    assert_eq!(anthropic.status(), 403);
}

#[tokio::test]
async fn without_keys_everything_is_open_on_loopback() {
    let app = spawn_app().await;
    assert_eq!(
        app.post_json("/v1/chat/completions", &ask("chat"))
            .await
            .status(),
        200
    );
}
