//! The runs API's event stream (SPEC §4.2), which the per-user chat streams too: every event as
//! it is stored — `id:` its seq,
//! `event:` its kind, `data:` its stored text — so a client that reconnects with
//! `Last-Event-ID` continues exactly where it stopped; following that fails ends the stream
//! with an `error` event saying why.

use std::sync::Arc;

use axum::response::Response;

use super::drive::{self, Events, Frame, OnLeave, StreamEnd, Translator};
use crate::config::OnDisconnect;
use crate::http::error::ApiError;
use crate::runtime::{RunHandle, Runtime};
use crate::vocabulary::RunEvent;

/// The runs API's frames of one run, from after seq `after`.
pub struct RunsTranslator {
    after: i64,
    finished: bool,
}

impl RunsTranslator {
    pub fn new(after: i64) -> Self {
        Self {
            after,
            finished: false,
        }
    }
}

impl Translator for RunsTranslator {
    fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        self.finished = event.is_run_finished();
        out.push(Frame::named(event.kind(), event.data.as_str()).with_id(event.seq));
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn end(&mut self, end: StreamEnd, out: &mut Vec<Frame>) {
        self.finished = true;
        if let StreamEnd::Failed(error) = end {
            let detail = serde_json::to_string(&ApiError::from(error).detail()).unwrap_or_default();
            out.push(Frame::named("error", detail).with_id(self.after + 1));
        }
    }
}

/// The events of a run this request started as SSE frames numbered like the stored ones, until
/// `run.finished`; a client that leaves cancels the run unless it asked the run to continue.
pub fn numbered_events(
    runtime: &Runtime,
    handle: RunHandle,
    on_disconnect: OnDisconnect,
) -> Response {
    let guard = (on_disconnect == OnDisconnect::Cancel).then(|| handle.abort_on_drop());
    drive::stream(
        runtime,
        Events::live(handle),
        RunsTranslator::new(0),
        OnLeave::cancel_with(guard),
    )
}

/// Stored events after `after`, then new ones as they are stored, until `run.finished`.
pub fn stored_events(runtime: &Arc<Runtime>, run_id: String, after: i64) -> Response {
    drive::stream(
        runtime,
        Events::followed(runtime, run_id, after),
        RunsTranslator::new(after),
        OnLeave::Continue,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::shared::goldens;

    #[test]
    fn every_stored_run_streams_as_its_golden_stored_events() {
        goldens::each("runs", || RunsTranslator::new(0));
    }
}
