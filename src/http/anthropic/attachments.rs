//! The attachments of a Messages request (SPEC §11): `image` and `document` blocks whose source
//! is `base64`, `url`, `text` or a Files API `file`, each stored (or, for a token count, only
//! measured), by the index of its message; the error of a refused one names
//! `messages[i].content[j]`.

use bytes::Bytes;

use crate::config::AgentSpec;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::shared::attachments::AttachmentIntake;
use crate::runtime::Runtime;
use crate::vocabulary::Attachment;

use super::request::Attachments;
use super::wire::{AnthropicMessage, RequestContentBlock, TextOrBlocks};

/// Stores the `image` and `document` blocks of every message.
pub async fn of_messages(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    messages: &[AnthropicMessage],
) -> Result<Attachments, ApiError> {
    let intake = AttachmentIntake::new(runtime, caller, agent);
    taken_in(intake, messages).await
}

/// The `image` and `document` blocks of every message, checked and loaded as for a run but not
/// stored: what `count_tokens` counts.
pub async fn measured_of_messages(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    messages: &[AnthropicMessage],
) -> Result<Attachments, ApiError> {
    let intake = AttachmentIntake::measuring(runtime, caller, agent);
    taken_in(intake, messages).await
}

async fn taken_in(
    mut intake: AttachmentIntake<'_>,
    messages: &[AnthropicMessage],
) -> Result<Attachments, ApiError> {
    let mut stored = Attachments::new();
    for (index, message) in messages.iter().enumerate() {
        let TextOrBlocks::Blocks(blocks) = &message.content else {
            continue;
        };
        for (position, block) in blocks.iter().enumerate() {
            if !matches!(block.kind.as_str(), "image" | "document") {
                continue;
            }
            let at = format!("messages[{index}].content[{position}]");
            let attachment = attachment_of(&mut intake, block, &at).await?;
            stored.entry(index).or_default().push(attachment);
        }
    }
    Ok(stored)
}

async fn attachment_of(
    intake: &mut AttachmentIntake<'_>,
    block: &RequestContentBlock,
    at: &str,
) -> Result<Attachment, ApiError> {
    let missing = |field: &str| {
        ApiError::invalid_request(format!("`{at}` has no `{field}`"))
            .with_param(format!("{at}.{field}"))
    };
    let source = block.source.as_ref().ok_or_else(|| missing("source"))?;
    let name = block.title.as_deref();
    let field = format!("{at}.source");
    match source.kind.as_str() {
        "base64" => {
            let data = source
                .data
                .as_deref()
                .ok_or_else(|| missing("source.data"))?;
            let declared = source.media_type.as_deref();
            let name = name.map_or_else(|| default_name(&block.kind), str::to_string);
            intake
                .base64(data, &format!("{field}.data"), declared, &name)
                .await
        }
        "text" => {
            let data = source.data.clone().ok_or_else(|| missing("source.data"))?;
            let name = name.unwrap_or("document.txt");
            let field = format!("{field}.data");
            intake
                .content(Bytes::from(data), &field, Some("text/plain"), name)
                .await
        }
        "url" => {
            let url = source.url.as_deref().ok_or_else(|| missing("source.url"))?;
            // A `document` block's URL is a PDF (Anthropic's URL documents are).
            let declared = (block.kind == "document").then_some("application/pdf");
            intake
                .url(url, &format!("{field}.url"), name, declared)
                .await
        }
        "file" => {
            let id = source
                .file_id
                .as_deref()
                .ok_or_else(|| missing("source.file_id"))?;
            intake.file_id(id, &format!("{field}.file_id")).await
        }
        other => Err(ApiError::invalid_request(format!(
            "`{field}.type` {other:?} is not supported: use base64, url, text or file"
        ))
        .with_param(format!("{field}.type"))),
    }
}

fn default_name(kind: &str) -> String {
    match kind {
        "image" => "image".into(),
        _ => "document".into(),
    }
}
