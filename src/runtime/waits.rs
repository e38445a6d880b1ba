//! A run followed one stretch at a time, for headends whose answer ends where the run waits
//! for tool approvals (SPEC §8) and whose next request picks the run up after the decision: the
//! Responses API (`mcp_approval_request` items answered by `mcp_approval_response` items) and
//! AG-UI (an interrupt answered by `resume`).
//!
//! A stretch runs from a point in the run's events to `run.finished` or to the end of a wait:
//! the block of `tool.approval_requested` events a session emits last before it parks (a
//! resumed session's first events are `tool.approval_decided`). So the end is read from the
//! events alone, and a stretch replayed from the store, on any replica, ends at the same event;
//! only a live follower asks the store whether the run has parked yet.
//!
//! A waiting call is named to clients by a [`WaitingCallRef`]: the run's id and the call's, so
//! a stateless client's decision finds its run without any other state. Such a client answers
//! a whole wait at once ([`Runtime::answer_wait`]): the run resumes only once no call of it
//! waits, and the client's next stretch starts where the wait ended.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};

use super::Runtime;
use super::approvals::ApprovalError;
use super::follow::FollowError;
use crate::agent::approval::Decision;
use crate::store::StoreError;
use crate::vocabulary::{AgentEvent, RunEvent, RunStatus};

/// How often a follower inside a wait's block looks whether the run has parked.
const PARK_POLL: Duration = Duration::from_millis(50);
/// Stored events read per query while looking for a wait.
const SCAN_PAGE: u32 = 500;

/// A waiting call as clients name it: `<prefix>_<run id, 32 hex digits>_<call id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingCallRef {
    pub run_id: String,
    pub call_id: String,
}

impl WaitingCallRef {
    pub fn new(run_id: impl Into<String>, call_id: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            call_id: call_id.into(),
        }
    }

    /// The id clients see, e.g. `mcpr_0192…_call-1` for the prefix `mcpr`.
    pub fn encode(&self, prefix: &str) -> String {
        format!("{prefix}_{}_{}", self.run_id.replace('-', ""), self.call_id)
    }

    /// The run and call an id made by [`encode`](Self::encode) with `prefix` names; `None` for
    /// anything else.
    pub fn parse(id: &str, prefix: &str) -> Option<Self> {
        let rest = id.strip_prefix(prefix)?.strip_prefix('_')?;
        let (run, call_id) = rest.split_once('_')?;
        if call_id.is_empty() {
            return None;
        }
        let run_id = uuid::Uuid::try_parse(run).ok()?.hyphenated().to_string();
        Some(Self::new(run_id, call_id))
    }
}

/// Where a wait stands in its run's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitPoint {
    /// The seq of the wait's last `tool.approval_requested` event: a stretch that follows the
    /// run after the decisions starts after it.
    pub last_seq: i64,
    /// The calls of the wait, in the order they were requested.
    pub call_ids: Vec<String>,
}

/// Why the answers to a wait were not taken; `index` is the answer's position.
#[derive(Debug, thiserror::Error)]
pub enum WaitAnswerError {
    #[error("tool call `{call_id}` is not waiting for approval in this run")]
    NotWaiting { index: usize, call_id: String },
    #[error("tool call `{call_id}` is answered twice")]
    Twice { index: usize, call_id: String },
    #[error("tool call `{call_id}` was already decided ({decision})")]
    AlreadyDecided {
        index: usize,
        call_id: String,
        decision: String,
    },
    #[error("every call the run waits on must be answered together: `{call_id}` is not")]
    Unanswered { call_id: String },
    #[error("{source}")]
    Decision {
        index: usize,
        #[source]
        source: ApprovalError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Runtime {
    /// Decides every call of one wait of `run_id` (each answer a call id and its decision, made
    /// by `by`), through [`Runtime::decide_approval`] once all of them are known to wait and
    /// none that waits is left out; answers where the wait ends, after which the resumed run's
    /// events follow. Nothing is decided when a check fails.
    pub async fn answer_wait(
        self: &Arc<Self>,
        run_id: &str,
        answers: Vec<(String, Decision)>,
        by: &str,
    ) -> Result<WaitPoint, WaitAnswerError> {
        let not_waiting = |index: usize, call_id: &str| WaitAnswerError::NotWaiting {
            index,
            call_id: call_id.to_string(),
        };
        let Some((first, _)) = answers.first() else {
            return Err(not_waiting(0, ""));
        };
        let wait = self
            .approval_wait(run_id, first)
            .await?
            .ok_or_else(|| not_waiting(0, first))?;
        let recorded = self.store.run_approvals(run_id).await?;
        for (index, (call_id, _)) in answers.iter().enumerate() {
            if answers[..index]
                .iter()
                .any(|(earlier, _)| earlier == call_id)
            {
                return Err(WaitAnswerError::Twice {
                    index,
                    call_id: call_id.clone(),
                });
            }
            let approval = recorded
                .iter()
                .find(|a| &a.call_id == call_id)
                .filter(|_| wait.call_ids.contains(call_id))
                .ok_or_else(|| not_waiting(index, call_id))?;
            if let Some(decision) = &approval.decision {
                return Err(WaitAnswerError::AlreadyDecided {
                    index,
                    call_id: call_id.clone(),
                    decision: decision.clone(),
                });
            }
        }
        let unanswered = recorded.iter().find(|a| {
            a.decision.is_none()
                && wait.call_ids.contains(&a.call_id)
                && !answers.iter().any(|(call_id, _)| call_id == &a.call_id)
        });
        if let Some(approval) = unanswered {
            return Err(WaitAnswerError::Unanswered {
                call_id: approval.call_id.clone(),
            });
        }
        for (index, (call_id, decision)) in answers.into_iter().enumerate() {
            self.decide_approval(run_id, &call_id, decision, by)
                .await
                .map_err(|source| WaitAnswerError::Decision { index, source })?;
        }
        Ok(wait)
    }

    /// The run's events after seq `after` up to `run.finished` or the end of its next wait for
    /// approvals (then the stream ends after the wait's last `tool.approval_requested`, once
    /// the run has parked or has gone on). Errors end the stream after they are yielded.
    pub fn follow_until_wait(
        self: &Arc<Self>,
        run_id: String,
        after: i64,
    ) -> impl Stream<Item = Result<RunEvent, FollowError>> + Send + 'static + use<> {
        let runtime = self.clone();
        async_stream::stream! {
            let events = runtime.follow_run_events(run_id.clone(), after);
            tokio::pin!(events);
            let mut last = after;
            let mut in_wait = false;
            loop {
                let next = if in_wait {
                    loop {
                        tokio::select! {
                            next = events.next() => break next,
                            () = tokio::time::sleep(PARK_POLL) => {
                                match runtime.parked_at(&run_id, last).await {
                                    Ok(true) => return,
                                    Ok(false) => {}
                                    Err(error) => {
                                        yield Err(error.into());
                                        return;
                                    }
                                }
                            }
                        }
                    }
                } else {
                    events.next().await
                };
                let event = match next {
                    None => return,
                    Some(Err(error)) => {
                        yield Err(error);
                        return;
                    }
                    Some(Ok(event)) => event,
                };
                if event.is_approval_requested() {
                    in_wait = true;
                } else if in_wait {
                    // The run went on after the wait: that is the next stretch.
                    return;
                }
                last = event.seq;
                yield Ok(event);
            }
        }
    }

    /// Whether the run is parked waiting for approvals with `last_seq` its last event.
    async fn parked_at(&self, run_id: &str, last_seq: i64) -> Result<bool, StoreError> {
        let waiting = matches!(
            self.recorded_run(run_id).await?,
            Some(run) if run.status == RunStatus::WaitingApproval
        );
        if !waiting {
            return Ok(false);
        }
        // Parking writes the run's events first: none after `last_seq` means it parked there.
        Ok(self
            .store
            .list_run_events(run_id, last_seq, 1)
            .await?
            .is_empty())
    }

    /// The wait of `run_id` in which `call_id` was requested, from the stored events; `None`
    /// when the run never asked for that call.
    pub async fn approval_wait(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<Option<WaitPoint>, StoreError> {
        self.recorder.flush().await;
        let mut after = 0;
        let mut block: Option<WaitPoint> = None;
        let mut found = false;
        loop {
            let page = self.store.list_run_events(run_id, after, SCAN_PAGE).await?;
            let full = page.len() as u32 == SCAN_PAGE;
            for row in page {
                after = row.seq;
                let event = RunEvent::from_stored(row.seq, &row.event_type, row.data);
                let Some(AgentEvent::ApprovalRequested(requested)) = event.map(|e| e.event) else {
                    if found {
                        return Ok(block);
                    }
                    block = None;
                    continue;
                };
                let requested = requested.call_id;
                found |= requested == call_id;
                let point = block.get_or_insert_with(|| WaitPoint {
                    last_seq: row.seq,
                    call_ids: Vec::new(),
                });
                point.last_seq = row.seq;
                point.call_ids.push(requested);
            }
            if !full {
                return Ok(if found { block } else { None });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_call_ref_round_trips_and_refuses_other_ids() {
        let run_id = uuid::Uuid::now_v7().to_string();
        let named = WaitingCallRef::new(run_id.clone(), "call_a_1");
        let id = named.encode("mcpr");
        assert!(id.starts_with("mcpr_"), "{id}");
        assert!(!id.contains('-'), "{id}");
        assert_eq!(WaitingCallRef::parse(&id, "mcpr"), Some(named));
        assert_eq!(WaitingCallRef::parse(&id, "apr"), None);
        assert_eq!(WaitingCallRef::parse("mcpr_nothex_call", "mcpr"), None);
        assert_eq!(
            WaitingCallRef::parse(&format!("mcpr_{}_", run_id.replace('-', "")), "mcpr"),
            None
        );
        assert_eq!(WaitingCallRef::parse("call-1", "mcpr"), None);
    }
}
