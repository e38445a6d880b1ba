//! The tee between a session and its headend: numbers each event 1, 2, 3… (SPEC §4.2 ids),
//! queues it for the store without waiting, and passes it on in the same order.

use tokio::sync::mpsc;

use crate::agent::AgentEvent;
use crate::store::{NewRunEvent, RunRecorder};

/// Most events taken from the session at once; they are queued for the store as one item.
const BURST: usize = 64;

/// Runs until the session drops its sink. A headend that stops listening only stops getting
/// events; they are still numbered and recorded. What the session emitted between two of its
/// waits (a run's start and first turn, or its answer, accounting and end) is taken at once and
/// queued for the store as one item.
pub(super) async fn tee(
    mut from_session: mpsc::Receiver<AgentEvent>,
    to_headend: mpsc::Sender<AgentEvent>,
    recorder: &RunRecorder,
    run_id: String,
) {
    let mut listener = Some(to_headend);
    let mut seq = 0;
    let mut burst = Vec::with_capacity(8);
    while from_session.recv_many(&mut burst, BURST).await > 0 {
        let ts = chrono::Utc::now();
        let records = burst
            .iter()
            .map(|event| {
                seq += 1;
                NewRunEvent {
                    run_id: run_id.clone(),
                    seq,
                    event_type: event.kind().to_string(),
                    data: event.data(),
                    ts,
                }
            })
            .collect();
        recorder.events(records);
        for event in burst.drain(..) {
            if let Some(sender) = &listener
                && sender.send(event).await.is_err()
            {
                listener = None;
            }
        }
    }
}
