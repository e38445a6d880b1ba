//! Statements and rows of `run_events`.

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use crate::store::{JsonText, RunEventRecord};

/// Followed by the VALUES rows; a repeated `(run_id, seq)` is skipped so a retry cannot duplicate.
pub const INSERT_EVENTS: &str = "INSERT INTO run_events (run_id, seq, type, data, ts) ";
pub const INSERT_EVENTS_END: &str = " ON CONFLICT (run_id, seq) DO NOTHING";

pub const LIST_EVENTS: &str = "SELECT run_id, seq, type, data, ts FROM run_events \
     WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3";

#[derive(sqlx::FromRow)]
pub struct EventRow {
    run_id: String,
    seq: i64,
    #[sqlx(rename = "type")]
    event_type: String,
    data: Json<JsonText>,
    ts: DateTime<Utc>,
}

impl From<EventRow> for RunEventRecord {
    fn from(row: EventRow) -> Self {
        Self {
            run_id: row.run_id,
            seq: row.seq,
            event_type: row.event_type,
            data: row.data.0,
            ts: row.ts,
        }
    }
}

/// Implements [`RunEventStore`](crate::store::RunEventStore) for a backend.
macro_rules! impl_run_event_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::RunEventStore for $store {
            async fn append_run_events(
                &self,
                events: &[$crate::store::NewRunEvent],
            ) -> Result<(), $crate::store::StoreError> {
                if events.is_empty() {
                    return Ok(());
                }
                let mut tx = self.begin_write().await?;
                Self::insert_event_rows(&mut tx, events).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn list_run_events(
                &self,
                run_id: &str,
                after_seq: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::RunEventRecord>, $crate::store::StoreError> {
                use $crate::store::sql::run_events as sql;
                let limit = $crate::store::check_page_size(limit)?;
                let rows = sqlx::query_as::<_, sql::EventRow>(sql::LIST_EVENTS)
                    .bind(run_id)
                    .bind(after_seq)
                    .bind(limit)
                    .fetch_all(&self.reader)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }
        }
    };
}
pub(crate) use impl_run_event_store;
