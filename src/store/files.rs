//! Attachments as the store keeps them (SPEC §11): content stored once per SHA-256 as a blob of
//! chunks, and per-owner file records (`file-…`) that name a blob. The store never looks inside
//! the bytes: hashing, sniffing and limits are [`crate::attachments`]'s. Every file query is
//! scoped by the owner id, except [`FileStore::file_by_id`], which the HTTP edge checks.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// About the bytes one row of `blob_chunks` holds: uploads are written, and downloads read, a
/// chunk at a time, so neither holds a whole file in memory or in one statement.
pub const BLOB_CHUNK_BYTES: usize = 1024 * 1024;

/// One file record: what the Files API shows and what an attachment names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// `file-` and a UUID.
    pub id: String,
    /// Its owner: a user id, `key:ID` for a key bound to no user, or empty on a server
    /// without keys.
    pub user_id: String,
    pub filename: String,
    /// OpenAI's `purpose` (`user_data`, `assistants`, `vision`, …) as the client gave it.
    pub purpose: String,
    /// The sniffed media type (never the declared one when the bytes say otherwise).
    pub media_type: String,
    pub bytes: u64,
    /// Lowercase hex SHA-256 of the content: the blob's key.
    pub sha256: String,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
pub trait FileStore: Send + Sync {
    /// Writes chunk `seq` of an upload in progress under its own key (`upload:…`): content is
    /// written as it arrives, before its SHA-256 is known.
    async fn put_upload_chunk(&self, upload: &str, seq: u32, data: &[u8])
    -> Result<(), StoreError>;
    /// Makes the upload's chunks the blob `sha256` of `bytes` bytes, or drops them when that
    /// blob is stored already (content is stored once); true when the blob is new. The caller
    /// has hashed the content: the store trusts `sha256`.
    async fn finish_upload(
        &self,
        upload: &str,
        sha256: &str,
        bytes: u64,
    ) -> Result<bool, StoreError>;
    /// Drops the chunks of an upload that was refused or broke off.
    async fn discard_upload(&self, upload: &str) -> Result<(), StoreError>;
    /// The keys of every upload with chunks still under its own key: in progress, or left by
    /// a process that died mid-upload.
    async fn uploads_with_chunks(&self) -> Result<Vec<String>, StoreError>;
    /// Chunk `seq` (from 0) of the blob, `None` past its end or for a blob not stored.
    async fn blob_chunk(&self, sha256: &str, seq: u32) -> Result<Option<Vec<u8>>, StoreError>;
    /// Records a file whose blob is stored.
    async fn create_file(&self, file: &FileRecord) -> Result<(), StoreError>;
    /// The file `id` whoever owns it: the caller checks who may see it.
    async fn file_by_id(&self, id: &str) -> Result<Option<FileRecord>, StoreError>;
    /// The owner's files, newest first, at most `limit`, created before the file `before`
    /// when given.
    async fn list_files(
        &self,
        user_id: &str,
        limit: u32,
        before: Option<&str>,
    ) -> Result<Vec<FileRecord>, StoreError>;
    /// Deletes the owner's file `id` and, when no other record names it, its blob; false when
    /// the owner has no such file.
    async fn delete_file(&self, user_id: &str, id: &str) -> Result<bool, StoreError>;
}

/// The whole content of a blob, chunk after chunk; `None` when it is not stored.
pub async fn read_blob(
    store: &(impl FileStore + ?Sized),
    sha256: &str,
) -> Result<Option<Vec<u8>>, StoreError> {
    let mut content = Vec::new();
    let mut seq = 0;
    while let Some(chunk) = store.blob_chunk(sha256, seq).await? {
        content.extend_from_slice(&chunk);
        seq += 1;
    }
    Ok((seq > 0).then_some(content))
}
