//! Remote attachment URLs (SPEC §11): passed unread to the vendors that fetch URLs themselves
//! (Anthropic images and PDFs here), checked by the address guard all the same; fetched by
//! agentd, through the guard and its size cap, for the vendors that do not (the
//! OpenAI-compatible upstream), whose model then gets the bytes.

use serde_json::{Value, json};

use crate::attachments::{PNG, app_with_claude, last_user_content};
use crate::support::mock_llm::Reply;
use crate::support::spawn_app_with;

/// Serves [`PNG`] at `/pixel.png` on a loopback port; its base URL.
async fn serve_pixel() -> String {
    let router = axum::Router::new().route(
        "/pixel.png",
        axum::routing::get(|| async { ([("content-type", "image/png")], PNG) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}")
}

#[tokio::test]
async fn a_remote_image_and_pdf_go_to_claude_as_their_urls_and_nothing_is_stored() {
    let dir = tempfile::tempdir().expect("dir");
    let app = app_with_claude(&dir).await;
    app.llm.push(Reply::text("A cat and a report."));
    let image = "https://images.example.invalid/cat.png?size=large";
    let report = "https://docs.example.invalid/report";
    let response = app
        .post_json(
            "/v1/messages",
            &json!({"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "url", "url": image}},
                {"type": "document", "source": {"type": "url", "url": report}},
                {"type": "text", "text": "What are these?"}]}]}),
        )
        .await;
    assert_eq!(
        response.status(),
        200,
        "{}",
        response.text().await.unwrap_or_default()
    );
    let requests = app.llm.requests();
    let content = &requests[0]["messages"][0]["content"];
    assert_eq!(
        content[0],
        json!({"type": "image", "source": {"type": "url", "url": image}}),
        "{content}"
    );
    assert_eq!(content[1]["type"], "document", "{content}");
    assert_eq!(content[1]["source"], json!({"type": "url", "url": report}));
    let files: Value = app.get("/v1/files").await.json().await.expect("files");
    assert_eq!(files["data"], json!([]), "a URL passed on stores nothing");

    // The guard holds for URLs passed on too: a vendor inside the network would fetch them.
    let private = app
        .post_json(
            "/v1/messages",
            &json!({"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "url", "url": "http://169.254.169.254/cat.png"}},
                {"type": "text", "text": "What is this?"}]}]}),
        )
        .await;
    assert_eq!(private.status(), 400);
    let error: Value = private.json().await.expect("error");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("messages[0].content[0].source.url")
            && message.contains("169.254.169.254"),
        "Anthropic's error names the part and the address: {error}"
    );
    assert_eq!(
        app.llm.requests().len(),
        1,
        "the refused request ran nothing"
    );
}

#[tokio::test]
async fn a_remote_image_is_fetched_for_a_vendor_that_does_not_fetch_urls() {
    let origin = serve_pixel().await;
    let url = format!("{origin}/pixel.png");
    let refused = crate::support::spawn_app().await;
    let ask = json!({"model": "chat", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": url}}]}]});
    let response = refused.post_json("/v1/chat/completions", &ask).await;
    assert_eq!(response.status(), 400, "loopback is refused by default");
    assert!(refused.llm.requests().is_empty());

    let app = spawn_app_with(|config| {
        config["limits"] = json!({"attachments": {"allowPrivateUrls": true}});
    })
    .await;
    app.llm.push(Reply::text("A pixel."));
    let response = app.post_json("/v1/chat/completions", &ask).await;
    assert_eq!(response.status(), 200);
    let parts = last_user_content(&app.llm.requests()[0]);
    assert_eq!(
        parts[1]["image_url"]["url"],
        crate::attachments::png_data_url(),
        "the upstream gets the fetched bytes: {parts}"
    );
    let files: Value = app.get("/v1/files").await.json().await.expect("files");
    assert_eq!(files["data"][0]["filename"], "pixel.png", "{files}");
    assert_eq!(files["data"][0]["media_type"], "image/png");
}
