//! The PostgreSQL backend: the same statements as SQLite over a `PgPool`, with native types
//! (TIMESTAMPTZ, JSONB, BOOLEAN) declared in `migrations/postgres`.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres, Transaction};

use super::StoreError;

/// How long a query waits for a connection. Short: when the database is gone a request fails
/// with 503 `store_unavailable` in about this time instead of hanging (under load, 16
/// connections serve a query long before this).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// A pooled connection idle longer than this is pinged before use (the server may have closed
/// it meanwhile); one used more recently is known to be alive.
const PING_WHEN_IDLE_FOR: Duration = Duration::from_secs(1);

pub struct PostgresStore {
    /// The same pool as `writer`: PostgreSQL serves concurrent readers and writers itself.
    reader: PgPool,
    writer: PgPool,
    /// Where replicas listen for each other's notifications.
    url: String,
    /// Wakes this replica's webhook and schedule loops when their work changes.
    signals: super::StoreSignals,
}

impl PostgresStore {
    /// Writes per recorder transaction. Larger ones are slower here: more statements per
    /// transaction meet sqlx 0.9's Nagle stall (`store_events`: 9,382 runs/s at 256, 2,318 at
    /// 1024).
    const RECORDER_BATCH: usize = 256;

    /// Row locks taken by the statements inside serialize writers to the same rows. (Not
    /// `begin_with("BEGIN")`: with sqlx 0.9 that costs ~40 ms more per transaction here.)
    async fn begin_write(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        self.writer.begin().await
    }

    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let open_error = |source| StoreError::Open {
            url: redact_password(url),
            source,
        };
        let options = PgConnectOptions::from_str(url)
            .map_err(open_error)?
            .statement_cache_capacity(super::sql::STATEMENT_CACHE_CAPACITY);
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // A connection is pinged before use only when it sat idle: under load a ping per
            // statement doubled the round trips to the server (sqlx still pings on release).
            .test_before_acquire(false)
            .before_acquire(|connection, meta| {
                Box::pin(async move {
                    if meta.idle_for > PING_WHEN_IDLE_FOR {
                        connection.ping().await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(options)
            .await
            .map_err(open_error)?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self {
            reader: pool.clone(),
            writer: pool,
            url: url.to_string(),
            signals: super::StoreSignals::default(),
        })
    }

    /// Any replica may store a push-notification config: always asked.
    fn may_hold_push_configs(&self) -> bool {
        true
    }

    fn push_config_stored(&self) {}

    /// A run batch, statement by statement in one transaction (PostgreSQL prepares one
    /// statement per query).
    async fn write_run_rows(&self, batch: &super::RunBatch) -> Result<(), sqlx::Error> {
        self.write_run_batch_statements(batch).await
    }

    /// Wakes the replicas following these runs, when the transaction commits (one statement
    /// for the whole batch; PostgreSQL folds repeats of a notification within a transaction).
    async fn notify_runs(
        tx: &mut Transaction<'static, Postgres>,
        run_ids: &[&str],
    ) -> Result<(), sqlx::Error> {
        if run_ids.is_empty() {
            return Ok(());
        }
        sqlx::query("SELECT pg_notify($1, id) FROM unnest($2::text[]) AS id")
            .bind(super::RUN_EVENTS_CHANNEL)
            .bind(run_ids)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Tells every replica (the run's owner among them) about a control request, at commit.
    async fn notify_control(
        tx: &mut Transaction<'static, Postgres>,
        payload: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(super::RUN_CONTROL_CHANNEL)
            .bind(payload)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    fn listen_url(&self) -> Option<&str> {
        Some(&self.url)
    }
}

/// `scheme://user:secret@host/db` → `scheme://user:***@host/db`, for error messages.
pub(crate) fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((credentials, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

super::sql::shared_store_impl!(PostgresStore, sqlx::Postgres);
super::sql::usage::impl_usage_store!(
    PostgresStore,
    sqlx::Postgres,
    "to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
);
super::sql::user_data::impl_user_data_store!(
    PostgresStore,
    sqlx::Postgres,
    "(value->>'run_id')",
    Some(super::sql::user_data::LOCK_RUNS_POSTGRES)
);

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            super::redact_password("postgres://u:pw@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(super::redact_password("postgres://h/db"), "postgres://h/db");
    }
}
