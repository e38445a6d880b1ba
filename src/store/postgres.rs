//! The PostgreSQL backend: the same statements as SQLite over a `PgPool`, with native types
//! (TIMESTAMPTZ, JSONB, BOOLEAN) declared in `migrations/postgres`.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::types::Json;

use super::{NewRun, RunOutcome, RunRecord, Store, StoreError};

pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(|source| StoreError::Open {
                url: redact_password(url),
                source,
            })?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`, for error messages.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((credentials, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

#[async_trait]
impl Store for PostgresStore {
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

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            super::redact_password("postgres://u:pw@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(super::redact_password("postgres://h/db"), "postgres://h/db");
    }
}
