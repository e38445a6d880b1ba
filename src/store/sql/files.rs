//! Statements and rows of `blobs`, `blob_chunks` and `files`; see
//! [`FileStore`](crate::store::FileStore).

use chrono::{DateTime, Utc};

use crate::store::FileRecord;

pub const INSERT_BLOB: &str =
    "INSERT INTO blobs (sha256, bytes, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";

/// An upload's chunk, under the upload's own key until its hash is known.
pub const INSERT_CHUNK: &str = "INSERT INTO blob_chunks (sha256, seq, data) VALUES ($1, $2, $3)";

/// The uploads whose chunks are still under their own key (`upload:…`), as a key range the
/// primary key serves (`;` follows `:`).
pub const UPLOAD_KEYS: &str = "SELECT DISTINCT sha256 FROM blob_chunks \
     WHERE sha256 >= 'upload:' AND sha256 < 'upload;'";

/// The upload's chunks become the new blob's.
pub const ADOPT_CHUNKS: &str = "UPDATE blob_chunks SET sha256 = $2 WHERE sha256 = $1";

pub const SELECT_CHUNK: &str = "SELECT data FROM blob_chunks WHERE sha256 = $1 AND seq = $2";

pub const INSERT_FILE: &str = "INSERT INTO files \
     (id, user_id, filename, purpose, media_type, bytes, sha256, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

const COLUMNS: &str = "id, user_id, filename, purpose, media_type, bytes, sha256, created_at";

pub fn select_file() -> String {
    format!("SELECT {COLUMNS} FROM files WHERE id = $1")
}

pub fn list_files() -> String {
    format!(
        "SELECT {COLUMNS} FROM files WHERE user_id = $1 \
         ORDER BY created_at DESC, id DESC LIMIT $2"
    )
}

pub fn list_files_before() -> String {
    format!(
        "SELECT {COLUMNS} FROM files WHERE user_id = $1 AND (created_at, id) < \
         (SELECT created_at, id FROM files WHERE id = $3) \
         ORDER BY created_at DESC, id DESC LIMIT $2"
    )
}

pub const DELETE_FILE: &str = "DELETE FROM files WHERE user_id = $1 AND id = $2 RETURNING sha256";

pub const BLOB_NAMED: &str = "SELECT 1 FROM files WHERE sha256 = $1 LIMIT 1";

pub const DELETE_CHUNKS: &str = "DELETE FROM blob_chunks WHERE sha256 = $1";

pub const DELETE_BLOB: &str = "DELETE FROM blobs WHERE sha256 = $1";

#[derive(sqlx::FromRow)]
pub struct FileRow {
    id: String,
    user_id: String,
    filename: String,
    purpose: String,
    media_type: String,
    bytes: i64,
    sha256: String,
    created_at: DateTime<Utc>,
}

impl From<FileRow> for FileRecord {
    fn from(row: FileRow) -> Self {
        Self {
            id: row.id,
            user_id: row.user_id,
            filename: row.filename,
            purpose: row.purpose,
            media_type: row.media_type,
            bytes: u64::try_from(row.bytes).unwrap_or_default(),
            sha256: row.sha256,
            created_at: row.created_at,
        }
    }
}

/// A byte count as the store's signed 64-bit column holds it.
pub fn byte_count(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// Implements [`FileStore`](crate::store::FileStore) for a backend.
macro_rules! impl_file_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::FileStore for $store {
            async fn put_upload_chunk(
                &self,
                upload: &str,
                seq: u32,
                data: &[u8],
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::files as sql;
                sqlx::query(sql::INSERT_CHUNK)
                    .bind(upload)
                    .bind(i32::try_from(seq).unwrap_or(i32::MAX))
                    .bind(data)
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn finish_upload(
                &self,
                upload: &str,
                sha256: &str,
                bytes: u64,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{at, files as sql};
                let mut tx = self.begin_write().await?;
                let inserted = sqlx::query(sql::INSERT_BLOB)
                    .bind(sha256)
                    .bind(sql::byte_count(bytes))
                    .bind(at(chrono::Utc::now()))
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
                    > 0;
                let statement = if inserted {
                    sql::ADOPT_CHUNKS
                } else {
                    sql::DELETE_CHUNKS
                };
                let mut query = sqlx::query(statement).bind(upload);
                if inserted {
                    query = query.bind(sha256);
                }
                query.execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(inserted)
            }

            async fn discard_upload(&self, upload: &str) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::files as sql;
                sqlx::query(sql::DELETE_CHUNKS)
                    .bind(upload)
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn uploads_with_chunks(&self) -> Result<Vec<String>, $crate::store::StoreError> {
                use $crate::store::sql::files as sql;
                let keys: Vec<(String,)> = sqlx::query_as(sql::UPLOAD_KEYS)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(keys.into_iter().map(|(key,)| key).collect())
            }

            async fn blob_chunk(
                &self,
                sha256: &str,
                seq: u32,
            ) -> Result<Option<Vec<u8>>, $crate::store::StoreError> {
                use $crate::store::sql::files as sql;
                let seq = i32::try_from(seq).unwrap_or(i32::MAX);
                let row: Option<(Vec<u8>,)> = sqlx::query_as(sql::SELECT_CHUNK)
                    .bind(sha256)
                    .bind(seq)
                    .fetch_optional(&self.reader)
                    .await?;
                Ok(row.map(|(data,)| data))
            }

            async fn create_file(
                &self,
                file: &$crate::store::FileRecord,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, conflict_or_query, files as sql};
                sqlx::query(sql::INSERT_FILE)
                    .bind(&file.id)
                    .bind(&file.user_id)
                    .bind(&file.filename)
                    .bind(&file.purpose)
                    .bind(&file.media_type)
                    .bind(sql::byte_count(file.bytes))
                    .bind(&file.sha256)
                    .bind(at(file.created_at))
                    .execute(&self.writer)
                    .await
                    .map_err(|error| conflict_or_query(error, "file", &file.id))?;
                Ok(())
            }

            async fn file_by_id(
                &self,
                id: &str,
            ) -> Result<Option<$crate::store::FileRecord>, $crate::store::StoreError> {
                use $crate::store::sql::files as sql;
                let row =
                    sqlx::query_as::<_, sql::FileRow>(sqlx::AssertSqlSafe(sql::select_file()))
                        .bind(id)
                        .fetch_optional(&self.reader)
                        .await?;
                Ok(row.map(Into::into))
            }

            async fn list_files(
                &self,
                user_id: &str,
                limit: u32,
                before: Option<&str>,
            ) -> Result<Vec<$crate::store::FileRecord>, $crate::store::StoreError> {
                use $crate::store::sql::files as sql;
                let limit = $crate::store::check_page_size(limit)?;
                let statement = match before {
                    Some(_) => sql::list_files_before(),
                    None => sql::list_files(),
                };
                let mut query = sqlx::query_as::<_, sql::FileRow>(sqlx::AssertSqlSafe(statement))
                    .bind(user_id)
                    .bind(limit);
                if let Some(before) = before {
                    query = query.bind(before);
                }
                let rows = query.fetch_all(&self.reader).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn delete_file(
                &self,
                user_id: &str,
                id: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::files as sql;
                let mut tx = self.begin_write().await?;
                let deleted: Option<(String,)> = sqlx::query_as(sql::DELETE_FILE)
                    .bind(user_id)
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some((sha256,)) = deleted else {
                    return Ok(false);
                };
                let named = sqlx::query(sql::BLOB_NAMED)
                    .bind(&sha256)
                    .fetch_optional(&mut *tx)
                    .await?;
                if named.is_none() {
                    for statement in [sql::DELETE_CHUNKS, sql::DELETE_BLOB] {
                        sqlx::query(statement)
                            .bind(&sha256)
                            .execute(&mut *tx)
                            .await?;
                    }
                }
                tx.commit().await?;
                Ok(true)
            }
        }
    };
}
pub(crate) use impl_file_store;
