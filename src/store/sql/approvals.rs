//! Statements of `run_approvals` and `run_checkpoints` (SPEC §8); see
//! [`ApprovalStore`](crate::store::ApprovalStore).

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use crate::store::{ApprovalRecord, JsonText};

pub const INSERT_CHECKPOINT: &str = "INSERT INTO run_checkpoints (run_id, state, last_seq, created_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, \
     last_seq = excluded.last_seq, created_at = excluded.created_at";
pub const INSERT_APPROVAL: &str = "INSERT INTO run_approvals (run_id, call_id, user_id, agent, tool, \
     server, arguments, requested_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
     ON CONFLICT (run_id, call_id) DO NOTHING";
pub const PARK_RUN: &str = "UPDATE runs SET status = $2, owner = NULL \
     WHERE id = $1 AND status = 'running'";
macro_rules! approval_select {
    ($rest:literal) => {
        concat!(
            "SELECT run_id, call_id, user_id, agent, tool, server, arguments, requested_at, ",
            "expires_at, decision, decided_by, reason, edited_arguments, decided_at ",
            "FROM run_approvals ",
            $rest
        )
    };
}
pub const RUN_APPROVALS: &str =
    approval_select!("WHERE run_id = $1 ORDER BY requested_at, call_id");
pub const WAITING_OF_USER: &str = approval_select!(
    "WHERE decision IS NULL AND user_id = $1 ORDER BY requested_at, run_id, call_id LIMIT $2"
);
pub const WAITING_OF_ALL: &str =
    approval_select!("WHERE decision IS NULL ORDER BY requested_at, run_id, call_id LIMIT $1");
pub const DECISION_OF: &str =
    "SELECT decision, expires_at FROM run_approvals WHERE run_id = $1 AND call_id = $2";
pub const DECIDE: &str = "UPDATE run_approvals SET decision = $3, decided_by = $4, reason = $5, \
     edited_arguments = $6, decided_at = $7 \
     WHERE run_id = $1 AND call_id = $2 AND decision IS NULL";
pub const EXPIRED: &str = "SELECT run_id, call_id FROM run_approvals \
     WHERE decision IS NULL AND expires_at <= $1 ORDER BY expires_at LIMIT $2";
pub const DECIDED_CHECKPOINTS: &str = "SELECT c.run_id FROM run_checkpoints c \
     JOIN runs r ON r.id = c.run_id AND r.status = 'waiting_approval' \
     WHERE NOT EXISTS (SELECT 1 FROM run_approvals a WHERE a.run_id = c.run_id AND a.decision IS NULL) \
     ORDER BY c.created_at LIMIT $1";
pub const UNDECIDED_COUNT: &str =
    "SELECT COUNT(*) FROM run_approvals WHERE run_id = $1 AND decision IS NULL";
pub const CANCEL_UNDECIDED: &str = "UPDATE run_approvals SET decision = 'cancelled', \
     decided_by = 'agentd', decided_at = $2 WHERE run_id = $1 AND decision IS NULL";
pub const TAKE_CHECKPOINT: &str =
    "DELETE FROM run_checkpoints WHERE run_id = $1 RETURNING state, last_seq";
pub const CLAIM_RUN: &str = "UPDATE runs SET status = 'running', owner = $2 \
     WHERE id = $1 AND status IN ('waiting_approval', 'waiting_budget')";

#[derive(sqlx::FromRow)]
pub struct ApprovalRow {
    run_id: String,
    call_id: String,
    user_id: Option<String>,
    agent: String,
    tool: String,
    server: String,
    arguments: Json<JsonText>,
    requested_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    decision: Option<String>,
    decided_by: Option<String>,
    reason: Option<String>,
    edited_arguments: Option<Json<JsonText>>,
    decided_at: Option<DateTime<Utc>>,
}

impl From<ApprovalRow> for ApprovalRecord {
    fn from(row: ApprovalRow) -> Self {
        Self {
            run_id: row.run_id,
            call_id: row.call_id,
            user_id: row.user_id,
            agent: row.agent,
            tool: row.tool,
            server: row.server,
            arguments: row.arguments.0.to_value(),
            requested_at: row.requested_at,
            expires_at: row.expires_at,
            decision: row.decision,
            decided_by: row.decided_by,
            reason: row.reason,
            edited_arguments: row.edited_arguments.map(|a| a.0.to_value()),
            decided_at: row.decided_at,
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct CheckpointRow {
    pub state: Json<JsonText>,
    pub last_seq: i64,
}

#[derive(sqlx::FromRow)]
pub struct DecisionRow {
    pub decision: Option<String>,
    pub expires_at: DateTime<Utc>,
}

/// Implements [`ApprovalStore`](crate::store::ApprovalStore) for a backend.
macro_rules! impl_approval_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ApprovalStore for $store {
            async fn park_run(
                &self,
                parked: &$crate::store::ParkedRun,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{approvals as sql, at};
                let mut tx = self.begin_write().await?;
                sqlx::query(sql::INSERT_CHECKPOINT)
                    .bind(&parked.run_id)
                    .bind(sqlx::types::Json(&parked.checkpoint))
                    .bind(parked.last_seq)
                    .bind(at(parked.at))
                    .execute(&mut *tx)
                    .await?;
                for approval in &parked.approvals {
                    sqlx::query(sql::INSERT_APPROVAL)
                        .bind(&parked.run_id)
                        .bind(&approval.call_id)
                        .bind(&parked.user_id)
                        .bind(&parked.agent)
                        .bind(&approval.tool)
                        .bind(&approval.server)
                        .bind(sqlx::types::Json(&approval.arguments))
                        .bind(at(parked.at))
                        .bind(at(approval.expires_at))
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::query(sql::PARK_RUN)
                    .bind(&parked.run_id)
                    .bind(parked.status.as_str())
                    .execute(&mut *tx)
                    .await?;
                Self::insert_delivery_rows(&mut tx, &parked.notices).await?;
                Self::notify_runs(&mut tx, &[parked.run_id.as_str()]).await?;
                tx.commit().await?;
                self.deliveries_added(&parked.notices);
                Ok(())
            }

            async fn run_approvals(
                &self,
                run_id: &str,
            ) -> Result<Vec<$crate::store::ApprovalRecord>, $crate::store::StoreError> {
                use $crate::store::sql::approvals as sql;
                let rows = sqlx::query_as::<_, sql::ApprovalRow>(sql::RUN_APPROVALS)
                    .bind(run_id)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn waiting_approvals(
                &self,
                user_id: Option<&str>,
                limit: u32,
            ) -> Result<Vec<$crate::store::ApprovalRecord>, $crate::store::StoreError> {
                use $crate::store::sql::approvals as sql;
                let limit = $crate::store::check_page_size(limit)?;
                let rows = match user_id {
                    Some(user) => {
                        sqlx::query_as::<_, sql::ApprovalRow>(sql::WAITING_OF_USER)
                            .bind(user)
                            .bind(limit)
                            .fetch_all(&self.writer)
                            .await?
                    }
                    None => {
                        sqlx::query_as::<_, sql::ApprovalRow>(sql::WAITING_OF_ALL)
                            .bind(limit)
                            .fetch_all(&self.writer)
                            .await?
                    }
                };
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn decide_approval(
                &self,
                decision: &$crate::store::ApprovalDecision,
            ) -> Result<$crate::store::DecisionWritten, $crate::store::StoreError> {
                use $crate::store::DecisionWritten;
                use $crate::store::sql::{approvals as sql, at};
                let mut tx = self.begin_write().await?;
                let current = sqlx::query_as::<_, sql::DecisionRow>(sql::DECISION_OF)
                    .bind(&decision.run_id)
                    .bind(&decision.call_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                let written = match current {
                    None => DecisionWritten::NotFound,
                    Some(sql::DecisionRow {
                        decision: Some(earlier),
                        ..
                    }) => DecisionWritten::AlreadyDecided(earlier),
                    Some(row)
                        if decision.decision != "expired" && row.expires_at <= decision.at =>
                    {
                        DecisionWritten::Expired
                    }
                    Some(_) => {
                        let updated = sqlx::query(sql::DECIDE)
                            .bind(&decision.run_id)
                            .bind(&decision.call_id)
                            .bind(&decision.decision)
                            .bind(&decision.decided_by)
                            .bind(&decision.reason)
                            .bind(decision.edited_arguments.as_ref().map(sqlx::types::Json))
                            .bind(at(decision.at))
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                        if updated == 1 {
                            DecisionWritten::Recorded
                        } else {
                            // Decided by another transaction since the read (PostgreSQL's
                            // read committed: the update waited for it, then found the call
                            // decided): that decision won, this one is refused.
                            let winner = sqlx::query_as::<_, sql::DecisionRow>(sql::DECISION_OF)
                                .bind(&decision.run_id)
                                .bind(&decision.call_id)
                                .fetch_optional(&mut *tx)
                                .await?;
                            match winner.and_then(|row| row.decision) {
                                Some(earlier) => DecisionWritten::AlreadyDecided(earlier),
                                None => DecisionWritten::NotFound,
                            }
                        }
                    }
                };
                tx.commit().await?;
                Ok(written)
            }

            async fn expired_approvals(
                &self,
                now: chrono::DateTime<chrono::Utc>,
                limit: u32,
            ) -> Result<Vec<(String, String)>, $crate::store::StoreError> {
                use $crate::store::sql::{approvals as sql, at};
                let limit = $crate::store::check_page_size(limit)?;
                let rows: Vec<(String, String)> = sqlx::query_as(sql::EXPIRED)
                    .bind(at(now))
                    .bind(limit)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(rows)
            }

            async fn decided_checkpoints(
                &self,
                limit: u32,
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                let limit = $crate::store::check_page_size(limit)?;
                let ids: Vec<String> =
                    sqlx::query_scalar($crate::store::sql::approvals::DECIDED_CHECKPOINTS)
                        .bind(limit)
                        .fetch_all(&self.writer)
                        .await?;
                Ok(ids)
            }

            async fn take_checkpoint(
                &self,
                run_id: &str,
                owner: &str,
                cancel: bool,
            ) -> Result<Option<$crate::store::TakenCheckpoint>, $crate::store::StoreError> {
                use $crate::store::sql::{approvals as sql, at};
                let mut tx = self.begin_write().await?;
                if cancel {
                    sqlx::query(sql::CANCEL_UNDECIDED)
                        .bind(run_id)
                        .bind(at(chrono::Utc::now()))
                        .execute(&mut *tx)
                        .await?;
                } else {
                    let undecided: i64 = sqlx::query_scalar(sql::UNDECIDED_COUNT)
                        .bind(run_id)
                        .fetch_one(&mut *tx)
                        .await?;
                    if undecided > 0 {
                        tx.rollback().await?;
                        return Ok(None);
                    }
                }
                let taken = sqlx::query_as::<_, sql::CheckpointRow>(sql::TAKE_CHECKPOINT)
                    .bind(run_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(taken) = taken else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                sqlx::query(sql::CLAIM_RUN)
                    .bind(run_id)
                    .bind(owner)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Some($crate::store::TakenCheckpoint {
                    checkpoint: taken.state.0,
                    last_seq: taken.last_seq,
                }))
            }
        }
    };
}
pub(crate) use impl_approval_store;
