//! The AI SDK clients as they are now (SPEC §15): `ai` 7's own chat (`AbstractChat`, what
//! `useChat` wraps) through a tool approval answered with `addToolApprovalResponse`, and the
//! previous major (`ai` 6, installed as `ai6`) still reading agentd's stream, and `ai` 7's chat
//! sending a file part.

use serde_json::{Value, json};

use crate::support::TestApp;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::web::{ADA_KEY, run_node_with, spawn_web_app};

/// Runs `tests/node/SCRIPT` as ada with `envs`, returning the JSON it printed last.
async fn node(script: &str, args: &[String], envs: &[(&str, &str)]) -> Value {
    run_node_with(script, args, ADA_KEY, envs).await
}

/// The model calls `test__echo` (which waits for approval), then answers.
fn push_echo_hi(app: &TestApp) {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "test__echo",
        r#"{"text": "hi"}"#,
    )]));
    app.llm.push(Reply::text("It said hi."));
}

#[tokio::test]
async fn the_ai_7_chat_approves_a_tool_and_the_run_goes_on() {
    let (app, _dir) = spawn_web_app().await;
    push_echo_hi(&app);
    let args = [
        app.address.clone(),
        "ada".into(),
        "approve-chat".into(),
        "approver".into(),
        "Echo hi".into(),
    ];
    let seen = node("ai_sdk_approval.mjs", &args, &[]).await;
    assert_eq!(seen["errors"], json!([]), "{seen}");
    assert_eq!(seen["asked"]["toolCallId"], "call-1", "{seen}");
    assert_eq!(seen["asked"]["state"], "approval-requested", "{seen}");
    let parts = seen["after"]["parts"].as_array().expect("parts");
    let tool = parts
        .iter()
        .find(|p| p["toolCallId"] == "call-1")
        .expect("the tool part");
    assert_eq!(
        tool["state"], "output-available",
        "the approved tool ran: {seen}"
    );
    assert_eq!(tool["output"], "hi", "{seen}");
    let text: String = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert!(text.ends_with("It said hi."), "{seen}");
    assert_eq!(seen["status"], "ready", "{seen}");
    // The approval reached the runtime as a decision by the chat's user.
    let decided = app.llm.requests().len();
    assert_eq!(
        decided, 2,
        "one model call before and one after the approval"
    );
}

#[tokio::test]
async fn an_approval_response_naming_no_waiting_call_is_refused_naming_the_part() {
    let (app, _dir) = spawn_web_app().await;
    let body = json!({"id": "no-wait", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {"id": "a1", "role": "assistant", "parts": [{"type": "dynamic-tool", "toolName": "test__echo",
            "toolCallId": "c9", "state": "approval-responded", "input": {},
            "approval": {"id": "c9", "approved": true}}]},
    ]});
    let refused = crate::web::post(&app, ADA_KEY, "/api/ada/chat", &body).await;
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.expect("json");
    assert_eq!(
        error["error"]["param"], "messages[1].parts[0].approval",
        "{error}"
    );
    let mut bad = body.clone();
    bad["messages"][1]["parts"][0]["approval"] = json!({"id": "c9"});
    let refused = crate::web::post(&app, ADA_KEY, "/api/ada/chat", &bad).await;
    assert_eq!(refused.status(), 400);
}

#[tokio::test]
async fn the_previous_ai_major_still_reads_the_stream() {
    let (app, _dir) = spawn_web_app().await;
    app.llm.push(Reply::text_in_pieces(&["Hi ", "there"]));
    let args = [
        app.address.clone(),
        "ada".into(),
        "chat-6".into(),
        "Hello".into(),
    ];
    let seen = node("ai_sdk_stream.mjs", &args, &[("AI_PACKAGE", "ai6")]).await;
    assert_eq!(seen["errors"], json!([]), "{seen}");
    let text: String = seen["message"]["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(text, "Hi there", "{seen}");
}

/// `ai` 7's chat sends a file part (tests/node/ai_sdk_files.mjs): the PNG reaches the upstream
/// as the vendor's image with the text, and the chat's next message, without files, still
/// carries it in the stored conversation's history.
#[tokio::test]
async fn the_ai_7_chat_sends_a_file_part_that_reaches_the_upstream_as_an_image() {
    use base64::Engine;
    let (app, _dir) = spawn_web_app().await;
    app.llm.push(Reply::text("A single pixel."));
    app.llm.push(Reply::text("Transparent."));
    let png64 = base64::engine::general_purpose::STANDARD.encode(crate::attachments::PNG);
    let args = [
        app.address.clone(),
        "ada".into(),
        "files-chat".into(),
        png64.clone(),
    ];
    let seen = node("ai_sdk_files.mjs", &args, &[]).await;
    assert_eq!(seen["errors"], json!([]), "{seen}");
    assert_eq!(seen["status"], "ready", "{seen}");
    let file = seen["sentParts"]
        .as_array()
        .expect("parts")
        .iter()
        .find(|p| p["type"] == "file")
        .cloned()
        .expect("the chat sent a file part");
    assert_eq!(file["mediaType"], "image/png", "{seen}");
    assert_eq!(seen["first"], "A single pixel.", "{seen}");
    assert_eq!(seen["second"], "Transparent.", "{seen}");
    let data_url = format!("data:image/png;base64,{png64}");
    let requests = app.llm.requests();
    let asked = crate::attachments::last_user_content(&requests[0]);
    assert_eq!(
        asked,
        json!([{"type": "text", "text": "What is in this picture?"},
               {"type": "image_url", "image_url": {"url": data_url}}]),
        "what reached the upstream"
    );
    let history = requests[1]["messages"].to_string();
    assert!(
        history.contains(&data_url),
        "the next message's history still has the image: {history}"
    );
}
