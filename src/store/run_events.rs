//! Run events as stored (SPEC §4.2): every event a run emitted, numbered 1, 2, 3… per run, so a
//! client can replay a stream and resume it after the `Last-Event-ID` it saw.

use super::{JsonText, StoreError};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// An event to append; `seq` is assigned by the runtime in emission order.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRunEvent {
    pub run_id: String,
    pub seq: i64,
    /// The SSE `event:` name (`run.started`, `output`, …).
    pub event_type: String,
    /// Serialized once, when the event is recorded.
    pub data: JsonText,
    pub ts: DateTime<Utc>,
}

/// A stored event; the same fields as it was appended with.
pub type RunEventRecord = NewRunEvent;

/// The events that end a run's log: its `final_report` and `run.finished`. Without them a
/// replay has no end, so they are kept, like run rows, until the store takes them.
pub const CLOSING_EVENTS: [&str; 2] = ["final_report", "run.finished"];

impl NewRunEvent {
    /// Whether this is one of the [`CLOSING_EVENTS`].
    pub fn is_closing(&self) -> bool {
        CLOSING_EVENTS.contains(&self.event_type.as_str())
    }
}

#[async_trait]
pub trait RunEventStore: Send + Sync {
    /// Appends a batch in one transaction. Re-appending an existing `(run_id, seq)` is a no-op,
    /// so a batch retried after an unclear failure is not duplicated.
    async fn append_run_events(&self, events: &[NewRunEvent]) -> Result<(), StoreError>;
    /// The run's events with seq greater than `after_seq`, in seq order, `limit` (1..=1000) at a
    /// time.
    async fn list_run_events(
        &self,
        run_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<RunEventRecord>, StoreError>;
    /// The seq of the run's last stored event; 0 when none is stored.
    async fn last_run_event_seq(&self, run_id: &str) -> Result<i64, StoreError>;
}
