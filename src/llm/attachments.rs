//! Attachments in each vendor's native form (SPEC §11): OpenAI `image_url` / `file` parts,
//! Anthropic `image` / `document` blocks, Gemini `inline_data` parts, Ollama `images`. Text files
//! go as text everywhere (wrapped with their name), and so does what a vendor cannot take (a PDF
//! to Ollama) or an attachment whose content is no longer stored: a note naming it, never a
//! silent drop. A file the model cannot read goes in its text form when it has one (a PDF's
//! text under `attachments: text`). A remote attachment goes as its URL to the vendors that
//! fetch URLs (OpenAI images, Anthropic images and PDFs). Pure functions of a message's
//! attachments; the providers place them.

use std::sync::Arc;

use serde_json::{Value, json};

use super::ChatMessage;
use crate::vocabulary::{Attachment, AttachmentKind};

/// Gives every attachment of `messages` a model reading only `input` cannot take, and that
/// has a text form, as that text (a text file named like it), for one request to that model.
pub fn fit_to_input(messages: &mut [ChatMessage], input: &[AttachmentKind]) {
    let attachments = messages.iter_mut().flat_map(|m| m.attachments.iter_mut());
    for attachment in attachments.filter(|a| !input.contains(&a.kind())) {
        if let Some(text) = attachment.text_form.take() {
            attachment.media_type = "text/plain".to_string();
            attachment.content = Some(Arc::from(text.as_bytes()));
        }
    }
}

/// A text file's content as the model reads it: fenced by its name.
pub fn as_text(attachment: &Attachment) -> String {
    format!(
        "<file name=\"{}\" media_type=\"{}\">\n{}\n</file>",
        attachment.name,
        attachment.media_type,
        attachment.text()
    )
}

/// What a model is told in place of an attachment it cannot be sent.
pub fn note(attachment: &Attachment, why: &str) -> String {
    match &attachment.url {
        Some(url) => format!(
            "[attachment {} ({}) at {url}: {why}]",
            attachment.name, attachment.media_type
        ),
        None => format!(
            "[attachment {} ({}, {} bytes): {why}]",
            attachment.name, attachment.media_type, attachment.bytes
        ),
    }
}

/// Where an attachment's content comes from for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source<'a> {
    /// Loaded from the store: sent inline.
    Loaded,
    /// A remote file the vendor fetches from this URL.
    Remote(&'a str),
    /// Neither: its file was deleted.
    Gone,
}

fn source(attachment: &Attachment) -> Source<'_> {
    match (attachment.content.is_some(), attachment.remote_url()) {
        (true, _) => Source::Loaded,
        (false, Some(url)) => Source::Remote(url),
        (false, None) => Source::Gone,
    }
}

/// The note for an attachment that cannot be sent from `source`.
fn unsent(attachment: &Attachment, source: Source<'_>) -> String {
    match source {
        Source::Remote(_) => note(attachment, "a remote file this vendor does not fetch"),
        Source::Loaded | Source::Gone => note(attachment, "no longer stored"),
    }
}

/// The content parts of an OpenAI Chat Completions message: its text, then each attachment.
pub fn openai_parts(text: Option<&str>, attachments: &[Attachment]) -> Value {
    let mut parts: Vec<Value> = text
        .filter(|t| !t.is_empty())
        .map(|t| json!({"type": "text", "text": t}))
        .into_iter()
        .collect();
    for attachment in attachments {
        parts.push(match (source(attachment), attachment.kind()) {
            (Source::Loaded, AttachmentKind::Image) => {
                json!({"type": "image_url", "image_url": {"url": attachment.data_url()}})
            }
            (Source::Remote(url), AttachmentKind::Image) => {
                json!({"type": "image_url", "image_url": {"url": url}})
            }
            (Source::Loaded, AttachmentKind::Pdf) => json!({"type": "file", "file": {
                "filename": attachment.name,
                "file_data": attachment.data_url(),
            }}),
            (Source::Loaded, AttachmentKind::Text) => {
                json!({"type": "text", "text": as_text(attachment)})
            }
            (source, _) => json!({"type": "text", "text": unsent(attachment, source)}),
        });
    }
    Value::Array(parts)
}

/// Anthropic content blocks of a message's attachments (they go before its text, as
/// Anthropic's guide advises).
pub fn anthropic_blocks(attachments: &[Attachment]) -> Vec<Value> {
    attachments
        .iter()
        .map(|attachment| match (source(attachment), attachment.kind()) {
            (Source::Loaded, AttachmentKind::Image) => json!({"type": "image", "source": {
                "type": "base64",
                "media_type": attachment.media_type,
                "data": attachment.base64(),
            }}),
            (Source::Remote(url), AttachmentKind::Image) => {
                json!({"type": "image", "source": {"type": "url", "url": url}})
            }
            (Source::Loaded, AttachmentKind::Pdf) => json!({"type": "document", "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": attachment.base64(),
            }}),
            (Source::Remote(url), AttachmentKind::Pdf) => {
                json!({"type": "document", "source": {"type": "url", "url": url}})
            }
            (Source::Loaded, AttachmentKind::Text) => {
                json!({"type": "document", "title": attachment.name, "source": {
                    "type": "text",
                    "media_type": "text/plain",
                    "data": attachment.text(),
                }})
            }
            (source, _) => json!({"type": "text", "text": unsent(attachment, source)}),
        })
        .collect()
}

/// Gemini parts of a message's attachments: images and PDFs inline, text files as text.
pub fn gemini_parts(attachments: &[Attachment]) -> Vec<Value> {
    attachments
        .iter()
        .map(|attachment| match (source(attachment), attachment.kind()) {
            (Source::Loaded, AttachmentKind::Image | AttachmentKind::Pdf) => {
                json!({"inline_data": {
                    "mime_type": attachment.media_type,
                    "data": attachment.base64(),
                }})
            }
            (Source::Loaded, AttachmentKind::Text) => json!({"text": as_text(attachment)}),
            (source, _) => json!({"text": unsent(attachment, source)}),
        })
        .collect()
}

/// Ollama's `images` (base64, no data URL) and the text to add for what is not an image.
pub fn ollama_parts(attachments: &[Attachment]) -> (Vec<Value>, Vec<String>) {
    let mut images = Vec::new();
    let mut texts = Vec::new();
    for attachment in attachments {
        match (source(attachment), attachment.kind()) {
            (Source::Loaded, AttachmentKind::Image) => images.push(json!(attachment.base64())),
            (Source::Loaded, AttachmentKind::Pdf) => texts.push(note(
                attachment,
                "Ollama takes no PDF; send it with `attachments: text`",
            )),
            (Source::Loaded, AttachmentKind::Text) => texts.push(as_text(attachment)),
            (source, _) => texts.push(unsent(attachment, source)),
        }
    }
    (images, texts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attachment(name: &str, media_type: &str, content: Option<&[u8]>) -> Attachment {
        Attachment {
            name: name.into(),
            media_type: media_type.into(),
            bytes: content.map_or(0, |c| c.len() as u64),
            sha256: "00".repeat(32),
            file_id: "file-1".into(),
            content: content.map(Arc::from),
            url: None,
            text_form: None,
        }
    }

    #[test]
    fn each_vendor_gets_its_native_shape() {
        let png = attachment("a.png", "image/png", Some(b"PNG"));
        let pdf = attachment("b.pdf", "application/pdf", Some(b"%PDF"));
        let txt = attachment("c.txt", "text/plain", Some(b"hello"));
        let all = [png, pdf, txt];
        let openai = openai_parts(Some("look"), &all);
        assert_eq!(openai[0], json!({"type": "text", "text": "look"}));
        assert_eq!(openai[1]["image_url"]["url"], "data:image/png;base64,UE5H");
        assert_eq!(
            openai[2]["file"]["file_data"],
            "data:application/pdf;base64,JVBERg=="
        );
        assert!(openai[3]["text"].as_str().expect("text").contains("hello"));
        let anthropic = anthropic_blocks(&all);
        assert_eq!(anthropic[0]["source"]["data"], "UE5H");
        assert_eq!(anthropic[1]["type"], "document");
        assert_eq!(anthropic[2]["source"]["data"], "hello");
        let gemini = gemini_parts(&all);
        assert_eq!(gemini[0]["inline_data"]["mime_type"], "image/png");
        let (images, texts) = ollama_parts(&all);
        assert_eq!(images, vec![json!("UE5H")]);
        assert_eq!(texts.len(), 2);
    }

    #[test]
    fn a_pdf_with_a_text_form_goes_as_text_only_to_models_that_cannot_read_it() {
        let mut pdf = attachment("r.pdf", "application/pdf", Some(b"%PDF"));
        pdf.text_form = Some(Arc::from("[text extracted from the PDF r.pdf]\nhello"));
        let mut message = ChatMessage::user("read");
        message.attachments = vec![pdf];
        let mut reader = vec![message.clone()];
        fit_to_input(&mut reader, &[AttachmentKind::Text, AttachmentKind::Pdf]);
        assert_eq!(
            openai_parts(None, &reader[0].attachments)[0]["type"],
            "file"
        );
        let mut text_only = vec![message];
        fit_to_input(&mut text_only, &[AttachmentKind::Text]);
        let parts = openai_parts(None, &text_only[0].attachments);
        let text = parts[0]["text"].as_str().expect("text");
        assert!(text.contains("name=\"r.pdf\"") && text.ends_with("hello\n</file>"));
    }

    #[test]
    fn a_remote_file_goes_as_its_url_to_vendors_that_fetch_and_as_a_note_elsewhere() {
        let remote = [
            Attachment::remote(
                "cat.png".into(),
                "image/png".into(),
                "https://x.test/cat.png".into(),
            ),
            Attachment::remote(
                "r.pdf".into(),
                "application/pdf".into(),
                "https://x.test/r.pdf".into(),
            ),
        ];
        let openai = openai_parts(None, &remote);
        assert_eq!(openai[0]["image_url"]["url"], "https://x.test/cat.png");
        assert!(openai[1]["text"].as_str().expect("note").contains("r.pdf"));
        let anthropic = anthropic_blocks(&remote);
        assert_eq!(
            anthropic[0]["source"],
            json!({"type": "url", "url": "https://x.test/cat.png"})
        );
        assert_eq!(anthropic[1]["type"], "document");
        assert_eq!(anthropic[1]["source"]["url"], "https://x.test/r.pdf");
        let gemini = gemini_parts(&remote);
        assert!(
            gemini[0]["text"]
                .as_str()
                .expect("note")
                .contains("https://x.test/cat.png")
        );
        let (images, texts) = ollama_parts(&remote);
        assert!(images.is_empty() && texts.len() == 2);
    }

    #[test]
    fn content_no_longer_stored_is_a_note_naming_it() {
        let gone = [attachment("gone.png", "image/png", None)];
        let openai = openai_parts(None, &gone);
        assert!(
            openai[0]["text"]
                .as_str()
                .expect("note")
                .contains("gone.png")
        );
    }
}
