//! The tee between a session and its headend: numbers each event 1, 2, 3… (SPEC §4.2 ids),
//! queues it for the store without waiting, and passes it on in the same order.

use tokio::sync::mpsc;

use crate::agent::AgentEvent;
use crate::store::{NewRunEvent, RunRecorder};

/// Runs until the session drops its sink. A headend that stops listening only stops getting
/// events; they are still numbered and recorded.
pub(super) async fn tee(
    mut from_session: mpsc::Receiver<AgentEvent>,
    to_headend: mpsc::Sender<AgentEvent>,
    recorder: &RunRecorder,
    run_id: String,
) {
    let mut listener = Some(to_headend);
    let mut seq = 0;
    while let Some(event) = from_session.recv().await {
        seq += 1;
        recorder.event(NewRunEvent {
            run_id: run_id.clone(),
            seq,
            event_type: event.kind().to_string(),
            data: event.data(),
            ts: chrono::Utc::now(),
        });
        if let Some(sender) = &listener
            && sender.send(event).await.is_err()
        {
            listener = None;
        }
    }
}
