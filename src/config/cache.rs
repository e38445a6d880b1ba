//! The `cache` config section (the response cache): which backend holds it, how many entries it
//! keeps, and where Redis is when Redis holds it. Whether an agent is cached, and for how long,
//! is its `cache` frontmatter ([`CacheTtl`](super::duration::CacheTtl)).

use std::num::NonZeroU64;

use secrecy::SecretString;
use serde::Deserialize;

/// Entries kept when `cache.maxEntries` is not set.
pub const DEFAULT_MAX_ENTRIES: u64 = 5000;
/// Prefix of every Redis key when `cache.redis.keyPrefix` is not set.
pub const DEFAULT_REDIS_PREFIX: &str = "agentd:cache:";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CacheConfig {
    pub backend: CacheBackend,
    /// Most entries kept; past it the least recently used are evicted.
    pub max_entries: NonZeroU64,
    /// Required when `backend` is `redis`.
    pub redis: Option<RedisCacheConfig>,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            backend: CacheBackend::Store,
            max_entries: NonZeroU64::new(DEFAULT_MAX_ENTRIES).unwrap_or(NonZeroU64::MIN),
            redis: None,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CacheBackend {
    /// A table in the store (`store.url`): SQLite or PostgreSQL.
    #[default]
    Store,
    /// A Redis server shared by several agentd instances.
    Redis,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedisCacheConfig {
    /// `redis://[user:password@]host:port[/db]`.
    pub url: SecretString,
    /// Prepended to every key, so several deployments can share one Redis.
    #[serde(default = "default_prefix")]
    pub key_prefix: String,
}

fn default_prefix() -> String {
    DEFAULT_REDIS_PREFIX.to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::parse_config;

    #[test]
    fn defaults_to_the_store_with_5000_entries() {
        let config = parse_config(json!({}), "x").expect("valid");
        assert_eq!(config.cache.backend, CacheBackend::Store);
        assert_eq!(config.cache.max_entries.get(), 5000);
    }

    #[test]
    fn redis_backend_takes_a_url_and_prefix() {
        let config = parse_config(
            json!({"cache": {"backend": "redis", "maxEntries": 10, "redis": {"url": "redis://h:6379"}}}),
            "x",
        )
        .expect("valid");
        assert_eq!(config.cache.backend, CacheBackend::Redis);
        assert_eq!(config.cache.max_entries.get(), 10);
        let redis = config.cache.redis.expect("redis section");
        assert_eq!(redis.key_prefix, DEFAULT_REDIS_PREFIX);
    }

    #[test]
    fn bad_values_name_their_key() {
        let zero = parse_config(json!({"cache": {"maxEntries": 0}}), "a.json")
            .unwrap_err()
            .to_string();
        assert!(zero.contains("cache.maxEntries"), "{zero}");
        let backend = parse_config(json!({"cache": {"backend": "memcached"}}), "a.json")
            .unwrap_err()
            .to_string();
        assert!(
            backend.contains("cache.backend") && backend.contains("memcached"),
            "{backend}"
        );
    }
}
