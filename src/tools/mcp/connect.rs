//! Opening one connection to an MCP server: spawning a stdio child in its own process group
//! (stderr forwarded to the logs, stdout read as bounded lines: [`super::stdio`]) or opening a
//! streamable HTTP session (headers, bearer token),
//! then initialising and listing the tools, all within `initTimeout`. `${VAR}` placeholders in
//! `env` and `headers` are expanded here, from the process environment, because the config
//! loader leaves them as written (contract §7). `${caller.…}` placeholders in `headers` and
//! `bearerToken` are filled from one user's resolved values for that user's connection
//! ([`connect_as`]); the shared connection leaves those headers out.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use rmcp::{RoleClient, ServiceExt};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::ChildStderr;
use tracing::{debug, info};

use super::McpError;
use super::catalog::{ToolCatalog, ToolFilter};
use super::stdio::ChildTransport;
use crate::config::tools::McpTransport;
use crate::config::{McpServerConfig, expand};
use crate::tools::caller::{self, Resolved};

/// `initTimeout` when the config names none.
const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest stderr line logged as one record; longer lines are split.
const MAX_STDERR_LINE: u64 = 8 * 1024;

/// Where the server is.
pub(crate) enum Endpoint {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        bearer_token: Option<SecretString>,
    },
}

/// One configured server, resolved from `mcpServers.<name>`.
pub(crate) struct ServerSettings {
    pub(crate) name: String,
    pub(crate) endpoint: Endpoint,
    pub(crate) filter: ToolFilter,
    pub(crate) required: bool,
    pub(crate) init_timeout: Duration,
    pub(crate) request_timeout: Option<Duration>,
    /// `cache` for every tool.
    pub(crate) cache_ttl: Option<Duration>,
    /// `toolsCache`: TTLs of single tools, over `cache`.
    pub(crate) tools_cache: BTreeMap<String, Option<Duration>>,
    pub(crate) retries: u8,
    /// Its headers or bearer token use `${caller.…}`: every user gets a connection of their own.
    pub(crate) per_user: bool,
}

impl ServerSettings {
    pub(crate) fn from_config(name: &str, config: &McpServerConfig) -> Self {
        let endpoint = match config.transport() {
            McpTransport::Stdio => Endpoint::Stdio {
                command: config.command.clone().unwrap_or_default(),
                args: config.args.clone(),
                env: config.env.clone(),
            },
            McpTransport::Http => Endpoint::Http {
                url: config.url.clone().unwrap_or_default(),
                headers: config.headers.clone(),
                bearer_token: config.bearer_token.clone(),
            },
        };
        Self {
            name: name.to_string(),
            endpoint,
            filter: ToolFilter::from_config(config),
            required: config.is_required(),
            init_timeout: config.init_timeout.map_or(DEFAULT_INIT_TIMEOUT, |d| d.0),
            request_timeout: config.request_timeout.map(|d| d.0),
            cache_ttl: config.cache.and_then(|ttl| ttl.0),
            tools_cache: config
                .tools_cache
                .iter()
                .map(|(tool, ttl)| (tool.clone(), ttl.0))
                .collect(),
            retries: config.retries,
            per_user: config.transport() == McpTransport::Http
                && (config
                    .headers
                    .values()
                    .any(|value| caller::uses_caller(value))
                    || config
                        .bearer_token
                        .as_ref()
                        .is_some_and(|token| caller::uses_caller(token.expose_secret()))),
        }
    }

    /// The values holding `${caller.…}` placeholders (headers, bearer token).
    pub(crate) fn caller_templates(&self) -> Vec<&str> {
        match &self.endpoint {
            Endpoint::Http {
                headers,
                bearer_token,
                ..
            } => headers
                .values()
                .map(String::as_str)
                .chain(bearer_token.as_ref().map(|t| t.expose_secret()))
                .filter(|value| caller::uses_caller(value))
                .collect(),
            Endpoint::Stdio { .. } => Vec::new(),
        }
    }
}

/// An initialised connection and what it offers.
pub(crate) struct Live {
    pub(crate) service: RunningService<RoleClient, ClientConfig>,
    pub(crate) catalog: Arc<ToolCatalog>,
    pub(crate) instructions: Option<String>,
    /// The stdio child's process group, ended as a whole when the connection closes.
    pub(crate) process_group: Option<u32>,
}

/// Starts the server and initialises it within `initTimeout`: the shared connection, without
/// the headers that need a caller.
pub(crate) async fn connect(settings: &ServerSettings) -> Result<Live, McpError> {
    connect_with(settings, None).await
}

/// One user's connection to an HTTP server: its caller placeholders filled from `resolved`.
pub(crate) async fn connect_as(
    settings: &ServerSettings,
    resolved: &Resolved,
) -> Result<Live, McpError> {
    connect_with(settings, Some(resolved)).await
}

async fn connect_with(
    settings: &ServerSettings,
    resolved: Option<&Resolved>,
) -> Result<Live, McpError> {
    match &settings.endpoint {
        Endpoint::Stdio { command, args, env } => {
            let (transport, process_group) = spawn_stdio(settings, command, args, env)?;
            let live = initialise(settings, transport, process_group).await;
            if live.is_err()
                && let Some(group) = process_group
            {
                kill_process_group(group);
            }
            live
        }
        Endpoint::Http {
            url,
            headers,
            bearer_token,
        } => {
            let transport =
                http_transport(settings, url, headers, bearer_token.as_ref(), resolved)?;
            initialise(settings, transport, None).await
        }
    }
}

async fn initialise<T, E, A>(
    settings: &ServerSettings,
    transport: T,
    process_group: Option<u32>,
) -> Result<Live, McpError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let handshake = async {
        let service =
            client_identity()
                .serve(transport)
                .await
                .map_err(|e| McpError::Initialise {
                    server: settings.name.clone(),
                    detail: e.to_string(),
                })?;
        let tools: Vec<Tool> =
            service
                .list_all_tools()
                .await
                .map_err(|e| McpError::Initialise {
                    server: settings.name.clone(),
                    detail: format!("tools/list failed: {e}"),
                })?;
        Ok::<_, McpError>((service, tools))
    };
    let (service, tools) = tokio::time::timeout(settings.init_timeout, handshake)
        .await
        .map_err(|_| McpError::InitTimeout {
            server: settings.name.clone(),
            timeout: settings.init_timeout,
        })??;
    let instructions = service
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .filter(|text| !text.trim().is_empty());
    let catalog = ToolCatalog::build(&settings.name, tools, &settings.filter);
    info!(server = %settings.name, tools = catalog.definitions().len(), "MCP server connected");
    Ok(Live {
        service,
        catalog: Arc::new(catalog),
        instructions,
        process_group,
    })
}

fn client_identity() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("agentd", env!("CARGO_PKG_VERSION")),
    )
}

/// Spawns the child as the leader of a new process group, so its whole tree can be ended.
fn spawn_stdio(
    settings: &ServerSettings,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
) -> Result<(ChildTransport, Option<u32>), McpError> {
    let mut child = tokio::process::Command::new(command);
    child.args(args).kill_on_drop(true);
    for (key, value) in env {
        child.env(
            key,
            expand_at_connect(settings, &format!("env.{key}"), value)?,
        );
    }
    let mut wrapped = CommandWrap::from(child);
    wrapped.wrap(ProcessGroup::leader());
    let (transport, stderr, process_group) =
        ChildTransport::spawn(wrapped).map_err(|e| McpError::Spawn {
            server: settings.name.clone(),
            command: command.to_string(),
            detail: e.to_string(),
        })?;
    if let Some(stderr) = stderr {
        tokio::spawn(forward_stderr(settings.name.clone(), stderr));
    }
    Ok((transport, process_group))
}

fn http_transport(
    settings: &ServerSettings,
    url: &str,
    headers: &BTreeMap<String, String>,
    bearer_token: Option<&SecretString>,
    resolved: Option<&Resolved>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let at = format!("headers.{name}");
        let Some(value) = with_caller(settings, &at, value, resolved)? else {
            continue;
        };
        let bad = |detail: String| McpError::Config {
            server: settings.name.clone(),
            detail: format!("{at}: {detail}"),
        };
        let header_name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| bad(format!("invalid header name ({e})")))?;
        let mut header_value = reqwest::header::HeaderValue::from_str(&value)
            .map_err(|_| bad("invalid header value".into()))?;
        header_value.set_sensitive(caller::uses_secret(headers.get(name).map_or("", |v| v)));
        custom.insert(header_name, header_value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    if let Some(token) = bearer_token
        && let Some(token) = with_caller(settings, "bearerToken", token.expose_secret(), resolved)?
    {
        config = config.auth_header(token);
    }
    Ok(StreamableHttpClientTransport::from_config(config))
}

/// A header value expanded from the environment, then its caller placeholders filled from
/// `resolved`; `None` for a value that needs a caller on the shared connection (no caller).
fn with_caller(
    settings: &ServerSettings,
    key: &str,
    value: &str,
    resolved: Option<&Resolved>,
) -> Result<Option<String>, McpError> {
    let expanded = expand_at_connect(settings, key, value)?;
    if !caller::uses_caller(&expanded) {
        return Ok(Some(expanded));
    }
    let Some(resolved) = resolved else {
        return Ok(None);
    };
    caller::render(&expanded, resolved, str::to_string)
        .map(Some)
        .map_err(|error| McpError::Config {
            server: settings.name.clone(),
            detail: format!("mcpServers.{}.{key}: {error}", settings.name),
        })
}

/// Expands `${VAR}` / `${VAR:-default}` in one `env`, `headers` or `bearerToken` value from the process
/// environment; a missing variable names the server and key.
fn expand_at_connect(
    settings: &ServerSettings,
    key: &str,
    value: &str,
) -> Result<String, McpError> {
    let mut text = Value::String(value.to_string());
    let lookup = |name: &str| std::env::var(name).ok();
    let key_path = format!("mcpServers.{}.{key}", settings.name);
    expand::expand_layer(&mut text, "the environment", &lookup).map_err(|error| {
        let detail = match error {
            expand::ExpandError::MissingVariable(missing) => format!(
                "{key_path}: ${{{}}} is not set in agentd's environment",
                missing.variable
            ),
            expand::ExpandError::Malformed { detail, .. } => {
                format!("{key_path}: malformed placeholder: {detail}")
            }
        };
        McpError::Config {
            server: settings.name.clone(),
            detail,
        }
    })?;
    Ok(text.as_str().unwrap_or_default().to_string())
}

/// Logs every stderr line of the child (split every 8 KiB) until it closes.
async fn forward_stderr(server: String, stderr: ChildStderr) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_STDERR_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end();
                if !text.is_empty() {
                    info!(target: "agentd::mcp::stderr", server = %server, "{text}");
                }
            }
            Err(error) => {
                debug!(server = %server, %error, "MCP server stderr closed");
                break;
            }
        }
    }
}

/// Ends every process left in the group (grandchildren included). The group's leader has
/// already been shut down by rmcp; an empty group is not an error.
pub(crate) fn kill_process_group(group: u32) {
    #[cfg(unix)]
    {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        if let Ok(raw) = i32::try_from(group) {
            let _ = killpg(Pid::from_raw(raw), Signal::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = group;
}
