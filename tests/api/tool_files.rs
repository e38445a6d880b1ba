//! Files in MCP tool results (SPEC §11): a real MCP server (the Python SDK's `MCPServer`,
//! tests/sdk/mcp_image_server.py) answers with an `image` block and with an embedded
//! `resource` holding a blob. The image is kept once in the store like any attachment, the
//! run's `tool.finished` event names it (metadata, never bytes), and each vendor gets it as
//! that content: Anthropic inside the `tool_result`, OpenAI Chat Completions (whose tool
//! messages are text only) as a user message with the image right after the tool replies.

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::attachments::PNG;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

const SNAP_AGENT: &str = "---\ndescription: Looks at pages\nmodels: llm/upstream-model\ntools: [pictures]\nfinalization: text\n---\nYou look.\n";

/// An agent that has `snap` look for it.
const LEAD_AGENT: &str = "---\ndescription: Delegates looking\nmodels: llm/upstream-model\nagents: [snap]\nfinalization: text\n---\nYou delegate.\n";

/// The app with the `pictures` MCP server, `snap` on the OpenAI-compatible upstream, `snapc`
/// on an Anthropic one, `snapg` on Gemini and `snapo` on Ollama (all served by the mock).
async fn app_with_pictures() -> (TestApp, tempfile::TempDir) {
    app_with_pictures_limited(None).await
}

/// [`app_with_pictures`] with `limits.attachments.maxFileBytes` set.
async fn app_with_pictures_limited(max_file_bytes: Option<usize>) -> (TestApp, tempfile::TempDir) {
    let python =
        tokio::task::spawn_blocking(|| crate::mcp_headend::venv_python("mcp", "mcp==2.3.0"))
            .await
            .expect("venv");
    let dir = tempfile::tempdir().expect("dir");
    let png = dir.path().join("pixel.png");
    std::fs::write(&png, PNG).expect("png");
    std::fs::write(dir.path().join("snap.ai"), SNAP_AGENT).expect("agent");
    std::fs::write(dir.path().join("lead.ai"), LEAD_AGENT).expect("agent");
    for (file, model) in [
        ("snapc.ai", "claude/claude-x"),
        ("snapg.ai", "gemini/gemini-x"),
        ("snapo.ai", "local/llava"),
    ] {
        let agent = SNAP_AGENT.replace("llm/upstream-model", model);
        std::fs::write(dir.path().join(file), agent).expect("agent");
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/mcp_image_server.py");
    let agents = dir.path().display().to_string();
    let app = spawn_app_with(|config| {
        let origin = config["providers"]["llm"]["baseUrl"]
            .as_str()
            .expect("base url")
            .trim_end_matches("/v1")
            .to_string();
        config["providers"]["claude"] =
            json!({"type": "anthropic", "baseUrl": origin, "apiKey": "k"});
        config["providers"]["gemini"] =
            json!({"type": "google", "baseUrl": format!("{origin}/v1beta"), "apiKey": "k"});
        config["providers"]["local"] = json!({"type": "ollama", "baseUrl": origin});
        config["mcpServers"] = json!({"pictures": {
            "command": python.display().to_string(),
            "args": [script, png.display().to_string()],
        }});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents));
        if let Some(max) = max_file_bytes {
            config["limits"] = json!({"attachments": {"maxFileBytes": max}});
        }
    })
    .await;
    (app, dir)
}

fn png_base64() -> String {
    base64::engine::general_purpose::STANDARD.encode(PNG)
}

/// The events of a run, which never carry a file's bytes.
async fn run_events(app: &TestApp, run_id: &str) -> Vec<Value> {
    let events = app
        .get(&format!("/v1/runs/{run_id}/events"))
        .await
        .text()
        .await
        .expect("events");
    assert!(
        !events.contains(&png_base64()),
        "events carry no bytes: {events}"
    );
    events
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .collect()
}

/// The `tool.finished` events of a run.
async fn tool_finished(app: &TestApp, run_id: &str) -> Vec<Value> {
    run_events(app, run_id)
        .await
        .into_iter()
        .filter(|event| event["call_id"].is_string() && event["status"].is_string())
        .collect()
}

#[tokio::test]
async fn an_mcp_image_reaches_openai_as_a_user_image_after_the_tool_reply() {
    let (app, _dir) = app_with_pictures().await;
    let (run_id, sent) = second_request_after_a_screenshot(&app, "snap").await;
    let messages = sent["messages"].as_array().expect("messages");
    let at = messages
        .iter()
        .position(|m| m["role"] == "tool")
        .expect("the tool's reply");
    let reply = messages[at]["content"]
        .as_str()
        .expect("tool messages are text");
    assert!(
        reply.contains("screenshot of home") && reply.contains("[image image/png]"),
        "{reply}"
    );
    let follow = &messages[at + 1];
    assert_eq!(follow["role"], "user", "{follow}");
    assert_eq!(
        follow["content"][0]["text"],
        "The files of tool call call-1: screenshot-1.png"
    );
    assert_eq!(
        follow["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{}", png_base64())
    );

    let finished = tool_finished(&app, &run_id).await;
    let attachment = &finished[0]["attachments"][0];
    assert_eq!(attachment["name"], "screenshot-1.png", "{finished:?}");
    assert_eq!(attachment["media_type"], "image/png");
    assert_eq!(attachment["bytes"], PNG.len());
    let sha256: String = Sha256::digest(PNG)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(attachment["sha256"], sha256);
    let file_id = attachment["file_id"].as_str().expect("file id");
    let content = app
        .get(&format!("/v1/files/{file_id}/content"))
        .await
        .bytes()
        .await
        .expect("content");
    assert_eq!(content.as_ref(), PNG, "the image is stored");
    app.runtime.close().await;
}

#[tokio::test]
async fn an_mcp_resource_reaches_anthropic_inside_the_tool_result() {
    let (app, _dir) = app_with_pictures().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "toolu_1",
        "pictures__export",
        r#"{"page": "home"}"#,
    )]));
    app.llm.push(Reply::text("Exported."));
    let (run_id, response) = app
        .start_run(
            "/v1/chat/completions",
            &json!({"model": "snapc", "messages": [{"role": "user", "content": "Export home"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 2);
    let turns = requests[1]["messages"].as_array().expect("messages");
    let result = turns
        .iter()
        .flat_map(|turn| turn["content"].as_array().into_iter().flatten())
        .find(|block| block["type"] == "tool_result")
        .expect("the tool result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    let content = result["content"].as_array().expect("blocks");
    assert_eq!(content[0]["type"], "text");
    assert!(
        content[0]["text"]
            .as_str()
            .expect("text")
            .contains("[resource file:///exports/home.png]"),
        "{result}"
    );
    assert_eq!(content[1]["type"], "image", "{result}");
    assert_eq!(content[1]["source"]["media_type"], "image/png");
    assert_eq!(content[1]["source"]["data"], png_base64());
    let finished = tool_finished(&app, &run_id).await;
    assert_eq!(
        finished[0]["attachments"][0]["name"], "home.png",
        "{finished:?}"
    );
    app.runtime.close().await;
}

/// A run of `agent` that calls `pictures__screenshot` once and answers: its id and the
/// upstream's second request (the one after the tool's reply).
async fn second_request_after_a_screenshot(app: &TestApp, agent: &str) -> (String, Value) {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "pictures__screenshot",
        r#"{"page": "home"}"#,
    )]));
    app.llm.push(Reply::text("A single pixel."));
    let (run_id, response) = app
        .start_run(
            "/v1/chat/completions",
            &json!({"model": agent, "messages": [{"role": "user", "content": "Look at home"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    (run_id, requests[1].clone())
}

/// The page shows a tool's image under its result (tests/web/tool_files.py, headless Chromium).
#[tokio::test]
async fn the_page_shows_a_tools_image_under_its_result() {
    let (app, _dir) = app_with_pictures().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "pictures__screenshot",
        r#"{"page": "home"}"#,
    )]));
    app.llm.push(Reply::text("A single pixel."));
    let shots = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/web-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let out = crate::web::run_python(
        "tests/web/tool_files.py",
        &[
            app.address.clone(),
            shots.display().to_string(),
            "snap".into(),
        ],
    )
    .await;
    assert!(out.lines().any(|l| l == "tool files ok"), "{out}");
    app.runtime.close().await;
}

/// A sub-agent's tool image reaches the parent's model with the sub-agent's reply, and the
/// parent's `agent_finished` progress names it (metadata, never bytes).
#[tokio::test]
async fn a_sub_agents_tool_image_reaches_the_parent_model() {
    let (app, _dir) = app_with_pictures().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-lead",
        "agent__snap",
        r#"{"prompt": "Look at home"}"#,
    )]));
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "pictures__screenshot",
        r#"{"page": "home"}"#,
    )]));
    app.llm.push(Reply::text("A single pixel."));
    app.llm.push(Reply::text("snap saw a single pixel."));
    let (run_id, response) = app
        .start_run(
            "/v1/chat/completions",
            &json!({"model": "lead", "messages": [{"role": "user", "content": "What is on home?"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let messages = requests[3]["messages"].as_array().expect("messages");
    let at = messages
        .iter()
        .position(|m| m["role"] == "tool")
        .expect("the sub-agent's reply");
    assert!(
        messages[at]["content"]
            .as_str()
            .is_some_and(|reply| reply.contains("A single pixel.")),
        "{messages:?}"
    );
    let follow = &messages[at + 1];
    assert_eq!(
        follow["content"][0]["text"],
        "The files of tool call call-lead: screenshot-1.png"
    );
    assert_eq!(
        follow["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{}", png_base64())
    );

    let finished = run_events(&app, &run_id)
        .await
        .into_iter()
        .find(|event| event["kind"] == "agent_finished")
        .expect("agent_finished");
    assert_eq!(finished["attachments"][0]["name"], "screenshot-1.png");
    assert_eq!(finished["attachments"][0]["media_type"], "image/png");
    app.runtime.close().await;
}

/// Gemini: the tool's image follows its `functionResponse` as `inline_data` in the same turn.
#[tokio::test]
async fn an_mcp_image_reaches_gemini_as_inline_data_after_the_function_response() {
    let (app, _dir) = app_with_pictures().await;
    let (_, sent) = second_request_after_a_screenshot(&app, "snapg").await;
    let turns = sent["contents"].as_array().expect("contents");
    let parts = turns
        .iter()
        .flat_map(|turn| turn["parts"].as_array().into_iter().flatten())
        .collect::<Vec<_>>();
    let at = parts
        .iter()
        .position(|part| part.get("functionResponse").is_some())
        .unwrap_or_else(|| panic!("a functionResponse: {sent}"));
    assert_eq!(
        parts[at]["functionResponse"]["name"],
        "pictures__screenshot"
    );
    let inline = &parts[at + 1]["inline_data"];
    assert_eq!(inline["mime_type"], "image/png", "{sent}");
    assert_eq!(inline["data"], png_base64());
    app.runtime.close().await;
}

/// Ollama: the tool's image rides on the `tool` message as `images`.
#[tokio::test]
async fn an_mcp_image_reaches_ollama_as_images_of_the_tool_message() {
    let (app, _dir) = app_with_pictures().await;
    let (_, sent) = second_request_after_a_screenshot(&app, "snapo").await;
    let messages = sent["messages"].as_array().expect("messages");
    let reply = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("the tool's reply: {sent}"));
    assert_eq!(reply["tool_name"], "pictures__screenshot");
    assert_eq!(reply["images"], json!([png_base64()]), "{reply}");
    app.runtime.close().await;
}

/// A tool's file past `limits.attachments.maxFileBytes` is not kept: the tool's reply names it
/// and why, and no image reaches the model (a file at the limit is kept: the tests above, and
/// the intake's own tests of the limit).
#[tokio::test]
async fn a_tool_file_past_the_file_limit_is_a_note_naming_it() {
    let (app, _dir) = app_with_pictures_limited(Some(PNG.len() - 1)).await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "pictures__screenshot",
        r#"{"page": "home"}"#,
    )]));
    app.llm.push(Reply::text("No picture."));
    let (run_id, response) = app
        .start_run(
            "/v1/chat/completions",
            &json!({"model": "snap", "messages": [{"role": "user", "content": "Look at home"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let requests = app.llm.requests();
    let messages = requests[1]["messages"].as_array().expect("messages");
    let reply = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .expect("the tool's reply");
    assert!(
        reply.contains("[the tool's file screenshot-1.png (image/png) is not attached:")
            && reply.contains("larger than the limit"),
        "{reply}"
    );
    assert!(
        !requests[1]["messages"].to_string().contains("image_url"),
        "no image reaches the model"
    );
    let finished = tool_finished(&app, &run_id).await;
    assert!(finished[0].get("attachments").is_none(), "{finished:?}");
    app.runtime.close().await;
}

#[tokio::test]
async fn a_resource_link_is_a_source_url_part_for_the_ai_sdk() {
    let (app, _dir) = app_with_pictures().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "pictures__cite",
        r#"{"topic": "Rust"}"#,
    )]));
    app.llm.push(Reply::text("See the page."));
    let args = [
        app.address.clone(),
        "ada".to_string(),
        "pictures".to_string(),
        "Cite Rust".to_string(),
    ];
    let seen = crate::web::run_node_with(
        "ai_sdk_stream.mjs",
        &args,
        "unused",
        &[("AI_AGENT", "snap")],
    )
    .await;
    assert_eq!(seen["errors"], json!([]), "{seen}");
    let parts = seen["message"]["parts"].as_array().expect("parts");
    let sources: Vec<&Value> = parts.iter().filter(|p| p["type"] == "source-url").collect();
    assert_eq!(sources.len(), 1, "one source-url part: {seen}");
    assert_eq!(sources[0]["url"], "https://example.org/wiki/Rust", "{seen}");
    assert_eq!(sources[0]["title"], "About Rust", "{seen}");
    assert!(
        !parts.iter().any(|p| p["type"] == "source-document"),
        "a link is no file: {seen}"
    );
}

#[tokio::test]
async fn a_tool_file_is_a_source_document_part_for_the_ai_sdk() {
    let (app, _dir) = app_with_pictures().await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "pictures__screenshot",
        r#"{"page": "home"}"#,
    )]));
    app.llm.push(Reply::text("A single pixel."));
    let args = [
        app.address.clone(),
        "ada".to_string(),
        "pictures".to_string(),
        "Look at home".to_string(),
    ];
    let seen = crate::web::run_node_with(
        "ai_sdk_stream.mjs",
        &args,
        "unused",
        &[("AI_AGENT", "snap")],
    )
    .await;
    assert_eq!(seen["errors"], json!([]), "{seen}");
    let parts = seen["message"]["parts"].as_array().expect("parts");
    let source = parts
        .iter()
        .find(|p| p["type"] == "source-document")
        .unwrap_or_else(|| panic!("a source-document part: {seen}"));
    assert_eq!(source["mediaType"], "image/png", "{seen}");
    assert_eq!(source["title"], "screenshot-1.png", "{seen}");
    let file_id = source["sourceId"].as_str().expect("source id");
    assert_eq!(
        source["providerMetadata"]["agentd"]["url"],
        format!("/v1/files/{file_id}/content"),
        "{seen}"
    );
    let content = app.get(&format!("/v1/files/{file_id}/content")).await;
    assert_eq!(content.status(), 200);
    assert_eq!(content.bytes().await.expect("bytes").as_ref(), PNG);
}

/// A REST tool whose answer is an image (`restTools.snap` on a server answering a PNG as
/// `application/octet-stream`: the bytes are sniffed, not the declared type): the model gets the
/// image as a user message after the tool reply, and `tool.finished` names the file.
#[tokio::test]
async fn a_rest_tools_image_answer_reaches_the_model_as_an_image() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let pictures = axum::Router::new().route(
        "/snap.png",
        axum::routing::get(|| async {
            (
                [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
                PNG,
            )
        }),
    );
    tokio::spawn(async move { axum::serve(listener, pictures).await });
    let agent = "---\ndescription: Snaps\nmodels: llm/upstream-model\ntools: [rest__snap]\nfinalization: text\n---\nYou snap.\n";
    let (app, _dir) =
        crate::support::spawn_app_with_agents_and(&[("rester.ai", agent)], |config| {
            config["restTools"] = json!({"snap": {
                "description": "A picture",
                "url": format!("http://{address}/snap.png"),
            }});
        })
        .await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "rest__snap",
        "{}",
    )]));
    app.llm.push(Reply::text("A single pixel."));
    let (run_id, response) = app
        .start_run(
            "/v1/chat/completions",
            &json!({"model": "rester", "messages": [{"role": "user", "content": "Snap"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1]["messages"].as_array().expect("messages");
    let at = messages
        .iter()
        .position(|m| m["role"] == "tool")
        .expect("the tool's reply");
    assert_eq!(
        messages[at]["content"], "[file image/png rest__snap-1.png]",
        "the body's bytes are not sent as text"
    );
    assert_eq!(
        messages[at + 1]["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{}", png_base64())
    );
    let finished = tool_finished(&app, &run_id).await;
    let attachment = &finished[0]["attachments"][0];
    assert_eq!(attachment["name"], "rest__snap-1.png", "{finished:?}");
    assert_eq!(attachment["media_type"], "image/png");
    assert_eq!(attachment["bytes"], PNG.len());
}
