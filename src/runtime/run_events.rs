//! The tee between a session and its headend: numbers each event 1, 2, 3… (SPEC §4.2 ids),
//! queues it for the store without waiting, adds it to the run's in-memory log for followers in
//! this process, and passes it on in the same order.

use tokio::sync::mpsc;

use super::live::{LiveEvent, LiveRun};
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
    live: &LiveRun,
) {
    let run_id = live.run.id.clone();
    let mut listener = Some(to_headend);
    let mut seq = 0;
    let mut burst = Vec::with_capacity(8);
    while from_session.recv_many(&mut burst, BURST).await > 0 {
        let ts = chrono::Utc::now();
        let mut followed = Vec::with_capacity(burst.len());
        let records = burst
            .iter()
            .map(|event| {
                seq += 1;
                let data = event.data();
                followed.push(LiveEvent {
                    seq,
                    kind: event.kind(),
                    data: data.clone(),
                });
                NewRunEvent {
                    run_id: run_id.clone(),
                    seq,
                    event_type: event.kind().to_string(),
                    data,
                    ts,
                }
            })
            .collect();
        recorder.events(records);
        live.append(followed);
        for event in burst.drain(..) {
            if let Some(sender) = &listener
                && sender.send(event).await.is_err()
            {
                listener = None;
            }
        }
    }
}
