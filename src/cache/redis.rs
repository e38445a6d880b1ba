//! The cache in Redis, for deployments with several servers.
//!
//! Keys (all under the configured prefix): `e:<key>` holds `{"stored_at", "result"}` with a
//! Redis expiry equal to the TTL; the sorted set `lru` scores entries by last use and `exp` by
//! expiry time. Each read and write is one Lua script, so concurrent servers cannot interleave
//! half-done updates; expiry is judged against the caller's clock (like the store backend) and
//! the Redis expiry only collects what nobody reads again. Not for Redis Cluster: eviction
//! deletes keys it computes inside the script. Calls go through a [`RedisLink`]: bounded in
//! time, and skipped for a while after Redis failed.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redis::Script;
use serde::{Deserialize, Serialize};

use serde_json::Value;

use super::redis_link::RedisLink;
use super::{CacheError, CacheKey, CachedEntry, EntryCache, expiry};
use crate::store::redact_password;

/// KEYS: entry, lru index, expiry index. ARGV: now (ms). Returns the value, or nil when absent or
/// expired (removing it); a hit is marked used.
const GET_SCRIPT: &str = r"
local value = redis.call('GET', KEYS[1])
local expires = redis.call('ZSCORE', KEYS[3], KEYS[1])
if (not value) or (not expires) or tonumber(expires) <= tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], KEYS[1])
  redis.call('ZREM', KEYS[3], KEYS[1])
  return false
end
redis.call('ZADD', KEYS[2], ARGV[1], KEYS[1])
return value
";

/// KEYS: entry, lru index, expiry index. ARGV: value, now (ms), expires at (ms), TTL (ms), most
/// entries. Removes expired entries, stores this one, then evicts the least recently used.
const PUT_SCRIPT: &str = r"
local now = tonumber(ARGV[2])
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, key in ipairs(expired) do
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[2], key)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
redis.call('ZADD', KEYS[2], now, KEYS[1])
redis.call('ZADD', KEYS[3], ARGV[3], KEYS[1])
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if excess > 0 then
  local victims = redis.call('ZRANGE', KEYS[2], 0, excess - 1)
  for _, key in ipairs(victims) do
    redis.call('DEL', key)
    redis.call('ZREM', KEYS[3], key)
  end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, excess - 1)
end
return 0
";

/// KEYS: lru index, expiry index. ARGV: run ids. Removes every entry whose result is one of
/// those runs' (a user's erasure); returns how many. Reads each entry once: the index is bounded
/// by the cache's most entries.
const ERASE_RUNS_SCRIPT: &str = r"
local runs = {}
for _, id in ipairs(ARGV) do runs[id] = true end
local removed = 0
for _, key in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local value = redis.call('GET', key)
  local ok, stored = false, nil
  if value then ok, stored = pcall(cjson.decode, value) end
  if ok and type(stored) == 'table' and type(stored.result) == 'table'
      and type(stored.result.run_id) == 'string' and runs[stored.result.run_id] then
    redis.call('DEL', key)
    redis.call('ZREM', KEYS[1], key)
    redis.call('ZREM', KEYS[2], key)
    removed = removed + 1
  end
end
return removed
";

#[derive(Serialize, Deserialize)]
struct StoredValue {
    /// Unix milliseconds.
    stored_at: i64,
    /// The value (named for what it held first: a run result).
    result: Value,
}

pub struct RedisCache {
    link: RedisLink,
    prefix: String,
    max_entries: u64,
    get_script: Script,
    put_script: Script,
}

impl RedisCache {
    /// Connects (and keeps reconnecting) to `url`; every key starts with `prefix`.
    pub async fn connect(url: &str, prefix: &str, max_entries: u64) -> Result<Self, CacheError> {
        let link = RedisLink::connect(url, "response cache")
            .await
            .map_err(|source| CacheError::RedisConnect {
                url: redact_password(url),
                source,
            })?;
        Ok(Self {
            link,
            prefix: prefix.to_string(),
            max_entries,
            get_script: Script::new(GET_SCRIPT),
            put_script: Script::new(PUT_SCRIPT),
        })
    }

    fn keys(&self, key: &CacheKey) -> [String; 3] {
        [
            format!("{}e:{}", self.prefix, key.as_str()),
            format!("{}lru", self.prefix),
            format!("{}exp", self.prefix),
        ]
    }
}

#[async_trait]
impl EntryCache for RedisCache {
    async fn get_entry(
        &self,
        key: &CacheKey,
        now: DateTime<Utc>,
    ) -> Result<Option<CachedEntry>, CacheError> {
        let [entry, lru, exp] = self.keys(key);
        let mut invocation = self.get_script.key(entry);
        invocation.key(lru).key(exp).arg(now.timestamp_millis());
        let value: Option<String> = self.link.invoke(invocation).await?;
        let Some(value) = value else {
            return Ok(None);
        };
        let stored: StoredValue = serde_json::from_str(&value)?;
        Ok(Some(CachedEntry {
            value: stored.result,
            stored_at: DateTime::from_timestamp_millis(stored.stored_at).unwrap_or_default(),
        }))
    }

    async fn put_entry(
        &self,
        key: &CacheKey,
        _owner: &str,
        value: &Value,
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<(), CacheError> {
        let [entry, lru, exp] = self.keys(key);
        let expires_at = expiry(now, ttl);
        let ttl_ms = (expires_at - now).num_milliseconds().max(1);
        let value = serde_json::to_string(&StoredValue {
            stored_at: now.timestamp_millis(),
            result: value.clone(),
        })?;
        let mut invocation = self.put_script.key(entry);
        invocation
            .key(lru)
            .key(exp)
            .arg(value)
            .arg(now.timestamp_millis())
            .arg(expires_at.timestamp_millis())
            .arg(ttl_ms)
            .arg(self.max_entries);
        let _: i64 = self.link.invoke(invocation).await?;
        Ok(())
    }

    async fn erase_runs(&self, run_ids: &[String]) -> Result<u64, CacheError> {
        let script = Script::new(ERASE_RUNS_SCRIPT);
        let mut removed = 0;
        // A few hundred ids per call keeps each script call short for other servers.
        for ids in run_ids.chunks(500) {
            let mut invocation = script.key(format!("{}lru", self.prefix));
            invocation.key(format!("{}exp", self.prefix));
            for id in ids {
                invocation.arg(id);
            }
            let count: u64 = self.link.invoke(invocation).await?;
            removed += count;
        }
        Ok(removed)
    }
}
