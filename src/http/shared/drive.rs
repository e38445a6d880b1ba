//! The one driver of a run's events to a headend: where the events come from (the run this
//! request started, or a run followed from the store on any replica), feeding them to the
//! headend's [`Translator`] (a pure, synchronous event-in, frames-out value), streaming the
//! frames as server-sent events (keep-alive and the open-stream gauge by [`sse_response`]),
//! collecting a whole answer, and the disconnect policy: a client that leaves cancels the run
//! when the headend hands over the run's abort guard, unless the stream ended where the run
//! waits for approvals (the run then waits for its decision).
//!
//! A headend is its wire types, its handlers (wire → [`RunSubmission`]) and its translator;
//! none of them writes a stream loop.
//!
//! [`RunSubmission`]: crate::runtime::RunSubmission

use std::borrow::Cow;
use std::convert::Infallible;
use std::time::Duration;

use axum::response::Response;
use axum::response::sse::Event;
use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::DropGuard;

use crate::http::sse::sse_response;
use crate::runtime::{FollowError, RunHandle, Runtime};
use crate::vocabulary::RunEvent;

/// One server-sent event as a translator writes it: plain data, so a translator is tested (and
/// its output snapshotted) without a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The SSE `id:` (the runs API numbers its frames with the events' seq).
    pub id: Option<i64>,
    /// The SSE `event:` name, when the protocol names its frames.
    pub event: Option<Cow<'static, str>>,
    pub data: String,
}

impl Frame {
    /// A `data:`-only frame.
    pub fn data(data: impl Into<String>) -> Self {
        Self {
            id: None,
            event: None,
            data: data.into(),
        }
    }

    /// A frame with an `event:` name.
    pub fn named(event: impl Into<Cow<'static, str>>, data: impl Into<String>) -> Self {
        Self {
            id: None,
            event: Some(event.into()),
            data: data.into(),
        }
    }

    /// The frame numbered `id`.
    pub fn with_id(mut self, id: i64) -> Self {
        self.id = Some(id);
        self
    }

    /// The frame as axum writes it.
    pub fn into_sse(self) -> Event {
        let mut event = Event::default();
        if let Some(id) = self.id {
            event = event.id(id.to_string());
        }
        if let Some(name) = self.event {
            event = event.event(name);
        }
        event.data(self.data)
    }

    /// The frame as it goes on the wire (for snapshots).
    #[cfg(test)]
    pub fn to_wire(&self) -> String {
        let mut text = String::new();
        if let Some(id) = self.id {
            text.push_str(&format!("id: {id}\n"));
        }
        if let Some(name) = &self.event {
            text.push_str(&format!("event: {name}\n"));
        }
        for line in self.data.split('\n') {
            text.push_str(&format!("data: {line}\n"));
        }
        text
    }
}

/// Why a stream ended before its translator saw the run's end.
#[derive(Debug)]
pub enum StreamEnd {
    /// The events stopped: where the run waits for approvals (a stretch of it ends there), or
    /// because its session ended without `run.finished`.
    Stopped,
    /// Following the run failed (the store, the server shutting down).
    Failed(FollowError),
}

/// A headend's translation of a run's events into its frames: synchronous and without I/O.
pub trait Translator: Send + 'static {
    /// The frames before the first event.
    fn open(&mut self, _out: &mut Vec<Frame>) {}

    /// The frames one event adds.
    fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>);

    /// Whether the stream's last frame was written: no event is read after it.
    fn is_finished(&self) -> bool;

    /// The frames that end a stream whose events ended before [`Self::is_finished`].
    fn end(&mut self, end: StreamEnd, out: &mut Vec<Frame>);
}

/// Where a run's events come from.
pub enum Events {
    /// The run this request started, its events straight from its session (and, past a wait
    /// for approvals, from wherever it resumed).
    Live(mpsc::Receiver<RunEvent>),
    /// A run followed from after a seq, on any replica ([`Runtime::follow_run_events`] or a
    /// stretch of it, [`Runtime::follow_until_wait`]).
    Followed(BoxStream<'static, Result<RunEvent, FollowError>>),
}

impl Events {
    /// The events of the run `handle` started (its result is left to the session).
    pub fn live(handle: RunHandle) -> Self {
        Self::Live(handle.events)
    }

    /// The run's events after `after`, until it ends.
    pub fn followed(runtime: &std::sync::Arc<Runtime>, run_id: String, after: i64) -> Self {
        Self::Followed(runtime.follow_run_events(run_id, after).boxed())
    }

    /// The run's events after `after`, until it ends or waits for approvals.
    pub fn stretch(runtime: &std::sync::Arc<Runtime>, run_id: String, after: i64) -> Self {
        Self::Followed(runtime.follow_until_wait(run_id, after).boxed())
    }

    async fn next(&mut self) -> Option<Result<RunEvent, FollowError>> {
        match self {
            Self::Live(events) => events.recv().await.map(Ok),
            Self::Followed(events) => events.next().await,
        }
    }
}

/// What a stream does with the run when its client leaves.
pub enum OnLeave {
    /// The run goes on.
    Continue,
    /// The run is cancelled (the guard is the run's abort), unless the stream ended where the
    /// run waits for approvals.
    Cancel(DropGuard),
}

impl OnLeave {
    /// Cancels with `guard` when there is one.
    pub fn cancel_with(guard: Option<DropGuard>) -> Self {
        guard.map_or(Self::Continue, Self::Cancel)
    }

    /// The run is left to wait for its decisions: leaving no longer cancels it.
    fn disarm(&mut self) {
        if let Self::Cancel(guard) = std::mem::replace(self, Self::Continue) {
            drop(guard.disarm());
        }
    }
}

/// The frames of `events` through `translator`, ending with its end frames.
pub fn frames<T: Translator>(
    mut events: Events,
    mut translator: T,
    on_leave: OnLeave,
) -> impl Stream<Item = Frame> + Send + 'static {
    async_stream::stream! {
        // Dropped with the stream: a client that leaves cancels the run if it should.
        let mut on_leave = on_leave;
        let mut out = Vec::with_capacity(4);
        translator.open(&mut out);
        for frame in out.drain(..) {
            yield frame;
        }
        let mut waiting = false;
        let end = loop {
            match events.next().await {
                Some(Ok(event)) => {
                    waiting = event.is_approval_requested();
                    translator.event(&event, &mut out);
                    for frame in out.drain(..) {
                        yield frame;
                    }
                    if translator.is_finished() {
                        return;
                    }
                }
                Some(Err(error)) => break StreamEnd::Failed(error),
                None => break StreamEnd::Stopped,
            }
        };
        if waiting && matches!(end, StreamEnd::Stopped) {
            on_leave.disarm();
        }
        translator.end(end, &mut out);
        for frame in out.drain(..) {
            yield frame;
        }
    }
}

/// `events` through `translator` as a server-sent-event response.
pub fn stream<T: Translator>(
    runtime: &Runtime,
    events: Events,
    translator: T,
    on_leave: OnLeave,
) -> Response {
    sse_response(runtime, sse_events(events, translator, on_leave))
}

/// The frames as axum's server-sent events.
pub fn sse_events<T: Translator>(
    events: Events,
    translator: T,
    on_leave: OnLeave,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    frames(events, translator, on_leave).map(|frame| Ok(frame.into_sse()))
}

/// Feeds `translator` the events until the stream ends (its frames are let go), for a
/// headend that answers with what the events built; with `quiet`, stops once no event came
/// for that long (what there is now).
pub async fn collect<T: Translator>(
    mut events: Events,
    mut translator: T,
    quiet: Option<Duration>,
) -> T {
    let mut out = Vec::new();
    translator.open(&mut out);
    loop {
        out.clear();
        let next = match quiet {
            Some(quiet) => match tokio::time::timeout(quiet, events.next()).await {
                Ok(next) => next,
                Err(_) => return translator,
            },
            None => events.next().await,
        };
        match next {
            Some(Ok(event)) => translator.event(&event, &mut out),
            Some(Err(error)) => translator.end(StreamEnd::Failed(error), &mut out),
            None => {
                translator.end(StreamEnd::Stopped, &mut out);
                return translator;
            }
        }
        if translator.is_finished() {
            return translator;
        }
    }
}

/// Waits for the run's `run.finished` event (any replica); `Err` when following failed.
pub async fn until_finished(mut events: Events) -> Result<(), FollowError> {
    while let Some(event) = events.next().await {
        if event?.is_run_finished() {
            break;
        }
    }
    Ok(())
}

/// The translation of a whole list of events (a stored run, a golden test's fixture), with the
/// end frames of a stream that stops after them.
#[cfg(test)]
pub fn translate_all<T: Translator>(translator: &mut T, events: &[RunEvent]) -> Vec<Frame> {
    let mut out = Vec::new();
    translator.open(&mut out);
    for event in events {
        if translator.is_finished() {
            break;
        }
        translator.event(event, &mut out);
    }
    if !translator.is_finished() {
        translator.end(StreamEnd::Stopped, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentEvent;
    use crate::vocabulary::events::fixtures::event;
    use serde_json::json;

    /// Numbers each event as its data says, and ends with a frame saying how.
    #[derive(Default)]
    struct Echo {
        finished: bool,
    }

    impl Translator for Echo {
        fn open(&mut self, out: &mut Vec<Frame>) {
            out.push(Frame::named("open", "{}"));
        }

        fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
            self.finished = event.is_run_finished();
            out.push(Frame::named(event.kind(), event.data.as_str()).with_id(event.seq));
        }

        fn is_finished(&self) -> bool {
            self.finished
        }

        fn end(&mut self, end: StreamEnd, out: &mut Vec<Frame>) {
            out.push(Frame::data(format!("{end:?}")));
        }
    }

    fn numbered(events: Vec<AgentEvent>) -> Vec<RunEvent> {
        (1..)
            .zip(events)
            .map(|(seq, e)| RunEvent::new(seq, e))
            .collect()
    }

    #[test]
    fn a_stream_ends_at_run_finished_or_with_the_end_frames() {
        let finished = numbered(vec![
            event("output", json!({"text": "a\nb"})),
            event("run.finished", json!({})),
            event("output", json!({"text": "late"})),
        ]);
        let wire: Vec<String> = translate_all(&mut Echo::default(), &finished)
            .iter()
            .map(Frame::to_wire)
            .collect();
        assert_eq!(wire.len(), 3, "{wire:?}");
        assert_eq!(
            wire[1],
            "id: 1\nevent: output\ndata: {\"text\":\"a\\nb\"}\n"
        );
        let stopped = numbered(vec![event("output", json!({"text": "a"}))]);
        let frames = translate_all(&mut Echo::default(), &stopped);
        assert_eq!(frames.last(), Some(&Frame::data("Stopped")));
    }

    #[tokio::test]
    async fn live_events_are_driven_to_the_end_and_a_wait_disarms_the_cancel() {
        let (sender, receiver) = mpsc::channel(8);
        for e in numbered(vec![event(
            "tool.approval_requested",
            json!({"call_id": "c"}),
        )]) {
            sender.send(e).await.expect("sent");
        }
        drop(sender);
        let abort = tokio_util::sync::CancellationToken::new();
        let on_leave = OnLeave::Cancel(abort.clone().drop_guard());
        let frames: Vec<Frame> = frames(Events::Live(receiver), Echo::default(), on_leave)
            .collect()
            .await;
        assert_eq!(frames.len(), 3, "{frames:?}");
        assert!(
            !abort.is_cancelled(),
            "a stream that ends at a wait leaves the run waiting"
        );
    }
}
