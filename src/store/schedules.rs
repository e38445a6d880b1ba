//! Schedules (SPEC §13) as the store keeps them: the schedule rows, and one fire row per
//! (schedule, due time) whose insert is the claim that lets exactly one replica fire it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRecord {
    pub id: String,
    /// The creator its runs belong to (a user id, or `key:ID`).
    pub owner: Option<String>,
    pub key_id: Option<String>,
    pub agent: String,
    pub prompt: String,
    pub cron: String,
    pub timezone: String,
    pub conversation_id: Option<String>,
    /// `skip`, `queue` or `allow`.
    pub overlap: String,
    /// `skip` or `run_once`.
    pub missed: String,
    pub webhook_url: Option<String>,
    pub enabled: bool,
    pub next_due_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One due time of a schedule, as it was handled.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleFire {
    pub schedule_id: String,
    pub due_at: DateTime<Utc>,
    pub replica: String,
    /// `claimed` (being started), `queued` (behind the previous run, `overlap: queue`),
    /// `fired`, `skipped` (overlap or missed) or `failed` (the run could not start).
    pub status: String,
    pub run_id: Option<String>,
    pub fired_at: DateTime<Utc>,
}

/// What the schedule loop has to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct ScheduleWork {
    /// The earliest next due time of an enabled schedule.
    pub next_due_at: Option<DateTime<Utc>>,
    /// Whether any due time waits `queued` for its previous run to end.
    pub queued: bool,
}

#[async_trait]
pub trait ScheduleStore: Send + Sync {
    /// Stores a new schedule, or replaces the one with its id (PATCH, config).
    async fn put_schedule(&self, schedule: &ScheduleRecord) -> Result<(), StoreError>;
    async fn get_schedule(&self, id: &str) -> Result<Option<ScheduleRecord>, StoreError>;
    /// Schedules oldest first; only `owner`'s when given.
    async fn list_schedules(&self, owner: Option<&str>) -> Result<Vec<ScheduleRecord>, StoreError>;
    /// Deletes the schedule and its fires; whether there was one.
    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError>;
    /// What the schedule loop has to do next, read with one statement that binds nothing (so
    /// SQLite keeps one plan for it): see [`ScheduleWork`].
    async fn schedule_work(&self) -> Result<ScheduleWork, StoreError>;
    /// Notified (one permit kept) whenever this store commits a created or changed schedule,
    /// so this replica's schedule loop looks at once.
    fn schedule_wakeup(&self) -> &tokio::sync::Notify;
    /// Enabled schedules due at `now`.
    async fn due_schedules(&self, now: DateTime<Utc>) -> Result<Vec<ScheduleRecord>, StoreError>;
    /// Claims a due time for `fire.replica`: true for exactly one caller per (schedule, due).
    async fn claim_fire(&self, fire: &ScheduleFire) -> Result<bool, StoreError>;
    /// Records how a claimed due time went.
    async fn finish_fire(
        &self,
        schedule_id: &str,
        due_at: DateTime<Utc>,
        status: &str,
        run_id: Option<&str>,
    ) -> Result<(), StoreError>;
    /// Fires in `status` (every schedule's), oldest due time first.
    async fn fires_in_status(&self, status: &str) -> Result<Vec<ScheduleFire>, StoreError>;
    /// Moves a fire from status `from` to `to` for `replica` at `at`: true for exactly one
    /// caller (the one whose update found it still in `from`).
    async fn move_fire(
        &self,
        schedule_id: &str,
        due_at: DateTime<Utc>,
        from: &str,
        to: &str,
        replica: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Moves the schedule's next due time from `from` to `next`; false when another replica
    /// already moved it.
    async fn advance_schedule(
        &self,
        id: &str,
        from: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError>;
    /// The schedule's fires, newest first.
    async fn list_fires(
        &self,
        schedule_id: &str,
        limit: u32,
    ) -> Result<Vec<ScheduleFire>, StoreError>;
}
