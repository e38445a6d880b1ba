//! The attachments of a Responses request (SPEC §11): `input_image` (`image_url`, a URL or a
//! `data:` URL, or `file_id`) and `input_file` (`file_data` with `filename`, `file_url` or
//! `file_id`) parts of the input's last user message, stored and sent with the prompt; the
//! error of a refused one names `input[i].content[j]`. Files of earlier items are refused by
//! name: continue a conversation with `previous_response_id` instead of replaying them.

use serde_json::Value;

use crate::config::AgentSpec;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::shared::attachments::AttachmentIntake;
use crate::runtime::Runtime;
use crate::vocabulary::Attachment;

const FILE_PARTS: [&str; 2] = ["input_image", "input_file"];

/// The stored attachments of the prompt.
pub async fn of_prompt(
    runtime: &Runtime,
    caller: &Caller,
    agent: &AgentSpec,
    input: Option<&Value>,
) -> Result<Vec<Attachment>, ApiError> {
    let Some(Value::Array(items)) = input else {
        return Ok(Vec::new());
    };
    let last = items.len().saturating_sub(1);
    let mut intake = AttachmentIntake::new(runtime, caller, agent);
    let mut stored = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let Some(Value::Array(parts)) = item.get("content") else {
            continue;
        };
        for (position, part) in parts.iter().enumerate() {
            let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
            if !FILE_PARTS.contains(&kind) {
                continue;
            }
            let at = format!("input[{index}].content[{position}]");
            if index != last {
                return Err(ApiError::invalid_request(format!(
                    "`{at}`: files are read on the last message only; continue a conversation \
                     with `previous_response_id`"
                ))
                .with_param(at));
            }
            stored.push(attachment_of(&mut intake, kind, part, &at).await?);
        }
    }
    Ok(stored)
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
            intake.url(url, &format!("{at}.image_url"), name).await
        }
        _ => match (field("file_data"), field("file_url")) {
            (Some(data), _) if data.starts_with("data:") => {
                intake.url(data, &format!("{at}.file_data"), name).await
            }
            (Some(data), _) => {
                let name = name.unwrap_or("file");
                intake
                    .base64(data, &format!("{at}.file_data"), None, name)
                    .await
            }
            (None, Some(url)) => intake.url(url, &format!("{at}.file_url"), name).await,
            (None, None) => Err(missing(at, "file_data")),
        },
    }
}

fn missing(at: &str, field: &str) -> ApiError {
    ApiError::invalid_request(format!("`{at}` has no `{field}`"))
        .with_param(format!("{at}.{field}"))
}
