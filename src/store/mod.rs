//! Persistence: the `Store` trait and its backends. SQLite (`sqlite://PATH`, the default,
//! created on first start) and PostgreSQL (`postgres://…`) keep the same data with native types
//! and behave identically (one conformance suite runs against both).
//!
//! The store holds runs and their accounting ([`RunStore`]), chat history ([`ConversationStore`]),
//! run events for replay ([`RunEventStore`]; runs and events are written in batches through the
//! [`RunRecorder`], [`RunBatchStore`])
//! the response cache table ([`CacheStore`]), the counters of per-key limits ([`KeyLimitStore`]),
//! and what lets runs outlive a process: replicas and their heartbeats, owner loss, `requestId`s
//! and cross-replica cancels ([`ReplicaStore`]), and the Responses API's objects
//! ([`ResponseStore`]), users' sealed tool secrets ([`SecretStore`]), the hash-chained audit log
//! ([`AuditStore`]), usage reports ([`UsageStore`]) and run-time API keys as digests
//! ([`ApiKeyStore`]), the turns messages take in a conversation ([`TurnStore`]), the webhook
//! outbox ([`WebhookStore`]), schedules ([`ScheduleStore`]), and attachments: blobs stored once
//! by SHA-256 and per-user file records ([`FileStore`]). It knows nothing about HTTP or
//! sessions: callers
//! pass plain records and scope every conversation query by user id.
//!
//! Migrations live in `migrations/sqlite` and `migrations/postgres` with the same version
//! numbers and are embedded at compile time; no database is needed to build.

mod api_keys;
mod approvals;
mod audit;
mod cache_entries;
mod conversations;
mod files;
mod key_limits;
mod postgres;
mod push_configs;
mod recorder;
mod replicas;
mod responses;
mod retention;
mod run_events;
mod runs;
mod schedules;
mod secrets;
mod signals;
mod sql;
mod sqlite;
mod sqlite_checkpoint;
mod turns;
mod usage;
mod user_data;
mod webhooks;

use std::sync::Arc;

use async_trait::async_trait;

pub use crate::json_text::JsonText;
pub use api_keys::{ApiKeyStore, Rotation, StoredApiKey};
pub use approvals::{
    ApprovalDecision, ApprovalRecord, ApprovalStore, DecisionWritten, NewApproval, ParkedRun,
    TakenCheckpoint,
};
pub use audit::{
    AuditEntry, AuditFilter, AuditStore, GENESIS_HASH, NewAuditEntry, chain_hash, hashed_time,
};
pub use cache_entries::{CacheEntry, CacheStore, NewCacheEntry};
pub use conversations::{
    Conversation, ConversationCursor, ConversationStore, NewConversation, NewMessage, StoredMessage,
};
pub use files::{BLOB_CHUNK_BYTES, FileRecord, FileStore, read_blob};
pub use key_limits::{DailyUsage, KeyLimitStore, RunSlotClaim};
pub use postgres::PostgresStore;
pub(crate) use postgres::redact_password;
pub use push_configs::{PushConfig, PushConfigStore};
pub use recorder::{RecorderMetrics, RecorderSettings, RunRecorder};
pub use replicas::{
    OrphanEnd, OrphanedRun, PendingCancel, RUN_CONTROL_CHANNEL, RUN_EVENTS_CHANNEL, Replica,
    ReplicaStore,
};
pub use responses::{ResponseStore, StoredResponse};
pub use retention::{RETENTION_LEASE, RetainedKind, RetentionStore};
pub use run_events::{NewRunEvent, RunEventRecord, RunEventStore};
pub use runs::{
    AccountingRecord, EntryUsage, NewRun, RunBatch, RunBatchStore, RunCursor, RunFilter,
    RunOutcome, RunOwnerFilter, RunRecord, RunStore, RunWrite, whole_result,
};
pub use schedules::{ScheduleFire, ScheduleRecord, ScheduleStore, ScheduleWork};
pub use secrets::{SealedSecret, SecretName, SecretStore};
pub use signals::StoreSignals;
pub use sqlite::SqliteStore;
pub use turns::{NewTurn, Turn, TurnState, TurnStore};
pub use usage::{MAX_USAGE_GROUPS, UsageGroup, UsageQuery, UsageRow, UsageStore};
pub use user_data::{Erased, Erasure, UserDataStore};
pub use webhooks::{AttemptOutcome, Delivery, DeliveryStatus, NewDelivery, Signer, WebhookStore};

/// The most rows one page of a listing may ask for.
pub const MAX_PAGE_SIZE: u32 = 1000;

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
    #[error("no {what} {id:?} for this user")]
    NotFound { what: &'static str, id: String },
    #[error("a {what} with id {id:?} already exists")]
    Conflict { what: &'static str, id: String },
    #[error("page size {requested} is out of range: ask for 1 to {MAX_PAGE_SIZE} rows")]
    PageSize { requested: u32 },
    #[error("cannot encode {what} as JSON: {detail}")]
    Encode { what: &'static str, detail: String },
}

impl StoreError {
    /// The store refused the data itself (a value it cannot hold, such as a NUL in PostgreSQL
    /// text; a violated constraint): writing the same rows again fails again. PostgreSQL
    /// SQLSTATE classes 22 (data exception), 23 (integrity constraint) and 54 (a program limit,
    /// such as a row too large to index); SQLite's `TOOBIG`, `CONSTRAINT`, `MISMATCH`, `RANGE`.
    pub fn is_refusal(&self) -> bool {
        match self {
            Self::Encode { .. } | Self::Conflict { .. } => true,
            Self::Query(sqlx::Error::Encode(_)) => true,
            Self::Query(sqlx::Error::Database(error)) => {
                error.code().is_some_and(|code| refusal_code(&code))
            }
            _ => false,
        }
    }

    /// The store cannot take the write now but may well later: it could not be reached (no
    /// connection, the pool timed out, the server is shutting down or out of connections), or
    /// it is out of room (a full disk, SQLite's `max_page_count`), out of memory, or its lock
    /// stayed taken past the busy timeout. Such an error is retried, never taken for a refusal
    /// of the data.
    pub fn is_unavailable(&self) -> bool {
        let error = match self {
            Self::Query(error) | Self::Open { source: error, .. } => error,
            _ => return false,
        };
        match error {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::BeginFailed => true,
            sqlx::Error::Database(error) => error.code().is_some_and(|code| transient_code(&code)),
            _ => false,
        }
    }

    /// The store is out of room for writes: PostgreSQL's `disk_full` (53100), SQLite's
    /// `SQLITE_FULL` (a full disk, or the database at its `max_page_count`).
    pub fn is_full(&self) -> bool {
        let Self::Query(sqlx::Error::Database(error)) = self else {
            return false;
        };
        error
            .code()
            .is_some_and(|code| match sqlite_primary_code(&code) {
                Some(primary) => primary == SQLITE_FULL,
                None => code == "53100",
            })
    }
}

/// SQLite's primary result code for a full database (`SQLITE_FULL`).
const SQLITE_FULL: i64 = 13;

/// The primary SQLite result code of a database error code, `None` for a PostgreSQL SQLSTATE
/// (always 5 characters; SQLite's extended codes stay below 10,000).
fn sqlite_primary_code(code: &str) -> Option<i64> {
    if code.len() == 5 {
        return None;
    }
    code.parse::<i64>().ok().map(|code| code & 0xff)
}

/// Whether a database error code says the store cannot take writes for now. PostgreSQL: 08
/// (connection exception), 57P0x (the server is going away), 53100/53200/53300 (disk full, out of
/// memory, no connection slot). SQLite: `BUSY` (the lock stayed taken past the busy timeout),
/// `IOERR` (the disk failed a read or write), `FULL`.
fn transient_code(code: &str) -> bool {
    const BUSY: i64 = 5;
    const IOERR: i64 = 10;
    match sqlite_primary_code(code) {
        Some(primary) => matches!(primary, BUSY | IOERR | SQLITE_FULL),
        None => {
            code.starts_with("08")
                || code.starts_with("57P")
                || matches!(code, "53100" | "53200" | "53300")
        }
    }
}

/// Whether a database error code says the data was refused: a 5-character PostgreSQL SQLSTATE,
/// or SQLite's (extended) result code, whose low byte is the primary code.
fn refusal_code(code: &str) -> bool {
    const TOOBIG: i64 = 18;
    const CONSTRAINT: i64 = 19;
    const MISMATCH: i64 = 20;
    const RANGE: i64 = 25;
    match sqlite_primary_code(code) {
        Some(primary) => matches!(primary, TOOBIG | CONSTRAINT | MISMATCH | RANGE),
        None => ["22", "23", "54"]
            .iter()
            .any(|class| code.starts_with(class)),
    }
}

/// Everything agentd persists. Implementations must behave identically.
#[async_trait]
pub trait Store:
    RunStore
    + RunBatchStore
    + ConversationStore
    + RunEventStore
    + CacheStore
    + ReplicaStore
    + KeyLimitStore
    + ResponseStore
    + ApprovalStore
    + SecretStore
    + AuditStore
    + UsageStore
    + ApiKeyStore
    + RetentionStore
    + UserDataStore
    + TurnStore
    + WebhookStore
    + PushConfigStore
    + ScheduleStore
    + FileStore
    + Send
    + Sync
{
    /// The PostgreSQL URL to listen for notifications on; `None` for a one-process backend.
    fn notification_url(&self) -> Option<&str> {
        None
    }

    /// Cheap reachability check for `/ready`.
    async fn ping(&self) -> Result<(), StoreError>;
    /// The backend itself, for what only it offers (such as [`SqliteStore::limit_pages`]).
    fn as_any(&self) -> &dyn std::any::Any;
    /// Closes every connection once in-flight queries finish; later calls fail.
    async fn close(&self);
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
    let store = open(url).await?;
    store.close().await;
    Ok(())
}

/// Rejects page sizes outside 1..=[`MAX_PAGE_SIZE`] with an error naming the size.
pub(crate) fn check_page_size(limit: u32) -> Result<i64, StoreError> {
    if (1..=MAX_PAGE_SIZE).contains(&limit) {
        Ok(i64::from(limit))
    } else {
        Err(StoreError::PageSize { requested: limit })
    }
}
