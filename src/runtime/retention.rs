//! The retention sweep (SPEC §14): every `retention.sweepSeconds` a replica takes the store's
//! `retention` lease (one replica at a time sweeps) and deletes the rows older than each kind's
//! retention, `batchSize` rows per short statement with `pauseMs` between, so ordinary requests
//! never wait behind a long lock. The lease is renewed between batches; a replica that loses it
//! stops.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Runtime;
use crate::config::retention::RetentionConfig;
use crate::store::{RETENTION_LEASE, RetainedKind, Store, StoreError};

/// How long a sweeping replica holds the lease without renewing it.
const LEASE: Duration = Duration::from_secs(60);

/// What one sweep removed, per kind; `swept` is false when another replica held the lease.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepReport {
    pub swept: bool,
    pub deleted: Vec<(RetainedKind, u64)>,
}

impl SweepReport {
    pub fn deleted(&self, kind: RetainedKind) -> u64 {
        self.deleted
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| n)
            .sum()
    }
}

/// The kinds with a retention, and how long each is kept.
fn kinds(config: &RetentionConfig) -> Vec<(RetainedKind, Duration)> {
    [
        (RetainedKind::Runs, config.runs),
        (RetainedKind::Events, config.events),
        (RetainedKind::Conversations, config.conversations),
        (RetainedKind::Responses, config.responses),
        (RetainedKind::Audit, config.audit),
    ]
    .into_iter()
    .filter_map(|(kind, keep)| keep.map(|keep| (kind, keep.0)))
    .collect()
}

async fn lease(store: &dyn Store, holder: &str) -> Result<bool, StoreError> {
    let now = Utc::now();
    let until = now + chrono::Duration::from_std(LEASE).unwrap_or_default();
    store.take_lease(RETENTION_LEASE, holder, now, until).await
}

/// One sweep by `holder`, if it gets the lease: every kind's expired rows, a batch at a time.
pub async fn sweep_once(
    store: &dyn Store,
    holder: &str,
    config: &RetentionConfig,
    stop: &CancellationToken,
) -> Result<SweepReport, StoreError> {
    let mut report = SweepReport::default();
    if !lease(store, holder).await? {
        return Ok(report);
    }
    report.swept = true;
    let pause = Duration::from_millis(config.pause_ms);
    for (kind, keep) in kinds(config) {
        let before = Utc::now() - chrono::Duration::from_std(keep).unwrap_or_default();
        let mut total = 0;
        loop {
            if stop.is_cancelled() {
                return Ok(report);
            }
            let deleted = store
                .delete_expired(kind, before, config.batch_size)
                .await?;
            total += deleted;
            if deleted < u64::from(config.batch_size) {
                break;
            }
            tokio::time::sleep(pause).await;
            if !lease(store, holder).await? {
                report.deleted.push((kind, total));
                return Ok(report);
            }
        }
        report.deleted.push((kind, total));
    }
    Ok(report)
}

/// An upload with chunks this old never finished: its process died mid-upload.
const UPLOAD_ABANDONED_AFTER: Duration = Duration::from_secs(3600);
/// How often every replica looks for abandoned uploads (dropping one twice is harmless).
const UPLOAD_SWEEP: Duration = Duration::from_secs(600);

/// Drops the chunks of uploads abandoned mid-way (their replica died) until `stop`: always on,
/// whatever the retention settings, as those chunks are nobody's data.
pub(super) async fn sweep_uploads_forever(runtime: Arc<Runtime>, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(UPLOAD_SWEEP);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let before =
            Utc::now() - chrono::Duration::from_std(UPLOAD_ABANDONED_AFTER).unwrap_or_default();
        match crate::attachments::discard_abandoned_uploads(runtime.store().as_ref(), before).await
        {
            Ok(0) => {}
            Ok(dropped) => info!(dropped, "dropped the chunks of abandoned uploads"),
            Err(error) => warn!(%error, "sweeping abandoned uploads failed; trying again later"),
        }
    }
}

/// Sweeps every `sweepSeconds` until `stop` (nothing when no kind has a retention).
pub(super) async fn sweep_forever(runtime: Arc<Runtime>, stop: CancellationToken) {
    let config = runtime.config().retention.clone();
    if !config.is_set() {
        return;
    }
    let mut ticks = tokio::time::interval(Duration::from_secs(config.sweep_seconds));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        match sweep_once(
            runtime.store().as_ref(),
            runtime.replica_id(),
            &config,
            &stop,
        )
        .await
        {
            Ok(report) if report.swept => {
                let counts: Vec<String> = report
                    .deleted
                    .iter()
                    .map(|(kind, n)| format!("{}={n}", kind.as_str()))
                    .collect();
                info!(deleted = %counts.join(","), "retention sweep done");
            }
            Ok(_) => {}
            Err(error) => warn!(%error, "retention sweep failed; trying again next time"),
        }
    }
}
