//! Statements and rows of `run_events`, and how events are packed into rows: every event of a
//! run that reaches one write (a recorder batch) goes into one row, so a streamed answer costs
//! the store a row per batch instead of a row per token. A row of one event keeps the plain
//! layout (`type`, `data`, `last_seq` NULL); a row of several has `type` `''`, `seq` and
//! `last_seq` the first and last of its events, and `data` a JSON array of
//! `[seq, type, ts in µs, data]`. Readers expand rows back into the events as numbered, so a
//! replay is event for event what a live client saw (migration 0011).

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use sqlx::types::Json;

use crate::store::{JsonText, NewRunEvent, RunEventRecord};

/// Followed by the VALUES rows; a repeated `(run_id, seq)` is skipped so a retry cannot duplicate.
pub const INSERT_EVENTS: &str = "INSERT INTO run_events (run_id, seq, last_seq, type, data, ts) ";
pub const INSERT_EVENTS_END: &str = " ON CONFLICT (run_id, seq) DO NOTHING";

/// The most events one row holds, and the widest seq range it covers: a reader finds the row
/// holding seq `n` among the rows starting after `n - MAX_ROW_SPAN`, on the primary key.
pub const MAX_ROW_SPAN: i64 = 64;

/// Event data a packed row stops taking more events at, so that packing keeps rows (and the
/// statements of [`super::statements`]) as small as the one-event rows they replace.
pub const ROW_DATA_BYTES: usize = 4 * 1024;

/// `type` of a row holding several events.
const PACKED: &str = "";

/// Rows holding an event after `$2`: those starting after it, and one that starts at most
/// `MAX_ROW_SPAN` before it and reaches past it. Every row returned holds at least one such
/// event, so `$3` rows hold at least `$3` events (or all there are).
pub const LIST_EVENTS: &str = "SELECT run_id, seq, last_seq, type, data, ts FROM run_events \
     WHERE run_id = $1 AND seq > $2 - 64 AND COALESCE(last_seq, seq) > $2 ORDER BY seq LIMIT $3";

/// The seq of a run's last stored event: the end of the row that starts last, found among the
/// rows that start within a row's span of it (an index range of at most 64 rows, however long
/// the run).
pub const LAST_EVENT_SEQ: &str = "SELECT MAX(COALESCE(last_seq, seq)) FROM run_events \
     WHERE run_id = $1 AND seq > (SELECT MAX(seq) FROM run_events WHERE run_id = $1) - 64";

/// One row to insert: a single event, or several of one run packed.
pub struct StoredRow<'a> {
    pub run_id: &'a str,
    pub seq: i64,
    pub last_seq: Option<i64>,
    pub event_type: &'a str,
    pub data: JsonText,
    pub ts: DateTime<Utc>,
}

/// The rows for `events`: each run's events in seq order, packed `MAX_ROW_SPAN` seqs and
/// `ROW_DATA_BYTES` of data at most per row (a larger event has a row of its own); runs in the
/// order they first appear.
pub fn rows_of(events: &[NewRunEvent]) -> Vec<StoredRow<'_>> {
    let mut runs: Vec<Vec<&NewRunEvent>> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for event in events {
        let slot = *index.entry(event.run_id.as_str()).or_insert_with(|| {
            runs.push(Vec::new());
            runs.len() - 1
        });
        runs[slot].push(event);
    }
    let mut rows = Vec::with_capacity(runs.len());
    for mut run in runs {
        run.sort_by_key(|event| event.seq);
        let mut rest = run.as_slice();
        while let Some(first) = rest.first() {
            let mut bytes = 0;
            let len = rest
                .iter()
                .take_while(|event| {
                    let fits = event.seq - first.seq < MAX_ROW_SPAN
                        && (bytes == 0 || bytes + event.data.as_str().len() <= ROW_DATA_BYTES);
                    bytes += event.data.as_str().len();
                    fits
                })
                .count();
            let (packed, after) = rest.split_at(len);
            rows.push(row_of(packed));
            rest = after;
        }
    }
    rows
}

/// One row for `events` (one run's, in seq order, at least one).
fn row_of<'a>(events: &[&'a NewRunEvent]) -> StoredRow<'a> {
    let first = events[0];
    if let [only] = events {
        return StoredRow {
            run_id: &only.run_id,
            seq: only.seq,
            last_seq: None,
            event_type: &only.event_type,
            data: only.data.clone(),
            ts: only.ts,
        };
    }
    let packed: Vec<(i64, &str, i64, &JsonText)> = events
        .iter()
        .map(|e| {
            (
                e.seq,
                e.event_type.as_str(),
                e.ts.timestamp_micros(),
                &e.data,
            )
        })
        .collect();
    StoredRow {
        run_id: &first.run_id,
        seq: first.seq,
        last_seq: events.last().map(|last| last.seq),
        event_type: PACKED,
        data: JsonText::of(&packed),
        ts: first.ts,
    }
}

/// `rows` cut into INSERT statements of at most `max_rows` rows and `STATEMENT_DATA_BYTES` of
/// event data (see [`super::statements`]).
pub fn statements<'r, 'a>(
    rows: &'r [StoredRow<'a>],
    max_rows: usize,
) -> impl Iterator<Item = &'r [StoredRow<'a>]> {
    super::statements(rows, max_rows, |row| row.data.as_str().len())
}

#[derive(sqlx::FromRow)]
pub struct EventRow {
    run_id: String,
    seq: i64,
    last_seq: Option<i64>,
    #[sqlx(rename = "type")]
    event_type: String,
    data: Json<JsonText>,
    ts: DateTime<Utc>,
}

/// The events of `rows` (in seq order) after `after`, each once, at most `limit`. A packed row
/// whose data does not read back as events is an error naming the run and seq.
pub fn expand(
    rows: Vec<EventRow>,
    after: i64,
    limit: usize,
) -> Result<Vec<RunEventRecord>, crate::store::StoreError> {
    let mut events: Vec<RunEventRecord> = Vec::with_capacity(limit.min(rows.len() * 4));
    let mut last = after;
    let mut keep = |event: RunEventRecord, events: &mut Vec<RunEventRecord>| {
        if event.seq > last && events.len() < limit {
            last = event.seq;
            events.push(event);
        }
    };
    for row in rows {
        if row.last_seq.is_none() || row.event_type != PACKED {
            keep(
                RunEventRecord {
                    run_id: row.run_id,
                    seq: row.seq,
                    event_type: row.event_type,
                    data: row.data.0,
                    ts: row.ts,
                },
                &mut events,
            );
            continue;
        }
        let packed: Vec<(i64, String, i64, Box<RawValue>)> =
            serde_json::from_str(row.data.0.as_str()).map_err(|error| {
                crate::store::StoreError::Query(sqlx::Error::Decode(
                    format!("run {} events from seq {}: {error}", row.run_id, row.seq).into(),
                ))
            })?;
        for (seq, event_type, micros, data) in packed {
            keep(
                RunEventRecord {
                    run_id: row.run_id.clone(),
                    seq,
                    event_type,
                    data: JsonText::from(data),
                    ts: DateTime::from_timestamp_micros(micros).unwrap_or(row.ts),
                },
                &mut events,
            );
        }
    }
    Ok(events)
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
                sql::expand(
                    rows,
                    after_seq,
                    usize::try_from(limit).unwrap_or(usize::MAX),
                )
            }

            async fn last_run_event_seq(
                &self,
                run_id: &str,
            ) -> Result<i64, $crate::store::StoreError> {
                use $crate::store::sql::run_events as sql;
                let last: Option<i64> = sqlx::query_scalar(sql::LAST_EVENT_SEQ)
                    .bind(run_id)
                    .fetch_one(&self.reader)
                    .await?;
                Ok(last.unwrap_or(0))
            }
        }
    };
}
pub(crate) use impl_run_event_store;

#[cfg(test)]
mod tests {
    use super::*;

    fn event(run_id: &str, seq: i64) -> NewRunEvent {
        NewRunEvent {
            run_id: run_id.into(),
            seq,
            event_type: "output".into(),
            data: JsonText::of(&serde_json::json!({"text": seq.to_string()})),
            ts: DateTime::from_timestamp_micros(seq).unwrap_or_default(),
        }
    }

    #[test]
    fn a_runs_events_in_one_write_share_rows_of_at_most_the_span() {
        let mut events = Vec::new();
        for seq in 1..=150 {
            events.push(event("x", seq));
            if seq <= 2 {
                events.push(event("y", seq));
            }
        }
        events.push(event("z", 9));
        let rows = rows_of(&events);
        let shape: Vec<(&str, i64, Option<i64>)> = rows
            .iter()
            .map(|row| (row.run_id, row.seq, row.last_seq))
            .collect();
        assert_eq!(
            shape,
            [
                ("x", 1, Some(64)),
                ("x", 65, Some(128)),
                ("x", 129, Some(150)),
                ("y", 1, Some(2)),
                ("z", 9, None),
            ]
        );
        assert_eq!(rows[3].event_type, PACKED);
        assert_eq!(rows[4].event_type, "output");
        assert!(
            rows[3]
                .data
                .as_str()
                .starts_with(r#"[[1,"output",1,{"text":"1"}]"#)
        );
    }

    /// Neither a packed row nor a statement grows past its byte limit (PostgreSQL's delayed
    /// ACK stall); an event larger than a row's limit still gets a row of its own.
    #[test]
    fn rows_and_statements_stay_under_their_byte_limits() {
        let text = "x".repeat(1000);
        let mut events: Vec<NewRunEvent> = (1..=40)
            .map(|seq| NewRunEvent {
                data: JsonText::of(&serde_json::json!({ "text": text })),
                ..event("x", seq)
            })
            .collect();
        events.push(NewRunEvent {
            data: JsonText::of(&serde_json::json!({ "text": "y".repeat(20_000) })),
            ..event("x", 41)
        });
        let rows = rows_of(&events);
        let spans: Vec<(i64, Option<i64>)> = rows.iter().map(|r| (r.seq, r.last_seq)).collect();
        assert_eq!(
            spans[..2],
            [(1, Some(4)), (5, Some(8))],
            "four events of ~1 KB per 4 KiB row"
        );
        assert_eq!(spans.last(), Some(&(41, None)));
        let packed = &rows[..rows.len() - 1];
        assert!(
            packed
                .iter()
                .all(|r| r.data.as_str().len() <= ROW_DATA_BYTES + 200)
        );
        let sizes: Vec<usize> = statements(&rows, 100).map(<[StoredRow]>::len).collect();
        assert_eq!(sizes.iter().sum::<usize>(), rows.len());
        assert!(sizes.iter().all(|&n| n <= 2), "{sizes:?}");
        assert_eq!(sizes.last(), Some(&1));
    }
}
