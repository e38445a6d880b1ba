//! The one run pipeline every headend starts runs through (`Runtime::start_run`): a submission
//! refused at admission leaves no claimed `requestId` behind, and a per-user chat answer is
//! saved inside the tracked run, so a shutdown right after the answer still keeps it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{spawn_app_with, sse_data};

#[tokio::test]
async fn a_request_id_refused_at_admission_starts_its_run_when_retried() {
    let app = spawn_app_with(|config| {
        config["server"] = json!({"maxConcurrentSessions": 1, "maxQueuedSessions": 0});
    })
    .await;
    app.llm
        .push(Reply::text("slow").with_first_byte_delay(Duration::from_millis(800)));
    app.llm.push(Reply::text("the retried answer"));
    let busy = {
        let (client, url) = (app.client.clone(), app.url("/v1/agents/chat/runs"));
        tokio::spawn(async move {
            client
                .post(url)
                .json(&json!({"prompt": "occupy the only slot"}))
                .send()
                .await
                .expect("sent")
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let submission = json!({"prompt": "hello", "requestId": "req-1"});
    let refused = app.post_json("/v1/agents/chat/runs", &submission).await;
    assert_eq!(refused.status(), 503, "the only slot is taken");
    assert_eq!(busy.await.expect("joined").status(), 200);

    let retried = app.post_json("/v1/agents/chat/runs", &submission).await;
    assert_eq!(
        retried.status(),
        200,
        "the retry starts the run the refused submission never started"
    );
    let result: Value = retried.json().await.expect("json");
    assert_eq!(result["success"], true);
    assert_eq!(result["final_report"]["content"], "the retried answer");
}

#[tokio::test]
async fn a_chat_answer_is_saved_before_shutdown_completes() {
    let app = spawn_app_with(|_| {}).await;
    app.llm.push(Reply::text("kept across the shutdown"));
    let response = app
        .post_json(
            "/api/ada/chat",
            &json!({"message": "remember this", "stream": true}),
        )
        .await;
    let conversation = response.headers()["x-agentd-conversation-id"]
        .to_str()
        .expect("text")
        .to_string();
    let frames = sse_data(response).await;
    assert!(
        frames
            .iter()
            .any(|f| f.contains("kept across the shutdown"))
    );
    // The stream has ended; shut down at once, as SIGTERM would.
    app.runtime.drain().await;
    app.runtime.close().await;

    let url = app.runtime.config().store.url.clone();
    let store = agentd::store::open(&url).await.expect("store reopens");
    let messages = store
        .list_messages("ada", &conversation, 0, 100)
        .await
        .expect("messages");
    let texts: Vec<_> = messages.iter().map(|m| m.content.clone()).collect();
    assert_eq!(
        texts,
        [
            Some("remember this".to_string()),
            Some("kept across the shutdown".to_string())
        ],
        "both sides of the exchange are stored"
    );
    store.close().await;
}

/// A run whose id is handed out before it ends (a background run, an A2A task) is in the store
/// when the client gets its id: a replica that died right after answering would leave it to be
/// found ended `owner_lost`, not unknown. Before, its start waited for the recorder's next batch.
#[tokio::test]
async fn a_handed_out_run_is_stored_before_its_id_is() {
    let app = spawn_app_with(|_| {}).await;
    let store = app.runtime.store().clone();
    for round in 0..5 {
        app.llm
            .push(Reply::text("later").with_first_byte_delay(Duration::from_millis(200)));
        let response = app
            .post_json(
                "/v1/agents/chat/runs",
                &json!({"prompt": format!("go {round}"), "background": true}),
            )
            .await;
        assert_eq!(response.status().as_u16(), 202);
        let body: Value = response.json().await.expect("json");
        let run_id = body["run_id"].as_str().expect("run id");
        assert!(
            store.get_run(run_id).await.expect("read").is_some(),
            "round {round}: run {run_id} is not in the store yet"
        );
    }
}
