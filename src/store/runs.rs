//! Runs as the store keeps them: who ran which agent, how it ended, what it used and cost, the
//! whole `AgentResult` (SPEC §5) and one accounting row per LLM attempt or tool call.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{JsonText, NewRunEvent, RecorderSettings, StoreError};
use crate::llm::ChatMessage;
use crate::vocabulary::result::AgentResult;
use crate::vocabulary::result::{AccountingEntry, EntryStatus, UsageTotals};
use crate::vocabulary::{ExitReason, RunStatus};

/// A run as it starts.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub id: String,
    pub agent: String,
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
    pub created_at: DateTime<Utc>,
    /// The replica running it (SPEC §7); `None` for runs outside a server's ownership.
    pub owner: Option<String>,
    /// The admin that started it acting for `user_id` (`key:ID`, or `admin`).
    pub acted_by: Option<String>,
    /// The key that started it (usage by key); `None` on a server without keys.
    pub key_id: Option<String>,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub id: String,
    pub agent: String,
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
    pub status: RunStatus,
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
    /// The replica that runs (or ran) it.
    pub owner: Option<String>,
    /// The admin that started it acting for `user_id` (`key:ID`, or `admin`).
    pub acted_by: Option<String>,
}

impl RunRecord {
    /// A run of `agent` in `status` with nothing else known yet: no user, conversation or
    /// outcome, no usage, created now. Other fields are set with struct update syntax.
    pub fn new(id: &str, agent: &str, status: RunStatus) -> Self {
        Self {
            id: id.to_string(),
            agent: agent.to_string(),
            user_id: None,
            conversation_id: None,
            status,
            exit_reason: None,
            success: None,
            error: None,
            final_report: None,
            input_tokens: 0,
            output_tokens: 0,
            cached_tokens: 0,
            total_tokens: 0,
            cost_usd: 0.0,
            turns: 0,
            created_at: Utc::now(),
            finished_at: None,
            duration_ms: None,
            result: None,
            owner: None,
            acted_by: None,
        }
    }

    /// The record `run` has once `outcome` is stored: what a notice put in the outbox in the
    /// same transaction reads.
    pub fn ended(run: &NewRun, outcome: &RunOutcome) -> Self {
        Self {
            id: run.id.clone(),
            agent: run.agent.clone(),
            user_id: run.user_id.clone(),
            conversation_id: run.conversation_id.clone(),
            status: outcome.status,
            exit_reason: Some(outcome.exit_reason.to_string()),
            success: Some(outcome.success),
            error: outcome.error.clone(),
            final_report: outcome.final_report.as_ref().map(JsonText::to_value),
            input_tokens: outcome.input_tokens,
            output_tokens: outcome.output_tokens,
            cached_tokens: outcome.cached_tokens,
            total_tokens: outcome.total_tokens,
            cost_usd: outcome.cost_usd,
            turns: outcome.turns,
            created_at: run.created_at,
            finished_at: Some(outcome.finished_at),
            duration_ms: Some(outcome.duration_ms),
            result: outcome.result.as_ref().map(JsonText::to_value),
            owner: run.owner.clone(),
            acted_by: run.acted_by.clone(),
        }
    }
}

/// What is written when a run ends.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub status: RunStatus,
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
    /// Webhook messages announcing the end, put in the outbox in the same transaction: a
    /// replica that dies after storing the end has announced it too (SPEC §13).
    pub notices: Vec<super::NewDelivery>,
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
    /// Its tokens and cost, in columns usage reports sum (zero for tool entries).
    pub usage: EntryUsage,
}

/// The tokens and cost of one accounting entry.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EntryUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub reasoning_tokens: i64,
    pub cost_usd: f64,
}

/// Whose runs a listing shows.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOwnerFilter {
    /// Every user's runs (admins).
    Everyone,
    /// The runs of this user; `None` is the runs started without a user.
    User(Option<String>),
}

/// A place in the newest-first order of runs: a run's creation time and id.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCursor {
    pub created_at: DateTime<Utc>,
    pub id: String,
}

/// Which runs [`RunStore::list_runs`] returns: newest first, at most `limit`.
#[derive(Debug, Clone)]
pub struct RunFilter {
    pub owner: RunOwnerFilter,
    pub agent: Option<String>,
    /// Only runs of these agents (what a key limited to some agents may see); `None`: any.
    pub agents_allowed: Option<Vec<String>>,
    /// Any of these statuses; empty is every status.
    pub statuses: Vec<String>,
    pub conversation_id: Option<String>,
    /// Keyset cursor: only runs listed after this point (older, or as old with a smaller id).
    pub after: Option<RunCursor>,
    pub limit: u32,
}

/// Reading runs and their accounting; they are written through [`RunBatchStore`].
#[async_trait]
pub trait RunStore: Send + Sync {
    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;
    /// Runs matching `filter`, newest first (`created_at`, then `id`, descending); `result` is
    /// left out (`None`): read one run for it.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError>;
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

impl RunBatch {
    /// Every run the batch writes a row or an event of, once each.
    pub fn run_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self
            .runs
            .iter()
            .map(|w| w.run.id.as_str())
            .chain(self.events.iter().map(|e| e.run_id.as_str()))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// What the run recorder writes through.
#[async_trait]
pub trait RunBatchStore: Send + Sync {
    /// Writes the batch in one transaction. A run is inserted whole; a finished run already
    /// stored as running gets its end (and accounting); a start of a run already stored changes
    /// nothing, and so does writing the same batch again.
    async fn write_run_batch(&self, batch: &RunBatch) -> Result<(), StoreError>;

    /// Whether the store answers, for the recorder to notice the end of an outage when it has
    /// nothing to write.
    async fn reachable(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Writes per transaction that suit this backend (the recorder's `batch_size`).
    fn preferred_batch_size(&self) -> usize {
        RecorderSettings::default().batch_size
    }
}

/// A finished run's `result` column: the `AgentResult` without what the run already keeps
/// elsewhere — its accounting (one row each) and its final report (a column). Serialising them
/// a third time cost more than any other JSON on a run's path; [`whole_result`] puts them back.
#[derive(Serialize)]
struct StoredResult<'a> {
    run_id: &'a str,
    success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    exit_reason: ExitReason,
    conversation: &'a [ChatMessage],
    usage: &'a UsageTotals,
    cost_usd: f64,
    turns: u32,
    duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_secs: Option<u64>,
}

impl<'a> StoredResult<'a> {
    fn of(result: &'a AgentResult) -> Self {
        let AgentResult {
            run_id,
            success,
            error,
            exit_reason,
            final_report: _,
            conversation,
            accounting: _,
            usage,
            cost_usd,
            turns,
            duration_ms,
            retry_after_secs,
        } = result;
        Self {
            run_id,
            success: *success,
            error: error.as_deref(),
            exit_reason: *exit_reason,
            conversation,
            usage,
            cost_usd: *cost_usd,
            turns: *turns,
            duration_ms: *duration_ms,
            retry_after_secs: *retry_after_secs,
        }
    }
}

/// The whole `AgentResult` of a stored run: its `result` column with the accounting entries and
/// the final report put back where the result has them. A result stored whole is returned as is.
pub fn whole_result(run: &RunRecord, accounting: &[AccountingRecord]) -> Option<Value> {
    let mut result = run.result.clone()?;
    if let Value::Object(fields) = &mut result {
        if !fields.contains_key("accounting") {
            let entries = accounting.iter().map(|a| a.entry.to_value()).collect();
            fields.insert("accounting".into(), Value::Array(entries));
        }
        if let (false, Some(report)) = (fields.contains_key("final_report"), &run.final_report) {
            fields.insert("final_report".into(), report.clone());
        }
    }
    Some(result)
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl From<&AgentResult> for RunOutcome {
    fn from(result: &AgentResult) -> Self {
        Self {
            status: result.status(),
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
            result: Some(JsonText::of(&StoredResult::of(result))),
            accounting: result.accounting.iter().map(Into::into).collect(),
            notices: Vec::new(),
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
                usage: EntryUsage {
                    input_tokens: count(llm.tokens.input_tokens),
                    output_tokens: count(llm.tokens.output_tokens),
                    cached_tokens: count(llm.tokens.cached_tokens),
                    reasoning_tokens: count(llm.tokens.reasoning_tokens),
                    cost_usd: llm.cost_usd.unwrap_or(0.0),
                },
            },
            AccountingEntry::Tool(tool) => Self {
                entry_type: "tool".into(),
                provider: Some(tool.mcp_server.clone()),
                model: None,
                tool: Some(tool.command.clone()),
                status: status(tool.status).into(),
                ts: at(tool.timestamp),
                entry: json,
                usage: EntryUsage::default(),
            },
        }
    }
}

/// A token count as the store keeps it.
fn count(tokens: u64) -> i64 {
    i64::try_from(tokens).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn full_result() -> Value {
        let entry = json!({"type": "llm", "timestamp": 1, "status": "ok", "latency": 3,
            "provider": "p", "model": "m", "stopReason": "stop",
            "tokens": {"inputTokens": 10, "outputTokens": 5, "cachedTokens": 0, "totalTokens": 15},
            "agentId": "a", "callPath": "a", "txnId": "r", "originTxnId": "r"});
        json!({
            "run_id": "r", "success": false, "error": "upstream said no", "exit_reason": "final_answer",
            "final_report": {"status": "failure", "format": "markdown", "content": "no ✓", "ts": 2},
            "conversation": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "no ✓"}],
            "accounting": [entry],
            "usage": {"input_tokens": 10, "output_tokens": 5, "cached_tokens": 0, "total_tokens": 15},
            "cost_usd": 0.25, "turns": 1, "duration_ms": 7,
        })
    }

    fn record(result: Option<Value>, final_report: Option<Value>) -> RunRecord {
        RunRecord {
            id: "r".into(),
            agent: "a".into(),
            user_id: None,
            conversation_id: None,
            status: RunStatus::Failed,
            exit_reason: Some("final_answer".into()),
            success: Some(false),
            error: None,
            final_report,
            input_tokens: 10,
            output_tokens: 5,
            cached_tokens: 0,
            total_tokens: 15,
            cost_usd: 0.25,
            turns: 1,
            created_at: Utc::now(),
            finished_at: Some(Utc::now()),
            duration_ms: Some(7),
            result,
            owner: None,
            acted_by: None,
        }
    }

    #[test]
    fn the_stored_result_leaves_out_only_what_has_its_own_place() {
        let full = full_result();
        let result: AgentResult = serde_json::from_value(full.clone()).expect("an AgentResult");
        assert_eq!(
            serde_json::to_value(&result).expect("json"),
            full,
            "round trip"
        );
        let stored = RunOutcome::from(&result).result.expect("result").to_value();
        let mut expected = full;
        let fields = expected.as_object_mut().expect("object");
        fields.remove("accounting");
        fields.remove("final_report");
        assert_eq!(stored, expected);
    }

    #[test]
    fn whole_result_puts_back_the_accounting_and_the_final_report() {
        let full = full_result();
        let result: AgentResult = serde_json::from_value(full.clone()).expect("an AgentResult");
        let outcome = RunOutcome::from(&result);
        let stored = outcome.result.as_ref().map(JsonText::to_value);
        let report = outcome.final_report.as_ref().map(JsonText::to_value);
        let run = record(stored, report);
        assert_eq!(whole_result(&run, &outcome.accounting), Some(full.clone()));
        // A row written whole (before this change) is returned as it is.
        let old = record(Some(full.clone()), None);
        assert_eq!(whole_result(&old, &[]), Some(full));
        assert_eq!(whole_result(&record(None, None), &[]), None);
    }
}
