//! The run-event recorder: a bounded queue and one background task that writes run events to
//! the store in batches, so a session never waits on the database.
//!
//! [`RunEventRecorder::record`] never waits. The writer flushes when a batch reaches
//! `batch_size` events or `flush_interval` after the first event of a batch, whichever comes
//! first. When the queue is full (the store is slower than the sessions for a sustained time)
//! the event is dropped and counted in `agentd_run_events_dropped_total{reason="queue_full"}`:
//! streaming to the client matters more than the replay log, and an unbounded queue would trade
//! a slow database for an out-of-memory server. A batch the store rejects `write_attempts` times
//! is dropped and counted with `reason="store_error"`. [`RunEventRecorder::close`] writes
//! everything queued before it returns (a clean shutdown loses nothing).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use prometheus::IntCounterVec;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{NewRunEvent, RunEventStore};

/// Tuning of the recorder; the defaults suit a server.
#[derive(Debug, Clone)]
pub struct RecorderSettings {
    /// Events waiting to be written before new ones are dropped.
    pub queue_capacity: usize,
    /// Events written in one transaction.
    pub batch_size: usize,
    /// Longest time an event waits in a partial batch.
    pub flush_interval: Duration,
    /// Tries per batch before it is dropped.
    pub write_attempts: u32,
    /// Pause before the second try; doubled for each further try.
    pub retry_backoff: Duration,
}

impl Default for RecorderSettings {
    fn default() -> Self {
        Self {
            queue_capacity: 16_384,
            batch_size: 256,
            flush_interval: Duration::from_millis(50),
            write_attempts: 3,
            retry_backoff: Duration::from_millis(100),
        }
    }
}

enum Command {
    Event(NewRunEvent),
    /// Answered once every event queued before it has been written (or dropped).
    Flush(oneshot::Sender<()>),
}

/// Cheap to share: `record` only pushes onto a bounded queue.
pub struct RunEventRecorder {
    queue: mpsc::Sender<Command>,
    dropped: IntCounterVec,
    dropped_so_far: AtomicU64,
    stop: CancellationToken,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl RunEventRecorder {
    /// Starts the writer task. `dropped` is a counter with one label, `reason`.
    pub fn start(
        store: Arc<dyn RunEventStore>,
        settings: RecorderSettings,
        dropped: IntCounterVec,
    ) -> Self {
        let (queue, receiver) = mpsc::channel(settings.queue_capacity.max(1));
        let stop = CancellationToken::new();
        let writer = Writer {
            store,
            batch: Vec::with_capacity(settings.batch_size),
            settings,
            dropped: dropped.clone(),
        };
        let task = tokio::spawn(writer.run(receiver, stop.clone()));
        Self {
            queue,
            dropped,
            dropped_so_far: AtomicU64::new(0),
            stop,
            writer: Mutex::new(Some(task)),
        }
    }

    /// Queues an event without waiting; drops and counts it when the queue is full or closed.
    pub fn record(&self, event: NewRunEvent) {
        let reason = match self.queue.try_send(Command::Event(event)) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Full(_)) => "queue_full",
            Err(mpsc::error::TrySendError::Closed(_)) => "closed",
        };
        self.dropped.with_label_values(&[reason]).inc();
        // One line per thousand drops: enough to notice, not enough to flood the log.
        if self
            .dropped_so_far
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(1000)
        {
            warn!(
                reason,
                "run events are being dropped: the store cannot keep up"
            );
        }
    }

    /// Waits until every event recorded before this call is written (or dropped).
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.queue.send(Command::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
    }

    /// Writes everything queued, then stops the writer; later events are dropped as `closed`.
    pub async fn close(&self) {
        self.stop.cancel();
        let task = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task
            && let Err(error) = task.await
        {
            warn!(%error, "the run-event writer ended abnormally");
        }
    }
}

struct Writer {
    store: Arc<dyn RunEventStore>,
    batch: Vec<NewRunEvent>,
    settings: RecorderSettings,
    dropped: IntCounterVec,
}

impl Writer {
    async fn run(mut self, mut queue: mpsc::Receiver<Command>, stop: CancellationToken) {
        let mut deadline: Option<Instant> = None;
        let mut stopping = false;
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled(), if !stopping => {
                    // No new events; the ones already queued are still received below.
                    queue.close();
                    stopping = true;
                }
                command = queue.recv() => match command {
                    Some(Command::Event(event)) => {
                        self.batch.push(event);
                        if self.batch.len() >= self.settings.batch_size {
                            self.write_batch().await;
                            deadline = None;
                        } else if deadline.is_none() {
                            deadline = Some(Instant::now() + self.settings.flush_interval);
                        }
                    }
                    Some(Command::Flush(ack)) => {
                        self.write_batch().await;
                        deadline = None;
                        let _ = ack.send(());
                    }
                    None => {
                        self.write_batch().await;
                        return;
                    }
                },
                () = sleep_until(deadline), if deadline.is_some() => {
                    self.write_batch().await;
                    deadline = None;
                }
            }
        }
    }

    async fn write_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let attempts = self.settings.write_attempts.max(1);
        let mut backoff = self.settings.retry_backoff;
        for attempt in 1..=attempts {
            match self.store.append_run_events(&self.batch).await {
                Ok(()) => break,
                Err(error) if attempt == attempts => {
                    warn!(%error, events = self.batch.len(), "run events could not be stored; dropped");
                    self.dropped
                        .with_label_values(&["store_error"])
                        .inc_by(self.batch.len() as u64);
                }
                Err(error) => {
                    warn!(%error, attempt, "storing run events failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
            }
        }
        self.batch.clear();
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[path = "recorder_tests.rs"]
mod tests;
