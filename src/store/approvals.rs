//! Tool approvals as the store keeps them (SPEC §8): every call that waits for a person and its
//! decision, and the checkpoint of a waiting run. A run waits with status `waiting_approval` and
//! no owner; the replica that takes its checkpoint (exactly one, whichever asks first) becomes
//! its owner and runs it on. Deciding and taking are single statements or transactions, so two
//! replicas deciding or resuming at once cannot both win.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{JsonText, StoreError};

/// A call that starts waiting.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApproval {
    pub call_id: String,
    pub tool: String,
    pub server: String,
    pub arguments: JsonText,
    pub expires_at: DateTime<Utc>,
}

/// A run that stops to wait: its checkpoint and the calls it waits for.
#[derive(Debug, Clone)]
pub struct ParkedRun {
    pub run_id: String,
    pub user_id: Option<String>,
    pub agent: String,
    /// The session's checkpoint (`agent::approval::Checkpoint`).
    pub checkpoint: JsonText,
    /// The seq of the run's last event: the resumed run numbers on from it.
    pub last_seq: i64,
    pub approvals: Vec<NewApproval>,
    /// What it waits for: `waiting_approval` (its calls) or `waiting_budget` (a raise).
    pub status: crate::vocabulary::RunStatus,
    pub at: DateTime<Utc>,
    /// Webhook messages announcing the wait, put in the outbox in the same transaction.
    pub notices: Vec<super::NewDelivery>,
}

/// One waiting (or decided) call.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRecord {
    pub run_id: String,
    pub call_id: String,
    pub user_id: Option<String>,
    pub agent: String,
    pub tool: String,
    pub server: String,
    pub arguments: Value,
    pub requested_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// `approve`, `deny`, `expired`, `cancelled`; `None` while it waits.
    pub decision: Option<String>,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
    pub edited_arguments: Option<Value>,
    pub decided_at: Option<DateTime<Utc>>,
}

/// A decision to record.
#[derive(Debug, Clone)]
pub struct ApprovalDecision {
    pub run_id: String,
    pub call_id: String,
    /// `approve`, `deny` or `expired`.
    pub decision: String,
    pub decided_by: String,
    pub reason: Option<String>,
    pub edited_arguments: Option<JsonText>,
    pub at: DateTime<Utc>,
}

/// What became of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionWritten {
    Recorded,
    /// Decided before (the decision then).
    AlreadyDecided(String),
    /// Its time ran out before this decision came (only `expired` may still be written).
    Expired,
    NotFound,
}

/// The checkpoint of a run this replica now owns.
#[derive(Debug, Clone, PartialEq)]
pub struct TakenCheckpoint {
    pub checkpoint: JsonText,
    pub last_seq: i64,
}

#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// In one transaction: keeps the checkpoint and the waiting calls, and turns the run
    /// `parked.status` (`waiting_approval` or `waiting_budget`) with no owner (it holds no
    /// process while it waits).
    async fn park_run(&self, parked: &ParkedRun) -> Result<(), StoreError>;
    /// The calls of one run that waited or wait, in the order they were asked.
    async fn run_approvals(&self, run_id: &str) -> Result<Vec<ApprovalRecord>, StoreError>;
    /// Calls still waiting, oldest first: one user's, or everyone's for `None`.
    async fn waiting_approvals(
        &self,
        user_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;
    /// Records a decision if the call still waits and (unless the decision is `expired`) its
    /// time has not run out at `decision.at`. Of decisions made at once (on any replica, a
    /// cancel's `cancelled` included) exactly one is `Recorded`; the others are
    /// `AlreadyDecided` with the one that won.
    async fn decide_approval(
        &self,
        decision: &ApprovalDecision,
    ) -> Result<DecisionWritten, StoreError>;
    /// Calls whose time ran out by `now` and that nobody decided, as `(run_id, call_id)`.
    async fn expired_approvals(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError>;
    /// Runs waiting for approvals with a checkpoint and no call waiting any more: decided, but
    /// not yet taken by a replica (it was draining, or stopped between the decision and the
    /// take). Runs waiting for a budget raise are not among them.
    async fn decided_checkpoints(&self, limit: u32) -> Result<Vec<String>, StoreError>;
    /// Takes (deletes) the run's checkpoint and makes `owner` its owner, status `running`, if
    /// every call is decided — or, with `cancel`, whatever still waits (those calls become
    /// `cancelled`). `None` when there is no checkpoint, calls still wait, or another replica
    /// took it first.
    async fn take_checkpoint(
        &self,
        run_id: &str,
        owner: &str,
        cancel: bool,
    ) -> Result<Option<TakenCheckpoint>, StoreError>;
}
