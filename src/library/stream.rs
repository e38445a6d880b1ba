//! [`AgentStream`]: one run's events as they happen, then its result. The run is driven by
//! whoever awaits the stream (no task is spawned), so dropping it stops the run.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::sync::mpsc;

use super::Observer;
use crate::agent::{AgentEvent, AgentResult};

type RunFuture = Pin<Box<dyn Future<Output = AgentResult> + Send>>;

/// The events of one run of an [`super::Agent`]. It is a [`Stream`] of [`AgentEvent`]s (also
/// [`AgentStream::next_event`]); once it ends, [`AgentStream::result`] gives the run's result.
pub struct AgentStream {
    run: Option<RunFuture>,
    result: Option<AgentResult>,
    events: mpsc::Receiver<AgentEvent>,
    observer: Option<Arc<dyn Observer>>,
}

impl AgentStream {
    pub(super) fn new(
        run: RunFuture,
        events: mpsc::Receiver<AgentEvent>,
        observer: Option<Arc<dyn Observer>>,
    ) -> Self {
        Self {
            run: Some(run),
            result: None,
            events,
            observer,
        }
    }

    /// The next event, or `None` when the run has ended and every event was taken.
    pub async fn next_event(&mut self) -> Option<AgentEvent> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    /// The run's result: the rest of the run is driven (its events passed to the observer
    /// only) if the stream was not read to its end.
    pub async fn result(mut self) -> AgentResult {
        while self.next_event().await.is_some() {}
        match self.result.take() {
            Some(result) => result,
            // Unreachable by construction: the stream ends only after the run did.
            None => AgentResult::ended_without_session(
                "",
                crate::vocabulary::ExitReason::Cancelled,
                "the run did not finish".into(),
                0,
            ),
        }
    }

    /// Events first; while none waits, the run makes progress. The stream ends when the run
    /// has finished and its session (the only sender) is gone with every event taken.
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        loop {
            if let Poll::Ready(event) = self.events.poll_recv(cx) {
                if let (Some(event), Some(observer)) = (&event, &self.observer) {
                    observer.on_event(event);
                }
                return Poll::Ready(event);
            }
            let Some(run) = self.run.as_mut() else {
                return Poll::Pending;
            };
            match run.as_mut().poll(cx) {
                Poll::Ready(result) => {
                    self.result = Some(result);
                    self.run = None;
                    // The session is dropped with its future: poll the receiver again, which
                    // now ends after the last event.
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Stream for AgentStream {
    type Item = AgentEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.get_mut().poll_event(cx)
    }
}
