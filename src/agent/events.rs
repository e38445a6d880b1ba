//! The events a session emits while it runs (SPEC §4.2), and the sink they go through.
//!
//! Every headend turns these into its own wire format; the store persists them for replay.
//! The session never blocks on a consumer that went away: a closed sink drops events.

use tokio::sync::mpsc;

pub use crate::vocabulary::events::*;

/// Where a session sends its events. Cloneable; a sink with no receiver discards.
#[derive(Debug, Clone, Default)]
pub struct EventSink {
    sender: Option<mpsc::Sender<AgentEvent>>,
}

impl EventSink {
    /// A sink and the receiver of its events; `capacity` bounds memory per run.
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<AgentEvent>) {
        let (sender, receiver) = mpsc::channel(capacity);
        (
            Self {
                sender: Some(sender),
            },
            receiver,
        )
    }

    /// A sink that discards everything (the result still carries it all).
    pub fn discard() -> Self {
        Self { sender: None }
    }

    pub async fn emit(&self, event: AgentEvent) {
        if let Some(sender) = &self.sender {
            // A closed receiver means nobody listens any more; the result still has everything.
            let _ = sender.send(event).await;
        }
    }
}
