//! OpenAPI tools (`openapiSpecs.<name>` → `openapi__<name>__<operationId>`): each operation of
//! an OpenAPI 3 document (JSON or YAML, a file or a URL) is a tool whose arguments are its path,
//! query and header parameters and its JSON `body`. A call validates the arguments, builds the
//! request against `baseUrl` (or the document's first server) within the tool's queue and
//! timeout, and returns the response text like a REST tool. This module never talks to an LLM.

pub mod document;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::caller::{self, Resolved, ToolCaller};
use super::policy::ToolPolicy;
use super::queue::{QueueError, ToolQueue, ToolQueues};
use super::rest::template::{as_text, percent_encode};
use super::rest::{HttpToolCall, read_capped, within_timeout};
use super::schema::{ArgumentSchema, checked_arguments};
use super::{ToolOutcome, ToolProvider, ToolReport};
use crate::config::tools::OpenApiSpecConfig;
use crate::llm::ToolDefinition;
use document::{DocumentError, MAX_TOOL_NAME_CHARS, Operation, ParameterIn};

/// The namespace of every OpenAPI tool.
pub const OPENAPI_NAMESPACE: &str = "openapi";
/// Largest document read.
const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    #[error("openapiSpecs.{spec}.spec: cannot read {source_name}: {detail}")]
    Read {
        spec: String,
        source_name: String,
        detail: String,
    },
    #[error("openapiSpecs.{spec}: {source_name} is neither JSON nor YAML: {detail}")]
    Parse {
        spec: String,
        source_name: String,
        detail: String,
    },
    #[error("openapiSpecs.{spec}: {source_name} {error}")]
    Document {
        spec: String,
        source_name: String,
        error: DocumentError,
    },
    #[error("openapiSpecs.{spec}.baseUrl: {detail}")]
    BaseUrl { spec: String, detail: String },
    #[error("openapiSpecs.{spec}.queue: {source}")]
    Queue { spec: String, source: QueueError },
    #[error("OpenAPI tools: cannot build the HTTP client: {0}")]
    Client(String),
}

/// A document as read, with where it came from.
pub struct LoadedDocument {
    pub source_name: String,
    pub document: Value,
}

/// Reads every enabled spec's document: files from disk, URLs over HTTP.
pub async fn load_documents(
    specs: &BTreeMap<String, OpenApiSpecConfig>,
) -> Result<BTreeMap<String, LoadedDocument>, OpenApiError> {
    let mut loaded = BTreeMap::new();
    for (name, spec) in specs.iter().filter(|(_, s)| s.is_enabled()) {
        let source = spec.spec.clone().unwrap_or_default();
        let text = if source.contains("://") {
            fetch(&source).await
        } else {
            read_file(&source)
        }
        .map_err(|detail| OpenApiError::Read {
            spec: name.clone(),
            source_name: source.clone(),
            detail,
        })?;
        loaded.insert(name.clone(), parse(name, source, &text)?);
    }
    Ok(loaded)
}

/// Reads the enabled specs that are files (for `agentd check`, which fetches nothing).
pub fn load_file_documents(
    specs: &BTreeMap<String, OpenApiSpecConfig>,
) -> Result<BTreeMap<String, LoadedDocument>, OpenApiError> {
    let mut loaded = BTreeMap::new();
    for (name, spec) in specs.iter().filter(|(_, s)| s.is_enabled()) {
        let source = spec.spec.clone().unwrap_or_default();
        if source.contains("://") {
            continue;
        }
        let text = read_file(&source).map_err(|detail| OpenApiError::Read {
            spec: name.clone(),
            source_name: source.clone(),
            detail,
        })?;
        loaded.insert(name.clone(), parse(name, source, &text)?);
    }
    Ok(loaded)
}

fn read_file(path: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > MAX_DOCUMENT_BYTES as u64 {
        return Err(format!("larger than {MAX_DOCUMENT_BYTES} bytes"));
    }
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

async fn fetch(url: &str) -> Result<String, String> {
    let response = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = read_capped(response).await?;
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    Ok(body)
}

fn parse(name: &str, source_name: String, text: &str) -> Result<LoadedDocument, OpenApiError> {
    // YAML 1.2 reads JSON too.
    let document: Value = serde_yaml_ng::from_str(text).map_err(|e| OpenApiError::Parse {
        spec: name.to_string(),
        source_name: source_name.clone(),
        detail: e.to_string(),
    })?;
    Ok(LoadedDocument {
        source_name,
        document,
    })
}

/// One operation as a tool.
struct OpenApiTool {
    operation: Operation,
    base_url: String,
    headers: BTreeMap<String, String>,
    schema: ArgumentSchema,
    queue: Arc<ToolQueue>,
    timeout: Option<Duration>,
    policy: ToolPolicy,
}

/// Every OpenAPI tool, by `<spec>__<operationId>`.
#[derive(Clone)]
pub struct OpenApiTools {
    client: reqwest::Client,
    tools: BTreeMap<String, Arc<OpenApiTool>>,
}

impl OpenApiTools {
    /// The tools of every enabled spec whose document is in `documents`.
    pub fn build(
        specs: &BTreeMap<String, OpenApiSpecConfig>,
        documents: &BTreeMap<String, LoadedDocument>,
        queues: &ToolQueues,
    ) -> Result<Self, OpenApiError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| OpenApiError::Client(e.to_string()))?;
        let mut tools = BTreeMap::new();
        for (name, loaded) in documents {
            let Some(spec) = specs.get(name) else {
                continue;
            };
            for (id, tool) in spec_tools(name, spec, loaded, queues)? {
                tools.insert(format!("{name}__{id}"), Arc::new(tool));
            }
        }
        Ok(Self { client, tools })
    }

    /// Whether the spec `name` has any tool.
    pub fn has_spec(&self, name: &str) -> bool {
        let prefix = format!("{name}__");
        self.tools.keys().any(|key| key.starts_with(&prefix))
    }

    /// The tools of the specs named, sharing this set's HTTP client.
    pub fn subset<'a>(&self, specs: impl IntoIterator<Item = &'a str>) -> Self {
        let prefixes: Vec<String> = specs.into_iter().map(|s| format!("{s}__")).collect();
        let tools = self
            .tools
            .iter()
            .filter(|(key, _)| prefixes.iter().any(|p| key.starts_with(p)))
            .map(|(key, tool)| (key.clone(), Arc::clone(tool)))
            .collect();
        Self {
            client: self.client.clone(),
            tools,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    async fn execute(
        &self,
        (name, tool): (&str, &OpenApiTool),
        arguments: Map<String, Value>,
        caller: &ToolCaller,
        report: &ToolReport,
    ) -> ToolOutcome {
        let templates = tool.headers.values().map(String::as_str);
        let tool_name = format!("{OPENAPI_NAMESPACE}__{name}");
        let call = HttpToolCall {
            caller,
            queue: &tool.queue,
            tool: &tool_name,
            report,
        };
        call.run(templates, |resolved| {
            self.request(tool, &arguments, resolved)
        })
        .await
    }

    fn request(
        &self,
        tool: &OpenApiTool,
        arguments: &Map<String, Value>,
        resolved: &Resolved,
    ) -> Result<reqwest::RequestBuilder, String> {
        let operation = &tool.operation;
        let mut path = operation.path.clone();
        let mut query: Vec<(String, String)> = Vec::new();
        let mut headers: Vec<(String, String)> = Vec::new();
        for parameter in &operation.parameters {
            let Some(value) = arguments.get(&parameter.name) else {
                continue;
            };
            match parameter.location {
                ParameterIn::Path => {
                    let placeholder = format!("{{{}}}", parameter.name);
                    path = path.replace(&placeholder, &percent_encode(&as_text(value)));
                }
                ParameterIn::Query => match value {
                    Value::Array(items) => query.extend(
                        items
                            .iter()
                            .map(|item| (parameter.name.clone(), as_text(item))),
                    ),
                    other => query.push((parameter.name.clone(), as_text(other))),
                },
                ParameterIn::Header => headers.push((parameter.name.clone(), as_text(value))),
            }
        }
        let mut url = format!("{}{path}", tool.base_url.trim_end_matches('/'));
        if !query.is_empty() {
            let encoded = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(&query)
                .finish();
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&encoded);
        }
        let method = reqwest::Method::from_bytes(operation.method.as_bytes())
            .map_err(|e| format!("method {}: {e}", operation.method))?;
        let mut request = self.client.request(method, url);
        for (name, template) in &tool.headers {
            let value = caller::render(template, resolved, str::to_string)
                .map_err(|e| format!("header {name}: {e}"))?;
            let mut value = reqwest::header::HeaderValue::from_str(&value)
                .map_err(|_| format!("header {name}: the value is not a valid header value"))?;
            // Kept out of reqwest's and hyper's Debug output.
            value.set_sensitive(caller::uses_secret(template));
            request = request.header(name.as_str(), value);
        }
        for (name, value) in &headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if operation.has_body
            && let Some(body) = arguments.get("body")
        {
            request = request.json(body);
        }
        Ok(request)
    }
}

/// The tools of one spec, by operation id.
fn spec_tools(
    name: &str,
    spec: &OpenApiSpecConfig,
    loaded: &LoadedDocument,
    queues: &ToolQueues,
) -> Result<Vec<(String, OpenApiTool)>, OpenApiError> {
    let document_error = |error: DocumentError| OpenApiError::Document {
        spec: name.to_string(),
        source_name: loaded.source_name.clone(),
        error,
    };
    let operations =
        document::operations(&loaded.document, |id| spec.offers(id)).map_err(document_error)?;
    let base_url = base_url(name, spec, loaded)?;
    let queue = queues
        .get(spec.queue_name())
        .map_err(|source| OpenApiError::Queue {
            spec: name.to_string(),
            source,
        })?;
    let mut tools = Vec::new();
    for operation in operations {
        let tool_name = format!("{OPENAPI_NAMESPACE}__{name}__{}", operation.id);
        if tool_name.len() > MAX_TOOL_NAME_CHARS {
            return Err(document_error(DocumentError {
                pointer: format!("operation {}", operation.id),
                detail: format!(
                    "the tool name {tool_name} is longer than {MAX_TOOL_NAME_CHARS} characters: \
                     exclude the operation or use a shorter spec name"
                ),
            }));
        }
        let schema = ArgumentSchema::compile(&operation.input_schema).map_err(|e| {
            document_error(DocumentError {
                pointer: format!("operation {}", operation.id),
                detail: format!("the parameters' schema does not compile: {}", e.0),
            })
        })?;
        let policy = ToolPolicy {
            cache_ttl: spec
                .tools_cache
                .get(&operation.id)
                .copied()
                .or(spec.cache)
                .and_then(|ttl| ttl.0),
            retries: spec.retries,
            per_user: spec
                .headers
                .values()
                .any(|value| caller::uses_caller(value)),
        };
        tools.push((
            operation.id.clone(),
            OpenApiTool {
                operation,
                base_url: base_url.clone(),
                headers: spec.headers.clone(),
                schema,
                queue: Arc::clone(&queue),
                timeout: spec.timeout.map(|d| d.0),
                policy,
            },
        ));
    }
    Ok(tools)
}

/// `baseUrl`, else the document's first server (relative to the document's URL if need be).
fn base_url(
    name: &str,
    spec: &OpenApiSpecConfig,
    loaded: &LoadedDocument,
) -> Result<String, OpenApiError> {
    if let Some(url) = &spec.base_url {
        return Ok(url.clone());
    }
    let bad = |detail: String| OpenApiError::BaseUrl {
        spec: name.to_string(),
        detail,
    };
    let server = loaded
        .document
        .pointer("/servers/0/url")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("the document names no server: set baseUrl".into()))?;
    if server.starts_with("http://") || server.starts_with("https://") {
        return Ok(server.to_string());
    }
    let document_url = reqwest::Url::parse(&loaded.source_name).map_err(|_| {
        bad(format!(
            "the document's server {server:?} is relative: set baseUrl"
        ))
    })?;
    document_url
        .join(server)
        .map(|url| url.to_string())
        .map_err(|e| bad(format!("the document's server {server:?}: {e}")))
}

#[async_trait]
impl ToolProvider for OpenApiTools {
    fn namespace(&self) -> &str {
        OPENAPI_NAMESPACE
    }

    fn policy(&self, name: &str) -> ToolPolicy {
        self.tools
            .get(name)
            .map(|tool| tool.policy)
            .unwrap_or_default()
    }

    async fn list_tools(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .map(|(key, tool)| ToolDefinition {
                name: format!("{OPENAPI_NAMESPACE}__{key}"),
                description: tool.operation.description.clone(),
                parameters: tool.operation.input_schema.clone(),
            })
            .collect()
    }

    async fn call_reporting(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        report: Arc<ToolReport>,
        caller: &ToolCaller,
    ) -> ToolOutcome {
        let Some(tool) = self.tools.get(name) else {
            return ToolOutcome::Failed(format!("unknown tool \"{OPENAPI_NAMESPACE}__{name}\""));
        };
        let arguments = match checked_arguments(arguments, Some(&tool.schema)) {
            Ok(arguments) => arguments,
            Err(reason) => return ToolOutcome::Failed(reason),
        };
        let call = self.execute((name, tool), arguments, caller, &report);
        within_timeout(tool.timeout, timeout, call).await
    }
}
