//! One connection per user to an HTTP MCP server whose `headers` (or `bearerToken`) use
//! `${caller.userId}` / `${caller.secret.NAME}`: a server that authenticates each user cannot
//! share one connection. A user's connection is opened at their first call (its placeholders
//! resolved then), reused while the resolved values stay the same (a changed secret opens a new
//! one), closed after [`IDLE_CLOSE`] unused, when it breaks, and at shutdown. At most
//! [`MAX_USER_CONNECTIONS`] are open per server: a new user past that closes the least
//! recently used. The shared connection still lists the tools the model is offered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::ClientConfig;
use rmcp::service::RunningService;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::connect::{Live, ServerSettings, connect_as};
use super::supervisor::Connection;
use crate::tools::ToolOutcome;
use crate::tools::caller::{self, ToolCaller};

/// A user's connection unused this long is closed.
pub const IDLE_CLOSE: Duration = Duration::from_secs(300);
/// Open user connections per server at most.
pub const MAX_USER_CONNECTIONS: usize = 64;
/// How often idle connections are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// One user's open connection.
struct UserConnection {
    connection: Arc<Connection>,
    /// Dropping it closes the session (rmcp cancels on drop).
    _service: RunningService<RoleClient, ClientConfig>,
    /// Digest of the resolved header values it was opened with.
    fingerprint: [u8; 32],
    last_used: Instant,
}

/// A user's place: locked while their connection is opened, so two first calls open one.
type Slot = Arc<tokio::sync::Mutex<Option<UserConnection>>>;

/// The open user connections of one server.
pub(crate) struct UserConnections {
    settings: Arc<ServerSettings>,
    slots: Mutex<HashMap<String, Slot>>,
}

impl UserConnections {
    pub(crate) fn new(settings: Arc<ServerSettings>) -> Arc<Self> {
        Arc::new(Self {
            settings,
            slots: Mutex::default(),
        })
    }

    /// Closes idle connections every [`SWEEP_EVERY`] until `stop`, then closes them all.
    pub(crate) async fn sweep_until(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(SWEEP_EVERY) => self.close_idle(IDLE_CLOSE),
            }
        }
        self.close_idle(Duration::ZERO);
    }

    /// The user's connection, opened (or reopened) as needed; a failure is the call's outcome.
    pub(crate) async fn connection_for(
        &self,
        caller: &ToolCaller,
    ) -> Result<Arc<Connection>, ToolOutcome> {
        let resolved = caller
            .resolve(self.settings.caller_templates())
            .await
            .map_err(|error| ToolOutcome::Failed(error.to_string()))?;
        let fingerprint = fingerprint(&self.settings, &resolved);
        // Resolving succeeded, so there is a user.
        let user = caller.user_id.clone().unwrap_or_default();
        let slot = self.slot(&user);
        let mut held = slot.lock().await;
        if let Some(open) = held.as_mut()
            && open.fingerprint == fingerprint
            && !open.connection.broken.is_cancelled()
        {
            open.last_used = Instant::now();
            return Ok(Arc::clone(&open.connection));
        }
        // Closed first: a changed secret or a broken session is not kept beside the new one.
        *held = None;
        let live = connect_as(&self.settings, &resolved)
            .await
            .map_err(|error| {
                warn!(server = %self.settings.name, %error, "a user's MCP connection failed");
                ToolOutcome::Unreachable(format!("the connection for this user failed: {error}"))
            })?;
        info!(server = %self.settings.name, "MCP connection opened for a user");
        let opened = open(live, fingerprint);
        let connection = Arc::clone(&opened.connection);
        *held = Some(opened);
        Ok(connection)
    }

    /// The user's slot; a new user past the bound first closes the least recently used.
    fn slot(&self, user: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get(user) {
            return Arc::clone(slot);
        }
        if slots.len() >= MAX_USER_CONNECTIONS {
            let oldest = slots
                .iter()
                .map(|(user, slot)| {
                    // A slot being opened right now counts as just used.
                    let used = slot
                        .try_lock()
                        .ok()
                        .and_then(|held| held.as_ref().map(|open| open.last_used))
                        .unwrap_or_else(Instant::now);
                    (used, user.clone())
                })
                .min();
            if let Some((_, user)) = oldest {
                slots.remove(&user);
            }
        }
        let slot = Slot::default();
        slots.insert(user.to_string(), Arc::clone(&slot));
        slot
    }

    /// Closes the connections unused for `idle` (all of them for zero) and broken ones.
    fn close_idle(&self, idle: Duration) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.retain(|_, slot| match slot.try_lock() {
            Ok(held) => held.as_ref().is_some_and(|open| {
                !idle.is_zero()
                    && open.last_used.elapsed() < idle
                    && !open.connection.broken.is_cancelled()
            }),
            // Being opened or used: kept, unless everything closes.
            Err(_) => !idle.is_zero(),
        });
    }
}

fn open(live: Live, fingerprint: [u8; 32]) -> UserConnection {
    let Live {
        service,
        catalog,
        instructions,
        process_group: _,
    } = live;
    UserConnection {
        connection: Arc::new(Connection {
            peer: service.peer().clone(),
            catalog,
            instructions,
            broken: CancellationToken::new(),
        }),
        _service: service,
        fingerprint,
        last_used: Instant::now(),
    }
}

/// A digest of what the caller placeholders resolved to, so a changed secret reconnects.
fn fingerprint(settings: &ServerSettings, resolved: &caller::Resolved) -> [u8; 32] {
    let mut digest = Sha256::new();
    for template in settings.caller_templates() {
        let rendered = caller::render(template, resolved, str::to_string).unwrap_or_default();
        digest.update((rendered.len() as u64).to_be_bytes());
        digest.update(rendered.as_bytes());
    }
    digest.finalize().into()
}
