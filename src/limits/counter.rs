//! Where the limits are counted: [`LimitCounter`], with the store's tables
//! ([`crate::store::KeyLimitStore`], SQLite or PostgreSQL) or Redis behind it. A counter only
//! counts atomically; it never decides whether a request is refused.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use crate::store::{DailyUsage, RunSlotClaim, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum CountError {
    #[error("key limits (store): {0}")]
    Store(#[from] StoreError),
    #[error("key limits (redis): {0}")]
    Redis(#[from] crate::cache::RedisCallError),
}

impl CountError {
    /// Redis was skipped after a failure that was logged once: nothing to log again.
    pub fn is_skipped(&self) -> bool {
        matches!(self, Self::Redis(error) if error.is_skipped())
    }
}

/// A run slot this process holds and keeps renewing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSlot {
    pub key_id: String,
    pub run_id: String,
}

/// Atomic counters shared by every replica. Time is passed in, so all backends decide alike.
#[async_trait]
pub trait LimitCounter: Send + Sync {
    /// Counts one request in the window starting at `window_start`; returns the window's count
    /// including it.
    async fn count_request(
        &self,
        key_id: &str,
        window_start: DateTime<Utc>,
    ) -> Result<u64, CountError>;
    /// The window's count so far, read without counting.
    async fn requests_in(
        &self,
        key_id: &str,
        window_start: DateTime<Utc>,
    ) -> Result<u64, CountError>;
    /// How many of the key's run slots are held at `now`.
    async fn run_slots_held(&self, key_id: &str, now: DateTime<Utc>) -> Result<u64, CountError>;
    /// Takes one of the key's `limit` run slots for the run; false when all are held.
    async fn claim_run_slot(&self, claim: &RunSlotClaim<'_>) -> Result<bool, CountError>;
    /// Extends the leases of the slots `holder` (this replica) holds, listed in `held`.
    async fn renew_run_slots(
        &self,
        holder: &str,
        held: &[HeldSlot],
        lease_until: DateTime<Utc>,
    ) -> Result<(), CountError>;
    async fn release_run_slot(&self, key_id: &str, run_id: &str) -> Result<(), CountError>;
    async fn usage_on(&self, key_id: &str, day: NaiveDate) -> Result<DailyUsage, CountError>;
    async fn add_usage(
        &self,
        key_id: &str,
        day: NaiveDate,
        usage: DailyUsage,
    ) -> Result<(), CountError>;
    /// Forgets counts that can no longer matter at `now`.
    async fn prune(&self, now: DateTime<Utc>) -> Result<(), CountError>;
}

/// The counts in the store's tables: every replica on one PostgreSQL database shares them.
pub struct StoreCounter(pub Arc<dyn Store>);

#[async_trait]
impl LimitCounter for StoreCounter {
    async fn count_request(
        &self,
        key_id: &str,
        window_start: DateTime<Utc>,
    ) -> Result<u64, CountError> {
        Ok(self.0.count_key_request(key_id, window_start).await?)
    }

    async fn requests_in(
        &self,
        key_id: &str,
        window_start: DateTime<Utc>,
    ) -> Result<u64, CountError> {
        Ok(self.0.key_requests_in(key_id, window_start).await?)
    }

    async fn run_slots_held(&self, key_id: &str, now: DateTime<Utc>) -> Result<u64, CountError> {
        Ok(self.0.key_run_slots_held(key_id, now).await?)
    }

    async fn claim_run_slot(&self, claim: &RunSlotClaim<'_>) -> Result<bool, CountError> {
        Ok(self.0.claim_run_slot(claim).await?)
    }

    /// The store renews by holder in one statement; `held` is not needed.
    async fn renew_run_slots(
        &self,
        holder: &str,
        _held: &[HeldSlot],
        lease_until: DateTime<Utc>,
    ) -> Result<(), CountError> {
        Ok(self.0.renew_run_slots(holder, lease_until).await?)
    }

    async fn release_run_slot(&self, key_id: &str, run_id: &str) -> Result<(), CountError> {
        Ok(self.0.release_run_slot(key_id, run_id).await?)
    }

    async fn usage_on(&self, key_id: &str, day: NaiveDate) -> Result<DailyUsage, CountError> {
        Ok(self.0.key_usage_on(key_id, day).await?)
    }

    async fn add_usage(
        &self,
        key_id: &str,
        day: NaiveDate,
        usage: DailyUsage,
    ) -> Result<(), CountError> {
        Ok(self.0.add_key_usage(key_id, day, usage).await?)
    }

    /// Keeps the current window, live slots, and yesterday's usage (for operators).
    async fn prune(&self, now: DateTime<Utc>) -> Result<(), CountError> {
        let today = super::window::utc_day(now);
        let yesterday = today.pred_opt().unwrap_or(today);
        Ok(self
            .0
            .prune_key_counts(super::window::window_start(now), now, yesterday)
            .await?)
    }
}
