//! Statements and rows of `user_secrets`; see [`SecretStore`](crate::store::SecretStore).

use chrono::{DateTime, Utc};

use crate::store::{SealedSecret, SecretName};

pub const UPSERT: &str = "INSERT INTO user_secrets (user_id, name, nonce, ciphertext, updated_at) \
     VALUES ($1, $2, $3, $4, $5) \
     ON CONFLICT (user_id, name) DO UPDATE SET nonce = excluded.nonce, \
     ciphertext = excluded.ciphertext, updated_at = excluded.updated_at";

pub const SELECT: &str = "SELECT user_id, name, nonce, ciphertext, updated_at \
     FROM user_secrets WHERE user_id = $1 AND name = $2";

pub const LIST: &str = "SELECT name, updated_at FROM user_secrets WHERE user_id = $1 ORDER BY name";

pub const DELETE: &str = "DELETE FROM user_secrets WHERE user_id = $1 AND name = $2";

#[derive(sqlx::FromRow)]
pub struct SecretRow {
    user_id: String,
    name: String,
    nonce: Vec<u8>,
    ciphertext: Vec<u8>,
    updated_at: DateTime<Utc>,
}

impl From<SecretRow> for SealedSecret {
    fn from(row: SecretRow) -> Self {
        Self {
            user_id: row.user_id,
            name: row.name,
            nonce: row.nonce,
            ciphertext: row.ciphertext,
            updated_at: row.updated_at,
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct NameRow {
    name: String,
    updated_at: DateTime<Utc>,
}

impl From<NameRow> for SecretName {
    fn from(row: NameRow) -> Self {
        Self {
            name: row.name,
            updated_at: row.updated_at,
        }
    }
}

/// Implements [`SecretStore`](crate::store::SecretStore) for a backend.
macro_rules! impl_secret_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::SecretStore for $store {
            async fn put_secret(
                &self,
                secret: &$crate::store::SealedSecret,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, secrets as sql};
                sqlx::query(sql::UPSERT)
                    .bind(&secret.user_id)
                    .bind(&secret.name)
                    .bind(&secret.nonce)
                    .bind(&secret.ciphertext)
                    .bind(at(secret.updated_at))
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn get_secret(
                &self,
                user_id: &str,
                name: &str,
            ) -> Result<Option<$crate::store::SealedSecret>, $crate::store::StoreError> {
                use $crate::store::sql::secrets as sql;
                let row = sqlx::query_as::<_, sql::SecretRow>(sql::SELECT)
                    .bind(user_id)
                    .bind(name)
                    .fetch_optional(&self.reader)
                    .await?;
                Ok(row.map(Into::into))
            }

            async fn list_secrets(
                &self,
                user_id: &str,
            ) -> Result<Vec<$crate::store::SecretName>, $crate::store::StoreError> {
                use $crate::store::sql::secrets as sql;
                let rows = sqlx::query_as::<_, sql::NameRow>(sql::LIST)
                    .bind(user_id)
                    .fetch_all(&self.reader)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn delete_secret(
                &self,
                user_id: &str,
                name: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::secrets as sql;
                let done = sqlx::query(sql::DELETE)
                    .bind(user_id)
                    .bind(name)
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
        }
    };
}
pub(crate) use impl_secret_store;
