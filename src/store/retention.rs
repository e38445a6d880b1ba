//! Retention as the store does it (SPEC §14): the oldest rows of one kind deleted a small batch
//! at a time (each batch one short statement or transaction), and the lease that lets one
//! replica at a time sweep.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// A kind of data with its own retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetainedKind {
    /// Finished runs and their accounting rows, by `finished_at`.
    Runs,
    /// Run event rows, by `ts`.
    Events,
    /// Conversations and their messages, by `updated_at`.
    Conversations,
    /// Responses API objects, by `created_at`.
    Responses,
    /// Audit rows, by `at`.
    Audit,
}

impl RetainedKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Runs => "runs",
            Self::Events => "events",
            Self::Conversations => "conversations",
            Self::Responses => "responses",
            Self::Audit => "audit",
        }
    }
}

/// The lease row's name for the retention sweep.
pub const RETENTION_LEASE: &str = "retention";

#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Deletes up to `limit` of the oldest rows of `kind` older than `before`; how many.
    async fn delete_expired(
        &self,
        kind: RetainedKind,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, StoreError>;
    /// Takes (or renews) the lease `name` for `holder` until `until`, unless another holder's
    /// lease is still running at `now`; whether `holder` holds it.
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
}
