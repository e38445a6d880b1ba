//! The Files API in OpenAI's shape, per owner (SPEC §11): `POST /v1/files` (multipart `file` and
//! `purpose`, read as a stream into the store), `GET /v1/files`, `GET /v1/files/{file_id}`,
//! `GET /v1/files/{file_id}/content` (streamed back a chunk at a time) and `DELETE`. A caller
//! sees its own files (its user's, or its key's for a key bound to no user); admins may read
//! and delete anyone's by id. Messages name these files by `file_id`.

pub mod wire;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Extension, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::TryStreamExt;

use crate::attachments::{self, Received, RequestBudget};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiPath, ApiQuery, ErrorBody};
use crate::http::shared::attachments::{may_read, owner_of};
use crate::http::wire::ListObject;
use crate::runtime::Runtime;
use crate::store::FileRecord;
use wire::{
    FileDeleted, FileList, FileListQuery, FileObject, FileObjectKind, FilePath, FileUpload,
};

/// The route uploads go to: its body is read as a stream under the attachment limits, not the
/// server's request body limit.
pub const UPLOAD_PATH: &str = "/v1/files";

/// Room for the multipart framing and the `purpose` field beside the file.
const FORM_OVERHEAD_BYTES: u64 = 64 * 1024;

/// The longest `purpose` and file name accepted.
const MAX_FIELD_CHARS: usize = 256;

/// The page size when `limit` is not given.
const DEFAULT_LIMIT: u32 = 100;

#[utoipa::path(
    post,
    path = "/v1/files",
    tag = "files",
    summary = "Upload a file (multipart `file` and `purpose`), stored once by its SHA-256",
    request_body(content = FileUpload, content_type = "multipart/form-data"),
    responses(
        (status = 200, description = "The stored file", body = FileObject),
        (status = 413, description = "The file is larger than `limits.attachments.maxFileBytes`"),
        (status = 415, description = "The content's sniffed media type is not allowed"),
        ErrorBody,
    ),
)]
pub async fn upload_file(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    request: Request,
) -> Result<Response, ApiError> {
    let boundary = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| multer::parse_boundary(value).ok())
        .ok_or_else(|| {
            ApiError::invalid_request(
                "Send the file as multipart/form-data with the fields `file` and `purpose`",
            )
            .with_param("file")
        })?;
    let limits = &runtime.config().limits.attachments;
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .whole_stream(limits.max_file_bytes.saturating_add(FORM_OVERHEAD_BYTES)),
    );
    let stream = request.into_body().into_data_stream();
    let mut form = multer::Multipart::with_constraints(stream, boundary, constraints);
    let mut budget = RequestBudget::new(limits);
    let mut file: Option<(String, Received)> = None;
    let mut purpose: Option<String> = None;
    while let Some(field) = form.next_field().await.map_err(form_error)? {
        match field.name() {
            Some("file") => {
                let name = field
                    .file_name()
                    .map(str::to_string)
                    .unwrap_or_else(|| "upload".into());
                check_field("file", &name)?;
                let declared = field.content_type().map(|m| m.essence_str().to_string());
                let chunks = field.map_err(|error| error.to_string());
                let received = runtime
                    .receive_file(chunks, "file", declared.as_deref(), &name, &mut budget)
                    .await
                    .map_err(|error| too_large_from_form(error, limits.max_file_bytes))?;
                file = Some((name, received));
            }
            Some("purpose") => {
                let text = field.text().await.map_err(form_error)?;
                check_field("purpose", &text)?;
                purpose = Some(text);
            }
            _ => {}
        }
    }
    let (name, received) = file.ok_or_else(|| {
        ApiError::invalid_request("The form has no `file` field").with_param("file")
    })?;
    let purpose = purpose.unwrap_or_else(|| attachments::INLINE_PURPOSE.to_string());
    let record = runtime
        .save_file(&owner_of(&caller), &name, &purpose, received)
        .await?;
    Ok(axum::Json(FileObject::from(&record)).into_response())
}

/// A form the multipart reader refused; past its size limit, 413 naming the file.
fn form_error(error: multer::Error) -> ApiError {
    match error {
        multer::Error::StreamSizeExceeded { limit }
        | multer::Error::FieldSizeExceeded { limit, .. } => {
            ApiError::from(attachments::AttachmentError::FileTooLarge {
                part: "file".into(),
                limit,
            })
        }
        other => ApiError::invalid_request(format!("The multipart form is malformed: {other}"))
            .with_param("file"),
    }
}

/// The multipart reader cuts the stream past the form's limit: that read error is the file
/// being too large.
fn too_large_from_form(error: attachments::AttachmentError, limit: u64) -> ApiError {
    match error {
        attachments::AttachmentError::Read { part, message } if message.contains("size limit") => {
            ApiError::from(attachments::AttachmentError::FileTooLarge { part, limit })
        }
        other => ApiError::from(other),
    }
}

fn check_field(field: &str, value: &str) -> Result<(), ApiError> {
    let length = value.chars().count();
    if length == 0 || length > MAX_FIELD_CHARS || value.contains('\0') {
        return Err(ApiError::invalid_request(format!(
            "`{field}` must be 1 to {MAX_FIELD_CHARS} characters without NUL"
        ))
        .with_param(field));
    }
    Ok(())
}

/// The file `file_id` if `caller` may read it; 404 otherwise (another's file is not there).
async fn readable_file(
    runtime: &Runtime,
    caller: &Caller,
    file_id: &str,
) -> Result<FileRecord, ApiError> {
    let file = runtime.file(file_id).await.map_err(ApiError::store)?;
    file.filter(|file| may_read(caller, file))
        .ok_or_else(|| ApiError::not_found(format!("No file {file_id:?}")).with_param("file_id"))
}

#[utoipa::path(
    get,
    path = "/v1/files",
    tag = "files",
    summary = "The caller's files, newest first",
    params(FileListQuery),
    responses(
        (status = 200, description = "A page of files", body = FileList),
        ErrorBody,
    ),
)]
pub async fn list_files(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiQuery(query): ApiQuery<FileListQuery>,
) -> Result<Response, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=crate::store::MAX_PAGE_SIZE).contains(&limit) {
        return Err(ApiError::invalid_request("`limit` is 1 to 1000").with_param("limit"));
    }
    let owner = owner_of(&caller);
    let mut files = runtime
        // One more than the page tells whether another follows (within the store's page size).
        .files(
            &owner,
            (limit + 1).min(crate::store::MAX_PAGE_SIZE),
            query.after.as_deref().filter(|after| !after.is_empty()),
        )
        .await
        .map_err(ApiError::store)?;
    let has_more = files.len() > limit as usize;
    files.truncate(limit as usize);
    Ok(axum::Json(FileList {
        object: ListObject::List,
        first_id: files.first().map(|f| f.id.clone()),
        last_id: files.last().map(|f| f.id.clone()),
        data: files.iter().map(FileObject::from).collect(),
        has_more,
    })
    .into_response())
}

#[utoipa::path(
    get,
    path = "/v1/files/{file_id}",
    tag = "files",
    summary = "One file's metadata",
    params(FilePath),
    responses(
        (status = 200, description = "The file", body = FileObject),
        ErrorBody,
    ),
)]
pub async fn get_file(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(FilePath { file_id }): ApiPath<FilePath>,
) -> Result<Response, ApiError> {
    let file = readable_file(&runtime, &caller, &file_id).await?;
    Ok(axum::Json(FileObject::from(&file)).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/files/{file_id}/content",
    tag = "files",
    summary = "A file's content, with its sniffed media type",
    params(FilePath),
    responses(
        (status = 200, description = "The bytes, served as the media type sniffed at upload (one of `limits.attachments.mediaTypes`)", content_type = "*/*", body = Vec<u8>),
        ErrorBody,
    ),
)]
pub async fn file_content(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(FilePath { file_id }): ApiPath<FilePath>,
) -> Result<Response, ApiError> {
    let file = readable_file(&runtime, &caller, &file_id).await?;
    let chunks = runtime
        .file_content(&file)
        .map_err(|error: crate::store::StoreError| std::io::Error::other(error));
    let mut response = Response::new(Body::from_stream(chunks));
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&file.media_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(file.bytes));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(response)
}

#[utoipa::path(
    delete,
    path = "/v1/files/{file_id}",
    tag = "files",
    summary = "Delete a file (its content too, when no other file has the same)",
    params(FilePath),
    responses(
        (status = 200, description = "Deleted", body = FileDeleted),
        ErrorBody,
    ),
)]
pub async fn delete_file(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(FilePath { file_id }): ApiPath<FilePath>,
) -> Result<Response, ApiError> {
    let file = readable_file(&runtime, &caller, &file_id).await?;
    let deleted = runtime
        .delete_file(&file.user_id, &file.id)
        .await
        .map_err(ApiError::store)?;
    if !deleted {
        return Err(ApiError::not_found(format!("No file {file_id:?}")).with_param("file_id"));
    }
    let body = FileDeleted {
        id: file.id,
        object: FileObjectKind::File,
        deleted: true,
    };
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}
