//! The per-user chat API (seeds/001): conversations persist both sides, history reaches the
//! model, failures are the seeds' friendly messages, and no user reaches another's data.

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{spawn_app, spawn_app_with};

#[tokio::test]
async fn a_conversation_keeps_its_history_across_messages() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("Hi Ada!").with_usage(10, 3, 0, 0));
    let first: Value = app
        .post_json("/api/ada/chat", &json!({"message": "My name is Ada."}))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(first["status"], "completed");
    assert_eq!(first["response"], "Hi Ada!");
    assert_eq!(first["iterations"], 1);
    assert_eq!(first["finish_reason"], "final_answer");
    assert_eq!(first["error"], Value::Null);
    assert_eq!(first["usage"]["input_tokens"], 10);
    let conversation = first["conversation_id"]
        .as_str()
        .expect("conversation")
        .to_string();

    app.llm.push(Reply::text("Your name is Ada."));
    let second: Value = app
        .post_json(
            "/api/ada/chat",
            &json!({"message": "What is my name?", "conversation_id": conversation}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(second["conversation_id"], conversation.as_str());
    let sent = &app.llm.requests()[1]["messages"];
    let contents: Vec<&str> = sent
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        contents[1..],
        ["My name is Ada.", "Hi Ada!", "What is my name?"],
        "history from the store reaches the model"
    );

    let stored: Value = app
        .get(&format!("/api/ada/conversations/{conversation}"))
        .await
        .json()
        .await
        .expect("json");
    let roles: Vec<&str> = stored["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(stored["title"], "My name is Ada.");
}

#[tokio::test]
async fn failures_are_friendly_and_the_users_message_is_kept() {
    let app = spawn_app().await;
    for _ in 0..3 {
        app.llm.push(Reply::status(
            500,
            json!({"error": {"message": "internal stack trace here"}}),
        ));
    }
    let response: Value = app
        .post_json("/api/bo/chat", &json!({"message": "hello"}))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(response["status"], "error");
    assert_eq!(
        response["error"],
        "I'm having trouble connecting to my AI service. Please try again."
    );
    assert!(
        !response.to_string().contains("stack trace"),
        "no internals leak: {response}"
    );
    let conversation = response["conversation_id"].as_str().expect("id");
    let stored: Value = app
        .get(&format!("/api/bo/conversations/{conversation}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        stored["messages"].as_array().expect("messages").len(),
        1,
        "the user's message was stored before the run"
    );

    for _ in 0..3 {
        app.llm.push(
            Reply::status(429, json!({"error": {"message": "slow down"}}))
                .with_header("retry-after", "0"),
        );
    }
    let limited: Value = app
        .post_json("/api/bo/chat", &json!({"message": "again"}))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        limited["error"],
        "I'm currently experiencing high demand. Please try again in a moment."
    );
    let empty = app
        .post_json("/api/bo/chat", &json!({"message": "  "}))
        .await;
    assert_eq!(empty.status(), 400);
    // A conversation id the user does not have yet is created under that id (as AG-UI
    // threads and AI SDK chats are); an id off the rule is named.
    let chosen: Value = app
        .post_json(
            "/api/bo/chat",
            &json!({"message": "x", "conversation_id": "my-chat-1"}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(chosen["conversation_id"], "my-chat-1", "{chosen}");
    assert_eq!(
        app.get("/api/bo/conversations/my-chat-1").await.status(),
        200
    );
    for bad in ["", "has space", &"x".repeat(129)] {
        let refused = app
            .post_json(
                "/api/bo/chat",
                &json!({"message": "x", "conversation_id": bad}),
            )
            .await;
        assert_eq!(refused.status(), 400, "{bad:?}");
        let error: Value = refused.json().await.expect("json");
        assert_eq!(error["error"]["param"], "conversation_id");
    }
    let longest = "y".repeat(128);
    let at_limit = app
        .post_json(
            "/api/bo/chat",
            &json!({"message": "x", "conversation_id": longest}),
        )
        .await;
    assert_eq!(at_limit.status(), 200);
}

#[tokio::test]
async fn conversations_are_listed_newest_first_and_can_be_deleted() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for text in ["first", "second", "third"] {
        let response: Value = app
            .post_json("/api/cy/chat", &json!({"message": text}))
            .await
            .json()
            .await
            .expect("json");
        ids.push(
            response["conversation_id"]
                .as_str()
                .expect("id")
                .to_string(),
        );
    }
    let page: Value = app
        .get("/api/cy/conversations?limit=2")
        .await
        .json()
        .await
        .expect("json");
    let listed: Vec<&str> = page["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(listed, [ids[2].as_str(), ids[1].as_str()]);
    let next = page["next"].as_str().expect("a next cursor");
    let encoded = next
        .replace('%', "%25")
        .replace('+', "%2B")
        .replace('|', "%7C");
    let rest: Value = app
        .get(&format!("/api/cy/conversations?before={encoded}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(rest["data"][0]["id"], ids[0].as_str());
    assert_eq!(app.get("/api/cy/conversations?limit=0").await.status(), 400);
    assert_eq!(
        app.get("/api/cy/conversations?limit=1001").await.status(),
        400
    );
    let deleted = app
        .client
        .delete(app.url(&format!("/api/cy/conversations/{}", ids[0])))
        .send()
        .await
        .expect("sent");
    assert_eq!(deleted.status(), 204);
    assert_eq!(
        app.get(&format!("/api/cy/conversations/{}", ids[0]))
            .await
            .status(),
        404
    );
    let again = app
        .client
        .delete(app.url(&format!("/api/cy/conversations/{}", ids[0])))
        .send()
        .await
        .expect("sent");
    assert_eq!(again.status(), 404);
}

#[tokio::test]
async fn one_user_never_reaches_another_users_conversations() {
    let app = spawn_app_with(|config| {
        config["auth"] = json!({"keys": [{"key": "dee", "userId": "dee"}, {"key": "eve", "userId": "eve"}, {"key": "root", "admin": true}]});
    })
    .await;
    let response: Value = app
        .client
        .post(app.url("/api/dee/chat"))
        .bearer_auth("dee")
        .json(&json!({"message": "secret plans"}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let conversation = response["conversation_id"]
        .as_str()
        .expect("id")
        .to_string();
    let as_eve = |path: String| app.client.get(app.url(&path)).bearer_auth("eve").send();
    assert_eq!(
        as_eve(format!("/api/dee/conversations/{conversation}"))
            .await
            .expect("sent")
            .status(),
        403
    );
    assert_eq!(
        as_eve("/api/dee/conversations".into())
            .await
            .expect("sent")
            .status(),
        403
    );
    let post = app
        .client
        .post(app.url("/api/dee/chat"))
        .bearer_auth("eve")
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(post.status(), 403);
    // Even through her own path, eve cannot reach dee's conversation: naming its id gives her
    // a conversation of her own under that id, without dee's messages.
    let sneaky = app
        .client
        .post(app.url("/api/eve/chat"))
        .bearer_auth("eve")
        .json(&json!({"message": "hi", "conversation_id": conversation}))
        .send()
        .await
        .expect("sent");
    assert_eq!(sneaky.status(), 200);
    let seen = app.llm.requests().last().cloned().expect("eve's request");
    assert!(!seen.to_string().contains("secret plans"), "{seen}");
    let deez: Value = app
        .client
        .get(app.url(&format!("/api/dee/conversations/{conversation}")))
        .bearer_auth("dee")
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert!(
        !deez.to_string().contains("\"hi\""),
        "dee's conversation is untouched: {deez}"
    );
    let admin = app
        .client
        .get(app.url(&format!("/api/dee/conversations/{conversation}")))
        .bearer_auth("root")
        .send()
        .await
        .expect("sent");
    assert_eq!(admin.status(), 200);
}

#[tokio::test]
async fn a_streamed_chat_sends_run_events_and_still_stores_the_answer() {
    let app = spawn_app().await;
    app.llm.push(Reply::text("streamed reply"));
    let response = app
        .post_json("/api/fay/chat", &json!({"message": "hi", "stream": true}))
        .await;
    let conversation = response.headers()["x-agentd-conversation-id"]
        .to_str()
        .expect("id")
        .to_string();
    let body = response.text().await.expect("body");
    assert!(
        body.contains("event: run.started") && body.contains("event: run.finished"),
        "{body}"
    );
    let mut stored = Value::Null;
    for _ in 0..50 {
        stored = app
            .get(&format!("/api/fay/conversations/{conversation}"))
            .await
            .json()
            .await
            .expect("json");
        if stored["messages"].as_array().is_some_and(|m| m.len() == 2) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let answer = &stored["messages"][1];
    assert_eq!(
        (&answer["seq"], &answer["role"], &answer["content"]),
        (&json!(2), &json!("assistant"), &json!("streamed reply"))
    );
}

#[tokio::test]
async fn user_ids_that_read_as_paths_or_are_too_long_are_refused() {
    let app = spawn_app().await;
    let too_long = "u".repeat(129);
    for bad in ["..%2F..%2Fetc", "a%2Fb", "a%20b", too_long.as_str()] {
        let response = app
            .post_json(&format!("/api/{bad}/chat"), &json!({"message": "hi"}))
            .await;
        assert_eq!(response.status(), 400, "{bad}");
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["error"]["param"], "user_id", "{bad}");
    }
    let at_limit = "u".repeat(128);
    for good in [
        "alice",
        "bob.smith@example.com",
        "team:42-x_y+z",
        at_limit.as_str(),
    ] {
        let response = app.get(&format!("/api/{good}/conversations")).await;
        assert_eq!(response.status(), 200, "{good}");
    }
    assert_eq!(app.llm.request_count(), 0);
}

#[tokio::test]
async fn a_continued_conversation_keeps_its_agent_and_stores_tool_calls_in_the_openai_shape() {
    let app = spawn_app().await;
    let call = crate::support::mock_llm::ToolCall::new("c1", "agent__nothing", "{}");
    app.llm.push(Reply::text("First answer."));
    let first: Value = app
        .post_json(
            "/api/ada/chat",
            &json!({"message": "hello", "agent": "tight"}),
        )
        .await
        .json()
        .await
        .expect("json");
    let conversation = first["conversation_id"].as_str().expect("id").to_string();
    app.llm.push(Reply::tool_calls(vec![call]));
    app.llm.push(Reply::text("Second answer."));
    let (run_id, second) = app
        .start_run(
            "/api/ada/chat",
            &json!({"message": "again", "conversation_id": conversation}),
        )
        .await;
    assert_eq!(second.status(), 200);
    let run: Value = app
        .get(&format!("/v1/runs/{run_id}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        run["agent"], "tight",
        "the conversation's agent, not chat: {run}"
    );
    let messages = run["result"]["conversation"].as_array().expect("messages");
    let asked = messages
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .expect("the tool call is kept");
    assert_eq!(asked["tool_calls"][0]["type"], "function", "{asked}");
    assert_eq!(asked["tool_calls"][0]["function"]["name"], "agent__nothing");
    assert_eq!(asked["tool_calls"][0]["function"]["arguments"], "{}");
}
