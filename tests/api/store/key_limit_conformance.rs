//! The checks every counter of per-key limits must pass: the store's tables (SQLite,
//! PostgreSQL, run from the store suite) and Redis (here, against the local service). Time is
//! passed in, so a dead process's expiring slot is tested without waiting for its lease; it is
//! near the real clock because Redis expires its keys by that clock.

use std::sync::Arc;

use agentd::limits::{HeldSlot, LimitCounter, RedisCounter, StoreCounter};
use agentd::store::{DailyUsage, RunSlotClaim};
use chrono::{DateTime, NaiveDate, SubsecRound, TimeDelta, Utc};

use super::Backend;
use super::cache_conformance::{delete_redis_keys, redis_url};

fn claim<'a>(
    key_id: &'a str,
    run_id: &'a str,
    holder: &'a str,
    limit: u32,
    now: DateTime<Utc>,
) -> RunSlotClaim<'a> {
    RunSlotClaim {
        key_id,
        run_id,
        holder,
        limit,
        now,
        lease_until: now + TimeDelta::seconds(30),
    }
}

fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

async fn claims(counter: &dyn LimitCounter, claim: RunSlotClaim<'_>) -> bool {
    counter.claim_run_slot(&claim).await.expect("claim")
}

pub async fn run_slots_are_held_until_released_or_their_lease_runs_out(counter: &dyn LimitCounter) {
    let t0 = now();
    assert!(claims(counter, claim("k", "run-1", "replica-a", 2, t0)).await);
    assert!(claims(counter, claim("k", "run-2", "replica-a", 2, t0)).await);
    assert!(
        !claims(counter, claim("k", "run-3", "replica-b", 2, t0)).await,
        "past the limit"
    );
    assert!(
        claims(counter, claim("other", "run-4", "replica-b", 1, t0)).await,
        "another key has its own slots"
    );
    counter
        .release_run_slot("k", "run-1")
        .await
        .expect("release");
    assert!(claims(counter, claim("k", "run-3", "replica-b", 2, t0)).await);
    // replica-a dies holding run-2 (never renewed); replica-b renews run-3.
    let renewed_until = t0 + TimeDelta::seconds(60);
    let held = [HeldSlot {
        key_id: "k".into(),
        run_id: "run-3".into(),
    }];
    counter
        .renew_run_slots("replica-b", &held, renewed_until)
        .await
        .expect("renew");
    let later = t0 + TimeDelta::seconds(31);
    assert!(
        claims(counter, claim("k", "run-5", "replica-b", 2, later)).await,
        "the dead replica's slot freed itself"
    );
    assert!(
        !claims(counter, claim("k", "run-6", "replica-b", 2, later)).await,
        "the renewed slot is still held"
    );
    let after_renewal = t0 + TimeDelta::seconds(91);
    assert!(claims(counter, claim("k", "run-6", "replica-b", 2, after_renewal)).await);
}

pub async fn concurrent_claims_never_hand_out_more_slots_than_the_limit(
    counters: [Arc<dyn LimitCounter>; 2],
) {
    let t0 = now();
    let tasks: Vec<_> = (0..12)
        .map(|n| {
            let counter = Arc::clone(&counters[n % 2]);
            tokio::spawn(async move {
                let run_id = format!("run-{n}");
                counter
                    .claim_run_slot(&claim("busy", &run_id, "replica", 3, t0))
                    .await
                    .expect("claim")
            })
        })
        .collect();
    let mut taken = 0;
    for task in tasks {
        taken += usize::from(task.await.expect("task"));
    }
    assert_eq!(taken, 3);
}

pub async fn requests_are_counted_once_each_per_window(counters: [Arc<dyn LimitCounter>; 2]) {
    let window = now().trunc_subsecs(0);
    let tasks: Vec<_> = (0..20)
        .map(|n| {
            let counter = Arc::clone(&counters[n % 2]);
            tokio::spawn(async move { counter.count_request("k", window).await.expect("count") })
        })
        .collect();
    let mut counts = Vec::new();
    for task in tasks {
        counts.push(task.await.expect("task"));
    }
    counts.sort_unstable();
    assert_eq!(counts, (1..=20).collect::<Vec<u64>>(), "no lost update");
    let next_window = window + TimeDelta::minutes(1);
    assert_eq!(
        counters[0]
            .count_request("k", next_window)
            .await
            .expect("count"),
        1
    );
    assert_eq!(
        counters[1]
            .count_request("other", window)
            .await
            .expect("count"),
        1
    );
}

pub async fn usage_adds_up_per_key_and_day(counters: [Arc<dyn LimitCounter>; 2]) {
    let day = NaiveDate::from_ymd_opt(2026, 11, 24).expect("day");
    let tasks: Vec<_> = (0..10)
        .map(|n| {
            let counter = Arc::clone(&counters[n % 2]);
            tokio::spawn(async move {
                let usage = DailyUsage {
                    tokens: 7,
                    cost_usd: 0.25,
                };
                counter.add_usage("k", day, usage).await.expect("add")
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let usage = counters[0].usage_on("k", day).await.expect("usage");
    assert_eq!(usage.tokens, 70);
    assert!((usage.cost_usd - 2.5).abs() < 1e-9, "{usage:?}");
    let next_day = day.succ_opt().expect("next day");
    assert_eq!(
        counters[1].usage_on("k", next_day).await.expect("usage"),
        DailyUsage::default()
    );
    assert_eq!(
        counters[1].usage_on("other", day).await.expect("usage"),
        DailyUsage::default()
    );
}

/// Two stores opened on one database (two replicas), each a counter.
pub async fn store_counters(backend: &Backend) -> [Arc<dyn LimitCounter>; 2] {
    [
        Arc::new(StoreCounter(backend.open().await)),
        Arc::new(StoreCounter(backend.open().await)),
    ]
}

/// Two connections to the local Redis under a fresh prefix (deleted with `delete_redis_keys`).
async fn redis_counters() -> ([Arc<dyn LimitCounter>; 2], String) {
    let prefix = format!("agentd-test-{}:", uuid::Uuid::new_v4().simple());
    let connect = || async {
        RedisCounter::connect(&redis_url(), &prefix)
            .await
            .unwrap_or_else(|e| panic!("Redis is not reachable at {}: {e}", redis_url()))
    };
    (
        [Arc::new(connect().await), Arc::new(connect().await)],
        prefix,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_run_slots_are_held_until_released_or_their_lease_runs_out() {
    let (counters, prefix) = redis_counters().await;
    run_slots_are_held_until_released_or_their_lease_runs_out(counters[0].as_ref()).await;
    delete_redis_keys(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_concurrent_claims_never_hand_out_more_slots_than_the_limit() {
    let (counters, prefix) = redis_counters().await;
    concurrent_claims_never_hand_out_more_slots_than_the_limit(counters).await;
    delete_redis_keys(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_requests_are_counted_once_each_per_window() {
    let (counters, prefix) = redis_counters().await;
    requests_are_counted_once_each_per_window(counters).await;
    delete_redis_keys(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_usage_adds_up_per_key_and_day() {
    let (counters, prefix) = redis_counters().await;
    usage_adds_up_per_key_and_day(counters).await;
    delete_redis_keys(&prefix).await;
}
