//! The run recorder's transaction: whole run rows (upserted), accounting rows and events, each
//! as multi-row INSERTs, so a batch of many runs costs a handful of statements. The row
//! event writer here is shared with `append_run_events`.

use sqlx::types::Json;

use crate::store::sql::at;
use crate::store::{JsonText, NewRun, RunOutcome, RunWrite};

/// Runs per multi-row statement: a run row binds 22 values, one of them the whole result.
pub const RUNS_PER_INSERT: usize = 25;

/// Followed by the VALUES rows. A run already stored as running gets the end of a finished
/// row; a running row never overwrites anything, and neither does anything a run that has
/// already ended, with one exception: an `owner_lost` end, written by another replica that took
/// the owner for dead, gives way to the owner's own end (same `owner`): the owner was alive, and
/// its result is the run's.
pub const UPSERT_RUNS: &str = "INSERT INTO runs (id, agent, user_id, conversation_id, created_at, status, \
     exit_reason, success, error, final_report, input_tokens, output_tokens, cached_tokens, total_tokens, \
     cost_usd, turns, finished_at, duration_ms, result, owner, acted_by, key_id) ";
pub const UPSERT_RUNS_END: &str = " ON CONFLICT (id) DO UPDATE SET status = excluded.status, \
     exit_reason = excluded.exit_reason, success = excluded.success, error = excluded.error, \
     final_report = excluded.final_report, input_tokens = excluded.input_tokens, \
     output_tokens = excluded.output_tokens, cached_tokens = excluded.cached_tokens, \
     total_tokens = excluded.total_tokens, cost_usd = excluded.cost_usd, turns = excluded.turns, \
     finished_at = excluded.finished_at, duration_ms = excluded.duration_ms, result = excluded.result \
     WHERE excluded.status <> 'running' AND (runs.status = 'running' \
     OR (runs.exit_reason = 'owner_lost' AND runs.owner = excluded.owner))";

/// The columns of one run row after `id, agent, user_id, conversation_id, created_at`; a run
/// that has not finished has status `running` and empty end columns.
pub struct EndColumns<'a> {
    pub status: &'a str,
    pub exit_reason: Option<&'a str>,
    pub success: Option<bool>,
    pub error: Option<&'a str>,
    pub final_report: Option<Json<&'a JsonText>>,
    pub tokens: [i64; 4],
    pub cost_usd: f64,
    pub turns: i64,
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
    pub duration_ms: Option<i64>,
    pub result: Option<Json<&'a JsonText>>,
}

impl<'a> EndColumns<'a> {
    pub fn of(outcome: Option<&'a RunOutcome>) -> Self {
        match outcome {
            None => Self {
                status: crate::vocabulary::RunStatus::Running.as_str(),
                exit_reason: None,
                success: None,
                error: None,
                final_report: None,
                tokens: [0; 4],
                cost_usd: 0.0,
                turns: 0,
                finished_at: None,
                duration_ms: None,
                result: None,
            },
            Some(end) => Self {
                status: end.status.as_str(),
                exit_reason: Some(end.exit_reason),
                success: Some(end.success),
                error: end.error.as_deref(),
                final_report: end.final_report.as_ref().map(Json),
                tokens: [
                    end.input_tokens,
                    end.output_tokens,
                    end.cached_tokens,
                    end.total_tokens,
                ],
                cost_usd: end.cost_usd,
                turns: end.turns,
                finished_at: Some(at(end.finished_at)),
                duration_ms: Some(end.duration_ms),
                result: end.result.as_ref().map(Json),
            },
        }
    }
}

/// One accounting row: (run id, index in the run, record).
pub type AccountingRow<'a> = (&'a str, i64, &'a crate::store::AccountingRecord);

/// One multi-row statement of a run batch.
pub enum BatchStatement<'a> {
    Runs(&'a [RunWrite]),
    Accounting(&'a [AccountingRow<'a>]),
    Events(&'a [super::run_events::StoredRow<'a>]),
}

/// What a batch's statements bind besides its run rows: the accounting rows of its finished
/// runs and its events packed into rows.
pub struct BatchRows<'a> {
    accounting: Vec<AccountingRow<'a>>,
    events: Vec<super::run_events::StoredRow<'a>>,
}

impl<'a> BatchRows<'a> {
    pub fn of(batch: &'a crate::store::RunBatch) -> Self {
        Self {
            accounting: accounting_rows(&batch.runs),
            events: super::run_events::rows_of(&batch.events),
        }
    }

    /// The batch's statements, in the order they are written: run rows (a run's row before
    /// its accounting), accounting rows, events; each of at most its row count and, past its
    /// first row, [`super::STATEMENT_DATA_BYTES`] of large values.
    pub fn statements<'s>(
        &'s self,
        batch: &'s crate::store::RunBatch,
    ) -> impl Iterator<Item = BatchStatement<'s>> {
        let runs = super::statements(&batch.runs, RUNS_PER_INSERT, run_row_bytes)
            .map(BatchStatement::Runs);
        let accounting = super::statements(&self.accounting, super::ROWS_PER_INSERT, |row| {
            row.2.entry.as_str().len()
        })
        .map(BatchStatement::Accounting);
        let events = super::run_events::statements(&self.events, super::ROWS_PER_INSERT)
            .map(BatchStatement::Events);
        runs.chain(accounting).chain(events)
    }
}

/// The large values of one run row: its result, final report and error.
fn run_row_bytes(write: &RunWrite) -> usize {
    write.outcome.as_ref().map_or(0, |end| {
        end.result.as_ref().map_or(0, |r| r.as_str().len())
            + end.final_report.as_ref().map_or(0, |r| r.as_str().len())
            + end.error.as_ref().map_or(0, String::len)
    })
}

/// The accounting rows of the finished runs among `writes`.
fn accounting_rows(writes: &[RunWrite]) -> Vec<AccountingRow<'_>> {
    writes
        .iter()
        .filter_map(|write| write.outcome.as_ref().map(|end| (&write.run, end)))
        .flat_map(|(run, end): (&NewRun, &RunOutcome)| {
            (0_i64..)
                .zip(end.accounting.iter())
                .map(move |(idx, record)| (run.id.as_str(), idx, record))
        })
        .collect()
}

/// Implements [`RunBatchStore`](crate::store::RunBatchStore) and the row writers the other
/// store traits share, for a backend.
macro_rules! impl_run_batch_store {
    ($store:ty, $db:ty) => {
        impl $store {
            /// Appends one multi-row INSERT of packed event rows to `sql`.
            fn push_event_rows<'q>(
                sql: &mut sqlx::QueryBuilder<$db>,
                rows: &'q [$crate::store::sql::run_events::StoredRow<'q>],
            ) {
                use $crate::store::sql::{at, run_events as events};
                sql.push(events::INSERT_EVENTS);
                sql.push_values(rows, |mut row, stored| {
                    row.push_bind(stored.run_id)
                        .push_bind(stored.seq)
                        .push_bind(stored.last_seq)
                        .push_bind(stored.event_type)
                        .push_bind(sqlx::types::Json(&stored.data))
                        .push_bind(at(stored.ts));
                });
                sql.push(events::INSERT_EVENTS_END);
            }

            /// Appends one multi-row INSERT of accounting rows (run id, index, record).
            fn push_accounting_rows<'q>(
                sql: &mut sqlx::QueryBuilder<$db>,
                rows: &'q [$crate::store::sql::run_batch::AccountingRow<'q>],
            ) {
                use $crate::store::sql::{at, runs};
                sql.push(runs::INSERT_ACCOUNTING);
                sql.push_values(rows, |mut row, (run_id, idx, entry)| {
                    row.push_bind(*run_id)
                        .push_bind(*idx)
                        .push_bind(&entry.entry_type)
                        .push_bind(&entry.provider)
                        .push_bind(&entry.model)
                        .push_bind(&entry.tool)
                        .push_bind(&entry.status)
                        .push_bind(at(entry.ts))
                        .push_bind(sqlx::types::Json(&entry.entry))
                        .push_bind(entry.usage.input_tokens)
                        .push_bind(entry.usage.output_tokens)
                        .push_bind(entry.usage.cached_tokens)
                        .push_bind(entry.usage.reasoning_tokens)
                        .push_bind(entry.usage.cost_usd);
                });
                sql.push(runs::INSERT_ACCOUNTING_END);
            }

            /// Appends one multi-row upsert of run rows.
            fn push_run_rows(
                sql: &mut sqlx::QueryBuilder<$db>,
                writes: &[$crate::store::RunWrite],
            ) {
                use $crate::store::sql::at;
                use $crate::store::sql::run_batch::{EndColumns, UPSERT_RUNS, UPSERT_RUNS_END};
                sql.push(UPSERT_RUNS);
                sql.push_values(writes, |mut row, write| {
                    let run = &write.run;
                    let end = EndColumns::of(write.outcome.as_ref());
                    row.push_bind(&run.id)
                        .push_bind(&run.agent)
                        .push_bind(&run.user_id)
                        .push_bind(&run.conversation_id)
                        .push_bind(at(run.created_at))
                        .push_bind(end.status)
                        .push_bind(end.exit_reason)
                        .push_bind(end.success)
                        .push_bind(end.error)
                        .push_bind(end.final_report)
                        .push_bind(end.tokens[0])
                        .push_bind(end.tokens[1])
                        .push_bind(end.tokens[2])
                        .push_bind(end.tokens[3])
                        .push_bind(end.cost_usd)
                        .push_bind(end.turns)
                        .push_bind(end.finished_at)
                        .push_bind(end.duration_ms)
                        .push_bind(end.result)
                        .push_bind(&run.owner)
                        .push_bind(&run.acted_by)
                        .push_bind(&run.key_id);
                });
                sql.push(UPSERT_RUNS_END);
            }

            /// Appends `statement` to `sql`.
            fn push_batch_statement<'q>(
                sql: &mut sqlx::QueryBuilder<$db>,
                statement: $crate::store::sql::run_batch::BatchStatement<'q>,
            ) {
                use $crate::store::sql::run_batch::BatchStatement;
                match statement {
                    BatchStatement::Runs(writes) => Self::push_run_rows(sql, writes),
                    BatchStatement::Accounting(rows) => Self::push_accounting_rows(sql, rows),
                    BatchStatement::Events(rows) => Self::push_event_rows(sql, rows),
                }
            }

            /// Writes the batch's statements one by one in a transaction, with the webhook
            /// messages and the run notifications of the backend.
            async fn write_run_batch_statements(
                &self,
                batch: &$crate::store::RunBatch,
            ) -> Result<(), sqlx::Error> {
                let rows = $crate::store::sql::run_batch::BatchRows::of(batch);
                let mut tx = self.begin_write().await?;
                for statement in rows.statements(batch) {
                    let mut sql = sqlx::QueryBuilder::<$db>::new("");
                    Self::push_batch_statement(&mut sql, statement);
                    sql.build().execute(&mut *tx).await?;
                }
                for end in batch.runs.iter().filter_map(|write| write.outcome.as_ref()) {
                    Self::insert_delivery_rows(&mut tx, &end.notices).await?;
                }
                Self::notify_runs(&mut tx, &batch.run_ids()).await?;
                tx.commit().await
            }

            async fn insert_event_rows(
                tx: &mut sqlx::Transaction<'static, $db>,
                events: &[$crate::store::NewRunEvent],
            ) -> Result<(), sqlx::Error> {
                use $crate::store::sql::{ROWS_PER_INSERT, run_events};
                let rows = run_events::rows_of(events);
                for chunk in run_events::statements(&rows, ROWS_PER_INSERT) {
                    let mut sql = sqlx::QueryBuilder::<$db>::new("");
                    Self::push_event_rows(&mut sql, chunk);
                    sql.build().execute(&mut **tx).await?;
                }
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::RunBatchStore for $store {
            async fn write_run_batch(
                &self,
                batch: &$crate::store::RunBatch,
            ) -> Result<(), $crate::store::StoreError> {
                if batch.runs.is_empty() && batch.events.is_empty() {
                    return Ok(());
                }
                self.write_run_rows(batch).await?;
                for end in batch.runs.iter().filter_map(|write| write.outcome.as_ref()) {
                    self.deliveries_added(&end.notices);
                }
                Ok(())
            }

            async fn reachable(&self) -> Result<(), $crate::store::StoreError> {
                $crate::store::Store::ping(self).await
            }

            fn preferred_batch_size(&self) -> usize {
                Self::RECORDER_BATCH
            }
        }
    };
}
pub(crate) use impl_run_batch_store;
