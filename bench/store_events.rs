//! Appended run events and recorded runs per second on SQLite and PostgreSQL, measured in one
//! run.
//!
//! `cargo bench --bench store_events [-- --events N]`. For each backend it measures the writer
//! the server uses (batches of 256 in one transaction, one writer), one event per transaction
//! (what batching saves), the cost a session pays per event (`RunRecorder::event`, which only
//! queues), and whole runs through the recorder as a single-turn run writes them (start, six
//! events, end with one accounting entry and the whole result). PostgreSQL is the local service (`AGENTD_BENCH_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`); a fresh database is created and dropped.

#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a benchmark stops loudly on a broken setup"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::store::{
    AccountingRecord, NewRun, NewRunEvent, RecorderMetrics, RecorderSettings, RunOutcome,
    RunRecorder, Store,
};
use agentd::vocabulary::RunStatus;
use serde_json::json;
use sqlx::Connection;

const BATCH: usize = 256;

struct Measured {
    backend: &'static str,
    batched_per_s: f64,
    single_per_s: f64,
    record_ns: f64,
    recorder_per_s: f64,
    runs_per_s: f64,
}

/// The events of a single-turn run, in the kinds and rough sizes the server stores.
const RUN_EVENTS: [&str; 6] = [
    "run.started",
    "turn.started",
    "output",
    "accounting",
    "final_report",
    "run.finished",
];

fn new_run(id: &str) -> NewRun {
    NewRun {
        id: id.to_string(),
        agent: "bench".into(),
        user_id: Some("user-1".into()),
        conversation_id: None,
        created_at: chrono::Utc::now(),
        owner: None,
        acted_by: None,
        key_id: None,
    }
}

fn outcome() -> RunOutcome {
    let entry = json!({"type": "llm", "status": "ok", "provider": "llm", "model": "m", "latency": 1,
        "tokens": {"inputTokens": 20, "outputTokens": 5, "totalTokens": 25}, "timestamp": 0});
    RunOutcome {
        status: RunStatus::Completed,
        exit_reason: "final_answer",
        success: true,
        error: None,
        final_report: Some(
            json!({"status": "success", "format": "text", "content": "token token"}).into(),
        ),
        input_tokens: 20,
        output_tokens: 5,
        cached_tokens: 0,
        total_tokens: 25,
        cost_usd: 0.0,
        turns: 1,
        finished_at: chrono::Utc::now(),
        duration_ms: 1,
        result: Some(
            json!({"run_id": "r", "success": true, "exit_reason": "final_answer",
            "conversation": [{"role": "user", "content": "Say something."}, {"role": "assistant", "content": "token token"}],
            "accounting": [entry.clone()], "usage": {"inputTokens": 20, "outputTokens": 5}, "turns": 1})
            .into(),
        ),
        accounting: vec![AccountingRecord {
            entry_type: "llm".into(),
            provider: Some("llm".into()),
            model: Some("m".into()),
            tool: None,
            status: "ok".into(),
            ts: chrono::Utc::now(),
            entry: entry.into(),
            usage: Default::default(),
        }],
        notices: Vec::new(),
    }
}

/// The recorder's counters around `dropped`.
fn recorder_metrics(dropped: &prometheus::IntCounterVec) -> RecorderMetrics {
    RecorderMetrics {
        dropped: dropped.clone(),
        refused: prometheus::IntCounterVec::new(
            prometheus::Opts::new("refused", "refused"),
            &["kind"],
        )
        .expect("counter"),
    }
}

/// `runs` single-turn runs queued through a recorder as the runtime does, until all are stored.
async fn runs_per_second(backend: &str, store: Arc<dyn Store>, runs: usize) -> f64 {
    let dropped =
        prometheus::IntCounterVec::new(prometheus::Opts::new("dropped", "dropped"), &["reason"])
            .expect("counter");
    let settings = RecorderSettings::for_store(store.as_ref());
    let recorder = RunRecorder::start(store.clone(), settings, recorder_metrics(&dropped));
    let template = outcome();
    let started = Instant::now();
    for n in 0..runs {
        let run = new_run(&format!("run-{n}"));
        recorder.run_started(run.clone()).await;
        // As the runtime queues them: the events a session emits between two waits are one
        // item (its start and first turn, then its answer, accounting, report and end).
        let events: Vec<NewRunEvent> = (1..)
            .zip(RUN_EVENTS)
            .map(|(seq, kind)| NewRunEvent {
                run_id: run.id.clone(),
                seq,
                event_type: kind.into(),
                data: json!({"text": "token", "turn": 1, "status": "ok"}).into(),
                ts: chrono::Utc::now(),
            })
            .collect();
        let (first, rest) = events.split_at(2);
        recorder.events(first.to_vec());
        recorder.events(rest.to_vec());
        recorder.run_finished(run, template.clone()).await;
    }
    recorder.flush().await;
    let per_s = per_second(runs, started.elapsed());
    recorder.close().await;
    let last = store
        .get_run(&format!("run-{}", runs - 1))
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(
        last.status,
        RunStatus::Completed,
        "{backend}: the last run is not finished"
    );
    per_s
}

fn events(run: &str, count: usize) -> Vec<NewRunEvent> {
    (1..=count)
        .map(|seq| NewRunEvent {
            run_id: run.to_string(),
            seq: seq as i64,
            event_type: "output".into(),
            data: json!({"text": "a typical streamed token or two"}).into(),
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
    let recorder = RunRecorder::start(store.clone(), settings, recorder_metrics(&dropped));
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
    let runs_per_s = runs_per_second(backend, store, (count / 8).max(100)).await;
    Measured {
        backend,
        batched_per_s,
        single_per_s,
        record_ns: recording.as_nanos() as f64 / total as f64,
        recorder_per_s,
        runs_per_s,
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
        "| backend | batched events/s | 1 event per transaction, events/s | batching gain | recorder end to end, events/s | record() per event | runs/s (start + 6 events + end) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for m in [&sqlite, &pg] {
        println!(
            "| {} | {:.0} | {:.0} | {:.1}x | {:.0} | {:.0} ns | {:.0} |",
            m.backend,
            m.batched_per_s,
            m.single_per_s,
            m.batched_per_s / m.single_per_s,
            m.recorder_per_s,
            m.record_ns,
            m.runs_per_s
        );
    }
    println!(
        "\nPostgreSQL / SQLite, batched: {:.2}",
        pg.batched_per_s / sqlite.batched_per_s
    );
}
