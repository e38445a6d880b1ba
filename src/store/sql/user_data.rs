//! Statements erasing a user's data; see [`UserDataStore`](crate::store::UserDataStore). The
//! response cache's run id is read from its JSON value, which only that differs per backend.

pub const UNFINISHED: &str = "SELECT id FROM runs WHERE user_id = $1 \
     AND status NOT IN ('completed', 'failed', 'cancelled') ORDER BY created_at";

const OF_RUNS: &str = "(SELECT id FROM runs WHERE user_id = $1)";

/// The user's runs left once their ended runs are deleted: one is a run that had not ended (or
/// started while the erasure ran), and the erasure is rolled back.
pub const LEFT: &str = "SELECT id FROM runs WHERE user_id = $1 ORDER BY created_at";

/// The ids of all the user's runs (for the caches outside the store).
pub const RUN_IDS: &str = "SELECT id FROM runs WHERE user_id = $1";

/// A blob (`b`) no file of another user names.
const ONLY_THEIRS: &str =
    "NOT EXISTS (SELECT 1 FROM files f WHERE f.sha256 = b.sha256 AND f.user_id <> $1)";

/// `(what, statement)` in the order they run: rows that point at runs before the runs.
pub fn statements(cache_run_id: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "cache_entries",
            format!("DELETE FROM response_cache WHERE {cache_run_id} IN {OF_RUNS}"),
        ),
        (
            "run_events",
            format!("DELETE FROM run_events WHERE run_id IN {OF_RUNS}"),
        ),
        (
            "accounting",
            format!("DELETE FROM run_accounting WHERE run_id IN {OF_RUNS}"),
        ),
        (
            "approvals",
            format!("DELETE FROM run_approvals WHERE run_id IN {OF_RUNS}"),
        ),
        (
            "checkpoints",
            format!("DELETE FROM run_checkpoints WHERE run_id IN {OF_RUNS}"),
        ),
        (
            "cancellations",
            format!("DELETE FROM run_cancellations WHERE run_id IN {OF_RUNS}"),
        ),
        (
            "requests",
            format!("DELETE FROM run_requests WHERE run_id IN {OF_RUNS}"),
        ),
        // Queued messages hold the message's text; deliveries hold the answer they announce.
        (
            "queued_turns",
            "DELETE FROM conversation_turns WHERE user_id = $1".into(),
        ),
        (
            "webhook_deliveries",
            format!(
                "DELETE FROM webhook_deliveries WHERE user_id = $1 OR run_id IN {OF_RUNS}"
            ),
        ),
        (
            "schedule_fires",
            "DELETE FROM schedule_fires WHERE schedule_id IN (SELECT id FROM schedules WHERE owner = $1)"
                .into(),
        ),
        ("schedules", "DELETE FROM schedules WHERE owner = $1".into()),
        // Ended runs only: a run that has not ended is left, found and the erasure undone.
        (
            "runs",
            "DELETE FROM runs WHERE user_id = $1 \
             AND status IN ('completed', 'failed', 'cancelled')"
                .into(),
        ),
        ("messages", "DELETE FROM messages WHERE user_id = $1".into()),
        (
            "conversations",
            "DELETE FROM conversations WHERE user_id = $1".into(),
        ),
        (
            "responses",
            "DELETE FROM responses WHERE user_key = $1".into(),
        ),
        (
            "secrets",
            "DELETE FROM user_secrets WHERE user_id = $1".into(),
        ),
        // Files: the content no other user's file names goes with them.
        (
            "blob_chunks",
            format!(
                "DELETE FROM blob_chunks WHERE sha256 IN (SELECT b.sha256 FROM blobs b WHERE {ONLY_THEIRS})"
            ),
        ),
        (
            "blobs",
            format!("DELETE FROM blobs AS b WHERE {ONLY_THEIRS}"),
        ),
        ("files", "DELETE FROM files WHERE user_id = $1".into()),
    ]
}

/// PostgreSQL: taken first by the erasing transaction. It waits for transactions inserting
/// runs to commit and holds new ones off until the erasure commits, so the checks inside it see
/// every run there will be; two erasures take turns (the mode conflicts with itself). SQLite
/// needs none: its one writer already runs the erasure alone.
pub const LOCK_RUNS_POSTGRES: &str = "LOCK TABLE runs IN SHARE ROW EXCLUSIVE MODE";

/// Implements [`UserDataStore`](crate::store::UserDataStore) for a backend whose expression for
/// a cache entry's run id is `$cache_run_id` and whose statement holding off new runs is
/// `$lock_runs` (none: `None`).
macro_rules! impl_user_data_store {
    ($store:ty, $db:ty, $cache_run_id:literal, $lock_runs:expr) => {
        impl $store {
            /// The ids `statement` finds for `user_id`, read in `tx`.
            async fn user_runs(
                tx: &mut sqlx::Transaction<'static, $db>,
                statement: &'static str,
                user_id: &str,
            ) -> Result<Vec<String>, sqlx::Error> {
                let rows: Vec<(String,)> = sqlx::query_as(statement)
                    .bind(user_id)
                    .fetch_all(&mut **tx)
                    .await?;
                Ok(rows.into_iter().map(|(id,)| id).collect())
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::UserDataStore for $store {
            async fn unfinished_runs(
                &self,
                user_id: &str,
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                use $crate::store::sql::user_data as sql;
                let rows: Vec<(String,)> = sqlx::query_as(sql::UNFINISHED)
                    .bind(user_id)
                    .fetch_all(&self.reader)
                    .await?;
                Ok(rows.into_iter().map(|(id,)| id).collect())
            }

            async fn run_ids(
                &self,
                user_id: &str,
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                use $crate::store::sql::user_data as sql;
                let rows: Vec<(String,)> = sqlx::query_as(sql::RUN_IDS)
                    .bind(user_id)
                    .fetch_all(&self.reader)
                    .await?;
                Ok(rows.into_iter().map(|(id,)| id).collect())
            }

            async fn erase_user(
                &self,
                user_id: &str,
            ) -> Result<$crate::store::Erasure, $crate::store::StoreError> {
                use $crate::store::sql::user_data as sql;
                let mut erased = $crate::store::Erased::default();
                let mut tx = self.begin_write().await?;
                let lock_runs: Option<&'static str> = $lock_runs;
                if let Some(lock) = lock_runs {
                    sqlx::query(lock).execute(&mut *tx).await?;
                }
                let unfinished = Self::user_runs(&mut tx, sql::UNFINISHED, user_id).await?;
                if !unfinished.is_empty() {
                    tx.rollback().await?;
                    return Ok($crate::store::Erasure::RunsInProgress(unfinished));
                }
                for (what, statement) in sql::statements($cache_run_id) {
                    let done = sqlx::query(sqlx::AssertSqlSafe(statement))
                        .bind(user_id)
                        .execute(&mut *tx)
                        .await?;
                    let count = done.rows_affected();
                    match what {
                        "cache_entries" => erased.cache_entries = count,
                        "run_events" => erased.run_events = count,
                        "approvals" => erased.approvals = count,
                        "runs" => erased.runs = count,
                        "messages" => erased.messages = count,
                        "conversations" => erased.conversations = count,
                        "responses" => erased.responses = count,
                        "secrets" => erased.secrets = count,
                        "files" => erased.files = count,
                        "queued_turns" => erased.queued_turns = count,
                        "webhook_deliveries" => erased.webhook_deliveries = count,
                        "schedules" => erased.schedules = count,
                        _ => {}
                    }
                }
                // A run that started after the check is not erased under it: the whole erasure
                // is undone (the lock above already holds new runs off on PostgreSQL).
                let left = Self::user_runs(&mut tx, sql::LEFT, user_id).await?;
                if !left.is_empty() {
                    tx.rollback().await?;
                    return Ok($crate::store::Erasure::RunsInProgress(left));
                }
                tx.commit().await?;
                Ok($crate::store::Erasure::Erased(erased))
            }
        }
    };
}
pub(crate) use impl_user_data_store;
