//! MCP servers as tool providers, through rmcp (pinned exactly; every rmcp type stays inside
//! this module). One [`McpServer`] per configured server is shared by all sessions: it keeps a
//! single connection, restarts it when it dies (callers meanwhile get
//! `mcp server restarting`), validates arguments against each tool's schema before calling, and
//! bounds each call by the tool timeout and its queue. An HTTP server whose headers use
//! `${caller.…}` also gets one connection per user for its calls ([`per_user`]). A server that
//! does not answer a ping within [`CANCEL_GRACE`] after a call timed out (it ignores the
//! cancellation, or hangs) is restarted, as is a stdio server that breaks the line limit
//! ([`stdio`]). It knows nothing about sessions or LLMs.

mod catalog;
mod connect;
pub mod per_user;
mod stdio;
mod supervisor;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::ServiceError;
use rmcp::model::CallToolRequestParams;
use rmcp::model::CallToolResponse;
use rmcp::model::{ClientRequest, PingRequest};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

pub use catalog::ListedTool;
use catalog::{ToolCatalog, files_of, outcome_of, sources_of};
use connect::{ServerSettings, connect};
use supervisor::{Connection, ServerState, supervise};

use super::caller::ToolCaller;
use super::policy::ToolPolicy;
use super::queue::ToolQueue;
use super::{ToolOutcome, ToolProvider, ToolReport};
use crate::config::McpServerConfig;
use crate::llm::ToolDefinition;

/// What callers are told while a server is down.
pub const RESTARTING: &str = "mcp server restarting";
/// How long [`McpServer::shutdown`] waits for the connection to close.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);
/// How long a server has to answer a ping after a call timed out (and was cancelled) before
/// it counts as stuck and is restarted.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Why a server could not be started.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    #[error("MCP server {server:?}: {detail}")]
    Config { server: String, detail: String },
    #[error("MCP server {server:?}: cannot start {command:?}: {detail}")]
    Spawn {
        server: String,
        command: String,
        detail: String,
    },
    #[error("MCP server {server:?}: initialisation failed: {detail}")]
    Initialise { server: String, detail: String },
    #[error(
        "MCP server {server:?}: initialisation did not finish within {timeout:?} (initTimeout)"
    )]
    InitTimeout { server: String, timeout: Duration },
}

/// One shared MCP server.
pub struct McpServer {
    settings: Arc<ServerSettings>,
    queue: Arc<ToolQueue>,
    state: watch::Receiver<ServerState>,
    stop: CancellationToken,
    supervisor: Mutex<Option<JoinHandle<()>>>,
    /// Each user's connection, for a server whose headers use `${caller.…}`.
    users: Option<Arc<per_user::UserConnections>>,
}

impl McpServer {
    /// Connects the server. A required server that fails is an error; an optional one is
    /// returned down, and reconnects in the background with the restart backoff.
    pub async fn start(
        name: &str,
        config: &McpServerConfig,
        queue: Arc<ToolQueue>,
    ) -> Result<Arc<Self>, McpError> {
        let settings = Arc::new(ServerSettings::from_config(name, config));
        let live = match connect(&settings).await {
            Ok(live) => Some(live),
            Err(error) if settings.required => return Err(error),
            Err(error) => {
                warn!(%error, "optional MCP server is not available; retrying in the background");
                None
            }
        };
        let connected = live.is_some();
        let (sender, state) = watch::channel(ServerState::Restarting { last_catalog: None });
        let stop = CancellationToken::new();
        let supervisor = tokio::spawn(supervise(Arc::clone(&settings), live, sender, stop.clone()));
        let users = settings.per_user.then(|| {
            let users = per_user::UserConnections::new(Arc::clone(&settings));
            tokio::spawn(Arc::clone(&users).sweep_until(stop.clone()));
            users
        });
        let server = Arc::new(Self {
            settings,
            queue,
            state,
            stop,
            supervisor: Mutex::new(Some(supervisor)),
            users,
        });
        if connected {
            server.wait_until_ready().await;
        }
        Ok(server)
    }

    /// Lets the supervisor publish the first connection before anyone calls.
    async fn wait_until_ready(&self) {
        let mut state = self.state.clone();
        while matches!(
            &*state.borrow_and_update(),
            ServerState::Restarting { last_catalog: None }
        ) {
            if state.changed().await.is_err() {
                break;
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// The queue this server's calls wait in.
    pub fn queue(&self) -> &str {
        self.queue.name()
    }

    /// Whether a connection is up now.
    pub fn is_ready(&self) -> bool {
        matches!(&*self.state.borrow(), ServerState::Ready(_))
    }

    /// The offered tools as `agentd tools` lists them (empty while never connected).
    pub fn listed_tools(&self) -> Vec<ListedTool> {
        self.catalog()
            .map(|c| c.listed().to_vec())
            .unwrap_or_default()
    }

    /// The server's `instructions` from initialisation, if any.
    pub fn instructions(&self) -> Option<String> {
        match &*self.state.borrow() {
            ServerState::Ready(connection) => connection.instructions.clone(),
            _ => None,
        }
    }

    fn catalog(&self) -> Option<Arc<ToolCatalog>> {
        match &*self.state.borrow() {
            ServerState::Ready(connection) => Some(Arc::clone(&connection.catalog)),
            ServerState::Restarting { last_catalog } => last_catalog.clone(),
            ServerState::Stopped => None,
        }
    }

    /// The live connection; while restarting a call gets no answer (it may be retried), a
    /// stopped server fails it for good.
    fn connection(&self) -> Result<Arc<Connection>, ToolOutcome> {
        match &*self.state.borrow() {
            ServerState::Ready(connection) => Ok(Arc::clone(connection)),
            ServerState::Restarting { .. } => Err(ToolOutcome::Unreachable(RESTARTING.into())),
            ServerState::Stopped => Err(ToolOutcome::Failed("mcp server stopped".into())),
        }
    }

    /// Closes the connection and ends the server's processes; later calls fail.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let supervisor = self
            .supervisor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(supervisor) = supervisor
            && tokio::time::timeout(SHUTDOWN_WAIT, supervisor)
                .await
                .is_err()
        {
            warn!(server = %self.settings.name, "MCP server did not shut down in time");
        }
    }

    async fn call_connected(
        &self,
        connection: &Connection,
        mcp_name: String,
        arguments: serde_json::Map<String, Value>,
        report: &ToolReport,
    ) -> ToolOutcome {
        let _slot = self.queue.acquire().await;
        let tool = mcp_name.clone();
        let mut request = CallToolRequestParams::new(mcp_name).with_arguments(arguments);
        // The run's trace continues in the server (`_meta.traceparent`, SEP-414).
        let trace = crate::telemetry::genai::current_meta();
        if !trace.is_empty() {
            request.meta = Some(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
                trace,
            )));
        }
        match connection.peer.call_tool_once(request).await {
            Ok(CallToolResponse::Complete(result)) => {
                report.add_files(files_of(&result, &tool));
                report.set_sources(sources_of(&result));
                outcome_of(result)
            }
            Ok(_) => ToolOutcome::Failed(
                "the server asked for input or started a task, which agentd does not support"
                    .into(),
            ),
            Err(error) => self.failure(connection, &error),
        }
    }

    /// A transport failure marks the connection broken so the supervisor replaces it.
    fn failure(&self, connection: &Connection, error: &ServiceError) -> ToolOutcome {
        match error {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                connection.broken.cancel();
                ToolOutcome::Unreachable(RESTARTING.into())
            }
            ServiceError::McpError(data) => {
                ToolOutcome::Failed(format!("mcp error {}: {}", data.code.0, data.message))
            }
            ServiceError::Timeout { .. } => ToolOutcome::Unreachable("timeout".into()),
            other => ToolOutcome::Failed(format!("mcp error: {other}")),
        }
    }
}

#[async_trait]
impl ToolProvider for McpServer {
    fn namespace(&self) -> &str {
        &self.settings.name
    }

    fn policy(&self, name: &str) -> ToolPolicy {
        ToolPolicy {
            cache_ttl: self
                .settings
                .tools_cache
                .get(name)
                .copied()
                .unwrap_or(self.settings.cache_ttl),
            retries: self.settings.retries,
            per_user: self.settings.per_user,
        }
    }

    async fn list_tools(&self) -> Vec<ToolDefinition> {
        self.catalog()
            .map(|c| c.definitions().to_vec())
            .unwrap_or_default()
    }

    async fn call_reporting(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        report: Arc<ToolReport>,
        caller: &ToolCaller,
    ) -> ToolOutcome {
        let connection = match &self.users {
            Some(users) => users.connection_for(caller).await,
            None => self.connection(),
        };
        let connection = match connection {
            Ok(connection) => connection,
            Err(outcome) => return outcome,
        };
        let (mcp_name, arguments) = match connection.catalog.prepare_call(name, arguments) {
            Ok(prepared) => prepared,
            Err(reason) => return ToolOutcome::Failed(reason),
        };
        let limit = self
            .settings
            .request_timeout
            .map_or(timeout, |cap| cap.min(timeout));
        // Dropping the call on timeout makes rmcp send notifications/cancelled to the server.
        match tokio::time::timeout(
            limit,
            self.call_connected(&connection, mcp_name, arguments, &report),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => {
                self.restart_unless_alive(connection);
                ToolOutcome::Unreachable("timeout".into())
            }
        }
    }
}

impl McpServer {
    /// After a cancelled call: pings the server in the background and marks the connection
    /// broken (to be replaced) when no answer comes within [`CANCEL_GRACE`].
    fn restart_unless_alive(&self, connection: Arc<Connection>) {
        let server = self.settings.name.clone();
        tokio::spawn(async move {
            let ping = connection
                .peer
                .send_request(ClientRequest::PingRequest(PingRequest::default()));
            if !matches!(tokio::time::timeout(CANCEL_GRACE, ping).await, Ok(Ok(_))) {
                warn!(server = %server, grace_ms = CANCEL_GRACE.as_millis() as u64,
                    "MCP server did not answer a ping after a call was cancelled: restarting it");
                connection.broken.cancel();
            }
        });
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        // The supervisor closes the connection and ends the process group on its own.
        self.stop.cancel();
    }
}
