//! Wake-ups from other replicas through PostgreSQL `LISTEN/NOTIFY`: the store notifies a run's
//! id when its events or end are written (followers here of runs elsewhere read what they have
//! not seen), and `cancel <mode> <run id>` when another replica asks this one's run to stop.
//!
//! Notifications only wake; the store is the truth. When the listening connection drops (and
//! notifications may have been missed), every follower is woken and pending cancels are read
//! from the store, so a lost notification costs latency, never an event or a cancel.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::Runtime;
use crate::store::{RUN_CONTROL_CHANNEL, RUN_EVENTS_CHANNEL};

/// Pause before connecting again after the listener could not connect.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// Listens until `stop`, connecting again whenever the connection is lost.
pub(super) async fn listen(runtime: Arc<Runtime>, url: String, stop: CancellationToken) {
    loop {
        let listener = tokio::select! {
            () = stop.cancelled() => return,
            listener = connect(&url) => listener,
        };
        match listener {
            Ok(listener) => {
                // Whatever was notified while we were not listening.
                runtime.caught_up_after_silence().await;
                let lost = tokio::select! {
                    () = stop.cancelled() => return,
                    lost = receive(&runtime, listener) => lost,
                };
                warn!(error = %lost, "lost the store's notifications; listening again");
            }
            Err(error) => {
                warn!(%error, "cannot listen for the store's notifications; retrying");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(RECONNECT_PAUSE) => {}
                }
            }
        }
    }
}

async fn connect(url: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect(url).await?;
    listener
        .listen_all([RUN_EVENTS_CHANNEL, RUN_CONTROL_CHANNEL])
        .await?;
    Ok(listener)
}

/// Dispatches notifications until the connection fails; returns why.
async fn receive(runtime: &Runtime, mut listener: PgListener) -> sqlx::Error {
    loop {
        match listener.try_recv().await {
            Ok(Some(notification)) => {
                runtime.notified(notification.channel(), notification.payload())
            }
            // The connection dropped and was made again: notifications may have been missed.
            Ok(None) => runtime.caught_up_after_silence().await,
            Err(error) => return error,
        }
    }
}

impl Runtime {
    fn notified(&self, channel: &str, payload: &str) {
        if channel == RUN_EVENTS_CHANNEL {
            self.live.wake(payload);
        } else if channel == RUN_CONTROL_CHANNEL {
            match parse_control(payload) {
                Some(("cancel", mode, run_id)) => self.cancel_here(run_id, mode),
                _ => debug!(payload, "ignored an unknown control notification"),
            }
        }
    }

    async fn caught_up_after_silence(&self) {
        self.live.wake_all();
        self.take_cancels().await;
    }
}

/// `verb mode run_id` → its three words.
fn parse_control(payload: &str) -> Option<(&str, &str, &str)> {
    let mut words = payload.splitn(3, ' ');
    Some((words.next()?, words.next()?, words.next()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_payloads_are_three_words() {
        assert_eq!(
            parse_control("cancel abort 0192-x"),
            Some(("cancel", "abort", "0192-x"))
        );
        assert_eq!(parse_control("cancel abort"), None);
    }
}
