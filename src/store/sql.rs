//! SQL text shared by both backends (`$N` placeholders work on SQLite and PostgreSQL alike), the
//! row type both decode into, and the `Store` methods they share word for word.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use super::RunRecord;

pub const INSERT_RUN: &str = "INSERT INTO runs (id, agent, user_id, conversation_id, status, created_at) \
     VALUES ($1, $2, $3, $4, 'running', $5)";

pub const FINISH_RUN: &str = "UPDATE runs SET status = $2, exit_reason = $3, success = $4, error = $5, final_report = $6, \
     input_tokens = $7, output_tokens = $8, cached_tokens = $9, cost_usd = $10, turns = $11, finished_at = $12, \
     duration_ms = $13 WHERE id = $1";

pub const SELECT_RUN: &str = "SELECT id, agent, user_id, conversation_id, status, exit_reason, success, error, final_report, \
     input_tokens, output_tokens, cached_tokens, cost_usd, turns, created_at, finished_at, duration_ms \
     FROM runs WHERE id = $1";

#[derive(sqlx::FromRow)]
pub struct RunRow {
    id: String,
    agent: String,
    user_id: Option<String>,
    conversation_id: Option<String>,
    status: String,
    exit_reason: Option<String>,
    success: Option<bool>,
    error: Option<String>,
    final_report: Option<Json<Value>>,
    input_tokens: i64,
    output_tokens: i64,
    cached_tokens: i64,
    cost_usd: f64,
    turns: i64,
    created_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    duration_ms: Option<i64>,
}

impl From<RunRow> for RunRecord {
    fn from(row: RunRow) -> Self {
        Self {
            id: row.id,
            agent: row.agent,
            user_id: row.user_id,
            conversation_id: row.conversation_id,
            status: row.status,
            exit_reason: row.exit_reason,
            success: row.success,
            error: row.error,
            final_report: row.final_report.map(|j| j.0),
            input_tokens: row.input_tokens,
            output_tokens: row.output_tokens,
            cached_tokens: row.cached_tokens,
            cost_usd: row.cost_usd,
            turns: row.turns,
            created_at: row.created_at,
            finished_at: row.finished_at,
            duration_ms: row.duration_ms,
        }
    }
}

/// Implements [`Store`](super::Store) for a backend struct with a `pool` field. The statements and
/// bindings are identical on both backends; only the pool type and the DDL differ.
macro_rules! shared_store_impl {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl super::Store for $store {
            async fn ping(&self) -> Result<(), super::StoreError> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn insert_run(&self, run: &super::NewRun) -> Result<(), super::StoreError> {
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

            async fn finish_run(
                &self,
                run_id: &str,
                outcome: &super::RunOutcome,
            ) -> Result<(), super::StoreError> {
                sqlx::query(super::sql::FINISH_RUN)
                    .bind(run_id)
                    .bind(outcome.status)
                    .bind(outcome.exit_reason)
                    .bind(outcome.success)
                    .bind(&outcome.error)
                    .bind(outcome.final_report.as_ref().map(sqlx::types::Json))
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

            async fn get_run(
                &self,
                run_id: &str,
            ) -> Result<Option<super::RunRecord>, super::StoreError> {
                let row = sqlx::query_as::<_, super::sql::RunRow>(super::sql::SELECT_RUN)
                    .bind(run_id)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(row.map(Into::into))
            }
        }
    };
}
pub(super) use shared_store_impl;
