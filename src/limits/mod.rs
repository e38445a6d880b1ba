//! Per-key limits (SPEC §7, `auth.keys[].limits`): requests per minute, runs at once, and
//! tokens and dollars per UTC day, counted where every replica sees the same counts (the
//! store's tables, or Redis when `cache.backend` is `redis`), never in one process's memory.
//!
//! This module owns the decision: [`KeyLimiter::admit`] counts a run submission and refuses it
//! ([`LimitRefusal`]) past a limit, or hands back a [`KeyReservation`] that the run pipeline
//! finishes when the run ends (adding its usage, freeing its slot). Budgets are only checked at
//! admission: a run already started is never cut off. A run that stopped to wait for tool
//! approvals gives its slot back while it waits and takes one again (waiting for it) when it
//! goes on, [`KeyLimiter::resume`], so its whole usage is added when it ends. It knows nothing
//! about HTTP (the edge maps a refusal to 429) and nothing about sessions.
//!
//! A failing counter (store or Redis down) lets the request through and logs an error: the
//! limits protect budgets, and an outage of their counter must not become an outage of agentd.

mod counter;
mod redis;
pub mod window;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use secrecy::ExposeSecret;
use tokio_util::sync::CancellationToken;

use crate::config::cache::CacheBackend;
use crate::config::key_limits::KeyLimits;
use crate::config::{AuthConfig, Config};
use crate::store::{DailyUsage, RunSlotClaim, Store};
use crate::vocabulary::budget::{BudgetExceeded, BudgetLimit, RunBudget, SpendMeter, Spent};
use crate::vocabulary::result::AgentResult;
pub use counter::{CountError, HeldSlot, LimitCounter, StoreCounter};
pub use redis::RedisCounter;
use window::Budget;

/// How long a run slot stays held without being renewed. A concurrent-run slot is a row (or a
/// Redis set member) per run with its holder's replica id and this lease, renewed every
/// `RENEW_EVERY` while the run lives: a process that is killed stops renewing, and its slots
/// free themselves within the lease. (Counting the key's `running` runs instead would hold a
/// killed process's slots until the owner-loss sweeper ends those runs, and miss runs the
/// recorder has not written yet.)
pub const SLOT_LEASE: TimeDelta = TimeDelta::seconds(30);
/// How often held slots are renewed (and stale counts pruned): a third of the lease, so two
/// renewals may fail before a live run loses its slot.
const RENEW_EVERY: Duration = Duration::from_secs(10);
/// How often a run resumed after a wait asks again for one of its key's run slots while every
/// slot is held.
const RESUMED_SLOT_POLL: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum LimiterSetupError {
    #[error("cache.backend is \"redis\" but cache.redis.url is not set")]
    NoRedisUrl,
    #[error("cache.redis.url: cannot use {url} for key limits: {source}")]
    RedisConnect {
        url: String,
        source: ::redis::RedisError,
    },
}

/// A key that has limits: its id (`auth.keys[].id`, else `keys[N]`) names its counts.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitedKey {
    pub id: String,
    pub limits: KeyLimits,
}

impl LimitedKey {
    /// The configured key with this id, if it has limits: how a run that outlives its request
    /// (resumed after a wait, on any replica) finds the key it is counted against.
    pub fn configured(auth: &AuthConfig, id: &str) -> Option<Self> {
        auth.keys_with_ids()
            .find(|(_, key_id)| key_id == id)
            .and_then(|(key, key_id)| {
                key.limits
                    .filter(|limits| !limits.is_empty())
                    .map(|limits| Self { id: key_id, limits })
            })
    }
}

/// What became of an attempt to take one of a key's run slots.
enum SlotClaim {
    Taken,
    /// Every one of the key's `limit` slots is held.
    Full {
        limit: u32,
    },
    /// The key has no `concurrentRuns`, or its counter failed (the run goes on without one).
    NotHeld,
}

/// "1 run", "2 runs".
fn count_of_runs(count: u32) -> String {
    if count == 1 {
        "1 run".to_string()
    } else {
        format!("{count} runs")
    }
}

/// Why a run submission was refused: each is a 429 at the edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitRefusal {
    #[error(
        "This API key may start {} per minute; retry in {retry_after_secs} s",
        count_of_runs(*limit)
    )]
    RequestsPerMinute { limit: u32, retry_after_secs: u64 },
    #[error("This API key may have {} in progress at once", count_of_runs(*limit))]
    ConcurrentRuns { limit: u32 },
    #[error(
        "This API key's daily budget ({}) is used up until the next UTC day, in {retry_after_secs} s",
        budget.config_key()
    )]
    BudgetExceeded {
        budget: Budget,
        retry_after_secs: u64,
    },
}

impl LimitRefusal {
    /// The `Retry-After` seconds: when the window frees a slot, 1 for a run slot, the next UTC
    /// midnight for a budget.
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Self::RequestsPerMinute {
                retry_after_secs, ..
            }
            | Self::BudgetExceeded {
                retry_after_secs, ..
            } => *retry_after_secs,
            Self::ConcurrentRuns { .. } => 1,
        }
    }
}

/// The run slots this process holds, by run id, for renewal.
type HeldSlots = Arc<Mutex<HashMap<String, String>>>;

/// Counts and enforces every key's limits for this process, sharing the counts with the other
/// replicas through the counter.
pub struct KeyLimiter {
    counter: Arc<dyn LimitCounter>,
    /// This process's id as the holder of run slots.
    replica_id: String,
    held: HeldSlots,
    /// The shutdown of renewals not started yet: a limiter with no configured limits starts
    /// renewing when a run-time key's run first takes a slot.
    pending_renewal: Mutex<Option<CancellationToken>>,
}

/// What is left of a key's limits now (`GET /v1/me`).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct LimitsLeft {
    pub limits: KeyLimits,
    /// Tokens left of `tokensPerDay` until the next UTC day.
    pub tokens_left_today: Option<u64>,
    /// Dollars left of `costUsdPerDay` until the next UTC day.
    pub cost_usd_left_today: Option<f64>,
    /// Requests left of `requestsPerMinute` in the current minute window.
    pub requests_left_this_minute: Option<u64>,
    /// Runs the key may still start now under `concurrentRuns`.
    pub runs_left_now: Option<u64>,
}

impl KeyLimiter {
    /// Counts in Redis when `cache.backend` is `redis`, else in `store`; when some key has
    /// limits, renews this process's slots until `shutdown`.
    pub async fn open(
        config: &Config,
        store: Arc<dyn Store>,
        shutdown: CancellationToken,
    ) -> Result<Self, LimiterSetupError> {
        let any_limits = config
            .auth
            .effective_keys()
            .any(|key| key.limits.is_some_and(|limits| !limits.is_empty()));
        let counter: Arc<dyn LimitCounter> = match config.cache.backend {
            CacheBackend::Redis if any_limits => {
                let redis = config
                    .cache
                    .redis
                    .as_ref()
                    .ok_or(LimiterSetupError::NoRedisUrl)?;
                Arc::new(RedisCounter::connect(redis.url.expose_secret(), &redis.key_prefix).await?)
            }
            _ => Arc::new(StoreCounter(store)),
        };
        let limiter = Self::with_counter(counter);
        if any_limits {
            limiter.keep_renewing(shutdown);
        } else {
            *limiter.pending_renewal_slot() = Some(shutdown);
        }
        Ok(limiter)
    }

    /// A limiter counting in `counter` (renewing nothing until [`KeyLimiter::keep_renewing`]).
    pub fn with_counter(counter: Arc<dyn LimitCounter>) -> Self {
        Self {
            counter,
            replica_id: uuid::Uuid::new_v4().to_string(),
            held: HeldSlots::default(),
            pending_renewal: Mutex::new(None),
        }
    }

    fn pending_renewal_slot(&self) -> std::sync::MutexGuard<'_, Option<CancellationToken>> {
        self.pending_renewal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What is left of `key`'s limits now: today's budgets, this minute's requests and the run
    /// slots free (read, not counted; a counter that cannot be read leaves its field out).
    pub async fn left(&self, key: &LimitedKey) -> LimitsLeft {
        let mut left = LimitsLeft {
            limits: key.limits,
            ..LimitsLeft::default()
        };
        let now = Utc::now();
        if let Some(limit) = key.limits.requests_per_minute {
            match self
                .counter
                .requests_in(&key.id, window::window_start(now))
                .await
            {
                Ok(used) => {
                    left.requests_left_this_minute =
                        Some(u64::from(limit.get()).saturating_sub(used));
                }
                Err(error) => counter_failed(&key.id, &error),
            }
        }
        if let Some(limit) = key.limits.concurrent_runs {
            match self.counter.run_slots_held(&key.id, now).await {
                Ok(held) => left.runs_left_now = Some(u64::from(limit.get()).saturating_sub(held)),
                Err(error) => counter_failed(&key.id, &error),
            }
        }
        if !key.limits.has_daily_budget() {
            return left;
        }
        match self
            .counter
            .usage_on(&key.id, window::utc_day(Utc::now()))
            .await
        {
            Ok(usage) => {
                left.tokens_left_today = key
                    .limits
                    .tokens_per_day
                    .map(|limit| limit.get().saturating_sub(usage.tokens));
                left.cost_usd_left_today = key
                    .limits
                    .cost_usd_per_day
                    .map(|limit| (limit - usage.cost_usd).max(0.0));
            }
            Err(error) => counter_failed(&key.id, &error),
        }
        left
    }

    /// Counts a submission of a run `run_id` by `key` (none: a keyless caller, never limited)
    /// and refuses it past a limit. The order: requests per minute (every submission counts,
    /// refused or not), then the daily budgets, then a run slot.
    pub async fn admit(
        &self,
        key: Option<&LimitedKey>,
        run_id: &str,
    ) -> Result<Option<KeyReservation>, LimitRefusal> {
        let Some(key) = key else {
            return Ok(None);
        };
        let now = Utc::now();
        self.check_request_rate(key, now).await?;
        self.check_budgets(key, now).await?;
        let holds_slot = match self.claim_slot(key, run_id, now).await {
            SlotClaim::Taken => true,
            SlotClaim::NotHeld => false,
            SlotClaim::Full { limit } => return Err(LimitRefusal::ConcurrentRuns { limit }),
        };
        Ok(Some(self.reservation(key, run_id, holds_slot)))
    }

    /// The reservation of a run of `key` that goes on after a wait for approvals (it was
    /// admitted when it started, so no request is counted and no budget checked): one of the
    /// key's run slots, waited for while every slot is held, until `given_up` fires (the run
    /// was cancelled, or the server stops: it then ends without running). Its usage is added
    /// when it ends, as for any run.
    pub async fn resume(
        &self,
        key: &LimitedKey,
        run_id: &str,
        given_up: &CancellationToken,
        spent_before: DailyUsage,
    ) -> KeyReservation {
        let mut logged = false;
        let holds_slot = loop {
            match self.claim_slot(key, run_id, Utc::now()).await {
                SlotClaim::Taken => break true,
                SlotClaim::NotHeld => break false,
                SlotClaim::Full { .. } if !logged => {
                    logged = true;
                    tracing::info!(key_id = %key.id, %run_id, "a resumed run waits for one of its key's run slots");
                }
                SlotClaim::Full { .. } => {}
            }
            tokio::select! {
                () = given_up.cancelled() => break false,
                () = tokio::time::sleep(RESUMED_SLOT_POLL) => {}
            }
        };
        let mut reservation = self.reservation(key, run_id, holds_slot);
        reservation.spent_before = spent_before;
        reservation
    }

    fn reservation(&self, key: &LimitedKey, run_id: &str, holds_slot: bool) -> KeyReservation {
        let meter = key.limits.has_daily_budget().then(|| {
            Arc::new(KeySpendMeter {
                key: key.clone(),
                run_id: run_id.to_string(),
                counter: Arc::clone(&self.counter),
                charged: Mutex::new(DailyUsage::default()),
            })
        });
        KeyReservation {
            key: key.clone(),
            run_id: run_id.to_string(),
            holds_slot,
            counter: Arc::clone(&self.counter),
            held: Arc::clone(&self.held),
            meter,
            spent_before: DailyUsage::default(),
        }
    }

    async fn check_request_rate(
        &self,
        key: &LimitedKey,
        now: DateTime<Utc>,
    ) -> Result<(), LimitRefusal> {
        let Some(limit) = key.limits.requests_per_minute else {
            return Ok(());
        };
        match self
            .counter
            .count_request(&key.id, window::window_start(now))
            .await
        {
            Ok(count) if count > u64::from(limit.get()) => Err(LimitRefusal::RequestsPerMinute {
                limit: limit.get(),
                retry_after_secs: window::seconds_until_window_ends(now),
            }),
            Ok(_) => Ok(()),
            Err(error) => {
                counter_failed(&key.id, &error);
                Ok(())
            }
        }
    }

    async fn check_budgets(
        &self,
        key: &LimitedKey,
        now: DateTime<Utc>,
    ) -> Result<(), LimitRefusal> {
        if !key.limits.has_daily_budget() {
            return Ok(());
        }
        let usage = match self.counter.usage_on(&key.id, window::utc_day(now)).await {
            Ok(usage) => usage,
            Err(error) => {
                counter_failed(&key.id, &error);
                return Ok(());
            }
        };
        match window::exhausted_budget(&key.limits, usage) {
            Some(budget) => Err(LimitRefusal::BudgetExceeded {
                budget,
                retry_after_secs: window::seconds_until_next_utc_day(now),
            }),
            None => Ok(()),
        }
    }

    /// One of the key's run slots for the run, if it has `concurrentRuns` and one is free.
    async fn claim_slot(&self, key: &LimitedKey, run_id: &str, now: DateTime<Utc>) -> SlotClaim {
        let Some(limit) = key.limits.concurrent_runs else {
            return SlotClaim::NotHeld;
        };
        // Held before the claim, so a renewal running meanwhile keeps it alive.
        self.held_slots().insert(run_id.to_string(), key.id.clone());
        let claim = RunSlotClaim {
            key_id: &key.id,
            run_id,
            holder: &self.replica_id,
            limit: limit.get(),
            now,
            lease_until: now + SLOT_LEASE,
        };
        if let Some(shutdown) = self.pending_renewal_slot().take() {
            self.keep_renewing(shutdown);
        }
        let claimed = self.counter.claim_run_slot(&claim).await;
        if !matches!(claimed, Ok(true)) {
            self.held_slots().remove(run_id);
        }
        match claimed {
            Ok(true) => SlotClaim::Taken,
            Ok(false) => SlotClaim::Full { limit: limit.get() },
            Err(error) => {
                counter_failed(&key.id, &error);
                SlotClaim::NotHeld
            }
        }
    }

    fn held_slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Renews the slots this process holds every `RENEW_EVERY` and prunes stale counts,
    /// until `shutdown`.
    pub fn keep_renewing(&self, shutdown: CancellationToken) {
        let counter = Arc::clone(&self.counter);
        let held = Arc::clone(&self.held);
        let replica_id = self.replica_id.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(RENEW_EVERY);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                let slots: Vec<HeldSlot> = held
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .map(|(run_id, key_id)| HeldSlot {
                        key_id: key_id.clone(),
                        run_id: run_id.clone(),
                    })
                    .collect();
                let now = Utc::now();
                if !slots.is_empty()
                    && let Err(error) = counter
                        .renew_run_slots(&replica_id, &slots, now + SLOT_LEASE)
                        .await
                    && !error.is_skipped()
                {
                    tracing::warn!(%error, "could not renew the run slots of limited keys");
                }
                if let Err(error) = counter.prune(now).await
                    && !error.is_skipped()
                {
                    tracing::warn!(%error, "could not prune old key limit counts");
                }
            }
        });
    }
}

/// Logs a failed count (a skipped Redis was logged once when it failed).
fn counter_failed(key_id: &str, error: &CountError) {
    if !error.is_skipped() {
        tracing::error!(%error, key_id, "key limit not checked: its counter failed; request let through");
    }
}

/// What an admitted run of a limited key holds until it ends: maybe a run slot, and its place
/// in the daily budgets. [`KeyReservation::finish`] adds the run's usage and frees the slot;
/// dropped unfinished (the run never started), it frees the slot in the background.
pub struct KeyReservation {
    key: LimitedKey,
    run_id: String,
    holds_slot: bool,
    counter: Arc<dyn LimitCounter>,
    held: HeldSlots,
    /// The run's charges to the key's daily budget, call by call (a key with one).
    meter: Option<Arc<KeySpendMeter>>,
    /// What the run had spent before it waited, charged by the session that ran until then.
    spent_before: DailyUsage,
}

/// Charges a key's daily budget with a run's model calls as they are made and tells the run
/// when the budget is used up (SPEC §14): every run of the key sees the others' spending at
/// once, so together they pass the budget by at most one call each.
pub struct KeySpendMeter {
    key: LimitedKey,
    run_id: String,
    counter: Arc<dyn LimitCounter>,
    charged: Mutex<DailyUsage>,
}

impl KeySpendMeter {
    fn charged(&self) -> DailyUsage {
        *self.charged.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait::async_trait]
impl SpendMeter for KeySpendMeter {
    async fn charge(&self, spent: Spent) {
        let usage = DailyUsage {
            tokens: spent.tokens,
            cost_usd: spent.cost_usd,
        };
        let today = window::utc_day(Utc::now());
        match self.counter.add_usage(&self.key.id, today, usage).await {
            Ok(()) => {
                let mut charged = self.charged.lock().unwrap_or_else(PoisonError::into_inner);
                charged.tokens += usage.tokens;
                charged.cost_usd += usage.cost_usd;
            }
            Err(error) if error.is_skipped() => {}
            Err(error) => {
                tracing::error!(%error, key_id = %self.key.id, run_id = %self.run_id, "a model call's usage was not added to its key's budget");
            }
        }
    }

    async fn exhausted(&self) -> Option<BudgetExceeded> {
        let usage = match self
            .counter
            .usage_on(&self.key.id, window::utc_day(Utc::now()))
            .await
        {
            Ok(usage) => usage,
            Err(error) => {
                counter_failed(&self.key.id, &error);
                return None;
            }
        };
        let (limit, allowed, used) = match window::exhausted_budget(&self.key.limits, usage)? {
            Budget::Tokens => (
                BudgetLimit::KeyTokensPerDay,
                self.key.limits.tokens_per_day.map_or(0, |l| l.get()) as f64,
                usage.tokens as f64,
            ),
            Budget::CostUsd => (
                BudgetLimit::KeyCostUsdPerDay,
                self.key.limits.cost_usd_per_day.unwrap_or_default(),
                usage.cost_usd,
            ),
        };
        Some(BudgetExceeded {
            limit,
            allowed,
            used,
            budget: RunBudget::default(),
        })
    }
}

impl KeyReservation {
    /// The id of the key the run is counted against.
    pub fn key_id(&self) -> &str {
        &self.key.id
    }

    /// The meter the run's session charges call by call: `None` for a key with no daily
    /// budget.
    pub fn meter(&self) -> Option<Arc<dyn SpendMeter>> {
        self.meter
            .as_ref()
            .map(|meter| Arc::clone(meter) as Arc<dyn SpendMeter>)
    }

    /// Adds what the finished run spent and was not charged call by call (a run its session
    /// did not meter: an orchestration, a cached answer) to today's usage of a key with a daily
    /// budget, then frees its run slot.
    pub async fn finish(mut self, result: &AgentResult) {
        if self.key.limits.has_daily_budget() {
            let charged = self
                .meter
                .as_ref()
                .map(|meter| meter.charged())
                .unwrap_or_default();
            let usage = DailyUsage {
                tokens: result
                    .usage
                    .total_tokens
                    .saturating_sub(charged.tokens + self.spent_before.tokens),
                cost_usd: (result.cost_usd - charged.cost_usd - self.spent_before.cost_usd)
                    .max(0.0),
            };
            let today = window::utc_day(Utc::now());
            if let Err(error) = self.counter.add_usage(&self.key.id, today, usage).await
                && !error.is_skipped()
            {
                tracing::error!(%error, key_id = %self.key.id, run_id = %self.run_id, "a run's usage was not added to its key's budget");
            }
        }
        if self.holds_slot {
            self.holds_slot = false;
            release_slot(&*self.counter, &self.held, &self.key.id, &self.run_id).await;
        }
    }
}

impl Drop for KeyReservation {
    fn drop(&mut self) {
        if !self.holds_slot {
            return;
        }
        // Without a runtime to release it on, the slot's lease runs out instead.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let counter = Arc::clone(&self.counter);
            let held = Arc::clone(&self.held);
            let key_id = self.key.id.clone();
            let run_id = std::mem::take(&mut self.run_id);
            runtime.spawn(async move { release_slot(&*counter, &held, &key_id, &run_id).await });
        }
    }
}

async fn release_slot(counter: &dyn LimitCounter, held: &HeldSlots, key_id: &str, run_id: &str) {
    held.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(run_id);
    if let Err(error) = counter.release_run_slot(key_id, run_id).await
        && !error.is_skipped()
    {
        tracing::warn!(%error, key_id, run_id, "could not free a run slot; its lease will");
    }
}
