//! What one MCP server offers after `toolsAllowed`/`toolsDenied`: the tool definitions the model
//! sees (`{server}__{tool}` with the server's JSON schemas), a compiled argument schema per tool,
//! and the conversion of a `tools/call` result into a [`ToolOutcome`].

use std::collections::BTreeMap;

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents, Tool};

use crate::tools::ToolFile;
use crate::vocabulary::events::SourceLink;
use serde_json::Value;
use tracing::warn;

use crate::config::McpServerConfig;
use crate::llm::ToolDefinition;
use crate::tools::ToolOutcome;
use crate::tools::schema::{ArgumentSchema, checked_arguments};

/// Filter entries meaning "every tool".
const WILDCARDS: [&str; 2] = ["*", "any"];

/// `toolsAllowed` then `toolsDenied`, case-insensitive, `*`/`any` wildcards.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolFilter {
    /// `None`: everything is allowed.
    allowed: Option<Vec<String>>,
    denied: Vec<String>,
}

impl ToolFilter {
    pub(crate) fn from_config(config: &McpServerConfig) -> Self {
        let lower = |list: &[String]| list.iter().map(|e| e.trim().to_lowercase()).collect();
        Self {
            allowed: config.tools_allowed.as_deref().map(lower),
            denied: lower(&config.tools_denied),
        }
    }

    pub(crate) fn allows(&self, tool: &str) -> bool {
        let tool = tool.to_lowercase();
        let listed = |list: &[String]| {
            list.iter()
                .any(|entry| WILDCARDS.contains(&entry.as_str()) || *entry == tool)
        };
        self.allowed.as_deref().is_none_or(listed) && !listed(&self.denied)
    }
}

/// One tool as offered to the model.
struct CatalogTool {
    /// The name the server knows it by.
    mcp_name: String,
    /// `None` when the declared schema did not compile: calls go unvalidated.
    schema: Option<ArgumentSchema>,
}

/// A tool as `agentd tools` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTool {
    /// `{server}__{tool}`.
    pub name: String,
    pub description: String,
    /// Why the input schema did not compile, if it did not.
    pub schema_error: Option<String>,
}

/// The offered tools of one connection, built once per tool list.
pub(crate) struct ToolCatalog {
    tools: BTreeMap<String, CatalogTool>,
    definitions: Vec<ToolDefinition>,
    listed: Vec<ListedTool>,
}

impl ToolCatalog {
    pub(crate) fn build(server: &str, tools: Vec<Tool>, filter: &ToolFilter) -> Self {
        let mut catalog = Self {
            tools: BTreeMap::new(),
            definitions: Vec::new(),
            listed: Vec::new(),
        };
        for tool in tools.into_iter().filter(|t| filter.allows(&t.name)) {
            let exposed = sanitize_tool_name(&tool.name);
            if catalog.tools.contains_key(&exposed) {
                warn!(server, tool = %tool.name, "two tools share the name {exposed:?} once sanitised; the second is skipped");
                continue;
            }
            let schema = Value::Object((*tool.input_schema).clone());
            let (compiled, schema_error) = match ArgumentSchema::compile(&schema) {
                Ok(compiled) => (Some(compiled), None),
                Err(error) => {
                    warn!(server, tool = %tool.name, %error, "tool input schema does not compile; its arguments go unvalidated");
                    (None, Some(error.0))
                }
            };
            let qualified = format!("{server}__{exposed}");
            let description = tool.description.as_deref().unwrap_or_default().to_string();
            catalog.definitions.push(ToolDefinition {
                name: qualified.clone(),
                description: description.clone(),
                parameters: schema,
            });
            catalog.listed.push(ListedTool {
                name: qualified,
                description,
                schema_error,
            });
            catalog.tools.insert(
                exposed,
                CatalogTool {
                    mcp_name: tool.name.to_string(),
                    schema: compiled,
                },
            );
        }
        catalog
    }

    pub(crate) fn definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }

    pub(crate) fn listed(&self) -> &[ListedTool] {
        &self.listed
    }

    /// The server's name of the tool and the validated arguments, or why the call is refused.
    pub(crate) fn prepare_call(
        &self,
        exposed: &str,
        arguments: Value,
    ) -> Result<(String, serde_json::Map<String, Value>), String> {
        let Some(tool) = self.tools.get(exposed) else {
            return Err(format!("unknown tool {exposed:?}"));
        };
        let arguments = checked_arguments(arguments, tool.schema.as_ref())?;
        Ok((tool.mcp_name.clone(), arguments))
    }
}

/// Tool names become part of an LLM function name: anything but `[A-Za-z0-9_-]` becomes `_`.
fn sanitize_tool_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Text blocks are concatenated (one per line), other blocks become placeholders, and
/// `isError` makes the call failed. `structuredContent` is used only when there is no content.
pub(crate) fn outcome_of(result: CallToolResult) -> ToolOutcome {
    let mut text = result
        .content
        .iter()
        .map(block_text)
        .collect::<Vec<_>>()
        .join("\n");
    if result.content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        text = structured.to_string();
    }
    if result.is_error == Some(true) {
        if text.trim().is_empty() {
            text = "the tool reported an error without details".into();
        }
        return ToolOutcome::Failed(text);
    }
    ToolOutcome::Ok(text)
}

/// The files of a result's `image` blocks and embedded `resource`s with a blob (base64 that
/// does not decode is left out: its placeholder still names it).
pub(crate) fn files_of(result: &CallToolResult, tool: &str) -> Vec<ToolFile> {
    let decode = |data: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()
            .map(bytes::Bytes::from)
    };
    let mut files = Vec::new();
    for block in &result.content {
        let file = match block {
            ContentBlock::Image(image) => decode(&image.data).map(|content| ToolFile {
                name: crate::tools::file_name(tool, files.len(), &image.mime_type),
                media_type: image.mime_type.clone(),
                content,
            }),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => decode(blob).map(|content| ToolFile {
                    name: uri_name(uri),
                    media_type: mime_type
                        .clone()
                        .unwrap_or_else(|| "application/octet-stream".into()),
                    content,
                }),
                _ => None,
            },
            _ => None,
        };
        files.extend(file);
    }
    files
}

/// The web pages a result names: each `resource_link` and embedded resource whose URI is an
/// http(s) URL, once each, in order.
pub(crate) fn sources_of(result: &CallToolResult) -> Vec<SourceLink> {
    let mut sources: Vec<SourceLink> = Vec::new();
    for block in &result.content {
        let source = match block {
            ContentBlock::ResourceLink(link) => {
                let title = link.title.clone().unwrap_or_else(|| link.name.clone());
                SourceLink::web(&link.uri, Some(title).filter(|title| !title.is_empty()))
            }
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { uri, .. }
                | ResourceContents::BlobResourceContents { uri, .. } => SourceLink::web(uri, None),
                _ => None,
            },
            _ => None,
        };
        if let Some(source) = source
            && !sources.iter().any(|known| known.url == source.url)
        {
            sources.push(source);
        }
    }
    sources
}

/// The last path segment of a resource's URI.
fn uri_name(uri: &str) -> String {
    uri.split(['?', '#'])
        .next()
        .and_then(|path| path.rsplit('/').next())
        .filter(|name| !name.is_empty())
        .unwrap_or("resource")
        .to_string()
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image {}]", image.mime_type),
        ContentBlock::Audio(audio) => format!("[audio {}]", audio.mime_type),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            ResourceContents::BlobResourceContents { uri, .. } => format!("[resource {uri}]"),
            _ => "[resource]".into(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link {}]", link.uri),
        _ => "[unsupported content]".into(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn tool(name: &str, schema: Value) -> Tool {
        let Value::Object(schema) = schema else {
            panic!("schema must be an object")
        };
        Tool::new(name.to_string(), format!("{name} tool"), Arc::new(schema))
    }

    fn filter(allowed: Option<Value>, denied: Value) -> ToolFilter {
        let config: McpServerConfig = serde_json::from_value(json!({
            "command": "x", "toolsAllowed": allowed, "toolsDenied": denied,
        }))
        .expect("config");
        ToolFilter::from_config(&config)
    }

    #[test]
    fn sources_are_the_http_links_a_result_names_once_each_in_order() {
        let result: CallToolResult = serde_json::from_value(json!({"content": [
            {"type": "text", "text": "see https://not-a-link.example"},
            {"type": "resource_link", "uri": "https://example.org/a", "name": "a", "title": "A page"},
            {"type": "resource_link", "uri": "file:///etc/hosts", "name": "hosts"},
            {"type": "resource_link", "uri": "https://example.org/a", "name": "again"},
            {"type": "resource", "resource": {"uri": "HTTP://example.org/b", "text": "b"}},
            {"type": "resource_link", "uri": "https://example.org/c", "name": "c"},
        ]}))
        .expect("result");
        let sources: Vec<(String, Option<String>)> = sources_of(&result)
            .into_iter()
            .map(|source| (source.url, source.title))
            .collect();
        assert_eq!(
            sources,
            [
                (
                    "https://example.org/a".to_string(),
                    Some("A page".to_string())
                ),
                ("HTTP://example.org/b".to_string(), None),
                ("https://example.org/c".to_string(), Some("c".to_string())),
            ]
        );
    }

    #[test]
    fn filters_are_case_insensitive_with_wildcards_and_deny_wins() {
        let all = filter(None, json!([]));
        assert!(all.allows("Anything"));
        let some = filter(Some(json!(["Read", "list"])), json!([]));
        assert!(some.allows("read") && some.allows("LIST") && !some.allows("write"));
        let deny_after_allow = filter(Some(json!(["*"])), json!(["WRITE"]));
        assert!(deny_after_allow.allows("read") && !deny_after_allow.allows("write"));
        let deny_all = filter(Some(json!(["any"])), json!(["any"]));
        assert!(!deny_all.allows("read"));
    }

    #[test]
    fn definitions_are_qualified_and_sanitised() {
        let catalog = ToolCatalog::build(
            "srv",
            vec![
                tool("get.time", json!({"type": "object"})),
                tool("echo", json!({"type": "object"})),
            ],
            &ToolFilter::default(),
        );
        let names: Vec<&str> = catalog
            .definitions()
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(names, ["srv__get_time", "srv__echo"]);
        let (mcp_name, _) = catalog
            .prepare_call("get_time", json!({}))
            .expect("known tool");
        assert_eq!(mcp_name, "get.time");
    }

    #[test]
    fn arguments_are_validated_against_the_tool_schema() {
        let catalog = ToolCatalog::build(
            "srv",
            vec![tool(
                "add",
                json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
            )],
            &ToolFilter::default(),
        );
        assert!(catalog.prepare_call("add", json!({"a": 1})).is_ok());
        let err = catalog.prepare_call("add", json!({"a": "x"})).unwrap_err();
        assert!(
            err.starts_with("invalid arguments: /a: \"x\" is not of type \"integer\""),
            "{err}"
        );
        let err = catalog.prepare_call("add", json!([1])).unwrap_err();
        assert!(err.contains("must be a JSON object"), "{err}");
        let err = catalog.prepare_call("nope", json!({})).unwrap_err();
        assert!(err.contains("unknown tool"), "{err}");
    }

    #[test]
    fn a_schema_that_does_not_compile_is_listed_and_skipped() {
        let catalog = ToolCatalog::build(
            "srv",
            vec![tool("odd", json!({"type": "not-a-type"}))],
            &ToolFilter::default(),
        );
        assert!(catalog.listed()[0].schema_error.is_some());
        assert!(catalog.prepare_call("odd", json!({"any": 1})).is_ok());
    }

    #[test]
    fn content_is_concatenated_with_placeholders() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::image("aGk=", "image/png"),
            ContentBlock::text("two"),
        ]);
        assert_eq!(
            outcome_of(result),
            ToolOutcome::Ok("one\n[image image/png]\ntwo".into())
        );
        let failed = CallToolResult::error(vec![ContentBlock::text("boom")]);
        assert_eq!(outcome_of(failed), ToolOutcome::Failed("boom".into()));
        let empty_error = CallToolResult::error(vec![]);
        assert!(
            matches!(outcome_of(empty_error), ToolOutcome::Failed(m) if m.contains("without details"))
        );
    }

    #[test]
    fn images_and_blob_resources_are_files_with_names() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::image("aGk=", "image/png"),
            ContentBlock::image("not base64!", "image/png"),
            ContentBlock::resource(
                ResourceContents::blob("aGk=", "file:///out/report.pdf?v=2")
                    .with_mime_type("application/pdf"),
            ),
        ]);
        let files = files_of(&result, "shot");
        let named: Vec<(&str, &str, &[u8])> = files
            .iter()
            .map(|f| (f.name.as_str(), f.media_type.as_str(), f.content.as_ref()))
            .collect();
        assert_eq!(
            named,
            vec![
                ("shot-1.png", "image/png", b"hi".as_slice()),
                ("report.pdf", "application/pdf", b"hi".as_slice()),
            ]
        );
    }
}
