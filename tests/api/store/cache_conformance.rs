//! The response-cache checks every backend must pass: the store table (SQLite, PostgreSQL, run
//! from the conformance suite) and Redis (here, against the local service). Time is passed in,
//! so expiry is tested without sleeping.

use std::time::Duration;

use agentd::agent::{AgentResult, ExitReason, ReportStatus};
use agentd::cache::{CacheKey, RedisCache, ResponseCache};
use agentd::llm::ChatMessage;
use agentd::vocabulary::result::{FinalReport, UsageTotals};
use chrono::{DateTime, Utc};

use super::conformance::at;
use crate::support::scripted::Harness;

fn key(prompt: &str) -> CacheKey {
    let agent = crate::support::scripted::agent("cache: 1h\n");
    CacheKey::for_request(&Harness::request(agent, prompt))
}

fn answer(text: &str) -> AgentResult {
    AgentResult {
        run_id: format!("run-{text}"),
        success: true,
        error: None,
        exit_reason: ExitReason::FinalAnswer,
        final_report: Some(FinalReport {
            status: ReportStatus::Success,
            format: "markdown".into(),
            content: Some(text.into()),
            content_json: None,
            metadata: None,
            ts: 1,
        }),
        conversation: vec![ChatMessage::user("q"), ChatMessage::assistant(text)],
        accounting: Vec::new(),
        usage: UsageTotals::default(),
        cost_usd: 0.25,
        turns: 1,
        duration_ms: 10,
        retry_after_secs: None,
    }
}

/// Whole milliseconds, which every backend keeps exactly.
fn ms(time: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(time.timestamp_millis()).expect("time")
}

async fn hit(cache: &dyn ResponseCache, prompt: &str, now: DateTime<Utc>) -> Option<String> {
    let found = cache.get(&key(prompt), ms(now)).await.expect("cache get");
    found.map(|f| f.result.answer_text())
}

async fn put(
    cache: &dyn ResponseCache,
    prompt: &str,
    answer_text: &str,
    ttl: u64,
    now: DateTime<Utc>,
) {
    cache
        .put(
            &key(prompt),
            "chat",
            &answer(answer_text),
            Duration::from_secs(ttl),
            ms(now),
        )
        .await
        .expect("cache put");
}

pub async fn entries_expire_and_are_removed(cache: &dyn ResponseCache) {
    assert_eq!(hit(cache, "never stored", at(0)).await, None);
    put(cache, "2+2", "4", 60, at(0)).await;
    let found = cache
        .get(&key("2+2"), ms(at(59)))
        .await
        .expect("get")
        .expect("live");
    assert_eq!(
        found.result,
        answer("4"),
        "the stored result comes back whole"
    );
    assert_eq!(found.stored_at, ms(at(0)));
    assert_eq!(hit(cache, "2+2", at(60)).await, None, "expired at its TTL");
    assert_eq!(
        hit(cache, "2+2", at(1)).await,
        None,
        "an expired entry is removed, not just hidden"
    );

    // Storing anything removes every expired entry.
    put(cache, "short", "s", 10, at(100)).await;
    put(cache, "other", "o", 60, at(120)).await;
    assert_eq!(
        hit(cache, "short", at(105)).await,
        None,
        "purged by the later put"
    );
    assert_eq!(hit(cache, "other", at(121)).await.as_deref(), Some("o"));

    // A new result replaces the old one and gets a new TTL.
    put(cache, "other", "o2", 600, at(130)).await;
    assert_eq!(hit(cache, "other", at(500)).await.as_deref(), Some("o2"));
}

pub async fn least_recently_used_are_evicted_past_three(cache: &dyn ResponseCache) {
    for (n, prompt) in ["k1", "k2", "k3"].iter().enumerate() {
        put(cache, prompt, prompt, 3600, at(n as i64)).await;
    }
    // At the limit nothing is evicted; reading k1 makes it the most recently used.
    assert_eq!(hit(cache, "k2", at(10)).await.as_deref(), Some("k2"));
    assert_eq!(hit(cache, "k3", at(11)).await.as_deref(), Some("k3"));
    assert_eq!(hit(cache, "k1", at(12)).await.as_deref(), Some("k1"));
    put(cache, "k4", "k4", 3600, at(20)).await;
    assert_eq!(
        hit(cache, "k2", at(21)).await,
        None,
        "least recently used goes first"
    );
    for (n, prompt) in ["k3", "k1", "k4"].iter().enumerate() {
        assert_eq!(
            hit(cache, prompt, at(22 + n as i64)).await.as_deref(),
            Some(*prompt)
        );
    }
    put(cache, "k5", "k5", 3600, at(30)).await;
    assert_eq!(hit(cache, "k3", at(31)).await, None);
    for (n, prompt) in ["k1", "k4", "k5"].iter().enumerate() {
        assert_eq!(
            hit(cache, prompt, at(32 + n as i64)).await.as_deref(),
            Some(*prompt)
        );
    }
}

/// The local Redis; override with AGENTD_TEST_REDIS_URL.
/// Without the override, a local `redis-server` is started when it is installed but not running.
pub fn redis_url() -> String {
    std::env::var("AGENTD_TEST_REDIS_URL").unwrap_or_else(|_| {
        crate::support::services::ensure_local_redis(6379);
        "redis://127.0.0.1:6379".into()
    })
}

/// A cache under a prefix no other test run uses, and a way to delete its keys after.
pub async fn redis_cache(max_entries: u64) -> (RedisCache, String) {
    let url = redis_url();
    let prefix = format!("agentd-test-{}:", uuid::Uuid::new_v4().simple());
    let cache = RedisCache::connect(&url, &prefix, max_entries)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "Redis is not reachable at {url} ({e}). Start it with `redis-server --daemonize yes` \
                 (Debian package redis-server), or point AGENTD_TEST_REDIS_URL at one."
            )
        });
    (cache, prefix)
}

pub async fn redis_connection() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_url())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis connection")
}

/// Deletes every key under `prefix`.
pub async fn delete_redis_keys(prefix: &str) {
    let mut connection = redis_connection().await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut connection)
        .await
        .expect("keys");
    if !keys.is_empty() {
        let _: i64 = redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut connection)
            .await
            .expect("del");
    }
}

#[tokio::test]
async fn redis_cache_entries_expire_and_are_removed() {
    let (cache, prefix) = redis_cache(100).await;
    entries_expire_and_are_removed(&cache).await;
    delete_redis_keys(&prefix).await;
}

#[tokio::test]
async fn redis_cache_evicts_least_recently_used_past_max_entries() {
    let (cache, prefix) = redis_cache(3).await;
    least_recently_used_are_evicted_past_three(&cache).await;
    let mut connection = redis_connection().await;
    let indexed: i64 = redis::cmd("ZCARD")
        .arg(format!("{prefix}lru"))
        .query_async(&mut connection)
        .await
        .expect("zcard");
    assert_eq!(indexed, 3, "evicted entries leave the index too");
    delete_redis_keys(&prefix).await;
}

#[tokio::test]
async fn redis_expires_the_stored_key_itself_after_the_ttl() {
    let (cache, prefix) = redis_cache(100).await;
    let now = Utc::now();
    put(&cache, "ttl", "t", 90, now).await;
    let mut connection = redis_connection().await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg(format!("{prefix}e:{}", key("ttl").as_str()))
        .query_async(&mut connection)
        .await
        .expect("pttl");
    assert!((1..=90_000).contains(&pttl), "redis expiry {pttl} ms");
    delete_redis_keys(&prefix).await;
}

#[tokio::test]
async fn an_unreachable_redis_is_named_with_its_url_and_no_password() {
    let error = RedisCache::connect("redis://user:hunter2@127.0.0.1:1", "p:", 10)
        .await
        .err()
        .expect("nothing listens on port 1")
        .to_string();
    assert!(
        error.contains("cache.redis.url") && error.contains("127.0.0.1:1"),
        "{error}"
    );
    assert!(!error.contains("hunter2"), "{error}");
}
