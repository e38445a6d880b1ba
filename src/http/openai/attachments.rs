//! The attachments of a Chat Completions request (SPEC §11): `image_url` parts (an `https` URL
//! or a `data:` URL) and `file` parts (`file_data` with `filename`, or `file_id`), each stored
//! and put on its message; the error of a refused one names `messages[i].content[j]`.

use crate::config::AgentSpec;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::shared::attachments::AttachmentIntake;
use crate::llm::ChatMessage;
use crate::runtime::Runtime;
use crate::vocabulary::Attachment;

use super::wire::{ContentPart, MessageContent, RequestMessage};

/// Stores the attachments of `messages`, puts those of earlier messages on `history` (one
/// message each, in order) and returns the prompt's: those of the last message when `history`
/// is one shorter than `messages`.
pub async fn of_messages(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    messages: &[RequestMessage],
    history: &mut [ChatMessage],
) -> Result<Vec<Attachment>, ApiError> {
    let mut intake = AttachmentIntake::new(runtime, caller, agent);
    let mut prompt = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let Some(MessageContent::Parts(parts)) = &message.content else {
            continue;
        };
        let mut attachments = Vec::new();
        for (position, part) in parts.iter().enumerate() {
            let at = format!("messages[{index}].content[{position}]");
            if let Some(attachment) = attachment_of(&mut intake, part, &at).await? {
                attachments.push(attachment);
            }
        }
        match history.get_mut(index) {
            Some(earlier) => earlier.attachments = attachments,
            None => prompt = attachments,
        }
    }
    Ok(prompt)
}

async fn attachment_of(
    intake: &mut AttachmentIntake<'_>,
    part: &ContentPart,
    at: &str,
) -> Result<Option<Attachment>, ApiError> {
    match part.kind.as_str() {
        "image_url" => {
            let image = part
                .image_url
                .as_ref()
                .ok_or_else(|| missing(at, "image_url"))?;
            Ok(Some(
                intake
                    .url(&image.url, &format!("{at}.image_url.url"), None, None)
                    .await?,
            ))
        }
        "file" => {
            let file = part.file.as_ref().ok_or_else(|| missing(at, "file"))?;
            let attachment = match (&file.file_id, &file.file_data) {
                (Some(id), _) => intake.file_id(id, &format!("{at}.file.file_id")).await?,
                (None, Some(data)) => {
                    let field = format!("{at}.file.file_data");
                    let name = file.filename.as_deref();
                    if data.starts_with("data:") {
                        intake.url(data, &field, name, None).await?
                    } else {
                        intake
                            .base64(data, &field, None, name.unwrap_or("file"))
                            .await?
                    }
                }
                (None, None) => return Err(missing(at, "file.file_data` or `file.file_id")),
            };
            Ok(Some(attachment))
        }
        _ => Ok(None),
    }
}

fn missing(at: &str, field: &str) -> ApiError {
    ApiError::invalid_request(format!("`{at}` has no `{field}`"))
        .with_param(format!("{at}.{field}"))
}
