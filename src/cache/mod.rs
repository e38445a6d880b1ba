//! The response cache (reference §7.1, seeds/002 §8): a successful run's `AgentResult`, kept for
//! the agent's `cache` TTL and returned for an identical request without calling any LLM.
//!
//! This module owns the key (what makes two requests identical), what may be cached, what a hit
//! looks like, and the two backends: a table in the store (default) and Redis (`cache.backend:
//! "redis"`, for several servers). It never runs sessions; the runtime asks it before the first
//! LLM turn and tells it the result after. A cache failure never fails a run: callers log it and
//! carry on without the cache.

mod redis;
mod redis_link;
mod store_backend;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use secrecy::ExposeSecret;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent::SessionRequest;
use crate::config::cache::{CacheBackend, CacheConfig};
use crate::store::{CacheStore, StoreError};
use crate::vocabulary::AgentEvent;
use crate::vocabulary::ExitReason;
use crate::vocabulary::events::{RunStarted, TextDelta};
use crate::vocabulary::result::UsageTotals;
use crate::vocabulary::result::{AgentResult, ReportStatus};

pub use self::redis::RedisCache;
pub use self::redis_link::{RedisCallError, RedisLink};
pub use store_backend::StoreCache;

/// The longest TTL honoured; longer ones are cut to this (the stores need a finite expiry).
const MAX_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache.backend is \"redis\" but cache.redis.url is not set")]
    NoRedisUrl,
    #[error("cache.redis.url: cannot use {url}: {source}")]
    RedisConnect {
        url: String,
        source: ::redis::RedisError,
    },
    #[error("response cache (redis): {0}")]
    Redis(#[from] RedisCallError),
    #[error("response cache (store): {0}")]
    Store(#[from] StoreError),
    #[error("response cache entry is not a valid result: {0}")]
    Decode(#[from] serde_json::Error),
}

impl CacheError {
    /// True when the configuration is at fault (exit 4), not a service (exit 3).
    pub fn is_config(&self) -> bool {
        matches!(self, Self::NoRedisUrl)
    }

    /// Redis was skipped after a failure that was logged once: nothing to log again.
    pub fn is_skipped(&self) -> bool {
        matches!(self, Self::Redis(error) if error.is_skipped())
    }
}

/// The sha256 (hex) identifying one cacheable request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey(String);

impl CacheKey {
    /// Hashes everything that changes the answer: the agent's hash (prompt, frontmatter, models),
    /// the user prompt, the output format and schema, plus the earlier messages and sampling
    /// overrides (the same prompt in another conversation is another question) and the run's
    /// owner (a user, or a key bound to no user): tools may act as the caller
    /// (`${caller.secret.…}`, `${caller.userId}`, `userScoped`), so an answer is only ever given
    /// back to whoever it was first given to, whatever the agent's tools do. Attached files
    /// count by their SHA-256.
    pub fn for_request(request: &SessionRequest) -> Self {
        let agent = &request.agent;
        let format = request.format.as_deref().unwrap_or(&agent.output_format);
        let schema = request.schema.as_ref().or(agent.output_schema.as_ref());
        let overrides = &request.overrides;
        // The prompt's files by content (history's are in its JSON); a request without any
        // keeps the key it always had.
        let attachments: String = request
            .attachments
            .iter()
            .map(|a| {
                format!(
                    "{}:{}:{};",
                    a.sha256,
                    a.url.as_deref().unwrap_or(""),
                    a.name
                )
            })
            .collect();
        let schema = schema.map(ToString::to_string).unwrap_or_default();
        let history = serde_json::to_string(&request.history).unwrap_or_default();
        let sampling = format!(
            "{:?}/{:?}/{:?}",
            overrides.temperature, overrides.top_p, overrides.max_output_tokens
        );
        let mut fields: Vec<&[u8]> = vec![
            agent.hash.as_bytes(),
            request.prompt.as_bytes(),
            format.as_bytes(),
            schema.as_bytes(),
            history.as_bytes(),
            sampling.as_bytes(),
            request.user_id.as_deref().unwrap_or_default().as_bytes(),
        ];
        if !attachments.is_empty() {
            fields.push(attachments.as_bytes());
        }
        Self::of_fields(&fields)
    }

    /// The sha256 of `fields`, each prefixed by its length so no two lists of fields collide.
    pub fn of_fields(fields: &[&[u8]]) -> Self {
        let mut hasher = Sha256::new();
        for field in fields {
            hasher.update((field.len() as u64).to_le_bytes());
            hasher.update(field);
        }
        let digest = hasher.finalize();
        Self(digest.iter().map(|b| format!("{b:02x}")).collect())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A result found in the cache and when it was stored.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedResult {
    pub result: AgentResult,
    pub stored_at: DateTime<Utc>,
}

/// A JSON value found in the cache and when it was stored.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedEntry {
    pub value: Value,
    pub stored_at: DateTime<Utc>,
}

/// Where cached values live (the store's table or Redis), shared by the response cache and the
/// tool result cache. `now` is passed in so expiry is decided the same way everywhere.
#[async_trait]
pub trait EntryCache: Send + Sync {
    /// The live value under `key`, marked as used; expired entries are removed and absent.
    async fn get_entry(
        &self,
        key: &CacheKey,
        now: DateTime<Utc>,
    ) -> Result<Option<CachedEntry>, CacheError>;
    /// Stores `value` (made by `owner`: an agent, or `tool:<name>`) until `now + ttl`, evicting
    /// least recently used entries past the limit.
    async fn put_entry(
        &self,
        key: &CacheKey,
        owner: &str,
        value: &Value,
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<(), CacheError>;
    /// Removes the run results of `run_ids` kept outside the store, returning how many; the
    /// store's own table is erased with the rest of a user's rows, so its backend has none.
    async fn erase_runs(&self, run_ids: &[String]) -> Result<u64, CacheError> {
        let _ = run_ids;
        Ok(0)
    }
}

/// Run results in an [`EntryCache`].
#[async_trait]
pub trait ResponseCache: Send + Sync {
    /// The live result under `key`, marked as used; expired entries are removed and absent.
    async fn get(
        &self,
        key: &CacheKey,
        now: DateTime<Utc>,
    ) -> Result<Option<CachedResult>, CacheError>;
    /// Stores `agent`'s `result` until `now + ttl`, evicting least recently used entries past
    /// the limit.
    async fn put(
        &self,
        key: &CacheKey,
        agent: &str,
        result: &AgentResult,
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<(), CacheError>;
}

#[async_trait]
impl<T: EntryCache + ?Sized> ResponseCache for T {
    async fn get(
        &self,
        key: &CacheKey,
        now: DateTime<Utc>,
    ) -> Result<Option<CachedResult>, CacheError> {
        let Some(entry) = self.get_entry(key, now).await? else {
            return Ok(None);
        };
        Ok(Some(CachedResult {
            result: serde_json::from_value(entry.value)?,
            stored_at: entry.stored_at,
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
        let value = serde_json::to_value(result)?;
        self.put_entry(key, agent, &value, ttl, now).await
    }
}

/// Checks what serde cannot: the Redis backend needs `cache.redis.url`.
pub fn check_config(config: &CacheConfig) -> Result<(), CacheError> {
    match (config.backend, &config.redis) {
        (CacheBackend::Redis, None) => Err(CacheError::NoRedisUrl),
        _ => Ok(()),
    }
}

/// Opens the configured backend (connecting to Redis if that is the one).
pub async fn open(
    config: &CacheConfig,
    store: Arc<dyn CacheStore>,
) -> Result<Arc<dyn EntryCache>, CacheError> {
    let max_entries = config.max_entries.get();
    match config.backend {
        CacheBackend::Store => Ok(Arc::new(StoreCache::new(store, max_entries))),
        CacheBackend::Redis => {
            let redis = config.redis.as_ref().ok_or(CacheError::NoRedisUrl)?;
            let cache =
                RedisCache::connect(redis.url.expose_secret(), &redis.key_prefix, max_entries)
                    .await?;
            Ok(Arc::new(cache))
        }
    }
}

/// Only real answers are cached: a successful run whose report is a success with content.
/// Failures, empty answers and answers that came from the cache themselves are not.
pub fn is_cacheable(result: &AgentResult) -> bool {
    result.success
        && matches!(
            result.exit_reason,
            ExitReason::FinalAnswer | ExitReason::TextFallback
        )
        && result
            .final_report
            .as_ref()
            .is_some_and(|r| r.status == ReportStatus::Success)
        && !result.answer_text().trim().is_empty()
}

/// `now + ttl`, with absurd TTLs cut to `MAX_TTL`.
pub fn expiry(now: DateTime<Utc>, ttl: Duration) -> DateTime<Utc> {
    let ttl = TimeDelta::from_std(ttl.min(MAX_TTL)).unwrap_or(TimeDelta::zero());
    now.checked_add_signed(ttl).unwrap_or(now)
}

/// The result of a run answered from the cache: the stored answer and conversation under this
/// run's id, with exit reason `cached` and no usage, cost or accounting (no LLM was called).
pub fn cached_run_result(
    hit: CachedResult,
    request: &SessionRequest,
    duration_ms: u64,
) -> AgentResult {
    AgentResult {
        run_id: request.run_id.clone(),
        exit_reason: ExitReason::Cached,
        accounting: Vec::new(),
        usage: UsageTotals::default(),
        cost_usd: 0.0,
        turns: 0,
        duration_ms,
        retry_after_secs: None,
        ..hit.result
    }
}

/// The events a cached run emits, as a live run would: `run.started`, the answer as one
/// `output`, `final_report`, `run.finished`.
pub fn cached_run_events(result: &AgentResult, request: &SessionRequest) -> Vec<AgentEvent> {
    let mut events = vec![AgentEvent::RunStarted(Box::new(RunStarted {
        run_id: request.run_id.clone(),
        agent: request.agent.name.clone(),
        conversation_id: request.conversation_id.clone(),
        created_at: Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        attachments: request.attachments.clone(),
    }))];
    let text = result.answer_text();
    if !text.is_empty() {
        events.push(AgentEvent::Output(TextDelta::new(text)));
    }
    if let Some(report) = &result.final_report {
        events.push(AgentEvent::FinalReport(Box::new(report.clone())));
    }
    events.push(AgentEvent::RunFinished(Box::new(result.summary())));
    events
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
