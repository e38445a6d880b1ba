//! Statements and rows of `audit` and its lock row `audit_head`; see
//! [`AuditStore`](crate::store::AuditStore).

use chrono::{DateTime, Utc};

use crate::store::{AuditEntry, NewAuditEntry};

/// Takes the lock row (PostgreSQL: a row lock held to commit; SQLite: the write lock the
/// transaction already holds) and hands out the next place in the chain with the hash before it.
pub const TAKE_HEAD: &str = "UPDATE audit_head SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash";
pub const SET_HEAD_HASH: &str = "UPDATE audit_head SET hash = $1 WHERE id = 1";
pub const HEAD: &str = "SELECT seq, hash FROM audit_head WHERE id = 1";
pub const INSERT: &str = "INSERT INTO audit (seq, at, actor_user, actor_key, action, target, \
     request_id, outcome, details, prev_hash, hash) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
pub const LIST: &str = "SELECT seq, at, actor_user, actor_key, action, target, request_id, \
     outcome, details, prev_hash, hash FROM audit \
     WHERE seq > $1 AND ($2 IS NULL OR at >= $2) AND ($3 IS NULL OR at < $3) \
     AND ($4 IS NULL OR actor_user = $4 OR actor_key = $4) AND ($5 IS NULL OR action = $5) \
     ORDER BY seq LIMIT $6";
pub const DELETE_BEFORE: &str = "DELETE FROM audit WHERE seq IN \
     (SELECT seq FROM audit WHERE at < $1 ORDER BY seq LIMIT $2)";

#[derive(sqlx::FromRow)]
pub struct AuditRow {
    seq: i64,
    at: DateTime<Utc>,
    actor_user: Option<String>,
    actor_key: Option<String>,
    action: String,
    target: Option<String>,
    request_id: Option<String>,
    outcome: String,
    details: Option<String>,
    prev_hash: String,
    hash: String,
}

impl From<AuditRow> for AuditEntry {
    fn from(row: AuditRow) -> Self {
        Self {
            seq: row.seq,
            entry: NewAuditEntry {
                at: row.at,
                actor_user: row.actor_user,
                actor_key: row.actor_key,
                action: row.action,
                target: row.target,
                request_id: row.request_id,
                outcome: row.outcome,
                details: row.details,
            },
            prev_hash: row.prev_hash,
            hash: row.hash,
        }
    }
}

/// Implements [`AuditStore`](crate::store::AuditStore) for a backend.
macro_rules! impl_audit_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::AuditStore for $store {
            async fn append_audit(
                &self,
                entry: &$crate::store::NewAuditEntry,
            ) -> Result<$crate::store::AuditEntry, $crate::store::StoreError> {
                use $crate::store::sql::{at, audit as sql};
                let mut entry = entry.clone();
                entry.at = at(entry.at);
                let mut tx = self.begin_write().await?;
                let (seq, prev_hash): (i64, String) =
                    sqlx::query_as(sql::TAKE_HEAD).fetch_one(&mut *tx).await?;
                let hash = $crate::store::chain_hash(seq, &entry, &prev_hash);
                sqlx::query(sql::SET_HEAD_HASH)
                    .bind(&hash)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(sql::INSERT)
                    .bind(seq)
                    .bind(entry.at)
                    .bind(&entry.actor_user)
                    .bind(&entry.actor_key)
                    .bind(&entry.action)
                    .bind(&entry.target)
                    .bind(&entry.request_id)
                    .bind(&entry.outcome)
                    .bind(&entry.details)
                    .bind(&prev_hash)
                    .bind(&hash)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok($crate::store::AuditEntry {
                    seq,
                    entry,
                    prev_hash,
                    hash,
                })
            }

            async fn list_audit(
                &self,
                filter: &$crate::store::AuditFilter,
            ) -> Result<Vec<$crate::store::AuditEntry>, $crate::store::StoreError> {
                use $crate::store::sql::audit as sql;
                let limit = $crate::store::check_page_size(filter.limit)?;
                let rows = sqlx::query_as::<_, sql::AuditRow>(sql::LIST)
                    .bind(filter.after_seq)
                    .bind(filter.from)
                    .bind(filter.to)
                    .bind(&filter.actor)
                    .bind(&filter.action)
                    .bind(limit)
                    .fetch_all(&self.reader)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn audit_head(&self) -> Result<(i64, String), $crate::store::StoreError> {
                use $crate::store::sql::audit as sql;
                Ok(sqlx::query_as(sql::HEAD).fetch_one(&self.reader).await?)
            }

            async fn delete_audit_before(
                &self,
                before: chrono::DateTime<chrono::Utc>,
                limit: u32,
            ) -> Result<u64, $crate::store::StoreError> {
                use $crate::store::sql::{at, audit as sql};
                let done = sqlx::query(sql::DELETE_BEFORE)
                    .bind(at(before))
                    .bind(i64::from(limit))
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use impl_audit_store;
