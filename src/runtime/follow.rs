//! Reading runs back, on any replica: a run as it is now, a run's events followed until it ends
//! (replay after `Last-Event-ID`, then live events, in order, each once), and cancelling a run
//! wherever it executes.
//!
//! A run executing in this process is followed from its in-memory log (see [`super::live`]);
//! any other run from the store, woken by the store's notifications when its owner writes (and,
//! as a safety net for a missed wake, every [`SAFETY_POLL`]). Nothing here forces the recorder to
//! write early.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;

use super::Runtime;
use super::live::LiveRun;
use crate::store::{JsonText, RunEventRecord, RunFilter, RunRecord, StoreError};

/// How long a follower of a run elsewhere waits for a wake before looking anyway.
const SAFETY_POLL: Duration = Duration::from_secs(1);
/// Stored events fetched per query while replaying.
const REPLAY_PAGE: u32 = 500;
/// How long a just-started run is waited for before it counts as unknown.
const RECENT_RUN_WAIT: Duration = Duration::from_secs(2);

/// The event that ends every run's stream.
const RUN_FINISHED: &str = "run.finished";
/// How often a cancel looks for its run again: a waiting run that a decision resumed as the
/// cancel tried to take it runs (and is found running) on the next look.
const CANCEL_ATTEMPTS: usize = 3;

/// How a run is cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelMode {
    /// A graceful final turn.
    Stop,
    /// End now.
    Abort,
}

impl CancelMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Abort => "abort",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "stop" => Some(Self::Stop),
            "abort" => Some(Self::Abort),
            _ => None,
        }
    }
}

/// What became of a cancel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The run executes here and was told to stop.
    Cancelled,
    /// The run executes on another replica, which was asked to stop it.
    Requested,
    /// The run is not running (its stored status).
    NotRunning(String),
    NotFound,
}

/// One event of a followed run.
#[derive(Debug, Clone)]
pub struct FollowedEvent {
    pub seq: i64,
    pub kind: Cow<'static, str>,
    pub data: JsonText,
}

/// Why following a run stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("run `{0}` was not recorded in time: the process that started it may have stopped")]
    NeverRecorded(String),
    #[error("the server is shutting down; follow the run on another replica")]
    ShuttingDown,
}

impl From<RunEventRecord> for FollowedEvent {
    fn from(event: RunEventRecord) -> Self {
        Self {
            seq: event.seq,
            kind: Cow::Owned(event.event_type),
            data: event.data,
        }
    }
}

impl Runtime {
    /// Runs matching `filter`, newest first, once everything queued for the store before this
    /// call is written (a run that just ended here shows its end).
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        self.recorder.flush().await;
        self.store.list_runs(filter).await
    }

    /// The run as it is now: from memory while it executes here, else from the store.
    pub async fn recorded_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        match self.live.get(run_id) {
            Some(live) if !live.is_finished() => Ok(Some(running_record(&live))),
            // Ended here, its end not yet written: wait for the write rather than show it running.
            Some(_) => {
                self.recorder.flush().await;
                self.store.get_run(run_id).await
            }
            None => self.store.get_run(run_id).await,
        }
    }

    /// The run as it is now; a run started moments ago on another replica (its id says when) is
    /// waited for until it is recorded, so a client that submits on one replica and follows on
    /// another never gets a 404 for a run it was just given.
    pub async fn find_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        match self.recorded_run(run_id).await? {
            Some(run) => Ok(Some(run)),
            None if started_recently(run_id) => self.wait_for_run(run_id, RECENT_RUN_WAIT).await,
            None => Ok(None),
        }
    }

    /// The run once it is recorded, waiting up to `within` for a run another replica (or this
    /// one) has started but not written yet; `None` if it is still not recorded by then.
    pub async fn wait_for_run(
        &self,
        run_id: &str,
        within: Duration,
    ) -> Result<Option<RunRecord>, StoreError> {
        let deadline = tokio::time::Instant::now() + within;
        let follower = self.live.follow_remote(run_id);
        loop {
            let woken = follower.woken();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if let Some(run) = self.recorded_run(run_id).await? {
                return Ok(Some(run));
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return Ok(None);
            }
        }
    }

    /// Cancels a run wherever it executes. A run waiting for approvals that a decision resumes
    /// (here or on another replica) as the cancel lands is cancelled where it now runs.
    pub async fn cancel_run(
        self: &Arc<Self>,
        run_id: &str,
        mode: CancelMode,
    ) -> Result<CancelOutcome, StoreError> {
        let mut status = String::new();
        for _ in 0..CANCEL_ATTEMPTS {
            if let Some(control) = self.live.control(run_id) {
                match mode {
                    CancelMode::Stop => control.stop.cancel(),
                    CancelMode::Abort => control.abort.cancel(),
                }
                return Ok(CancelOutcome::Cancelled);
            }
            let Some(run) = self.recorded_run(run_id).await? else {
                return Ok(CancelOutcome::NotFound);
            };
            status = run.status;
            if status == "waiting_approval" {
                // It holds no process: whoever takes its checkpoint first ends it, here.
                if self.resume_waiting_run(run_id, true).await? {
                    return Ok(CancelOutcome::Cancelled);
                }
                // A decision resumed it first: it runs now, here or elsewhere.
                continue;
            }
            if status != "running" {
                return Ok(CancelOutcome::NotRunning(status));
            }
            self.store
                .request_cancel(run_id, mode.as_str(), chrono::Utc::now())
                .await?;
            return Ok(CancelOutcome::Requested);
        }
        Ok(CancelOutcome::NotRunning(status))
    }

    /// The run's events after seq `after`, then new ones as they happen, until `run.finished`
    /// (or the run's end when it never stored one). An error ends the stream after it is yielded.
    pub fn follow_run_events(
        self: &Arc<Self>,
        run_id: String,
        after: i64,
    ) -> impl Stream<Item = Result<FollowedEvent, FollowError>> + Send + 'static + use<> {
        let runtime = self.clone();
        async_stream::stream! {
            let mut after = after;
            if let Some(live) = runtime.live.get(&run_id) {
                // A run resumed here after a wait: what came before is in the store.
                while after < live.base_seq() {
                    let page = match runtime.store.list_run_events(&run_id, after, REPLAY_PAGE).await {
                        Ok(page) => page,
                        Err(error) => {
                            yield Err(error.into());
                            return;
                        }
                    };
                    let before = after;
                    for event in page.into_iter().take_while(|e| e.seq <= live.base_seq()) {
                        after = event.seq;
                        yield Ok(event.into());
                    }
                    if after == before {
                        break;
                    }
                }
                // Every event is in memory until the run's end is stored (it then retires).
                let mut finished = false;
                loop {
                    let woken = live.appended();
                    tokio::pin!(woken);
                    woken.as_mut().enable();
                    let batch = follow_live(&live, &mut after, &mut finished);
                    let retired = runtime.live.get(&run_id).is_none();
                    for event in batch {
                        yield Ok(event);
                    }
                    if finished {
                        return;
                    }
                    if retired {
                        break;
                    }
                    tokio::select! {
                        () = woken => {}
                        () = runtime.shutdown.cancelled() => {
                            yield Err(FollowError::ShuttingDown);
                            return;
                        }
                    }
                }
            }
            // From the store: woken by notifications, checked anyway every SAFETY_POLL.
            let follower = runtime.live.follow_remote(&run_id);
            let unrecorded_deadline = tokio::time::Instant::now()
                + Duration::from_secs(runtime.config.server.owner_timeout_seconds);
            loop {
                let woken = follower.woken();
                tokio::pin!(woken);
                woken.as_mut().enable();
                let page = match runtime.store.list_run_events(&run_id, after, REPLAY_PAGE).await {
                    Ok(page) => page,
                    Err(error) => {
                        yield Err(error.into());
                        return;
                    }
                };
                let full_page = page.len() as u32 == REPLAY_PAGE;
                for event in page {
                    after = event.seq;
                    let finished = event.event_type == RUN_FINISHED;
                    yield Ok(event.into());
                    if finished {
                        return;
                    }
                }
                if full_page {
                    continue;
                }
                match runtime.store.get_run(&run_id).await {
                    Ok(Some(run)) if is_ended(&run.status) => {
                        // Ended without a stored `run.finished`: whatever else was stored, then stop.
                        if let Ok(rest) = runtime.store.list_run_events(&run_id, after, REPLAY_PAGE).await {
                            for event in rest {
                                yield Ok(event.into());
                            }
                        }
                        return;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) if tokio::time::Instant::now() >= unrecorded_deadline => {
                        yield Err(FollowError::NeverRecorded(run_id.clone()));
                        return;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        yield Err(error.into());
                        return;
                    }
                }
                tokio::select! {
                    _ = tokio::time::timeout(SAFETY_POLL, woken) => {}
                    () = runtime.shutdown.cancelled() => {
                        yield Err(FollowError::ShuttingDown);
                        return;
                    }
                }
            }
        }
    }
}

/// Whether a run with this status has ended (a run waiting for approval has not).
pub(super) fn is_ended(status: &str) -> bool {
    !matches!(status, "queued" | "running" | "waiting_approval")
}

/// The live run's events after `after`; sets `finished` at `run.finished`.
fn follow_live(live: &LiveRun, after: &mut i64, finished: &mut bool) -> Vec<FollowedEvent> {
    let mut out = Vec::new();
    for event in live.events_after(*after) {
        *after = event.seq;
        *finished |= event.kind == RUN_FINISHED;
        out.push(FollowedEvent {
            seq: event.seq,
            kind: Cow::Borrowed(event.kind),
            data: event.data,
        });
        if *finished {
            break;
        }
    }
    out
}

/// Whether `run_id` is a run id (a UUID v7) made in the last few seconds: such a run may be
/// executing on another replica that has not written it yet.
fn started_recently(run_id: &str) -> bool {
    let Ok(id) = uuid::Uuid::parse_str(run_id) else {
        return false;
    };
    let Some((seconds, nanos)) = id.get_timestamp().map(|t| t.to_unix()) else {
        return false;
    };
    let made = std::time::UNIX_EPOCH + Duration::new(seconds, nanos);
    std::time::SystemTime::now()
        .duration_since(made)
        .is_ok_and(|age| age < RECENT_RUN_WAIT * 5)
}

/// A run executing here, as the store will show it once it is written.
fn running_record(live: &LiveRun) -> RunRecord {
    let run = &live.run;
    RunRecord {
        id: run.id.clone(),
        agent: run.agent.clone(),
        user_id: run.user_id.clone(),
        conversation_id: run.conversation_id.clone(),
        status: "running".into(),
        exit_reason: None,
        success: None,
        error: None,
        final_report: None,
        input_tokens: 0,
        output_tokens: 0,
        cached_tokens: 0,
        total_tokens: 0,
        cost_usd: 0.0,
        turns: 0,
        created_at: run.created_at,
        finished_at: None,
        duration_ms: None,
        result: None,
        owner: run.owner.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fresh_run_ids_count_as_just_started() {
        assert!(started_recently(&uuid::Uuid::now_v7().to_string()));
        assert!(
            !started_recently(&uuid::Uuid::new_v4().to_string()),
            "no time in v4"
        );
        assert!(!started_recently("not-a-run"));
        let old = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            1_700_000_000,
            0,
        ));
        assert!(!started_recently(&old.to_string()));
    }
}
