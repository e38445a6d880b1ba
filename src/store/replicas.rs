//! What lets runs outlive a process (SPEC §7): the processes ("replicas") sharing the store and
//! their heartbeats, the runs whose owner stopped beating (ended here `owner_lost`, exactly once
//! whichever replica asks, and replaced by the owner's own end should it turn out alive),
//! idempotent submissions (`requestId`) and cancellations waiting for a run's owner. Waking other replicas is the backend's business: PostgreSQL notifies on the
//! channels below in the same transaction as the write; SQLite is one process and needs nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{JsonText, StoreError};

/// The PostgreSQL channel that carries the id of a run whose events or end were just written.
pub const RUN_EVENTS_CHANNEL: &str = "agentd_run_events";
/// The PostgreSQL channel that carries `cancel <mode> <run id>` to the run's owner.
pub const RUN_CONTROL_CHANNEL: &str = "agentd_run_control";

/// One process sharing the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Replica {
    pub id: String,
    /// The machine it runs on, so a process on the same machine can tell it is gone.
    pub host: String,
    pub pid: i64,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
}

/// A run still `running` whose owner is gone.
#[derive(Debug, Clone, PartialEq)]
pub struct OrphanedRun {
    pub id: String,
    pub owner: Option<String>,
    pub created_at: DateTime<Utc>,
    /// It holds its conversation's turn (its user's message is being answered).
    pub answering: bool,
}

/// How an orphaned run is ended: the run row's end. No event is appended: the owner may still
/// be alive and numbering events, and a follower ends the stream of a run ended without a
/// stored `run.finished` with `error` and `run.finished` made from its stored result.
#[derive(Debug, Clone)]
pub struct OrphanEnd {
    pub run_id: String,
    pub error: String,
    pub finished_at: DateTime<Utc>,
    pub duration_ms: i64,
    /// The whole `AgentResult` of the ended run.
    pub result: JsonText,
    /// For a run that held its conversation's turn: the assistant message stored for it (when
    /// the conversation ends with the user's message) in the transaction that ends the run,
    /// which also gives the turn back (SPEC §13: the history alternates as answered).
    pub lost_answer: Option<String>,
}

/// A cancel waiting for the run's owner to take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCancel {
    pub run_id: String,
    /// `stop` or `abort`.
    pub mode: String,
}

#[async_trait]
pub trait ReplicaStore: Send + Sync {
    /// Records (or re-records) a replica with its first heartbeat.
    async fn register_replica(&self, replica: &Replica) -> Result<(), StoreError>;
    /// Moves the replica's heartbeat; `false` when its row is gone (it was taken for dead).
    async fn beat(&self, replica_id: &str, at: DateTime<Utc>) -> Result<bool, StoreError>;
    async fn remove_replica(&self, replica_id: &str) -> Result<(), StoreError>;
    async fn list_replicas(&self) -> Result<Vec<Replica>, StoreError>;
    /// Runs still `running` whose owner has no replica row or (with `stale_before`) last beat
    /// before `stale_before`.
    async fn orphaned_runs(
        &self,
        stale_before: Option<DateTime<Utc>>,
        limit: u32,
    ) -> Result<Vec<OrphanedRun>, StoreError>;
    /// Ends the run `failed` / `owner_lost` if it is still `running` (and wakes its followers),
    /// storing its `lost_answer` in the same transaction; `false` when another replica (or its
    /// owner) ended it first, and then stores nothing. Its owner's own end, written
    /// later, replaces this one ([`super::RunBatchStore::write_run_batch`]).
    async fn end_orphaned_run(&self, end: &OrphanEnd) -> Result<bool, StoreError>;

    /// Records `run_id` as the run of `(user_key, request_id)`, or returns the run recorded
    /// before. `user_key` is the user id, or empty for callers without one.
    async fn claim_request(
        &self,
        user_key: &str,
        request_id: &str,
        run_id: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError>;
    /// The run recorded for `(user_key, request_id)`, if any.
    async fn requested_run(
        &self,
        user_key: &str,
        request_id: &str,
    ) -> Result<Option<String>, StoreError>;
    /// Forgets a claim whose run never started, so a retry starts it.
    async fn forget_request(
        &self,
        user_key: &str,
        request_id: &str,
        run_id: &str,
    ) -> Result<(), StoreError>;
    /// Drops claims made before `before`; returns how many.
    async fn prune_requests(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;

    /// Asks the run's owner to cancel it (and wakes it where the backend can).
    async fn request_cancel(
        &self,
        run_id: &str,
        mode: &str,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// Takes the cancels waiting for runs `owner` owns.
    async fn take_cancels(&self, owner: &str) -> Result<Vec<PendingCancel>, StoreError>;
}
