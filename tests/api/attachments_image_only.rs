//! Messages of files alone (SPEC §11): an image sent without text is a question on every
//! headend that takes files — chat completions, Responses, Anthropic Messages, per-user chat
//! (JSON `attachments` and a form of `file` parts), the AI SDK's `useChat` body and AG-UI —
//! and reaches the upstream as the vendor's image with no empty text beside it. A message with
//! neither text nor files is still a 400 naming it.

use serde_json::{Value, json};

use crate::attachments::{PNG, app_with_claude, last_user_content, png_data_url};
use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app_with};

fn png64() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(PNG)
}

/// Posts `body` to `path` and reads the whole answer, which must be a 200.
async fn answered(app: &TestApp, path: &str, body: &Value) {
    let response = app.post_json(path, body).await;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{path}: {text}");
}

/// The prompt the upstream got last: exactly the one image, as OpenAI's `image_url` part.
fn assert_image_alone(app: &TestApp, what: &str) {
    let requests = app.llm.requests();
    let parts = last_user_content(requests.last().expect("a request reached the upstream"));
    assert_eq!(
        parts,
        json!([{"type": "image_url", "image_url": {"url": png_data_url()}}]),
        "{what}: the image alone, no empty text part"
    );
}

#[tokio::test]
async fn an_image_without_text_is_a_question_on_every_openai_shaped_headend() {
    let app = spawn_app_with(|_| {}).await;
    let image_part = json!({"type": "image_url", "image_url": {"url": png_data_url()}});
    app.llm.push(Reply::text("a pixel"));
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": [image_part]}]});
    answered(&app, "/v1/chat/completions", &body).await;
    assert_image_alone(&app, "chat completions");

    app.llm.push(Reply::text("a pixel"));
    let body = json!({"model": "chat", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": png_data_url()}]}]});
    answered(&app, "/v1/responses", &body).await;
    assert_image_alone(&app, "responses");

    app.llm.push(Reply::text("a pixel"));
    let body =
        json!({"attachments": [{"name": "pixel.png", "media_type": "image/png", "data": png64()}]});
    answered(&app, "/api/alice/chat", &body).await;
    assert_image_alone(&app, "per-user chat");

    app.llm.push(Reply::text("a pixel"));
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(PNG.to_vec())
            .file_name("pixel.png")
            .mime_str("image/png")
            .expect("mime"),
    );
    let response = app
        .client
        .post(app.url("/api/alice/chat"))
        .multipart(form)
        .send()
        .await
        .expect("sent");
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    assert_eq!(status, 200, "a form of one file and no message: {text}");
    assert_image_alone(&app, "per-user chat form");

    app.llm.push(Reply::text("a pixel"));
    let body = json!({"id": "chat-image-only", "trigger": "submit-message", "messages": [
        {"id": "m1", "role": "user", "parts": [
            {"type": "file", "mediaType": "image/png", "filename": "pixel.png", "url": png_data_url()}]}]});
    answered(&app, "/api/alice/chat", &body).await;
    assert_image_alone(&app, "AI SDK useChat");

    app.llm.push(Reply::text("a pixel"));
    let body = json!({"threadId": "thread-image-only", "runId": "r1", "state": {}, "tools": [],
        "context": [], "forwardedProps": {}, "messages": [{"id": "1", "role": "user", "content": [
            {"type": "binary", "mimeType": "image/png", "filename": "pixel.png", "data": png64()}]}]});
    answered(&app, "/ag-ui/chat", &body).await;
    assert_image_alone(&app, "AG-UI");
}

#[tokio::test]
async fn an_image_without_text_reaches_anthropic_as_an_image_block_alone() {
    let dir = tempfile::tempdir().expect("dir");
    let app = app_with_claude(&dir).await;
    app.llm.push(Reply::text("a pixel"));
    let body = json!({"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png64()}}]}]});
    answered(&app, "/v1/messages", &body).await;
    let mut blocks = last_user_content(&app.llm.requests()[0]);
    // The prompt's last block carries the cache breakpoint agentd sets.
    blocks[0]
        .as_object_mut()
        .expect("block")
        .remove("cache_control");
    assert_eq!(
        blocks,
        json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png64()}}]),
        "the image block alone: Anthropic refuses empty text blocks"
    );
}

/// A per-user conversation started by an image alone is titled after the file.
#[tokio::test]
async fn a_conversation_started_by_an_image_alone_is_titled_after_it() {
    let app = spawn_app_with(|_| {}).await;
    app.llm.push(Reply::text("a pixel"));
    let body =
        json!({"attachments": [{"name": "pixel.png", "media_type": "image/png", "data": png64()}]});
    let answer: Value = app
        .post_json("/api/alice/chat", &body)
        .await
        .json()
        .await
        .expect("answer");
    let id = answer["conversation_id"].as_str().expect("conversation");
    let stored: Value = app
        .get(&format!("/api/alice/conversations/{id}"))
        .await
        .json()
        .await
        .expect("conversation");
    assert_eq!(stored["title"], "pixel.png", "{stored}");
}

#[tokio::test]
async fn a_message_with_neither_text_nor_files_is_still_refused_naming_it() {
    let app = spawn_app_with(|_| {}).await;
    let cases = [
        (
            "/v1/chat/completions",
            json!({"model": "chat", "messages": [{"role": "user", "content": [{"type": "text", "text": " "}]}]}),
            "messages[0]",
        ),
        (
            "/v1/responses",
            json!({"model": "chat", "input": [{"role": "user", "content": [{"type": "input_text", "text": ""}]}]}),
            "input[0]",
        ),
        (
            "/v1/messages",
            json!({"model": "chat", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "text", "text": " "}]}]}),
            // Anthropic's error shape has no `param`: the message says what is wrong.
            "",
        ),
        ("/api/alice/chat", json!({"message": " "}), "message"),
        ("/api/alice/chat", json!({}), "message"),
        (
            "/api/alice/chat",
            json!({"id": "c-empty", "messages": [{"id": "m", "role": "user", "parts": [{"type": "text", "text": ""}]}]}),
            "messages",
        ),
    ];
    for (path, body, param) in cases {
        let response = app.post_json(path, &body).await;
        assert_eq!(response.status(), 400, "{path} {body}");
        let error: Value = response.json().await.expect("error");
        if param.is_empty() {
            let message = error["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("text or files"), "{path}: {error}");
        } else {
            assert_eq!(error["error"]["param"], param, "{path}: {error}");
        }
    }
    assert!(
        app.llm.requests().is_empty(),
        "nothing reached the upstream"
    );
}
