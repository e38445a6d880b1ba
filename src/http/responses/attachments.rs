//! The attachments of a Responses request (SPEC §11): `input_image` (`image_url`, a URL or a
//! `data:` URL, or `file_id`) and `input_file` (`file_data` with `filename`, `file_url` or
//! `file_id`) parts, stored; the prompt's are sent with it, and those of earlier items (a
//! `store: false` client replaying its conversation) go on the history message read from
//! their item, so the model sees them where they were. A token count measures them the same
//! way and stores nothing. The error of a refused one names `input[i].content[j]`.

use serde_json::Value;

use super::input::{FILE_PARTS, ReadInput};
use crate::config::AgentSpec;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::shared::attachments::AttachmentIntake;
use crate::runtime::Runtime;
use crate::vocabulary::Attachment;

/// Stores the files of every item of `read`, puts those of earlier items on their history
/// messages and returns the prompt's.
pub async fn of_input(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    read: &mut ReadInput,
) -> Result<Vec<Attachment>, ApiError> {
    let mut intake = AttachmentIntake::new(runtime, caller, agent);
    let mut prompt = Vec::new();
    for (index, item) in read.items.iter().enumerate() {
        let stored = files_of_item(&mut intake, item, index).await?;
        if stored.is_empty() {
            continue;
        }
        if read.prompt_item == Some(index) {
            prompt = stored;
        } else if let Some(message) = read.origins.iter().rposition(|&origin| origin == index) {
            read.history[message].attachments = stored;
        }
    }
    Ok(prompt)
}

/// The files of every item of `items`, checked as a run would take them but never stored: what
/// a token count measures.
pub async fn measured_of_items(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    items: &[Value],
) -> Result<Vec<Attachment>, ApiError> {
    let mut intake = AttachmentIntake::measuring(runtime, caller, agent);
    let mut measured = Vec::new();
    for (index, item) in items.iter().enumerate() {
        measured.extend(files_of_item(&mut intake, item, index).await?);
    }
    Ok(measured)
}

/// The files of item `index`'s content parts, taken in by `intake`.
async fn files_of_item(
    intake: &mut AttachmentIntake<'_>,
    item: &Value,
    index: usize,
) -> Result<Vec<Attachment>, ApiError> {
    let Some(Value::Array(parts)) = item.get("content") else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    for (position, part) in parts.iter().enumerate() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
        if FILE_PARTS.contains(&kind) {
            let at = format!("input[{index}].content[{position}]");
            files.push(attachment_of(intake, kind, part, &at).await?);
        }
    }
    Ok(files)
}

async fn attachment_of(
    intake: &mut AttachmentIntake<'_>,
    kind: &str,
    part: &Value,
    at: &str,
) -> Result<Attachment, ApiError> {
    let field = |name: &str| part.get(name).and_then(Value::as_str);
    let name = field("filename");
    if let Some(id) = field("file_id") {
        return intake.file_id(id, &format!("{at}.file_id")).await;
    }
    match kind {
        "input_image" => {
            let url = field("image_url").ok_or_else(|| missing(at, "image_url"))?;
            intake
                .url(url, &format!("{at}.image_url"), name, None)
                .await
        }
        _ => match (field("file_data"), field("file_url")) {
            (Some(data), _) if data.starts_with("data:") => {
                intake
                    .url(data, &format!("{at}.file_data"), name, None)
                    .await
            }
            (Some(data), _) => {
                let name = name.unwrap_or("file");
                intake
                    .base64(data, &format!("{at}.file_data"), None, name)
                    .await
            }
            (None, Some(url)) => intake.url(url, &format!("{at}.file_url"), name, None).await,
            (None, None) => Err(missing(at, "file_data")),
        },
    }
}

fn missing(at: &str, field: &str) -> ApiError {
    ApiError::invalid_request(format!("`{at}` has no `{field}`"))
        .with_param(format!("{at}.{field}"))
}
