//! `attachments: text` (SPEC §11): a PDF sent to a model that cannot read PDFs reaches the
//! upstream as its extracted text (a note naming the file, then the text), in the prompt and
//! again when the conversation goes on; the text is capped, saying so when cut; a PDF that
//! cannot be parsed is a 400 naming the file; images stay refused. The PDFs are written by
//! hand (`support::pdf`), as any PDF writer would.

use base64::Engine;
use serde_json::{Value, json};

use crate::attachments::{PNG, last_user_content};
use crate::support::mock_llm::Reply;
use crate::support::pdf::pdf_with_pages;
use crate::support::{TestApp, spawn_app_with};

const READER_AGENT: &str = "---\ndescription: Reads PDFs as text\nmodels: llm/upstream-model\nfinalization: text\nattachments: text\n---\nYou answer.\n";

/// The test app whose model reads text only, with the agent `reader` (`attachments: text`)
/// beside the usual `chat`.
async fn text_only_app(max_text_bytes: Option<u64>) -> (TestApp, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("reader.ai"), READER_AGENT).expect("agent");
    let agents = dir.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["providers"]["llm"]["models"] = json!({"upstream-model": {"input": ["text"]}});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents));
        if let Some(max) = max_text_bytes {
            config["limits"] = json!({"attachments": {"maxExtractedTextBytes": max}});
        }
    })
    .await;
    (app, dir)
}

fn pdf_data_url(pdf: &[u8]) -> String {
    format!(
        "data:application/pdf;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(pdf)
    )
}

/// A chat completion to `model` asking about `report.pdf` (`pdf`).
fn ask_about(model: &str, pdf: &[u8]) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "summarise"},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": pdf_data_url(pdf)}}]}]})
}

/// Every text the upstream got in the last user message, joined.
fn texts_sent(request: &Value) -> String {
    last_user_content(request)
        .as_array()
        .expect("content parts")
        .iter()
        .map(|part| {
            assert_eq!(
                part["type"], "text",
                "only text reaches a text-only model: {part}"
            );
            part["text"].as_str().expect("text").to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_pdf_reaches_a_text_only_model_as_its_extracted_text() {
    let (app, _dir) = text_only_app(None).await;
    let pdf = pdf_with_pages(&["Revenue rose 12 percent (Q3).", "Costs fell on page two."]);
    let refused = app
        .post_json("/v1/chat/completions", &ask_about("chat", &pdf))
        .await;
    assert_eq!(refused.status(), 400, "without `attachments: text`");
    let error: Value = refused.json().await.expect("error");
    assert_eq!(error["error"]["code"], "unsupported_attachment", "{error}");

    app.llm.push(Reply::text("up 12%"));
    let answered = app
        .post_json("/v1/chat/completions", &ask_about("reader", &pdf))
        .await;
    assert_eq!(
        answered.status(),
        200,
        "{}",
        answered.text().await.unwrap_or_default()
    );
    let requests = app.llm.requests();
    assert_eq!(requests.len(), 1);
    let sent = texts_sent(&requests[0]);
    assert!(
        sent.contains("<file name=\"report.pdf\"")
            && sent.contains("[text extracted from the PDF report.pdf (")
            && sent.contains("2 pages")
            && sent.contains("Revenue rose 12 percent (Q3).\nCosts fell on page two."),
        "{sent}"
    );
    assert!(!sent.contains("[cut"), "{sent}");
    assert!(!sent.contains("JVBER"), "no PDF bytes: {sent}");
}

#[tokio::test]
async fn the_extracted_text_is_cut_past_its_limit_saying_so() {
    const LIMIT: usize = 40;
    let (app, _dir) = text_only_app(Some(LIMIT as u64)).await;
    let at_limit = "a".repeat(LIMIT);
    let past_limit = "b".repeat(LIMIT + 1);
    for (text, cut) in [(&at_limit, false), (&past_limit, true)] {
        app.llm.push(Reply::text("read"));
        let pdf = pdf_with_pages(&[text]);
        let response = app
            .post_json("/v1/chat/completions", &ask_about("reader", &pdf))
            .await;
        assert_eq!(response.status(), 200);
        let requests = app.llm.requests();
        let sent = texts_sent(requests.last().expect("a request"));
        assert_eq!(
            sent.contains("[cut: the text of report.pdf passes 40 bytes"),
            cut,
            "{sent}"
        );
        assert!(sent.contains(&text[..LIMIT]), "{sent}");
        assert!(
            !sent.contains(&past_limit),
            "never more than the limit: {sent}"
        );
    }
}

#[tokio::test]
async fn a_pdf_that_cannot_be_parsed_is_a_400_naming_the_file_and_images_stay_refused() {
    let (app, _dir) = text_only_app(None).await;
    let broken = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> this is no PDF\n".to_vec();
    let response = app
        .post_json("/v1/chat/completions", &ask_about("reader", &broken))
        .await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.expect("error");
    assert_eq!(error["error"]["code"], "unreadable_attachment", "{error}");
    assert_eq!(
        error["error"]["param"],
        "messages[0].content[1].file.file_data"
    );
    let message = error["error"]["message"].as_str().expect("message");
    assert!(message.contains("report.pdf"), "{message}");

    let png = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(PNG)
    );
    let image = json!({"model": "reader", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": png}}]}]});
    let refused = app.post_json("/v1/chat/completions", &image).await;
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.expect("error");
    assert_eq!(error["error"]["code"], "unsupported_attachment", "{error}");
    assert_eq!(app.llm.request_count(), 0, "nothing reached the model");
}

/// An uploaded PDF sent by `file_id` on the per-user chat: its text reaches the model, and
/// again from the store when the conversation goes on.
#[tokio::test]
async fn a_conversation_continued_later_sends_its_pdf_as_text_again() {
    let (app, _dir) = text_only_app(None).await;
    let pdf = pdf_with_pages(&["The launch is on Tuesday."]);
    let form = reqwest::multipart::Form::new()
        .text("purpose", "user_data")
        .part(
            "file",
            reqwest::multipart::Part::bytes(pdf)
                .file_name("plan.pdf")
                .mime_str("application/pdf")
                .expect("mime"),
        );
    let file: Value = app
        .client
        .post(app.url("/v1/files"))
        .multipart(form)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("file");
    let file_id = file["id"].as_str().expect("id");
    app.llm.push(Reply::text("Tuesday"));
    let first: Value = app
        .post_json(
            "/api/alice/chat",
            &json!({"message": "when?", "agent": "reader",
                    "attachments": [{"file_id": file_id}]}),
        )
        .await
        .json()
        .await
        .expect("answer");
    assert_eq!(first["status"], "completed", "{first}");
    let conversation = first["conversation_id"].as_str().expect("conversation");
    app.llm.push(Reply::text("still Tuesday"));
    let second = app
        .post_json(
            "/api/alice/chat",
            &json!({"message": "sure?", "conversation_id": conversation, "agent": "reader"}),
        )
        .await;
    assert_eq!(second.status(), 200);
    for request in app.llm.requests() {
        let all = request["messages"].to_string();
        assert!(
            all.contains("[text extracted from the PDF plan.pdf")
                && all.contains("The launch is on Tuesday."),
            "{all}"
        );
        assert!(!all.contains("\"file\""), "no PDF part: {all}");
    }
}
