//! Appended run events per second on SQLite and PostgreSQL, measured in one run.
//!
//! `cargo bench --bench store_events [-- --events N]`. For each backend it measures the writer
//! the server uses (batches of 256 in one transaction, one writer), one event per transaction
//! (what batching saves), and the cost a session pays per event (`RunRecorder::event`,
//! which only queues). PostgreSQL is the local service (`AGENTD_BENCH_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`); a fresh database is created and dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::store::{NewRunEvent, RecorderSettings, RunRecorder, Store};
use serde_json::json;
use sqlx::Connection;

const BATCH: usize = 256;

struct Measured {
    backend: &'static str,
    batched_per_s: f64,
    single_per_s: f64,
    record_ns: f64,
    recorder_per_s: f64,
}

fn events(run: &str, count: usize) -> Vec<NewRunEvent> {
    (1..=count)
        .map(|seq| NewRunEvent {
            run_id: run.to_string(),
            seq: seq as i64,
            event_type: "output".into(),
            data: json!({"text": "a typical streamed token or two"}),
            ts: chrono::Utc::now(),
        })
        .collect()
}

fn per_second(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

async fn measure(backend: &'static str, store: Arc<dyn Store>, count: usize) -> Measured {
    let batched = events("batched", count);
    let started = Instant::now();
    for chunk in batched.chunks(BATCH) {
        store.append_run_events(chunk).await.expect("append");
    }
    let batched_per_s = per_second(count, started.elapsed());

    let singles = events("single", (count / 20).max(100));
    let started = Instant::now();
    for event in &singles {
        store
            .append_run_events(std::slice::from_ref(event))
            .await
            .expect("append");
    }
    let single_per_s = per_second(singles.len(), started.elapsed());

    // The session side: queue `count` events from 8 runs, then wait until all are stored.
    let dropped =
        prometheus::IntCounterVec::new(prometheus::Opts::new("dropped", "dropped"), &["reason"])
            .expect("counter");
    let settings = RecorderSettings {
        queue_capacity: count + 1,
        ..RecorderSettings::default()
    };
    let recorder = RunRecorder::start(store.clone(), settings, dropped.clone());
    let queued: Vec<NewRunEvent> = (0..8)
        .flat_map(|run| events(&format!("recorded-{run}"), count / 8))
        .collect();
    let total = queued.len();
    let started = Instant::now();
    let mut recording = Duration::ZERO;
    for event in queued {
        let before = Instant::now();
        recorder.event(event);
        recording += before.elapsed();
    }
    recorder.flush().await;
    let recorder_per_s = per_second(total, started.elapsed());
    recorder.close().await;
    let lost: u64 = ["queue_full", "store_error", "closed"]
        .iter()
        .map(|r| dropped.with_label_values(&[r]).get())
        .sum();
    assert_eq!(lost, 0, "{backend}: events were dropped");
    let stored = store
        .list_run_events("recorded-7", 0, 1000)
        .await
        .expect("list")
        .len();
    assert_eq!(stored, (count / 8).min(1000), "{backend}: events missing");
    Measured {
        backend,
        batched_per_s,
        single_per_s,
        record_ns: recording.as_nanos() as f64 / total as f64,
        recorder_per_s,
    }
}

async fn fresh_postgres() -> (String, String, String) {
    let admin_url = std::env::var("AGENTD_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {admin_url}: {e} (start the local service)"));
    let name = format!("agentd_bench_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("create database");
    let (base, _) = admin_url.rsplit_once('/').expect("url has a database");
    (format!("{base}/{name}"), admin_url, name)
}

async fn drop_postgres(admin_url: &str, name: &str) {
    let mut admin = sqlx::PgConnection::connect(admin_url).await.expect("admin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .expect("drop database");
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let count = args
        .iter()
        .position(|a| a == "--events")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000usize);

    let dir = tempfile::tempdir().expect("dir");
    let sqlite_url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let sqlite = agentd::store::open(&sqlite_url).await.expect("sqlite");
    let sqlite = measure("SQLite (WAL, synchronous=NORMAL)", sqlite, count).await;

    let (pg_url, admin_url, name) = fresh_postgres().await;
    let postgres = agentd::store::open(&pg_url).await.expect("postgres");
    let pg = measure("PostgreSQL (local)", postgres.clone(), count).await;
    postgres.close().await;
    drop_postgres(&admin_url, &name).await;

    println!("{count} events per measurement, batches of {BATCH}\n");
    println!(
        "| backend | batched events/s | 1 event per transaction, events/s | batching gain | recorder end to end, events/s | record() per event |"
    );
    println!("|---|---|---|---|---|---|");
    for m in [&sqlite, &pg] {
        println!(
            "| {} | {:.0} | {:.0} | {:.1}x | {:.0} | {:.0} ns |",
            m.backend,
            m.batched_per_s,
            m.single_per_s,
            m.batched_per_s / m.single_per_s,
            m.recorder_per_s,
            m.record_ns
        );
    }
    println!(
        "\nPostgreSQL / SQLite, batched: {:.2}",
        pg.batched_per_s / sqlite.batched_per_s
    );
}
