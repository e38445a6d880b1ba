//! The Files API's bodies in OpenAI's shape (`file` objects, lists, deletions), with agentd's
//! additions: the sniffed `media_type` and the content's `sha256`.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::http::wire::{ListObject, string_constant};
use crate::store::FileRecord;

string_constant!(
    /// `"file"`.
    FileObjectKind::File = "file"
);

string_constant!(
    /// `"processed"`: a file is usable as soon as its upload is answered.
    FileStatus::Processed = "processed"
);

/// One file (OpenAI's `FileObject`).
#[derive(Debug, Serialize, ToSchema)]
pub struct FileObject {
    /// `file-` and 32 hex digits.
    pub id: String,
    pub object: FileObjectKind,
    /// Its size in bytes.
    pub bytes: u64,
    /// Unix seconds.
    pub created_at: i64,
    pub filename: String,
    /// As given at upload (`user_data`, `assistants`, `vision`, …).
    pub purpose: String,
    pub status: FileStatus,
    /// The media type sniffed from the content (agentd).
    pub media_type: String,
    /// Lowercase hex SHA-256 of the content (agentd).
    pub sha256: String,
}

impl From<&FileRecord> for FileObject {
    fn from(file: &FileRecord) -> Self {
        Self {
            id: file.id.clone(),
            object: FileObjectKind::File,
            bytes: file.bytes,
            created_at: file.created_at.timestamp(),
            filename: file.filename.clone(),
            purpose: file.purpose.clone(),
            status: FileStatus::Processed,
            media_type: file.media_type.clone(),
            sha256: file.sha256.clone(),
        }
    }
}

/// A page of the caller's files, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct FileList {
    pub object: ListObject,
    pub data: Vec<FileObject>,
    #[schema(required)]
    pub first_id: Option<String>,
    #[schema(required)]
    pub last_id: Option<String>,
    /// Whether older files follow: ask again with `after` = `last_id`.
    pub has_more: bool,
}

/// An answer to `DELETE /v1/files/{file_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FileDeleted {
    pub id: String,
    pub object: FileObjectKind,
    pub deleted: bool,
}

/// `POST /v1/files`: a `multipart/form-data` body (documented; read as a stream).
#[derive(ToSchema)]
#[expect(
    dead_code,
    reason = "a schema only: the body is read as a multipart stream"
)]
pub struct FileUpload {
    /// The file's content, with its file name and declared content type.
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
    /// OpenAI's `purpose`, kept as given: `user_data`, `assistants`, `vision`, …
    #[schema(min_length = 1, max_length = 256)]
    pub purpose: String,
}

/// The `{file_id}` of a file's routes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct FilePath {
    #[param(pattern = r"^file-[A-Za-z0-9]{1,64}$")]
    pub file_id: String,
}

/// The paging of `GET /v1/files`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FileListQuery {
    /// Page size, 1 to 1000; 100 by default.
    #[serde(default)]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `last_id` of the previous page: files older than that one.
    #[serde(default)]
    pub after: Option<String>,
}
