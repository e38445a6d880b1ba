//! The limit counters in Redis (`cache.backend: "redis"`), shared by every server on it.
//!
//! Keys, under `<cache.redis.keyPrefix>limits:`: `rpm:<key>:<window unix seconds>` is a counter
//! (INCR) that expires with its window; `runs:<key>` is a sorted set of run ids scored by the
//! expiry of their lease (ms), so a killed server's slots fall out once not renewed;
//! `usage:<key>:<YYYY-MM-DD>` is a hash of `tokens` and `cost_usd` kept two days. Every change
//! is one Lua script or one MULTI, so servers never interleave half-done updates. Calls go
//! through a [`RedisLink`]: bounded in time, and skipped for a while after Redis failed (the
//! limiter then lets requests through).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use redis::Script;

use super::counter::{CountError, HeldSlot, LimitCounter};
use super::window::WINDOW;
use crate::cache::RedisLink;
use crate::store::{DailyUsage, RunSlotClaim, redact_password};

/// How long a day's usage is kept: through the next day, for operators looking.
const USAGE_KEPT: Duration = Duration::from_secs(2 * 24 * 3600);

/// KEYS: window counter. ARGV: expiry (unix ms). Returns the count including this request.
const COUNT_SCRIPT: &str = r"
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIREAT', KEYS[1], ARGV[1])
end
return count
";

/// KEYS: the key's run set. ARGV: now (ms), lease until (ms), limit, run id. Drops expired
/// leases, then takes a slot when fewer than `limit` are held. Returns 1 when taken.
const CLAIM_SCRIPT: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
";

/// KEYS: the key's run set. ARGV: lease until (ms), then the run ids whose leases are renewed
/// (a run no longer in the set stays out).
const RENEW_SCRIPT: &str = r"
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[i])
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], last[2])
end
return 0
";

pub struct RedisCounter {
    link: RedisLink,
    prefix: String,
    count_script: Script,
    claim_script: Script,
    renew_script: Script,
}

impl RedisCounter {
    /// Connects (and keeps reconnecting) to `url`; every key starts with `prefix` + `limits:`.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, super::LimiterSetupError> {
        let link = RedisLink::connect(url, "key limits")
            .await
            .map_err(|source| super::LimiterSetupError::RedisConnect {
                url: redact_password(url),
                source,
            })?;
        Ok(Self {
            link,
            prefix: format!("{prefix}limits:"),
            count_script: Script::new(COUNT_SCRIPT),
            claim_script: Script::new(CLAIM_SCRIPT),
            renew_script: Script::new(RENEW_SCRIPT),
        })
    }

    fn runs_key(&self, key_id: &str) -> String {
        format!("{}runs:{key_id}", self.prefix)
    }

    fn usage_key(&self, key_id: &str, day: NaiveDate) -> String {
        format!("{}usage:{key_id}:{}", self.prefix, day.format("%Y-%m-%d"))
    }
}

#[async_trait]
impl LimitCounter for RedisCounter {
    async fn count_request(
        &self,
        key_id: &str,
        window_start: DateTime<Utc>,
    ) -> Result<u64, CountError> {
        let counter = format!("{}rpm:{key_id}:{}", self.prefix, window_start.timestamp());
        // Kept a little past its window, for clocks a little apart.
        let expires_at = window_start + WINDOW + TimeDelta::seconds(5);
        let mut invocation = self.count_script.key(counter);
        invocation.arg(expires_at.timestamp_millis());
        let count: u64 = self.link.invoke(invocation).await?;
        Ok(count)
    }

    async fn requests_in(
        &self,
        key_id: &str,
        window_start: DateTime<Utc>,
    ) -> Result<u64, CountError> {
        let mut command = redis::cmd("GET");
        command.arg(format!(
            "{}rpm:{key_id}:{}",
            self.prefix,
            window_start.timestamp()
        ));
        let count: Option<u64> = self.link.query(command).await?;
        Ok(count.unwrap_or(0))
    }

    async fn run_slots_held(&self, key_id: &str, now: DateTime<Utc>) -> Result<u64, CountError> {
        let mut command = redis::cmd("ZCOUNT");
        command
            .arg(self.runs_key(key_id))
            .arg(format!("({}", now.timestamp_millis()))
            .arg("+inf");
        let count: u64 = self.link.query(command).await?;
        Ok(count)
    }

    async fn claim_run_slot(&self, claim: &RunSlotClaim<'_>) -> Result<bool, CountError> {
        let mut invocation = self.claim_script.key(self.runs_key(claim.key_id));
        invocation
            .arg(claim.now.timestamp_millis())
            .arg(claim.lease_until.timestamp_millis())
            .arg(claim.limit)
            .arg(claim.run_id);
        let taken: i64 = self.link.invoke(invocation).await?;
        Ok(taken == 1)
    }

    async fn renew_run_slots(
        &self,
        _holder: &str,
        held: &[HeldSlot],
        lease_until: DateTime<Utc>,
    ) -> Result<(), CountError> {
        let mut runs_by_key: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for slot in held {
            runs_by_key
                .entry(&slot.key_id)
                .or_default()
                .push(&slot.run_id);
        }
        for (key_id, runs) in runs_by_key {
            let mut invocation = self.renew_script.key(self.runs_key(key_id));
            invocation.arg(lease_until.timestamp_millis());
            for run_id in runs {
                invocation.arg(run_id);
            }
            let _: i64 = self.link.invoke(invocation).await?;
        }
        Ok(())
    }

    async fn release_run_slot(&self, key_id: &str, run_id: &str) -> Result<(), CountError> {
        let mut command = redis::cmd("ZREM");
        command.arg(self.runs_key(key_id)).arg(run_id);
        let _: i64 = self.link.query(command).await?;
        Ok(())
    }

    async fn usage_on(&self, key_id: &str, day: NaiveDate) -> Result<DailyUsage, CountError> {
        let mut command = redis::cmd("HMGET");
        command
            .arg(self.usage_key(key_id, day))
            .arg("tokens")
            .arg("cost_usd");
        let (tokens, cost_usd): (Option<u64>, Option<f64>) = self.link.query(command).await?;
        Ok(DailyUsage {
            tokens: tokens.unwrap_or(0),
            cost_usd: cost_usd.unwrap_or(0.0),
        })
    }

    async fn add_usage(
        &self,
        key_id: &str,
        day: NaiveDate,
        usage: DailyUsage,
    ) -> Result<(), CountError> {
        let key = self.usage_key(key_id, day);
        let mut pipeline = redis::pipe();
        pipeline
            .atomic()
            .cmd("HINCRBY")
            .arg(&key)
            .arg("tokens")
            .arg(usage.tokens)
            .ignore()
            .cmd("HINCRBYFLOAT")
            .arg(&key)
            .arg("cost_usd")
            .arg(usage.cost_usd)
            .ignore()
            .cmd("EXPIRE")
            .arg(&key)
            .arg(USAGE_KEPT.as_secs())
            .ignore();
        let () = self.link.query_pipeline(pipeline).await?;
        Ok(())
    }

    /// Redis expires what is no longer needed by itself.
    async fn prune(&self, _now: DateTime<Utc>) -> Result<(), CountError> {
        Ok(())
    }
}
