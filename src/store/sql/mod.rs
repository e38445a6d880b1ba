//! SQL shared by both backends. `$N` placeholders work on SQLite and PostgreSQL alike, so each
//! statement is written once; the `impl_*!` macros implement the store traits for a backend
//! struct with a `reader` pool, a `writer` pool and a `begin_write()` method (SQLite:
//! `BEGIN IMMEDIATE` on a one-connection writer pool, so a write transaction takes the lock
//! first and cannot fail half-way with SQLITE_BUSY). Only the pool types and the DDL differ.
//!
//! Transactions here contain database statements only: nothing awaits the network (an LLM, a
//! tool) while one is open.

pub mod api_keys;
pub mod approvals;
pub mod audit;
pub mod cache;
pub mod conversations;
pub mod files;
pub mod key_limits;
pub mod push_configs;
pub mod replicas;
pub mod responses;
pub mod retention;
pub mod run_batch;
pub mod run_events;
pub mod runs;
pub mod schedules;
pub mod secrets;
pub mod turns;
pub mod usage;
pub mod user_data;
pub mod webhooks;

use chrono::{DateTime, SubsecRound, Utc};

use super::StoreError;

/// Rows per multi-row INSERT. Small enough that one statement's message stays a few KB: sqlx
/// 0.9.0 leaves Nagle's algorithm on, and on PostgreSQL a large message then waits ~40 ms for a
/// delayed ACK (sqlx issue #4335); 256 events in one statement took ~46 ms, in three ~8 ms.
pub const ROWS_PER_INSERT: usize = 100;

/// Large values a multi-row statement stops taking more rows at. sqlx 0.9.0 leaves Nagle's
/// algorithm on (see [`ROWS_PER_INSERT`]): on PostgreSQL a statement of a few tens of KB waits
/// ~40 ms for the server's delayed ACK, and a batch of 25 finished runs with their results, or
/// of a run's packed events, is that large.
pub const STATEMENT_DATA_BYTES: usize = 8 * 1024;

/// `rows` cut into multi-row statements of at most `max_rows` rows and, past a statement's
/// first row, `STATEMENT_DATA_BYTES` of what `bytes` counts (its large values).
pub fn statements<T>(
    rows: &[T],
    max_rows: usize,
    bytes: impl Fn(&T) -> usize,
) -> impl Iterator<Item = &[T]> {
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut total = 0;
        let len = rest
            .iter()
            .take(max_rows)
            .take_while(|row| {
                let size = bytes(row);
                let fits = total == 0 || total + size <= STATEMENT_DATA_BYTES;
                total += size;
                fits
            })
            .count()
            .max(1);
        let (statement, after) = rest.split_at(len);
        rest = after;
        Some(statement)
    })
}

/// Prepared statements each connection keeps. A multi-row INSERT of n rows is its own statement
/// for each n, so the recorder alone has up to `RUNS_PER_INSERT + 2 × ROWS_PER_INSERT` shapes
/// (runs, accounting, events); with sqlx's default of 100 they evicted each other under load
/// and every batch paid a fresh prepare (~440,000 instructions for a 100-row statement).
pub const STATEMENT_CACHE_CAPACITY: usize =
    run_batch::RUNS_PER_INSERT + 2 * ROWS_PER_INSERT + OTHER_STATEMENTS;

/// Room for the statements of a fixed shape: reads, conversations, the cache, transactions.
const OTHER_STATEMENTS: usize = 100;

/// Timestamps are kept to the microsecond on both backends (PostgreSQL's precision), so a
/// value reads back equal wherever it was stored. On SQLite they are RFC 3339 text, which sorts
/// in time order because every value is UTC with the same layout.
pub fn at(time: DateTime<Utc>) -> DateTime<Utc> {
    time.trunc_subsecs(6)
}

/// A unique-key violation becomes [`StoreError::Conflict`]; anything else stays a query error.
pub fn conflict_or_query(error: sqlx::Error, what: &'static str, id: &str) -> StoreError {
    match error.as_database_error() {
        Some(db) if db.is_unique_violation() => StoreError::Conflict {
            what,
            id: id.to_string(),
        },
        _ => StoreError::Query(error),
    }
}

/// Implements every store trait for a backend (`$store`) over database `$db`.
macro_rules! shared_store_impl {
    ($store:ty, $db:ty) => {
        $crate::store::sql::runs::impl_run_store!($store, $db);
        $crate::store::sql::conversations::impl_conversation_store!($store, $db);
        $crate::store::sql::run_events::impl_run_event_store!($store, $db);
        $crate::store::sql::run_batch::impl_run_batch_store!($store, $db);
        $crate::store::sql::cache::impl_cache_store!($store, $db);
        $crate::store::sql::replicas::impl_replica_store!($store, $db);
        $crate::store::sql::key_limits::impl_key_limit_store!($store, $db);
        $crate::store::sql::responses::impl_response_store!($store, $db);
        $crate::store::sql::approvals::impl_approval_store!($store, $db);
        $crate::store::sql::secrets::impl_secret_store!($store, $db);
        $crate::store::sql::audit::impl_audit_store!($store, $db);
        $crate::store::sql::api_keys::impl_api_key_store!($store, $db);
        $crate::store::sql::retention::impl_retention_store!($store, $db);
        $crate::store::sql::turns::impl_turn_store!($store, $db);
        $crate::store::sql::webhooks::impl_webhook_store!($store, $db);
        $crate::store::sql::push_configs::impl_push_config_store!($store, $db);
        $crate::store::sql::schedules::impl_schedule_store!($store, $db);
        $crate::store::sql::files::impl_file_store!($store, $db);

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            async fn ping(&self) -> Result<(), $crate::store::StoreError> {
                sqlx::query("SELECT 1").execute(&self.reader).await?;
                Ok(())
            }

            async fn close(&self) {
                self.writer.close().await;
                self.reader.close().await;
            }

            fn notification_url(&self) -> Option<&str> {
                self.listen_url()
            }

            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
        }
    };
}
pub(crate) use shared_store_impl;
