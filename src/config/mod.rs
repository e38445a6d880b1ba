//! Configuration: the layered JSON config (contract §7, SPEC §2), per-layer `.ai-agent.env`,
//! `${VAR}` expansion, `.ai` agent files and the registry of agents they define.
//!
//! Everything here is pure loading and validation: no network, no LLM, no store. A config error
//! always names the file, the key path and what is wrong.

pub mod agent_file;
pub mod approvals;
pub mod attachments;
pub mod cache;
pub mod caller;
pub mod cors;
pub mod duration;
pub mod env_file;
pub mod expand;
pub mod identity;
pub mod key_limits;
pub mod layers;
pub mod model_input;
pub mod models;
pub mod owner;
pub mod registry;
pub mod retention;
pub mod schedules;
pub mod secrets;
mod sub_agents;
pub mod tools;
pub mod webhooks;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;

pub use crate::llm::settings::model_settings::{self, ModelConfig, ModelOverrides, ParamOverride};
pub use crate::llm::settings::provider::{ProviderConfig, ProviderKind};
pub use crate::llm::settings::reasoning::{
    self, ReasoningLevel, ReasoningMapping, ReasoningTokens, ReasoningValue,
};
pub use crate::llm::settings::sampling::{self, SamplingParams};
pub use crate::vocabulary::busy::BusyPolicy;
use duration::HumanDuration;
pub use registry::{AgentRegistry, AgentSpec, RegistryError, Target};
pub use tools::{A2aAgentConfig, McpServerConfig, McpTransport, QueueConfig, RestToolConfig};

/// The whole configuration after merging every layer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// MCP servers; connected by the tools layer.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    #[serde(default)]
    pub rest_tools: BTreeMap<String, RestToolConfig>,
    /// Remote A2A agents, each offered as the tool `a2a__<name>`.
    #[serde(default)]
    pub a2a_agents: BTreeMap<String, A2aAgentConfig>,
    /// OpenAPI documents whose operations are tools (`openapi__<name>__<operationId>`).
    #[serde(default)]
    pub openapi_specs: BTreeMap<String, tools::OpenApiSpecConfig>,
    #[serde(default)]
    pub queues: BTreeMap<String, QueueConfig>,
    #[serde(default)]
    pub defaults: Defaults,
    /// `pricing.<provider>.<model>`: token prices; `pricing.tools.<name>`: tool call prices.
    #[serde(default)]
    pub pricing: models::Pricing,
    /// The response cache (which agents are cached is their `cache` frontmatter).
    #[serde(default)]
    pub cache: cache::CacheConfig,
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub auth: AuthConfig,
    #[serde(default)]
    pub store: StoreConfig,
    /// The key that encrypts users' tool secrets (`PUT /api/{user_id}/secrets/{name}`).
    #[serde(default)]
    pub secrets: secrets::SecretsConfig,
    /// Directories holding `.ai` files; relative entries are resolved against the directory of
    /// the config file that named them.
    #[serde(default)]
    pub agents: Vec<PathBuf>,
    /// How long each kind of data is kept (SPEC §14).
    #[serde(default)]
    pub retention: retention::RetentionConfig,
    /// Receivers told when runs end, fail, wait or reach their budget (SPEC §13).
    #[serde(default)]
    pub webhooks: Vec<webhooks::WebhookConfig>,
    /// How webhook receivers are reached.
    #[serde(default)]
    pub webhook_delivery: webhooks::WebhookDelivery,
    /// Schedules kept in step with the config at every start (SPEC §13).
    #[serde(default)]
    pub schedules: Vec<schedules::ScheduleConfig>,
    /// Server-wide limits on what requests carry (`limits.attachments`, SPEC §11).
    #[serde(default)]
    pub limits: attachments::LimitsConfig,
}

/// Settings agents inherit when their frontmatter is silent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Defaults {
    /// `provider/model` targets for agents that name none.
    pub models: Option<Vec<String>>,
    pub max_turns: Option<u32>,
    pub max_tool_calls_per_turn: Option<u32>,
    pub max_retries: Option<u32>,
    pub llm_timeout: Option<HumanDuration>,
    pub tool_timeout: Option<HumanDuration>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub max_output_tokens: Option<u32>,
    pub repeat_penalty: Option<f64>,
    pub tool_response_max_bytes: Option<u64>,
    /// The most bytes one model response may carry (see [`AgentFrontmatter`]'s key).
    ///
    /// [`AgentFrontmatter`]: agent_file::AgentFrontmatter
    pub llm_response_max_bytes: Option<u64>,
    pub context_window: Option<u64>,
    pub context_window_buffer_tokens: Option<u64>,
    pub reasoning: Option<Value>,
    /// How long a tool call waits for approval (SPEC §8) when the agent does not say.
    pub approval_timeout: Option<HumanDuration>,
}

/// `telemetry`: log format and, when an endpoint is set, OpenTelemetry trace export.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TelemetryConfig {
    #[serde(default)]
    pub log_format: LogFormatSetting,
    pub otlp: Option<OtlpConfig>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormatSetting {
    /// `key=value` lines (the default).
    #[default]
    Logfmt,
    /// One JSON object per line.
    Json,
}

/// OTLP/HTTP (protobuf) export of spans to `endpoint` (e.g. `http://collector:4318/v1/traces`)
/// and of the GenAI client metrics to `metricsEndpoint` (default: `…/v1/metrics` beside it).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OtlpConfig {
    pub endpoint: String,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub service_name: Option<String>,
    #[serde(default)]
    pub metrics_endpoint: Option<String>,
    /// How often metrics are exported (default 60 000).
    #[serde(default)]
    pub metrics_interval_ms: Option<u64>,
    /// Whether `chat` spans carry the messages sent and received (off: they may hold personal
    /// data).
    #[serde(default)]
    pub capture_content: bool,
}

/// Whether a client that leaves a streamed run cancels it (`cancel`) or lets it finish (`continue`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDisconnect {
    #[default]
    Cancel,
    Continue,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: String,
    pub max_concurrent_sessions: usize,
    pub max_queued_sessions: usize,
    pub request_body_limit_bytes: usize,
    pub on_disconnect: OnDisconnect,
    pub keep_alive_seconds: u64,
    pub drain_seconds: u64,
    /// How often this process writes its heartbeat to the store (SPEC §7).
    pub heartbeat_seconds: u64,
    /// How long a process may miss heartbeats before another ends its runs `owner_lost`.
    pub owner_timeout_seconds: u64,
    /// Browser origins allowed to call agentd from other pages (CORS); empty allows none.
    pub cors_origins: Vec<cors::CorsOrigin>,
    /// How long a client may go without accepting bytes of a response before it counts as gone:
    /// its connection is closed and its run follows `onDisconnect`. A client that never reads
    /// would otherwise hold a session slot, and the shutdown, for as long as it likes.
    pub write_timeout_seconds: u64,
    /// How long a new connection may take to send its first request's headers, and the longest
    /// pause while a request's body is sent: half-sent requests must not hold descriptors.
    pub header_read_timeout_seconds: u64,
    /// How long a keep-alive connection may wait for its next request. Longer than the idle
    /// timeout of the proxies in front (60 s for nginx and most balancers), so a proxy never
    /// reuses a connection agentd is closing.
    pub idle_timeout_seconds: u64,
    /// Open client connections at once; past it a new connection is answered 503 `overloaded`
    /// and closed. `None`: half of the open-file limit above 512 descriptors kept for the
    /// store, MCP servers and logs (each stream also holds an upstream connection).
    pub max_connections: Option<usize>,
    /// How often `agentd serve` looks for changed config and agent files to reload them; 0
    /// turns the watch off (SIGHUP still reloads).
    pub reload_check_seconds: u64,
    /// The agent that answers a request whose `model` names no agent (Claude Code and other
    /// clients send their vendor's model names); `None`: such a request is a 404 naming the
    /// model. Checked against the agents when they load.
    pub default_agent: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            max_concurrent_sessions: 64,
            max_queued_sessions: 256,
            request_body_limit_bytes: 4 * 1024 * 1024,
            on_disconnect: OnDisconnect::Cancel,
            keep_alive_seconds: 15,
            drain_seconds: 30,
            heartbeat_seconds: 5,
            owner_timeout_seconds: 30,
            cors_origins: Vec::new(),
            write_timeout_seconds: 30,
            header_read_timeout_seconds: 10,
            idle_timeout_seconds: 75,
            max_connections: None,
            reload_check_seconds: 2,
            default_agent: None,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default)]
    pub keys: Vec<ApiKeyConfig>,
    /// OpenID Connect issuers whose JWT bearer tokens are accepted (SPEC §12).
    #[serde(default)]
    pub oidc: Vec<identity::OidcIssuerConfig>,
    #[serde(default)]
    pub disabled: bool,
}

impl AuthConfig {
    /// Whether callers must authenticate: keys or issuers configured, and auth not disabled.
    pub fn is_enforced(&self) -> bool {
        !self.disabled && (self.effective_keys().next().is_some() || !self.oidc.is_empty())
    }

    /// The keys in force: an entry whose key expanded to nothing (e.g. `${AGENTD_ADMIN_KEY:-}`
    /// with the variable unset) is no key at all.
    pub fn effective_keys(&self) -> impl Iterator<Item = &ApiKeyConfig> {
        self.keys_with_ids().map(|(key, _)| key)
    }

    /// The keys in force, each with the id logs know it by: its `id`, else `keys[N]`.
    pub fn keys_with_ids(&self) -> impl Iterator<Item = (&ApiKeyConfig, String)> {
        use secrecy::ExposeSecret;
        self.keys
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.key.expose_secret().trim().is_empty())
            .map(|(index, k)| (k, k.id.clone().unwrap_or_else(|| format!("keys[{index}]"))))
    }

    /// A key's `userId` must name a user, not a key's owner (`key:…`, [`owner`]).
    fn check_user_ids(&self, file: &str) -> Result<(), ConfigError> {
        for (index, key) in self.keys.iter().enumerate() {
            if let Some(user) = &key.user_id {
                owner::check_user_id(user).map_err(|message| ConfigError::Invalid {
                    file: file.to_string(),
                    path: format!("auth.keys[{index}].userId"),
                    message,
                })?;
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiKeyConfig {
    pub key: SecretString,
    /// How logs name this key (`key_id`); `keys[N]`, its place in the list, when unset.
    pub id: Option<String>,
    #[serde(default)]
    pub admin: bool,
    pub user_id: Option<String>,
    pub agents: Option<Vec<String>>,
    /// Its scopes (SPEC §12); unset: `admin` for an admin key, else its agents, `runs:read`
    /// and `keys:manage`.
    pub scopes: Option<Vec<String>>,
    /// Requests, concurrent runs and daily budgets of this key, counted across replicas.
    pub limits: Option<key_limits::KeyLimits>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sqlite://PATH` (default, created on first start) or `postgres://…`.
    pub url: String,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: "sqlite://agentd.db".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Layer(#[from] layers::LayerError),
    #[error("{file}: at {path}: {message}")]
    Invalid {
        file: String,
        path: String,
        message: String,
    },
    #[error(transparent)]
    Agent(#[from] registry::RegistryError),
}

/// Where to look for configuration layers.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--config F`, the highest layer; must exist when given.
    pub explicit: Option<PathBuf>,
    /// Directory of the agent file being run (`agentd run path/x.ai`).
    pub prompt_dir: Option<PathBuf>,
}

/// The merged configuration and the files it came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    /// The layer files that were found, highest priority first.
    pub files: Vec<PathBuf>,
    /// The merged layers as JSON, before parsing (what a reload compares).
    pub merged: Value,
}

/// Loads every layer of contract §7, validates each, and merges them.
pub fn load(options: &LoadOptions) -> Result<LoadedConfig, ConfigError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let binary_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let sources = layers::standard_sources(
        options.explicit.as_deref(),
        options.prompt_dir.as_deref(),
        &cwd,
        binary_dir.as_deref(),
        home.as_deref(),
    );
    let process_env = |name: &str| std::env::var(name).ok();
    let mut loaded = layers::load_layers(&sources, &process_env)?;
    for layer in &mut loaded {
        let file = layer.source.path.display().to_string();
        parse_config(layer.value.clone(), &file)?;
        if let Some(dir) = layer.source.path.parent() {
            resolve_agent_dirs(&mut layer.value, dir);
        }
    }
    let files = loaded.iter().map(|l| l.source.path.clone()).collect();
    let merged = layers::merge_layers(&loaded);
    let config = parse_config(merged.clone(), "merged configuration")?;
    tools::validate_tools(&config, "merged configuration")?;
    Ok(LoadedConfig {
        config,
        files,
        merged,
    })
}

/// Deserializes a (merged or single-layer) config value, naming the key path of any error.
pub fn parse_config(value: Value, file: &str) -> Result<Config, ConfigError> {
    let config: Config = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ConfigError::Invalid {
            file: file.to_string(),
            path,
            message: e.into_inner().to_string(),
        }
    })?;
    config.server.check_ownership_timing(file)?;
    config.server.check_connection_limits(file)?;
    config.pricing.check(file)?;
    config.secrets.check(file)?;
    config.auth.check_user_ids(file)?;
    identity::check(&config.auth, file)?;
    schedules::check(&config.schedules).map_err(|(path, message)| ConfigError::Invalid {
        file: file.to_string(),
        path,
        message,
    })?;
    webhooks::check(&config.webhooks, &config.webhook_delivery).map_err(|(path, message)| {
        ConfigError::Invalid {
            file: file.to_string(),
            path,
            message,
        }
    })?;
    config
        .retention
        .check()
        .map_err(|message| ConfigError::Invalid {
            file: file.to_string(),
            path: "retention".into(),
            message,
        })?;
    Ok(config)
}

/// Rewrites relative `agents` entries to be relative to the layer file's directory.
fn resolve_agent_dirs(layer: &mut Value, layer_dir: &Path) {
    resolve_spec_files(layer, layer_dir);
    let Some(entries) = layer.get_mut("agents").and_then(Value::as_array_mut) else {
        return;
    };
    for entry in entries {
        if let Some(text) = entry.as_str() {
            let path = Path::new(text);
            if path.is_relative() {
                *entry = Value::String(layer_dir.join(path).display().to_string());
            }
        }
    }
}

/// `openapiSpecs.*.spec` files named relative to the layer that names them.
fn resolve_spec_files(layer: &mut Value, layer_dir: &Path) {
    let Some(specs) = layer.get_mut("openapiSpecs").and_then(Value::as_object_mut) else {
        return;
    };
    for spec in specs.values_mut() {
        if let Some(Value::String(text)) = spec.get_mut("spec")
            && !text.contains("://")
            && Path::new(text.as_str()).is_relative()
        {
            *text = layer_dir.join(text.as_str()).display().to_string();
        }
    }
}

impl ServerConfig {
    /// A heartbeat of at least a second, and an owner timeout that at least two heartbeats fit
    /// in: otherwise a live process's runs would be taken from it.
    fn check_ownership_timing(&self, file: &str) -> Result<(), ConfigError> {
        let invalid = |path: &str, message: String| ConfigError::Invalid {
            file: file.to_string(),
            path: path.to_string(),
            message,
        };
        if self.heartbeat_seconds == 0 {
            return Err(invalid(
                "server.heartbeatSeconds",
                "must be at least 1".into(),
            ));
        }
        if self.owner_timeout_seconds < 2 * self.heartbeat_seconds {
            return Err(invalid(
                "server.ownerTimeoutSeconds",
                format!(
                    "{} is less than two heartbeats (server.heartbeatSeconds is {}): a live \
                     replica's runs would be ended as owner_lost",
                    self.owner_timeout_seconds, self.heartbeat_seconds
                ),
            ));
        }
        Ok(())
    }

    /// Connection timeouts of at least a second and a connection cap of at least one: zero
    /// would close every connection at once or refuse them all.
    fn check_connection_limits(&self, file: &str) -> Result<(), ConfigError> {
        let timeouts = [
            ("server.writeTimeoutSeconds", self.write_timeout_seconds),
            (
                "server.headerReadTimeoutSeconds",
                self.header_read_timeout_seconds,
            ),
            ("server.idleTimeoutSeconds", self.idle_timeout_seconds),
        ];
        let too_small = timeouts
            .into_iter()
            .map(|(path, value)| (path, value as usize))
            .chain(self.max_connections.map(|n| ("server.maxConnections", n)))
            .find(|(_, value)| *value == 0);
        match too_small {
            Some((path, _)) => Err(ConfigError::Invalid {
                file: file.to_string(),
                path: path.to_string(),
                message: "must be at least 1".into(),
            }),
            None => Ok(()),
        }
    }

    /// The listen address, or a config error naming `server.listen`.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen.parse().map_err(|e| ConfigError::Invalid {
            file: "configuration".into(),
            path: "server.listen".into(),
            message: format!(
                "{:?} is not an address like 127.0.0.1:8080 ({e})",
                self.listen
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_key_names_its_path() {
        let err = parse_config(json!({"server": {"listn": "x"}}), "a.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("a.json: at server.listn: unknown field `listn`"),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_names_its_path() {
        let err = parse_config(
            json!({"providers": {"p": {"type": "openai", "stream": "yes"}}}),
            "a.json",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("providers.p.stream"), "{err}");
    }

    #[test]
    fn defaults_apply_when_sections_are_missing() {
        let config = parse_config(json!({}), "x").expect("valid");
        assert_eq!(config.server.listen, "127.0.0.1:8080");
        assert_eq!(config.server.max_concurrent_sessions, 64);
        assert_eq!(config.store.url, "sqlite://agentd.db");
        assert_eq!(config.server.on_disconnect, OnDisconnect::Cancel);
    }

    #[test]
    fn connection_limits_of_zero_are_named() {
        for key in [
            "writeTimeoutSeconds",
            "headerReadTimeoutSeconds",
            "idleTimeoutSeconds",
            "maxConnections",
        ] {
            let err = parse_config(json!({"server": {key: 0}}), "a.json")
                .unwrap_err()
                .to_string();
            assert_eq!(err, format!("a.json: at server.{key}: must be at least 1"));
            parse_config(json!({"server": {key: 1}}), "a.json").expect("1 is valid");
        }
        let config = parse_config(json!({}), "x").expect("valid");
        assert_eq!(config.server.write_timeout_seconds, 30);
        assert_eq!(config.server.max_connections, None);
    }

    #[test]
    fn relative_agent_dirs_resolve_against_the_layer() {
        let mut layer = json!({"agents": ["agents", "/abs/dir"]});
        resolve_agent_dirs(&mut layer, Path::new("/etc/conf"));
        assert_eq!(layer["agents"], json!(["/etc/conf/agents", "/abs/dir"]));
    }

    #[test]
    fn bad_listen_address_is_named() {
        let config = parse_config(json!({"server": {"listen": "nowhere"}}), "x").expect("valid");
        assert!(
            config
                .server
                .listen_addr()
                .unwrap_err()
                .to_string()
                .contains("server.listen")
        );
    }
}
