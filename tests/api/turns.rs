//! Conversations that take turns (SPEC §13, issue 41): a second message to a conversation that
//! is still answering follows `busy` — it waits and is answered after the first (`enqueue`,
//! shown as queued and withdrawable), is refused (`reject`), or stops the answer in progress
//! (`interrupt` keeps the partial answer, `steer` has one answer cover both). The stored
//! history always alternates as it was answered.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app};

/// How long the first answer takes before its first byte: the second message lands inside it.
const SLOW_ANSWER: Duration = Duration::from_millis(1500);

async fn chat(app: &TestApp, body: Value) -> (u16, Value) {
    let response = app.post_json("/api/ada/chat", &body).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn conversation(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/api/ada/conversations/{id}"))
        .await
        .json()
        .await
        .expect("json")
}

/// `(role, content)` of the stored messages.
async fn history(app: &TestApp, id: &str) -> Vec<(String, String)> {
    conversation(app, id).await["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().expect("role").to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The history once it holds `len` messages: a stream's last frame can reach the client just
/// before its answer is stored (up to 5 s).
async fn history_of_length(app: &TestApp, id: &str, len: usize) -> Vec<(String, String)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let stored = history(app, id).await;
        if stored.len() >= len || tokio::time::Instant::now() > deadline {
            return stored;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(role, text)| (role.to_string(), text.to_string()))
        .collect()
}

/// Sends the first message of conversation `id` in the background (its answer is slow) and
/// waits until it holds the conversation.
async fn first_message_in_progress(
    app: &TestApp,
    id: &str,
) -> tokio::task::JoinHandle<(u16, Value)> {
    app.llm
        .push(Reply::text("A1").with_first_byte_delay(SLOW_ANSWER));
    let client = app.client.clone();
    let url = app.url("/api/ada/chat");
    let body = json!({"message": "Q1", "conversation_id": id});
    let first = tokio::spawn(async move {
        let response = client.post(url).json(&body).send().await.expect("sent");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    });
    until_started(app, id).await;
    first
}

/// Waits until the conversation's first message is stored: it holds the turn.
async fn until_started(app: &TestApp, id: &str) {
    for _ in 0..200 {
        if app
            .get(&format!("/api/ada/conversations/{id}"))
            .await
            .status()
            == 200
            && !history(app, id).await.is_empty()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the first message never started");
}

/// The other message's own request, sent in the background.
fn send_in_background(app: &TestApp, body: Value) -> tokio::task::JoinHandle<(u16, Value)> {
    let client = app.client.clone();
    let url = app.url("/api/ada/chat");
    tokio::spawn(async move {
        let response = client.post(url).json(&body).send().await.expect("sent");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

/// Sends `body` (a streamed chat) in the background: the first future resolves once the stream
/// has carried `text`, the task with the whole body once it ends.
fn stream_until(
    app: &TestApp,
    body: Value,
    text: &'static str,
) -> (
    tokio::sync::oneshot::Receiver<()>,
    tokio::task::JoinHandle<String>,
) {
    let (said, heard) = tokio::sync::oneshot::channel();
    let client = app.client.clone();
    let url = app.url("/api/ada/chat");
    let task = tokio::spawn(async move {
        let mut response = client.post(url).json(&body).send().await.expect("sent");
        let mut seen = String::new();
        let mut said = Some(said);
        while let Ok(Some(chunk)) = response.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains(text)
                && let Some(said) = said.take()
            {
                let _ = said.send(());
            }
        }
        seen
    });
    (heard, task)
}

/// Waits until the conversation lists `count` queued messages; returns them.
async fn queued(app: &TestApp, id: &str, count: usize) -> Vec<Value> {
    for _ in 0..200 {
        let detail = conversation(app, id).await;
        let queued = detail["queued"].as_array().cloned().unwrap_or_default();
        if queued.len() == count {
            return queued;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the conversation never listed {count} queued messages");
}

/// The report: two messages half a second apart were both answered, but the history
/// read user, user, assistant, assistant and the second run saw the first message without its
/// answer. Now the second waits (listed as queued), is answered after the first, and its run
/// sees the first answer.
#[tokio::test]
async fn a_second_message_waits_for_the_first_answer_and_the_history_alternates() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-enqueue").await;
    app.llm.push(Reply::text("A2"));
    let second = send_in_background(
        &app,
        json!({"message": "Q2", "conversation_id": "c-enqueue"}),
    );
    let waiting = queued(&app, "c-enqueue", 1).await;
    assert_eq!(waiting[0]["content"], "Q2");
    assert_eq!(waiting[0]["position"], 1);
    // Queued messages are not history yet.
    assert_eq!(
        history_of_length(&app, "c-enqueue", 1).await,
        pairs(&[("user", "Q1")])
    );

    let (status, first) = first.await.expect("first");
    assert_eq!((status, first["response"].as_str()), (200, Some("A1")));
    let (status, second) = second.await.expect("second");
    assert_eq!((status, second["response"].as_str()), (200, Some("A2")));

    assert_eq!(
        history_of_length(&app, "c-enqueue", 4).await,
        pairs(&[
            ("user", "Q1"),
            ("assistant", "A1"),
            ("user", "Q2"),
            ("assistant", "A2")
        ])
    );
    let seen: Vec<String> = app.llm.requests()[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        seen,
        ["Q1", "A1", "Q2"],
        "the second run saw the first answer"
    );
    assert!(queued(&app, "c-enqueue", 0).await.is_empty());
}

/// Three messages queued behind one are answered in arrival order.
#[tokio::test]
async fn queued_messages_are_answered_in_arrival_order() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-order").await;
    let mut later = Vec::new();
    for n in 2..=4 {
        app.llm.push(Reply::text(format!("A{n}")));
        later.push(send_in_background(
            &app,
            json!({"message": format!("Q{n}"), "conversation_id": "c-order"}),
        ));
        queued(&app, "c-order", n - 1).await;
    }
    first.await.expect("first");
    for handle in later {
        assert_eq!(handle.await.expect("later").0, 200);
    }
    let expected: Vec<(String, String)> = (1..=4)
        .flat_map(|n| {
            [
                ("user".to_string(), format!("Q{n}")),
                ("assistant".to_string(), format!("A{n}")),
            ]
        })
        .collect();
    assert_eq!(
        history_of_length(&app, "c-order", expected.len()).await,
        expected
    );
}

/// `busy: reject` refuses a message to a busy conversation with 409 `conversation_busy` and
/// stores nothing of it; once the answer is in, the same message is taken.
#[tokio::test]
async fn reject_refuses_a_message_to_a_busy_conversation() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-reject").await;
    let (status, refused) = chat(
        &app,
        json!({"message": "Q2", "conversation_id": "c-reject", "busy": "reject"}),
    )
    .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "conversation_busy", "{refused}");
    first.await.expect("first");
    app.llm.push(Reply::text("A2"));
    let (status, _) = chat(
        &app,
        json!({"message": "Q2", "conversation_id": "c-reject", "busy": "reject"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        history_of_length(&app, "c-reject", 4).await,
        pairs(&[
            ("user", "Q1"),
            ("assistant", "A1"),
            ("user", "Q2"),
            ("assistant", "A2")
        ])
    );
}

/// A bad `busy` is a 400 naming the field.
#[tokio::test]
async fn an_unknown_busy_policy_is_refused_naming_the_field() {
    let app = spawn_app().await;
    let (status, body) = chat(&app, json!({"message": "hi", "busy": "later"})).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("busy"), "{body}");
}

/// `busy: interrupt` ends the answer in progress `cancelled` and answers the new message next.
#[tokio::test]
async fn interrupt_cancels_the_answer_in_progress_and_answers_next() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-interrupt").await;
    app.llm.push(Reply::text("A2"));
    let (status, second) = chat(
        &app,
        json!({"message": "Q2", "conversation_id": "c-interrupt", "busy": "interrupt"}),
    )
    .await;
    assert_eq!((status, second["response"].as_str()), (200, Some("A2")));
    let (_, first) = first.await.expect("first");
    assert_eq!(first["finish_reason"], "cancelled", "{first}");
    let stored = history_of_length(&app, "c-interrupt", 3).await;
    // The interrupted answer had no text yet: nothing of it is kept, and the new message is
    // answered after it.
    assert_eq!(
        stored,
        pairs(&[("user", "Q1"), ("user", "Q2"), ("assistant", "A2")])
    );
}

/// `busy: steer` joins the answer in progress: the model has just answered Q1 with turns left,
/// so that answer becomes a draft and one more turn answers both. Both requests get that one
/// answer; the first run is not cancelled.
#[tokio::test]
async fn steer_has_one_answer_cover_both_messages() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-steer").await;
    app.llm.push(Reply::text("A for both"));
    let (status, second) = chat(
        &app,
        json!({"message": "Q2", "conversation_id": "c-steer", "busy": "steer"}),
    )
    .await;
    assert_eq!(
        (status, second["response"].as_str()),
        (200, Some("A for both")),
        "{second}"
    );
    let (_, first) = first.await.expect("first");
    assert_eq!(first["response"], "A for both", "{first}");
    assert_eq!(
        history_of_length(&app, "c-steer", 3).await,
        pairs(&[("user", "Q1"), ("user", "Q2"), ("assistant", "A for both")])
    );
    let requests = app.llm.requests();
    assert_eq!(
        requests.len(),
        2,
        "the first answer went on, it did not start over"
    );
    let text = requests[1]["messages"].to_string();
    let (q1, draft, q2) = (text.find("Q1"), text.find("A1"), text.find("Q2"));
    assert!(
        q1 < draft && draft < q2,
        "Q1, the draft answer, then Q2: {text}"
    );
}

/// A steering message joins at the running session's next turn: the work done so far (a tool
/// call and its result) is kept, the message follows it, and the steering request streams the
/// answer from there, told first that its message joined.
#[tokio::test]
async fn a_steering_message_joins_the_next_turn_of_the_answer_in_progress() {
    let app = spawn_app().await;
    app.llm.push(
        Reply::tool_calls(vec![ToolCall::new("call-1", "nope__lookup", "{}")])
            .with_first_byte_delay(SLOW_ANSWER),
    );
    let first = send_in_background(&app, json!({"message": "Q1", "conversation_id": "c-join"}));
    until_started(&app, "c-join").await;
    app.llm.push(Reply::text("Both answered"));
    let response = app
        .post_json(
            "/api/ada/chat",
            &json!({"message": "Q2", "conversation_id": "c-join", "busy": "steer", "stream": true}),
        )
        .await;
    let body = response.text().await.expect("body");
    let frames = crate::support::numbered_frames(&body);
    let joined_at = frames
        .iter()
        .position(|(_, event, data)| event == "progress" && data["kind"] == "message_joined")
        .unwrap_or_else(|| panic!("a message_joined progress: {body}"));
    let output_at = frames.iter().position(|(_, event, _)| event == "output");
    assert!(Some(joined_at) < output_at, "{body}");
    assert!(body.contains("Both answered"), "{body}");
    let (_, first) = first.await.expect("first");
    assert_eq!(first["response"], "Both answered", "{first}");
    assert_eq!(
        history_of_length(&app, "c-join", 3).await,
        pairs(&[
            ("user", "Q1"),
            ("user", "Q2"),
            ("assistant", "Both answered")
        ])
    );
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 2, "one session: {requests:?}");
    let messages = requests[1]["messages"].as_array().expect("messages");
    let tool_at = messages.iter().position(|m| m["role"] == "tool");
    let q2_at = messages.iter().position(|m| m["content"] == "Q2");
    assert!(tool_at.is_some() && tool_at < q2_at, "{messages:?}");
}

/// A steering message does not jump the queue: behind a message that waits (`enqueue`) it
/// joins that message's answer, not the one in progress.
#[tokio::test]
async fn a_steering_message_behind_a_queued_one_joins_that_answer() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-order").await;
    app.llm
        .push(Reply::text("A2 and A3").with_first_byte_delay(Duration::from_millis(300)));
    let second = send_in_background(&app, json!({"message": "Q2", "conversation_id": "c-order"}));
    queued(&app, "c-order", 1).await;
    let third = send_in_background(
        &app,
        json!({"message": "Q3", "conversation_id": "c-order", "busy": "steer"}),
    );
    queued(&app, "c-order", 2).await;
    let (_, first) = first.await.expect("first");
    assert_eq!(first["response"], "A1", "{first}");
    let (_, second) = second.await.expect("second");
    let (_, third) = third.await.expect("third");
    assert_eq!(second["response"], "A2 and A3", "{second}");
    assert_eq!(third["response"], "A2 and A3", "{third}");
    assert_eq!(
        history_of_length(&app, "c-order", 5).await,
        pairs(&[
            ("user", "Q1"),
            ("assistant", "A1"),
            ("user", "Q2"),
            ("user", "Q3"),
            ("assistant", "A2 and A3")
        ])
    );
}

/// A queued message can be withdrawn: it is never stored or answered, its run ends
/// `cancelled`, and withdrawing it again (or an answered one) is a 404 naming `run_id`.
#[tokio::test]
async fn a_queued_message_can_be_withdrawn() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-withdraw").await;
    let second = send_in_background(
        &app,
        json!({"message": "Q2", "conversation_id": "c-withdraw"}),
    );
    let waiting = queued(&app, "c-withdraw", 1).await;
    let run_id = waiting[0]["run_id"].as_str().expect("run id").to_string();
    let path = format!("/api/ada/conversations/c-withdraw/queue/{run_id}");
    let response = app
        .client
        .delete(app.url(&path))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status().as_u16(), 204);
    let (_, second) = second.await.expect("second");
    assert_eq!(second["finish_reason"], "cancelled", "{second}");
    first.await.expect("first");
    assert_eq!(
        history_of_length(&app, "c-withdraw", 2).await,
        pairs(&[("user", "Q1"), ("assistant", "A1")])
    );
    let again = app
        .client
        .delete(app.url(&path))
        .send()
        .await
        .expect("sent");
    assert_eq!(again.status().as_u16(), 404);
    let body: Value = again.json().await.expect("json");
    assert_eq!(body["error"]["param"], "run_id", "{body}");
}

/// A streamed message that must wait says so: a `progress` event of kind `queued` comes first.
#[tokio::test]
async fn a_streamed_queued_message_shows_a_queued_progress_event() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-stream").await;
    app.llm.push(Reply::text("A2"));
    let response = app
        .post_json(
            "/api/ada/chat",
            &json!({"message": "Q2", "conversation_id": "c-stream", "stream": true}),
        )
        .await;
    let body = response.text().await.expect("body");
    let frames = crate::support::numbered_frames(&body);
    let progress = frames
        .iter()
        .find(|(_, event, _)| event == "progress")
        .expect("a progress event");
    assert_eq!(progress.2["kind"], "queued", "{body}");
    let progress_at = frames.iter().position(|(_, e, _)| e == "progress");
    let output_at = frames.iter().position(|(_, e, _)| e == "output");
    assert!(progress_at < output_at, "{body}");
    first.await.expect("first");
}

/// The AI SDK stream of a queued message carries the same `queued` progress.
#[tokio::test]
async fn the_ai_sdk_stream_of_a_queued_message_shows_it_queued() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-sdk").await;
    app.llm.push(Reply::text("A2"));
    let response = app
        .client
        .post(app.url("/api/ada/chat"))
        .json(&json!({
            "id": "c-sdk",
            "messages": [{"role": "user", "parts": [{"type": "text", "text": "Q2"}]}],
        }))
        .send()
        .await
        .expect("sent");
    let body = response.text().await.expect("body");
    assert!(body.contains("queued"), "{body}");
    assert!(body.contains("A2"), "{body}");
    first.await.expect("first");
    assert_eq!(
        history_of_length(&app, "c-sdk", 4).await,
        pairs(&[
            ("user", "Q1"),
            ("assistant", "A1"),
            ("user", "Q2"),
            ("assistant", "A2")
        ])
    );
}

/// `busy: interrupt` keeps what the interrupted answer had said, so the history alternates.
#[tokio::test]
async fn interrupt_keeps_the_partial_answer() {
    let app = spawn_app().await;
    app.llm.push(
        Reply::text_in_pieces(&["Partial ", "answer ", "never ", "finished"])
            .with_chunk_gap(Duration::from_millis(400)),
    );
    let (said, first) = stream_until(
        &app,
        json!({"message": "Q1", "conversation_id": "c-partial", "stream": true}),
        "Partial",
    );
    // Interrupted once the first answer has said something, however slow the box is.
    said.await
        .expect("the first answer streamed its first words");
    app.llm.push(Reply::text("A2"));
    let (status, second) = chat(
        &app,
        json!({"message": "Q2", "conversation_id": "c-partial", "busy": "interrupt"}),
    )
    .await;
    assert_eq!((status, second["response"].as_str()), (200, Some("A2")));
    first.await.expect("first");
    let stored = history_of_length(&app, "c-partial", 4).await;
    assert_eq!(stored.len(), 4, "{stored:?}");
    assert_eq!(stored[1].0, "assistant");
    assert!(stored[1].1.starts_with("Partial"), "{stored:?}");
    assert_eq!(stored[2], ("user".to_string(), "Q2".to_string()));
}

/// AG-UI threads take turns too: `forwardedProps.busy: reject` is refused while the thread
/// answers, a plain message waits and is answered after, and a bad policy names the field.
#[tokio::test]
async fn ag_ui_threads_take_turns() {
    let app = spawn_app().await;
    let input = |text: &str, busy: Option<&str>| {
        let mut props = json!({"userId": "ada"});
        if let Some(busy) = busy {
            props["busy"] = json!(busy);
        }
        json!({"threadId": "c-agui", "runId": format!("r-{text}"), "state": {}, "tools": [],
            "context": [], "forwardedProps": props,
            "messages": [{"id": text, "role": "user", "content": text}]})
    };
    let first = first_message_in_progress(&app, "c-agui").await;
    let refused = app
        .post_json("/ag-ui/chat", &input("Q2", Some("reject")))
        .await;
    assert_eq!(refused.status().as_u16(), 409);
    let bad = app
        .post_json("/ag-ui/chat", &input("Q2", Some("later")))
        .await;
    assert_eq!(bad.status().as_u16(), 400);
    let body: Value = bad.json().await.expect("json");
    assert_eq!(body["error"]["param"], "forwardedProps.busy", "{body}");
    app.llm.push(Reply::text("A2"));
    let answered = app.post_json("/ag-ui/chat", &input("Q2", None)).await;
    assert_eq!(answered.status().as_u16(), 200);
    let text = answered.text().await.expect("body");
    assert!(text.contains("A2"), "{text}");
    first.await.expect("first");
    assert_eq!(
        history_of_length(&app, "c-agui", 4).await,
        pairs(&[
            ("user", "Q1"),
            ("assistant", "A1"),
            ("user", "Q2"),
            ("assistant", "A2")
        ])
    );
}

/// A Responses conversation (OpenAI's Conversations API) takes turns like the per-user chat.
async fn responses_conversation(app: &TestApp) -> String {
    let created: Value = app
        .post_json("/v1/conversations", &json!({}))
        .await
        .json()
        .await
        .expect("json");
    created["id"].as_str().expect("conversation id").to_string()
}

/// `(role, text)` of a Responses conversation's items, oldest first.
async fn responses_items(app: &TestApp, id: &str) -> Vec<(String, String)> {
    let items: Value = app
        .get(&format!("/v1/conversations/{id}/items?order=asc"))
        .await
        .json()
        .await
        .expect("json");
    items["data"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|item| item["type"] == "message")
        .map(|item| {
            let text = item["content"][0]["text"].as_str().unwrap_or_default();
            (
                item["role"].as_str().unwrap_or_default().to_string(),
                text.to_string(),
            )
        })
        .collect()
}

/// The conversation's items once they are `expected` (an answer is stored a moment after its
/// response is returned), or as they are after a few seconds.
async fn settled_items(
    app: &TestApp,
    id: &str,
    expected: &[(String, String)],
) -> Vec<(String, String)> {
    let mut items = Vec::new();
    for _ in 0..200 {
        items = responses_items(app, id).await;
        if items == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    items
}

fn respond_in_background(app: &TestApp, body: Value) -> tokio::task::JoinHandle<(u16, Value)> {
    let client = app.client.clone();
    let url = app.url("/v1/responses");
    tokio::spawn(async move {
        let response = client.post(url).json(&body).send().await.expect("sent");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

/// Starts the slow first response of conversation `id`; returns once it holds the turn (its
/// input is stored).
async fn first_response_in_progress(
    app: &TestApp,
    id: &str,
) -> tokio::task::JoinHandle<(u16, Value)> {
    app.llm
        .push(Reply::text("A1").with_first_byte_delay(SLOW_ANSWER));
    let first = respond_in_background(
        app,
        json!({"model": "chat", "input": "Q1", "conversation": id}),
    );
    for _ in 0..200 {
        if !responses_items(app, id).await.is_empty() {
            return first;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the first response never started");
}

/// `busy: reject` on `POST /v1/responses` refuses a request to a conversation that is still
/// answering: 409 `conversation_busy` naming `busy`, nothing of it stored.
#[tokio::test]
async fn a_response_to_a_busy_conversation_is_rejected_naming_busy() {
    let app = spawn_app().await;
    let id = responses_conversation(&app).await;
    let first = first_response_in_progress(&app, &id).await;
    let refused = app
        .post_json(
            "/v1/responses",
            &json!({"model": "chat", "input": "Q2", "conversation": id, "busy": "reject"}),
        )
        .await;
    assert_eq!(refused.status(), 409);
    let refused: Value = refused.json().await.expect("json");
    assert_eq!(refused["error"]["code"], "conversation_busy", "{refused}");
    assert_eq!(refused["error"]["param"], "busy", "{refused}");
    let (status, _) = first.await.expect("first");
    assert_eq!(status, 200);
    let expected = pairs(&[("user", "Q1"), ("assistant", "A1")]);
    assert_eq!(settled_items(&app, &id, &expected).await, expected);
}

/// By default a second response to a busy conversation waits its turn (`enqueue`): it is
/// answered after the first and the items alternate as answered.
#[tokio::test]
async fn a_second_response_to_a_busy_conversation_is_answered_after_the_first() {
    let app = spawn_app().await;
    let id = responses_conversation(&app).await;
    let first = first_response_in_progress(&app, &id).await;
    app.llm.push(Reply::text("A2"));
    let second = respond_in_background(
        &app,
        json!({"model": "chat", "input": "Q2", "conversation": id}),
    );
    let (status, first) = first.await.expect("first");
    assert_eq!(status, 200, "{first}");
    let (status, second) = second.await.expect("second");
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        second["output_text"]
            .as_str()
            .or(second["output"][0]["content"][0]["text"].as_str()),
        Some("A2"),
        "{second}"
    );
    let expected = pairs(&[
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2"),
        ("assistant", "A2"),
    ]);
    assert_eq!(settled_items(&app, &id, &expected).await, expected);
}

/// An unknown `busy` on `POST /v1/responses` is a 400 naming the field.
#[tokio::test]
async fn an_unknown_busy_policy_on_a_response_is_refused_naming_the_field() {
    let app = spawn_app().await;
    let response = app
        .post_json(
            "/v1/responses",
            &json!({"model": "chat", "input": "hi", "busy": "later"}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("json");
    assert!(body.to_string().contains("busy"), "{body}");
}

/// Starts a background response whose answer is slow; its id.
async fn slow_background_response(app: &TestApp, reply: Reply) -> String {
    app.llm.push(reply);
    let started: Value = app
        .post_json(
            "/v1/responses",
            &json!({"model": "chat", "input": "Q1", "background": true}),
        )
        .await
        .json()
        .await
        .expect("json");
    started["id"].as_str().expect("response id").to_string()
}

async fn respond(app: &TestApp, body: Value) -> (u16, Value) {
    let response = app.post_json("/v1/responses", &body).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A response continuing one still answering (`previous_response_id`) follows `busy`:
/// `reject` is 409 `conversation_busy` naming `busy`, `steer` a 400 naming `busy`, and by
/// default (`enqueue`) it waits for the answer and continues after it.
#[tokio::test]
async fn a_response_continuing_one_still_answering_follows_busy() {
    let app = spawn_app().await;
    let previous =
        slow_background_response(&app, Reply::text("A1").with_first_byte_delay(SLOW_ANSWER)).await;
    let (status, refused) = respond(
        &app,
        json!({"model": "chat", "input": "Q2", "previous_response_id": previous, "busy": "reject"}),
    )
    .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "conversation_busy", "{refused}");
    assert_eq!(refused["error"]["param"], "busy", "{refused}");
    let (status, steer) = respond(
        &app,
        json!({"model": "chat", "input": "Q2", "previous_response_id": previous, "busy": "steer"}),
    )
    .await;
    assert_eq!(
        (status, steer["error"]["param"].as_str()),
        (400, Some("busy")),
        "{steer}"
    );

    app.llm.push(Reply::text("A2"));
    let (status, answer) = respond(
        &app,
        json!({"model": "chat", "input": "Q2", "previous_response_id": previous}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "completed", "{answer}");
    let requests = app.llm.requests();
    let last = requests
        .last()
        .expect("the second run's request")
        .to_string();
    let (q1, a1, q2) = (
        last.find("Q1").expect("Q1"),
        last.find("A1").expect("the first answer, waited for"),
        last.find("Q2").expect("Q2"),
    );
    assert!(q1 < a1 && a1 < q2, "in answered order: {last}");
}

/// `busy: interrupt` ends the response still answering (`cancelled`) and continues after it.
#[tokio::test]
async fn interrupt_ends_the_previous_response_and_continues_after_it() {
    let app = spawn_app().await;
    let previous = slow_background_response(&app, Reply::hang()).await;
    app.llm.push(Reply::text("A2"));
    let (status, answer) = respond(
        &app,
        json!({"model": "chat", "input": "Q2", "previous_response_id": previous, "busy": "interrupt"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "completed", "{answer}");
    let ended: Value = app
        .get(&format!("/v1/responses/{previous}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(ended["status"], "cancelled", "{ended}");
}

/// An answer is stored only while its run holds the conversation's turn: when the turn was
/// passed on meanwhile (as another replica does for a run whose replica it takes for dead), the
/// late answer is not stored after the messages that came next. Its caller still gets it.
#[tokio::test]
async fn an_answer_whose_turn_was_passed_on_is_not_stored() {
    let app = spawn_app().await;
    let first = first_message_in_progress(&app, "c-passed-on").await;
    let turns = app
        .runtime
        .store()
        .conversation_turns("ada", "c-passed-on")
        .await
        .expect("turns");
    let holder = turns.first().expect("the first message holds the turn");
    assert!(
        app.runtime
            .store()
            .end_turn(&holder.run_id)
            .await
            .expect("turn ended"),
        "the turn was passed on"
    );
    let (status, answer) = first.await.expect("first");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"], "A1", "the caller still gets its answer");
    assert_eq!(
        history(&app, "c-passed-on").await,
        pairs(&[("user", "Q1")]),
        "the late answer is not stored"
    );
    // While the run holds its turn, its answer is stored as before.
    app.llm.push(Reply::text("A2"));
    let (status, _) = chat(&app, json!({"message": "Q2", "conversation_id": "c-held"})).await;
    assert_eq!(status, 200);
    assert_eq!(
        history(&app, "c-held").await,
        pairs(&[("user", "Q2"), ("assistant", "A2")])
    );
}
