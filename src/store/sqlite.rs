//! The SQLite backend: one file, WAL journal, `synchronous=NORMAL`, a busy timeout, a
//! one-connection writer pool whose transactions start with `BEGIN IMMEDIATE` (writers queue in
//! the pool instead of failing with SQLITE_BUSY half-way) and a read-only pool for queries, which
//! WAL lets run while the writer writes.
//!
//! A write that fails inside a transaction is rolled back; when SQLite already ended the
//! transaction itself (it does on `SQLITE_FULL`), sqlx still counts it open and refuses every
//! later `BEGIN` on that connection, so a writer connection returned to the pool inside a
//! transaction is closed and the pool opens a fresh one: one failed write never blocks the next.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Connection, Sqlite, Transaction};

use super::StoreError;

/// Connections of the read pool; reads never wait for the writer under WAL.
const READERS: u32 = 4;
/// How long a connection waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// SQLite's largest `max_page_count`: no cap.
const NO_PAGE_CAP: u64 = 4_294_967_294;

pub struct SqliteStore {
    reader: SqlitePool,
    writer: SqlitePool,
    /// The writer's `max_page_count`, applied to every writer connection ([`NO_PAGE_CAP`]
    /// unless [`SqliteStore::limit_pages`] set one).
    page_cap: Arc<AtomicU64>,
    /// Wakes this replica's webhook and schedule loops when their work changes.
    signals: super::StoreSignals,
    /// Whether the database may hold A2A push-notification configs: read at open, set before
    /// one is stored, never cleared while running. Every run's end asks for its task's
    /// configs; while none can exist (one process owns a SQLite database) the answer is
    /// known without a statement on the writer connection the run's end then waits for.
    may_hold_push_configs: Arc<AtomicBool>,
    /// The WAL's checkpoint task (a file database); stops with the store.
    _checkpoints: Option<super::sqlite_checkpoint::Checkpoints>,
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
        let page_cap = Arc::new(AtomicU64::new(NO_PAGE_CAP));
        let cap = page_cap.clone();
        let in_memory = is_in_memory(url);
        // The writer never checkpoints: a task does, on a connection of its own
        // (`sqlite_checkpoint`), so a checkpoint's fsyncs do not hold up commits.
        let writer_options = if in_memory {
            options.clone()
        } else {
            super::sqlite_checkpoint::CheckpointPolicy::SERVER.writer_options(options.clone())
        };
        // No ping before handing a connection out: a SQLite connection is a file handle that
        // does not break while idle, and each ping is a round trip to the connection's thread
        // (two context switches) before every statement. sqlx still pings on release.
        let mut writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .after_connect(move |connection, _| {
                let pages = cap.load(Ordering::Relaxed);
                Box::pin(async move { set_max_page_count(connection, pages).await })
            });
        let written = Arc::new(AtomicBool::new(true));
        // An in-memory database lives in its one connection: closing it would lose everything.
        if !in_memory {
            let written = written.clone();
            writer = writer.after_release(move |connection, _| {
                super::sqlite_checkpoint::Checkpoints::mark_written(&written);
                Box::pin(async move { leaves_no_transaction(connection).await })
            });
        }
        let writer = writer
            .connect_with(writer_options.create_if_missing(true))
            .await
            .map_err(open_error)?;
        sqlx::migrate!("./migrations/sqlite").run(&writer).await?;
        let checkpoints = if in_memory {
            None
        } else {
            let checkpoints = super::sqlite_checkpoint::Checkpoints::start(
                options.clone(),
                writer.clone(),
                written,
                super::sqlite_checkpoint::CheckpointPolicy::SERVER,
            )
            .await
            .map_err(open_error)?;
            Some(checkpoints)
        };
        // An in-memory database exists once per connection: it can only be served by the writer.
        let reader = if is_in_memory(url) {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(READERS)
                .test_before_acquire(false)
                .connect_with(options.read_only(true))
                .await
                .map_err(open_error)?
        };
        let holds_push_configs: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM a2a_push_configs)")
                .fetch_one(&writer)
                .await
                .map_err(open_error)?;
        Ok(Self {
            reader,
            writer,
            page_cap,
            signals: super::StoreSignals::default(),
            may_hold_push_configs: Arc::new(AtomicBool::new(holds_push_configs)),
            _checkpoints: checkpoints,
        })
    }

    /// Whether a push-notification config may be stored (the field of the same name).
    fn may_hold_push_configs(&self) -> bool {
        self.may_hold_push_configs.load(Ordering::Acquire)
    }

    /// Called before a push-notification config is stored.
    fn push_config_stored(&self) {
        self.may_hold_push_configs.store(true, Ordering::Release);
    }

    /// Caps the database at `pages` pages (SQLite's `max_page_count`; `None` lifts the cap):
    /// past it every write that needs a new page fails with `SQLITE_FULL`, as on a full disk.
    /// A cap below the database's present size holds it at that size.
    pub async fn limit_pages(&self, pages: Option<u64>) -> Result<(), StoreError> {
        let pages = pages.unwrap_or(NO_PAGE_CAP).clamp(1, NO_PAGE_CAP);
        self.page_cap.store(pages, Ordering::Relaxed);
        let mut writer = self.writer.acquire().await?;
        set_max_page_count(&mut writer, pages).await?;
        Ok(())
    }

    /// A run batch in one round trip to the connection's thread instead of one per statement
    /// (`BEGIN`, the run rows, accounting, events, `COMMIT`: five hand-offs between threads,
    /// about a third of a recorded request's context switches): `BEGIN IMMEDIATE`, the
    /// batch's statements and `COMMIT` as one query, whose statements sqlx-sqlite binds in
    /// turn. (sqlx calls several statements in one query a deprecated SQLite-only behaviour,
    /// launchbadge/sqlx#3108; `store::sqlite` tests write batches through it, so a sqlx that
    /// drops it fails them.) A failed statement leaves the transaction open: it is rolled
    /// back, and a connection that cannot roll back is closed. A batch that carries webhook
    /// messages is written statement by statement.
    async fn write_run_rows(&self, batch: &super::RunBatch) -> Result<(), sqlx::Error> {
        let carries_messages = batch.runs.iter().any(|write| {
            write
                .outcome
                .as_ref()
                .is_some_and(|end| !end.notices.is_empty())
        });
        if carries_messages {
            return self.write_run_batch_statements(batch).await;
        }
        let rows = super::sql::run_batch::BatchRows::of(batch);
        let mut sql = sqlx::QueryBuilder::<Sqlite>::new("BEGIN IMMEDIATE;\n");
        for statement in rows.statements(batch) {
            Self::push_batch_statement(&mut sql, statement);
            sql.push(";\n");
        }
        sql.push("COMMIT");
        let mut writer = self.writer.acquire().await?;
        // A one-run batch has few shapes (its events and accounting rows): worth a cached
        // statement. Larger batches vary and would push the fixed statements out of the cache.
        let written = sql
            .build()
            .persistent(batch.runs.len() <= 1)
            .execute(&mut *writer)
            .await;
        if let Err(error) = written {
            if let Err(rollback) = sqlx::query("ROLLBACK").execute(&mut *writer).await
                && !rollback.to_string().contains("no transaction is active")
            {
                tracing::warn!(%rollback, "the SQLite writer could not roll back a failed run batch; it is replaced");
                writer.close_on_drop();
            }
            return Err(error);
        }
        Ok(())
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

async fn set_max_page_count(
    connection: &mut SqliteConnection,
    pages: u64,
) -> Result<(), sqlx::Error> {
    let pragma = format!("PRAGMA max_page_count = {pages}");
    sqlx::query(sqlx::AssertSqlSafe(pragma))
        .execute(connection)
        .await?;
    Ok(())
}

/// Whether a writer connection coming back to the pool may be used again: not when it is still
/// inside a transaction once the rollback its transaction queued on drop has run (the ping runs
/// after it). SQLite ends a transaction itself on some errors (`SQLITE_FULL`); the rollback then
/// fails and sqlx would refuse every later `BEGIN` on the connection. A committed or rolled back
/// transaction leaves nothing to wait for.
async fn leaves_no_transaction(connection: &mut SqliteConnection) -> Result<bool, sqlx::Error> {
    if !connection.is_in_transaction() {
        return Ok(true);
    }
    connection.ping().await?;
    if connection.is_in_transaction() {
        tracing::warn!(
            "the SQLite writer connection was left inside a failed transaction; it is replaced"
        );
        return Ok(false);
    }
    Ok(true)
}

super::sql::shared_store_impl!(SqliteStore, sqlx::Sqlite);
// Times are RFC 3339 text in UTC: the day is the first ten characters.
super::sql::usage::impl_usage_store!(SqliteStore, sqlx::Sqlite, "substr(r.created_at, 1, 10)");
super::sql::user_data::impl_user_data_store!(
    SqliteStore,
    sqlx::Sqlite,
    "json_extract(value, '$.run_id')",
    None
);

#[cfg(test)]
mod tests {
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

    /// A write into a full database (SQLite ends the transaction itself) is an outage, not a
    /// refusal, and leaves the writer usable: once there is room again the same write is made
    /// (the connection used to stay "inside" the failed transaction and refuse every `BEGIN`).
    #[tokio::test]
    async fn a_write_into_a_full_database_fails_as_full_and_the_next_one_is_made() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        let store = SqliteStore::open(&url).await.expect("open");
        store.limit_pages(Some(1)).await.expect("cap");
        // One single-row statement: on SQLITE_FULL SQLite rolls the whole transaction back (a
        // statement that keeps a statement journal rolls back only itself).
        let large = |run: usize| RunBatch {
            runs: Vec::new(),
            events: vec![NewRunEvent {
                run_id: format!("run-{run}"),
                seq: 1,
                event_type: "output".into(),
                data: serde_json::json!({"text": "x".repeat(80_000)}).into(),
                ts: chrono::Utc::now(),
            }],
        };
        let error = store
            .write_run_batch(&large(1))
            .await
            .expect_err("no room for the batch");
        assert!(error.is_full() && error.is_unavailable(), "{error}");
        let again = store
            .write_run_batch(&large(1))
            .await
            .expect_err("still full");
        assert!(again.is_full(), "the writer is not stuck: {again}");
        store.limit_pages(None).await.expect("cap lifted");
        store.write_run_batch(&large(1)).await.expect("room again");
        let stored = crate::store::RunEventStore::list_run_events(&store, "run-1", 0, 100)
            .await
            .expect("events");
        assert_eq!(stored.len(), 1);
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

    /// The retention sweep finds expired runs through the creation-time index (there is no
    /// index on `finished_at`): it never scans `runs`.
    #[tokio::test]
    async fn the_retention_sweep_finds_expired_runs_through_an_index() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        let store = SqliteStore::open(&url).await.expect("open");
        for statement in [
            crate::store::sql::retention::DELETE_RUNS,
            crate::store::sql::retention::DELETE_RUN_ACCOUNTING,
        ] {
            let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "EXPLAIN QUERY PLAN {statement}"
            )))
            .bind(crate::store::sql::at(chrono::Utc::now()))
            .bind(100_i64)
            .fetch_all(&store.reader)
            .await
            .expect("plan");
            let steps: Vec<&str> = plan.iter().map(|step| step.3.as_str()).collect();
            assert!(
                steps
                    .iter()
                    .any(|s| s.starts_with("SEARCH runs USING INDEX runs_created_id")),
                "{steps:?}"
            );
            assert!(
                !steps.iter().any(|s| s.starts_with("SCAN runs")),
                "{steps:?}"
            );
        }
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
