//! Statements of the per-key limit tables. Every count changes in one statement (an upsert or
//! a conditional upsert with `RETURNING`), so replicas updating the same row never lose one.

/// Adds one request to a window and returns its count.
pub const COUNT_REQUEST: &str = "INSERT INTO key_request_windows (key_id, window_start, requests) \
     VALUES ($1, $2, 1) ON CONFLICT (key_id, window_start) \
     DO UPDATE SET requests = key_request_windows.requests + 1 RETURNING requests";

/// A window's count, read without counting.
pub const REQUESTS_IN: &str =
    "SELECT requests FROM key_request_windows WHERE key_id = $1 AND window_start = $2";

/// How many of a key's slots are held (their lease has not expired).
pub const HELD_SLOTS: &str =
    "SELECT COUNT(*) FROM key_run_slots WHERE key_id = $1 AND expires_at > $2";

/// The slot numbers of a key whose lease has not expired.
pub const LIVE_SLOTS: &str = "SELECT slot FROM key_run_slots WHERE key_id = $1 AND expires_at > $2";

/// Takes slot `$2` when it is free or its lease expired; returns a row only when taken. Two
/// replicas claiming the same slot serialize on its row, and the second sees the first's lease.
pub const CLAIM_SLOT: &str = "INSERT INTO key_run_slots (key_id, slot, run_id, holder, expires_at) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key_id, slot) \
     DO UPDATE SET run_id = excluded.run_id, holder = excluded.holder, expires_at = excluded.expires_at \
     WHERE key_run_slots.expires_at <= $6 RETURNING slot";

pub const RENEW_SLOTS: &str = "UPDATE key_run_slots SET expires_at = $2 WHERE holder = $1";

pub const RELEASE_SLOT: &str = "DELETE FROM key_run_slots WHERE key_id = $1 AND run_id = $2";

pub const USAGE_ON: &str =
    "SELECT tokens, cost_usd FROM key_daily_usage WHERE key_id = $1 AND day = $2";

pub const ADD_USAGE: &str = "INSERT INTO key_daily_usage (key_id, day, tokens, cost_usd) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (key_id, day) \
     DO UPDATE SET tokens = key_daily_usage.tokens + excluded.tokens, \
     cost_usd = key_daily_usage.cost_usd + excluded.cost_usd";

pub const PRUNE_WINDOWS: &str = "DELETE FROM key_request_windows WHERE window_start < $1";
pub const PRUNE_SLOTS: &str = "DELETE FROM key_run_slots WHERE expires_at <= $1";
pub const PRUNE_USAGE: &str = "DELETE FROM key_daily_usage WHERE day < $1";

/// `YYYY-MM-DD`: days are text on both backends and compare in date order.
pub fn day_text(day: chrono::NaiveDate) -> String {
    day.format("%Y-%m-%d").to_string()
}

/// Implements [`KeyLimitStore`](crate::store::KeyLimitStore) for a backend.
macro_rules! impl_key_limit_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::KeyLimitStore for $store {
            async fn count_key_request(
                &self,
                key_id: &str,
                window_start: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, $crate::store::StoreError> {
                use $crate::store::sql::{at, key_limits as sql};
                let count: i64 = sqlx::query_scalar(sql::COUNT_REQUEST)
                    .bind(key_id)
                    .bind(at(window_start))
                    .fetch_one(&self.writer)
                    .await?;
                Ok(u64::try_from(count).unwrap_or(0))
            }

            async fn key_requests_in(
                &self,
                key_id: &str,
                window_start: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, $crate::store::StoreError> {
                use $crate::store::sql::{at, key_limits as sql};
                let count: Option<i64> = sqlx::query_scalar(sql::REQUESTS_IN)
                    .bind(key_id)
                    .bind(at(window_start))
                    .fetch_optional(&self.writer)
                    .await?;
                Ok(count.map_or(0, |count| u64::try_from(count).unwrap_or(0)))
            }

            async fn key_run_slots_held(
                &self,
                key_id: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, $crate::store::StoreError> {
                use $crate::store::sql::{at, key_limits as sql};
                let count: i64 = sqlx::query_scalar(sql::HELD_SLOTS)
                    .bind(key_id)
                    .bind(at(now))
                    .fetch_one(&self.writer)
                    .await?;
                Ok(u64::try_from(count).unwrap_or(0))
            }

            async fn claim_run_slot(
                &self,
                claim: &$crate::store::RunSlotClaim<'_>,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::{at, key_limits as sql};
                let now = at(claim.now);
                let live: Vec<i64> = sqlx::query_scalar(sql::LIVE_SLOTS)
                    .bind(claim.key_id)
                    .bind(now)
                    .fetch_all(&self.writer)
                    .await?;
                // Another replica may take a slot between the read and the claim: the claim
                // then matches nothing and the next free slot is tried.
                for slot in (0..i64::from(claim.limit)).filter(|slot| !live.contains(slot)) {
                    let taken: Option<i64> = sqlx::query_scalar(sql::CLAIM_SLOT)
                        .bind(claim.key_id)
                        .bind(slot)
                        .bind(claim.run_id)
                        .bind(claim.holder)
                        .bind(at(claim.lease_until))
                        .bind(now)
                        .fetch_optional(&self.writer)
                        .await?;
                    if taken.is_some() {
                        return Ok(true);
                    }
                }
                Ok(false)
            }

            async fn renew_run_slots(
                &self,
                holder: &str,
                lease_until: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, key_limits as sql};
                sqlx::query(sql::RENEW_SLOTS)
                    .bind(holder)
                    .bind(at(lease_until))
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn release_run_slot(
                &self,
                key_id: &str,
                run_id: &str,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::key_limits as sql;
                sqlx::query(sql::RELEASE_SLOT)
                    .bind(key_id)
                    .bind(run_id)
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn key_usage_on(
                &self,
                key_id: &str,
                day: chrono::NaiveDate,
            ) -> Result<$crate::store::DailyUsage, $crate::store::StoreError> {
                use $crate::store::sql::key_limits as sql;
                let row: Option<(i64, f64)> = sqlx::query_as(sql::USAGE_ON)
                    .bind(key_id)
                    .bind(sql::day_text(day))
                    .fetch_optional(&self.writer)
                    .await?;
                Ok(row.map_or_else(Default::default, |(tokens, cost_usd)| {
                    $crate::store::DailyUsage {
                        tokens: u64::try_from(tokens).unwrap_or(0),
                        cost_usd,
                    }
                }))
            }

            async fn add_key_usage(
                &self,
                key_id: &str,
                day: chrono::NaiveDate,
                usage: $crate::store::DailyUsage,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::key_limits as sql;
                sqlx::query(sql::ADD_USAGE)
                    .bind(key_id)
                    .bind(sql::day_text(day))
                    .bind(i64::try_from(usage.tokens).unwrap_or(i64::MAX))
                    .bind(usage.cost_usd)
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn prune_key_counts(
                &self,
                window_start: chrono::DateTime<chrono::Utc>,
                now: chrono::DateTime<chrono::Utc>,
                first_day_kept: chrono::NaiveDate,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, key_limits as sql};
                sqlx::query(sql::PRUNE_WINDOWS)
                    .bind(at(window_start))
                    .execute(&self.writer)
                    .await?;
                sqlx::query(sql::PRUNE_SLOTS)
                    .bind(at(now))
                    .execute(&self.writer)
                    .await?;
                sqlx::query(sql::PRUNE_USAGE)
                    .bind(sql::day_text(first_day_kept))
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }
        }
    };
}
pub(crate) use impl_key_limit_store;
