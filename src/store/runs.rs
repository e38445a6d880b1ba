//! Runs as the store keeps them: who ran which agent, how it ended, what it used and cost, the
//! whole `AgentResult` (SPEC §5) and one accounting row per LLM attempt or tool call.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{JsonText, NewRunEvent, RecorderSettings, StoreError};
use crate::agent::AgentResult;
use crate::agent::result::{AccountingEntry, EntryStatus};

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
    pub total_tokens: i64,
    pub cost_usd: f64,
    pub turns: i64,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    /// The whole `AgentResult` once the run has finished (`GET /v1/runs/{id}`).
    pub result: Option<Value>,
}

/// What is written when a run ends.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub status: &'static str,
    pub exit_reason: &'static str,
    pub success: bool,
    pub error: Option<String>,
    pub final_report: Option<JsonText>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub total_tokens: i64,
    pub cost_usd: f64,
    pub turns: i64,
    pub finished_at: DateTime<Utc>,
    pub duration_ms: i64,
    pub result: Option<JsonText>,
    /// Written in the same transaction as the run's end, numbered 0, 1, 2… in this order.
    pub accounting: Vec<AccountingRecord>,
}

/// One accounting entry (contract §4) with the columns reports filter on. `provider` is the LLM
/// provider or, for tool entries, the tool's server; `model` is set for LLM entries only.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountingRecord {
    /// `llm` or `tool`.
    pub entry_type: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub tool: Option<String>,
    /// `ok` or `failed`.
    pub status: String,
    pub ts: DateTime<Utc>,
    /// The entry in the contract's record format, as emitted.
    pub entry: JsonText,
}

/// Reading runs and their accounting; they are written through [`RunBatchStore`].
#[async_trait]
pub trait RunStore: Send + Sync {
    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;
    /// The run's accounting entries in the order they were produced.
    async fn list_accounting(&self, run_id: &str) -> Result<Vec<AccountingRecord>, StoreError>;
}

/// A run row as the recorder writes it: as started (`outcome` empty, status `running`) or as
/// finished.
#[derive(Debug, Clone)]
pub struct RunWrite {
    pub run: NewRun,
    pub outcome: Option<RunOutcome>,
}

/// One transaction of the run recorder.
#[derive(Debug, Clone, Default)]
pub struct RunBatch {
    /// At most one write per run.
    pub runs: Vec<RunWrite>,
    pub events: Vec<NewRunEvent>,
}

/// What the run recorder writes through.
#[async_trait]
pub trait RunBatchStore: Send + Sync {
    /// Writes the batch in one transaction. A run is inserted whole; a finished run already
    /// stored as running gets its end (and accounting); a start of a run already stored changes
    /// nothing, and so does writing the same batch again.
    async fn write_run_batch(&self, batch: &RunBatch) -> Result<(), StoreError>;

    /// Writes per transaction that suit this backend (the recorder's `batch_size`).
    fn preferred_batch_size(&self) -> usize {
        RecorderSettings::default().batch_size
    }
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl From<&AgentResult> for RunOutcome {
    fn from(result: &AgentResult) -> Self {
        Self {
            status: result.status().as_str(),
            exit_reason: result.exit_reason.as_str(),
            success: result.success,
            error: result.error.clone(),
            final_report: result.final_report.as_ref().map(JsonText::of),
            input_tokens: clamp(result.usage.input_tokens),
            output_tokens: clamp(result.usage.output_tokens),
            cached_tokens: clamp(result.usage.cached_tokens),
            total_tokens: clamp(result.usage.total_tokens),
            cost_usd: result.cost_usd,
            turns: i64::from(result.turns),
            finished_at: Utc::now(),
            duration_ms: clamp(result.duration_ms),
            result: Some(JsonText::of(result)),
            accounting: result.accounting.iter().map(Into::into).collect(),
        }
    }
}

impl From<&AccountingEntry> for AccountingRecord {
    fn from(entry: &AccountingEntry) -> Self {
        let status = |s: EntryStatus| match s {
            EntryStatus::Ok => "ok",
            EntryStatus::Failed => "failed",
        };
        let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap_or_default();
        let json = JsonText::of(entry);
        match entry {
            AccountingEntry::Llm(llm) => Self {
                entry_type: "llm".into(),
                provider: Some(llm.provider.clone()),
                model: Some(llm.model.clone()),
                tool: None,
                status: status(llm.status).into(),
                ts: at(llm.timestamp),
                entry: json,
            },
            AccountingEntry::Tool(tool) => Self {
                entry_type: "tool".into(),
                provider: Some(tool.mcp_server.clone()),
                model: None,
                tool: Some(tool.command.clone()),
                status: status(tool.status).into(),
                ts: at(tool.timestamp),
                entry: json,
            },
        }
    }
}
