//! This process as one replica among those sharing the store (SPEC §7): its identity, and the
//! loop that writes its heartbeat every `server.heartbeatSeconds`, ends the runs of replicas that
//! stopped beating for `server.ownerTimeoutSeconds` (`failed`, `owner_lost`; every follower's
//! stream then ends with `error` and `run.finished`), takes the cancels other replicas recorded
//! for its runs, and prunes old `requestId`s.
//!
//! A replica judges others by their heartbeats only once its own have been written without a
//! miss for a whole `ownerTimeoutSeconds` ([`Standing`]): when the store could not take its
//! beats (an outage, a stall of this process), it could not take theirs either, and the first
//! replica back would otherwise end every other live replica's runs. Should a live owner's runs
//! be ended all the same (it was cut off from the store alone), its own end replaces the
//! `owner_lost` one when it writes it.
//!
//! A replica on this machine whose process is gone is taken for dead at once, without waiting for
//! its heartbeat to age: so a restarted process ends its previous life's runs at start (the only
//! case on SQLite, which is one process).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Runtime;
use super::follow::CancelMode;
use crate::agent::{AgentResult, ExitReason};
use crate::store::{JsonText, OrphanEnd, OrphanedRun, Replica};

/// Orphaned runs ended per sweep; the next sweep takes the rest.
const SWEEP_BATCH: u32 = 100;
/// How long a `requestId` is kept (SPEC §7: at least a day).
const REQUEST_ID_RETENTION: chrono::Duration = chrono::Duration::hours(25);
/// A replica silent this long is forgotten (its runs were ended long before).
const REPLICA_RETENTION: chrono::Duration = chrono::Duration::days(1);
/// Sweeps between two prunes of old request ids and replicas.
const PRUNE_EVERY: u64 = 120;

/// Who this process is, as the store knows it.
#[derive(Debug, Clone)]
pub struct ReplicaIdentity {
    pub id: String,
    pub host: String,
    pub pid: i64,
    pub started_at: DateTime<Utc>,
    /// How its own heartbeats have fared.
    standing: Arc<Standing>,
}

impl ReplicaIdentity {
    /// Registered (its first heartbeat written) as it is made.
    pub fn of_this_process() -> Self {
        Self {
            id: uuid::Uuid::now_v7().to_string(),
            host: host_name(),
            pid: i64::from(std::process::id()),
            started_at: Utc::now(),
            standing: Arc::new(Standing::new(Instant::now())),
        }
    }

    pub fn as_replica(&self, heartbeat_at: DateTime<Utc>) -> Replica {
        Replica {
            id: self.id.clone(),
            host: self.host.clone(),
            pid: self.pid,
            started_at: self.started_at,
            heartbeat_at,
        }
    }
}

/// Whether this replica's heartbeats reach the store, which decides whether it may take another
/// replica for dead by the age of that one's heartbeat: only after its own beats have been
/// written, each within an owner timeout of the last, for a whole owner timeout.
#[derive(Debug)]
struct Standing {
    beats: Mutex<Beats>,
}

#[derive(Debug, Clone, Copy)]
struct Beats {
    last_written: Instant,
    /// Since when every beat was written in time; `None` after a beat failed.
    steady_since: Option<Instant>,
}

impl Standing {
    /// Registered at `now`: that is its first written beat.
    fn new(now: Instant) -> Self {
        Self {
            beats: Mutex::new(Beats {
                last_written: now,
                steady_since: Some(now),
            }),
        }
    }

    fn beats(&self) -> std::sync::MutexGuard<'_, Beats> {
        self.beats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A beat was written at `now`. A gap longer than `timeout` since the last one (this process
    /// stalled) starts the steady stretch anew, as a failure would.
    fn written(&self, now: Instant, timeout: Duration) {
        let mut beats = self.beats();
        let in_time = now.saturating_duration_since(beats.last_written) <= timeout;
        beats.steady_since = match beats.steady_since {
            Some(since) if in_time => Some(since),
            _ => Some(now),
        };
        beats.last_written = now;
    }

    /// A beat could not be written.
    fn failed(&self) {
        self.beats().steady_since = None;
    }

    /// Whether others' heartbeats may be judged at `now`: this replica's own have been written
    /// steadily for `timeout`, the last one within `timeout`.
    fn may_judge(&self, now: Instant, timeout: Duration) -> bool {
        let beats = *self.beats();
        beats.steady_since.is_some_and(|since| {
            now.saturating_duration_since(since) >= timeout
                && now.saturating_duration_since(beats.last_written) <= timeout
        })
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The assistant message stored for a conversation's message whose answer was cut off because
/// the replica answering it stopped: what it had streamed, marked as cut off, or a note.
fn lost_answer(streamed: &str) -> String {
    let streamed = streamed.trim_end();
    if streamed.is_empty() {
        LOST_ANSWER_NOTE.to_string()
    } else {
        format!("{streamed}\n\n{CUT_OFF_MARK}")
    }
}

/// Ends a partial answer whose replica stopped while streaming it.
pub const CUT_OFF_MARK: &str = "[Answer cut off: the server answering it stopped.]";
/// Stands for an answer lost before any of it was streamed.
pub const LOST_ANSWER_NOTE: &str =
    "[No answer: the server answering this message stopped before it answered. Please ask again.]";

/// Whether a process with this id exists on this machine.
fn process_exists(pid: i64) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        // It exists, but belongs to someone else.
        Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// Beats, sweeps and takes cancels every heartbeat until `stop` (the first sweep was made at
/// start, by [`Runtime::sweep`]).
pub(super) async fn keep_ownership(runtime: Arc<Runtime>, stop: CancellationToken) {
    let beat = Duration::from_secs(runtime.config.server.heartbeat_seconds.max(1));
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sweeps: u64 = 1;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        runtime.beat().await;
        runtime.sweep_all().await;
        if sweeps.is_multiple_of(PRUNE_EVERY) {
            runtime.prune().await;
        }
        sweeps += 1;
    }
}

impl Runtime {
    /// Ends the runs of replicas that are gone and takes the cancels waiting for this one.
    pub(super) async fn sweep(&self) {
        self.forget_dead_neighbours().await;
        self.end_orphaned_runs().await;
        self.take_cancels().await;
    }

    /// [`Runtime::sweep`], and the end of tool approvals past their timeout.
    pub(super) async fn sweep_all(self: &Arc<Self>) {
        self.sweep().await;
        self.expire_approvals().await;
    }
    async fn beat(&self) {
        let standing = &self.replica.standing;
        match self.store.beat(&self.replica.id, Utc::now()).await {
            Ok(true) => standing.written(Instant::now(), self.owner_timeout()),
            Ok(false) => {
                warn!(replica = %self.replica.id, "this replica was taken for dead; registering again");
                match self
                    .store
                    .register_replica(&self.replica.as_replica(Utc::now()))
                    .await
                {
                    Ok(()) => standing.written(Instant::now(), self.owner_timeout()),
                    Err(error) => {
                        standing.failed();
                        warn!(%error, "could not register this replica again");
                    }
                }
            }
            Err(error) => {
                standing.failed();
                warn!(%error, "could not write this replica's heartbeat");
            }
        }
    }

    fn owner_timeout(&self) -> Duration {
        Duration::from_secs(self.config.server.owner_timeout_seconds)
    }

    /// The heartbeat time before which another replica counts as stopped, or `None` while this
    /// replica may not judge others by their heartbeats (see [`Standing`]).
    fn stale_before(&self) -> Option<DateTime<Utc>> {
        let timeout = self.owner_timeout();
        if !self.replica.standing.may_judge(Instant::now(), timeout) {
            return None;
        }
        let timeout = chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX);
        Utc::now().checked_sub_signed(timeout)
    }

    /// Removes the rows of replicas on this machine whose process is gone.
    async fn forget_dead_neighbours(&self) {
        let replicas = match self.store.list_replicas().await {
            Ok(replicas) => replicas,
            Err(error) => {
                warn!(%error, "could not list replicas");
                return;
            }
        };
        for replica in replicas {
            let dead = replica.id != self.replica.id
                && replica.host == self.replica.host
                && !process_exists(replica.pid);
            if !dead {
                continue;
            }
            info!(replica = %replica.id, pid = replica.pid, "a replica on this machine is gone; its runs are ended");
            if let Err(error) = self.store.remove_replica(&replica.id).await {
                warn!(%error, "could not remove a gone replica");
            }
        }
    }

    /// Ends the runs whose owner stopped beating (or, while this replica's own beats are not
    /// steady, only those whose owner has no replica row); exactly one replica ends each.
    async fn end_orphaned_runs(&self) {
        let stale_before = self.stale_before();
        let orphans = match self.store.orphaned_runs(stale_before, SWEEP_BATCH).await {
            Ok(orphans) => orphans,
            Err(error) => {
                warn!(%error, "could not look for runs of stopped replicas");
                return;
            }
        };
        for orphan in orphans {
            // Ours, with our row briefly missing: we are alive and still running it.
            if orphan.owner.as_deref() == Some(self.replica.id.as_str()) {
                continue;
            }
            let end = self.owner_lost_end(&orphan).await;
            match self.store.end_orphaned_run(&end).await {
                Ok(true) => {
                    warn!(run_id = %orphan.id, owner = orphan.owner.as_deref().unwrap_or("unknown"),
                        "ended a run whose replica stopped (owner_lost)");
                    self.metrics
                        .sessions_total
                        .with_label_values(&["unknown", ExitReason::OwnerLost.as_str()])
                        .inc();
                    self.live.wake(&orphan.id);
                }
                Ok(false) => {}
                Err(error) => {
                    warn!(%error, run_id = %orphan.id, "could not end a run of a stopped replica")
                }
            }
        }
    }

    async fn owner_lost_end(&self, orphan: &OrphanedRun) -> OrphanEnd {
        let now = Utc::now();
        let duration_ms = u64::try_from((now - orphan.created_at).num_milliseconds()).unwrap_or(0);
        let error = format!(
            "the agentd process running this run ({}) stopped; the run was ended by {}",
            orphan.owner.as_deref().unwrap_or("unknown"),
            self.replica.id
        );
        let result = AgentResult::ended_without_session(
            &orphan.id,
            ExitReason::OwnerLost,
            error.clone(),
            duration_ms,
        );
        OrphanEnd {
            run_id: orphan.id.clone(),
            error,
            finished_at: now,
            duration_ms: i64::try_from(duration_ms).unwrap_or(i64::MAX),
            result: JsonText::of(&result),
            lost_answer: if orphan.answering {
                Some(lost_answer(&self.streamed_answer(&orphan.id).await))
            } else {
                None
            },
        }
    }

    /// Applies the cancels other replicas recorded for runs running here.
    pub(super) async fn take_cancels(&self) {
        let cancels = match self.store.take_cancels(&self.replica.id).await {
            Ok(cancels) => cancels,
            Err(error) => {
                warn!(%error, "could not read cancels for this replica's runs");
                return;
            }
        };
        for cancel in cancels {
            self.cancel_here(&cancel.run_id, &cancel.mode);
        }
    }

    /// Cancels a run running here, as another replica asked.
    pub(super) fn cancel_here(&self, run_id: &str, mode: &str) {
        let (Some(control), Some(mode)) = (self.live.control(run_id), CancelMode::parse(mode))
        else {
            return;
        };
        info!(%run_id, mode = mode.as_str(), "cancelled at another replica's request");
        match mode {
            CancelMode::Stop => control.stop.cancel(),
            CancelMode::Abort => control.abort.cancel(),
        }
    }

    pub(super) async fn prune(&self) {
        let now = Utc::now();
        if let Err(error) = self.store.prune_requests(now - REQUEST_ID_RETENTION).await {
            warn!(%error, "could not prune old request ids");
        }
        // Forgetting a replica ends its runs: judged by heartbeats, so only when they count.
        if self.stale_before().is_none() {
            return;
        }
        let Ok(replicas) = self.store.list_replicas().await else {
            return;
        };
        for replica in replicas {
            if replica.heartbeat_at < now - REPLICA_RETENTION
                && let Err(error) = self.store.remove_replica(&replica.id).await
            {
                warn!(%error, "could not forget a long-gone replica");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_answer_is_its_streamed_part_marked_cut_off_or_a_note() {
        assert_eq!(
            lost_answer("Half an ans  \n"),
            format!("Half an ans\n\n{CUT_OFF_MARK}")
        );
        assert_eq!(lost_answer(" \n"), LOST_ANSWER_NOTE);
    }

    #[test]
    fn this_process_exists_and_an_impossible_one_does_not() {
        assert!(process_exists(i64::from(std::process::id())));
        assert!(!process_exists(i64::from(i32::MAX)));
        assert!(!process_exists(-5_000_000_000));
    }

    const TIMEOUT: Duration = Duration::from_secs(30);
    const BEAT: Duration = Duration::from_secs(5);

    #[test]
    fn others_are_judged_only_after_a_whole_timeout_of_steady_beats() {
        let start = Instant::now();
        let standing = Standing::new(start);
        assert!(
            !standing.may_judge(start + BEAT, TIMEOUT),
            "just registered"
        );
        let mut now = start;
        while now < start + TIMEOUT {
            now += BEAT;
            standing.written(now, TIMEOUT);
        }
        assert!(standing.may_judge(now, TIMEOUT));
        assert!(
            !standing.may_judge(now + TIMEOUT + BEAT, TIMEOUT),
            "its own beats stopped"
        );
    }

    #[test]
    fn a_failed_beat_or_a_stall_starts_the_steady_stretch_anew() {
        let start = Instant::now();
        let standing = Standing::new(start);
        standing.written(start + TIMEOUT, TIMEOUT);
        assert!(standing.may_judge(start + TIMEOUT, TIMEOUT));

        // An outage: its beats fail, then are written again.
        standing.failed();
        assert!(!standing.may_judge(start + TIMEOUT + BEAT, TIMEOUT));
        let back = start + 3 * TIMEOUT;
        standing.written(back, TIMEOUT);
        assert!(!standing.may_judge(back + BEAT, TIMEOUT), "back just now");
        standing.written(back + TIMEOUT, TIMEOUT);
        assert!(standing.may_judge(back + TIMEOUT, TIMEOUT));

        // A stall: no beat at all for longer than the timeout, then one.
        let resumed = back + 3 * TIMEOUT;
        standing.written(resumed, TIMEOUT);
        assert!(!standing.may_judge(resumed + BEAT, TIMEOUT));
    }

    #[test]
    fn a_replica_knows_its_machine_and_process() {
        let me = ReplicaIdentity::of_this_process();
        assert!(!me.host.is_empty());
        assert_eq!(me.pid, i64::from(std::process::id()));
    }
}
