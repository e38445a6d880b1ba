//! The runs API's translator (SPEC §4.2): every event as it is stored — `id:` its seq,
//! `event:` its kind, `data:` its stored text — so a client that reconnects with
//! `Last-Event-ID` continues exactly where it stopped; following that fails ends the stream
//! with an `error` event saying why.

use crate::http::error::ApiError;
use crate::http::shared::drive::{Frame, StreamEnd, Translator};
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::shared::goldens;

    #[test]
    fn every_stored_run_streams_as_its_golden_stored_events() {
        goldens::each("runs", || RunsTranslator::new(0));
    }
}
