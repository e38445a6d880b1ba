//! The run recorder: a bounded queue and one background task that writes runs (their start and
//! their end, with accounting) and run events to the store in batches, one transaction each, so
//! neither a session nor the response to its client waits on the database.
//!
//! The writer flushes when a batch reaches `batch_size` writes or `flush_interval` after the
//! first write of a batch, whichever comes first, and at once when a run's end is waited for
//! ([`RunRecorder::run_finished`]) together with whatever was queued with it. A run started and finished within one batch is
//! written as one finished row. Run rows are never dropped for a full queue: [`RunRecorder::run_started`]
//! and [`RunRecorder::run_finished`] wait for room (the store sets the pace), and after
//! [`RunRecorder::close`] they are written directly. So do a run's last events
//! ([`RunRecorder::last_events`]), whose closing ones (`final_report`, `run.finished`) are kept
//! with the run rows wherever other events are dropped: a stored run always has the end of its
//! log, and a replay of it ends. Other events never wait: when the queue is full
//! (the store is slower than the sessions for a sustained time) the event is dropped and counted
//! in `agentd_run_events_dropped_total{reason="queue_full"}`: streaming to the client matters
//! more than the replay log, and an unbounded queue would trade a slow database for an
//! out-of-memory server.
//!
//! A failed batch is handled by why it failed:
//! - **The store refused a row** (a data error, [`StoreError::is_refusal`]; or any error the
//!   store answered with, after `write_attempts`): the batch is split in halves, each written on
//!   its own, recursively, until the rows the store refuses are alone. Each refused row is
//!   logged and counted in `agentd_run_records_refused_total{kind}`; a refused event is dropped
//!   (`agentd_run_events_dropped_total{reason="refused"}`), a refused run end is replaced by a
//!   stand-in row (status `failed`, the store's error) when the store takes that. Every other row
//!   is stored: one bad row never holds back another run.
//! - **The store cannot take writes for now** ([`StoreError::is_unavailable`], after
//!   `write_attempts`: unreachable, or full): the events are dropped (`reason="store_error"`), the
//!   run rows and closing events are kept in memory (up to `queue_capacity`) and the batch is
//!   tried again every `flush_interval`, once per try, while the queue keeps being drained (events
//!   arriving meanwhile are dropped at once, run rows and closing events are kept), so no session
//!   waits on a dead store. The outage is logged at error level, and [`RunRecorder::is_storing`]
//!   is false meanwhile (`/ready` answers 503).
//!
//! Readers that must see what was queued before them (a run read after its response was sent)
//! call [`RunRecorder::flush`] first. [`RunRecorder::close`] writes everything queued before it
//! returns (a clean shutdown loses nothing).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use prometheus::IntCounterVec;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use super::{NewRun, NewRunEvent, RunBatch, RunBatchStore, RunOutcome, RunWrite, StoreError};
use crate::vocabulary::RunStatus;

/// Tuning of the recorder; the defaults suit a server.
#[derive(Debug, Clone)]
pub struct RecorderSettings {
    /// Queued items (a run row, or one burst of a run's events) before new events are dropped.
    pub queue_capacity: usize,
    /// Writes in one transaction.
    pub batch_size: usize,
    /// Longest time a write waits in a partial batch.
    pub flush_interval: Duration,
    /// Tries per batch before it is dropped.
    pub write_attempts: u32,
    /// Pause before the second try; doubled for each further try.
    pub retry_backoff: Duration,
}

impl RecorderSettings {
    /// The defaults, with the batch size that suits `store`.
    pub fn for_store(store: &dyn RunBatchStore) -> Self {
        Self {
            batch_size: store.preferred_batch_size(),
            ..Self::default()
        }
    }
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

/// The recorder's counters.
#[derive(Clone)]
pub struct RecorderMetrics {
    /// Run events not stored, by `reason` (`queue_full`, `store_error`, `refused`, `closed`).
    pub dropped: IntCounterVec,
    /// Rows the store refused, by `kind` (`run`, `event`).
    pub refused: IntCounterVec,
}

enum Command {
    /// Events in seq order, usually all a session emitted between two waits.
    Events(Vec<NewRunEvent>),
    /// A run row with the events written with it (a run's closing ones, with its end). Boxed:
    /// a finished run is several times the size of an event. The sender, when given, is
    /// answered once the write is in the store (or given up).
    Run(
        Box<(RunWrite, Vec<NewRunEvent>)>,
        Option<oneshot::Sender<()>>,
    ),
    /// Answered once every write queued before it has been made (or dropped).
    Flush(oneshot::Sender<()>),
}

/// Cheap to share: recording only pushes onto a bounded queue.
pub struct RunRecorder {
    queue: mpsc::Sender<Command>,
    store: Arc<dyn RunBatchStore>,
    dropped: IntCounterVec,
    dropped_so_far: AtomicU64,
    /// False while the store is unreachable for the writer.
    storing: Arc<AtomicBool>,
    stop: CancellationToken,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl RunRecorder {
    /// Starts the writer task.
    pub fn start(
        store: Arc<dyn RunBatchStore>,
        settings: RecorderSettings,
        metrics: RecorderMetrics,
    ) -> Self {
        let (queue, receiver) = mpsc::channel(settings.queue_capacity.max(1));
        let stop = CancellationToken::new();
        let storing = Arc::new(AtomicBool::new(true));
        let writer = Writer {
            store: store.clone(),
            batch: PendingBatch::default(),
            settings,
            metrics: metrics.clone(),
            storing: storing.clone(),
            outage: false,
        };
        let task = tokio::spawn(writer.run(receiver, stop.clone()));
        Self {
            queue,
            store,
            dropped: metrics.dropped,
            dropped_so_far: AtomicU64::new(0),
            storing,
            stop,
            writer: Mutex::new(Some(task)),
        }
    }

    /// False while the writer cannot reach the store (its last batch failed for that reason);
    /// true again once a batch is stored.
    pub fn is_storing(&self) -> bool {
        self.storing.load(Ordering::Relaxed)
    }

    /// Queues a run's start (status `running`).
    pub async fn run_started(&self, run: NewRun) {
        self.write_run(RunWrite { run, outcome: None }, Vec::new(), None)
            .await;
    }

    /// Queues a run's end with its accounting (and its notices); see [`Self::run_finished_with`].
    pub async fn run_finished(&self, run: NewRun, outcome: RunOutcome) -> oneshot::Receiver<()> {
        self.run_finished_with(run, outcome, Vec::new()).await
    }

    /// Queues a run's end with its accounting (and its notices) and its `closing` events,
    /// written in one transaction at once; `run` is the same as at its start. The returned
    /// receiver resolves once the end (with every event queued before it) is in the store, or
    /// the recorder gave up on it.
    pub async fn run_finished_with(
        &self,
        run: NewRun,
        outcome: RunOutcome,
        closing: Vec<NewRunEvent>,
    ) -> oneshot::Receiver<()> {
        let (written, stored) = oneshot::channel();
        let write = RunWrite {
            run,
            outcome: Some(outcome),
        };
        self.write_run(write, closing, Some(written)).await;
        stored
    }

    /// Queues a run's last events (those with its closing events, `final_report` and
    /// `run.finished`) as a run row is queued: waiting for room, written directly once the
    /// recorder is closed; the closing ones are kept through an outage.
    pub async fn last_events(&self, events: Vec<NewRunEvent>) {
        if events.is_empty() {
            return;
        }
        let Err(mpsc::error::SendError(Command::Events(events))) =
            self.queue.send(Command::Events(events)).await
        else {
            return;
        };
        let batch = RunBatch {
            runs: Vec::new(),
            events,
        };
        if let Err(error) = self.store.write_run_batch(&batch).await {
            warn!(%error, run_id = %batch.events[0].run_id, "could not record the run's last events");
        }
    }

    /// Waits for room in the queue; once the recorder is closed, writes to the store directly.
    async fn write_run(
        &self,
        write: RunWrite,
        events: Vec<NewRunEvent>,
        written: Option<oneshot::Sender<()>>,
    ) {
        let command = Command::Run(Box::new((write, events)), written);
        let Err(mpsc::error::SendError(Command::Run(write, written))) =
            self.queue.send(command).await
        else {
            return;
        };
        let (write, events) = *write;
        let batch = RunBatch {
            runs: vec![write],
            events,
        };
        if let Err(error) = self.store.write_run_batch(&batch).await {
            warn!(%error, run_id = %batch.runs[0].run.id, "could not record the run");
        }
        if let Some(written) = written {
            let _ = written.send(());
        }
    }

    /// Queues an event without waiting; drops and counts it when the queue is full or closed.
    pub fn event(&self, event: NewRunEvent) {
        self.events(vec![event]);
    }

    /// Queues events as one item without waiting; drops and counts them when the queue is full
    /// or closed.
    pub fn events(&self, events: Vec<NewRunEvent>) {
        if events.is_empty() {
            return;
        }
        let count = events.len() as u64;
        let reason = match self.queue.try_send(Command::Events(events)) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Full(_)) => "queue_full",
            Err(mpsc::error::TrySendError::Closed(_)) => "closed",
        };
        self.dropped.with_label_values(&[reason]).inc_by(count);
        // One line per thousand drops: enough to notice, not enough to flood the log.
        let before = self.dropped_so_far.fetch_add(count, Ordering::Relaxed);
        if before / 1000 != (before + count) / 1000 || before == 0 {
            warn!(
                reason,
                "run events are being dropped: the store cannot keep up"
            );
        }
    }

    /// Waits until every write queued before this call is made (or dropped).
    pub async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.queue.send(Command::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
    }

    /// Writes everything queued, then stops the writer; later events are dropped as `closed`
    /// and later run rows are written directly.
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
            warn!(%error, "the run writer ended abnormally");
        }
    }
}

/// The writes of the next transaction. A run appears once: its end replaces its queued start.
#[derive(Default)]
struct PendingBatch {
    writes: RunBatch,
    run_index: HashMap<String, usize>,
    /// Answered when the batch is written (or its runs given up).
    written: Vec<oneshot::Sender<()>>,
}

impl PendingBatch {
    fn len(&self) -> usize {
        self.writes.runs.len() + self.writes.events.len()
    }

    /// Drops every event but the closing ones; how many it dropped.
    fn drop_all_but_closing_events(&mut self) -> usize {
        let before = self.writes.events.len();
        self.writes.events.retain(NewRunEvent::is_closing);
        before - self.writes.events.len()
    }

    fn push_run(&mut self, write: RunWrite) {
        match self.run_index.get(&write.run.id) {
            Some(&index) => self.writes.runs[index] = write,
            None => {
                self.run_index
                    .insert(write.run.id.clone(), self.writes.runs.len());
                self.writes.runs.push(write);
            }
        }
    }

    /// Puts back the run rows and events of `writes` (what a failed write left).
    fn put_back(&mut self, writes: RunBatch) {
        self.run_index.clear();
        self.writes.runs.clear();
        self.writes.events = writes.events;
        for write in writes.runs {
            self.push_run(write);
        }
    }

    /// After the batch is written or given up: tells whoever waits for it, and empties it.
    fn clear(&mut self) {
        self.writes.runs.clear();
        self.writes.events.clear();
        self.run_index.clear();
        for written in self.written.drain(..) {
            let _ = written.send(());
        }
    }
}

struct Writer {
    store: Arc<dyn RunBatchStore>,
    batch: PendingBatch,
    settings: RecorderSettings,
    metrics: RecorderMetrics,
    storing: Arc<AtomicBool>,
    /// The last write found the store unable to take writes: new events (but closing ones)
    /// are dropped at once and writes wait for the retry clock instead of being made on every
    /// push.
    outage: bool,
}

impl Writer {
    async fn run(mut self, mut queue: mpsc::Receiver<Command>, stop: CancellationToken) {
        let mut deadline: Option<Instant> = None;
        let mut stopping = false;
        let mut commands = Vec::with_capacity(self.settings.batch_size);
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled(), if !stopping => {
                    // Nothing new; what is already queued is still received below.
                    queue.close();
                    stopping = true;
                }
                received = queue.recv_many(&mut commands, self.settings.batch_size.max(1)) => {
                    if received == 0 {
                        self.write_batch().await;
                        if !self.batch.writes.runs.is_empty() {
                            warn!(runs = self.batch.writes.runs.len(),
                                "closing with run records the store did not take; they are lost");
                        }
                        return;
                    }
                    for command in commands.drain(..) {
                        self.apply(command, &mut deadline).await;
                    }
                    // A run's end someone waits for is written now, with whatever came with it.
                    if !self.batch.written.is_empty() && !self.outage {
                        self.write_batch().await;
                        deadline = self.retry_deadline();
                    }
                }
                () = sleep_until(deadline), if deadline.is_some() => {
                    self.write_batch().await;
                    deadline = self.retry_deadline();
                }
            }
        }
    }

    async fn apply(&mut self, command: Command, deadline: &mut Option<Instant>) {
        match command {
            Command::Events(mut events) if self.outage => {
                let before = events.len();
                events.retain(NewRunEvent::is_closing);
                self.metrics
                    .dropped
                    .with_label_values(&["store_error"])
                    .inc_by((before - events.len()) as u64);
                self.batch.writes.events.append(&mut events);
                if deadline.is_none() {
                    *deadline = self.retry_deadline();
                }
            }
            Command::Events(mut events) => {
                self.batch.writes.events.append(&mut events);
                self.after_push(deadline).await;
            }
            Command::Run(write, written) => {
                let (write, mut events) = *write;
                self.batch.writes.events.append(&mut events);
                self.batch.push_run(write);
                self.batch.written.extend(written);
                self.after_push(deadline).await;
            }
            Command::Flush(ack) => {
                self.write_batch().await;
                *deadline = self.retry_deadline();
                let _ = ack.send(());
            }
        }
    }

    /// Writes a full batch now; starts the flush clock on a batch's first write.
    async fn after_push(&mut self, deadline: &mut Option<Instant>) {
        if self.batch.len() >= self.settings.batch_size && !self.outage {
            self.write_batch().await;
            *deadline = self.retry_deadline();
        } else if deadline.is_none() {
            *deadline = Some(Instant::now() + self.settings.flush_interval);
        }
    }

    /// After a write: run rows carried over from a failed batch are tried again after the
    /// flush interval even if nothing new arrives, and an unreachable store is probed.
    fn retry_deadline(&self) -> Option<Instant> {
        (self.batch.len() > 0 || self.outage).then(|| Instant::now() + self.settings.flush_interval)
    }

    /// Writes the pending batch, retrying an error up to `write_attempts` times (once while the
    /// store is known to be unreachable). What the store refuses is isolated; when the store
    /// cannot take writes the events are dropped (and counted) but the run rows and closing
    /// events stay for the next try, up to `queue_capacity` of them: an outage must not lose a
    /// run's record nor the end of its log.
    async fn write_batch(&mut self) {
        if self.batch.len() == 0 {
            // Nothing to write: while the store is down, see whether it is back.
            if self.outage && self.store.reachable().await.is_ok() {
                self.stored();
            }
            return;
        }
        let attempts = if self.outage {
            1
        } else {
            self.settings.write_attempts.max(1)
        };
        let mut backoff = self.settings.retry_backoff;
        let mut failure = None;
        for attempt in 1..=attempts {
            match self.store.write_run_batch(&self.batch.writes).await {
                Ok(()) => {
                    self.batch.clear();
                    self.stored();
                    return;
                }
                Err(error) if error.is_refusal() || attempt == attempts => {
                    failure = Some(error);
                    break;
                }
                Err(error) => {
                    warn!(%error, attempt, "storing runs and run events failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
            }
        }
        match failure {
            Some(error) if error.is_unavailable() => self.unreachable(&error),
            // The store answered: whatever it refuses is in this batch.
            _ => self.isolate().await,
        }
    }

    /// A batch was stored: the store is reachable.
    fn stored(&mut self) {
        if self.outage {
            tracing::info!("the store is reachable again: runs and run events are stored");
        }
        self.outage = false;
        self.storing.store(true, Ordering::Relaxed);
    }

    /// The store cannot take writes: keep the run rows and closing events, drop the others.
    fn unreachable(&mut self, error: &StoreError) {
        if !self.outage {
            let why = if error.is_full() {
                "the store is full"
            } else {
                "the store is unreachable"
            };
            error!(%error, runs = self.batch.writes.runs.len(), events = self.batch.writes.events.len(),
                "{why}: run events are dropped, runs and their closing events are kept in memory and retried");
        }
        self.outage = true;
        self.storing.store(false, Ordering::Relaxed);
        let dropped = self.batch.drop_all_but_closing_events();
        self.metrics
            .dropped
            .with_label_values(&["store_error"])
            .inc_by(dropped as u64);
        let carried = self.batch.len();
        if carried > self.settings.queue_capacity {
            error!(
                records = carried,
                "run records could not be stored for too long; dropped"
            );
            self.batch.clear();
        }
    }

    /// Writes the batch in halves, and halves of the halves that fail, until each row the store
    /// refuses is alone; those are given up (counted), everything else is stored. If the store
    /// becomes unreachable meanwhile, what is not yet written is kept as after any outage
    /// (rewriting what was written changes nothing).
    async fn isolate(&mut self) {
        let mut parts = vec![std::mem::take(&mut self.batch.writes)];
        while let Some(part) = parts.pop() {
            match self.store.write_run_batch(&part).await {
                Ok(()) => {}
                Err(error) if error.is_unavailable() => {
                    let mut rest = part;
                    for later in parts.drain(..).rev() {
                        rest.runs.extend(later.runs);
                        rest.events.extend(later.events);
                    }
                    self.batch.put_back(rest);
                    self.unreachable(&error);
                    return;
                }
                Err(error) if part.runs.len() + part.events.len() == 1 => {
                    self.refuse(part, &error).await;
                }
                Err(_) => {
                    let (first, second) = split(part);
                    parts.push(second);
                    parts.push(first);
                }
            }
        }
        self.batch.clear();
        self.stored();
    }

    /// Gives up one row the store refused: counted and logged; a run's end is replaced by a
    /// stand-in that records the failure, if the store takes that.
    async fn refuse(&self, mut row: RunBatch, error: &StoreError) {
        if let Some(event) = row.events.pop() {
            warn!(%error, run_id = %event.run_id, seq = event.seq, event_type = %event.event_type,
                "the store refused a run event; it is dropped");
            self.metrics.refused.with_label_values(&["event"]).inc();
            self.metrics.dropped.with_label_values(&["refused"]).inc();
            return;
        }
        let Some(write) = row.runs.pop() else {
            return;
        };
        warn!(%error, run_id = %write.run.id, finished = write.outcome.is_some(),
            "the store refused a run's record; a stand-in marks it failed");
        self.metrics.refused.with_label_values(&["run"]).inc();
        let Some(outcome) = write.outcome else {
            // Its end (or a stand-in for it) will be written when the run ends.
            return;
        };
        let stand_in = RunBatch {
            runs: vec![RunWrite {
                run: write.run,
                outcome: Some(refused_outcome(outcome, error)),
            }],
            events: Vec::new(),
        };
        if let Err(error) = self.store.write_run_batch(&stand_in).await {
            warn!(%error, run_id = %stand_in.runs[0].run.id, "the stand-in of a refused run could not be stored either");
        }
    }
}

/// Splits a batch of two rows or more in two non-empty halves, keeping the order (runs, then
/// events).
fn split(mut batch: RunBatch) -> (RunBatch, RunBatch) {
    let half = (batch.runs.len() + batch.events.len()) / 2;
    let mut second = RunBatch::default();
    if half <= batch.runs.len() {
        second.runs = batch.runs.split_off(half);
        second.events = std::mem::take(&mut batch.events);
    } else {
        second.events = batch.events.split_off(half - batch.runs.len());
    }
    (batch, second)
}

/// The end of a run whose own end the store refused: failed, with the store's error, and
/// nothing the refused row carried beyond its usage.
fn refused_outcome(end: RunOutcome, error: &StoreError) -> RunOutcome {
    RunOutcome {
        status: RunStatus::Failed,
        exit_reason: "internal_error",
        success: false,
        error: Some(format!("the store refused this run's record: {error}")),
        final_report: None,
        result: None,
        accounting: Vec::new(),
        ..end
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
