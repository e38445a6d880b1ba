//! Attachments over HTTP (SPEC §11): the Files API in OpenAI's shape (upload as multipart,
//! list, read, content, delete) per owner, the limits at and past them (413 / 415 naming the
//! part), content sniffed rather than trusted, the memory a 20 MiB upload costs the real
//! server, and ten uploads at once leaving other requests unstalled.

use std::time::{Duration, Instant};

use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::support::binary::{command, project, serve};
use crate::support::{TestApp, spawn_app_with};

const ADMIN: &str = "files-admin";
pub(crate) const ALICE: &str = "files-alice";
const BOB: &str = "files-bob";

/// The content of the last message of an upstream request (the prompt, with its files).
pub fn last_user_content(request: &Value) -> Value {
    request["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .map(|message| message["content"].clone())
        .unwrap_or(Value::Null)
}

/// The smallest PNG: one transparent pixel.
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

pub(crate) fn keyed(config: &mut Value) {
    config["auth"] = json!({"keys": [
        {"key": ADMIN, "admin": true},
        {"key": ALICE, "userId": "alice"},
        {"key": BOB, "userId": "bob"},
    ]});
}

async fn upload(
    app: &TestApp,
    key: &str,
    name: &str,
    mime: &str,
    content: Vec<u8>,
) -> (u16, Value) {
    let form = Form::new().text("purpose", "user_data").part(
        "file",
        Part::bytes(content)
            .file_name(name.to_string())
            .mime_str(mime)
            .expect("mime"),
    );
    let mut request = app.client.post(app.url("/v1/files")).multipart(form);
    if !key.is_empty() {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn call(app: &TestApp, method: reqwest::Method, key: &str, path: &str) -> reqwest::Response {
    app.client
        .request(method, app.url(path))
        .bearer_auth(key)
        .send()
        .await
        .expect("sent")
}

#[tokio::test]
async fn files_are_uploaded_listed_read_and_deleted_per_owner() {
    let app = spawn_app_with(keyed).await;
    // Declared as JPEG: the bytes say PNG, and PNG is what is recorded.
    let (status, file) = upload(&app, ALICE, "pixel.jpg", "image/jpeg", PNG.to_vec()).await;
    assert_eq!(status, 200, "{file}");
    assert_eq!(file["object"], "file");
    assert_eq!(file["media_type"], "image/png");
    assert_eq!(file["bytes"], PNG.len());
    assert_eq!(file["filename"], "pixel.jpg");
    assert_eq!(file["purpose"], "user_data");
    let id = file["id"].as_str().expect("id").to_string();
    assert!(id.starts_with("file-"), "{id}");

    let listed: Value = call(&app, reqwest::Method::GET, ALICE, "/v1/files")
        .await
        .json()
        .await
        .expect("list");
    assert_eq!(listed["object"], "list");
    assert_eq!(listed["data"][0]["id"], id.as_str());
    let bobs: Value = call(&app, reqwest::Method::GET, BOB, "/v1/files")
        .await
        .json()
        .await
        .expect("list");
    assert_eq!(bobs["data"], json!([]), "bob sees none of alice's files");

    let content = call(
        &app,
        reqwest::Method::GET,
        ALICE,
        &format!("/v1/files/{id}/content"),
    )
    .await;
    assert_eq!(content.status(), 200);
    assert_eq!(content.headers()["content-type"], "image/png");
    assert_eq!(content.bytes().await.expect("bytes").as_ref(), PNG);

    for path in [format!("/v1/files/{id}"), format!("/v1/files/{id}/content")] {
        let refused = call(&app, reqwest::Method::GET, BOB, &path).await;
        assert_eq!(
            refused.status(),
            404,
            "{path}: another user's file is not there"
        );
        let admin = call(&app, reqwest::Method::GET, ADMIN, &path).await;
        assert_eq!(admin.status(), 200, "{path}: admins read anyone's");
    }
    let refused = call(
        &app,
        reqwest::Method::DELETE,
        BOB,
        &format!("/v1/files/{id}"),
    )
    .await;
    assert_eq!(refused.status(), 404);
    let deleted: Value = call(
        &app,
        reqwest::Method::DELETE,
        ALICE,
        &format!("/v1/files/{id}"),
    )
    .await
    .json()
    .await
    .expect("deleted");
    assert_eq!(
        deleted,
        json!({"id": id, "object": "file", "deleted": true})
    );
    let gone = call(
        &app,
        reqwest::Method::GET,
        ALICE,
        &format!("/v1/files/{id}"),
    )
    .await;
    assert_eq!(gone.status(), 404);
}

#[tokio::test]
async fn limits_answer_413_and_415_naming_the_part_at_and_past_them() {
    let app = spawn_app_with(|config| {
        keyed(config);
        config["limits"] = json!({"attachments": {"maxFileBytes": 1000}});
    })
    .await;
    let (status, _) = upload(&app, ALICE, "a.txt", "text/plain", vec![b'a'; 1000]).await;
    assert_eq!(status, 200, "at the limit");
    let (status, error) = upload(&app, ALICE, "b.txt", "text/plain", vec![b'a'; 1001]).await;
    assert_eq!(status, 413, "{error}");
    assert_eq!(error["error"]["param"], "file");
    assert_eq!(error["error"]["code"], "attachment_too_large");
    // Far past the limit: refused while it streams, not after.
    let (status, _) = upload(&app, ALICE, "c.txt", "text/plain", vec![b'a'; 5_000_000]).await;
    assert_eq!(status, 413);
    // Declared as an image, but the bytes are neither an image nor text.
    let (status, error) = upload(&app, ALICE, "x.png", "image/png", vec![0, 0xff, 0, 0xfe]).await;
    assert_eq!(status, 415, "{error}");
    assert_eq!(error["error"]["param"], "file");
    assert!(
        error["error"]["message"]
            .as_str()
            .expect("message")
            .contains("application/octet-stream"),
        "{error}"
    );
    let missing = app
        .client
        .post(app.url("/v1/files"))
        .bearer_auth(ALICE)
        .multipart(Form::new().text("purpose", "user_data"))
        .send()
        .await
        .expect("sent");
    assert_eq!(missing.status(), 400);
    let missing: Value = missing.json().await.expect("error");
    assert_eq!(missing["error"]["param"], "file");
}

/// A process's resident set now and at its peak (`VmRSS`, `VmHWM`), in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| {
        status
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|kib| kib.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The real server (its own process, so the test client's memory is not counted) takes a
/// 20 MiB upload while its peak resident set grows by less than the file's size twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20_mib_upload_costs_a_small_multiple_of_its_size_in_memory() {
    const SIZE: usize = 20 * 1024 * 1024;
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite://agentd.db"},
    }));
    let mut agentd = command(dir.path());
    agentd.args(["serve", "--config", "agentd.json"]);
    let served = serve(agentd, |_| {}).await;
    let pid = served.child.id().expect("pid");
    let content: Vec<u8> = (0..SIZE).map(|i| b'a' + (i % 26) as u8).collect();
    let body = bytes::Bytes::from(content);
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/files", served.address);
    let (before, _) = rss_kib(pid);
    let form = Form::new().text("purpose", "user_data").part(
        "file",
        Part::stream_with_length(body.clone(), SIZE as u64)
            .file_name("big.txt")
            .mime_str("text/plain")
            .expect("mime"),
    );
    let response = client
        .post(&url)
        .multipart(form)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let (after, peak) = rss_kib(pid);
    let growth_mib = peak.saturating_sub(before) as f64 / 1024.0;
    eprintln!(
        "20 MiB upload to agentd serve: RSS before {before} KiB, after {after} KiB, peak {peak} KiB: peak growth {growth_mib:.1} MiB"
    );
    assert!(
        growth_mib < 40.0,
        "a 20 MiB upload grew the server by {growth_mib:.1} MiB"
    );
    let file: Value = response.json().await.expect("file");
    let id = file["id"].as_str().expect("id");
    let content = client
        .get(format!("{url}/{id}/content"))
        .send()
        .await
        .expect("sent");
    assert_eq!(
        content.bytes().await.expect("bytes"),
        body,
        "read back byte for byte"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_concurrent_uploads_do_not_stall_other_requests() {
    let app = std::sync::Arc::new(spawn_app_with(keyed).await);
    const SIZE: usize = 4 * 1024 * 1024;
    let uploads: Vec<_> = (0..10)
        .map(|n| {
            let app = app.clone();
            tokio::spawn(async move {
                let content = vec![b'a' + n as u8; SIZE];
                upload(&app, ALICE, &format!("f{n}.txt"), "text/plain", content)
                    .await
                    .0
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    let mut answered = 0;
    while uploads.iter().any(|u| !u.is_finished()) || answered < 5 {
        let started = Instant::now();
        let models = call(&app, reqwest::Method::GET, ALICE, "/v1/models").await;
        assert_eq!(models.status(), 200);
        slowest = slowest.max(started.elapsed());
        answered += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for upload in uploads {
        assert_eq!(upload.await.expect("joined"), 200);
    }
    eprintln!("ten 4 MiB uploads: {answered} other requests, slowest {slowest:?}");
    assert!(
        slowest < Duration::from_secs(2),
        "another request waited {slowest:?}"
    );
    let listed: Value = call(&app, reqwest::Method::GET, ALICE, "/v1/files")
        .await
        .json()
        .await
        .expect("list");
    assert_eq!(listed["data"].as_array().expect("data").len(), 10);
}

const CLAUDE_AGENT: &str =
    "---\ndescription: On Claude\nmodels: claude/claude-x\nfinalization: text\n---\nYou answer.\n";

/// The test app with an agent `claude` on an Anthropic provider served by the same mock.
pub async fn app_with_claude(dir: &tempfile::TempDir) -> TestApp {
    std::fs::write(dir.path().join("claude.ai"), CLAUDE_AGENT).expect("agent");
    let agents = dir.path().display().to_string();
    spawn_app_with(|config| {
        let origin = config["providers"]["llm"]["baseUrl"]
            .as_str()
            .expect("base url")
            .trim_end_matches("/v1")
            .to_string();
        config["providers"]["claude"] =
            json!({"type": "anthropic", "baseUrl": origin, "apiKey": "k"});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents));
    })
    .await
}

pub fn png_data_url() -> String {
    use base64::Engine;
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(PNG)
    )
}

#[tokio::test]
async fn chat_completions_images_and_files_reach_each_vendor_in_its_own_form() {
    use base64::Engine;
    let dir = tempfile::tempdir().expect("dir");
    let app = app_with_claude(&dir).await;
    let png64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    let (status, uploaded) = upload(
        &app,
        "",
        "notes.md",
        "text/markdown",
        b"# Plan\nship it".to_vec(),
    )
    .await;
    assert_eq!(status, 200, "{uploaded}");
    let pdf = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n".to_vec();
    let pdf64 = base64::engine::general_purpose::STANDARD.encode(&pdf);
    let ask = |model: &str| {
        json!({"model": model, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": png_data_url(), "detail": "low"}},
            {"type": "file", "file": {"filename": "spec.pdf", "file_data": format!("data:application/pdf;base64,{pdf64}")}},
            {"type": "file", "file": {"file_id": uploaded["id"]}},
        ]}]})
    };
    app.llm.push(crate::support::mock_llm::Reply::text(
        "a pixel, a PDF and a plan",
    ));
    let answered = app.post_json("/v1/chat/completions", &ask("chat")).await;
    assert_eq!(
        answered.status(),
        200,
        "{}",
        answered.text().await.unwrap_or_default()
    );
    let sent = &app.llm.requests()[0];
    let parts = sent["messages"]
        .as_array()
        .expect("messages")
        .last()
        .expect("user")["content"]
        .clone();
    assert_eq!(
        parts[0],
        json!({"type": "text", "text": "What is in these?"})
    );
    assert_eq!(
        parts[1],
        json!({"type": "image_url", "image_url": {"url": png_data_url()}})
    );
    assert_eq!(
        parts[2],
        json!({"type": "file", "file": {"filename": "spec.pdf", "file_data": format!("data:application/pdf;base64,{pdf64}")}})
    );
    let text = parts[3]["text"]
        .as_str()
        .expect("the markdown file as text");
    assert!(
        text.contains("notes.md") && text.contains("ship it"),
        "{text}"
    );

    app.llm
        .push(crate::support::mock_llm::Reply::text("the same, on Claude"));
    let answered = app.post_json("/v1/chat/completions", &ask("claude")).await;
    assert_eq!(
        answered.status(),
        200,
        "{}",
        answered.text().await.unwrap_or_default()
    );
    let sent = &app.llm.requests()[1];
    let blocks = sent["messages"]
        .as_array()
        .expect("messages")
        .last()
        .expect("user")["content"]
        .clone();
    assert_eq!(
        blocks[0],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png64}})
    );
    assert_eq!(
        blocks[1],
        json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf64}})
    );
    assert_eq!(blocks[2]["source"]["data"], "# Plan\nship it");
    assert_eq!(
        blocks[3]["text"], "What is in these?",
        "the text after the files"
    );
}

#[tokio::test]
async fn a_refused_attachment_names_its_part() {
    let app = spawn_app_with(|config| {
        config["limits"] = json!({"attachments": {"maxFileBytes": 16}});
    })
    .await;
    let ask = |part: Value| {
        json!({"model": "chat", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"}, part]}]})
    };
    let too_large = app
        .post_json(
            "/v1/chat/completions",
            &ask(json!({"type": "image_url", "image_url": {"url": png_data_url()}})),
        )
        .await;
    assert_eq!(too_large.status(), 413);
    let error: Value = too_large.json().await.expect("error");
    assert_eq!(
        error["error"]["param"],
        "messages[0].content[1].image_url.url"
    );
    let binary = app
        .post_json(
            "/v1/chat/completions",
            &ask(json!({"type": "file", "file": {"filename": "x.bin", "file_data": "AAH/AA=="}})),
        )
        .await;
    assert_eq!(binary.status(), 415);
    let error: Value = binary.json().await.expect("error");
    assert_eq!(
        error["error"]["param"],
        "messages[0].content[1].file.file_data"
    );
    let unknown = app
        .post_json(
            "/v1/chat/completions",
            &ask(json!({"type": "file", "file": {"file_id": "file-nothere"}})),
        )
        .await;
    assert_eq!(unknown.status(), 404);
    let private = app
        .post_json("/v1/chat/completions", &ask(json!({"type": "image_url", "image_url": {"url": "http://169.254.169.254/latest/meta-data"}})))
        .await;
    assert_eq!(
        private.status(),
        400,
        "the address guard refuses metadata addresses"
    );
    let error: Value = private.json().await.expect("error");
    assert_eq!(
        error["error"]["param"],
        "messages[0].content[1].image_url.url"
    );
}

/// The OpenAI Python SDK (tests/sdk/attachments.py) against the real binary: what it sent and
/// what reached the upstream.
#[tokio::test]
async fn the_openai_sdk_sends_images_and_files_that_reach_the_upstream() {
    use base64::Engine;
    let llm = crate::support::mock_llm::MockLlm::start().await;
    llm.push(crate::support::mock_llm::Reply::text("a single pixel"));
    llm.push(crate::support::mock_llm::Reply::text("on friday"));
    llm.push(crate::support::mock_llm::Reply::text(
        "a pixel, via responses",
    ));
    llm.push(crate::support::mock_llm::Reply::text(
        "a pixel, says claude",
    ));
    llm.push(crate::support::mock_llm::Reply::text("an empty PDF"));
    let (_dir, server) =
        crate::support::binary::serve_with_admin_key(&llm.base_url(), "files-sdk-key").await;
    let png_hex: String = PNG.iter().map(|b| format!("{b:02x}")).collect();
    let args = [
        format!("http://{}", server.address),
        "files-sdk-key".to_string(),
        png_hex,
    ];
    let stdout = crate::sdk_clients::run_sdk_script("attachments.py", &args).await;
    assert_eq!(
        stdout.lines().filter(|l| l.ends_with(" ok")).count(),
        9,
        "{stdout}"
    );
    let requests = llm.requests();
    let image = last_user_content(&requests[0])[1].clone();
    let png64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    assert_eq!(
        image["image_url"]["url"],
        format!("data:image/png;base64,{png64}")
    );
    let file = last_user_content(&requests[1])[1].clone();
    let text = file["text"].as_str().expect("the uploaded file as text");
    assert!(
        text.contains("notes.md") && text.contains("ship on friday"),
        "{text}"
    );
    // Responses `input_image`, in OpenAI's chat form upstream.
    let image = last_user_content(&requests[2]);
    assert_eq!(
        image[1]["image_url"]["url"],
        format!("data:image/png;base64,{png64}")
    );
    // The Anthropic SDK's blocks, to the OpenAI-compatible upstream of agent `chat`.
    let image = last_user_content(&requests[3]);
    assert_eq!(
        image[1]["image_url"]["url"],
        format!("data:image/png;base64,{png64}")
    );
    assert_eq!(image[0]["text"], "what is this image?");
    let document = last_user_content(&requests[4]);
    let pdf64 = base64::engine::general_purpose::STANDARD
        .encode(b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n");
    assert_eq!(
        document[1]["file"],
        json!({"filename": "spec.pdf", "file_data": format!("data:application/pdf;base64,{pdf64}")})
    );
}

#[tokio::test]
async fn an_image_a_model_does_not_read_is_refused_naming_the_model_and_the_part() {
    let app = spawn_app_with(|config| {
        config["providers"]["llm"]["models"] =
            json!({"upstream-model": {"input": ["text", "pdf"]}});
    })
    .await;
    let ask = json!({"model": "chat", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": png_data_url()}}]}]});
    let refused = app.post_json("/v1/chat/completions", &ask).await;
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.expect("error");
    assert_eq!(error["error"]["code"], "unsupported_attachment", "{error}");
    assert_eq!(
        error["error"]["param"],
        "messages[0].content[1].image_url.url"
    );
    let message = error["error"]["message"].as_str().expect("message");
    assert!(message.contains("llm/upstream-model"), "{message}");
    assert_eq!(app.llm.request_count(), 0, "nothing reached the model");
    // A text file goes to every model, as text.
    app.llm
        .push(crate::support::mock_llm::Reply::text("read it"));
    let text = json!({"model": "chat", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "read"},
        {"type": "file", "file": {"filename": "a.csv", "file_data": "YSxiCjEsMgo="}}]}]});
    assert_eq!(
        app.post_json("/v1/chat/completions", &text).await.status(),
        200
    );
}

/// A per-user chat message with an attachment: stored with the conversation (metadata in the
/// message, bytes in the store), and sent again, from the store, when the conversation goes on.
#[tokio::test]
async fn a_conversation_continued_later_still_sends_its_images() {
    use base64::Engine;
    let app = spawn_app_with(|_| {}).await;
    let png64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    app.llm
        .push(crate::support::mock_llm::Reply::text("a pixel"));
    let first: Value = app
        .post_json(
            "/api/alice/chat",
            &json!({"message": "what is this?", "attachments": [
                {"name": "pixel.png", "media_type": "image/png", "data": png64}]}),
        )
        .await
        .json()
        .await
        .expect("answer");
    let conversation = first["conversation_id"].as_str().expect("conversation");
    let run_id = first["run_id"].as_str().expect("run");
    let events = app
        .get(&format!("/v1/runs/{run_id}/events"))
        .await
        .text()
        .await
        .expect("events");
    assert!(
        events.contains("\"sha256\"") && events.contains("pixel.png") && !events.contains(&png64),
        "run.started names the file, never its bytes: {events}"
    );
    let stored: Value = app
        .get(&format!("/api/alice/conversations/{conversation}"))
        .await
        .json()
        .await
        .expect("conversation");
    let text = stored.to_string();
    assert!(
        text.contains("pixel.png") && !text.contains(&png64),
        "metadata only: {text}"
    );

    app.llm
        .push(crate::support::mock_llm::Reply::text("still a pixel"));
    let second = app
        .post_json(
            "/api/alice/chat",
            &json!({"message": "and now?", "conversation_id": conversation}),
        )
        .await;
    assert_eq!(second.status(), 200);
    let replayed = &app.llm.requests()[1]["messages"];
    let earlier = replayed
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["content"].to_string().contains("what is this?"))
        .expect("the first message is in the history");
    assert_eq!(
        earlier["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{png64}"),
        "{earlier}"
    );
    let bad = app
        .post_json(
            "/api/alice/chat",
            &json!({"message": "x", "attachments": [{"data": "AA==", "file_id": "file-1"}]}),
        )
        .await;
    assert_eq!(bad.status(), 400);
    let error: Value = bad.json().await.expect("error");
    assert_eq!(error["error"]["param"], "attachments[0]");
}

#[tokio::test]
async fn responses_input_image_and_input_file_reach_the_upstream() {
    use base64::Engine;
    let app = spawn_app_with(|_| {}).await;
    let (status, uploaded) = upload(&app, "", "pixel.png", "image/png", PNG.to_vec()).await;
    assert_eq!(status, 200, "{uploaded}");
    app.llm.push(crate::support::mock_llm::Reply::text(
        "two pixels and a note",
    ));
    let body = json!({"model": "chat", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "compare"},
        {"type": "input_image", "image_url": png_data_url()},
        {"type": "input_image", "file_id": uploaded["id"]},
        {"type": "input_file", "filename": "note.txt", "file_data": "aGVsbG8="},
    ]}]});
    let answered = app.post_json("/v1/responses", &body).await;
    assert_eq!(
        answered.status(),
        200,
        "{}",
        answered.text().await.unwrap_or_default()
    );
    let sent = &app.llm.requests()[0];
    let parts = last_user_content(sent);
    let png64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    assert_eq!(parts[0]["text"], "compare");
    for image in [&parts[1], &parts[2]] {
        assert_eq!(
            image["image_url"]["url"],
            format!("data:image/png;base64,{png64}")
        );
    }
    assert!(
        parts[3]["text"].as_str().expect("text").contains("hello"),
        "{parts}"
    );
}

/// The body `useChat` sends with a file part (`{type: "file", mediaType, url}`), as the AI
/// SDK's `sendMessage({files})` builds it.
#[tokio::test]
async fn an_ai_sdk_file_part_reaches_the_upstream() {
    let app = spawn_app_with(|_| {}).await;
    app.llm
        .push(crate::support::mock_llm::Reply::text("a pixel"));
    let body = json!({"id": "chat-files-1", "trigger": "submit-message", "messages": [
        {"id": "m1", "role": "user", "parts": [
            {"type": "file", "mediaType": "image/png", "filename": "pixel.png", "url": png_data_url()},
            {"type": "text", "text": "what is it?"}]}]});
    let response = app.post_json("/api/alice/chat", &body).await;
    assert_eq!(response.status(), 200);
    let _ = response.text().await;
    let sent = &app.llm.requests()[0];
    let parts = last_user_content(sent);
    assert_eq!(parts[1]["image_url"]["url"], png_data_url(), "{parts}");
    let bad = json!({"id": "chat-files-2", "messages": [{"id": "m1", "role": "user", "parts": [
        {"type": "text", "text": "x"}, {"type": "file", "mediaType": "image/png"}]}]});
    let refused = app.post_json("/api/alice/chat", &bad).await;
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.expect("error");
    assert_eq!(error["error"]["param"], "messages[0].parts[1]");
}

/// AG-UI 1.0 multimodal user content: a `binary` part with `mimeType` and base64 `data`.
#[tokio::test]
async fn ag_ui_binary_input_content_reaches_the_upstream() {
    use base64::Engine;
    let app = spawn_app_with(|_| {}).await;
    app.llm
        .push(crate::support::mock_llm::Reply::text("a pixel"));
    let png64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    let input = json!({"threadId": "thread-files-1", "runId": "r1", "state": {}, "tools": [],
        "context": [], "forwardedProps": {}, "messages": [{"id": "1", "role": "user", "content": [
            {"type": "text", "text": "what is it?"},
            {"type": "binary", "mimeType": "image/png", "filename": "pixel.png", "data": png64}]}]});
    let response = app.post_json("/ag-ui/chat", &input).await;
    assert_eq!(response.status(), 200);
    let _ = response.text().await;
    let parts = last_user_content(&app.llm.requests()[0]);
    assert_eq!(parts[1]["image_url"]["url"], png_data_url(), "{parts}");
}

/// `POST /api/{user}/chat` as `multipart/form-data` with `key`'s authorization.
pub(crate) async fn chat_form(app: &TestApp, key: &str, user: &str, form: Form) -> (u16, Value) {
    let response = app
        .client
        .post(app.url(&format!("/api/{user}/chat")))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub(crate) fn file_part(name: &str, mime: &str, content: Vec<u8>) -> Part {
    Part::bytes(content)
        .file_name(name.to_string())
        .mime_str(mime)
        .expect("mime")
}

pub(crate) async fn files_of(app: &TestApp, key: &str) -> Vec<Value> {
    let listed: Value = call(app, reqwest::Method::GET, key, "/v1/files")
        .await
        .json()
        .await
        .expect("list");
    listed["data"].as_array().cloned().unwrap_or_default()
}

/// Per-user chat as `multipart/form-data` (a `message` part and a `file` part): the PNG reaches
/// the upstream as the vendor's image, is recorded once as the caller's file exactly as the
/// JSON `attachments` record it, and is kept with the message in the conversation. The body
/// streams past the server's request body limit (the attachment limits apply instead).
#[tokio::test]
async fn a_chat_message_sent_as_a_form_carries_its_files_to_the_upstream() {
    use base64::Engine;
    use sha2::Digest;
    let app = spawn_app_with(|config| {
        keyed(config);
        config["server"] = json!({"requestBodyLimitBytes": 4096});
    })
    .await;
    app.llm
        .push(crate::support::mock_llm::Reply::text("a pixel and notes"));
    let notes = "note ".repeat(1200).into_bytes();
    let form = Form::new()
        .text("message", "what is this?")
        .text("agent", "chat")
        .part("file", file_part("pixel.png", "image/jpeg", PNG.to_vec()))
        .part("file", file_part("notes.txt", "text/plain", notes.clone()));
    let (status, answer) = chat_form(&app, ALICE, "alice", form).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"], "a pixel and notes");

    let parts = last_user_content(&app.llm.requests()[0]);
    assert_eq!(parts[0]["text"], "what is this?", "{parts}");
    assert_eq!(parts[1]["image_url"]["url"], png_data_url(), "{parts}");
    assert!(
        parts[2]["text"]
            .as_str()
            .expect("text")
            .contains("note note"),
        "{parts}"
    );

    let files = files_of(&app, ALICE).await;
    assert_eq!(files.len(), 2, "one record per file part: {files:?}");
    let png_sha: String = sha2::Sha256::digest(PNG)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let pixel = files
        .iter()
        .find(|f| f["filename"] == "pixel.png")
        .expect("the PNG is alice's file");
    assert_eq!(pixel["media_type"], "image/png", "sniffed, not declared");
    assert_eq!(pixel["bytes"], PNG.len());
    let conversation = answer["conversation_id"].as_str().expect("conversation");
    let stored: Value = call(
        &app,
        reqwest::Method::GET,
        ALICE,
        &format!("/api/alice/conversations/{conversation}"),
    )
    .await
    .json()
    .await
    .expect("conversation");
    let kept = &stored["messages"][0]["attachments"];
    assert_eq!(kept[0]["file_id"], pixel["id"], "{stored}");
    assert_eq!(kept[0]["sha256"], png_sha.as_str());
    assert_eq!(kept[1]["name"], "notes.txt");
    assert_eq!(kept[1]["bytes"], notes.len());
    let content = call(
        &app,
        reqwest::Method::GET,
        ALICE,
        &format!("/v1/files/{}/content", pixel["id"].as_str().expect("id")),
    )
    .await;
    assert_eq!(content.bytes().await.expect("bytes").as_ref(), PNG);

    // The JSON path records the same file the same way.
    app.llm.push(crate::support::mock_llm::Reply::text("again"));
    let png64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    let sent = app
        .client
        .post(app.url("/api/alice/chat"))
        .bearer_auth(ALICE)
        .json(
            &json!({"message": "and this?", "conversation_id": conversation,
            "attachments": [{"name": "pixel.png", "media_type": "image/jpeg", "data": png64}]}),
        )
        .send()
        .await
        .expect("sent");
    assert_eq!(sent.status(), 200);
    let files = files_of(&app, ALICE).await;
    let same: Vec<&Value> = files
        .iter()
        .filter(|f| f["filename"] == "pixel.png")
        .collect();
    assert_eq!(same.len(), 2, "{files:?}");
    for field in ["purpose", "media_type", "bytes"] {
        assert_eq!(same[0][field], same[1][field], "{field}: {files:?}");
    }
}

/// The form's limits: a file at the per-file limit passes and one byte more is 413 naming its
/// part, the request's files past the per-request limit are 413 at the part that passes it, a
/// media type not allowed is 415; a missing message, an unknown part or a bad field are 400
/// naming it, and another user's chat is 403 before anything is stored.
#[tokio::test]
async fn a_chat_form_is_held_to_the_attachment_limits_naming_the_part() {
    let app = spawn_app_with(|config| {
        keyed(config);
        config["limits"] = json!({"attachments": {"maxFileBytes": 1000, "maxRequestBytes": 1500}});
    })
    .await;
    let text = |bytes: usize| file_part("a.txt", "text/plain", vec![b'a'; bytes]);
    app.llm
        .push(crate::support::mock_llm::Reply::text("read it"));
    let (status, answer) = chat_form(
        &app,
        ALICE,
        "alice",
        Form::new().text("message", "read").part("file", text(1000)),
    )
    .await;
    assert_eq!(status, 200, "at the per-file limit: {answer}");

    let (status, error) = chat_form(
        &app,
        ALICE,
        "alice",
        Form::new().text("message", "read").part("file", text(1001)),
    )
    .await;
    assert_eq!(status, 413, "{error}");
    assert_eq!(error["error"]["code"], "attachment_too_large");
    assert_eq!(error["error"]["param"], "file[0]");

    let (status, error) = chat_form(
        &app,
        ALICE,
        "alice",
        Form::new()
            .text("message", "read")
            .part("file", text(800))
            .part("file", text(800)),
    )
    .await;
    assert_eq!(status, 413, "past the per-request limit: {error}");
    assert_eq!(error["error"]["param"], "file[1]");

    let (status, error) = chat_form(
        &app,
        ALICE,
        "alice",
        Form::new().text("message", "read").part(
            "file",
            file_part("x.png", "image/png", vec![0, 0xff, 0, 0xfe]),
        ),
    )
    .await;
    assert_eq!(status, 415, "{error}");
    assert_eq!(error["error"]["param"], "file[0]");

    for (form, param) in [
        (Form::new().text("agent", "chat"), "message"),
        (
            Form::new().text("message", "x").text("colour", "blue"),
            "colour",
        ),
        (
            Form::new().text("message", "x").text("stream", "maybe"),
            "stream",
        ),
        (
            Form::new().text("message", "x").text("message", "y"),
            "message",
        ),
    ] {
        let (status, error) = chat_form(&app, ALICE, "alice", form).await;
        assert_eq!(status, 400, "{param}: {error}");
        assert_eq!(error["error"]["param"], param, "{error}");
    }

    let before = files_of(&app, BOB).await.len();
    let (status, _) = chat_form(
        &app,
        BOB,
        "alice",
        Form::new().text("message", "x").part("file", text(10)),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(files_of(&app, BOB).await.len(), before, "nothing stored");
}

/// The context guard counts an image as its vendor bills it, by its size: a one-pixel PNG fits
/// `tight`'s 1,000-token window (it was counted at a flat 1,600 tokens), and a 1024×1024 one (at
/// least 1,399 tokens on any vendor) does not, so that turn is the final one.
#[tokio::test]
async fn the_context_guard_counts_an_image_by_its_size() {
    use base64::Engine;
    let app = crate::support::spawn_app().await;
    let ask = |png: &[u8]| {
        let png64 = base64::engine::general_purpose::STANDARD.encode(png);
        json!({"model": "tight", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png64}")}},
        ]}]})
    };
    app.llm
        .push(crate::support::mock_llm::Reply::text("a pixel"));
    let small = app.post_json("/v1/chat/completions", &ask(PNG)).await;
    let small: Value = small.json().await.expect("json");
    assert_eq!(
        small["choices"][0]["message"]["content"], "a pixel",
        "{small}"
    );
    let mut large = PNG.to_vec();
    // The header's width and height (bytes 16..24): 1024×1024.
    large[16..24].copy_from_slice(&[0, 0, 4, 0, 0, 0, 4, 0]);
    app.llm
        .push(crate::support::mock_llm::Reply::text("a square"));
    let answered = app.post_json("/v1/chat/completions", &ask(&large)).await;
    assert_eq!(answered.status(), 200);
    let requests = app.llm.requests();
    let final_turn = |request: &Value| request.to_string().contains("this is the final turn");
    assert!(!final_turn(&requests[0]), "the pixel fits: {}", requests[0]);
    assert!(
        final_turn(&requests[1]),
        "the large image fills the window: {}",
        requests[1]
    );
}

/// `count_tokens` counts a Messages request's images by their size, as the run would send
/// them, checks them as `messages` does (a bad part is named), and stores nothing.
#[tokio::test]
async fn count_tokens_counts_images_by_their_size_and_stores_nothing() {
    use base64::Engine;
    let app = crate::support::spawn_app().await;
    let count = |image: Option<&[u8]>| {
        let mut content = vec![json!({"type": "text", "text": "What is this?"})];
        if let Some(png) = image {
            let data = base64::engine::general_purpose::STANDARD.encode(png);
            content.push(json!({"type": "image", "source":
                {"type": "base64", "media_type": "image/png", "data": data}}));
        }
        json!({"model": "tight", "messages": [{"role": "user", "content": content}]})
    };
    let tokens = |body: Value| {
        let app = &app;
        async move {
            let response = app.post_json("/v1/messages/count_tokens", &body).await;
            assert_eq!(response.status(), 200);
            let count: Value = response.json().await.expect("json");
            count["input_tokens"].as_u64().expect("a count")
        }
    };
    let text_only = tokens(count(None)).await;
    let pixel = tokens(count(Some(PNG))).await;
    let mut square = PNG.to_vec();
    // The header's width and height (bytes 16..24): 1024×1024.
    square[16..24].copy_from_slice(&[0, 0, 4, 0, 0, 0, 4, 0]);
    let large = tokens(count(Some(&square))).await;
    assert!(pixel > text_only, "{pixel} > {text_only}");
    assert!(
        large >= text_only + 765,
        "a 1024×1024 image is at least 765 tokens with any vendor: {large} against {text_only}"
    );
    let mut bad = count(Some(PNG));
    bad["messages"][0]["content"][1]["source"]["data"] = json!("not base64!");
    let refused = app.post_json("/v1/messages/count_tokens", &bad).await;
    assert_eq!(refused.status(), 400);
    let refused: Value = refused.json().await.expect("json");
    assert!(
        refused.to_string().contains("messages[0].content[1]"),
        "{refused}"
    );
    let files: Value = app.get("/v1/files").await.json().await.expect("json");
    assert_eq!(files["data"], json!([]), "counting stores no file: {files}");
}

/// `/v1/responses/input_tokens` counts `input_image` parts by their size like `count_tokens`,
/// names a bad part, and stores nothing.
#[tokio::test]
async fn responses_input_tokens_counts_images_by_their_size_and_stores_nothing() {
    use base64::Engine;
    let app = crate::support::spawn_app().await;
    let input = |image: Option<&[u8]>| {
        let mut content = vec![json!({"type": "input_text", "text": "What is this?"})];
        if let Some(png) = image {
            let data = base64::engine::general_purpose::STANDARD.encode(png);
            content.push(json!({"type": "input_image", "image_url": format!("data:image/png;base64,{data}")}));
        }
        json!({"model": "tight", "input": [{"type": "message", "role": "user", "content": content}]})
    };
    let tokens = |body: Value| {
        let app = &app;
        async move {
            let response = app.post_json("/v1/responses/input_tokens", &body).await;
            assert_eq!(response.status(), 200);
            let count: Value = response.json().await.expect("json");
            count["input_tokens"].as_u64().expect("a count")
        }
    };
    let text_only = tokens(input(None)).await;
    let mut square = PNG.to_vec();
    square[16..24].copy_from_slice(&[0, 0, 4, 0, 0, 0, 4, 0]);
    let large = tokens(input(Some(&square))).await;
    assert!(
        large >= text_only + 765,
        "a 1024×1024 image is at least 765 tokens: {large} against {text_only}"
    );
    let mut bad = input(Some(PNG));
    bad["input"][0]["content"][1]["image_url"] = json!("data:image/png;base64,not base64!");
    let refused = app.post_json("/v1/responses/input_tokens", &bad).await;
    assert_eq!(refused.status(), 400);
    let refused: Value = refused.json().await.expect("json");
    assert_eq!(refused["error"]["param"], "input[0].content[1].image_url");
    let files: Value = app.get("/v1/files").await.json().await.expect("json");
    assert_eq!(files["data"], json!([]), "counting stores no file: {files}");
}
