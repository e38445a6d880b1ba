//! Retention on a running server (SPEC §14): the server's own sweeper removes expired runs, and
//! — a measurement, `#[ignore]`d, run by hand — the latency of ordinary requests while one
//! replica sweeps a large table in small batches, on SQLite and PostgreSQL:
//! `AGENTD_SWEEP_ROWS=200000 cargo test --test api retention::sweep_latency -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use agentd::config::retention::RetentionConfig;
use agentd::runtime::retention::sweep_once;
use agentd::store::{NewRunEvent, RetainedKind};
use serde_json::json;

use crate::store::backends::Backend;
use crate::support::{TestApp, spawn_app_with};

#[tokio::test]
async fn the_servers_sweeper_removes_expired_runs() {
    let app = spawn_app_with(|config| {
        config["retention"] = json!({"runs": "1ms", "sweepSeconds": 1, "pauseMs": 1});
    })
    .await;
    let response = app
        .post_json("/v1/agents/chat/runs", &json!({"prompt": "hi"}))
        .await;
    assert_eq!(response.status(), 200);
    let run_id = crate::support::run_id(&response);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        app.runtime.flush_recorder().await;
        let gone = app
            .runtime
            .store()
            .get_run(&run_id)
            .await
            .expect("store")
            .is_none();
        if gone {
            break;
        }
        assert!(Instant::now() < deadline, "the run was never swept");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn retention_settings_are_checked_at_and_past_their_limits() {
    let parse = |retention: serde_json::Value| {
        agentd::config::parse_config(json!({"retention": retention}), "test")
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert!(parse(json!({"batchSize": 10000})).is_ok());
    let past = parse(json!({"batchSize": 10001})).err().unwrap_or_default();
    assert!(
        past.contains("retention") && past.contains("batchSize"),
        "{past}"
    );
    assert!(parse(json!({"batchSize": 0})).is_err());
    assert!(parse(json!({"sweepSeconds": 0})).is_err());
    let unknown = parse(json!({"chats": "1d"})).err().unwrap_or_default();
    assert!(unknown.contains("chats"), "{unknown}");
}

/// Old run event rows, `rows` of them, written straight to the store.
async fn seed(app: &TestApp, rows: usize) {
    let old = chrono::Utc::now() - chrono::Duration::days(90);
    let store = app.runtime.store();
    let chunk = 1000;
    for start in (0..rows).step_by(chunk) {
        let events: Vec<NewRunEvent> = (start..(start + chunk).min(rows))
            .map(|n| NewRunEvent {
                // One event per run: one row each (a run's consecutive events share a row).
                run_id: format!("old-{n}"),
                seq: 1,
                event_type: "output".into(),
                data: json!({"text": "an old answer of a few words"}).into(),
                ts: old,
            })
            .collect();
        store.append_run_events(&events).await.expect("seeded");
    }
}

/// Latencies of ordinary requests (start a run and wait for its answer, then list runs) made by
/// `clients` clients for `duration`, or until `stop` is cancelled.
async fn load(
    app: &TestApp,
    clients: usize,
    duration: Duration,
    stop: &tokio_util::sync::CancellationToken,
) -> Vec<Duration> {
    let deadline = Instant::now() + duration;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let stop = stop.clone();
        let client = app.client.clone();
        let run = app.url("/v1/agents/chat/runs");
        let list = app.url("/v1/runs?limit=20");
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline && !stop.is_cancelled() {
                let started = Instant::now();
                let response = client
                    .post(&run)
                    .json(&json!({"prompt": "hi"}))
                    .send()
                    .await
                    .expect("run");
                assert_eq!(response.status(), 200);
                let _ = response.bytes().await;
                latencies.push(started.elapsed());
                let started = Instant::now();
                let response = client.get(&list).send().await.expect("list");
                assert_eq!(response.status(), 200);
                let _ = response.bytes().await;
                latencies.push(started.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("client"));
    }
    all.sort_unstable();
    all
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1);
    sorted.get(index).copied().unwrap_or_default()
}

async fn measure(store: &str, url: String) {
    let rows: usize = std::env::var("AGENTD_SWEEP_ROWS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000);
    let app = spawn_app_with(move |config| {
        config["store"] = json!({"url": url});
    })
    .await;
    let seeding = Instant::now();
    seed(&app, rows).await;
    let seeded = seeding.elapsed();
    let never = tokio_util::sync::CancellationToken::new();
    let baseline = load(&app, 4, Duration::from_secs(5), &never).await;
    let config: RetentionConfig = serde_json::from_value(json!({"events": "30d"})).expect("config");
    let store_handle = app.runtime.store().clone();
    let swept = tokio_util::sync::CancellationToken::new();
    let done = swept.clone();
    let sweep = tokio::spawn(async move {
        let started = Instant::now();
        let report = sweep_once(
            store_handle.as_ref(),
            "measuring",
            &config,
            &tokio_util::sync::CancellationToken::new(),
        )
        .await
        .expect("sweep");
        done.cancel();
        (report, started.elapsed())
    });
    let during = load(&app, 4, Duration::from_secs(600), &swept).await;
    let (report, took) = sweep.await.expect("sweep task");
    println!(
        "{store}: seeded {rows} event rows in {seeded:.1?}; sweep deleted {} rows in {took:.1?} \
         (batches of 500, 20 ms apart)\n  baseline  n={} p50={:.1?} p99={:.1?} max={:.1?}\n  \
         sweeping  n={} p50={:.1?} p99={:.1?} max={:.1?}",
        report.deleted(RetainedKind::Events),
        baseline.len(),
        percentile(&baseline, 0.5),
        percentile(&baseline, 0.99),
        baseline.last().copied().unwrap_or_default(),
        during.len(),
        percentile(&during, 0.5),
        percentile(&during, 0.99),
        during.last().copied().unwrap_or_default(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand with --ignored --nocapture"]
async fn sweep_latency_on_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}", dir.path().join("sweep.db").display());
    measure("sqlite", url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand with --ignored --nocapture"]
async fn sweep_latency_on_postgres() {
    let backend = Backend::postgres().await;
    measure("postgres", backend.url.clone()).await;
}
