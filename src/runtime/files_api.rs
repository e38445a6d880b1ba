//! What the Files API reads and changes (SPEC §11): a file by id, an owner's page of files,
//! a file's content as a stream of its stored chunks (never whole in memory) and deleting one.
//! Who may read a file is the route's (its caller); files are stored by the attachment intake.

use bytes::Bytes;
use futures_util::Stream;

use super::Runtime;
use crate::store::{FileRecord, StoreError};

impl Runtime {
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
