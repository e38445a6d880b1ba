//! Per-user chat as `multipart/form-data` (SPEC §11): a text part for each field of the JSON
//! chat body (`message`, and optionally `conversation_id`, `agent`, `stream`, `on_disconnect`,
//! `replace_from`, `busy`) and `file` parts, repeated for several files. Each file streams into the store as it arrives,
//! under the same per-file, per-request and media-type limits as the JSON `attachments` (413 /
//! 415 naming `file[0]`, `file[1]`…), and is recorded as the caller's file exactly as an inline
//! attachment is. The route's handler checks that the agent's models read them.

use axum::extract::Request;
use axum::http::{HeaderMap, header};
use futures_util::TryStreamExt;
use serde_json::{Map, Value};

use crate::attachments::{AttachmentError, INLINE_PURPOSE, RequestBudget};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, parse_json_body};
use crate::http::shared::attachments::owner_of;
use crate::runtime::Runtime;
use crate::vocabulary::Attachment;

use super::wire::ChatRequest;

/// The part holding the user's message.
pub const MESSAGE_PART: &str = "message";
/// The part name of each file.
pub const FILE_PART: &str = "file";

/// How a text part becomes a field of the JSON chat body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldKind {
    Text,
    Boolean,
    Integer,
}

/// The chat body's fields a form may give, each as its own text part.
const TEXT_FIELDS: [(&str, FieldKind); 7] = [
    (MESSAGE_PART, FieldKind::Text),
    ("conversation_id", FieldKind::Text),
    ("agent", FieldKind::Text),
    ("stream", FieldKind::Boolean),
    ("on_disconnect", FieldKind::Text),
    ("replace_from", FieldKind::Integer),
    ("busy", FieldKind::Text),
];

/// Room for the multipart framing around the parts.
const FORM_OVERHEAD_BYTES: u64 = 64 * 1024;

/// A file of the form, stored, with the part it came in (`file[0]`…).
pub struct FormFile {
    pub attachment: Attachment,
    pub part: String,
}

/// The chat body and the files a multipart form carried.
pub struct FormChat {
    pub request: ChatRequest,
    pub files: Vec<FormFile>,
    /// What the files used of the request's attachment limit (JSON `attachments` take the rest).
    pub budget: RequestBudget,
}

/// Whether the request's body is `multipart/form-data`.
pub fn is_multipart(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("multipart/form-data"))
}

/// Reads the form: its text parts into the chat body, its files into the store.
pub async fn read(
    runtime: &Runtime,
    caller: &Caller,
    request: Request,
) -> Result<FormChat, ApiError> {
    let boundary = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| multer::parse_boundary(value).ok())
        .ok_or_else(|| {
            ApiError::invalid_request("The multipart/form-data body has no boundary")
                .with_param(MESSAGE_PART)
        })?;
    let limits = &runtime.config().limits.attachments;
    let text_limit = runtime.config().server.request_body_limit_bytes as u64;
    let mut allowed: Vec<&str> = TEXT_FIELDS.iter().map(|(name, _)| *name).collect();
    allowed.push(FILE_PART);
    let size_limit = TEXT_FIELDS.iter().fold(
        multer::SizeLimit::new().whole_stream(
            limits
                .max_request_bytes
                .saturating_add(text_limit.saturating_mul(TEXT_FIELDS.len() as u64))
                .saturating_add(FORM_OVERHEAD_BYTES),
        ),
        |size_limit, (name, _)| size_limit.for_field(*name, text_limit),
    );
    let constraints = multer::Constraints::new()
        .allowed_fields(allowed)
        .size_limit(size_limit);
    let stream = request.into_body().into_data_stream();
    let mut form = multer::Multipart::with_constraints(stream, boundary, constraints);
    let mut budget = RequestBudget::new(limits);
    let mut body = Map::new();
    let mut files = Vec::new();
    let read = read_parts(
        runtime,
        caller,
        &mut form,
        &mut body,
        &mut files,
        &mut budget,
    )
    .await;
    let request = read.and_then(|()| chat_request(body, !files.is_empty()));
    match request {
        Ok(request) => Ok(FormChat {
            request,
            files,
            budget,
        }),
        Err(error) => {
            forget(runtime, caller, &files).await;
            Err(error)
        }
    }
}

/// Removes the files a form stored for a message that is not answered (a later part or the
/// message was refused): a refused request leaves no file behind.
pub async fn forget(runtime: &Runtime, caller: &Caller, files: &[FormFile]) {
    let owner = owner_of(caller);
    for file in files {
        let id = &file.attachment.file_id;
        if let Err(error) = runtime.delete_file(&owner, id).await {
            tracing::warn!(%error, file = %id, "a refused form's file remains");
        }
    }
}

/// Reads every part: text parts into `body`, files into the store and `files`.
async fn read_parts(
    runtime: &Runtime,
    caller: &Caller,
    form: &mut multer::Multipart<'_>,
    body: &mut Map<String, Value>,
    files: &mut Vec<FormFile>,
    budget: &mut RequestBudget,
) -> Result<(), ApiError> {
    while let Some(field) = form.next_field().await.map_err(|e| form_error(e, None))? {
        let name = field.name().unwrap_or_default().to_string();
        match TEXT_FIELDS.iter().find(|(field, _)| *field == name) {
            Some((_, kind)) => {
                let text = field.text().await.map_err(|e| form_error(e, Some(&name)))?;
                let value = field_value(&name, *kind, text)?;
                if body.insert(name.clone(), value).is_some() {
                    return Err(twice(&name));
                }
            }
            None => {
                let part = format!("{FILE_PART}[{}]", files.len());
                let attachment = receive_file(runtime, caller, field, &part, budget).await?;
                files.push(FormFile { attachment, part });
            }
        }
    }
    Ok(())
}

/// One file part, streamed into the store and recorded as the caller's file.
async fn receive_file(
    runtime: &Runtime,
    caller: &Caller,
    field: multer::Field<'_>,
    part: &str,
    budget: &mut RequestBudget,
) -> Result<Attachment, ApiError> {
    let limits = &runtime.config().limits.attachments;
    let name = field
        .file_name()
        .filter(|name| !name.is_empty())
        .map_or_else(|| "attachment".to_string(), str::to_string);
    if name.chars().count() > 256 || name.contains('\0') {
        return Err(ApiError::invalid_request(format!(
            "`{part}`'s file name must be at most 256 characters without NUL"
        ))
        .with_param(part));
    }
    let declared = field.content_type().map(|m| m.essence_str().to_string());
    let chunks = field.map_err(|error| error.to_string());
    let received = runtime
        .receive_file(chunks, part, declared.as_deref(), &name, budget)
        .await
        .map_err(|error| past_the_form_limit(error, limits.max_request_bytes))?;
    let file = runtime
        .save_file(&owner_of(caller), &name, INLINE_PURPOSE, received)
        .await?;
    Ok(Attachment::from(&file))
}

/// A text part as the JSON value of its field: `true`/`false` for a flag, a number for a number.
fn field_value(name: &str, kind: FieldKind, text: String) -> Result<Value, ApiError> {
    let invalid = |what: &str| {
        ApiError::invalid_request(format!("The `{name}` part must be {what}")).with_param(name)
    };
    match kind {
        FieldKind::Text => Ok(Value::String(text)),
        FieldKind::Boolean => match text.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(invalid("`true` or `false`")),
        },
        FieldKind::Integer => text
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| invalid("a whole number")),
    }
}

/// The chat body the form's text parts make; a form of files alone may leave out `message`.
fn chat_request(body: Map<String, Value>, has_files: bool) -> Result<ChatRequest, ApiError> {
    if !body.contains_key(MESSAGE_PART) && !has_files {
        return Err(ApiError::invalid_request(
            "The form has no `message` part (the user's message)",
        )
        .with_param(MESSAGE_PART));
    }
    let bytes = serde_json::to_vec(&Value::Object(body)).map_err(|_| ApiError::internal())?;
    parse_json_body(&bytes)
}

fn twice(part: &str) -> ApiError {
    ApiError::invalid_request(format!("The form gives `{part}` more than once")).with_param(part)
}

/// A form the multipart reader refused: a text part past its limit is 413 naming it, an
/// unknown part 400 naming it, anything else 400.
fn form_error(error: multer::Error, part: Option<&str>) -> ApiError {
    match error {
        multer::Error::FieldSizeExceeded { limit, field_name } => {
            let mut error = ApiError::payload_too_large(usize::try_from(limit).ok());
            error.param = field_name.or(part.map(str::to_string));
            error
        }
        multer::Error::StreamSizeExceeded { limit } => {
            ApiError::payload_too_large(usize::try_from(limit).ok()).with_param(FILE_PART)
        }
        multer::Error::UnknownField { field_name } => {
            let name = field_name.unwrap_or_default();
            let known: Vec<&str> = TEXT_FIELDS.iter().map(|(field, _)| *field).collect();
            ApiError::invalid_request(format!(
                "The form has a part `{name}`; it takes `{FILE_PART}` parts and the text parts {}",
                known.join(", ")
            ))
            .with_param(name)
        }
        other => ApiError::invalid_request(format!("The multipart form is malformed: {other}"))
            .with_param(part.unwrap_or(FILE_PART)),
    }
}

/// The multipart reader cuts the stream past the whole form's limit while a file streams:
/// that is the request's files being too large, at this part.
fn past_the_form_limit(error: AttachmentError, limit: u64) -> ApiError {
    match error {
        AttachmentError::Read { part, message } if message.contains("size limit") => {
            ApiError::from(AttachmentError::RequestTooLarge { part, limit })
        }
        other => ApiError::from(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_multipart_form_data_is_a_form() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            "multipart/form-data; boundary=x".parse().expect("value"),
        );
        assert!(is_multipart(&headers));
        headers.insert(
            header::CONTENT_TYPE,
            "application/json".parse().expect("value"),
        );
        assert!(!is_multipart(&headers));
        assert!(!is_multipart(&HeaderMap::new()));
    }

    #[test]
    fn text_parts_make_the_chat_body_naming_a_bad_one() {
        let mut body = Map::new();
        for (name, kind, text) in [
            ("message", FieldKind::Text, "hello"),
            ("agent", FieldKind::Text, "chat"),
            ("stream", FieldKind::Boolean, "True"),
            ("replace_from", FieldKind::Integer, " 3 "),
        ] {
            let value = field_value(name, kind, text.into()).expect("value");
            body.insert(name.into(), value);
        }
        let request = chat_request(body, false).expect("body");
        assert_eq!(request.message, "hello");
        assert_eq!(request.agent.as_deref(), Some("chat"));
        assert_eq!(request.stream, Some(true));
        assert_eq!(request.replace_from, Some(3));
        let bad = field_value("stream", FieldKind::Boolean, "yes".into());
        assert_eq!(bad.err().and_then(|e| e.param).as_deref(), Some("stream"));
        let bad = field_value("replace_from", FieldKind::Integer, "x".into());
        assert_eq!(
            bad.err().and_then(|e| e.param).as_deref(),
            Some("replace_from")
        );
        let none = chat_request(Map::new(), false);
        assert_eq!(none.err().and_then(|e| e.param).as_deref(), Some("message"));
        let files_alone = chat_request(Map::new(), true).expect("files make the message");
        assert_eq!(files_alone.message, "");
        let mut wrong = Map::new();
        wrong.insert("message".into(), Value::String("x".into()));
        wrong.insert("on_disconnect".into(), Value::String("never".into()));
        let wrong = chat_request(wrong, false);
        assert_eq!(
            wrong.err().and_then(|e| e.param).as_deref(),
            Some("on_disconnect")
        );
    }
}
