//! Statements of the retention sweep and its lease; see
//! [`RetentionStore`](crate::store::RetentionStore). Every delete takes at most `$2` rows found
//! through an index, so one batch is a short statement whatever the table's size.

/// The runs that ended before `$1`, oldest first, found through `runs_created_id`: a run ends
/// after it starts, so each of them started before `$1` too (no index on `finished_at`: it
/// would be one more page in every run's commit).
macro_rules! expired_runs {
    () => {
        "(SELECT id FROM runs WHERE created_at < $1 AND finished_at IS NOT NULL \
         AND finished_at < $1 ORDER BY created_at, id LIMIT $2)"
    };
}
pub const DELETE_RUN_ACCOUNTING: &str = concat!(
    "DELETE FROM run_accounting WHERE run_id IN ",
    expired_runs!()
);
pub const DELETE_RUNS: &str = concat!("DELETE FROM runs WHERE id IN ", expired_runs!());
pub const DELETE_EVENTS: &str = "DELETE FROM run_events WHERE (run_id, seq) IN \
     (SELECT run_id, seq FROM run_events WHERE ts < $1 ORDER BY ts LIMIT $2)";
pub const DELETE_MESSAGES: &str = "DELETE FROM messages WHERE (user_id, conversation_id) IN \
     (SELECT user_id, id FROM conversations WHERE updated_at < $1 ORDER BY updated_at LIMIT $2)";
pub const DELETE_CONVERSATIONS: &str = "DELETE FROM conversations WHERE (user_id, id) IN \
     (SELECT user_id, id FROM conversations WHERE updated_at < $1 ORDER BY updated_at LIMIT $2)";
pub const DELETE_RESPONSES: &str = "DELETE FROM responses WHERE id IN \
     (SELECT id FROM responses WHERE created_at < $1 ORDER BY created_at LIMIT $2)";
pub const TAKE_LEASE: &str = "INSERT INTO sweep_leases (name, holder, expires_at) \
     VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, \
     expires_at = excluded.expires_at \
     WHERE sweep_leases.holder = excluded.holder OR sweep_leases.expires_at < $4";

/// Implements [`RetentionStore`](crate::store::RetentionStore) for a backend.
macro_rules! impl_retention_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::RetentionStore for $store {
            async fn delete_expired(
                &self,
                kind: $crate::store::RetainedKind,
                before: chrono::DateTime<chrono::Utc>,
                limit: u32,
            ) -> Result<u64, $crate::store::StoreError> {
                use $crate::store::RetainedKind;
                use $crate::store::sql::{at, retention as sql};
                let before = at(before);
                let limit = i64::from(limit);
                // Dependent rows first, in the same transaction, then the rows themselves.
                let (first, then) = match kind {
                    RetainedKind::Runs => (Some(sql::DELETE_RUN_ACCOUNTING), sql::DELETE_RUNS),
                    RetainedKind::Events => (None, sql::DELETE_EVENTS),
                    RetainedKind::Conversations => {
                        (Some(sql::DELETE_MESSAGES), sql::DELETE_CONVERSATIONS)
                    }
                    RetainedKind::Responses => (None, sql::DELETE_RESPONSES),
                    RetainedKind::Audit => {
                        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
                        return $crate::store::AuditStore::delete_audit_before(self, before, limit)
                            .await;
                    }
                };
                let mut tx = self.begin_write().await?;
                if let Some(first) = first {
                    sqlx::query(first)
                        .bind(before)
                        .bind(limit)
                        .execute(&mut *tx)
                        .await?;
                }
                let done = sqlx::query(then)
                    .bind(before)
                    .bind(limit)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(done.rows_affected())
            }

            async fn take_lease(
                &self,
                name: &str,
                holder: &str,
                now: chrono::DateTime<chrono::Utc>,
                until: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{at, retention as sql};
                let done = sqlx::query(sql::TAKE_LEASE)
                    .bind(name)
                    .bind(holder)
                    .bind(at(until))
                    .bind(at(now))
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
        }
    };
}
pub(crate) use impl_retention_store;
