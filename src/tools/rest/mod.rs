//! REST tools (`restTools.<name>` → `rest__<name>`): arguments validated against
//! `parametersSchema`, substituted into the URL, headers and body template, one HTTP request
//! within the timeout and the tool's queue, the response text returned (an image or PDF
//! response becomes a tool file, see [`answer`]). No retries: a failure
//! goes back to the model. This module never talks to an LLM.

pub mod template;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::caller::{self, Resolved, ToolCaller};
use super::policy::ToolPolicy;
use super::queue::{QueueError, ToolQueue, ToolQueues};
use super::schema::{ArgumentSchema, checked_arguments};
use super::{ToolFile, ToolOutcome, ToolProvider, ToolReport};
use crate::attachments::sniff;
use crate::config::RestToolConfig;
use crate::config::tools::RestMethod;
use crate::llm::ToolDefinition;

/// The namespace of every REST tool.
pub const REST_NAMESPACE: &str = "rest";
/// Largest response body a REST tool returns; a larger one fails the call.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// How much of an error response the model is shown.
pub(crate) const ERROR_EXCERPT_CHARS: usize = 500;

/// A non-success answer: the tool's own error, except a gateway that could not reach it
/// (502, 503, 504), which is a call that got no answer and may be retried.
pub(crate) fn http_failure(status: reqwest::StatusCode, body: &str) -> ToolOutcome {
    let excerpt: String = body.chars().take(ERROR_EXCERPT_CHARS).collect();
    let reason = format!("HTTP {status}: {excerpt}");
    match status.as_u16() {
        502..=504 => ToolOutcome::Unreachable(reason),
        _ => ToolOutcome::Failed(reason),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RestToolError {
    #[error("restTools.{tool}.parametersSchema: the schema does not compile: {detail}")]
    Schema { tool: String, detail: String },
    #[error("restTools.{tool}.queue: {source}")]
    Queue { tool: String, source: QueueError },
    #[error("REST tools: cannot build the HTTP client: {0}")]
    Client(String),
}

/// One configured REST tool.
struct RestTool {
    description: String,
    method: reqwest::Method,
    url: String,
    headers: BTreeMap<String, String>,
    parameters: Value,
    schema: ArgumentSchema,
    body: Option<Value>,
    queue: Arc<ToolQueue>,
    timeout: Option<Duration>,
    policy: ToolPolicy,
}

/// A set of REST tools behind the `rest` namespace.
#[derive(Clone)]
pub struct RestTools {
    client: reqwest::Client,
    tools: BTreeMap<String, Arc<RestTool>>,
}

impl RestTools {
    /// Builds every enabled tool; a schema that does not compile or an unknown queue is an error.
    pub fn build(
        config: &BTreeMap<String, RestToolConfig>,
        queues: &ToolQueues,
    ) -> Result<Self, RestToolError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| RestToolError::Client(e.to_string()))?;
        let mut tools = BTreeMap::new();
        for (name, tool) in config.iter().filter(|(_, t)| t.is_enabled()) {
            tools.insert(name.clone(), Arc::new(build_tool(name, tool, queues)?));
        }
        Ok(Self { client, tools })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools named (without `rest__`), sharing this set's HTTP client.
    pub fn subset<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Self {
        let tools = names
            .into_iter()
            .filter_map(|name| Some((name.to_string(), Arc::clone(self.tools.get(name)?))))
            .collect();
        Self {
            client: self.client.clone(),
            tools,
        }
    }

    async fn execute(
        &self,
        (name, tool): (&str, &RestTool),
        parameters: Map<String, Value>,
        caller: &ToolCaller,
        report: &ToolReport,
    ) -> ToolOutcome {
        let templates =
            std::iter::once(tool.url.as_str()).chain(tool.headers.values().map(String::as_str));
        let tool_name = format!("{REST_NAMESPACE}__{name}");
        let call = HttpToolCall {
            caller,
            queue: &tool.queue,
            tool: &tool_name,
            report,
        };
        call.run(templates, |resolved| {
            self.request(tool, &parameters, resolved)
        })
        .await
    }

    fn request(
        &self,
        tool: &RestTool,
        parameters: &Map<String, Value>,
        resolved: &Resolved,
    ) -> Result<reqwest::RequestBuilder, String> {
        let url = template::render_url(&tool.url, parameters, resolved)
            .map_err(|e| format!("url: {e}"))?;
        let mut request = self.client.request(tool.method.clone(), url);
        let mut has_content_type = false;
        for (name, template) in &tool.headers {
            let value = template::render_header(template, parameters, resolved)
                .map_err(|e| format!("header {name}: {e}"))?;
            has_content_type |= name.eq_ignore_ascii_case("content-type");
            let mut value = reqwest::header::HeaderValue::from_str(&value)
                .map_err(|_| format!("header {name}: the value is not a valid header value"))?;
            // Kept out of reqwest's and hyper's Debug output.
            value.set_sensitive(caller::uses_secret(template));
            request = request.header(name, value);
        }
        if let Some(template) = &tool.body {
            let body =
                template::render_body(template, parameters).map_err(|e| format!("body: {e}"))?;
            let (content_type, bytes) = match body {
                Value::String(text) => ("text/plain; charset=utf-8", text.into_bytes()),
                other => ("application/json", other.to_string().into_bytes()),
            };
            if !has_content_type {
                request = request.header(reqwest::header::CONTENT_TYPE, content_type);
            }
            request = request.body(bytes);
        }
        Ok(request)
    }
}

fn build_tool(
    name: &str,
    config: &RestToolConfig,
    queues: &ToolQueues,
) -> Result<RestTool, RestToolError> {
    let parameters = config
        .parameters_schema
        .clone()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let schema = ArgumentSchema::compile(&parameters).map_err(|e| RestToolError::Schema {
        tool: name.to_string(),
        detail: e.0,
    })?;
    let queue = queues
        .get(config.queue_name())
        .map_err(|source| RestToolError::Queue {
            tool: name.to_string(),
            source,
        })?;
    Ok(RestTool {
        description: config.description.clone().unwrap_or_default(),
        method: match config.method.unwrap_or_default() {
            RestMethod::Get => reqwest::Method::GET,
            RestMethod::Post => reqwest::Method::POST,
            RestMethod::Put => reqwest::Method::PUT,
            RestMethod::Patch => reqwest::Method::PATCH,
            RestMethod::Delete => reqwest::Method::DELETE,
        },
        url: config.url.clone().unwrap_or_default(),
        headers: config.headers.clone(),
        parameters,
        schema,
        body: config.body_template.clone(),
        queue,
        timeout: config.timeout.map(|d| d.0),
        policy: ToolPolicy {
            cache_ttl: config.cache.and_then(|ttl| ttl.0),
            retries: config.retries,
            per_user: config.url.as_deref().is_some_and(caller::uses_caller)
                || config
                    .headers
                    .values()
                    .any(|value| caller::uses_caller(value)),
        },
    })
}

/// The body as text, or an error past [`MAX_RESPONSE_BYTES`].
pub(crate) async fn read_capped(response: reqwest::Response) -> Result<String, String> {
    let body = read_capped_bytes(response).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The body's bytes, or an error past [`MAX_RESPONSE_BYTES`].
async fn read_capped_bytes(response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| format!("reading the response failed: {e}"))?;
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(format!(
                "the response is larger than {MAX_RESPONSE_BYTES} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// One call of an HTTP tool (REST or OpenAPI): who calls, the tool's queue and name, and where
/// the files its answer carries go.
pub(crate) struct HttpToolCall<'a> {
    pub caller: &'a ToolCaller,
    pub queue: &'a ToolQueue,
    /// The tool's full name (`rest__x`, `openapi__spec__op`): its files are named after it.
    pub tool: &'a str,
    pub report: &'a ToolReport,
}

impl HttpToolCall<'_> {
    /// The caller's secrets in `templates` resolved before anything is sent (a missing one
    /// fails the call, naming it), the request built from them, sent within the tool's queue,
    /// and its answer read ([`answer`]); `Unreachable` when no answer came.
    pub(crate) async fn run<'t>(
        &self,
        templates: impl IntoIterator<Item = &'t str>,
        build: impl FnOnce(&Resolved) -> Result<reqwest::RequestBuilder, String>,
    ) -> ToolOutcome {
        let resolved = match self.caller.resolve(templates).await {
            Ok(resolved) => resolved,
            Err(error) => return ToolOutcome::Failed(error.to_string()),
        };
        let request = match build(&resolved) {
            Ok(request) => request,
            Err(reason) => return ToolOutcome::Failed(reason),
        };
        let _slot = self.queue.acquire().await;
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                return ToolOutcome::Unreachable(format!(
                    "request failed: {}",
                    error.without_url()
                ));
            }
        };
        answer(response, self.tool, self.report).await
    }
}

/// What a tool's HTTP response gives the model: on success the body as text, or, when its bytes
/// are an image or a PDF (sniffed, whatever the server declared), a short placeholder with the
/// file handed to `report` (kept like an MCP tool's file); otherwise [`http_failure`].
async fn answer(response: reqwest::Response, tool: &str, report: &ToolReport) -> ToolOutcome {
    let status = response.status();
    let body = match read_capped_bytes(response).await {
        Ok(body) => body,
        Err(reason) => return ToolOutcome::Failed(reason),
    };
    if !status.is_success() {
        return http_failure(status, &String::from_utf8_lossy(&body));
    }
    match file_of(tool, body) {
        Ok(file) => {
            let placeholder = format!("[file {} {}]", file.media_type, file.name);
            report.add_files(vec![file]);
            ToolOutcome::Ok(placeholder)
        }
        Err(body) => ToolOutcome::Ok(String::from_utf8_lossy(&body).into_owned()),
    }
}

/// The body as a tool file when its bytes are an image or a PDF, else the body back.
fn file_of(tool: &str, body: Vec<u8>) -> Result<ToolFile, Vec<u8>> {
    let head = &body[..body.len().min(sniff::HEAD_BYTES)];
    let media_type = sniff::media_type(head, false, None, "");
    if !(media_type.starts_with("image/") || media_type == "application/pdf") {
        return Err(body);
    }
    Ok(ToolFile {
        name: super::file_name(tool, 0, &media_type),
        media_type,
        content: body.into(),
    })
}

/// `call` within the run's `timeout`, or the tool's own `cap` when it is shorter; past it the
/// call got no answer.
pub(crate) async fn within_timeout(
    cap: Option<Duration>,
    timeout: Duration,
    call: impl std::future::Future<Output = ToolOutcome>,
) -> ToolOutcome {
    let limit = cap.map_or(timeout, |cap| cap.min(timeout));
    tokio::time::timeout(limit, call)
        .await
        .unwrap_or_else(|_| ToolOutcome::Unreachable("timeout".into()))
}

#[async_trait]
impl ToolProvider for RestTools {
    fn namespace(&self) -> &str {
        REST_NAMESPACE
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
            .map(|(name, tool)| ToolDefinition {
                name: format!("{REST_NAMESPACE}__{name}"),
                description: tool.description.clone(),
                parameters: tool.parameters.clone(),
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
            return ToolOutcome::Failed(format!("unknown tool \"{REST_NAMESPACE}__{name}\""));
        };
        let parameters = match checked_arguments(arguments, Some(&tool.schema)) {
            Ok(parameters) => parameters,
            Err(reason) => return ToolOutcome::Failed(reason),
        };
        within_timeout(
            tool.timeout,
            timeout,
            self.execute((name, tool), parameters, caller, &report),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 8-byte PNG signature and the start of an IHDR chunk.
    const PNG_HEAD: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";

    #[test]
    fn an_image_or_pdf_body_becomes_a_file_and_text_stays_text() {
        let file = file_of("rest__snap", PNG_HEAD.to_vec()).expect("an image");
        assert_eq!(file.media_type, "image/png");
        assert_eq!(file.name, "rest__snap-1.png");
        assert_eq!(file.content.as_ref(), PNG_HEAD);
        let pdf = file_of("rest__doc", b"%PDF-1.7\n".to_vec()).expect("a pdf");
        assert_eq!(pdf.name, "rest__doc-1.pdf");
        let json = br#"{"ok": true}"#.to_vec();
        assert_eq!(file_of("rest__x", json.clone()).err(), Some(json));
    }
}
