//! Statements and rows of `response_cache`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use crate::store::CacheEntry;

/// Marks a live entry used and returns it in one statement; matches nothing once expired.
pub const TOUCH_LIVE: &str = "UPDATE response_cache SET last_used_at = $2 \
     WHERE key = $1 AND expires_at > $2 RETURNING value, created_at, expires_at";

pub const DELETE_EXPIRED_KEY: &str =
    "DELETE FROM response_cache WHERE key = $1 AND expires_at <= $2";

pub const DELETE_ALL_EXPIRED: &str = "DELETE FROM response_cache WHERE expires_at <= $1";

pub const UPSERT: &str = "INSERT INTO response_cache (key, agent, value, created_at, expires_at, last_used_at) \
     VALUES ($1, $2, $3, $4, $5, $4) \
     ON CONFLICT (key) DO UPDATE SET agent = excluded.agent, value = excluded.value, \
     created_at = excluded.created_at, expires_at = excluded.expires_at, last_used_at = excluded.last_used_at";

pub const COUNT: &str = "SELECT COUNT(*) FROM response_cache";

/// Deletes the `$1` least recently used entries (ties broken by key, so both backends agree).
pub const EVICT_LEAST_RECENTLY_USED: &str = "DELETE FROM response_cache WHERE key IN \
     (SELECT key FROM response_cache ORDER BY last_used_at, key LIMIT $1)";

#[derive(sqlx::FromRow)]
pub struct CacheRow {
    value: Json<Value>,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
}

impl From<CacheRow> for CacheEntry {
    fn from(row: CacheRow) -> Self {
        Self {
            value: row.value.0,
            created_at: row.created_at,
            expires_at: row.expires_at,
        }
    }
}

/// Implements [`CacheStore`](crate::store::CacheStore) for a backend.
macro_rules! impl_cache_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::CacheStore for $store {
            async fn cache_get(
                &self,
                key: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<$crate::store::CacheEntry>, $crate::store::StoreError> {
                use $crate::store::sql::{at, cache as sql};
                let now = at(now);
                let live = sqlx::query_as::<_, sql::CacheRow>(sql::TOUCH_LIVE)
                    .bind(key)
                    .bind(now)
                    .fetch_optional(&self.writer)
                    .await?;
                if live.is_none() {
                    sqlx::query(sql::DELETE_EXPIRED_KEY)
                        .bind(key)
                        .bind(now)
                        .execute(&self.writer)
                        .await?;
                }
                Ok(live.map(Into::into))
            }

            async fn cache_put(
                &self,
                entry: &$crate::store::NewCacheEntry,
                now: chrono::DateTime<chrono::Utc>,
                max_entries: u64,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, cache as sql};
                let now = at(now);
                let mut tx = self.begin_write().await?;
                sqlx::query(sql::DELETE_ALL_EXPIRED)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(sql::UPSERT)
                    .bind(&entry.key)
                    .bind(&entry.agent)
                    .bind(sqlx::types::Json(&entry.value))
                    .bind(now)
                    .bind(at(entry.expires_at))
                    .execute(&mut *tx)
                    .await?;
                let count: i64 = sqlx::query_scalar(sql::COUNT).fetch_one(&mut *tx).await?;
                let max = i64::try_from(max_entries).unwrap_or(i64::MAX);
                if count > max {
                    sqlx::query(sql::EVICT_LEAST_RECENTLY_USED)
                        .bind(count - max)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(())
            }
        }
    };
}
pub(crate) use impl_cache_store;
