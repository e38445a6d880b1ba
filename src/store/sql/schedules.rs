//! Statements of `schedules` and `schedule_fires`; see
//! [`ScheduleStore`](crate::store::ScheduleStore). A due time is claimed by inserting its fire
//! row: the primary key lets one insert win, on every replica.

macro_rules! schedule_columns {
    () => {
        "id, owner, key_id, agent, prompt, cron, timezone, conversation_id, overlap, missed, \
         webhook_url, enabled, next_due_at, created_at, updated_at"
    };
}

pub const UPSERT_SCHEDULE: &str = concat!(
    "INSERT INTO schedules (",
    schedule_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
     ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, key_id = excluded.key_id, \
     agent = excluded.agent, prompt = excluded.prompt, cron = excluded.cron, \
     timezone = excluded.timezone, conversation_id = excluded.conversation_id, \
     overlap = excluded.overlap, missed = excluded.missed, webhook_url = excluded.webhook_url, \
     enabled = excluded.enabled, next_due_at = excluded.next_due_at, updated_at = excluded.updated_at"
);
pub const SELECT_SCHEDULE: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules WHERE id = $1"
);
pub const LIST_SCHEDULES: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules ORDER BY created_at, id"
);
pub const LIST_OWNERS_SCHEDULES: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules WHERE owner = $1 ORDER BY created_at, id"
);
pub const DUE_SCHEDULES: &str = concat!(
    "SELECT ",
    schedule_columns!(),
    " FROM schedules WHERE enabled = $2 AND next_due_at <= $1 ORDER BY next_due_at"
);
pub const SCHEDULE_WORK: &str = "SELECT \
     (SELECT MIN(next_due_at) FROM schedules WHERE enabled = TRUE) AS next_due_at, \
     EXISTS (SELECT 1 FROM schedule_fires WHERE status = 'queued') AS queued";
pub const DELETE_FIRES: &str = "DELETE FROM schedule_fires WHERE schedule_id = $1";
pub const DELETE_SCHEDULE: &str = "DELETE FROM schedules WHERE id = $1";
pub const CLAIM_FIRE: &str = "INSERT INTO schedule_fires \
     (schedule_id, due_at, replica, status, run_id, fired_at) VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (schedule_id, due_at) DO NOTHING";
pub const FINISH_FIRE: &str =
    "UPDATE schedule_fires SET status = $3, run_id = $4 WHERE schedule_id = $1 AND due_at = $2";
pub const FIRES_IN_STATUS: &str = "SELECT schedule_id, due_at, replica, status, run_id, fired_at \
     FROM schedule_fires WHERE status = $1 ORDER BY due_at, schedule_id LIMIT 1000";
pub const MOVE_FIRE: &str = "UPDATE schedule_fires SET status = $4, replica = $5, fired_at = $6 \
     WHERE schedule_id = $1 AND due_at = $2 AND status = $3";
pub const ADVANCE: &str =
    "UPDATE schedules SET next_due_at = $3 WHERE id = $1 AND next_due_at = $2";
pub const LIST_FIRES: &str = "SELECT schedule_id, due_at, replica, status, run_id, fired_at \
     FROM schedule_fires WHERE schedule_id = $1 ORDER BY due_at DESC LIMIT $2";

#[derive(sqlx::FromRow)]
pub struct ScheduleRow {
    id: String,
    owner: Option<String>,
    key_id: Option<String>,
    agent: String,
    prompt: String,
    cron: String,
    timezone: String,
    conversation_id: Option<String>,
    overlap: String,
    missed: String,
    webhook_url: Option<String>,
    enabled: bool,
    next_due_at: Option<chrono::DateTime<chrono::Utc>>,
    created_at: chrono::DateTime<chrono::Utc>,
    updated_at: chrono::DateTime<chrono::Utc>,
}

impl From<ScheduleRow> for crate::store::ScheduleRecord {
    fn from(row: ScheduleRow) -> Self {
        Self {
            id: row.id,
            owner: row.owner,
            key_id: row.key_id,
            agent: row.agent,
            prompt: row.prompt,
            cron: row.cron,
            timezone: row.timezone,
            conversation_id: row.conversation_id,
            overlap: row.overlap,
            missed: row.missed,
            webhook_url: row.webhook_url,
            enabled: row.enabled,
            next_due_at: row.next_due_at,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct FireRow {
    schedule_id: String,
    due_at: chrono::DateTime<chrono::Utc>,
    replica: String,
    status: String,
    run_id: Option<String>,
    fired_at: chrono::DateTime<chrono::Utc>,
}

impl From<FireRow> for crate::store::ScheduleFire {
    fn from(row: FireRow) -> Self {
        Self {
            schedule_id: row.schedule_id,
            due_at: row.due_at,
            replica: row.replica,
            status: row.status,
            run_id: row.run_id,
            fired_at: row.fired_at,
        }
    }
}

/// Implements [`ScheduleStore`](crate::store::ScheduleStore) for a backend.
macro_rules! impl_schedule_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ScheduleStore for $store {
            async fn put_schedule(
                &self,
                s: &$crate::store::ScheduleRecord,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, schedules as sql};
                sqlx::query(sql::UPSERT_SCHEDULE)
                    .bind(&s.id)
                    .bind(&s.owner)
                    .bind(&s.key_id)
                    .bind(&s.agent)
                    .bind(&s.prompt)
                    .bind(&s.cron)
                    .bind(&s.timezone)
                    .bind(&s.conversation_id)
                    .bind(&s.overlap)
                    .bind(&s.missed)
                    .bind(&s.webhook_url)
                    .bind(s.enabled)
                    .bind(s.next_due_at.map(at))
                    .bind(at(s.created_at))
                    .bind(at(s.updated_at))
                    .execute(&self.writer)
                    .await?;
                self.signals.schedules_changed.notify_one();
                Ok(())
            }

            async fn schedule_work(
                &self,
            ) -> Result<$crate::store::ScheduleWork, $crate::store::StoreError> {
                use $crate::store::sql::schedules as sql;
                Ok(sqlx::query_as(sql::SCHEDULE_WORK)
                    .fetch_one(&self.reader)
                    .await?)
            }

            fn schedule_wakeup(&self) -> &tokio::sync::Notify {
                &self.signals.schedules_changed
            }

            async fn get_schedule(
                &self,
                id: &str,
            ) -> Result<Option<$crate::store::ScheduleRecord>, $crate::store::StoreError> {
                use $crate::store::sql::schedules as sql;
                let row = sqlx::query_as::<_, sql::ScheduleRow>(sql::SELECT_SCHEDULE)
                    .bind(id)
                    .fetch_optional(&self.writer)
                    .await?;
                Ok(row.map(Into::into))
            }

            async fn list_schedules(
                &self,
                owner: Option<&str>,
            ) -> Result<Vec<$crate::store::ScheduleRecord>, $crate::store::StoreError> {
                use $crate::store::sql::schedules as sql;
                let rows = match owner {
                    Some(owner) => {
                        sqlx::query_as::<_, sql::ScheduleRow>(sql::LIST_OWNERS_SCHEDULES)
                            .bind(owner)
                            .fetch_all(&self.reader)
                            .await?
                    }
                    None => {
                        sqlx::query_as::<_, sql::ScheduleRow>(sql::LIST_SCHEDULES)
                            .fetch_all(&self.reader)
                            .await?
                    }
                };
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn delete_schedule(&self, id: &str) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::schedules as sql;
                let mut tx = self.begin_write().await?;
                sqlx::query(sql::DELETE_FIRES)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                let done = sqlx::query(sql::DELETE_SCHEDULE)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(done.rows_affected() > 0)
            }

            async fn due_schedules(
                &self,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<$crate::store::ScheduleRecord>, $crate::store::StoreError> {
                use $crate::store::sql::{at, schedules as sql};
                let rows = sqlx::query_as::<_, sql::ScheduleRow>(sql::DUE_SCHEDULES)
                    .bind(at(now))
                    .bind(true)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn claim_fire(
                &self,
                fire: &$crate::store::ScheduleFire,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{at, schedules as sql};
                let done = sqlx::query(sql::CLAIM_FIRE)
                    .bind(&fire.schedule_id)
                    .bind(at(fire.due_at))
                    .bind(&fire.replica)
                    .bind(&fire.status)
                    .bind(&fire.run_id)
                    .bind(at(fire.fired_at))
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn finish_fire(
                &self,
                schedule_id: &str,
                due_at: chrono::DateTime<chrono::Utc>,
                status: &str,
                run_id: Option<&str>,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, schedules as sql};
                sqlx::query(sql::FINISH_FIRE)
                    .bind(schedule_id)
                    .bind(at(due_at))
                    .bind(status)
                    .bind(run_id)
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn fires_in_status(
                &self,
                status: &str,
            ) -> Result<Vec<$crate::store::ScheduleFire>, $crate::store::StoreError> {
                use $crate::store::sql::schedules as sql;
                let rows = sqlx::query_as::<_, sql::FireRow>(sql::FIRES_IN_STATUS)
                    .bind(status)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn move_fire(
                &self,
                schedule_id: &str,
                due_at: chrono::DateTime<chrono::Utc>,
                from: &str,
                to: &str,
                replica: &str,
                at_time: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{at, schedules as sql};
                let done = sqlx::query(sql::MOVE_FIRE)
                    .bind(schedule_id)
                    .bind(at(due_at))
                    .bind(from)
                    .bind(to)
                    .bind(replica)
                    .bind(at(at_time))
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn advance_schedule(
                &self,
                id: &str,
                from: chrono::DateTime<chrono::Utc>,
                next: Option<chrono::DateTime<chrono::Utc>>,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{at, schedules as sql};
                let done = sqlx::query(sql::ADVANCE)
                    .bind(id)
                    .bind(at(from))
                    .bind(next.map(at))
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn list_fires(
                &self,
                schedule_id: &str,
                limit: u32,
            ) -> Result<Vec<$crate::store::ScheduleFire>, $crate::store::StoreError> {
                use $crate::store::sql::schedules as sql;
                let limit = $crate::store::check_page_size(limit)?;
                let rows = sqlx::query_as::<_, sql::FireRow>(sql::LIST_FIRES)
                    .bind(schedule_id)
                    .bind(limit)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }
        }
    };
}
pub(crate) use impl_schedule_store;
