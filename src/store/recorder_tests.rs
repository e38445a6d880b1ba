use std::sync::atomic::{AtomicBool, AtomicU32};

use async_trait::async_trait;
use prometheus::Opts;
use tokio::sync::{Notify, Semaphore};

use super::*;
use crate::store::StoreError;
use crate::vocabulary::RunStatus;

/// A store that records the batches it is given, optionally blocking or failing first.
#[derive(Default)]
struct FakeEvents {
    batches: Mutex<Vec<Vec<i64>>>,
    /// Per batch: (run id, finished) of each run row.
    runs: Mutex<Vec<Vec<(String, bool)>>>,
    /// When set, every write waits for a permit.
    gate: Option<Arc<Semaphore>>,
    entered: Notify,
    failures_left: AtomicU32,
    /// While set, every write and probe fails as if the database were gone.
    down: AtomicBool,
    /// Event seqs and run ids whose rows the store refuses (a data error) in any batch.
    refused_seqs: Vec<i64>,
    refused_runs: Vec<String>,
    /// Writes attempted, refused or not.
    writes: AtomicU32,
}

#[async_trait]
impl RunBatchStore for FakeEvents {
    async fn write_run_batch(&self, batch: &RunBatch) -> Result<(), StoreError> {
        self.entered.notify_one();
        self.writes.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Query(sqlx::Error::PoolTimedOut));
        }
        let refused_event = batch
            .events
            .iter()
            .any(|e| self.refused_seqs.contains(&e.seq));
        // A refused run's failed stand-in is taken: only its own data was refused.
        let refused_run = batch.runs.iter().any(|w| {
            self.refused_runs.contains(&w.run.id)
                && w.outcome
                    .as_ref()
                    .is_none_or(|end| end.status != RunStatus::Failed)
        });
        if refused_event || refused_run {
            return Err(StoreError::Encode {
                what: "test row",
                detail: "refused".into(),
            });
        }
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("gate open").forget();
        }
        if self
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::Query(sqlx::Error::PoolTimedOut));
        }
        self.batches
            .lock()
            .expect("lock")
            .push(batch.events.iter().map(|e| e.seq).collect());
        self.runs.lock().expect("lock").push(
            batch
                .runs
                .iter()
                .map(|w| (w.run.id.clone(), w.outcome.is_some()))
                .collect(),
        );
        Ok(())
    }

    async fn reachable(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Query(sqlx::Error::PoolTimedOut));
        }
        Ok(())
    }
}

impl FakeEvents {
    fn batch_sizes(&self) -> Vec<usize> {
        self.batches
            .lock()
            .expect("lock")
            .iter()
            .map(Vec::len)
            .collect()
    }
    fn seqs(&self) -> Vec<i64> {
        self.batches.lock().expect("lock").concat()
    }
}

/// A store that rejects its first `failures` batches.
fn failing_store(failures: u32) -> Arc<FakeEvents> {
    Arc::new(FakeEvents {
        failures_left: AtomicU32::new(failures),
        ..FakeEvents::default()
    })
}

fn counter() -> IntCounterVec {
    IntCounterVec::new(Opts::new("dropped", "dropped"), &["reason"]).expect("counter")
}

/// The recorder's counters around `dropped`, with a fresh `refused`.
fn metrics(dropped: &IntCounterVec) -> RecorderMetrics {
    RecorderMetrics {
        dropped: dropped.clone(),
        refused: IntCounterVec::new(Opts::new("refused", "refused"), &["kind"]).expect("counter"),
    }
}

fn event(seq: i64) -> NewRunEvent {
    NewRunEvent {
        run_id: "run".into(),
        seq,
        event_type: "output".into(),
        data: serde_json::json!({"text": "x"}).into(),
        ts: chrono::Utc::now(),
    }
}

fn settings(
    queue_capacity: usize,
    batch_size: usize,
    flush_interval: Duration,
) -> RecorderSettings {
    RecorderSettings {
        queue_capacity,
        batch_size,
        flush_interval,
        write_attempts: 3,
        retry_backoff: Duration::from_millis(100),
    }
}

async fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A recorder whose writer took event 1 and waits on the store's closed gate, so its queue (of
/// `capacity` items, one write per batch) starts empty; `gate.add_permits` lets the store work.
struct Held {
    recorder: RunRecorder,
    store: Arc<FakeEvents>,
    gate: Arc<Semaphore>,
    dropped: IntCounterVec,
}

async fn held_writer(capacity: usize) -> Held {
    let gate = Arc::new(Semaphore::new(0));
    let store = Arc::new(FakeEvents {
        gate: Some(gate.clone()),
        ..FakeEvents::default()
    });
    let dropped = counter();
    let recorder = RunRecorder::start(
        store.clone(),
        settings(capacity, 1, Duration::from_secs(3600)),
        metrics(&dropped),
    );
    recorder.event(event(1));
    store.entered.notified().await;
    Held {
        recorder,
        store,
        gate,
        dropped,
    }
}

#[tokio::test]
async fn full_batches_are_written_at_once_and_flush_writes_the_rest() {
    let store = Arc::new(FakeEvents::default());
    let recorder = RunRecorder::start(
        store.clone(),
        settings(100, 3, Duration::from_secs(3600)),
        metrics(&counter()),
    );
    for seq in 1..=7 {
        recorder.event(event(seq));
    }
    wait_for("two full batches", || store.batch_sizes().len() == 2).await;
    assert_eq!(
        store.batch_sizes(),
        vec![3, 3],
        "the 7th waits for its batch"
    );
    recorder.flush().await;
    assert_eq!(store.batch_sizes(), vec![3, 3, 1]);
    assert_eq!(store.seqs(), (1..=7).collect::<Vec<_>>(), "order is kept");
}

#[tokio::test(start_paused = true)]
async fn a_partial_batch_is_written_after_the_flush_interval() {
    let store = Arc::new(FakeEvents::default());
    let recorder = RunRecorder::start(
        store.clone(),
        settings(100, 100, Duration::from_millis(50)),
        metrics(&counter()),
    );
    recorder.event(event(1));
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(
        store.batch_sizes().is_empty(),
        "written before the interval"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.batch_sizes(), vec![1]);
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_without_waiting() {
    let Held {
        recorder,
        store,
        gate,
        dropped,
    } = held_writer(4).await;
    let started = std::time::Instant::now();
    for seq in 2..=8 {
        recorder.event(event(seq));
    }
    assert!(started.elapsed() < Duration::from_secs(1), "record waited");
    assert_eq!(dropped.with_label_values(&["queue_full"]).get(), 3);
    gate.add_permits(100);
    recorder.flush().await;
    assert_eq!(store.seqs(), vec![1, 2, 3, 4, 5], "queued events are kept");
}

#[tokio::test]
async fn a_burst_of_events_is_one_queue_item_and_dropped_whole_when_full() {
    let Held {
        recorder,
        store,
        gate,
        dropped,
    } = held_writer(2).await;
    // Capacity 2 holds two bursts however many events they carry; the third is dropped whole.
    recorder.events((2..=5).map(event).collect());
    recorder.events((6..=9).map(event).collect());
    recorder.events((10..=12).map(event).collect());
    recorder.events(Vec::new());
    assert_eq!(dropped.with_label_values(&["queue_full"]).get(), 3);
    gate.add_permits(100);
    recorder.flush().await;
    assert_eq!(store.seqs(), (1..=9).collect::<Vec<_>>());
}

#[tokio::test]
async fn close_writes_everything_queued_and_later_events_count_as_closed() {
    let store = Arc::new(FakeEvents::default());
    let dropped = counter();
    let recorder = RunRecorder::start(
        store.clone(),
        settings(1000, 1000, Duration::from_secs(3600)),
        metrics(&dropped),
    );
    for seq in 1..=10 {
        recorder.event(event(seq));
    }
    recorder.close().await;
    assert_eq!(store.seqs(), (1..=10).collect::<Vec<_>>());
    recorder.event(event(11));
    assert_eq!(dropped.with_label_values(&["closed"]).get(), 1);
    recorder.flush().await; // returns at once on a closed recorder
}

#[tokio::test(start_paused = true)]
async fn store_errors_are_retried_then_the_batch_is_dropped_and_counted() {
    let store = failing_store(2);
    let dropped = counter();
    let recorder = RunRecorder::start(
        store.clone(),
        settings(100, 2, Duration::from_secs(3600)),
        metrics(&dropped),
    );
    recorder.event(event(1));
    recorder.event(event(2));
    recorder.flush().await;
    assert_eq!(store.seqs(), vec![1, 2], "the third try succeeds");
    store.failures_left.store(3, Ordering::SeqCst);
    recorder.event(event(3));
    recorder.event(event(4));
    recorder.flush().await;
    assert_eq!(store.seqs(), vec![1, 2], "three failures drop the batch");
    assert_eq!(dropped.with_label_values(&["store_error"]).get(), 2);
}

fn run(id: &str) -> NewRun {
    NewRun {
        id: id.into(),
        agent: "agent".into(),
        user_id: None,
        conversation_id: None,
        created_at: chrono::Utc::now(),
        owner: None,
        acted_by: None,
        key_id: None,
    }
}

fn ended() -> RunOutcome {
    RunOutcome {
        status: RunStatus::Completed,
        exit_reason: "final_answer",
        success: true,
        error: None,
        final_report: None,
        input_tokens: 0,
        output_tokens: 0,
        cached_tokens: 0,
        total_tokens: 0,
        cost_usd: 0.0,
        turns: 1,
        finished_at: chrono::Utc::now(),
        duration_ms: 1,
        result: None,
        accounting: Vec::new(),
        notices: Vec::new(),
    }
}

impl FakeEvents {
    fn run_rows(&self) -> Vec<Vec<(String, bool)>> {
        self.runs.lock().expect("lock").clone()
    }
}

#[tokio::test]
async fn a_run_started_and_finished_in_one_batch_is_one_finished_row_beside_its_events() {
    let store = Arc::new(FakeEvents::default());
    let recorder = RunRecorder::start(
        store.clone(),
        settings(100, 100, Duration::from_secs(3600)),
        metrics(&counter()),
    );
    recorder.run_started(run("a")).await;
    recorder.run_started(run("b")).await;
    recorder.event(event(1));
    recorder.run_finished(run("a"), ended()).await;
    recorder.flush().await;
    assert_eq!(
        store.run_rows(),
        vec![vec![("a".to_string(), true), ("b".to_string(), false)]],
        "one transaction; a's end replaced its start, in place"
    );
    assert_eq!(store.seqs(), vec![1]);
    recorder.run_finished(run("b"), ended()).await;
    recorder.flush().await;
    assert_eq!(store.run_rows()[1], vec![("b".to_string(), true)]);
}

#[tokio::test]
async fn run_rows_wait_for_room_in_a_full_queue_instead_of_being_dropped() {
    let Held {
        recorder,
        store,
        gate,
        dropped,
    } = held_writer(2).await;
    let recorder = Arc::new(recorder);
    recorder.event(event(2));
    recorder.event(event(3));
    let waiting = tokio::spawn({
        let recorder = recorder.clone();
        async move {
            let _stored = recorder.run_finished(run("r"), ended()).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !waiting.is_finished(),
        "the run row waits while the queue is full"
    );
    gate.add_permits(100);
    waiting.await.expect("queued");
    recorder.flush().await;
    let finished: Vec<(String, bool)> = store.run_rows().concat();
    assert_eq!(finished, vec![("r".to_string(), true)]);
    assert_eq!(dropped.with_label_values(&["queue_full"]).get(), 0);
}

#[tokio::test]
async fn after_close_run_rows_are_written_directly() {
    let store = Arc::new(FakeEvents::default());
    let recorder = RunRecorder::start(
        store.clone(),
        settings(100, 100, Duration::from_secs(3600)),
        metrics(&counter()),
    );
    recorder.run_started(run("late")).await;
    recorder.close().await;
    recorder.run_finished(run("late"), ended()).await;
    assert_eq!(
        store.run_rows(),
        vec![
            vec![("late".to_string(), false)],
            vec![("late".to_string(), true)]
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_batch_the_store_keeps_rejecting_drops_its_events_but_keeps_its_runs() {
    let store = failing_store(3);
    let dropped = counter();
    let recorder = RunRecorder::start(
        store.clone(),
        settings(100, 100, Duration::from_secs(3600)),
        metrics(&dropped),
    );
    recorder.run_started(run("kept")).await;
    recorder.event(event(1));
    recorder.flush().await;
    assert!(
        store.run_rows().is_empty(),
        "three failures, nothing stored"
    );
    assert_eq!(dropped.with_label_values(&["store_error"]).get(), 1);
    recorder.run_finished(run("kept"), ended()).await;
    recorder.flush().await;
    assert_eq!(
        store.run_rows(),
        vec![vec![("kept".to_string(), true)]],
        "the run's start was carried and replaced by its end"
    );
    assert!(store.seqs().is_empty(), "the event was dropped");
}

#[tokio::test(start_paused = true)]
async fn carried_runs_are_dropped_past_the_queue_capacity() {
    // Three tries of the first batch, then one per try while the store stays unreachable.
    let store = failing_store(4);
    let recorder = RunRecorder::start(
        store.clone(),
        settings(2, 100, Duration::from_secs(3600)),
        metrics(&counter()),
    );
    recorder.run_started(run("a")).await;
    recorder.run_started(run("b")).await;
    recorder.flush().await;
    recorder.run_started(run("c")).await;
    recorder.flush().await;
    recorder.run_started(run("d")).await;
    recorder.flush().await;
    assert_eq!(
        store.run_rows(),
        vec![vec![("d".to_string(), false)]],
        "2 carried are kept, 3 are more than the capacity of 2"
    );
}

#[tokio::test(start_paused = true)]
async fn carried_runs_are_retried_after_the_flush_interval_without_new_writes() {
    let store = failing_store(3);
    let recorder = RunRecorder::start(
        store.clone(),
        settings(100, 100, Duration::from_millis(50)),
        metrics(&counter()),
    );
    recorder.run_finished(run("idle"), ended()).await;
    // 50 ms to the first write, 100 + 200 ms of backoff, then 50 ms to the retry.
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(store.run_rows(), vec![vec![("idle".to_string(), true)]]);
}

#[tokio::test]
async fn the_recorder_takes_its_batch_size_from_the_store() {
    let sqlite = crate::store::SqliteStore::open("sqlite::memory:")
        .await
        .expect("in-memory store");
    assert_eq!(RecorderSettings::for_store(&sqlite).batch_size, 1024);
    let fake = FakeEvents::default();
    assert_eq!(
        RecorderSettings::for_store(&fake).batch_size,
        RecorderSettings::default().batch_size
    );
}

/// A recorder over `store`, with its counters.
fn started(
    store: FakeEvents,
    settings: RecorderSettings,
) -> (Arc<FakeEvents>, RunRecorder, RecorderMetrics) {
    let store = Arc::new(store);
    let metrics = metrics(&counter());
    let recorder = RunRecorder::start(store.clone(), settings, metrics.clone());
    (store, recorder, metrics)
}

/// Every run row stored, in order, whatever batch it was in.
fn stored_runs(store: &FakeEvents) -> Vec<(String, bool)> {
    store.run_rows().concat()
}

fn finished(id: &str) -> (String, bool) {
    (id.to_string(), true)
}

#[tokio::test]
async fn a_refused_event_is_isolated_and_every_other_row_is_stored() {
    let (store, recorder, metrics) = started(
        FakeEvents {
            refused_seqs: vec![7],
            ..FakeEvents::default()
        },
        settings(100, 100, Duration::from_secs(3600)),
    );
    let dropped = metrics.dropped.clone();
    for id in ["a", "b", "c"] {
        recorder.run_finished(run(id), ended()).await;
    }
    recorder.events((1..=20).map(event).collect());
    recorder.flush().await;
    let expected: Vec<i64> = (1..=20).filter(|seq| *seq != 7).collect();
    let mut seqs = store.seqs();
    seqs.sort_unstable();
    assert_eq!(seqs, expected, "every event but the refused one");
    assert_eq!(
        stored_runs(&store),
        vec![finished("a"), finished("b"), finished("c")]
    );
    assert_eq!(metrics.refused.with_label_values(&["event"]).get(), 1);
    assert_eq!(dropped.with_label_values(&["refused"]).get(), 1);
    assert_eq!(dropped.with_label_values(&["store_error"]).get(), 0);
    // Isolating one row among 23 takes a few writes, not one per row.
    assert!(store.writes.load(Ordering::SeqCst) <= 12);
    assert!(recorder.is_storing(), "a refusal is not an outage");

    // Nothing is carried: the next batch is written at once, whole.
    let before = store.writes.load(Ordering::SeqCst);
    recorder.events((21..=25).map(event).collect());
    recorder.flush().await;
    assert_eq!(store.writes.load(Ordering::SeqCst), before + 1);
    assert!(store.seqs().ends_with(&[21, 22, 23, 24, 25]));
}

#[tokio::test]
async fn a_refused_run_end_is_stored_as_a_failed_stand_in_and_counted() {
    let store = Arc::new(FakeEvents {
        refused_runs: vec!["bad".into()],
        ..FakeEvents::default()
    });
    let metrics = metrics(&counter());
    let recorder = RunRecorder::start(
        store.clone(),
        settings(100, 100, Duration::from_secs(3600)),
        metrics.clone(),
    );
    recorder.run_finished(run("good"), ended()).await;
    let stored = recorder.run_finished(run("bad"), ended()).await;
    recorder.run_finished(run("also-good"), ended()).await;
    recorder.flush().await;
    stored.await.expect("answered");
    let rows = stored_runs(&store);
    for id in ["good", "bad", "also-good"] {
        assert!(rows.contains(&finished(id)), "{id} missing from {rows:?}");
    }
    assert_eq!(metrics.refused.with_label_values(&["run"]).get(), 1);
}

/// The issue's failure: a row the store refuses was kept for the next batch, so every later
/// batch failed and the queue filled until every request waited. Now each batch with a
/// refused row still stores the rest, and the sessions' run rows never wait long.
#[tokio::test]
async fn refused_rows_never_stall_the_queue_or_get_retried_forever() {
    let refused_runs: Vec<String> = (0..200).step_by(17).map(|n| format!("r{n}")).collect();
    let (store, recorder, metrics) = started(
        FakeEvents {
            refused_runs: refused_runs.clone(),
            ..FakeEvents::default()
        },
        settings(8, 8, Duration::from_millis(5)),
    );
    let dropped = metrics.dropped.clone();
    let started = std::time::Instant::now();
    let mut answers = Vec::new();
    for n in 0..200 {
        recorder.run_started(run(&format!("r{n}"))).await;
        recorder.event(event(n));
        answers.push(recorder.run_finished(run(&format!("r{n}")), ended()).await);
    }
    for answer in answers {
        answer.await.expect("every run's end is answered");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let rows = stored_runs(&store);
    for n in 0..200 {
        assert!(
            rows.contains(&finished(&format!("r{n}"))),
            "r{n} has no finished row"
        );
    }
    let refused = metrics.refused.with_label_values(&["run"]).get();
    assert!(
        refused >= refused_runs.len() as u64 && refused <= 2 * refused_runs.len() as u64,
        "each refused run counted once or twice (its start and its end), got {refused}"
    );
    let writes_after = store.writes.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        store.writes.load(Ordering::SeqCst),
        writes_after,
        "nothing is retried once given up"
    );
    assert_eq!(
        store.seqs().len() as u64 + dropped.with_label_values(&["queue_full"]).get(),
        200,
        "every event is stored or counted (a small queue drops some while runs wait)"
    );
    assert!(recorder.is_storing());
}

#[tokio::test]
async fn an_unreachable_store_keeps_runs_in_memory_without_stalling_and_stores_them_when_back() {
    let store = Arc::new(FakeEvents::default());
    store.down.store(true, Ordering::SeqCst);
    let dropped = counter();
    let recorder = RunRecorder::start(
        store.clone(),
        RecorderSettings {
            queue_capacity: 64,
            batch_size: 4,
            flush_interval: Duration::from_millis(5),
            write_attempts: 3,
            retry_backoff: Duration::from_millis(1),
        },
        metrics(&dropped),
    );
    recorder.run_finished(run("first"), ended()).await;
    recorder.event(event(1));
    wait_for("the outage is noticed", || !recorder.is_storing()).await;
    // Far more run rows than the queue holds: the writer keeps taking them meanwhile.
    for n in 0..40 {
        let _stored = recorder
            .run_finished(run(&format!("meanwhile-{n}")), ended())
            .await;
        recorder.event(event(n + 2));
    }
    assert!(stored_runs(&store).is_empty());
    store.down.store(false, Ordering::SeqCst);
    wait_for("the store is written again", || recorder.is_storing()).await;
    recorder.flush().await;
    let rows = stored_runs(&store);
    assert!(rows.contains(&finished("first")));
    for n in 0..40 {
        assert!(rows.contains(&finished(&format!("meanwhile-{n}"))));
    }
    let events_dropped = dropped.with_label_values(&["store_error"]).get();
    assert_eq!(
        events_dropped + store.seqs().len() as u64,
        41,
        "every event is stored or counted"
    );
}

/// An event of `kind` numbered `seq` of run `run_id`.
fn event_of(run_id: &str, seq: i64, kind: &str) -> NewRunEvent {
    NewRunEvent {
        run_id: run_id.into(),
        event_type: kind.into(),
        ..event(seq)
    }
}

#[tokio::test]
async fn a_runs_closing_events_are_kept_through_an_outage_and_stored_with_its_end() {
    let store = Arc::new(FakeEvents::default());
    store.down.store(true, Ordering::SeqCst);
    let dropped = counter();
    let recorder = RunRecorder::start(
        store.clone(),
        RecorderSettings {
            write_attempts: 1,
            ..settings(64, 4, Duration::from_millis(5))
        },
        metrics(&dropped),
    );
    recorder.run_started(run("run")).await;
    recorder.events(vec![event(1), event(2)]);
    wait_for("the outage is noticed", || !recorder.is_storing()).await;
    // The run streams on and ends while the store is down.
    recorder
        .last_events(vec![
            event(3),
            event_of("run", 4, "final_report"),
            event_of("run", 5, "run.finished"),
        ])
        .await;
    let _stored = recorder.run_finished(run("run"), ended()).await;
    recorder.flush().await;
    assert!(store.seqs().is_empty());
    store.down.store(false, Ordering::SeqCst);
    wait_for("the store is written again", || recorder.is_storing()).await;
    recorder.flush().await;
    assert_eq!(store.seqs(), vec![4, 5], "the log's end is stored");
    assert!(stored_runs(&store).contains(&finished("run")));
    assert_eq!(dropped.with_label_values(&["store_error"]).get(), 3);
}

#[test]
fn a_full_busy_or_failing_disk_is_transient_and_a_full_one_says_so() {
    use super::super::transient_code;
    assert!(transient_code("13"), "SQLite full");
    assert!(transient_code("5"), "SQLite busy");
    assert!(transient_code("778"), "SQLite write I/O error");
    assert!(transient_code("53100"), "PostgreSQL disk full");
    assert!(transient_code("08006"), "connection failure");
    assert!(!transient_code("19"), "SQLite constraint");
    assert!(!transient_code("2067"), "SQLite unique constraint");
    assert!(!transient_code("23505"), "PostgreSQL unique violation");
    assert!(!transient_code("40P01"), "deadlock");
    assert!(!StoreError::Query(sqlx::Error::PoolTimedOut).is_full());
}

#[tokio::test]
async fn an_outage_with_nothing_to_write_ends_when_the_store_answers_again() {
    let store = Arc::new(FakeEvents::default());
    store.down.store(true, Ordering::SeqCst);
    let recorder = RunRecorder::start(
        store.clone(),
        RecorderSettings {
            write_attempts: 1,
            ..settings(16, 16, Duration::from_millis(5))
        },
        metrics(&counter()),
    );
    recorder.event(event(1));
    wait_for("the outage is noticed", || !recorder.is_storing()).await;
    store.down.store(false, Ordering::SeqCst);
    wait_for("the probe sees the store back", || recorder.is_storing()).await;
}

#[test]
fn data_errors_are_refusals_and_connection_errors_are_outages() {
    assert!(
        super::super::refusal_code("22P05"),
        "unsupported unicode escape"
    );
    assert!(super::super::refusal_code("22021"), "invalid byte sequence");
    assert!(super::super::refusal_code("23505"), "unique violation");
    assert!(
        super::super::refusal_code("2067"),
        "SQLite unique constraint"
    );
    assert!(super::super::refusal_code("18"), "SQLite too big");
    assert!(!super::super::refusal_code("08006"), "connection failure");
    assert!(!super::super::refusal_code("5"), "SQLite busy");
    assert!(!super::super::refusal_code("40P01"), "deadlock");
    let timeout = StoreError::Query(sqlx::Error::PoolTimedOut);
    assert!(timeout.is_unavailable() && !timeout.is_refusal());
    let encode = StoreError::Encode {
        what: "x",
        detail: "y".into(),
    };
    assert!(encode.is_refusal() && !encode.is_unavailable());
}
