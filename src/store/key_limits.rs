//! The tables per-key limits are counted in (`key_request_windows`, `key_run_slots`,
//! `key_daily_usage`): atomic counters any number of replicas may update at once. What the
//! counts mean, and when a request is refused, is `crate::limits`'s job; time is always passed
//! in, so every replica (and the tests) decide the same way.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use super::StoreError;

/// Tokens and cost of a key's finished runs on one UTC day.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DailyUsage {
    pub tokens: u64,
    pub cost_usd: f64,
}

/// A request for one of a key's `limit` run slots.
#[derive(Debug, Clone, Copy)]
pub struct RunSlotClaim<'a> {
    pub key_id: &'a str,
    pub run_id: &'a str,
    /// The replica that will renew the slot's lease while the run lives.
    pub holder: &'a str,
    pub limit: u32,
    pub now: DateTime<Utc>,
    /// When the slot frees itself unless renewed.
    pub lease_until: DateTime<Utc>,
}

#[async_trait]
pub trait KeyLimitStore: Send + Sync {
    /// Counts one request of `key_id` in the window starting at `window_start`; returns the
    /// window's count including this one.
    async fn count_key_request(
        &self,
        key_id: &str,
        window_start: DateTime<Utc>,
    ) -> Result<u64, StoreError>;
    /// The count of the window starting at `window_start`, read without counting.
    async fn key_requests_in(
        &self,
        key_id: &str,
        window_start: DateTime<Utc>,
    ) -> Result<u64, StoreError>;
    /// How many of the key's run slots are held at `now`.
    async fn key_run_slots_held(&self, key_id: &str, now: DateTime<Utc>)
    -> Result<u64, StoreError>;
    /// Takes a free slot (never taken, or its lease expired) for the run; false when all
    /// `limit` slots are held.
    async fn claim_run_slot(&self, claim: &RunSlotClaim<'_>) -> Result<bool, StoreError>;
    /// Extends the lease of every slot `holder` holds.
    async fn renew_run_slots(
        &self,
        holder: &str,
        lease_until: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// Frees the run's slot (nothing when it has none any more).
    async fn release_run_slot(&self, key_id: &str, run_id: &str) -> Result<(), StoreError>;
    /// What the key's finished runs used on `day` (zero when nothing was recorded).
    async fn key_usage_on(&self, key_id: &str, day: NaiveDate) -> Result<DailyUsage, StoreError>;
    /// Adds a finished run's usage to the key's `day`.
    async fn add_key_usage(
        &self,
        key_id: &str,
        day: NaiveDate,
        usage: DailyUsage,
    ) -> Result<(), StoreError>;
    /// Deletes request windows before `window_start`, expired slots and usage before
    /// `first_day_kept`.
    async fn prune_key_counts(
        &self,
        window_start: DateTime<Utc>,
        now: DateTime<Utc>,
        first_day_kept: NaiveDate,
    ) -> Result<(), StoreError>;
}
