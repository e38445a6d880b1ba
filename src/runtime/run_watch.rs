//! Watching runs' statuses, on any replica: the record of each watched run when it is first
//! read, again after each of its events that can change its status (an approval asked for or
//! decided, a crossed budget, its end), and whenever a look finds its status changed, until
//! every watched run has ended. A subscriber to task status (MCP's `subscriptions/listen`)
//! translates these records; it never follows a run's event stream itself.
//!
//! A status is written just after the event that announces it, so the event is a wake-up, not
//! the truth: a look after it that finds nothing new looks again soon ([`SETTLE_POLL`]), and a
//! run with no news is looked at every [`IDLE_POLL`], which also covers a wake that was lost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::SelectAll;
use futures_util::{Stream, StreamExt};

use super::Runtime;
use crate::store::{RunRecord, StoreError};
use crate::vocabulary::{AgentEvent, RunStatus};

/// How often a watched run with no news is looked at.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// How soon a run is looked at again after an event whose status the store did not show yet.
const SETTLE_POLL: Duration = Duration::from_millis(50);
/// How many quick looks follow such an event before the idle pace resumes.
const SETTLE_LOOKS: u32 = 10;

/// Whether an event can come with a change of its run's status.
fn may_change_status(event: &AgentEvent) -> bool {
    matches!(
        event,
        AgentEvent::ApprovalRequested(_)
            | AgentEvent::ApprovalDecided(_)
            | AgentEvent::BudgetExceeded(_)
            | AgentEvent::RunFinished(_)
    )
}

/// What the watcher knows of one run.
struct Watched {
    /// The status last yielded.
    status: RunStatus,
    /// Quick looks left after an event that may have changed the status.
    settling: u32,
}

impl Runtime {
    /// The records of `runs` (as the caller read them, and so may see them) as their statuses
    /// change, until each has ended (see the module's comment). Ends after a store error, which
    /// it yields.
    pub fn watch_runs(
        self: &Arc<Self>,
        runs: Vec<RunRecord>,
    ) -> impl Stream<Item = Result<RunRecord, StoreError>> + Send + 'static + use<> {
        let runtime = self.clone();
        async_stream::stream! {
            let mut watched: HashMap<String, Watched> = HashMap::new();
            let mut wakes = SelectAll::new();
            for run in runs {
                if !run.status.is_terminal() && !watched.contains_key(&run.id) {
                    // Wake-ups come from events after what is stored now: the run's history
                    // says nothing about its status that `run` does not.
                    let from = match runtime.store.last_run_event_seq(&run.id).await {
                        Ok(last) => last,
                        Err(error) => {
                            yield Err(error);
                            return;
                        }
                    };
                    watched.insert(run.id.clone(), Watched { status: run.status, settling: 0 });
                    wakes.push(runtime.status_wakes(run.id.clone(), from).boxed());
                }
                yield Ok(run);
            }
            while !watched.is_empty() {
                let pace = if watched.values().any(|w| w.settling > 0) { SETTLE_POLL } else { IDLE_POLL };
                let woken: Option<String> = tokio::select! {
                    Some(run_id) = wakes.next(), if !wakes.is_empty() => Some(run_id),
                    () = tokio::time::sleep(pace) => None,
                    () = runtime.shutdown.cancelled() => return,
                };
                if let Some(run_id) = &woken
                    && let Some(entry) = watched.get_mut(run_id)
                {
                    entry.settling = SETTLE_LOOKS;
                }
                let due: Vec<String> = match woken {
                    Some(run_id) => vec![run_id],
                    None => watched.keys().cloned().collect(),
                };
                for run_id in due {
                    let run = match runtime.recorded_run(&run_id).await {
                        Ok(Some(run)) => run,
                        // Erased meanwhile: nothing more to say of it.
                        Ok(None) => {
                            watched.remove(&run_id);
                            continue;
                        }
                        Err(error) => {
                            yield Err(error);
                            return;
                        }
                    };
                    let Some(entry) = watched.get_mut(&run_id) else { continue };
                    let changed = run.status != entry.status;
                    let woken_by_event = entry.settling == SETTLE_LOOKS;
                    entry.settling = if changed { 0 } else { entry.settling.saturating_sub(1) };
                    entry.status = run.status;
                    if run.status.is_terminal() {
                        watched.remove(&run_id);
                    }
                    // An event can change what a status holds (one of two waiting calls was
                    // decided) without changing the status: its first look is yielded too.
                    if changed || woken_by_event {
                        yield Ok(run);
                    }
                }
            }
        }
    }

    /// The run's id after each of its events past seq `after` that may change its status,
    /// until it ends; a follow error ends it (the idle looks go on).
    fn status_wakes(
        self: &Arc<Self>,
        run_id: String,
        after: i64,
    ) -> impl Stream<Item = String> + Send + use<> {
        self.follow_run_events(run_id.clone(), after)
            .take_while(|event| std::future::ready(event.is_ok()))
            .filter_map(move |event| {
                let wake = event
                    .ok()
                    .filter(|e| may_change_status(&e.event))
                    .map(|_| run_id.clone());
                std::future::ready(wake)
            })
    }
}
