//! Tool approvals across the runtime (SPEC §8): a run whose calls wait for a person is parked
//! in the store (its checkpoint, the waiting calls, status `waiting_approval`, no owner) and its
//! session task ends, freeing its admission slot; the headend that started it keeps receiving
//! its events from the store. A decision, on any replica, is recorded there, and once every
//! waiting call of the run is decided the replica that takes the checkpoint first resumes the
//! session from it: same run id, events numbered on, accounting summed. Of decisions made at
//! once (or a decision and a cancel) exactly one is taken, by the store; the others are refused
//! and resume nothing. A resumed run is counted against the key that started it (its id is kept
//! in the checkpoint): it takes one of the key's run slots, waiting for one while they are all
//! held, and its whole usage is added to the key's budget when it ends. The sweeper ends waits
//! past `approvalTimeout` as `expired` (a denial) and resumes those runs; a cancel of a waiting
//! run resumes it already aborted, so it ends `cancelled` with a stored result.
//!
//! The calls other headends use: [`Runtime::decide_approval`], [`Runtime::pending_approvals`]
//! and [`Runtime::waiting_approvals`].

use std::sync::Arc;

use chrono::Utc;
use futures_util::StreamExt;
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tracing::{error, info, warn};

use super::Runtime;
use super::follow::CancelMode;
use super::live::ResumingGuard;
use super::pipeline::{RunEnding, SessionStart, SessionTask};
use super::run_events::Client;
use crate::agent::approval::{Checkpoint, DecidedCall, Decision};
use crate::agent::{AgentResult, RunControl};
use crate::config::OnDisconnect;
use crate::limits::LimitedKey;
use crate::store::{
    ApprovalDecision, ApprovalRecord, DecisionWritten, JsonText, NewApproval, NewRun, ParkedRun,
    StoreError, TakenCheckpoint, whole_result,
};
use crate::vocabulary::RunStatus;

/// Expired waits ended per sweep; the next sweep takes the rest.
const EXPIRY_BATCH: u32 = 100;
/// How long a decision for a call not stored yet waits for its running run to park.
const PARKING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
const PARKING_POLL: std::time::Duration = std::time::Duration::from_millis(20);
/// The most waiting calls one listing returns.
pub const MAX_WAITING_LISTED: u32 = 1000;

/// Why a decision was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("run `{run_id}` has no tool call `{call_id}` waiting for approval")]
    CallNotFound { run_id: String, call_id: String },
    #[error("tool call `{call_id}` was already decided ({decision})")]
    AlreadyDecided { call_id: String, decision: String },
    #[error("tool call `{call_id}` waited past its approval timeout and was denied")]
    Expired { call_id: String },
    #[error("the edited arguments do not fit the schema of {tool}: {problems}")]
    InvalidArguments { tool: String, problems: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Runtime {
    /// Records `decision` on a waiting call of `run_id`, made by `by` (a user id or `admin`):
    /// the caller has checked the run is theirs. Edited arguments must fit the tool's schema.
    /// Once no call of the run waits any more, the run resumes — here, unless another replica
    /// took it first. Works on any replica, whichever owned the run before. A decision that
    /// lost to another made at the same moment (or to a cancel) is `AlreadyDecided`, naming
    /// the one that won, and resumes nothing.
    pub async fn decide_approval(
        self: &Arc<Self>,
        run_id: &str,
        call_id: &str,
        decision: Decision,
        by: &str,
    ) -> Result<ApprovalRecord, ApprovalError> {
        let approval = self.waiting_call(run_id, call_id).await?;
        if let Some(decided) = &approval.decision {
            return Err(ApprovalError::AlreadyDecided {
                call_id: call_id.into(),
                decision: decided.clone(),
            });
        }
        let now = Utc::now();
        if approval.expires_at <= now {
            return Err(ApprovalError::Expired {
                call_id: call_id.into(),
            });
        }
        let edited = match &decision {
            Decision::Approve {
                arguments: Some(arguments),
                ..
            } => {
                self.check_edited_arguments(&approval, arguments).await?;
                Some(JsonText::of(arguments))
            }
            _ => None,
        };
        let edited_value = edited.as_ref().map(JsonText::to_value);
        let written = self
            .store
            .decide_approval(&ApprovalDecision {
                run_id: run_id.into(),
                call_id: call_id.into(),
                decision: decision.as_str().into(),
                decided_by: by.into(),
                reason: decision.reason(),
                edited_arguments: edited,
                at: now,
            })
            .await?;
        match written {
            DecisionWritten::Recorded => {}
            DecisionWritten::AlreadyDecided(decision) => {
                return Err(ApprovalError::AlreadyDecided {
                    call_id: call_id.into(),
                    decision,
                });
            }
            DecisionWritten::Expired => {
                return Err(ApprovalError::Expired {
                    call_id: call_id.into(),
                });
            }
            DecisionWritten::NotFound => {
                return Err(ApprovalError::CallNotFound {
                    run_id: run_id.into(),
                    call_id: call_id.into(),
                });
            }
        }
        self.count_decision(&approval, decision.as_str(), now);
        info!(%run_id, %call_id, decision = decision.as_str(), %by, "tool approval decided");
        let audited = crate::audit::AuditEvent::new(
            crate::audit::Actor {
                user: Some(by.to_string()),
                ..crate::audit::Actor::default()
            },
            crate::audit::AuditAction::ApprovalDecided,
            format!("run:{run_id}/call:{call_id}"),
        )
        .with_details(serde_json::json!({
            "decision": decision.as_str(),
            "tool": approval.tool,
            "edited": edited_value.is_some(),
        }));
        crate::audit::record_or_log(self.store.as_ref(), audited).await;
        self.resume_waiting_run(run_id, false).await?;
        let mut decided = approval;
        decided.decision = Some(decision.as_str().into());
        decided.decided_by = Some(by.into());
        decided.reason = decision.reason();
        decided.decided_at = Some(now);
        decided.edited_arguments = edited_value;
        Ok(decided)
    }

    /// The call, once its run is parked: a client may decide as soon as it sees
    /// `tool.approval_requested`, a moment before the run (here or on another replica) is.
    async fn waiting_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<ApprovalRecord, ApprovalError> {
        let deadline = tokio::time::Instant::now() + PARKING_WAIT;
        loop {
            let found = self
                .store
                .run_approvals(run_id)
                .await?
                .into_iter()
                .find(|a| a.call_id == call_id);
            if let Some(approval) = found {
                return Ok(approval);
            }
            let running = matches!(
                self.recorded_run(run_id).await?,
                Some(run) if run.status == RunStatus::Running
            );
            if !running || tokio::time::Instant::now() >= deadline {
                return Err(ApprovalError::CallNotFound {
                    run_id: run_id.into(),
                    call_id: call_id.into(),
                });
            }
            tokio::time::sleep(PARKING_POLL).await;
        }
    }

    /// The calls of `run_id` still waiting for a decision.
    pub async fn pending_approvals(&self, run_id: &str) -> Result<Vec<ApprovalRecord>, StoreError> {
        let mut approvals = self.store.run_approvals(run_id).await?;
        approvals.retain(|a| a.decision.is_none());
        Ok(approvals)
    }

    /// Every call waiting for a decision, oldest first: `user_id`'s, or everyone's for `None`.
    pub async fn waiting_approvals(
        &self,
        user_id: Option<&str>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.store
            .waiting_approvals(user_id, MAX_WAITING_LISTED)
            .await
    }

    async fn check_edited_arguments(
        &self,
        approval: &ApprovalRecord,
        arguments: &Map<String, Value>,
    ) -> Result<(), ApprovalError> {
        let Some(agent) = self.agents().get(&approval.agent) else {
            return Ok(());
        };
        let definitions = self.tools.registry_for(&agent).definitions().await;
        let Some(tool) = definitions.iter().find(|d| d.name == approval.tool) else {
            return Ok(());
        };
        let invalid = |problems: String| ApprovalError::InvalidArguments {
            tool: approval.tool.clone(),
            problems,
        };
        let validator = jsonschema::validator_for(&tool.parameters)
            .map_err(|e| invalid(format!("the tool's schema cannot be used ({e})")))?;
        let instance = Value::Object(arguments.clone());
        let problems: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| {
                let path = e.instance_path().as_str().to_owned();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(invalid(problems.join("; ")))
        }
    }

    fn count_decision(&self, approval: &ApprovalRecord, decision: &str, at: chrono::DateTime<Utc>) {
        self.metrics
            .approvals_decided_total
            .with_label_values(&[decision])
            .inc();
        let waited = (at - approval.requested_at).num_milliseconds().max(0) as f64 / 1000.0;
        self.metrics
            .approval_wait_seconds
            .with_label_values(&[decision])
            .observe(waited);
    }

    /// A session stopped to wait: its events are written, then the run is parked in the store;
    /// the slot is freed and the headend that started it follows it from the store from now on.
    pub(super) async fn park(
        self: &Arc<Self>,
        ending: RunEnding,
        mut checkpoint: Box<Checkpoint>,
        last_seq: i64,
        client: Option<Client>,
    ) {
        let RunEnding {
            slot,
            key_reservation,
            new_run,
            conversation: _,
            answered_by: _,
            webhook,
            announced_response,
            result,
        } = ending;
        let run_id = new_run.id.clone();
        let notices = self.run_notices(
            super::webhooks::RunWebhookEvent::WaitingApproval,
            &new_run,
            None,
            webhook.as_deref(),
        );
        // Kept with the run: whichever replica resumes it announces its end to them too.
        checkpoint.webhook = webhook;
        checkpoint.announced_response = announced_response;
        // The key's slot is given back below; the replica that resumes the run takes one again.
        checkpoint.limited_key = key_reservation
            .as_ref()
            .map(|reservation| reservation.key_id().to_string());
        // The run's row and events go first: parking updates the row.
        self.recorder.flush().await;
        let approvals: Vec<NewApproval> = checkpoint
            .waiting
            .pending
            .iter()
            .map(|p| NewApproval {
                call_id: p.call_id.clone(),
                tool: p.tool.clone(),
                server: p.server.clone(),
                arguments: JsonText::of(&p.arguments),
                expires_at: p.expires_at,
            })
            .collect();
        let count = approvals.len() as u64;
        let waits_for_budget = checkpoint.budget_wait.is_some();
        let status = if waits_for_budget {
            RunStatus::WaitingBudget
        } else {
            RunStatus::WaitingApproval
        };
        let mut notices = notices;
        notices.extend(
            self.waiting_push_notices(&checkpoint, &run_id, status)
                .await,
        );
        let parked = ParkedRun {
            run_id: run_id.clone(),
            user_id: new_run.user_id.clone(),
            agent: new_run.agent.clone(),
            checkpoint: JsonText::of(&*checkpoint),
            last_seq,
            approvals,
            status,
            at: Utc::now(),
            notices,
        };
        match self.store.park_run(&parked).await {
            Ok(()) if waits_for_budget => {
                info!(%run_id, "the run waits for a raise of its budget");
            }
            Ok(()) => {
                self.metrics
                    .approvals_requested_total
                    .with_label_values(&[&new_run.agent])
                    .inc_by(count);
                self.metrics.runs_waiting_approval.inc();
                info!(%run_id, waiting = count, "the run waits for tool approvals");
            }
            Err(error) => {
                error!(%error, %run_id, "the waiting run could not be stored; it ends when its owner is taken for gone");
            }
        }
        drop(slot);
        drop(key_reservation);
        self.live.finished(&run_id);
        self.live.retired(&run_id);
        tokio::spawn(Arc::clone(self).relay_after_wait(run_id, last_seq, client, result));
    }

    /// The A2A push notices of the run as it is parked (`status`), for the transaction that
    /// parks it: a replica that dies right after parking loses no notice.
    async fn waiting_push_notices(
        &self,
        checkpoint: &Checkpoint,
        run_id: &str,
        status: RunStatus,
    ) -> Vec<crate::store::NewDelivery> {
        let mut run = match self.store.get_run(run_id).await {
            Ok(Some(run)) => run,
            Ok(None) => return Vec::new(),
            Err(error) => {
                error!(%error, %run_id, "could not read the task to announce its wait");
                return Vec::new();
            }
        };
        run.status = status;
        let wait = if status == RunStatus::WaitingApproval {
            let calls = checkpoint.waiting.pending.iter().map(|p| p.call_id.clone());
            super::push::wait_name(calls)
        } else {
            String::new()
        };
        self.push_notices_of_wait(&run, &wait).await
    }

    /// Feeds the headend that started a run with its events after a wait, read from the store
    /// (wherever the run resumes), and its result once it ends.
    async fn relay_after_wait(
        self: Arc<Self>,
        run_id: String,
        after: i64,
        mut client: Option<Client>,
        result: oneshot::Sender<AgentResult>,
    ) {
        if client.is_none() && result.is_closed() {
            // A background run, or a headend already gone: nobody to feed.
            return;
        }
        let events = self.follow_run_events(run_id.clone(), after);
        tokio::pin!(events);
        let mut finished = false;
        while let Some(Ok(event)) = events.next().await {
            finished = event.is_run_finished();
            if let Some(listener) = &client
                && !listener.pass(event).await
            {
                client = None;
            }
            if finished || (client.is_none() && result.is_closed()) {
                break;
            }
        }
        if !finished || result.is_closed() {
            return;
        }
        match self.stored_result(&run_id).await {
            Ok(Some(stored)) => {
                let _ = result.send(stored);
            }
            Ok(None) => warn!(%run_id, "a resumed run ended without a readable result"),
            Err(error) => warn!(%error, %run_id, "could not read a resumed run's result"),
        }
    }

    async fn stored_result(&self, run_id: &str) -> Result<Option<AgentResult>, StoreError> {
        let Some(run) = self.store.get_run(run_id).await? else {
            return Ok(None);
        };
        let accounting = self.store.list_accounting(run_id).await?;
        Ok(whole_result(&run, &accounting).and_then(|v| serde_json::from_value(v).ok()))
    }

    /// Takes the run's checkpoint if nothing of it waits any more (with `cancel`, whatever
    /// still waits is cancelled) and runs it on here; `false` when another replica took it, it
    /// still waits, or it is not waiting at all.
    ///
    /// The run's controls are registered here before the take ([`LiveRuns::resuming`]), so a
    /// cancel that finds the run `running` with this replica its owner reaches it, however
    /// long the session takes to start; a cancel that reached them while the take failed is
    /// made again where the run now is.
    ///
    /// [`LiveRuns::resuming`]: super::live::LiveRuns::resuming
    pub(super) async fn resume_waiting_run(
        self: &Arc<Self>,
        run_id: &str,
        cancel: bool,
    ) -> Result<bool, StoreError> {
        // A draining replica leaves the run to one that stays: the sweep of any other replica
        // resumes decided runs.
        if self.is_draining() && !cancel {
            return Ok(false);
        }
        let resuming = self.live.resuming(run_id, &self.shutdown);
        let control = resuming.control().clone();
        if cancel {
            control.abort.cancel();
        }
        let taken = self
            .store
            .take_checkpoint(run_id, &self.replica.id, cancel)
            .await;
        let taken = match taken {
            Ok(Some(taken)) => taken,
            not_taken => {
                drop(resuming);
                if !cancel {
                    self.forward_cancel(run_id, &control).await;
                }
                return not_taken.map(|_| false);
            }
        };
        let runtime = Arc::clone(self);
        let run_id = run_id.to_string();
        // Off the caller's path: the session may wait for a slot of its key or of the server.
        self.sessions.spawn(async move {
            if let Err(error) = runtime.launch_taken(&run_id, taken, &resuming).await {
                error!(%error, %run_id, "a run taken to resume could not be read; the run is lost");
            }
            drop(resuming);
        });
        Ok(true)
    }

    /// A cancel reached the controls of a resume that did not take the run (it still waits,
    /// or another replica took it): cancels the run again, wherever it is now.
    async fn forward_cancel(self: &Arc<Self>, run_id: &str, control: &RunControl) {
        if control.shutdown.is_cancelled() {
            return;
        }
        let mode = if control.abort.is_cancelled() {
            CancelMode::Abort
        } else if control.stop.is_cancelled() {
            CancelMode::Stop
        } else {
            return;
        };
        match Box::pin(self.cancel_run(run_id, mode)).await {
            Ok(outcome) => info!(%run_id, ?outcome, "a cancel that met a resume is made again"),
            Err(error) => {
                warn!(%error, %run_id, "a cancel that met a resume could not be made again")
            }
        }
    }

    /// Starts the session of a run whose checkpoint this replica took, once the run has one of
    /// its key's run slots (waited for while its key's slots are held) and, if the server has
    /// room, a session slot (else it runs anyway, its wait having been its queue).
    pub(super) async fn launch_taken(
        self: &Arc<Self>,
        run_id: &str,
        taken: TakenCheckpoint,
        resuming: &ResumingGuard,
    ) -> Result<(), StoreError> {
        let Some(run) = self.store.get_run(run_id).await? else {
            return Ok(());
        };
        let approvals = self.store.run_approvals(run_id).await?;
        let checkpoint: Checkpoint = match serde_json::from_str(taken.checkpoint.as_str()) {
            Ok(checkpoint) => checkpoint,
            Err(error) => {
                error!(%error, %run_id, "a waiting run's checkpoint cannot be read; the run is lost");
                return Ok(());
            }
        };
        if checkpoint.budget_wait.is_none() {
            self.metrics.runs_waiting_approval.dec();
        }
        let Some(agent) = self.agents().get(&checkpoint.agent) else {
            error!(%run_id, agent = %checkpoint.agent, "a waiting run's agent is no longer configured here");
            return Ok(());
        };
        let control = resuming.control().clone();
        let key_reservation = match checkpoint
            .limited_key
            .as_deref()
            .and_then(|id| LimitedKey::configured(&self.config.auth, id))
        {
            Some(key) => {
                // The session that ran before the wait charged the key with what it spent.
                let before = crate::vocabulary::budget::Spent::of(
                    &checkpoint.accounting,
                    std::time::Duration::ZERO,
                );
                let spent_before = crate::store::DailyUsage {
                    tokens: before.tokens,
                    cost_usd: before.cost_usd,
                };
                Some(
                    self.limits
                        .resume(&key, run_id, &control.abort, spent_before)
                        .await,
                )
            }
            None => None,
        };
        let slot = self.admission.admit().await.ok();
        let decisions = approvals.iter().filter_map(decided_call).collect();
        let request = checkpoint.request(agent);
        let webhook = checkpoint.webhook.clone();
        let announced_response = checkpoint.announced_response;
        let conversation = run.user_id.clone().zip(run.conversation_id.clone());
        let new_run = NewRun {
            id: run.id.clone(),
            agent: run.agent.clone(),
            user_id: run.user_id.clone(),
            conversation_id: run.conversation_id.clone(),
            created_at: run.created_at,
            owner: Some(self.replica.id.clone()),
            acted_by: run.acted_by.clone(),
            key_id: None,
        };
        info!(%run_id, cancelled = control.abort.is_cancelled(), "resuming a run that waited for approval");
        // Nobody holds this handle: the events reach followers through the store.
        drop(self.launch(SessionTask {
            slot,
            key_reservation,
            new_run,
            conversation,
            awaits_turn: false,
            webhook,
            announced_response,
            on_disconnect: OnDisconnect::Continue,
            control,
            start: SessionStart::Resumed {
                request,
                checkpoint: Box::new(checkpoint),
                decisions,
                last_seq: taken.last_seq,
            },
        }));
        Ok(())
    }

    /// Ends waits past their `approvalTimeout` as `expired` and resumes those runs, and any run
    /// whose calls were all decided but which no replica took yet.
    pub(super) async fn expire_approvals(self: &Arc<Self>) {
        let now = Utc::now();
        let expired = match self.store.expired_approvals(now, EXPIRY_BATCH).await {
            Ok(expired) => expired,
            Err(error) => {
                warn!(%error, "could not look for expired tool approvals");
                return;
            }
        };
        let mut runs: Vec<String> = Vec::new();
        for (run_id, call_id) in expired {
            let decision = ApprovalDecision {
                run_id: run_id.clone(),
                call_id,
                decision: Decision::Expired.as_str().into(),
                decided_by: "agentd".into(),
                reason: None,
                edited_arguments: None,
                at: now,
            };
            match self.store.decide_approval(&decision).await {
                Ok(DecisionWritten::Recorded) => {
                    self.metrics
                        .approvals_decided_total
                        .with_label_values(&["expired"])
                        .inc();
                    if !runs.contains(&run_id) {
                        runs.push(run_id);
                    }
                }
                Ok(_) => {}
                Err(error) => warn!(%error, %run_id, "could not expire a tool approval"),
            }
        }
        match self.store.decided_checkpoints(EXPIRY_BATCH).await {
            Ok(decided) => {
                for run_id in decided {
                    if !runs.contains(&run_id) {
                        runs.push(run_id);
                    }
                }
            }
            Err(error) => warn!(%error, "could not look for decided runs not yet resumed"),
        }
        for run_id in runs {
            if let Err(error) = self.resume_waiting_run(&run_id, false).await {
                warn!(%error, %run_id, "could not resume a run whose approvals were decided");
            }
        }
        if let Ok(waiting) = self.store.waiting_approvals(None, MAX_WAITING_LISTED).await {
            let mut ids: Vec<&str> = waiting.iter().map(|a| a.run_id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            self.metrics.runs_waiting_approval.set(ids.len() as i64);
        }
    }
}

/// The session's view of a stored decision (`None` while the call waits).
fn decided_call(approval: &ApprovalRecord) -> Option<DecidedCall> {
    let decision = match approval.decision.as_deref()? {
        "approve" => Decision::Approve {
            arguments: match &approval.edited_arguments {
                Some(Value::Object(arguments)) => Some(arguments.clone()),
                _ => None,
            },
            note: approval.reason.clone(),
        },
        "deny" => Decision::Deny {
            reason: approval.reason.clone(),
        },
        "cancelled" => Decision::Deny {
            reason: Some("the run was cancelled".into()),
        },
        _ => Decision::Expired,
    };
    Some(DecidedCall {
        call_id: approval.call_id.clone(),
        decision,
        by: approval
            .decided_by
            .clone()
            .unwrap_or_else(|| "agentd".into()),
    })
}
