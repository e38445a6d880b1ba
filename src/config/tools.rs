//! Typed configuration of the tools a session may call: `mcpServers`, `restTools` and `queues`
//! (contract §1 "MCP Tool Queues", §7 "Queue Validation"), and the checks that only make sense
//! on the merged configuration (required fields, names, queue references).
//!
//! Every field is optional at parse time because a layer may override a single key of an entry
//! defined in a lower layer; [`validate_tools`] runs on the merged result. Nothing here connects
//! to anything: `${VAR}` placeholders in `mcpServers.*.env` and `mcpServers.*.headers` are left
//! as written by the loader and expanded from the process environment when the server is
//! connected (`tools::mcp`).

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;

use super::caller;
use super::duration::{CacheTtl, HumanDuration};
use super::{Config, ConfigError};

/// The queue every MCP server and REST tool uses unless it names another.
pub const DEFAULT_QUEUE: &str = "default";

/// The most times a failed tool call is tried again (seeds/002 §8: up to 3).
pub const MAX_TOOL_RETRIES: u8 = 3;

/// Namespaces agentd owns; an MCP server may not take them.
const RESERVED_NAMESPACES: [&str; 3] = ["agent", "rest", "a2a"];

/// How agentd reaches an MCP server.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    #[serde(alias = "local")]
    Stdio,
    /// The streamable HTTP transport.
    #[serde(alias = "remote", alias = "streamable-http")]
    Http,
}

impl McpTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
        }
    }
}

/// `mcpServers.<name>`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerConfig {
    /// `stdio` or `http`; inferred from `url` (http) or `command` (stdio) when absent.
    #[serde(rename = "type")]
    pub transport: Option<McpTransport>,
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment of the child; `${VAR}` is expanded at connect time.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub url: Option<String>,
    /// Extra HTTP headers; `${VAR}` is expanded at connect time.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Sent as `Authorization: Bearer <token>`.
    pub bearer_token: Option<SecretString>,
    /// Tool names offered to the model (`*` or `any`: all); case-insensitive.
    pub tools_allowed: Option<Vec<String>>,
    /// Tool names never offered, applied after `toolsAllowed`.
    #[serde(default)]
    pub tools_denied: Vec<String>,
    /// The queue bounding concurrent calls (default `default`).
    pub queue: Option<String>,
    /// `false` ignores the entry entirely.
    pub enabled: Option<bool>,
    /// `true` (default): failing to start at boot stops agentd (exit 3). `false`: agentd starts
    /// without it and keeps reconnecting in the background.
    pub required: Option<bool>,
    /// Limit for starting and initialising the server, listing its tools included (default 30s).
    pub init_timeout: Option<HumanDuration>,
    /// Upper bound of one tool call, below the agent's `toolTimeout` when smaller.
    pub request_timeout: Option<HumanDuration>,
    /// `true` or a list of tool names: those calls wait for a person's approval (SPEC §8).
    pub require_approval: Option<super::approvals::RequireApproval>,
    /// How long results of its tools are cached (`off`, milliseconds or `30s`, `5m`, `1h`…;
    /// default off). Empty and failed results never are.
    pub cache: Option<CacheTtl>,
    /// Per-tool cache TTLs (the tool's own name, without the namespace), over `cache`.
    #[serde(default)]
    pub tools_cache: BTreeMap<String, CacheTtl>,
    /// A call that fails in transport or times out is tried again up to this many times
    /// (0 to 3, default 0), with exponential backoff and full jitter. A tool's own error is not.
    #[serde(default)]
    pub retries: u8,
}

impl McpServerConfig {
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    pub fn is_required(&self) -> bool {
        self.required.unwrap_or(true)
    }

    pub fn queue_name(&self) -> &str {
        self.queue.as_deref().unwrap_or(DEFAULT_QUEUE)
    }

    /// The transport, inferred when `type` is absent (`url` → http, else stdio).
    pub fn transport(&self) -> McpTransport {
        self.transport.unwrap_or(if self.url.is_some() {
            McpTransport::Http
        } else {
            McpTransport::Stdio
        })
    }
}

/// `a2aAgents.<name>`: a remote A2A agent offered as the tool `a2a__<name>`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct A2aAgentConfig {
    /// The agent's base URL: its card is at `<url>/.well-known/agent-card.json`.
    pub url: Option<String>,
    /// Extra HTTP headers of every request (e.g. `Authorization`); `${VAR}` expands at load.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Limit of one call, below the agent's `toolTimeout` when smaller.
    pub timeout: Option<HumanDuration>,
    /// `false` ignores the entry entirely.
    pub enabled: Option<bool>,
    /// A call that fails in transport or times out is tried again up to this many times
    /// (0 to 3, default 0), with exponential backoff and full jitter. A tool's own error is not.
    #[serde(default)]
    pub retries: u8,
}

impl A2aAgentConfig {
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// HTTP methods a REST tool may use.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum RestMethod {
    #[default]
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

/// `restTools.<name>`, offered as the tool `rest__<name>`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestToolConfig {
    pub description: Option<String>,
    pub method: Option<RestMethod>,
    /// May hold `${parameters.x}` placeholders (URL-encoded when substituted).
    pub url: Option<String>,
    /// Values may hold `${parameters.x}` placeholders (substituted as text).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// JSON schema of the arguments; the model sees it and calls are validated against it.
    pub parameters_schema: Option<Value>,
    /// The request body; a string that is exactly one `${parameters.x}` becomes that
    /// parameter's raw JSON value.
    pub body_template: Option<Value>,
    pub queue: Option<String>,
    /// Limit of one request, below the agent's `toolTimeout` when smaller.
    pub timeout: Option<HumanDuration>,
    pub enabled: Option<bool>,
    /// `true`: calls wait for a person's approval (SPEC §8).
    pub require_approval: Option<super::approvals::RequireApproval>,
    /// How long results of the tool are cached (`off`, milliseconds or `30s`, `5m`, `1h`…;
    /// default off). Empty and failed results never are.
    pub cache: Option<CacheTtl>,
    /// A call that fails in transport or times out is tried again up to this many times
    /// (0 to 3, default 0), with exponential backoff and full jitter. A tool's own error is not.
    #[serde(default)]
    pub retries: u8,
}

impl RestToolConfig {
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    pub fn queue_name(&self) -> &str {
        self.queue.as_deref().unwrap_or(DEFAULT_QUEUE)
    }
}

/// `openapiSpecs.<name>`: every operation of an OpenAPI 3 document becomes the tool
/// `openapi__<name>__<operationId>`; an agent lists `openapi__<name>` in its `tools`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenApiSpecConfig {
    /// A JSON or YAML file (relative to the config file naming it) or an `http(s)://` URL.
    pub spec: Option<String>,
    /// Where requests go; the document's first `servers` entry when absent.
    pub base_url: Option<String>,
    /// Sent with every request (API keys, …).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Only these operations (by `operationId`; `*` matches any run of characters).
    pub include: Option<Vec<String>>,
    /// Never these operations, applied after `include`.
    #[serde(default)]
    pub exclude: Vec<String>,
    pub queue: Option<String>,
    /// Limit of one request, below the agent's `toolTimeout` when smaller.
    pub timeout: Option<HumanDuration>,
    pub enabled: Option<bool>,
    /// How long results of its operations are cached (`off`, milliseconds or `30s`, `5m`, `1h`…;
    /// default off). Empty and failed results never are.
    pub cache: Option<CacheTtl>,
    /// Per-tool cache TTLs (by `operationId`), over `cache`.
    #[serde(default)]
    pub tools_cache: BTreeMap<String, CacheTtl>,
    /// A call that fails in transport or times out is tried again up to this many times
    /// (0 to 3, default 0), with exponential backoff and full jitter. A tool's own error is not.
    #[serde(default)]
    pub retries: u8,
}

impl OpenApiSpecConfig {
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    pub fn queue_name(&self) -> &str {
        self.queue.as_deref().unwrap_or(DEFAULT_QUEUE)
    }

    /// Whether the operation `id` is offered after `include` and `exclude`.
    pub fn offers(&self, id: &str) -> bool {
        let included = self
            .include
            .as_ref()
            .is_none_or(|patterns| patterns.iter().any(|p| wildcard_match(p, id)));
        included && !self.exclude.iter().any(|p| wildcard_match(p, id))
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            let Some(rest) = text.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|i| rest.is_char_boundary(*i))
                .any(|i| wildcard_match(tail, &rest[i..]))
        }
    }
}

/// `queues.<name>`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueueConfig {
    /// How many calls bound to this queue may run at once.
    pub concurrent: usize,
}

/// Checks the merged `mcpServers`, `restTools` and `queues`: names, required fields per
/// transport, filters, and that every queue a tool names exists (`default` always does).
pub fn validate_tools(config: &Config, file: &str) -> Result<(), ConfigError> {
    let invalid = |path: String, message: String| ConfigError::Invalid {
        file: file.to_string(),
        path,
        message,
    };
    for (name, queue) in &config.queues {
        check_name(name).map_err(|m| invalid(format!("queues.{name}"), m))?;
        if queue.concurrent == 0 {
            return Err(invalid(
                format!("queues.{name}.concurrent"),
                "must be at least 1".into(),
            ));
        }
    }
    let queue_exists = |queue: &str| queue == DEFAULT_QUEUE || config.queues.contains_key(queue);
    for (name, server) in config.mcp_servers.iter().filter(|(_, s)| s.is_enabled()) {
        let at = |key: &str| format!("mcpServers.{name}.{key}");
        check_name(name).map_err(|m| invalid(format!("mcpServers.{name}"), m))?;
        if RESERVED_NAMESPACES.contains(&name.as_str()) {
            return Err(invalid(
                format!("mcpServers.{name}"),
                format!("the name {name:?} is reserved for agentd's own tools"),
            ));
        }
        check_transport_fields(server).map_err(|(key, m)| invalid(at(key), m))?;
        check_mcp_caller(server).map_err(|(key, m)| invalid(at(&key), m))?;
        check_filters(server).map_err(|(key, m)| invalid(at(key), m))?;
        check_retries(server.retries).map_err(|m| invalid(at("retries"), m))?;
        if !queue_exists(server.queue_name()) {
            return Err(invalid(at("queue"), missing_queue(server.queue_name())));
        }
    }
    for (name, spec) in config.openapi_specs.iter().filter(|(_, s)| s.is_enabled()) {
        let at = |key: &str| format!("openapiSpecs.{name}.{key}");
        check_name(name).map_err(|m| invalid(format!("openapiSpecs.{name}"), m))?;
        match spec.spec.as_deref() {
            None => return Err(invalid(at("spec"), "is required: a file or a URL".into())),
            Some(url) if url.contains("://") => {
                if let Some(problem) = url_problem(url) {
                    return Err(invalid(at("spec"), problem));
                }
            }
            Some(_) => {}
        }
        if let Some(problem) = spec.base_url.as_deref().and_then(url_problem) {
            return Err(invalid(at("baseUrl"), problem));
        }
        if spec.base_url.as_deref().is_some_and(caller::uses_caller) {
            return Err(invalid(at("baseUrl"), CALLER_ONLY_IN_HEADERS.into()));
        }
        for (header, value) in &spec.headers {
            caller::check_template(value, true)
                .map_err(|m| invalid(at(&format!("headers.{header}")), m))?;
        }
        check_retries(spec.retries).map_err(|m| invalid(at("retries"), m))?;
        if !queue_exists(spec.queue_name()) {
            return Err(invalid(at("queue"), missing_queue(spec.queue_name())));
        }
    }
    for (name, tool) in config.rest_tools.iter().filter(|(_, t)| t.is_enabled()) {
        let at = |key: &str| format!("restTools.{name}.{key}");
        check_name(name).map_err(|m| invalid(format!("restTools.{name}"), m))?;
        match tool.url.as_deref() {
            None => return Err(invalid(at("url"), "is required".into())),
            Some(url) => {
                if let Some(problem) = url_problem(url) {
                    return Err(invalid(at("url"), problem));
                }
            }
        }
        if let Some(url) = tool.url.as_deref() {
            caller::check_template(url, false).map_err(|m| invalid(at("url"), m))?;
        }
        for (header, value) in &tool.headers {
            caller::check_template(value, true)
                .map_err(|m| invalid(at(&format!("headers.{header}")), m))?;
        }
        if tool.body_template.as_ref().is_some_and(json_uses_caller) {
            return Err(invalid(
                at("bodyTemplate"),
                "`${caller.…}` may be used in the url (the user id) and headers, not the body"
                    .into(),
            ));
        }
        if let Some(schema) = &tool.parameters_schema
            && !schema.is_object()
        {
            return Err(invalid(
                at("parametersSchema"),
                "must be a JSON schema object".into(),
            ));
        }
        if !queue_exists(tool.queue_name()) {
            return Err(invalid(at("queue"), missing_queue(tool.queue_name())));
        }
        check_retries(tool.retries).map_err(|m| invalid(at("retries"), m))?;
    }
    for (name, agent) in config.a2a_agents.iter().filter(|(_, a)| a.is_enabled()) {
        let at = |key: &str| format!("a2aAgents.{name}.{key}");
        check_name(name).map_err(|m| invalid(format!("a2aAgents.{name}"), m))?;
        check_retries(agent.retries).map_err(|m| invalid(at("retries"), m))?;
        if let Some(header) = agent.headers.iter().find(|(_, v)| caller::uses_caller(v)) {
            return Err(invalid(
                at(&format!("headers.{}", header.0)),
                "`${caller.…}` is not supported for remote A2A agents".into(),
            ));
        }
        match agent.url.as_deref() {
            None => return Err(invalid(at("url"), "is required".into())),
            Some(url) => {
                if let Some(problem) = url_problem(url) {
                    return Err(invalid(at("url"), problem));
                }
            }
        }
    }
    Ok(())
}

/// Retries are bounded: a tool that fails four times in a row is down, not flaky.
fn check_retries(retries: u8) -> Result<(), String> {
    if retries > MAX_TOOL_RETRIES {
        return Err(format!(
            "must be 0 to {MAX_TOOL_RETRIES} (tries after the first), not {retries}"
        ));
    }
    Ok(())
}

fn missing_queue(queue: &str) -> String {
    format!("queue {queue:?} is not defined in `queues` (defined implicitly: {DEFAULT_QUEUE:?})")
}

/// Names become tool-name prefixes (`name__tool`), so they are plain identifiers without `__`.
fn check_name(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plain || name.contains("__") {
        return Err(format!(
            "the name {name:?} must use only letters, digits, `-` and `_`, without `__`"
        ));
    }
    Ok(())
}

fn is_http_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

/// Why `url` cannot be an MCP server's or REST tool's address, if it cannot.
fn url_problem(url: &str) -> Option<String> {
    if !is_http_url(url) {
        return Some(format!("{url:?} must start with http:// or https://"));
    }
    match reqwest::Url::parse(url) {
        Err(error) => Some(format!("{url:?} is not a valid URL: {error}")),
        Ok(parsed) if parsed.host_str().is_none_or(str::is_empty) => {
            Some(format!("{url:?} names no host"))
        }
        Ok(_) => None,
    }
}

fn check_transport_fields(server: &McpServerConfig) -> Result<(), (&'static str, String)> {
    match server.transport() {
        McpTransport::Stdio => {
            if server
                .command
                .as_deref()
                .is_none_or(|c| c.trim().is_empty())
            {
                return Err(("command", "is required for a stdio server".into()));
            }
            for (key, set) in [
                ("url", server.url.is_some()),
                ("headers", !server.headers.is_empty()),
                ("bearerToken", server.bearer_token.is_some()),
            ] {
                if set {
                    return Err((key, "applies only to http servers".into()));
                }
            }
        }
        McpTransport::Http => {
            match server.url.as_deref() {
                None => return Err(("url", "is required for an http server".into())),
                Some(url) => {
                    if let Some(problem) = url_problem(url) {
                        return Err(("url", problem));
                    }
                }
            }
            for (key, set) in [
                ("command", server.command.is_some()),
                ("args", !server.args.is_empty()),
                ("env", !server.env.is_empty()),
            ] {
                if set {
                    return Err((key, "applies only to stdio servers".into()));
                }
            }
        }
    }
    Ok(())
}

const CALLER_ONLY_IN_HEADERS: &str =
    "`${caller.…}` may only be used in headers here (a URL is shown in errors and logs)";

/// Whether any string in a body template holds a caller placeholder.
fn json_uses_caller(value: &Value) -> bool {
    match value {
        Value::String(text) => caller::uses_caller(text),
        Value::Array(items) => items.iter().any(json_uses_caller),
        Value::Object(fields) => fields.values().any(json_uses_caller),
        _ => false,
    }
}

/// `${caller.…}` in an MCP server: well formed in an http server's `headers` and
/// `bearerToken` (each user then gets a connection of their own); refused in a stdio server,
/// whose one process serves every user, and in the url.
fn check_mcp_caller(server: &McpServerConfig) -> Result<(), (String, String)> {
    use secrecy::ExposeSecret;
    match server.transport() {
        McpTransport::Stdio => {
            let places = server
                .command
                .iter()
                .map(|c| ("command".to_string(), c.as_str()))
                .chain(
                    server
                        .args
                        .iter()
                        .enumerate()
                        .map(|(i, a)| (format!("args[{i}]"), a.as_str())),
                )
                .chain(
                    server
                        .env
                        .iter()
                        .map(|(k, v)| (format!("env.{k}"), v.as_str())),
                );
            for (key, value) in places {
                if caller::uses_caller(value) {
                    return Err((
                        key,
                        "`${caller.…}` cannot be used by a stdio server: its one process serves \
                         every user (use an http server, which gets a connection per user)"
                            .into(),
                    ));
                }
            }
        }
        McpTransport::Http => {
            if server.url.as_deref().is_some_and(caller::uses_caller) {
                return Err(("url".into(), CALLER_ONLY_IN_HEADERS.into()));
            }
            for (name, value) in &server.headers {
                caller::check_template(value, true).map_err(|m| (format!("headers.{name}"), m))?;
            }
            if let Some(token) = &server.bearer_token {
                caller::check_template(token.expose_secret(), true)
                    .map_err(|m| ("bearerToken".to_string(), m))?;
            }
        }
    }
    Ok(())
}

fn check_filters(server: &McpServerConfig) -> Result<(), (&'static str, String)> {
    let lists = [
        (
            "toolsAllowed",
            server.tools_allowed.as_deref().unwrap_or(&[]),
        ),
        ("toolsDenied", server.tools_denied.as_slice()),
    ];
    for (key, list) in lists {
        if list.iter().any(|entry| entry.trim().is_empty()) {
            return Err((key, "entries must not be empty".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::parse_config;
    use super::*;

    fn validated(value: Value) -> Result<Config, String> {
        let config = parse_config(value, "t.json").map_err(|e| e.to_string())?;
        validate_tools(&config, "t.json").map_err(|e| e.to_string())?;
        Ok(config)
    }

    #[test]
    fn parses_every_server_field() {
        let config = validated(
            json!({"queues": {"slow": {"concurrent": 2}}, "mcpServers": {
            "fs": {"type": "stdio", "command": "srv", "args": ["-v"], "env": {"K": "${K}"},
                   "toolsAllowed": ["read"], "toolsDenied": ["*"], "queue": "slow",
                   "enabled": true, "required": false, "initTimeout": "5s", "requestTimeout": 2000},
            "web": {"url": "https://x/mcp", "headers": {"X-A": "b"}, "bearerToken": "t"}}}),
        )
        .expect("valid");
        let fs = &config.mcp_servers["fs"];
        assert_eq!(fs.transport(), McpTransport::Stdio);
        assert_eq!(fs.env["K"], "${K}");
        assert!(!fs.is_required());
        assert_eq!(fs.queue_name(), "slow");
        assert_eq!(
            fs.request_timeout.map(|d| d.0),
            Some(std::time::Duration::from_secs(2))
        );
        let web = &config.mcp_servers["web"];
        assert_eq!(web.transport(), McpTransport::Http);
        assert_eq!(web.queue_name(), DEFAULT_QUEUE);
    }

    #[test]
    fn unknown_server_key_names_its_path() {
        let err =
            validated(json!({"mcpServers": {"fs": {"command": "x", "shared": true}}})).unwrap_err();
        assert!(
            err.contains("mcpServers.fs.shared") && err.contains("unknown field"),
            "{err}"
        );
    }

    #[test]
    fn unsupported_transport_is_named() {
        let err = validated(json!({"mcpServers": {"fs": {"type": "websocket", "url": "ws://x"}}}))
            .unwrap_err();
        assert!(err.contains("mcpServers.fs.type"), "{err}");
    }

    #[test]
    fn missing_queue_is_named() {
        let err = validated(json!({"mcpServers": {"fs": {"command": "x", "queue": "nope"}}}))
            .unwrap_err();
        assert!(
            err.contains("mcpServers.fs.queue") && err.contains("\"nope\""),
            "{err}"
        );
        let err = validated(json!({"restTools": {"t": {"url": "http://x", "queue": "gone"}}}))
            .unwrap_err();
        assert!(
            err.contains("restTools.t.queue") && err.contains("\"gone\""),
            "{err}"
        );
    }

    #[test]
    fn transport_fields_are_checked() {
        for (server, path) in [
            (json!({"type": "stdio"}), "mcpServers.s.command"),
            (
                json!({"type": "stdio", "command": "x", "url": "http://x"}),
                "mcpServers.s.url",
            ),
            (
                json!({"command": "x", "url": "http://x"}),
                "mcpServers.s.command",
            ),
            (json!({"type": "http"}), "mcpServers.s.url"),
            (json!({"url": "ftp://x"}), "mcpServers.s.url"),
            (
                json!({"url": "http://exa mple.com/mcp"}),
                "mcpServers.s.url",
            ),
            (json!({"url": "http://:8080/mcp"}), "mcpServers.s.url"),
            (
                json!({"url": "http://x", "env": {"A": "b"}}),
                "mcpServers.s.env",
            ),
            (
                json!({"command": "x", "toolsDenied": [""]}),
                "mcpServers.s.toolsDenied",
            ),
        ] {
            let err = validated(json!({"mcpServers": {"s": server}})).unwrap_err();
            assert!(err.contains(path), "{path}: {err}");
        }
    }

    #[test]
    fn names_must_be_plain_and_unreserved() {
        for name in ["a__b", "a.b", "agent", "rest"] {
            let err = validated(json!({"mcpServers": {name: {"command": "x"}}})).unwrap_err();
            assert!(err.contains(&format!("mcpServers.{name}")), "{err}");
        }
    }

    #[test]
    fn disabled_entries_are_not_checked() {
        validated(json!({"mcpServers": {"s": {"enabled": false}}})).expect("disabled is fine");
    }

    #[test]
    fn queue_concurrency_must_be_positive() {
        let err = validated(json!({"queues": {"q": {"concurrent": 0}}})).unwrap_err();
        assert!(err.contains("queues.q.concurrent"), "{err}");
        validated(json!({"queues": {"q": {"concurrent": 1}}})).expect("1 is the minimum");
    }

    #[test]
    fn rest_tools_need_an_http_url_and_an_object_schema() {
        let err = validated(json!({"restTools": {"t": {}}})).unwrap_err();
        assert!(err.contains("restTools.t.url"), "{err}");
        let err = validated(json!({"restTools": {"t": {"url": "https://[::1/x"}}})).unwrap_err();
        assert!(
            err.contains("restTools.t.url") && err.contains("not a valid URL"),
            "{err}"
        );
        validated(json!({"restTools": {"t": {"url": "https://wx.example.com/now?city=${parameters.city}"}}}))
            .expect("a parameter placeholder is a valid URL");
        let err =
            validated(json!({"restTools": {"t": {"url": "http://x", "parametersSchema": 3}}}))
                .unwrap_err();
        assert!(err.contains("restTools.t.parametersSchema"), "{err}");
        let err = validated(json!({"restTools": {"t": {"url": "http://x", "method": "FETCH"}}}))
            .unwrap_err();
        assert!(err.contains("restTools.t.method"), "{err}");
    }

    #[test]
    fn a2a_agents_need_an_http_url_and_a_plain_name() {
        let err = validated(json!({"a2aAgents": {"qa": {}}})).unwrap_err();
        assert!(
            err.contains("a2aAgents.qa.url") && err.contains("required"),
            "{err}"
        );
        let err = validated(json!({"a2aAgents": {"qa": {"url": "ftp://x"}}})).unwrap_err();
        assert!(
            err.contains("a2aAgents.qa.url") && err.contains("http://"),
            "{err}"
        );
        let err = validated(json!({"a2aAgents": {"q__a": {"url": "http://x"}}})).unwrap_err();
        assert!(err.contains("a2aAgents.q__a"), "{err}");
        let err =
            validated(json!({"a2aAgents": {"qa": {"url": "http://x", "token": "t"}}})).unwrap_err();
        assert!(err.contains("token"), "{err}");
        validated(json!({"a2aAgents": {"qa": {"url": "http://x/a2a/qa", "headers": {"Authorization": "Bearer k"}, "timeout": "30s"}}}))
            .expect("a remote agent with headers and a timeout");
        validated(json!({"a2aAgents": {"qa": {"enabled": false}}}))
            .expect("a disabled entry needs nothing");
    }

    #[test]
    fn caller_placeholders_are_checked_where_they_stand() {
        validated(json!({
            "restTools": {"gh": {"url": "https://api.example/u/${caller.userId}",
                "headers": {"Authorization": "Bearer ${caller.secret.GITHUB_TOKEN}"}}},
            "openapiSpecs": {"api": {"spec": "x.yaml",
                "headers": {"X-Key": "${caller.secret.API-KEY}"}}},
            "mcpServers": {"web": {"url": "https://x/mcp",
                "headers": {"X-User": "${caller.userId}"}, "bearerToken": "${caller.secret.T}"}}
        }))
        .expect("user ids and secrets in headers, the user id in a REST url");
        let refused = [
            (
                json!({"mcpServers": {"fs": {"command": "srv", "env": {"TOKEN": "${caller.secret.T}"}}}}),
                "mcpServers.fs.env.TOKEN",
                "stdio",
            ),
            (
                json!({"mcpServers": {"fs": {"command": "srv", "args": ["--user", "${caller.userId}"]}}}),
                "mcpServers.fs.args[1]",
                "stdio",
            ),
            (
                json!({"mcpServers": {"web": {"url": "https://x/mcp", "headers": {"A": "${caller.email}"}}}}),
                "mcpServers.web.headers.A",
                "caller.userId",
            ),
            (
                json!({"restTools": {"t": {"url": "https://h/${caller.secret.T}"}}}),
                "restTools.t.url",
                "only be used in headers",
            ),
            (
                json!({"restTools": {"t": {"url": "https://h/", "headers": {"A": "${caller.secret.bad name}"}}}}),
                "restTools.t.headers.A",
                "secret name",
            ),
            (
                json!({"restTools": {"t": {"url": "https://h/", "bodyTemplate": {"u": "${caller.userId}"}}}}),
                "restTools.t.bodyTemplate",
                "not the body",
            ),
            (
                json!({"a2aAgents": {"qa": {"url": "https://h/a2a", "headers": {"A": "${caller.userId}"}}}}),
                "a2aAgents.qa.headers.A",
                "not supported",
            ),
        ];
        for (config, path, words) in refused {
            let error = validated(config).expect_err(path);
            assert!(
                error.contains(path) && error.contains(words),
                "{path}: {error}"
            );
        }
    }
}
