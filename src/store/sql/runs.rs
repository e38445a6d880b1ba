//! Statements and rows of `runs` and `run_accounting`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use crate::store::{AccountingRecord, JsonText, RunRecord};

pub const SELECT_RUN: &str = "SELECT id, agent, user_id, conversation_id, status, exit_reason, success, error, final_report, \
     input_tokens, output_tokens, cached_tokens, total_tokens, cost_usd, turns, created_at, finished_at, duration_ms, result, owner, acted_by \
     FROM runs WHERE id = $1";

/// The columns of a listed run: every one but the whole result, which can be large.
pub const LIST_RUNS: &str = "SELECT id, agent, user_id, conversation_id, status, exit_reason, success, error, final_report, \
     input_tokens, output_tokens, cached_tokens, total_tokens, cost_usd, turns, created_at, finished_at, duration_ms, \
     NULL AS result, owner, acted_by FROM runs WHERE 1 = 1";

/// Appends `filter`'s conditions, order and limit to a [`LIST_RUNS`] query.
pub fn push_run_filter<DB>(query: &mut sqlx::QueryBuilder<DB>, filter: &crate::store::RunFilter)
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> DateTime<Utc>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    use crate::store::RunOwnerFilter;
    match &filter.owner {
        RunOwnerFilter::Everyone => {}
        RunOwnerFilter::User(Some(user)) => {
            query.push(" AND user_id = ").push_bind(user.clone());
        }
        RunOwnerFilter::User(None) => {
            query.push(" AND user_id IS NULL");
        }
    }
    if let Some(agent) = &filter.agent {
        query.push(" AND agent = ").push_bind(agent.clone());
    }
    if let Some(allowed) = &filter.agents_allowed {
        if allowed.is_empty() {
            query.push(" AND 1 = 0");
        } else {
            query.push(" AND agent IN (");
            let mut agents = query.separated(", ");
            for agent in allowed {
                agents.push_bind(agent.clone());
            }
            query.push(")");
        }
    }
    if let Some(conversation) = &filter.conversation_id {
        query
            .push(" AND conversation_id = ")
            .push_bind(conversation.clone());
    }
    if !filter.statuses.is_empty() {
        query.push(" AND status IN (");
        let mut statuses = query.separated(", ");
        for status in &filter.statuses {
            statuses.push_bind(status.clone());
        }
        query.push(")");
    }
    if let Some(after) = &filter.after {
        query
            .push(" AND (created_at < ")
            .push_bind(crate::store::sql::at(after.created_at))
            .push(" OR (created_at = ")
            .push_bind(crate::store::sql::at(after.created_at))
            .push(" AND id < ")
            .push_bind(after.id.clone())
            .push("))");
    }
    query
        .push(" ORDER BY created_at DESC, id DESC LIMIT ")
        .push_bind(i64::from(filter.limit));
}

/// Followed by the VALUES rows; a repeated `(run_id, idx)` is skipped so a retry cannot duplicate.
pub const INSERT_ACCOUNTING: &str = "INSERT INTO run_accounting (run_id, idx, type, provider, \
     model, tool, status, ts, entry, input_tokens, output_tokens, cached_tokens, reasoning_tokens, \
     cost_usd) ";
pub const INSERT_ACCOUNTING_END: &str = " ON CONFLICT (run_id, idx) DO NOTHING";

pub const SELECT_ACCOUNTING: &str = "SELECT type, provider, model, tool, status, ts, entry, \
     input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost_usd \
     FROM run_accounting WHERE run_id = $1 ORDER BY idx";

#[derive(sqlx::FromRow)]
pub struct RunRow {
    id: String,
    agent: String,
    user_id: Option<String>,
    conversation_id: Option<String>,
    status: crate::vocabulary::RunStatus,
    exit_reason: Option<String>,
    success: Option<bool>,
    error: Option<String>,
    final_report: Option<Json<Value>>,
    input_tokens: i64,
    output_tokens: i64,
    cached_tokens: i64,
    total_tokens: i64,
    cost_usd: f64,
    turns: i64,
    created_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    duration_ms: Option<i64>,
    result: Option<Json<Value>>,
    owner: Option<String>,
    acted_by: Option<String>,
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
            total_tokens: row.total_tokens,
            cost_usd: row.cost_usd,
            turns: row.turns,
            created_at: row.created_at,
            finished_at: row.finished_at,
            duration_ms: row.duration_ms,
            result: row.result.map(|j| j.0),
            owner: row.owner,
            acted_by: row.acted_by,
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct AccountingRow {
    #[sqlx(rename = "type")]
    entry_type: String,
    provider: Option<String>,
    model: Option<String>,
    tool: Option<String>,
    status: String,
    ts: DateTime<Utc>,
    entry: Json<JsonText>,
    input_tokens: i64,
    output_tokens: i64,
    cached_tokens: i64,
    reasoning_tokens: i64,
    cost_usd: f64,
}

impl From<AccountingRow> for AccountingRecord {
    fn from(row: AccountingRow) -> Self {
        Self {
            entry_type: row.entry_type,
            provider: row.provider,
            model: row.model,
            tool: row.tool,
            status: row.status,
            ts: row.ts,
            entry: row.entry.0,
            usage: crate::store::EntryUsage {
                input_tokens: row.input_tokens,
                output_tokens: row.output_tokens,
                cached_tokens: row.cached_tokens,
                reasoning_tokens: row.reasoning_tokens,
                cost_usd: row.cost_usd,
            },
        }
    }
}

/// Implements [`RunStore`](crate::store::RunStore) for a backend.
macro_rules! impl_run_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::RunStore for $store {
            async fn get_run(
                &self,
                run_id: &str,
            ) -> Result<Option<$crate::store::RunRecord>, $crate::store::StoreError> {
                let row = sqlx::query_as::<_, $crate::store::sql::runs::RunRow>(
                    $crate::store::sql::runs::SELECT_RUN,
                )
                .bind(run_id)
                .fetch_optional(&self.reader)
                .await?;
                Ok(row.map(Into::into))
            }

            async fn list_runs(
                &self,
                filter: &$crate::store::RunFilter,
            ) -> Result<Vec<$crate::store::RunRecord>, $crate::store::StoreError> {
                let mut query = sqlx::QueryBuilder::<$db>::new($crate::store::sql::runs::LIST_RUNS);
                $crate::store::sql::runs::push_run_filter(&mut query, filter);
                let rows = query
                    .build_query_as::<$crate::store::sql::runs::RunRow>()
                    .fetch_all(&self.reader)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn list_accounting(
                &self,
                run_id: &str,
            ) -> Result<Vec<$crate::store::AccountingRecord>, $crate::store::StoreError> {
                let rows = sqlx::query_as::<_, $crate::store::sql::runs::AccountingRow>(
                    $crate::store::sql::runs::SELECT_ACCOUNTING,
                )
                .bind(run_id)
                .fetch_all(&self.reader)
                .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }
        }
    };
}
pub(crate) use impl_run_store;
