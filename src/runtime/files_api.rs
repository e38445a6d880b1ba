//! What the Files API and the attachment intake read and change (SPEC §11): receiving a file
//! into the store (held to `limits.attachments`) and recording it, a file by id or as an
//! attachment, an owner's page of files, a file's content as a stream of its stored chunks
//! (never whole in memory), a PDF's text form and deleting a file. Who may read a file is the
//! route's (its caller).

use bytes::Bytes;
use futures_util::Stream;

use super::Runtime;
use crate::attachments::{self, AttachmentError, Received, RequestBudget};
use crate::store::{FileRecord, StoreError};
use crate::vocabulary::Attachment;

impl Runtime {
    /// Receives a file's chunks, found at request part `part`, into the store: hashed, its
    /// type sniffed, held to `limits.attachments` and to the request's `budget`.
    /// [`Self::save_file`] records it.
    pub async fn receive_file<S, E>(
        &self,
        chunks: S,
        part: &str,
        declared: Option<&str>,
        name: &str,
        budget: &mut RequestBudget,
    ) -> Result<Received, AttachmentError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let limits = &self.config().limits.attachments;
        attachments::receive(
            self.store.as_ref(),
            chunks,
            part,
            declared,
            name,
            limits,
            budget,
        )
        .await
    }

    /// [`Self::receive_file`] for content already in memory (inline base64, a fetched URL).
    pub async fn receive_file_bytes(
        &self,
        content: Bytes,
        part: &str,
        declared: Option<&str>,
        name: &str,
        budget: &mut RequestBudget,
    ) -> Result<Received, AttachmentError> {
        let limits = &self.config().limits.attachments;
        attachments::receive_bytes(
            self.store.as_ref(),
            content,
            part,
            declared,
            name,
            limits,
            budget,
        )
        .await
    }

    /// Records a received file as `owner`'s, with its `purpose`.
    pub async fn save_file(
        &self,
        owner: &str,
        name: &str,
        purpose: &str,
        received: Received,
    ) -> Result<FileRecord, AttachmentError> {
        attachments::save(self.store.as_ref(), owner, name, purpose, received).await
    }

    /// The file `file_id` as an attachment, when `may_read` says the caller may read it.
    pub async fn file_attachment(
        &self,
        file_id: &str,
        part: &str,
        may_read: impl Fn(&FileRecord) -> bool,
    ) -> Result<Attachment, AttachmentError> {
        attachments::from_file_id(self.store.as_ref(), file_id, part, may_read).await
    }

    /// `attachment` (a PDF found at `part`) with its content loaded and its text form, cut at
    /// `limits.attachments.maxExtractedTextBytes`.
    pub async fn with_text_form(
        &self,
        attachment: Attachment,
        part: &str,
    ) -> Result<Attachment, AttachmentError> {
        let max = self.config().limits.attachments.max_text_bytes();
        attachments::with_text_form(self.store.as_ref(), attachment, part, max).await
    }

    /// The file `id`, whoever owns it: the caller checks who may see it.
    pub async fn file(&self, id: &str) -> Result<Option<FileRecord>, StoreError> {
        self.store.file_by_id(id).await
    }

    /// The owner's files, newest first, at most `limit`, created before the file `before`.
    pub async fn files(
        &self,
        owner: &str,
        limit: u32,
        before: Option<&str>,
    ) -> Result<Vec<FileRecord>, StoreError> {
        self.store.list_files(owner, limit, before).await
    }

    /// The file's content, chunk after chunk as stored.
    pub fn file_content(
        &self,
        file: &FileRecord,
    ) -> impl Stream<Item = Result<Bytes, StoreError>> + Send + 'static + use<> {
        let store = self.store.clone();
        let sha256 = file.sha256.clone();
        async_stream::try_stream! {
            let mut seq = 0;
            while let Some(chunk) = store.blob_chunk(&sha256, seq).await? {
                yield Bytes::from(chunk);
                seq += 1;
            }
        }
    }

    /// Deletes the owner's file (its blob goes once no file names it); whether there was one.
    pub async fn delete_file(&self, owner: &str, id: &str) -> Result<bool, StoreError> {
        self.store.delete_file(owner, id).await
    }
}
