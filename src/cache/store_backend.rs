//! The response cache in the store's `response_cache` table (SQLite or PostgreSQL): one server,
//! or several sharing a PostgreSQL store.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{CacheError, CacheKey, CachedResult, ResponseCache, expiry};
use crate::agent::AgentResult;
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
impl ResponseCache for StoreCache {
    async fn get(
        &self,
        key: &CacheKey,
        now: DateTime<Utc>,
    ) -> Result<Option<CachedResult>, CacheError> {
        let Some(entry) = self.store.cache_get(key.as_str(), now).await? else {
            return Ok(None);
        };
        Ok(Some(CachedResult {
            result: serde_json::from_value(entry.value)?,
            stored_at: entry.created_at,
        }))
    }

    async fn put(
        &self,
        key: &CacheKey,
        agent: &str,
        result: &AgentResult,
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<(), CacheError> {
        let entry = NewCacheEntry {
            key: key.as_str().to_string(),
            agent: agent.to_string(),
            value: serde_json::to_value(result)?,
            expires_at: expiry(now, ttl),
        };
        self.store.cache_put(&entry, now, self.max_entries).await?;
        Ok(())
    }
}
