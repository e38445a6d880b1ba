//! SQL text shared by both backends (`$N` placeholders work on SQLite and PostgreSQL alike) and
//! the row type both decode into.

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
