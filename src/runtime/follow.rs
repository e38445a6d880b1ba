//! Reading runs back, on any replica: a run as it is now, a run's events followed until it ends
//! (replay after `Last-Event-ID`, then live events, in order, each once), and cancelling a run
//! wherever it executes.
//!
//! A run executing in this process is followed from its in-memory log (see [`super::live`]);
//! any other run from the store, woken by the store's notifications when its owner writes (and,
//! as a safety net for a missed wake, every [`SAFETY_POLL`]). Nothing here forces the recorder to
//! write early.
//!
//! Every followed stream of an ended run ends with `run.finished`: a run stored as ended whose
//! stored events hold none gets its closing events made from its stored result, numbered on
//! from the last event: a run ended `owner_lost` by another replica (which appends no events:
//! the owner may be alive and numbering them) `error` and `run.finished`; any other (its closing
//! events were refused by the store, or it never had events of its own, as a sub-agent's run)
//! its `final_report` and `run.finished`, as its session emitted them.

use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;

use super::Runtime;
use super::live::LiveRun;
use crate::agent::events::ErrorEvent;
use crate::agent::{AgentResult, ExitReason};
use crate::store::{JsonText, RunEventRecord, RunFilter, RunRecord, StoreError, whole_result};
use crate::vocabulary::result::{RunStatus, RunSummary, UsageTotals};
use crate::vocabulary::{AgentEvent, RunEvent};

/// How long a follower of a run elsewhere waits for a wake before looking anyway.
const SAFETY_POLL: Duration = Duration::from_secs(1);
/// Stored events fetched per query while replaying.
const REPLAY_PAGE: u32 = 500;
/// How long a just-started run is waited for before it counts as unknown.
const RECENT_RUN_WAIT: Duration = Duration::from_secs(2);

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
    NotRunning(RunStatus),
    NotFound,
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

/// A stored row as the event it is, parsed once here; a row this build cannot read (a kind a
/// newer replica wrote) is passed over.
fn stored_event(row: RunEventRecord) -> Option<RunEvent> {
    let parsed = RunEvent::from_stored(row.seq, &row.event_type, row.data);
    if parsed.is_none() {
        tracing::warn!(seq = row.seq, kind = %row.event_type, "a stored run event cannot be read; passed over");
    }
    parsed
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
        // What the last attempt saw; a run that kept changing under every attempt still runs.
        let mut status = RunStatus::Running;
        // Whether this cancel aborted a resume of the run on this replica (a decision resuming
        // it at the same instant shares that control): the run then ends `cancelled` by it.
        let mut aborted_a_resume = false;
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
            if status.is_waiting() {
                // It holds no process: whoever takes its checkpoint first ends it, here.
                if self.resume_waiting_run(run_id, true).await? {
                    return Ok(CancelOutcome::Cancelled);
                }
                // A decision resumed it first: it runs now, here or elsewhere.
                aborted_a_resume = true;
                continue;
            }
            if status == RunStatus::Cancelled && aborted_a_resume {
                // The resume this cancel aborted has already ended the run: the cancel was taken.
                return Ok(CancelOutcome::Cancelled);
            }
            if status != RunStatus::Running {
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
    /// (made from the stored result when the run ended without storing one). An error ends the
    /// stream after it is yielded.
    pub fn follow_run_events(
        self: &Arc<Self>,
        run_id: String,
        after: i64,
    ) -> impl Stream<Item = Result<RunEvent, FollowError>> + Send + 'static + use<> {
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
                    for row in page.into_iter().take_while(|e| e.seq <= live.base_seq()) {
                        after = row.seq;
                        if let Some(event) = stored_event(row) {
                            yield Ok(event);
                        }
                    }
                    if after == before {
                        break;
                    }
                }
                // Every event is in memory until the run's end is stored (it then retires).
                let mut finished = false;
                // Set once the server stops: what the run appended before still reaches the
                // follower (one more look), then the stream ends with `ShuttingDown`.
                let mut stopping = false;
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
                    if stopping {
                        yield Err(FollowError::ShuttingDown);
                        return;
                    }
                    tokio::select! {
                        biased;
                        () = woken => {}
                        () = runtime.shutdown.cancelled() => stopping = true,
                    }
                }
            }
            // From the store: woken by notifications, checked anyway every SAFETY_POLL.
            let follower = runtime.live.follow_remote(&run_id);
            let unrecorded_deadline = tokio::time::Instant::now()
                + Duration::from_secs(runtime.config.server.owner_timeout_seconds);
            // The run as stored once it was seen ended: its events are read once more to the
            // end (its last ones may be written with its end), then it ends.
            let mut ended: Option<RunRecord> = None;
            let mut stopping = false;
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
                for row in page {
                    after = row.seq;
                    let Some(event) = stored_event(row) else { continue };
                    let finished = event.is_run_finished();
                    yield Ok(event);
                    if finished {
                        return;
                    }
                }
                if full_page {
                    continue;
                }
                if let Some(run) = ended.take() {
                    // Ended without a stored `run.finished`.
                    for event in closing_frames(&run, after) {
                        yield Ok(event);
                    }
                    return;
                }
                match runtime.store.get_run(&run_id).await {
                    Ok(Some(run)) if run.status.is_terminal() => {
                        ended = Some(run);
                        continue;
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
                if stopping {
                    yield Err(FollowError::ShuttingDown);
                    return;
                }
                tokio::select! {
                    biased;
                    _ = tokio::time::timeout(SAFETY_POLL, woken) => {}
                    () = runtime.shutdown.cancelled() => stopping = true,
                }
            }
        }
    }
}

/// The end of the stream of a run stored as ended without a stored `run.finished`, numbered
/// after `after`, from its stored result: `error` (why) and `run.finished` for a run ended
/// `owner_lost`, else its `final_report` (if it has one) and `run.finished`.
fn closing_frames(run: &RunRecord, after: i64) -> Vec<RunEvent> {
    let summary = stored_summary(run);
    let mut frames: Vec<(AgentEvent, JsonText)> = Vec::with_capacity(2);
    if summary.exit_reason == ExitReason::OwnerLost {
        let error = AgentEvent::Error(ErrorEvent {
            code: ExitReason::OwnerLost.as_str().into(),
            message: run
                .error
                .clone()
                .unwrap_or_else(|| "the agentd process running this run stopped".into()),
        });
        let data = error.data();
        frames.push((error, data));
    } else if let Some(report) = &run.final_report
        && let Ok(typed) = serde_json::from_value(report.clone())
    {
        // The stored text as it was stored, the event typed from it.
        frames.push((AgentEvent::FinalReport(typed), JsonText::of(report)));
    }
    let finished = AgentEvent::RunFinished(Box::new(summary));
    let data = finished.data();
    frames.push((finished, data));
    // `after` is the client's `Last-Event-ID` when nothing was stored after it: any number.
    (1..)
        .zip(frames)
        .map(|(offset, (event, data))| RunEvent {
            seq: after.saturating_add(offset),
            event,
            data,
        })
        .collect()
}

/// The `run.finished` of a stored, ended run: from its stored result, or from its columns when
/// it has none (a stand-in for a row the store refused).
fn stored_summary(run: &RunRecord) -> RunSummary {
    let stored = whole_result(run, &[]).and_then(|result| serde_json::from_value(result).ok());
    if let Some(result) = stored {
        return AgentResult::summary(&result);
    }
    fn parse<T: serde::de::DeserializeOwned>(text: &str) -> Option<T> {
        serde_json::from_value(serde_json::Value::from(text)).ok()
    }
    let count = |value: i64| u64::try_from(value).unwrap_or(0);
    RunSummary {
        status: run.status,
        success: run.success.unwrap_or(false),
        exit_reason: run
            .exit_reason
            .as_deref()
            .and_then(parse)
            .unwrap_or(ExitReason::InternalError),
        error: run.error.clone(),
        usage: UsageTotals {
            input_tokens: count(run.input_tokens),
            output_tokens: count(run.output_tokens),
            cached_tokens: count(run.cached_tokens),
            total_tokens: count(run.total_tokens),
        },
        cost_usd: run.cost_usd,
        turns: u32::try_from(run.turns).unwrap_or(0),
        duration_ms: run.duration_ms.map_or(0, count),
        retry_after_secs: None,
        client_tool_calls: Vec::new(),
    }
}

/// The live run's events after `after`, parsed from their text (the session's own client got
/// them typed); sets `finished` at `run.finished`.
fn follow_live(live: &LiveRun, after: &mut i64, finished: &mut bool) -> Vec<RunEvent> {
    let mut out = Vec::new();
    for event in live.events_after(*after) {
        *after = event.seq;
        let Some(event) = RunEvent::from_stored(event.seq, event.kind, event.data) else {
            continue;
        };
        *finished |= event.is_run_finished();
        out.push(event);
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
        user_id: run.user_id.clone(),
        conversation_id: run.conversation_id.clone(),
        created_at: run.created_at,
        owner: run.owner.clone(),
        acted_by: run.acted_by.clone(),
        ..RunRecord::new(&run.id, &run.agent, RunStatus::Running)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ended_run(exit_reason: &str, result: Option<serde_json::Value>) -> RunRecord {
        RunRecord {
            exit_reason: Some(exit_reason.into()),
            success: Some(false),
            error: Some("it went wrong".into()),
            input_tokens: 3,
            output_tokens: 4,
            total_tokens: 7,
            cost_usd: 0.5,
            turns: 2,
            finished_at: Some(chrono::Utc::now()),
            duration_ms: Some(9),
            result,
            ..RunRecord::new("r", "a", RunStatus::Failed)
        }
    }

    fn kinds(frames: &[RunEvent]) -> Vec<(i64, &str)> {
        frames.iter().map(|f| (f.seq, f.kind())).collect()
    }

    #[test]
    fn an_owner_lost_run_ends_with_its_error_and_run_finished_numbered_on() {
        let result = AgentResult::ended_without_session(
            "r",
            ExitReason::OwnerLost,
            "its process stopped".into(),
            9,
        );
        let run = ended_run(
            "owner_lost",
            Some(serde_json::to_value(&result).expect("json")),
        );
        let frames = closing_frames(&run, 7);
        assert_eq!(kinds(&frames), [(8, "error"), (9, "run.finished")]);
        let error = frames[0].data.to_value();
        assert_eq!(
            error,
            json!({"code": "owner_lost", "message": "it went wrong"})
        );
        assert_eq!(
            frames[1].data.to_value(),
            serde_json::to_value(result.summary()).expect("json")
        );
    }

    #[test]
    fn the_end_is_numbered_on_from_any_last_event_id_without_overflow() {
        let frames = closing_frames(&ended_run("llm_error", None), i64::MAX - 1);
        assert_eq!(kinds(&frames), [(i64::MAX, "run.finished")]);
    }

    #[test]
    fn a_run_without_a_stored_result_ends_with_its_columns() {
        let mut run = ended_run("llm_error", None);
        run.final_report = Some(json!({"status": "failure", "format": "text", "content": "no"}));
        let frames = closing_frames(&run, 0);
        assert_eq!(kinds(&frames), [(1, "final_report"), (2, "run.finished")]);
        assert_eq!(frames[0].data.to_value()["content"], "no");
        let finished = frames[1].data.to_value();
        assert_eq!(finished["status"], "failed");
        assert_eq!(finished["exit_reason"], "llm_error");
        assert_eq!(finished["usage"]["total_tokens"], 7);
        assert_eq!(finished["turns"], 2);
    }

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
