//! The cache in the store's `response_cache` table (SQLite or PostgreSQL): one server,
//! or several sharing a PostgreSQL store.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use serde_json::Value;

use super::{CacheError, CacheKey, CachedEntry, EntryCache, expiry};
use crate::store::{CacheStore, NewCacheEntry};

pub struct StoreCache {
    store: Arc<dyn CacheStore>,
    max_entries: u64,
}

impl StoreCache {
    pub fn new(store: Arc<dyn CacheStore>, max_entries: u64) -> Self {
        Self { store, max_entries }
    }
}

#[async_trait]
impl EntryCache for StoreCache {
    async fn get_entry(
        &self,
        key: &CacheKey,
        now: DateTime<Utc>,
    ) -> Result<Option<CachedEntry>, CacheError> {
        let Some(entry) = self.store.cache_get(key.as_str(), now).await? else {
            return Ok(None);
        };
        Ok(Some(CachedEntry {
            value: entry.value,
            stored_at: entry.created_at,
        }))
    }

    async fn put_entry(
        &self,
        key: &CacheKey,
        owner: &str,
        value: &Value,
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<(), CacheError> {
        let entry = NewCacheEntry {
            key: key.as_str().to_string(),
            agent: owner.to_string(),
            value: value.clone(),
            expires_at: expiry(now, ttl),
        };
        self.store.cache_put(&entry, now, self.max_entries).await?;
        Ok(())
    }
}
