//! The tools of one running agentd: the queues, the shared MCP server connections and the REST
//! tools and OpenAPI tools built from the configuration at start, and each agent's
//! [`ToolRegistry`] made from its `tools:` list (MCP server names, `rest__<name>` and
//! `openapi__<spec>`). It connects only the servers some agent uses, and closes them at shutdown.
//! It never runs a session.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::join_all;
use tracing::warn;

use super::a2a::{A2A_NAMESPACE, RemoteAgents};
use super::mcp::{McpError, McpServer};
use super::openapi::{LoadedDocument, OPENAPI_NAMESPACE, OpenApiError, OpenApiTools};
use super::queue::{QueueError, ToolQueues};
use super::rest::{REST_NAMESPACE, RestToolError, RestTools};
use super::{ToolProvider, ToolRegistry};
use crate::config::tools::validate_tools;
use crate::config::{AgentRegistry, AgentSpec, Config, ConfigError};
use crate::telemetry::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum ToolSetupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Rest(#[from] RestToolError),
    #[error(transparent)]
    OpenApi(#[from] OpenApiError),
    #[error("mcpServers.{server}.queue: {source}")]
    Queue { server: String, source: QueueError },
    #[error(
        "{file}: tools: {tool:?} is not an MCP server in mcpServers, a REST tool written rest__NAME from restTools, an OpenAPI spec written openapi__NAME from openapiSpecs or a remote agent written a2a__NAME from a2aAgents"
    )]
    UnknownTool { file: String, tool: String },
    #[error(transparent)]
    Mcp(#[from] McpError),
}

impl ToolSetupError {
    /// Whether the configuration is at fault (exit 4) rather than a server failing (exit 3).
    pub fn is_config_error(&self) -> bool {
        !matches!(self, Self::Mcp(_))
    }
}

/// The connected tools, shared by every session.
pub struct ToolHub {
    servers: BTreeMap<String, Arc<McpServer>>,
    rest: RestTools,
    remote_agents: RemoteAgents,
    openapi: OpenApiTools,
}

impl ToolHub {
    /// Checks the tool configuration and every agent's `tools:` list, then connects the MCP
    /// servers the agents use. A required server that fails to start is an error.
    pub async fn start(
        config: &Config,
        agents: &AgentRegistry,
        metrics: &Metrics,
    ) -> Result<Self, ToolSetupError> {
        let wanted: Vec<String> = config
            .mcp_servers
            .keys()
            .filter(|name| agents.iter().any(|agent| agent.tools.contains(*name)))
            .cloned()
            .collect();
        let documents = super::openapi::load_documents(&config.openapi_specs).await?;
        let (queues, rest, openapi) = Self::checked(config, agents, metrics, &documents)?;
        let mut starts = Vec::new();
        for name in &wanted {
            let Some(server) = config.mcp_servers.get(name).filter(|s| s.is_enabled()) else {
                continue;
            };
            let queue =
                queues
                    .get(server.queue_name())
                    .map_err(|source| ToolSetupError::Queue {
                        server: name.clone(),
                        source,
                    })?;
            starts.push(McpServer::start(name, server, queue));
        }
        let mut connected = BTreeMap::new();
        let mut failure = None;
        for started in join_all(starts).await {
            match started {
                Ok(server) => {
                    connected.insert(server.name().to_string(), server);
                }
                Err(error) => failure = failure.or(Some(error)),
            }
        }
        let remote_agents = RemoteAgents::connect(&config.a2a_agents, |name| {
            agents.iter().any(|agent| {
                agent
                    .tools
                    .iter()
                    .any(|entry| remote_agent_name(entry) == Some(name))
            })
        })
        .await;
        let hub = Self {
            servers: connected,
            rest,
            remote_agents,
            openapi,
        };
        if let Some(error) = failure {
            hub.shutdown().await;
            return Err(error.into());
        }
        Ok(hub)
    }

    /// Everything [`ToolHub::start`] checks before connecting anything (`agentd check`).
    pub fn check(config: &Config, agents: &AgentRegistry) -> Result<(), ToolSetupError> {
        let metrics = Metrics::new().map_err(|e| ConfigError::Invalid {
            file: "configuration".into(),
            path: "queues".into(),
            message: e.to_string(),
        })?;
        // Documents behind a URL are read when the server starts, not by a check.
        let documents = super::openapi::load_file_documents(&config.openapi_specs)?;
        Self::checked(config, agents, &metrics, &documents).map(|_| ())
    }

    fn checked(
        config: &Config,
        agents: &AgentRegistry,
        metrics: &Metrics,
        documents: &BTreeMap<String, LoadedDocument>,
    ) -> Result<(ToolQueues, RestTools, OpenApiTools), ToolSetupError> {
        validate_tools(config, "configuration")?;
        let queues = ToolQueues::new(&config.queues, metrics);
        let rest = RestTools::build(&config.rest_tools, &queues)?;
        let openapi = OpenApiTools::build(&config.openapi_specs, documents, &queues)?;
        for agent in agents.iter() {
            check_agent_tools(config, &rest, agent)?;
        }
        Ok((queues, rest, openapi))
    }

    /// The tools one agent may call. Entries that name nothing connected (a disabled server)
    /// are skipped.
    pub fn registry_for(&self, agent: &AgentSpec) -> ToolRegistry {
        let mut registry = ToolRegistry::default();
        let rest_names: Vec<&str> = agent
            .tools
            .iter()
            .filter_map(|entry| rest_tool_name(entry))
            .collect();
        if !rest_names.is_empty() {
            registry.add(Arc::new(self.rest.subset(rest_names)));
        }
        let specs: Vec<&str> = agent
            .tools
            .iter()
            .filter_map(|entry| openapi_spec_name(entry))
            .collect();
        if !specs.is_empty() {
            registry.add(Arc::new(self.openapi.subset(specs)));
        }
        let remote = self.remote_agents.subset(
            agent
                .tools
                .iter()
                .filter_map(|entry| remote_agent_name(entry)),
        );
        if !remote.is_empty() {
            registry.add(Arc::new(remote));
        }
        for entry in &agent.tools {
            if let Some(server) = self.servers.get(entry) {
                registry.add(Arc::clone(server) as Arc<dyn ToolProvider>);
            }
        }
        registry
    }

    /// The `instructions` of the MCP servers an agent uses, as `(server, instructions)`, for
    /// the system prompt.
    pub fn instructions_for(&self, agent: &AgentSpec) -> Vec<(String, String)> {
        agent
            .tools
            .iter()
            .filter_map(|entry| self.servers.get(entry))
            .filter_map(|server| Some((server.name().to_string(), server.instructions()?)))
            .collect()
    }

    /// The connected MCP servers, by name.
    pub fn servers(&self) -> impl Iterator<Item = &Arc<McpServer>> {
        self.servers.values()
    }

    /// The remote A2A agents whose cards were read at start.
    pub fn remote_agents(&self) -> &RemoteAgents {
        &self.remote_agents
    }

    pub fn rest_tools(&self) -> &RestTools {
        &self.rest
    }

    pub fn openapi_tools(&self) -> &OpenApiTools {
        &self.openapi
    }

    /// Closes every MCP connection and ends the stdio servers' process groups.
    pub async fn shutdown(&self) {
        join_all(self.servers.values().map(|server| server.shutdown())).await;
    }
}

/// `a2a__x` → `x`.
pub fn remote_agent_name(entry: &str) -> Option<&str> {
    entry
        .strip_prefix(A2A_NAMESPACE)
        .and_then(|rest| rest.strip_prefix("__"))
}

/// `rest__x` → `x`.
fn rest_tool_name(entry: &str) -> Option<&str> {
    entry
        .strip_prefix(REST_NAMESPACE)
        .and_then(|rest| rest.strip_prefix("__"))
}

/// `openapi__x` → `x`.
pub fn openapi_spec_name(entry: &str) -> Option<&str> {
    entry
        .strip_prefix(OPENAPI_NAMESPACE)
        .and_then(|rest| rest.strip_prefix("__"))
}

/// Every `tools:` entry must name a configured MCP server, REST tool or OpenAPI spec.
fn check_agent_tools(
    config: &Config,
    rest: &RestTools,
    agent: &AgentSpec,
) -> Result<(), ToolSetupError> {
    for entry in &agent.tools {
        let known = match (
            rest_tool_name(entry),
            openapi_spec_name(entry),
            remote_agent_name(entry),
        ) {
            (Some(name), _, _) => rest.contains(name) || config.rest_tools.contains_key(name),
            (None, Some(spec), _) => config.openapi_specs.contains_key(spec),
            (None, None, Some(name)) => config.a2a_agents.contains_key(name),
            (None, None, None) => config.mcp_servers.contains_key(entry),
        };
        if !known {
            return Err(ToolSetupError::UnknownTool {
                file: agent
                    .path
                    .as_deref()
                    .map_or_else(|| agent.name.clone(), |p| p.display().to_string()),
                tool: entry.clone(),
            });
        }
        let disabled = config
            .mcp_servers
            .get(entry)
            .is_some_and(|server| !server.is_enabled())
            || rest_tool_name(entry)
                .and_then(|name| config.rest_tools.get(name))
                .is_some_and(|tool| !tool.is_enabled())
            || openapi_spec_name(entry)
                .and_then(|name| config.openapi_specs.get(name))
                .is_some_and(|spec| !spec.is_enabled())
            || remote_agent_name(entry)
                .and_then(|name| config.a2a_agents.get(name))
                .is_some_and(|agent| !agent.is_enabled());
        if disabled {
            warn!(agent = %agent.name, tool = %entry, "the agent names a disabled tool; it is not offered");
        }
    }
    Ok(())
}
