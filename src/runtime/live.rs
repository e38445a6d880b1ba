//! What this process knows of runs beyond the store: the runs it is running, each with its
//! controls and every event it has numbered so far (so a follower here gets the replay and then
//! live events straight from memory, in order, without polling or flushing the store), and the
//! followers waiting for runs executing on other replicas, woken by the store's notifications.
//!
//! A run stays here from its start until its end is written to the store; from then on the store
//! holds everything a follower needs. A run being resumed after a wait for approvals has its
//! controls here from before it is taken from the store, so no cancel falls between the take
//! and the session's start.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::agent::RunControl;
use crate::store::{JsonText, NewRun};

/// One numbered event, as followers read it.
#[derive(Debug, Clone)]
pub struct LiveEvent {
    pub seq: i64,
    pub kind: &'static str,
    pub data: JsonText,
}

/// A run this process is running (or has just ended and is still writing).
pub struct LiveRun {
    pub run: NewRun,
    pub control: RunControl,
    events: Mutex<Vec<LiveEvent>>,
    appended: Notify,
    /// Set once its result exists: it can no longer be cancelled.
    finished: AtomicBool,
    /// The seq its events here number on from: 0, or the last event stored before it waited
    /// for an approval (those are read from the store).
    base_seq: i64,
}

impl LiveRun {
    /// Events with seq after `after`, in order.
    pub fn events_after(&self, after: i64) -> Vec<LiveEvent> {
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        let start = events.partition_point(|e| e.seq <= after);
        events[start..].to_vec()
    }

    /// Resolves after the next append (create it before reading, so no append is missed).
    pub fn appended(&self) -> tokio::sync::futures::Notified<'_> {
        self.appended.notified()
    }

    /// The seq after which this process holds the run's events.
    pub fn base_seq(&self) -> i64 {
        self.base_seq
    }

    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    pub(super) fn append(&self, new: impl IntoIterator<Item = LiveEvent>) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(new);
        self.appended.notify_waiters();
    }
}

/// The controls of a run this process is taking from the store to resume (SPEC §8), shared by
/// every attempt here to take it, with how many attempts hold them.
struct Resuming {
    control: RunControl,
    holders: usize,
}

#[derive(Default)]
pub struct LiveRuns {
    running: Mutex<HashMap<String, Arc<LiveRun>>>,
    /// Runs being resumed here, from before their checkpoint is taken until their session has
    /// started: a cancel that finds such a run `running` with this process its owner always
    /// finds controls to cancel, and the session starts with them.
    resuming: Mutex<HashMap<String, Resuming>>,
    /// Followers of runs executing elsewhere, by run id.
    remote: Mutex<HashMap<String, Arc<Notify>>>,
}

impl LiveRuns {
    #[cfg(test)]
    pub fn started(&self, run: NewRun, control: RunControl) -> Arc<LiveRun> {
        self.started_after(run, control, 0)
    }

    /// A run whose events here number after `base_seq` (see [`LiveRun::base_seq`]).
    pub fn started_after(&self, run: NewRun, control: RunControl, base_seq: i64) -> Arc<LiveRun> {
        let live = Arc::new(LiveRun {
            run,
            control,
            events: Mutex::new(Vec::new()),
            appended: Notify::new(),
            finished: AtomicBool::new(false),
            base_seq,
        });
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(live.run.id.clone(), live.clone());
        live
    }

    /// The run has its result: it can no longer be cancelled, but followers still read it here.
    pub fn finished(&self, run_id: &str) {
        if let Some(live) = self.get(run_id) {
            live.finished.store(true, Ordering::Release);
            live.appended.notify_waiters();
        }
    }

    /// The run's end is in the store: followers read it there from now on.
    pub fn retired(&self, run_id: &str) {
        let removed = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id);
        if let Some(live) = removed {
            live.appended.notify_waiters();
        }
    }

    pub fn get(&self, run_id: &str) -> Option<Arc<LiveRun>> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned()
    }

    /// The controls of a run in progress here (not yet finished), or being resumed here.
    pub fn control(&self, run_id: &str) -> Option<RunControl> {
        match self.get(run_id) {
            Some(live) => (!live.is_finished()).then(|| live.control.clone()),
            None => self
                .resuming
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(run_id)
                .map(|resuming| resuming.control.clone()),
        }
    }

    /// Registers an attempt to resume `run_id` here, before it takes the run's checkpoint: the
    /// controls the run will have (those of an attempt already under way, or new ones under
    /// `shutdown`), reachable through [`LiveRuns::control`] until every attempt's guard is
    /// dropped.
    pub fn resuming(self: &Arc<Self>, run_id: &str, shutdown: &CancellationToken) -> ResumingGuard {
        let mut resuming = self.resuming.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = resuming
            .entry(run_id.to_string())
            .or_insert_with(|| Resuming {
                control: RunControl::child_of(shutdown),
                holders: 0,
            });
        entry.holders += 1;
        ResumingGuard {
            live: Arc::clone(self),
            run_id: run_id.to_string(),
            control: entry.control.clone(),
        }
    }

    /// A waker for a follower of a run executing elsewhere; drop it when done following.
    pub fn follow_remote(self: &Arc<Self>, run_id: &str) -> RemoteFollower {
        let notify = self
            .remote
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(run_id.to_string())
            .or_default()
            .clone();
        RemoteFollower {
            live: self.clone(),
            run_id: run_id.to_string(),
            notify,
        }
    }

    /// Wakes the followers of `run_id` (the store wrote its events or its end).
    pub fn wake(&self, run_id: &str) {
        let notify = self
            .remote
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned();
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }

    /// Wakes every follower of a run elsewhere (notifications may have been missed).
    pub fn wake_all(&self) {
        let all: Vec<Arc<Notify>> = self
            .remote
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for notify in all {
            notify.notify_waiters();
        }
    }
}

/// One attempt to resume a run here; dropped once the attempt failed or the session started.
pub struct ResumingGuard {
    live: Arc<LiveRuns>,
    run_id: String,
    control: RunControl,
}

impl ResumingGuard {
    /// The controls the resumed run starts with (a cancel may already have fired them).
    pub fn control(&self) -> &RunControl {
        &self.control
    }
}

impl Drop for ResumingGuard {
    fn drop(&mut self) {
        let mut resuming = self
            .live
            .resuming
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = resuming.get_mut(&self.run_id) {
            entry.holders -= 1;
            if entry.holders == 0 {
                resuming.remove(&self.run_id);
            }
        }
    }
}

/// A follower's place in the wake list of a run executing elsewhere.
pub struct RemoteFollower {
    live: Arc<LiveRuns>,
    run_id: String,
    notify: Arc<Notify>,
}

impl RemoteFollower {
    /// Resolves at the next wake (create it before reading, so no wake is missed).
    pub fn woken(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

impl Drop for RemoteFollower {
    fn drop(&mut self) {
        let mut remote = self
            .live
            .remote
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The map's copy and this one: no other follower of the run is left.
        if Arc::strong_count(&self.notify) <= 2 {
            remote.remove(&self.run_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_run(id: &str) -> NewRun {
        NewRun {
            id: id.into(),
            agent: "a".into(),
            user_id: None,
            conversation_id: None,
            created_at: chrono::Utc::now(),
            owner: None,
            acted_by: None,
            key_id: None,
        }
    }

    fn event(seq: i64) -> LiveEvent {
        LiveEvent {
            seq,
            kind: "output",
            data: JsonText::null(),
        }
    }

    #[test]
    fn a_run_is_cancellable_until_finished_and_readable_until_retired() {
        let live = LiveRuns::default();
        live.started(new_run("r"), RunControl::default());
        assert!(live.control("r").is_some());
        live.finished("r");
        assert!(
            live.control("r").is_none(),
            "a finished run is not cancelled"
        );
        assert!(live.get("r").is_some(), "but still followed from memory");
        live.retired("r");
        assert!(live.get("r").is_none());
    }

    #[test]
    fn a_run_being_resumed_is_cancellable_until_its_last_attempt_ends() {
        let live = Arc::new(LiveRuns::default());
        let shutdown = CancellationToken::new();
        let first = live.resuming("r", &shutdown);
        let second = live.resuming("r", &shutdown);
        let cancel = live.control("r").expect("cancellable while it is taken");
        cancel.abort.cancel();
        assert!(
            first.control().abort.is_cancelled() && second.control().abort.is_cancelled(),
            "every attempt starts the run with the controls a cancel reached"
        );
        drop(first);
        assert!(
            live.control("r").is_some(),
            "one attempt is still under way"
        );
        drop(second);
        assert!(live.control("r").is_none());
        let again = live.resuming("r", &shutdown);
        assert!(
            !again.control().abort.is_cancelled(),
            "a later attempt has fresh controls"
        );
    }

    #[test]
    fn events_are_read_after_a_seq() {
        let live = LiveRuns::default();
        let run = live.started(new_run("r"), RunControl::default());
        run.append((1..=5).map(event));
        let seqs: Vec<i64> = run.events_after(2).iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [3, 4, 5]);
        assert!(run.events_after(5).is_empty());
    }

    #[tokio::test]
    async fn a_follower_is_woken_by_an_append_it_did_not_read() {
        let live = LiveRuns::default();
        let run = live.started(new_run("r"), RunControl::default());
        let woken = run.appended();
        tokio::pin!(woken);
        woken.as_mut().enable();
        run.append([event(1)]);
        tokio::time::timeout(std::time::Duration::from_secs(1), woken)
            .await
            .expect("woken");
    }

    #[tokio::test]
    async fn remote_followers_are_woken_and_forgotten_when_gone() {
        let live = Arc::new(LiveRuns::default());
        let follower = live.follow_remote("r");
        let second = live.follow_remote("r");
        {
            let woken = follower.woken();
            tokio::pin!(woken);
            woken.as_mut().enable();
            live.wake("r");
            tokio::time::timeout(std::time::Duration::from_secs(1), woken)
                .await
                .expect("woken");
        }
        drop(follower);
        assert!(
            !live.remote.lock().expect("lock").is_empty(),
            "another follower still waits"
        );
        drop(second);
        assert!(live.remote.lock().expect("lock").is_empty());
    }
}
