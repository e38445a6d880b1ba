//! Schedules (SPEC §13): runs started on a five-field cron (or `@daily`-style name) in a named
//! time zone, daylight-saving changes included (croner over chrono-tz). Every replica looks
//! for due schedules; the one that inserts the (schedule, due time) fire row fires it, so each
//! due time fires once across replicas, whichever of them is alive. `overlap` says what a due
//! time does while the previous run still runs (`skip`, `queue` behind it, or `allow`); a
//! schedule with a conversation queues in it, one without stores the due time as a `queued`
//! fire that the first replica to see the previous run ended moves to `claimed` and starts, so
//! it starts once across replicas too. `missed` what a due time found late (the server was down) does (`skip` or
//! `run_once`). Runs belong to the schedule's creator.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::Runtime;
use super::conversation::ConversationTurn;
use super::pipeline::RunSubmission;
use crate::config::schedules::ScheduleConfig;
pub use crate::config::schedules::{Missed, Overlap, Timetable};
use crate::config::{BusyPolicy, OnDisconnect};
use crate::store::{NewRun, ScheduleFire, ScheduleRecord, StoreError};

/// How often a replica looks while a due time waits `queued` for its previous run.
const SCHEDULE_POLL: Duration = Duration::from_millis(200);
/// The longest a replica goes without looking at the schedules: a schedule another replica
/// created or changed is seen within it (this replica's own changes wake it at once).
const SCHEDULE_IDLE_POLL: Duration = Duration::from_secs(1);
/// A due time found later than this was missed (the server was down): `missed` decides.
const MISSED_AFTER_SECONDS: i64 = 60;

/// A due time claimed this long ago without a run yet is taken for abandoned (its replica died
/// while starting it), so it no longer holds back the schedule's queued due times.
const CLAIM_ABANDONED_AFTER_SECONDS: i64 = 60;
/// How many of a schedule's latest fires are looked at to find its previous run.
const FIRES_LOOKED_AT: u32 = 50;

/// How one due time went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FireStatus {
    Claimed,
    Queued,
    Fired,
    Skipped,
    Failed,
}

impl FireStatus {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Claimed => "claimed",
            Self::Queued => "queued",
            Self::Fired => "fired",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
        }
    }
}

impl Runtime {
    /// Handles every schedule due now that this replica claims first.
    pub(super) async fn fire_due_schedules(self: &Arc<Self>) -> Result<(), StoreError> {
        let now = Utc::now();
        for schedule in self.store.due_schedules(now).await? {
            let Some(due_at) = schedule.next_due_at else {
                continue;
            };
            let next = Timetable::parse(&schedule.cron, &schedule.timezone)
                .ok()
                .and_then(|t| t.next_after(now.max(due_at)));
            let fire = ScheduleFire {
                schedule_id: schedule.id.clone(),
                due_at,
                replica: self.replica.id.clone(),
                status: FireStatus::Claimed.as_str().into(),
                run_id: None,
                fired_at: now,
            };
            if self.store.claim_fire(&fire).await? {
                let late = (now - due_at).num_seconds() > MISSED_AFTER_SECONDS;
                let (status, run_id) = self.fire(&schedule, due_at, late).await;
                self.store
                    .finish_fire(&schedule.id, due_at, status.as_str(), run_id.as_deref())
                    .await?;
            }
            // Whoever claimed it, the next due time comes next (a no-op once moved).
            self.store
                .advance_schedule(&schedule.id, due_at, next)
                .await?;
        }
        self.start_queued_fires().await
    }

    /// Starts each schedule's oldest queued due time whose previous run has ended, when this
    /// replica moves it from `queued` to `claimed` first.
    async fn start_queued_fires(self: &Arc<Self>) -> Result<(), StoreError> {
        let queued = self
            .store
            .fires_in_status(FireStatus::Queued.as_str())
            .await?;
        let mut seen = std::collections::HashSet::new();
        for fire in queued {
            if !seen.insert(fire.schedule_id.clone()) {
                continue;
            }
            let Some(schedule) = self.store.get_schedule(&fire.schedule_id).await? else {
                continue;
            };
            if self.earlier_fire_pending(&schedule, fire.due_at).await {
                continue;
            }
            let claimed = self
                .store
                .move_fire(
                    &fire.schedule_id,
                    fire.due_at,
                    FireStatus::Queued.as_str(),
                    FireStatus::Claimed.as_str(),
                    &self.replica.id,
                    Utc::now(),
                )
                .await?;
            if claimed {
                let (status, run_id) = self.start_fire(&schedule).await;
                self.store
                    .finish_fire(
                        &schedule.id,
                        fire.due_at,
                        status.as_str(),
                        run_id.as_deref(),
                    )
                    .await?;
            }
        }
        Ok(())
    }

    /// Fires one claimed due time, unless `missed` or `overlap` skips it.
    async fn fire(
        self: &Arc<Self>,
        schedule: &ScheduleRecord,
        due_at: DateTime<Utc>,
        late: bool,
    ) -> (FireStatus, Option<String>) {
        if late && Missed::parse(&schedule.missed) == Missed::Skip {
            return (FireStatus::Skipped, None);
        }
        let overlap = Overlap::parse(&schedule.overlap);
        let queues_here = overlap == Overlap::Queue && schedule.conversation_id.is_none();
        if (overlap == Overlap::Skip || queues_here)
            && self.earlier_fire_pending(schedule, due_at).await
        {
            let held = if queues_here {
                FireStatus::Queued
            } else {
                FireStatus::Skipped
            };
            return (held, None);
        }
        self.start_fire(schedule).await
    }

    /// Starts the schedule's run for a due time: `fired` with the run, or `failed`.
    async fn start_fire(
        self: &Arc<Self>,
        schedule: &ScheduleRecord,
    ) -> (FireStatus, Option<String>) {
        match self.start_scheduled_run(schedule).await {
            Ok(run_id) => (FireStatus::Fired, Some(run_id)),
            Err(error) => {
                warn!(schedule = %schedule.id, %error, "a scheduled run could not start");
                self.notify_schedule_failed(schedule, &error).await;
                (FireStatus::Failed, None)
            }
        }
    }

    /// Whether a fire of the schedule other than the one due at `due_at` holds it back: one
    /// earlier still queued, one being started, or the last run still in progress.
    async fn earlier_fire_pending(&self, schedule: &ScheduleRecord, due_at: DateTime<Utc>) -> bool {
        let Ok(fires) = self.store.list_fires(&schedule.id, FIRES_LOOKED_AT).await else {
            return false;
        };
        let now = Utc::now();
        for fire in fires.iter().filter(|f| f.due_at != due_at) {
            let status = fire.status.as_str();
            if status == FireStatus::Queued.as_str() && fire.due_at < due_at {
                return true;
            }
            if status == FireStatus::Claimed.as_str()
                && (now - fire.fired_at).num_seconds() < CLAIM_ABANDONED_AFTER_SECONDS
            {
                return true;
            }
            let Some(run_id) = fire.run_id.as_deref() else {
                continue;
            };
            if let Ok(Some(run)) = self.find_run(run_id).await {
                return !run.status.is_terminal();
            }
        }
        false
    }

    /// Starts the schedule's run, owned by its creator; its id.
    pub async fn start_scheduled_run(
        self: &Arc<Self>,
        schedule: &ScheduleRecord,
    ) -> Result<String, String> {
        let agent = self
            .agents()
            .get(&schedule.agent)
            .ok_or_else(|| format!("the agent {:?} is gone", schedule.agent))?;
        let mut submission = RunSubmission::new(agent, schedule.prompt.clone());
        submission.user_id = schedule.owner.clone();
        submission.key_id = schedule.key_id.clone();
        submission.on_disconnect = OnDisconnect::Continue;
        submission.webhook = schedule.webhook_url.clone();
        if let (Some(conversation), Some(_)) = (&schedule.conversation_id, &schedule.owner) {
            submission.conversation = Some(ConversationTurn::Named(conversation.clone()));
            submission.busy = Some(match Overlap::parse(&schedule.overlap) {
                Overlap::Skip => BusyPolicy::Reject,
                Overlap::Queue | Overlap::Allow => BusyPolicy::Enqueue,
            });
        }
        let handle = self
            .start_run(submission)
            .await
            .map_err(|e| e.to_string())?;
        Ok(handle.run_id)
    }

    /// Puts the config's `schedules` in the store (a due time already set is kept while the
    /// cron, zone and enabled flag stay the same).
    pub(super) async fn sync_config_schedules(&self) {
        for schedule in &self.config.schedules {
            if let Err(error) = self.sync_config_schedule(schedule).await {
                warn!(schedule = %schedule.id, %error, "could not store a configured schedule");
            }
        }
    }

    async fn sync_config_schedule(&self, c: &ScheduleConfig) -> Result<(), StoreError> {
        let now = Utc::now();
        let existing = self.store.get_schedule(&c.id).await?;
        let kept_due = existing
            .as_ref()
            .filter(|e| e.cron == c.cron && e.timezone == c.timezone && e.enabled == c.enabled)
            .and_then(|e| e.next_due_at);
        let next_due_at = match Timetable::parse(&c.cron, &c.timezone) {
            Ok(table) if c.enabled => kept_due.or_else(|| table.next_after(now)),
            _ => None,
        };
        let record = ScheduleRecord {
            id: c.id.clone(),
            owner: c.user.clone(),
            key_id: None,
            agent: c.agent.clone(),
            prompt: c.prompt.clone(),
            cron: c.cron.clone(),
            timezone: c.timezone.clone(),
            conversation_id: c.conversation_id.clone(),
            overlap: c.overlap.as_str().into(),
            missed: c.missed.as_str().into(),
            webhook_url: c.webhook_url.clone(),
            enabled: c.enabled,
            next_due_at,
            created_at: existing.map_or(now, |e| e.created_at),
            updated_at: now,
        };
        self.store.put_schedule(&record).await
    }

    /// `schedule.failed` to the receivers that take it.
    async fn notify_schedule_failed(&self, schedule: &ScheduleRecord, error: &str) {
        let run = NewRun {
            id: String::new(),
            agent: schedule.agent.clone(),
            user_id: schedule.owner.clone(),
            conversation_id: schedule.conversation_id.clone(),
            created_at: Utc::now(),
            owner: None,
            acted_by: None,
            key_id: schedule.key_id.clone(),
        };
        self.notify_schedule(&schedule.id, &run, error, schedule.webhook_url.as_deref())
            .await;
    }
}

/// Fires due schedules until `stop`: sleeps until the earliest is due (reading when that is at
/// least every [`SCHEDULE_IDLE_POLL`]; looking for startable queued due times every
/// [`SCHEDULE_POLL`] while one waits for its previous run) or this replica changes a schedule.
/// Only that one unbound statement is read while nothing is due.
pub(super) async fn fire_forever(runtime: Arc<Runtime>, stop: CancellationToken) {
    loop {
        let (wait, queued) = runtime.until_schedule_work().await;
        if !wait.is_zero() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = runtime.store.schedule_wakeup().notified() => {}
                // Due now, or another look (another replica may have changed a schedule);
                // while a due time is queued, its previous run may have ended: look for it.
                _ = tokio::time::sleep(wait) => if !queued { continue },
            }
        }
        if let Err(error) = runtime.fire_due_schedules().await {
            warn!(%error, "looking for due schedules failed; trying again shortly");
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(SCHEDULE_IDLE_POLL) => {}
            }
        }
    }
}

impl Runtime {
    /// How long until the schedule loop has work: zero when a schedule is due now,
    /// [`SCHEDULE_POLL`] while a due time is queued, else until the earliest next due time (at
    /// most [`SCHEDULE_IDLE_POLL`], also when the store cannot say); and whether to look for
    /// queued due times after that wait (true when some wait, or the store cannot say).
    async fn until_schedule_work(&self) -> (Duration, bool) {
        let work = match self.store.schedule_work().await {
            Ok(work) => work,
            Err(error) => {
                warn!(%error, "could not read when the next schedule is due");
                return (SCHEDULE_IDLE_POLL, true);
            }
        };
        let until_due = work.next_due_at.map_or(SCHEDULE_IDLE_POLL, |due| {
            (due - Utc::now()).to_std().unwrap_or(Duration::ZERO)
        });
        let ceiling = if work.queued {
            SCHEDULE_POLL
        } else {
            SCHEDULE_IDLE_POLL
        };
        (until_due.min(ceiling), work.queued)
    }
}
