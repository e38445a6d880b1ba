//! Runs parked for their budget (SPEC §14): a run that crossed its budget with `onBudget: wait`
//! is parked like an approval wait (its checkpoint in the store, status `waiting_budget`, no
//! owner). [`Runtime::raise_budget`] — its user or an admin, on any replica — takes the
//! checkpoint, puts the raised limits in place of the agent's, the key's and the request's, and
//! resumes the run here. Of two raises at once the store lets exactly one take the checkpoint;
//! a raise that would leave the run past its budget puts it back and is refused, naming the
//! limit. A cancel of a run waiting for its budget ends it `cancelled`, as any waiting run.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tracing::{error, info};

use super::Runtime;
use crate::agent::approval::Checkpoint;
use crate::store::{JsonText, ParkedRun, StoreError, TakenCheckpoint};
use crate::vocabulary::RunStatus;
use crate::vocabulary::budget::{BudgetExceeded, RunBudget, Spent};

/// Why a raise was refused.
#[derive(Debug, thiserror::Error)]
pub enum BudgetRaiseError {
    #[error("{message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("no run `{0}`")]
    NotFound(String),
    #[error("run `{run_id}` is not waiting for its budget (status {status})")]
    NotWaiting { run_id: String, status: RunStatus },
    #[error(
        "the raise leaves run `{run_id}` past its budget: {limit} allows {allowed} and the run \
         has used {used}; raise {limit} above {used}"
    )]
    StillCrossed {
        run_id: String,
        limit: String,
        allowed: f64,
        used: f64,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a raise set going: the limits the run now runs under.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetRaised {
    pub budget: RunBudget,
}

impl Runtime {
    /// Raises the budget of a run waiting for it (the caller has checked the run is theirs)
    /// and resumes it on this replica.
    pub async fn raise_budget(
        self: &Arc<Self>,
        run_id: &str,
        raise: RunBudget,
    ) -> Result<BudgetRaised, BudgetRaiseError> {
        check_raise(&raise)?;
        let Some(run) = self.recorded_run(run_id).await? else {
            return Err(BudgetRaiseError::NotFound(run_id.into()));
        };
        if run.status != RunStatus::WaitingBudget {
            return Err(BudgetRaiseError::NotWaiting {
                run_id: run_id.into(),
                status: run.status,
            });
        }
        let resuming = self.live.resuming(run_id, &self.shutdown);
        let Some(taken) = self
            .store
            .take_checkpoint(run_id, &self.replica.id, false)
            .await?
        else {
            // Another raise, or a cancel, took it first.
            let status = self
                .recorded_run(run_id)
                .await?
                .map_or(RunStatus::Running, |r| r.status);
            return Err(BudgetRaiseError::NotWaiting {
                run_id: run_id.into(),
                status,
            });
        };
        let mut checkpoint: Checkpoint = match serde_json::from_str(taken.checkpoint.as_str()) {
            Ok(checkpoint) => checkpoint,
            Err(error) => {
                error!(%error, %run_id, "a run waiting for its budget has an unreadable checkpoint");
                return Err(StoreError::Encode {
                    what: "a run's checkpoint",
                    detail: error.to_string(),
                }
                .into());
            }
        };
        let raised = checkpoint.budget_raise.raised_by(raise);
        let budget = self.budget_after_raise(&checkpoint, raised);
        if let Some(crossed) = still_crossed(&checkpoint, budget) {
            self.park_again(&run, &taken).await?;
            return Err(BudgetRaiseError::StillCrossed {
                run_id: run_id.into(),
                limit: limit_name(&crossed),
                allowed: crossed.allowed,
                used: crossed.used,
            });
        }
        checkpoint.budget_raise = raised;
        checkpoint.budget_wait = None;
        let taken = TakenCheckpoint {
            checkpoint: JsonText::of(&checkpoint),
            last_seq: taken.last_seq,
        };
        info!(%run_id, ?budget, "the run's budget was raised; it goes on");
        let runtime = Arc::clone(self);
        let run_id = run_id.to_string();
        self.sessions.spawn(async move {
            if let Err(error) = runtime.launch_taken(&run_id, taken, &resuming).await {
                error!(%error, %run_id, "a run whose budget was raised could not be read; the run is lost");
            }
            drop(resuming);
        });
        Ok(BudgetRaised { budget })
    }

    /// The limits the run would go on under: the lowest of the agent's (as configured now),
    /// the key's and the request's, with `raised` in place.
    fn budget_after_raise(&self, checkpoint: &Checkpoint, raised: RunBudget) -> RunBudget {
        let agent_budget = self
            .agents()
            .get(&checkpoint.agent)
            .map_or_else(RunBudget::default, |agent| agent.budget);
        checkpoint.budget.lowest(agent_budget).raised_by(raised)
    }

    /// Puts a taken checkpoint back, unchanged: the run waits for its budget again.
    async fn park_again(
        &self,
        run: &crate::store::RunRecord,
        taken: &TakenCheckpoint,
    ) -> Result<(), StoreError> {
        self.store
            .park_run(&ParkedRun {
                run_id: run.id.clone(),
                user_id: run.user_id.clone(),
                agent: run.agent.clone(),
                checkpoint: taken.checkpoint.clone(),
                last_seq: taken.last_seq,
                approvals: Vec::new(),
                status: RunStatus::WaitingBudget,
                at: Utc::now(),
            })
            .await
    }
}

/// A raise names at least one limit, each above 0 and at most 10^12.
fn check_raise(raise: &RunBudget) -> Result<(), BudgetRaiseError> {
    if raise.is_unlimited() {
        return Err(BudgetRaiseError::Invalid {
            field: "raise",
            message: "`raise` must set at least one of maxCostUsd, maxTokens, maxToolCalls, \
                      maxDurationSeconds"
                .into(),
        });
    }
    raise
        .check()
        .map_err(|(field, message)| BudgetRaiseError::Invalid { field, message })
}

/// The limit the run would still be past under `budget`, from what it has spent so far.
fn still_crossed(checkpoint: &Checkpoint, budget: RunBudget) -> Option<BudgetExceeded> {
    let spent = Spent::of(
        &checkpoint.accounting,
        Duration::from_millis(checkpoint.elapsed_ms),
    );
    budget.crossed(&spent)
}

/// The camelCase name of the limit crossed (`maxToolCalls`), as the request writes it.
fn limit_name(crossed: &BudgetExceeded) -> String {
    serde_json::to_value(crossed.limit)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}
