//! Persistence: the `Store` trait and its backends. SQLite (`sqlite://PATH`, the default,
//! created on first start) and PostgreSQL (`postgres://…`) keep the same data with native types.
//!
//! Migrations live in `migrations/sqlite` and `migrations/postgres` with the same version
//! numbers and are embedded at compile time; no database is needed to build.

mod postgres;
mod sql;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::agent::AgentResult;

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported store url {0:?}: use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
    #[error("cannot open the store at {url}: {source}")]
    Open { url: String, source: sqlx::Error },
    #[error("store migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("store query failed: {0}")]
    Query(#[from] sqlx::Error),
}

/// A run as it starts.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub id: String,
    pub agent: String,
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub id: String,
    pub agent: String,
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
    pub status: String,
    pub exit_reason: Option<String>,
    pub success: Option<bool>,
    pub error: Option<String>,
    pub final_report: Option<Value>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub cost_usd: f64,
    pub turns: i64,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
}

/// What is written when a run ends.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub status: &'static str,
    pub exit_reason: &'static str,
    pub success: bool,
    pub error: Option<String>,
    pub final_report: Option<Value>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub cost_usd: f64,
    pub turns: i64,
    pub finished_at: DateTime<Utc>,
    pub duration_ms: i64,
}

impl From<&AgentResult> for RunOutcome {
    fn from(result: &AgentResult) -> Self {
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        Self {
            status: result.status().as_str(),
            exit_reason: result.exit_reason.as_str(),
            success: result.success,
            error: result.error.clone(),
            final_report: result
                .final_report
                .as_ref()
                .and_then(|r| serde_json::to_value(r).ok()),
            input_tokens: clamp(result.usage.input_tokens),
            output_tokens: clamp(result.usage.output_tokens),
            cached_tokens: clamp(result.usage.cached_tokens),
            cost_usd: result.cost_usd,
            turns: i64::from(result.turns),
            finished_at: Utc::now(),
            duration_ms: clamp(result.duration_ms),
        }
    }
}

/// Everything agentd persists. Implementations must behave identically.
#[async_trait]
pub trait Store: Send + Sync {
    /// Cheap reachability check for `/ready`.
    async fn ping(&self) -> Result<(), StoreError>;
    async fn insert_run(&self, run: &NewRun) -> Result<(), StoreError>;
    async fn finish_run(&self, run_id: &str, outcome: &RunOutcome) -> Result<(), StoreError>;
    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;
}

/// Opens the store named by `url` and applies pending migrations.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::open(url).await?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PostgresStore::open(url).await?))
    } else {
        Err(StoreError::UnsupportedUrl(url.to_string()))
    }
}

/// Applies migrations without keeping the store open (`agentd migrate`).
pub async fn migrate(url: &str) -> Result<(), StoreError> {
    open(url).await.map(|_| ())
}
