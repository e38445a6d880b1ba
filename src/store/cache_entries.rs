//! The response cache's table: opaque keys to JSON values with an expiry time and a last-used
//! time for LRU eviction. What goes in the values and how keys are made is `crate::cache`'s job.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::StoreError;

#[derive(Debug, Clone, PartialEq)]
pub struct NewCacheEntry {
    pub key: String,
    /// The agent the value came from (for operators looking at the table).
    pub agent: String,
    pub value: Value,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CacheEntry {
    pub value: Value,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Time is always passed in, so both backends (and the tests) agree on what has expired.
#[async_trait]
pub trait CacheStore: Send + Sync {
    /// The live entry under `key`, marking it used at `now`. An expired entry is deleted and
    /// reported as absent.
    async fn cache_get(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<CacheEntry>, StoreError>;
    /// Inserts or replaces the entry, removes every expired entry, then evicts the least recently
    /// used entries until at most `max_entries` remain.
    async fn cache_put(
        &self,
        entry: &NewCacheEntry,
        now: DateTime<Utc>,
        max_entries: u64,
    ) -> Result<(), StoreError>;
}
