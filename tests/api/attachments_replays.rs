//! Files of earlier messages (SPEC §11) on the Responses API and the MCP headend: a
//! `store: false` client replaying its conversation sends the earlier `input_image` again and
//! the model sees it on that earlier message; `previous_response_id` and a `conversation` carry
//! an earlier image from the store; an agent called over MCP (the official Python SDK) takes
//! files in `attachments`.

use serde_json::{Value, json};

use crate::attachments::{last_user_content, png_data_url};
use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app_with};

/// The upstream request's message whose content mentions `text`.
fn message_with(request: &Value, text: &str) -> Value {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["content"].to_string().contains(text))
        .cloned()
        .unwrap_or_else(|| panic!("no message says {text:?}: {request}"))
}

/// The earlier user message, as the upstream got it: its text, then the image.
fn assert_earlier_image(request: &Value, text: &str) {
    let earlier = message_with(request, text);
    assert_eq!(
        earlier["content"],
        json!([{"type": "text", "text": text},
               {"type": "image_url", "image_url": {"url": png_data_url()}}]),
        "{earlier}"
    );
}

fn image_item(text: &str) -> Value {
    json!({"role": "user", "content": [
        {"type": "input_text", "text": text},
        {"type": "input_image", "image_url": png_data_url()}]})
}

async fn respond(app: &TestApp, body: &Value) -> Value {
    let response = app.post_json("/v1/responses", body).await;
    let status = response.status();
    let answer: Value = response.json().await.expect("json");
    assert_eq!(status, 200, "{answer}");
    answer
}

#[tokio::test]
async fn a_replayed_conversation_sends_its_earlier_image_on_its_message() {
    let app = spawn_app_with(|_| {}).await;
    app.llm.push(Reply::text("a red square"));
    let body = json!({"model": "chat", "store": false, "input": [
        image_item("what is this?"),
        {"role": "assistant", "content": "a pixel"},
        {"role": "user", "content": "and its colour?"}]});
    respond(&app, &body).await;
    let sent = &app.llm.requests()[0];
    assert_earlier_image(sent, "what is this?");
    assert_eq!(last_user_content(sent), json!("and its colour?"));
}

#[tokio::test]
async fn previous_response_id_carries_the_earlier_image() {
    let app = spawn_app_with(|_| {}).await;
    app.llm.push(Reply::text("a pixel"));
    let first = respond(
        &app,
        &json!({"model": "chat", "input": [image_item("what is this?")]}),
    )
    .await;
    app.llm.push(Reply::text("transparent"));
    let body =
        json!({"model": "chat", "previous_response_id": first["id"], "input": "its colour?"});
    respond(&app, &body).await;
    assert_earlier_image(&app.llm.requests()[1], "what is this?");
}

#[tokio::test]
async fn a_conversation_carries_the_earlier_image() {
    let app = spawn_app_with(|_| {}).await;
    let created = app.post_json("/v1/conversations", &json!({})).await;
    assert_eq!(created.status(), 200);
    let conversation: Value = created.json().await.expect("conversation");
    let id = conversation["id"].clone();
    app.llm.push(Reply::text("a pixel"));
    respond(
        &app,
        &json!({"model": "chat", "conversation": id, "input": [image_item("what is this?")]}),
    )
    .await;
    app.llm.push(Reply::text("transparent"));
    respond(
        &app,
        &json!({"model": "chat", "conversation": id, "input": "its colour?"}),
    )
    .await;
    assert_earlier_image(&app.llm.requests()[1], "what is this?");
}

/// The official MCP Python SDK (tests/sdk/mcp_attachments.py) sends a PNG in an agent tool's
/// `attachments`: it reaches the upstream with the prompt, as the vendor's image.
#[tokio::test]
async fn an_agent_called_over_mcp_takes_files_in_its_attachments() {
    use base64::Engine;
    let (app, _agents) = crate::mcp_headend::app_with_agents().await;
    app.llm.push(Reply::text("a pixel"));
    let png64 = base64::engine::general_purpose::STANDARD.encode(crate::attachments::PNG);
    let args = [app.address.clone(), "admin-key".to_string(), png64];
    let stdout = crate::mcp_headend::run_python(
        "mcp",
        crate::mcp_headend::MCP_SDK,
        "mcp_attachments.py",
        &args,
    )
    .await;
    for check in ["schema ok", "call with a file ok", "refused file ok"] {
        assert!(stdout.lines().any(|l| l == check), "{check}: {stdout}");
    }
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 1, "the refused call reached no upstream");
    assert_eq!(
        last_user_content(&requests[0]),
        json!([{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": png_data_url()}}])
    );
}

/// A run that waited for a tool approval resumes with its files: the image of its prompt, named
/// by the checkpoint, is read again from the store, so the model's request after the decision
/// still carries its bytes.
#[tokio::test]
async fn a_run_resumed_after_an_approval_still_sends_its_image() {
    use base64::Engine;
    let approver = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\n---\nYou echo.\n";
    let (app, _dir) =
        crate::support::spawn_app_with_agents_and(&[("approver.ai", approver)], |config| {
            config["mcpServers"] =
                json!({"test": crate::support::mcp::test_server_config(json!({}))});
        })
        .await;
    app.llm.push(Reply::tool_calls(vec![
        crate::support::mock_llm::ToolCall::new(
            "call-1",
            "test__echo",
            json!({"text": "a pixel"}).to_string(),
        ),
    ]));
    app.llm.push(Reply::text("It is a pixel."));
    let png64 = base64::engine::general_purpose::STANDARD.encode(crate::attachments::PNG);
    let body = json!({"message": "what is this?", "agent": "approver",
        "attachments": [{"name": "pixel.png", "media_type": "image/png", "data": png64.clone()}]});
    let client = app.client.clone();
    let url = app.url("/api/alice/chat");
    // The chat answers once the run has; the call is decided meanwhile.
    let chat = tokio::spawn(async move {
        let response = client.post(url).json(&body).send().await.expect("sent");
        response.json::<Value>().await.expect("answer")
    });
    let waiting = loop {
        let listed: Value = app
            .get("/api/alice/approvals")
            .await
            .json()
            .await
            .expect("approvals");
        if let Some(first) = listed["data"].get(0) {
            break first.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    };
    let run_id = waiting["run_id"].as_str().expect("run id").to_string();
    let decided = app
        .post_json(
            &format!("/v1/runs/{run_id}/approvals/call-1"),
            &json!({"decision": "approve"}),
        )
        .await;
    assert!(decided.status().is_success(), "{}", decided.status());
    let answer = tokio::time::timeout(std::time::Duration::from_secs(30), chat)
        .await
        .expect("answered after the decision")
        .expect("chat");
    assert_eq!(answer["response"], "It is a pixel.", "{answer}");
    let requests = app.llm.requests();
    let resumed = requests
        .get(1)
        .expect("the model is asked again after the decision");
    let asked = message_with(resumed, "what is this?");
    assert_eq!(
        asked["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{png64}"),
        "{asked}"
    );
}
