//! The tee between a session and its headend: numbers each event 1, 2, 3… (SPEC §4.2 ids),
//! queues it for the store without waiting (but for the bursts from a run's closing events,
//! `final_report` and `run.finished`, on: they are held and written with the run's end, and
//! shown only once it is recorded — the end of a run's log is never dropped, and whoever saw a
//! run end reads it ended), adds it to the run's in-memory log for followers in this
//! process, and passes it on in the same order to the client, unless that client has stopped
//! taking events: then the run follows the headend's `onDisconnect` (cancelled, or run on
//! without it). It must never let a client that does not read hold the session.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio_util::sync::CancellationToken;

use super::live::{LiveEvent, LiveRun};
use crate::agent::AgentEvent;
use crate::config::OnDisconnect;
use crate::store::{NewRunEvent, RunRecorder};
use crate::vocabulary::RunEvent;

/// The headend a run's events go to, and what to do when it stops taking them.
pub(super) struct Client {
    pub events: mpsc::Sender<RunEvent>,
    /// How long a full channel may stay full before the client counts as gone
    /// (`server.writeTimeoutSeconds`).
    pub write_timeout: Duration,
    pub on_disconnect: OnDisconnect,
    /// The run's abort: fired when a `cancel` client stalls; once fired (by anyone), a full
    /// channel is not waited on, so a cancelled run ends without its client's help.
    pub abort: CancellationToken,
}

impl Client {
    /// Passes `event` on; `false` once the client is gone (left, or stalled past the write
    /// timeout). The channel's room is tried first: only a full channel starts a timer.
    pub(super) async fn pass(&self, event: RunEvent) -> bool {
        let event = match self.events.try_send(event) {
            Ok(()) => return true,
            Err(TrySendError::Closed(_)) => return false,
            Err(TrySendError::Full(event)) => event,
        };
        let sent = tokio::select! {
            sent = tokio::time::timeout(self.write_timeout, self.events.send(event)) => sent,
            () = self.abort.cancelled() => return false,
        };
        match sent {
            Ok(sent) => sent.is_ok(),
            Err(_) => {
                let cancel = self.on_disconnect == OnDisconnect::Cancel;
                tracing::info!(
                    write_timeout_seconds = self.write_timeout.as_secs(),
                    cancel,
                    "the client took no events for the write timeout: treated as gone"
                );
                if cancel {
                    self.abort.cancel();
                }
                false
            }
        }
    }
}

/// Most events taken from the session at once; they are queued for the store as one item.
const BURST: usize = 64;

/// What the tee hands back when the session is done: the last seq, the client if it still takes
/// events, and the run's closing events, not yet passed to it: the run's end is recorded first
/// ([`Tail::release`]), so a client that reads the run once its stream ended finds it ended.
pub(super) struct Tail {
    pub last_seq: i64,
    pub client: Option<Client>,
    /// The closing events as the client gets them, …
    held: Vec<RunEvent>,
    /// … as followers in this process read them, …
    held_live: Vec<LiveEvent>,
    /// … and as the store keeps them: written with the run's end, in its transaction.
    pub held_records: Vec<NewRunEvent>,
}

impl Tail {
    /// Once the run's end is recorded: followers here and the client get the closing events;
    /// the client, if it still takes events.
    pub(super) async fn release(self, live: &LiveRun) -> Option<Client> {
        if !self.held_live.is_empty() {
            live.append(self.held_live);
        }
        let mut client = self.client;
        for event in self.held {
            if let Some(open) = &client
                && !open.pass(event).await
            {
                client = None;
            }
        }
        client
    }
}

/// Runs until the session drops its sink, numbering after `first_seq` (0 for a new run, the
/// last stored seq for a run resumed after a wait); hands back its [`Tail`] (a run that stops
/// to wait hands the client on to the store's events). A headend that stops listening (or stalls past the
/// write timeout) only stops getting events; they are still numbered and recorded. What the session emitted between two of its
/// waits (a run's start and first turn, or its answer, accounting and end) is taken at once and
/// queued for the store as one item.
/// Joins consecutive `output` (and `thinking`) deltas of one burst — events that were already
/// waiting together — into one, before they are numbered: fewer stored rows and client frames
/// for a fast upstream, no added wait for a slow one, and live and stored events stay the same.
/// A delta that replaces what came before (`replace`) starts a new event.
fn merge_queued_deltas(burst: &mut Vec<AgentEvent>) {
    if burst.len() < 2 {
        return;
    }
    let mut merged: Vec<AgentEvent> = Vec::with_capacity(burst.len());
    for event in burst.drain(..) {
        match (merged.last_mut(), event) {
            (Some(AgentEvent::Output(last)), AgentEvent::Output(next))
            | (Some(AgentEvent::Thinking(last)), AgentEvent::Thinking(next))
                if !next.replace =>
            {
                last.text.push_str(&next.text);
            }
            (_, event) => merged.push(event),
        }
    }
    *burst = merged;
}

pub(super) async fn tee(
    mut from_session: mpsc::Receiver<AgentEvent>,
    client: Client,
    recorder: &RunRecorder,
    live: &LiveRun,
    first_seq: i64,
) -> Tail {
    let run_id = live.run.id.clone();
    let mut listener = Some(client);
    let mut seq = first_seq;
    let mut burst = Vec::with_capacity(8);
    // The burst numbered: what the client gets, typed, with the text the store keeps.
    let mut numbered: Vec<RunEvent> = Vec::with_capacity(8);
    // From the first closing event on, events wait for the run's end to be recorded.
    let mut held: Vec<RunEvent> = Vec::new();
    let mut held_live: Vec<LiveEvent> = Vec::new();
    let mut held_records: Vec<NewRunEvent> = Vec::new();
    while from_session.recv_many(&mut burst, BURST).await > 0 {
        merge_queued_deltas(&mut burst);
        let ts = chrono::Utc::now();
        numbered.extend(burst.drain(..).map(|event| {
            seq += 1;
            RunEvent::new(seq, event)
        }));
        let followed: Vec<LiveEvent> = numbered
            .iter()
            .map(|event| LiveEvent {
                seq: event.seq,
                kind: event.kind(),
                data: event.data.clone(),
            })
            .collect();
        let mut records: Vec<_> = numbered
            .iter()
            .map(|event| NewRunEvent {
                run_id: run_id.clone(),
                seq: event.seq,
                event_type: event.kind().to_string(),
                data: event.data.clone(),
                ts,
            })
            .collect();
        // The burst that ends the run's log is written with the run's end, and only then
        // shown: a client (or a follower) that saw it end reads it ended.
        if !held.is_empty() || records.iter().any(NewRunEvent::is_closing) {
            held_records.append(&mut records);
            held_live.extend(followed);
            held.append(&mut numbered);
            continue;
        }
        recorder.events(records);
        live.append(followed);
        for event in numbered.drain(..) {
            if let Some(client) = &listener
                && !client.pass(event).await
            {
                listener = None;
            }
        }
    }
    Tail {
        last_seq: seq,
        client: listener,
        held,
        held_live,
        held_records,
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;
    use crate::agent::events::TextDelta;

    fn texts(events: &[AgentEvent]) -> Vec<(String, String)> {
        events
            .iter()
            .map(|e| match e {
                AgentEvent::Output(d) => ("output".into(), d.text.clone()),
                AgentEvent::Thinking(d) => ("thinking".into(), d.text.clone()),
                other => (other.kind().to_string(), String::new()),
            })
            .collect()
    }

    #[test]
    fn queued_deltas_of_a_kind_join_and_a_replacement_starts_anew() {
        let replacement = TextDelta {
            text: "C".into(),
            replace: true,
        };
        let mut burst = vec![
            AgentEvent::Thinking(TextDelta::new("t1")),
            AgentEvent::Thinking(TextDelta::new("t2")),
            AgentEvent::Output(TextDelta::new("a")),
            AgentEvent::Output(TextDelta::new("b")),
            AgentEvent::Output(replacement),
            AgentEvent::Output(TextDelta::new("d")),
        ];
        merge_queued_deltas(&mut burst);
        assert_eq!(
            texts(&burst),
            [
                ("thinking".to_string(), "t1t2".to_string()),
                ("output".into(), "ab".into()),
                ("output".into(), "Cd".into()),
            ]
        );
        assert!(matches!(&burst[2], AgentEvent::Output(d) if d.replace));
        let mut one = vec![AgentEvent::Output(TextDelta::new("x"))];
        merge_queued_deltas(&mut one);
        assert_eq!(one.len(), 1);
    }
}
