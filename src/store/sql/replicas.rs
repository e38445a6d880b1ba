//! Statements of `replicas`, `run_requests` and `run_cancellations`, and the owner-loss end of a
//! run (SPEC §7): its row only, no events (the owner may be alive and numbering them). Each backend supplies `notify_runs` and `notify_control`, which wake other
//! replicas inside the writing transaction (PostgreSQL) or do nothing (SQLite).

use chrono::{DateTime, Utc};

use crate::store::{OrphanedRun, PendingCancel, Replica};

pub const UPSERT_REPLICA: &str = "INSERT INTO replicas (id, host, pid, started_at, heartbeat_at) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at";
pub const BEAT: &str = "UPDATE replicas SET heartbeat_at = $2 WHERE id = $1";
pub const DELETE_REPLICA: &str = "DELETE FROM replicas WHERE id = $1";
pub const LIST_REPLICAS: &str =
    "SELECT id, host, pid, started_at, heartbeat_at FROM replicas ORDER BY started_at";

/// `$1` NULL: only runs whose owner has no replica row (a NULL comparison is never true).
/// `answering`: the run holds its conversation's turn.
pub const ORPHANED_RUNS: &str = "SELECT r.id, r.owner, r.created_at, EXISTS (SELECT 1 \
     FROM conversation_turns t WHERE t.run_id = r.id AND t.state = 'answering') AS answering \
     FROM runs r \
     LEFT JOIN replicas p ON p.id = r.owner \
     WHERE r.status = 'running' AND (p.id IS NULL OR p.heartbeat_at < $1) \
     ORDER BY r.created_at LIMIT $2";
pub const END_ORPHANED_RUN: &str = "UPDATE runs SET status = 'failed', exit_reason = 'owner_lost', \
     success = $2, error = $3, finished_at = $4, duration_ms = $5, result = $6 \
     WHERE id = $1 AND status = 'running'";
/// The conversation whose turn the run holds.
pub const ANSWERING_TURN: &str = "SELECT user_id, conversation_id FROM conversation_turns \
     WHERE run_id = $1 AND state = 'answering'";
/// The role of the conversation's last message.
pub const LAST_MESSAGE_ROLE: &str = "SELECT role FROM messages \
     WHERE user_id = $1 AND conversation_id = $2 ORDER BY seq DESC LIMIT 1";

pub const CLAIM_REQUEST: &str = "INSERT INTO run_requests (user_key, request_id, run_id, created_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (user_key, request_id) DO NOTHING";
pub const CLAIMED_RUN: &str =
    "SELECT run_id FROM run_requests WHERE user_key = $1 AND request_id = $2";
pub const FORGET_REQUEST: &str =
    "DELETE FROM run_requests WHERE user_key = $1 AND request_id = $2 AND run_id = $3";
pub const PRUNE_REQUESTS: &str = "DELETE FROM run_requests WHERE created_at < $1";

pub const REQUEST_CANCEL: &str = "INSERT INTO run_cancellations (run_id, mode, requested_at) \
     VALUES ($1, $2, $3) ON CONFLICT (run_id) DO UPDATE SET mode = excluded.mode, \
     requested_at = excluded.requested_at";
/// Driven by the (small) cancellations table, each looked up in `runs` by its key: selecting
/// `runs` by owner first scanned every run ever stored (the owner index is for running runs
/// only), which under a long soak took over a second per poll and, on SQLite, held the write
/// lock the recorder needs.
pub const TAKE_CANCELS: &str = "DELETE FROM run_cancellations WHERE EXISTS \
     (SELECT 1 FROM runs WHERE runs.id = run_cancellations.run_id AND runs.owner = $1) \
     RETURNING run_id, mode";

#[derive(sqlx::FromRow)]
pub struct ReplicaRow {
    id: String,
    host: String,
    pid: i64,
    started_at: DateTime<Utc>,
    heartbeat_at: DateTime<Utc>,
}

impl From<ReplicaRow> for Replica {
    fn from(row: ReplicaRow) -> Self {
        Self {
            id: row.id,
            host: row.host,
            pid: row.pid,
            started_at: row.started_at,
            heartbeat_at: row.heartbeat_at,
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct OrphanRow {
    id: String,
    owner: Option<String>,
    created_at: DateTime<Utc>,
    answering: bool,
}

impl From<OrphanRow> for OrphanedRun {
    fn from(row: OrphanRow) -> Self {
        Self {
            id: row.id,
            owner: row.owner,
            created_at: row.created_at,
            answering: row.answering,
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct CancelRow {
    run_id: String,
    mode: String,
}

impl From<CancelRow> for PendingCancel {
    fn from(row: CancelRow) -> Self {
        Self {
            run_id: row.run_id,
            mode: row.mode,
        }
    }
}

/// Implements [`ReplicaStore`](crate::store::ReplicaStore) for a backend.
macro_rules! impl_replica_store {
    ($store:ty, $db:ty) => {
        impl $store {
            /// Inside the transaction that ended the run `owner_lost`: when it held its
            /// conversation's turn and the conversation ends with the user's message, stores
            /// `answer` as the assistant's reply to it, then gives the turn back, so the queue
            /// moves on with a history that alternates.
            async fn answer_lost_turn(
                tx: &mut sqlx::Transaction<'static, $db>,
                run_id: &str,
                answer: &str,
                at: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::replicas as sql;
                let seat: Option<(String, String)> = sqlx::query_as(sql::ANSWERING_TURN)
                    .bind(run_id)
                    .fetch_optional(&mut **tx)
                    .await?;
                let Some((user_id, conversation_id)) = seat else {
                    return Ok(());
                };
                let last_role: Option<String> = sqlx::query_scalar(sql::LAST_MESSAGE_ROLE)
                    .bind(&user_id)
                    .bind(&conversation_id)
                    .fetch_optional(&mut **tx)
                    .await?;
                let user = $crate::store::conversations::role_name($crate::llm::Role::User);
                if last_role.as_deref() == Some(user) {
                    let reply = $crate::llm::ChatMessage::assistant(answer);
                    let message = $crate::store::NewMessage::from_chat(&reply, at);
                    Self::append_messages_in(tx, &user_id, &conversation_id, &[message]).await?;
                }
                sqlx::query($crate::store::sql::turns::END_TURN)
                    .bind(run_id)
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::ReplicaStore for $store {
            async fn register_replica(
                &self,
                replica: &$crate::store::Replica,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, replicas as sql};
                sqlx::query(sql::UPSERT_REPLICA)
                    .bind(&replica.id)
                    .bind(&replica.host)
                    .bind(replica.pid)
                    .bind(at(replica.started_at))
                    .bind(at(replica.heartbeat_at))
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn beat(
                &self,
                replica_id: &str,
                at: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::replicas as sql;
                let done = sqlx::query(sql::BEAT)
                    .bind(replica_id)
                    .bind($crate::store::sql::at(at))
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn remove_replica(
                &self,
                replica_id: &str,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query($crate::store::sql::replicas::DELETE_REPLICA)
                    .bind(replica_id)
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn list_replicas(
                &self,
            ) -> Result<Vec<$crate::store::Replica>, $crate::store::StoreError> {
                use $crate::store::sql::replicas as sql;
                let rows = sqlx::query_as::<_, sql::ReplicaRow>(sql::LIST_REPLICAS)
                    .fetch_all(&self.reader)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn orphaned_runs(
                &self,
                stale_before: Option<chrono::DateTime<chrono::Utc>>,
                limit: u32,
            ) -> Result<Vec<$crate::store::OrphanedRun>, $crate::store::StoreError> {
                use $crate::store::sql::replicas as sql;
                let limit = $crate::store::check_page_size(limit)?;
                // The writer sees the latest heartbeats and ends, which a read replica might not.
                let rows = sqlx::query_as::<_, sql::OrphanRow>(sql::ORPHANED_RUNS)
                    .bind(stale_before.map($crate::store::sql::at))
                    .bind(limit)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn end_orphaned_run(
                &self,
                end: &$crate::store::OrphanEnd,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{at, replicas as sql};
                let mut tx = self.begin_write().await?;
                let ended = sqlx::query(sql::END_ORPHANED_RUN)
                    .bind(&end.run_id)
                    .bind(false)
                    .bind(&end.error)
                    .bind(at(end.finished_at))
                    .bind(end.duration_ms)
                    .bind(sqlx::types::Json(&end.result))
                    .execute(&mut *tx)
                    .await?;
                if ended.rows_affected() == 0 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                if let Some(answer) = &end.lost_answer {
                    Self::answer_lost_turn(&mut tx, &end.run_id, answer, end.finished_at).await?;
                }
                Self::notify_runs(&mut tx, &[end.run_id.as_str()]).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn claim_request(
                &self,
                user_key: &str,
                request_id: &str,
                run_id: &str,
                at: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<String>, $crate::store::StoreError> {
                use $crate::store::sql::replicas as sql;
                let inserted = sqlx::query(sql::CLAIM_REQUEST)
                    .bind(user_key)
                    .bind(request_id)
                    .bind(run_id)
                    .bind($crate::store::sql::at(at))
                    .execute(&self.writer)
                    .await?;
                if inserted.rows_affected() > 0 {
                    return Ok(None);
                }
                let existing: Option<String> = sqlx::query_scalar(sql::CLAIMED_RUN)
                    .bind(user_key)
                    .bind(request_id)
                    .fetch_optional(&self.writer)
                    .await?;
                // Pruned between the two statements: claim again rather than lose the request.
                match existing {
                    Some(existing) => Ok(Some(existing)),
                    None => Box::pin(self.claim_request(user_key, request_id, run_id, at)).await,
                }
            }

            async fn requested_run(
                &self,
                user_key: &str,
                request_id: &str,
            ) -> Result<Option<String>, $crate::store::StoreError> {
                let run_id: Option<String> =
                    sqlx::query_scalar($crate::store::sql::replicas::CLAIMED_RUN)
                        .bind(user_key)
                        .bind(request_id)
                        .fetch_optional(&self.writer)
                        .await?;
                Ok(run_id)
            }

            async fn forget_request(
                &self,
                user_key: &str,
                request_id: &str,
                run_id: &str,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query($crate::store::sql::replicas::FORGET_REQUEST)
                    .bind(user_key)
                    .bind(request_id)
                    .bind(run_id)
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn prune_requests(
                &self,
                before: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, $crate::store::StoreError> {
                let done = sqlx::query($crate::store::sql::replicas::PRUNE_REQUESTS)
                    .bind($crate::store::sql::at(before))
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected())
            }

            async fn request_cancel(
                &self,
                run_id: &str,
                mode: &str,
                at: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query($crate::store::sql::replicas::REQUEST_CANCEL)
                    .bind(run_id)
                    .bind(mode)
                    .bind($crate::store::sql::at(at))
                    .execute(&mut *tx)
                    .await?;
                Self::notify_control(&mut tx, &format!("cancel {mode} {run_id}")).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn take_cancels(
                &self,
                owner: &str,
            ) -> Result<Vec<$crate::store::PendingCancel>, $crate::store::StoreError> {
                use $crate::store::sql::replicas as sql;
                let rows = sqlx::query_as::<_, sql::CancelRow>(sql::TAKE_CANCELS)
                    .bind(owner)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }
        }
    };
}
pub(crate) use impl_replica_store;
