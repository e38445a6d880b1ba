//! Keeps one shared MCP server connection alive: publishes it while it is up, restarts it with
//! backoff (0, 1, 2, 5, 10, 30, 60 s, then 60 s forever) when it closes or breaks, and closes it
//! (ending the stdio process group) when asked to stop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::service::Peer;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::catalog::ToolCatalog;
use super::connect::{Live, ServerSettings, connect, kill_process_group};

/// Delay before each restart attempt; the last entry repeats.
pub(crate) const RESTART_BACKOFF: [Duration; 7] = [
    Duration::ZERO,
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(5),
    Duration::from_secs(10),
    Duration::from_secs(30),
    Duration::from_secs(60),
];
/// A connection that stayed up this long starts the backoff over.
const STABLE_CONNECTION: Duration = Duration::from_secs(60);
/// How long a closing connection may take (rmcp waits 3 s for stdin EOF, then 3 s after
/// SIGTERM) before the process group is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(8);

/// A connection callers may use.
pub(crate) struct Connection {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) catalog: Arc<ToolCatalog>,
    pub(crate) instructions: Option<String>,
    /// Cancelled by a caller that saw the transport fail: the supervisor reconnects.
    pub(crate) broken: CancellationToken,
}

/// What callers see of the server.
#[derive(Clone)]
pub(crate) enum ServerState {
    Ready(Arc<Connection>),
    /// Down and being restarted; the last tool list stays offered.
    Restarting {
        last_catalog: Option<Arc<ToolCatalog>>,
    },
    Stopped,
}

/// How a connection ended.
#[derive(PartialEq, Eq)]
enum Ended {
    Closed,
    Stopped,
}

/// Runs until `stop` is cancelled.
pub(crate) async fn supervise(
    settings: Arc<ServerSettings>,
    mut live: Option<Live>,
    state: watch::Sender<ServerState>,
    stop: CancellationToken,
) {
    let server = settings.name.clone();
    let mut failures = 0usize;
    let mut last_catalog = live.as_ref().map(|l| Arc::clone(&l.catalog));
    loop {
        if let Some(current) = live.take() {
            last_catalog = Some(Arc::clone(&current.catalog));
            let up_since = Instant::now();
            if run_connection(current, &state, &stop).await == Ended::Stopped {
                break;
            }
            if up_since.elapsed() >= STABLE_CONNECTION {
                failures = 0;
            }
            warn!(server = %server, "MCP server connection ended; restarting");
        }
        state.send_replace(ServerState::Restarting {
            last_catalog: last_catalog.clone(),
        });
        let delay = RESTART_BACKOFF[failures.min(RESTART_BACKOFF.len() - 1)];
        failures += 1;
        let attempt = tokio::select! {
            _ = stop.cancelled() => break,
            attempt = async {
                tokio::time::sleep(delay).await;
                connect(&settings).await
            } => attempt,
        };
        match attempt {
            Ok(restarted) => {
                info!(server = %server, attempt = failures, "MCP server restarted");
                live = Some(restarted);
            }
            Err(error) => {
                warn!(server = %server, attempt = failures, %error, "MCP server restart failed")
            }
        }
    }
    state.send_replace(ServerState::Stopped);
}

/// Publishes the connection and waits until it closes, breaks or must stop; then closes it
/// and ends its process group.
async fn run_connection(
    live: Live,
    state: &watch::Sender<ServerState>,
    stop: &CancellationToken,
) -> Ended {
    let Live {
        service,
        catalog,
        instructions,
        process_group,
    } = live;
    let broken = CancellationToken::new();
    state.send_replace(ServerState::Ready(Arc::new(Connection {
        peer: service.peer().clone(),
        catalog,
        instructions,
        broken: broken.clone(),
    })));
    let closer = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    let ended = tokio::select! {
        _ = &mut waiting => Ended::Closed,
        _ = broken.cancelled() => {
            closer.cancel();
            let _ = tokio::time::timeout(CLOSE_GRACE, &mut waiting).await;
            Ended::Closed
        }
        _ = stop.cancelled() => {
            closer.cancel();
            let _ = tokio::time::timeout(CLOSE_GRACE, &mut waiting).await;
            Ended::Stopped
        }
    };
    if let Some(group) = process_group {
        kill_process_group(group);
    }
    ended
}
