//! Statements and rows of `api_keys`; see [`ApiKeyStore`](crate::store::ApiKeyStore).

use chrono::{DateTime, Utc};

use crate::store::StoredApiKey;

macro_rules! select_keys {
    ($rest:literal) => {
        concat!(
            "SELECT id, name, user_id, created_by, secret_hash, prefix, scopes, limits, \
             created_at, expires_at, rotated_at, revoked_at FROM api_keys ",
            $rest
        )
    };
}

pub const INSERT: &str = "INSERT INTO api_keys (id, name, user_id, created_by, secret_hash, \
     prefix, scopes, limits, created_at, expires_at, rotated_at, revoked_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

pub const BY_HASH: &str = select_keys!("WHERE secret_hash = $1");

pub const BY_ID: &str = select_keys!("WHERE id = $1");

pub const OF_USER: &str =
    select_keys!("WHERE user_id = $1 AND revoked_at IS NULL ORDER BY created_at DESC, id");

pub const ALL: &str = select_keys!("WHERE revoked_at IS NULL ORDER BY created_at DESC, id");

pub const ROTATE: &str = "UPDATE api_keys SET secret_hash = $2, prefix = $3, rotated_at = $4 \
     WHERE id = $1 AND revoked_at IS NULL";

pub const REVOKE: &str = "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL";

#[derive(sqlx::FromRow)]
pub struct ApiKeyRow {
    id: String,
    name: String,
    user_id: Option<String>,
    created_by: String,
    secret_hash: String,
    prefix: String,
    scopes: String,
    limits: Option<String>,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    rotated_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
}

impl From<ApiKeyRow> for StoredApiKey {
    fn from(row: ApiKeyRow) -> Self {
        Self {
            id: row.id,
            name: row.name,
            user_id: row.user_id,
            created_by: row.created_by,
            secret_hash: row.secret_hash,
            prefix: row.prefix,
            scopes: row.scopes,
            limits: row.limits,
            created_at: row.created_at,
            expires_at: row.expires_at,
            rotated_at: row.rotated_at,
            revoked_at: row.revoked_at,
        }
    }
}

/// Implements [`ApiKeyStore`](crate::store::ApiKeyStore) for a backend.
macro_rules! impl_api_key_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ApiKeyStore for $store {
            async fn insert_api_key(
                &self,
                key: &$crate::store::StoredApiKey,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{api_keys as sql, at, conflict_or_query};
                sqlx::query(sql::INSERT)
                    .bind(&key.id)
                    .bind(&key.name)
                    .bind(&key.user_id)
                    .bind(&key.created_by)
                    .bind(&key.secret_hash)
                    .bind(&key.prefix)
                    .bind(&key.scopes)
                    .bind(&key.limits)
                    .bind(at(key.created_at))
                    .bind(key.expires_at.map(at))
                    .bind(key.rotated_at.map(at))
                    .bind(key.revoked_at.map(at))
                    .execute(&self.writer)
                    .await
                    .map_err(|error| conflict_or_query(error, "key", &key.id))?;
                Ok(())
            }

            async fn api_key_by_hash(
                &self,
                secret_hash: &str,
            ) -> Result<Option<$crate::store::StoredApiKey>, $crate::store::StoreError> {
                use $crate::store::sql::api_keys as sql;
                let row = sqlx::query_as::<_, sql::ApiKeyRow>(sql::BY_HASH)
                    .bind(secret_hash)
                    .fetch_optional(&self.reader)
                    .await?;
                Ok(row.map(Into::into))
            }

            async fn api_key(
                &self,
                id: &str,
            ) -> Result<Option<$crate::store::StoredApiKey>, $crate::store::StoreError> {
                use $crate::store::sql::api_keys as sql;
                let row = sqlx::query_as::<_, sql::ApiKeyRow>(sql::BY_ID)
                    .bind(id)
                    .fetch_optional(&self.reader)
                    .await?;
                Ok(row.map(Into::into))
            }

            async fn list_api_keys(
                &self,
                user_id: Option<&str>,
            ) -> Result<Vec<$crate::store::StoredApiKey>, $crate::store::StoreError> {
                use $crate::store::sql::api_keys as sql;
                let rows = match user_id {
                    Some(user) => {
                        sqlx::query_as::<_, sql::ApiKeyRow>(sql::OF_USER)
                            .bind(user)
                            .fetch_all(&self.reader)
                            .await?
                    }
                    None => {
                        sqlx::query_as::<_, sql::ApiKeyRow>(sql::ALL)
                            .fetch_all(&self.reader)
                            .await?
                    }
                };
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn rotate_api_key(
                &self,
                rotation: &$crate::store::Rotation<'_>,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{api_keys as sql, at};
                let done = sqlx::query(sql::ROTATE)
                    .bind(rotation.id)
                    .bind(rotation.secret_hash)
                    .bind(rotation.prefix)
                    .bind(at(rotation.at))
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn revoke_api_key(
                &self,
                id: &str,
                revoked_at: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{api_keys as sql, at};
                let done = sqlx::query(sql::REVOKE)
                    .bind(id)
                    .bind(at(revoked_at))
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
        }
    };
}
pub(crate) use impl_api_key_store;
