//! The SQLite backend: one file, WAL journal, `synchronous=NORMAL`, a busy timeout, and only
//! single-statement writes so no transaction can hit SQLITE_BUSY half-way.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::types::Json;

use super::{NewRun, RunOutcome, RunRecord, Store, StoreError};

pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let open_error = |source| StoreError::Open {
            url: url.to_string(),
            source,
        };
        let options = SqliteConnectOptions::from_str(url)
            .map_err(open_error)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(open_error)?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(Self { pool })
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn insert_run(&self, run: &NewRun) -> Result<(), StoreError> {
        sqlx::query(super::sql::INSERT_RUN)
            .bind(&run.id)
            .bind(&run.agent)
            .bind(&run.user_id)
            .bind(&run.conversation_id)
            .bind(run.created_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn finish_run(&self, run_id: &str, outcome: &RunOutcome) -> Result<(), StoreError> {
        sqlx::query(super::sql::FINISH_RUN)
            .bind(run_id)
            .bind(outcome.status)
            .bind(outcome.exit_reason)
            .bind(outcome.success)
            .bind(&outcome.error)
            .bind(outcome.final_report.as_ref().map(Json))
            .bind(outcome.input_tokens)
            .bind(outcome.output_tokens)
            .bind(outcome.cached_tokens)
            .bind(outcome.cost_usd)
            .bind(outcome.turns)
            .bind(outcome.finished_at)
            .bind(outcome.duration_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let row = sqlx::query_as::<_, super::sql::RunRow>(super::sql::SELECT_RUN)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }
}
