//! The SQLite backend: one file, WAL journal, `synchronous=NORMAL`, a busy timeout, a
//! one-connection writer pool whose transactions start with `BEGIN IMMEDIATE` (writers queue in
//! the pool instead of failing with SQLITE_BUSY half-way) and a read-only pool for queries, which
//! WAL lets run while the writer writes.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};

use super::StoreError;

/// Connections of the read pool; reads never wait for the writer under WAL.
const READERS: u32 = 4;
/// How long a connection waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub struct SqliteStore {
    reader: SqlitePool,
    writer: SqlitePool,
}

impl SqliteStore {
    /// Writes per recorder transaction: larger transactions rewrite the hot B-tree pages into
    /// the WAL less often (`store_events`: 19,368 runs/s at 256, 31,998 at 1024).
    const RECORDER_BATCH: usize = 1024;

    /// Takes the write lock at `BEGIN`, where the busy timeout applies, instead of at the first
    /// write, where SQLite fails at once rather than wait.
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        self.writer.begin_with("BEGIN IMMEDIATE").await
    }

    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let open_error = |source| StoreError::Open {
            url: url.to_string(),
            source,
        };
        let options = SqliteConnectOptions::from_str(url)
            .map_err(open_error)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .statement_cache_capacity(super::sql::STATEMENT_CACHE_CAPACITY);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone().create_if_missing(true))
            .await
            .map_err(open_error)?;
        sqlx::migrate!("./migrations/sqlite").run(&writer).await?;
        // An in-memory database exists once per connection: it can only be served by the writer.
        let reader = if is_in_memory(url) {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(READERS)
                .connect_with(options.read_only(true))
                .await
                .map_err(open_error)?
        };
        Ok(Self { reader, writer })
    }

    /// One process: its followers are woken in memory, so there is no one to notify.
    async fn notify_runs(
        _tx: &mut Transaction<'static, Sqlite>,
        _run_ids: &[&str],
    ) -> Result<(), sqlx::Error> {
        Ok(())
    }

    async fn notify_control(
        _tx: &mut Transaction<'static, Sqlite>,
        _payload: &str,
    ) -> Result<(), sqlx::Error> {
        Ok(())
    }

    fn listen_url(&self) -> Option<&str> {
        None
    }
}

fn is_in_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}

super::sql::shared_store_impl!(SqliteStore, sqlx::Sqlite);

#[cfg(test)]
mod tests {
    use sqlx::Connection;

    use super::*;
    use crate::store::sql::{ROWS_PER_INSERT, STATEMENT_CACHE_CAPACITY};
    use crate::store::{NewRunEvent, RunBatch, RunBatchStore};

    fn events(run: usize, count: usize) -> Vec<NewRunEvent> {
        (1..=count)
            .map(|seq| NewRunEvent {
                run_id: format!("run-{run}"),
                seq: seq as i64,
                event_type: "output".into(),
                data: serde_json::json!({"text": "x"}).into(),
                ts: chrono::Utc::now(),
            })
            .collect()
    }

    /// The replica's poll for cancellations reads `runs` by key, never by scanning it: a scan
    /// grew with every run ever stored and, under a long soak, held the write lock for seconds.
    #[tokio::test]
    async fn taking_cancellations_never_scans_the_runs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        let store = SqliteStore::open(&url).await.expect("open");
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {}",
            crate::store::sql::replicas::TAKE_CANCELS
        )))
        .bind("replica")
        .fetch_all(&store.reader)
        .await
        .expect("plan");
        let steps: Vec<&str> = plan.iter().map(|step| step.3.as_str()).collect();
        assert!(
            steps.iter().any(|s| s.starts_with("SEARCH runs USING")),
            "{steps:?}"
        );
        assert!(
            !steps.iter().any(|s| s.starts_with("SCAN runs")),
            "{steps:?}"
        );
    }

    /// Every multi-row shape the recorder writes stays prepared: a batch of each size of event
    /// INSERT (one event of each of `size` runs: a run's events in one batch share a row), then
    /// all of them are still in the writer's statement cache (with sqlx's default capacity of
    /// 100, the first ones had been evicted and were prepared again next time).
    #[tokio::test]
    async fn every_batch_shape_stays_prepared() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        let store = SqliteStore::open(&url).await.expect("open");
        for size in 1..=ROWS_PER_INSERT {
            let batch = RunBatch {
                runs: Vec::new(),
                events: (0..size).flat_map(|run| events(run, 1)).collect(),
            };
            store.write_run_batch(&batch).await.expect("write");
        }
        let connection = store.writer.acquire().await.expect("writer");
        let cached = connection.cached_statements_size();
        assert!(
            cached > ROWS_PER_INSERT && cached <= STATEMENT_CACHE_CAPACITY,
            "{cached} statements cached: the {ROWS_PER_INSERT} event INSERT shapes should all be"
        );
    }
}
