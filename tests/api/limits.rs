//! Session limits under load: a few hundred concurrent streams against `maxConcurrentSessions`
//! and `maxQueuedSessions`: past them, 503 `overloaded` with `Retry-After`; every admitted stream
//! completes; nothing hangs.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::spawn_app_with;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_session_limits_requests_get_503_and_the_rest_complete() {
    let app = spawn_app_with(|config| {
        config["server"] = json!({"maxConcurrentSessions": 8, "maxQueuedSessions": 16});
    })
    .await;
    let requests = 300;
    for _ in 0..requests {
        app.llm
            .push(Reply::text("a b c d").with_chunk_gap(Duration::from_millis(20)));
    }
    let client = reqwest::Client::new();
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let tasks: Vec<_> = (0..requests)
        .map(|_| {
            let (client, url, body) = (
                client.clone(),
                app.url("/v1/chat/completions"),
                body.clone(),
            );
            tokio::spawn(async move {
                let response = client.post(url).json(&body).send().await.expect("sent");
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .map(|v| v.to_str().unwrap_or("").to_string());
                let text = response.text().await.expect("body");
                (status, retry_after, text)
            })
        })
        .collect();
    let outcomes = tokio::time::timeout(
        Duration::from_secs(60),
        futures_util::future::join_all(tasks),
    )
    .await
    .expect("nothing hangs");
    let mut completed = 0;
    let mut refused = 0;
    for outcome in outcomes {
        let (status, retry_after, text) = outcome.expect("task");
        match status {
            200 => {
                assert!(
                    text.contains("\"finish_reason\":\"stop\"")
                        && text.trim_end().ends_with("data: [DONE]"),
                    "{text}"
                );
                completed += 1;
            }
            503 => {
                assert_eq!(retry_after.as_deref(), Some("1"));
                let error: Value = serde_json::from_str(&text).expect("json");
                assert_eq!(error["error"]["code"], "overloaded");
                refused += 1;
            }
            other => panic!("unexpected status {other}: {text}"),
        }
    }
    assert_eq!(completed + refused, requests);
    assert!(
        refused > 0,
        "300 at once must exceed 8 running + 16 waiting"
    );
    assert!(
        completed >= 24,
        "at least the running and waiting ones complete: {completed}"
    );
    let metrics = app.get("/metrics").await.text().await.expect("metrics");
    assert!(
        metrics.contains("agentd_sessions_active 0")
            && metrics.contains("agentd_sse_streams_active 0"),
        "{metrics}"
    );
}
