//! Schedules (SPEC §13): runs started on a five-field cron (or `@daily`-style name) in a named
//! time zone, daylight-saving changes included (croner over chrono-tz). Every replica looks
//! for due schedules; the one that inserts the (schedule, due time) fire row fires it, so each
//! due time fires once across replicas, whichever of them is alive. `overlap` says what a due
//! time does while the previous run still runs (`skip`, `queue` behind it in its conversation,
//! or `allow`); `missed` what a due time found late (the server was down) does (`skip` or
//! `run_once`). Runs belong to the schedule's creator.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use croner::Cron;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::Runtime;
use super::conversation::ConversationTurn;
use super::pipeline::RunSubmission;
use crate::config::{BusyPolicy, OnDisconnect};
use crate::store::{NewRun, ScheduleFire, ScheduleRecord, StoreError};

/// How often a replica looks for due schedules.
const SCHEDULE_POLL: Duration = Duration::from_millis(200);
/// A due time found later than this was missed (the server was down): `missed` decides.
const MISSED_AFTER_SECONDS: i64 = 60;

/// What a due time does while the schedule's previous run still runs.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Overlap {
    #[default]
    Skip,
    Queue,
    Allow,
}

impl Overlap {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::Queue => "queue",
            Self::Allow => "allow",
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "queue" => Self::Queue,
            "allow" => Self::Allow,
            _ => Self::Skip,
        }
    }
}

/// What a due time found late does.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Missed {
    #[default]
    Skip,
    RunOnce,
}

impl Missed {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::RunOnce => "run_once",
        }
    }

    pub fn parse(text: &str) -> Self {
        if text == "run_once" {
            Self::RunOnce
        } else {
            Self::Skip
        }
    }
}

/// A schedule's cron in its zone.
#[derive(Debug, Clone)]
pub struct Timetable {
    cron: Cron,
    zone: chrono_tz::Tz,
}

impl Timetable {
    /// The cron (five fields, or a name such as `@daily`) and the IANA zone; `(field, why)` of
    /// the one that is wrong.
    pub fn parse(cron: &str, timezone: &str) -> Result<Self, (&'static str, String)> {
        if cron.split_whitespace().count() > 5 {
            return Err((
                "cron",
                "five fields (minute hour day month weekday) or a name such as @daily".into(),
            ));
        }
        let parsed =
            Cron::from_str(cron).map_err(|e| ("cron", format!("{cron:?} is not a cron: {e}")))?;
        let zone = chrono_tz::Tz::from_str(timezone).map_err(|_| {
            (
                "timezone",
                format!("{timezone:?} is not an IANA time zone such as Europe/Paris"),
            )
        })?;
        Ok(Self { cron: parsed, zone })
    }

    /// The first due time strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }
}

/// How one due time went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FireStatus {
    Claimed,
    Fired,
    Skipped,
    Failed,
}

impl FireStatus {
    fn as_str(self) -> &'static str {
        match self {
            Self::Claimed => "claimed",
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
                let (status, run_id) = self.fire(&schedule, late).await;
                self.store
                    .finish_fire(&schedule.id, due_at, status.as_str(), run_id.as_deref())
                    .await?;
            }
            // Whoever claimed it, the next due time comes next (a no-op once moved).
            self.store
                .advance_schedule(&schedule.id, due_at, next)
                .await?;
        }
        Ok(())
    }

    /// Fires one claimed due time, unless `missed` or `overlap` skips it.
    async fn fire(
        self: &Arc<Self>,
        schedule: &ScheduleRecord,
        late: bool,
    ) -> (FireStatus, Option<String>) {
        if late && Missed::parse(&schedule.missed) == Missed::Skip {
            return (FireStatus::Skipped, None);
        }
        if Overlap::parse(&schedule.overlap) == Overlap::Skip
            && self.previous_run_runs(schedule).await
        {
            return (FireStatus::Skipped, None);
        }
        match self.start_scheduled_run(schedule).await {
            Ok(run_id) => (FireStatus::Fired, Some(run_id)),
            Err(error) => {
                warn!(schedule = %schedule.id, %error, "a scheduled run could not start");
                self.notify_schedule_failed(schedule, &error).await;
                (FireStatus::Failed, None)
            }
        }
    }

    /// Whether the schedule's last run is still in progress.
    async fn previous_run_runs(&self, schedule: &ScheduleRecord) -> bool {
        let Ok(fires) = self.store.list_fires(&schedule.id, 5).await else {
            return false;
        };
        for run_id in fires.iter().filter_map(|f| f.run_id.as_deref()) {
            if let Ok(Some(run)) = self.recorded_run(run_id).await {
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

/// Fires due schedules until `stop`.
pub(super) async fn fire_forever(runtime: Arc<Runtime>, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(SCHEDULE_POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if let Err(error) = runtime.fire_due_schedules().await {
            warn!(%error, "looking for due schedules failed; trying again shortly");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("time")
            .with_timezone(&Utc)
    }

    /// 02:30 every day in Paris: on the spring-forward day 02:30 does not exist (02:00 → 03:00);
    /// on the fall-back day it exists twice and fires once.
    #[test]
    fn due_times_follow_daylight_saving_in_the_named_zone() {
        let table = Timetable::parse("30 2 * * *", "Europe/Paris").expect("parses");
        // 2026-03-29: clocks go 02:00 → 03:00 in Paris.
        let spring = table.next_after(at("2026-03-28T12:00:00Z")).expect("next");
        assert_ne!(spring, at("2026-03-29T01:30:00Z"), "no 02:30 that day");
        let daily = Timetable::parse("0 8 * * *", "Europe/Paris").expect("parses");
        assert_eq!(
            daily.next_after(at("2026-03-28T12:00:00Z")),
            Some(at("2026-03-29T06:00:00Z"))
        );
        assert_eq!(
            daily.next_after(at("2026-03-27T12:00:00Z")),
            Some(at("2026-03-28T07:00:00Z"))
        );
        // 2026-10-25: 02:30 happens twice; it fires once.
        let first = table.next_after(at("2026-10-24T12:00:00Z")).expect("first");
        let second = table.next_after(first).expect("second");
        assert!((second - first).num_hours() >= 23, "{first} then {second}");
    }

    #[test]
    fn names_and_five_fields_parse_and_bad_ones_name_the_field() {
        assert!(Timetable::parse("@daily", "UTC").is_ok());
        assert!(Timetable::parse("*/5 * * * 1-5", "America/New_York").is_ok());
        assert_eq!(
            Timetable::parse("61 * * * *", "UTC").expect_err("bad").0,
            "cron"
        );
        assert_eq!(
            Timetable::parse("0 0 * * * *", "UTC").expect_err("six").0,
            "cron"
        );
        assert_eq!(
            Timetable::parse("@daily", "Mars/Olympus")
                .expect_err("zone")
                .0,
            "timezone"
        );
    }
}
