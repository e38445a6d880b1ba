//! What the schedules API reads and changes (SPEC §13), so its handlers only translate: a
//! schedule by id, a caller's schedules, saving and deleting one, running one now (the run and
//! its fire recorded together as the schedule's history shows them) and that history. Who may
//! reach a schedule is the handler's (its caller); when schedules fire is `schedules`'.

use std::sync::Arc;

use chrono::Utc;

use super::Runtime;
use super::schedules::FireStatus;
use crate::store::{ScheduleFire, ScheduleRecord, StoreError};

/// How many of a schedule's latest runs its history lists.
pub const SCHEDULE_HISTORY: u32 = 100;

/// Why a schedule could not be run now.
#[derive(Debug, thiserror::Error)]
pub enum RunNowError {
    /// The run was refused (the agent is gone, the server is full, …).
    #[error("The run could not start: {0}")]
    NotStarted(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Runtime {
    pub async fn schedule(&self, id: &str) -> Result<Option<ScheduleRecord>, StoreError> {
        self.store.get_schedule(id).await
    }

    /// Schedules oldest first; only `owner`'s when given.
    pub async fn schedules(&self, owner: Option<&str>) -> Result<Vec<ScheduleRecord>, StoreError> {
        self.store.list_schedules(owner).await
    }

    /// Creates or replaces the schedule; every replica's schedule loop sees it.
    pub async fn save_schedule(&self, schedule: &ScheduleRecord) -> Result<(), StoreError> {
        self.store.put_schedule(schedule).await
    }

    /// Deletes the schedule and its history; whether there was one.
    pub async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError> {
        self.store.delete_schedule(id).await
    }

    /// Starts the schedule's run now and records it in its history; the run's id.
    pub async fn run_schedule_now(
        self: &Arc<Self>,
        schedule: &ScheduleRecord,
    ) -> Result<String, RunNowError> {
        let run_id = self
            .start_scheduled_run(schedule)
            .await
            .map_err(RunNowError::NotStarted)?;
        let now = Utc::now();
        let fire = ScheduleFire {
            schedule_id: schedule.id.clone(),
            due_at: now,
            replica: self.replica.id.clone(),
            status: FireStatus::Fired.as_str().to_string(),
            run_id: Some(run_id.clone()),
            fired_at: now,
        };
        self.store.claim_fire(&fire).await?;
        Ok(run_id)
    }

    /// The schedule's latest runs ([`SCHEDULE_HISTORY`] at most), newest first.
    pub async fn schedule_history(&self, id: &str) -> Result<Vec<ScheduleFire>, StoreError> {
        self.store.list_fires(id, SCHEDULE_HISTORY).await
    }

    /// Records an audit event; a failure to write it is logged, never the caller's.
    pub async fn audit(&self, event: crate::audit::AuditEvent) {
        crate::audit::record_or_log(self.store.as_ref(), event).await;
    }
}
