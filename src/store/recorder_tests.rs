use std::sync::atomic::AtomicU32;

use async_trait::async_trait;
use prometheus::Opts;
use tokio::sync::{Notify, Semaphore};

use super::*;
use crate::store::StoreError;

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
}

#[async_trait]
impl RunBatchStore for FakeEvents {
    async fn write_run_batch(&self, batch: &RunBatch) -> Result<(), StoreError> {
        self.entered.notify_one();
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
        dropped.clone(),
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
        counter(),
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
        counter(),
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
        dropped.clone(),
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
        dropped.clone(),
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
    }
}

fn ended() -> RunOutcome {
    RunOutcome {
        status: "completed",
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
        counter(),
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
        counter(),
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
        dropped.clone(),
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
    let store = failing_store(6);
    let recorder = RunRecorder::start(
        store.clone(),
        settings(2, 100, Duration::from_secs(3600)),
        counter(),
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
        counter(),
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
