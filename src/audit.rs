//! The audit log (SPEC §14): who did what to which thing, and how it ended, for the acts an
//! organisation answers for: key and secret changes, approval decisions, cancels, budget raises,
//! reloads, schedule and webhook changes, user erasure and admins reading other users' data.
//!
//! [`record`] appends one row (the store chains it to the one before); [`verify`] walks the
//! chain and names the first row that does not fit. Rows carry names and ids, never content
//! (no secret values, no messages), so an erased user's tombstone stays content-free.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::store::{AuditEntry, AuditFilter, AuditStore, GENESIS_HASH, NewAuditEntry, StoreError};

/// What was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub enum AuditAction {
    #[serde(rename = "key.created")]
    KeyCreated,
    #[serde(rename = "key.rotated")]
    KeyRotated,
    #[serde(rename = "key.revoked")]
    KeyRevoked,
    #[serde(rename = "secret.set")]
    SecretSet,
    #[serde(rename = "secret.deleted")]
    SecretDeleted,
    #[serde(rename = "approval.decided")]
    ApprovalDecided,
    #[serde(rename = "run.cancelled")]
    RunCancelled,
    #[serde(rename = "budget.raised")]
    BudgetRaised,
    #[serde(rename = "config.reloaded")]
    ConfigReloaded,
    #[serde(rename = "schedule.changed")]
    ScheduleChanged,
    #[serde(rename = "webhook.changed")]
    WebhookChanged,
    #[serde(rename = "user.exported")]
    UserExported,
    #[serde(rename = "user.erased")]
    UserErased,
    #[serde(rename = "admin.read")]
    AdminRead,
}

impl AuditAction {
    pub const ALL: [AuditAction; 14] = [
        Self::KeyCreated,
        Self::KeyRotated,
        Self::KeyRevoked,
        Self::SecretSet,
        Self::SecretDeleted,
        Self::ApprovalDecided,
        Self::RunCancelled,
        Self::BudgetRaised,
        Self::ConfigReloaded,
        Self::ScheduleChanged,
        Self::WebhookChanged,
        Self::UserExported,
        Self::UserErased,
        Self::AdminRead,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::KeyCreated => "key.created",
            Self::KeyRotated => "key.rotated",
            Self::KeyRevoked => "key.revoked",
            Self::SecretSet => "secret.set",
            Self::SecretDeleted => "secret.deleted",
            Self::ApprovalDecided => "approval.decided",
            Self::RunCancelled => "run.cancelled",
            Self::BudgetRaised => "budget.raised",
            Self::ConfigReloaded => "config.reloaded",
            Self::ScheduleChanged => "schedule.changed",
            Self::WebhookChanged => "webhook.changed",
            Self::UserExported => "user.exported",
            Self::UserErased => "user.erased",
            Self::AdminRead => "admin.read",
        }
    }

    /// The action a filter names, `None` for a name no row has.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|action| action.as_str() == name)
    }
}

/// How the act ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    Success,
    Denied,
    Failed,
}

impl AuditOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Denied => "denied",
            Self::Failed => "failed",
        }
    }
}

/// Who acted: the caller's user and key, and the request it came in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Actor {
    pub user: Option<String>,
    pub key_id: Option<String>,
    pub request_id: Option<String>,
}

impl Actor {
    /// agentd itself (a reload by signal, a retention sweep).
    pub fn system() -> Self {
        Self {
            user: Some("agentd".into()),
            ..Self::default()
        }
    }
}

/// One act to record.
#[derive(Debug, Clone)]
pub struct AuditEvent {
    pub actor: Actor,
    pub action: AuditAction,
    /// What was acted on (`run:ID`, `user:alice/secret:github`, `key:ID`, …).
    pub target: String,
    pub outcome: AuditOutcome,
    /// Facts about the act: names and numbers, never content.
    pub details: Option<Value>,
}

impl AuditEvent {
    pub fn new(actor: Actor, action: AuditAction, target: impl Into<String>) -> Self {
        Self {
            actor,
            action,
            target: target.into(),
            outcome: AuditOutcome::Success,
            details: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn with_outcome(mut self, outcome: AuditOutcome) -> Self {
        self.outcome = outcome;
        self
    }
}

/// Appends `event` to the audit log now.
pub async fn record(store: &dyn AuditStore, event: AuditEvent) -> Result<AuditEntry, StoreError> {
    let entry = NewAuditEntry {
        at: Utc::now(),
        actor_user: event.actor.user,
        actor_key: event.actor.key_id,
        action: event.action.as_str().to_string(),
        target: Some(event.target),
        request_id: event.actor.request_id,
        outcome: event.outcome.as_str().to_string(),
        details: event.details.map(|details| details.to_string()),
    };
    store.append_audit(&entry).await
}

/// [`record`], logging instead of failing: for acts that already happened, whose answer must
/// not turn into an error because the log could not be written.
pub async fn record_or_log(store: &dyn AuditStore, event: AuditEvent) {
    let action = event.action.as_str();
    if let Err(error) = record(store, event).await {
        tracing::error!(%error, action, "could not write an audit row");
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Verification {
    /// Rows checked.
    pub rows: u64,
    /// The first row checked (the oldest kept; older ones were removed by retention).
    pub first_seq: Option<i64>,
    pub last_seq: Option<i64>,
    pub ok: bool,
    /// The first row that does not fit the chain, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken: Option<BrokenRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct BrokenRow {
    pub seq: i64,
    pub reason: String,
}

/// Rows read per page while verifying.
const VERIFY_PAGE: u32 = 1000;

/// Walks the whole chain, oldest row first: each row's hash must be the hash of its fields,
/// its `prev_hash` the hash of the row before (the first kept row may follow removed ones),
/// its number the one after, and the last row must be the head the lock row names.
pub async fn verify(store: &dyn AuditStore) -> Result<Verification, StoreError> {
    let mut check = ChainCheck::default();
    loop {
        let page = store
            .list_audit(&AuditFilter {
                after_seq: check.last_seq.unwrap_or(0),
                limit: VERIFY_PAGE,
                ..AuditFilter::default()
            })
            .await?;
        let Some(last) = page.last().map(|row| row.seq) else {
            break;
        };
        for row in &page {
            if let Err(reason) = check.next(row) {
                return Ok(check.broken(row.seq, reason));
            }
        }
        check.last_seq = Some(last);
    }
    let (head_seq, head_hash) = store.audit_head().await?;
    match (&check.last_hash, check.last_seq) {
        (Some(hash), Some(seq)) if seq != head_seq || *hash != head_hash => Ok(check.broken(
            seq,
            format!("rows after {seq} up to {head_seq} are missing"),
        )),
        (None, None) if head_seq != 0 => Ok(check.broken(
            1,
            format!("the log is empty but its head names row {head_seq}"),
        )),
        _ => Ok(check.finish()),
    }
}

#[derive(Default)]
struct ChainCheck {
    rows: u64,
    first_seq: Option<i64>,
    last_seq: Option<i64>,
    last_hash: Option<String>,
}

impl ChainCheck {
    fn next(&mut self, row: &AuditEntry) -> Result<(), String> {
        if !row.hash_matches() {
            return Err("its hash does not match its contents (the row was edited)".into());
        }
        match (&self.last_hash, self.last_seq) {
            (Some(hash), Some(seq)) => {
                if row.seq != seq + 1 {
                    return Err(format!("rows {} to {} are missing", seq + 1, row.seq - 1));
                }
                if row.prev_hash != *hash {
                    return Err("its prev_hash is not the hash of the row before".into());
                }
            }
            _ if row.seq == 1 && row.prev_hash != GENESIS_HASH => {
                return Err("the first row does not start the chain".into());
            }
            _ => self.first_seq = Some(row.seq),
        }
        self.rows += 1;
        self.last_seq = Some(row.seq);
        self.last_hash = Some(row.hash.clone());
        Ok(())
    }

    fn broken(&self, seq: i64, reason: String) -> Verification {
        Verification {
            rows: self.rows,
            first_seq: self.first_seq,
            last_seq: self.last_seq,
            ok: false,
            broken: Some(BrokenRow { seq, reason }),
        }
    }

    fn finish(&self) -> Verification {
        Verification {
            rows: self.rows,
            first_seq: self.first_seq,
            last_seq: self.last_seq,
            ok: true,
            broken: None,
        }
    }
}

/// The wire form of a row (`GET /v1/audit`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AuditRecord {
    pub seq: i64,
    /// RFC 3339.
    pub at: DateTime<Utc>,
    pub actor_user: Option<String>,
    pub actor_key: Option<String>,
    pub action: String,
    pub target: Option<String>,
    pub request_id: Option<String>,
    /// `success`, `denied` or `failed`.
    pub outcome: String,
    /// Facts about the act (a JSON object), never content.
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
    pub prev_hash: String,
    pub hash: String,
}

impl From<AuditEntry> for AuditRecord {
    fn from(row: AuditEntry) -> Self {
        let entry = row.entry;
        Self {
            seq: row.seq,
            at: entry.at,
            actor_user: entry.actor_user,
            actor_key: entry.actor_key,
            action: entry.action,
            target: entry.target,
            request_id: entry.request_id,
            outcome: entry.outcome,
            details: entry
                .details
                .and_then(|text| serde_json::from_str(&text).ok()),
            prev_hash: row.prev_hash,
            hash: row.hash,
        }
    }
}
