//! This process as one replica among those sharing the store (SPEC §7): its identity, and the
//! loop that writes its heartbeat every `server.heartbeatSeconds`, ends the runs of replicas that
//! stopped beating for `server.ownerTimeoutSeconds` (`failed`, `owner_lost`, with `error` and
//! `run.finished` appended, so every follower's stream ends), takes the cancels other replicas
//! recorded for its runs, and prunes old `requestId`s.
//!
//! A replica on this machine whose process is gone is taken for dead at once, without waiting for
//! its heartbeat to age: so a restarted process ends its previous life's runs at start (the only
//! case on SQLite, which is one process).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Runtime;
use super::follow::CancelMode;
use crate::agent::events::ErrorEvent;
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
}

impl ReplicaIdentity {
    pub fn of_this_process() -> Self {
        Self {
            id: uuid::Uuid::now_v7().to_string(),
            host: host_name(),
            pid: i64::from(std::process::id()),
            started_at: Utc::now(),
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

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

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
        match self.store.beat(&self.replica.id, Utc::now()).await {
            Ok(true) => {}
            Ok(false) => {
                warn!(replica = %self.replica.id, "this replica was taken for dead; registering again");
                if let Err(error) = self
                    .store
                    .register_replica(&self.replica.as_replica(Utc::now()))
                    .await
                {
                    warn!(%error, "could not register this replica again");
                }
            }
            Err(error) => warn!(%error, "could not write this replica's heartbeat"),
        }
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

    /// Ends the runs whose owner stopped beating; exactly one replica ends each.
    async fn end_orphaned_runs(&self) {
        let timeout = chrono::Duration::seconds(
            i64::try_from(self.config.server.owner_timeout_seconds).unwrap_or(i64::MAX / 1000),
        );
        let stale_before = Utc::now() - timeout;
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
            let end = self.owner_lost_end(&orphan);
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

    fn owner_lost_end(&self, orphan: &OrphanedRun) -> OrphanEnd {
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
        let summary = result.summary();
        let error_event = ErrorEvent {
            code: ExitReason::OwnerLost.as_str().into(),
            message: error.clone(),
        };
        OrphanEnd {
            run_id: orphan.id.clone(),
            error,
            finished_at: now,
            duration_ms: i64::try_from(duration_ms).unwrap_or(i64::MAX),
            result: JsonText::of(&result),
            events: vec![
                ("error", JsonText::of(&error_event)),
                ("run.finished", JsonText::of(&summary)),
            ],
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
    fn this_process_exists_and_an_impossible_one_does_not() {
        assert!(process_exists(i64::from(std::process::id())));
        assert!(!process_exists(i64::from(i32::MAX)));
        assert!(!process_exists(-5_000_000_000));
    }

    #[test]
    fn a_replica_knows_its_machine_and_process() {
        let me = ReplicaIdentity::of_this_process();
        assert!(!me.host.is_empty());
        assert_eq!(me.pid, i64::from(std::process::id()));
    }
}
