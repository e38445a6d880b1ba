//! Managing conversations from the page (SPEC §10, issue 38): `PATCH
//! /api/{user}/conversations/{id}` renames, `?q=` searches titles, and `replace_from` on the chat
//! request edits a sent message or regenerates an answer: the stored history is rewound to just
//! before that user message, the model sees the edited history, and the store keeps it as
//! answered. Every limit at and past it; every refusal names its field.

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app};

async fn chat(app: &TestApp, body: Value) -> (u16, Value) {
    let response = app.post_json("/api/ada/chat", &body).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn messages(app: &TestApp, conversation: &str) -> Vec<(i64, String, String)> {
    let detail: Value = app
        .get(&format!("/api/ada/conversations/{conversation}"))
        .await
        .json()
        .await
        .expect("json");
    detail["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["seq"].as_i64().expect("seq"),
                m["role"].as_str().expect("role").to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn patch(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let response = app
        .client
        .patch(app.url(path))
        .json(&body)
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A conversation of two questions and their answers; returns its id.
async fn two_turns(app: &TestApp) -> String {
    app.llm.push(Reply::text("A1"));
    let (_, first) = chat(app, json!({"message": "Q1"})).await;
    let id = first["conversation_id"].as_str().expect("id").to_string();
    app.llm.push(Reply::text("A2"));
    chat(app, json!({"message": "Q2", "conversation_id": id})).await;
    id
}

#[tokio::test]
async fn an_edited_message_replaces_it_and_everything_after_and_the_model_sees_the_edit() {
    let app = spawn_app().await;
    let id = two_turns(&app).await;
    let before = messages(&app, &id).await;
    assert_eq!(
        before.iter().map(|m| m.0).collect::<Vec<_>>(),
        [1, 2, 3, 4],
        "{before:?}"
    );

    app.llm.push(Reply::text("A1 again"));
    let (status, edited) = chat(
        &app,
        json!({"message": "Q1 edited", "conversation_id": id, "replace_from": 1}),
    )
    .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["response"], "A1 again");
    let sent: Vec<String> = app.llm.requests()[2]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert_eq!(sent[1..], ["Q1 edited"], "no old history reaches the model");
    let after = messages(&app, &id).await;
    assert_eq!(
        after,
        [
            (1, "user".into(), "Q1 edited".into()),
            (2, "assistant".into(), "A1 again".into())
        ]
    );
}

#[tokio::test]
async fn regenerating_sends_the_same_question_over_the_history_before_it() {
    let app = spawn_app().await;
    let id = two_turns(&app).await;
    app.llm.push(Reply::text("A2, take two"));
    let (status, again) = chat(
        &app,
        json!({"message": "Q2", "conversation_id": id, "replace_from": 3}),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    let sent: Vec<String> = app.llm.requests()[2]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert_eq!(sent[1..], ["Q1", "A1", "Q2"]);
    let contents: Vec<String> = messages(&app, &id).await.into_iter().map(|m| m.2).collect();
    assert_eq!(contents, ["Q1", "A1", "Q2", "A2, take two"]);
}

#[tokio::test]
async fn replace_from_is_refused_naming_the_field_when_it_names_no_user_message_of_the_conversation()
 {
    let app = spawn_app().await;
    let id = two_turns(&app).await;
    for (body, status, param) in [
        (
            json!({"message": "x", "replace_from": 1}),
            404,
            "conversation_id",
        ),
        (
            json!({"message": "x", "conversation_id": id, "replace_from": 2}),
            409,
            "replace_from",
        ),
        (
            json!({"message": "x", "conversation_id": id, "replace_from": 5}),
            404,
            "replace_from",
        ),
        (
            json!({"message": "x", "conversation_id": id, "replace_from": 0}),
            404,
            "replace_from",
        ),
        (
            json!({"message": "x", "conversation_id": "nope", "replace_from": 1}),
            404,
            "conversation_id",
        ),
        (
            json!({"message": "x", "conversation_id": id, "replace_from": "one"}),
            400,
            "",
        ),
    ] {
        let (got, error) = chat(&app, body.clone()).await;
        assert_eq!(got, status, "{body} → {error}");
        if !param.is_empty() {
            assert_eq!(error["error"]["param"], param, "{body} → {error}");
        }
    }
    assert_eq!(messages(&app, &id).await.len(), 4, "nothing was removed");
}

#[tokio::test]
async fn an_edit_while_an_answer_is_in_progress_is_a_409_conversation_busy() {
    let app = spawn_app().await;
    let id = two_turns(&app).await;
    app.llm.push(Reply::hang());
    let running = app
        .post_json(
            "/api/ada/chat",
            &json!({"message": "Q3", "conversation_id": id, "stream": true}),
        )
        .await;
    assert_eq!(running.status(), 200);
    // The busy check reads the store, where the recorder writes the run shortly after it starts.
    let listed = format!("/v1/runs?conversation_id={id}&status=running");
    let mut stored = false;
    for _ in 0..100 {
        let page: Value = app.get(&listed).await.json().await.expect("json");
        if page["data"].as_array().is_some_and(|d| !d.is_empty()) {
            stored = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(stored, "the run was never listed as running");
    let (status, error) = chat(
        &app,
        json!({"message": "Q1 edited", "conversation_id": id, "replace_from": 1}),
    )
    .await;
    assert_eq!(status, 409, "{error}");
    assert_eq!(error["error"]["code"], "conversation_busy");
    drop(running);
}

#[tokio::test]
async fn a_conversation_is_renamed_and_found_by_its_title() {
    let app = spawn_app().await;
    let id = two_turns(&app).await;
    app.llm.push(Reply::text("B1"));
    chat(&app, json!({"message": "Another topic"})).await;
    let path = format!("/api/ada/conversations/{id}");
    let (status, renamed) = patch(&app, &path, json!({"title": "  Trip to Rome  "})).await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["title"], "Trip to Rome");
    assert_eq!(renamed["id"], id.as_str());

    let found: Value = app
        .get("/api/ada/conversations?q=rome")
        .await
        .json()
        .await
        .expect("json");
    let ids: Vec<&str> = found["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()]);
    let all: Value = app
        .get("/api/ada/conversations")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(all["data"].as_array().map(Vec::len), Some(2));

    // Titles and searches: 1 to 200 characters, at and past the limit, naming the field.
    let longest = "é".repeat(200);
    assert_eq!(patch(&app, &path, json!({"title": longest})).await.0, 200);
    for (body, param) in [
        (json!({"title": "é".repeat(201)}), "title"),
        (json!({"title": "   "}), "title"),
        (json!({"title": "a\u{0}b"}), "title"),
    ] {
        let (status, error) = patch(&app, &path, body.clone()).await;
        assert_eq!(status, 400, "{body} → {error}");
        assert_eq!(error["error"]["param"], param, "{error}");
    }
    assert_eq!(patch(&app, &path, json!({})).await.0, 400);
    assert_eq!(
        patch(&app, &path, json!({"title": "x", "pinned": true}))
            .await
            .0,
        400
    );
    assert_eq!(
        patch(&app, "/api/ada/conversations/nope", json!({"title": "x"}))
            .await
            .0,
        404
    );
    let at_limit = app
        .get(&format!("/api/ada/conversations?q={}", "a".repeat(200)))
        .await;
    assert_eq!(at_limit.status(), 200);
    let past: Value = app
        .get(&format!("/api/ada/conversations?q={}", "a".repeat(201)))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(past["error"]["param"], "q", "{past}");
}
