//! Reading runs back: a run as stored once everything queued for the store is written, a run's
//! stored events followed until it finishes (what `Last-Event-ID` resumes and a retried
//! submission replays), and cancelling a run this process is running.

use std::time::Duration;

use futures_util::Stream;

use super::Runtime;
use crate::store::{RunEventRecord, RunRecord, StoreError};

/// How often a follower looks for new stored events of a run still going.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(100);
/// Stored events fetched per query while replaying.
const REPLAY_PAGE: u32 = 500;

/// How a run is cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelMode {
    /// A graceful final turn.
    Stop,
    /// End now.
    Abort,
}

impl Runtime {
    /// The stored run, as it is once everything queued for the store before this call is written.
    pub async fn recorded_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.recorder.flush().await;
        self.store.get_run(run_id).await
    }

    /// Cancels a run in progress; `false` when this process is not running it.
    pub fn cancel_run(&self, run_id: &str, mode: CancelMode) -> bool {
        let Some(control) = self.live.control(run_id) else {
            return false;
        };
        match mode {
            CancelMode::Stop => control.stop.cancel(),
            CancelMode::Abort => control.abort.cancel(),
        }
        true
    }

    /// The run's stored events after seq `after`, then new ones as they are stored, until
    /// `run.finished` (or the run's end when it never stored one). A store error ends the
    /// stream after it is yielded.
    pub fn follow_run_events(
        self: &std::sync::Arc<Self>,
        run_id: String,
        mut after: i64,
    ) -> impl Stream<Item = Result<RunEventRecord, StoreError>> + Send + 'static + use<> {
        let runtime = self.clone();
        async_stream::stream! {
            loop {
                let page = match runtime.store.list_run_events(&run_id, after, REPLAY_PAGE).await {
                    Ok(page) => page,
                    Err(error) => {
                        yield Err(error);
                        return;
                    }
                };
                let full_page = page.len() as u32 == REPLAY_PAGE;
                for event in page {
                    after = event.seq;
                    let finished = event.event_type == "run.finished";
                    yield Ok(event);
                    if finished {
                        return;
                    }
                }
                if full_page {
                    continue;
                }
                if runtime.live.control(&run_id).is_none() && runtime.run_has_ended(&run_id).await {
                    // Ended: its last events were queued before its end, and the flush wrote them.
                    if let Ok(rest) = runtime.store.list_run_events(&run_id, after, REPLAY_PAGE).await {
                        for event in rest {
                            yield Ok(event);
                        }
                    }
                    return;
                }
                tokio::time::sleep(FOLLOW_INTERVAL).await;
            }
        }
    }

    /// Whether the stored run has ended, once everything queued for the store is written.
    async fn run_has_ended(&self, run_id: &str) -> bool {
        matches!(self.recorded_run(run_id).await, Ok(Some(run)) if run.status != "running")
    }
}
