//! Tools the model may call, behind one [`ToolProvider`] trait so the session sees a single
//! [`ToolRegistry`]: MCP servers (rmcp), REST tools, internal tools and sub-agents each become a
//! provider. Tool names are `{namespace}__{tool}`. This module never talks to an LLM.
//!
//! [`hub::ToolHub`] builds the shared parts at start (queues, MCP connections, REST tools) and
//! gives each agent the registry its `tools:` list asks for.

pub mod a2a;
pub mod caller;
pub mod hub;
pub mod mcp;
pub mod openapi;
pub mod policy;
pub mod queue;
pub mod rest;
pub mod result_cache;
pub mod schema;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::llm::ToolDefinition;
use crate::vocabulary::events::SourceLink;

/// What a tool call produced; `Failed` and `Unreachable` go back to the model as
/// `(tool failed: <reason>)`.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    Ok(String),
    /// The tool answered with an error (or the call was refused before it was sent).
    Failed(String),
    /// The call got no answer: a transport failure or a timeout. Only these are retried.
    Unreachable(String),
}

impl ToolOutcome {
    /// The reason of a call that did not succeed.
    pub fn failure(&self) -> Option<&str> {
        match self {
            Self::Ok(_) => None,
            Self::Failed(reason) | Self::Unreachable(reason) => Some(reason),
        }
    }
}

/// A file a tool's result carried (an MCP `image` block, an embedded `resource` with a blob, a
/// REST or OpenAPI tool's image or PDF response):
/// the session keeps it once, like any attachment, and the model gets it as that content.
#[derive(Clone)]
pub struct ToolFile {
    /// A name for it (the resource's URI's last segment, or one made from the tool).
    pub name: String,
    /// The media type the tool declared (the bytes decide once kept).
    pub media_type: String,
    pub content: bytes::Bytes,
}

/// `{tool}-{n}.{extension}` for the n-th file of a tool's result.
pub(crate) fn file_name(tool: &str, index: usize, media_type: &str) -> String {
    let extension = media_type.rsplit('/').next().unwrap_or("bin");
    format!("{tool}-{}.{extension}", index + 1)
}

impl std::fmt::Debug for ToolFile {
    /// Metadata only: content stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolFile")
            .field("name", &self.name)
            .field("media_type", &self.media_type)
            .field("bytes", &self.content.len())
            .finish()
    }
}

/// What a call may tell besides its outcome: progress lines while it runs (the session turns
/// them into `progress` events), details for its accounting entry (a remote agent's cost) and
/// the files its result carried.
#[derive(Debug, Default)]
pub struct ToolReport {
    progress: Option<mpsc::Sender<String>>,
    details: Mutex<Option<Map<String, Value>>>,
    files: Mutex<Vec<ToolFile>>,
    sources: Mutex<Vec<SourceLink>>,
}

impl ToolReport {
    /// A report whose progress lines go to `progress`.
    pub fn new(progress: mpsc::Sender<String>) -> Self {
        Self {
            progress: Some(progress),
            details: Mutex::default(),
            files: Mutex::default(),
            sources: Mutex::default(),
        }
    }

    /// Passes a progress line on; never waits (a line that does not fit is dropped).
    pub fn progress(&self, message: impl Into<String>) {
        if let Some(progress) = &self.progress {
            let _ = progress.try_send(message.into());
        }
    }

    /// Details for the call's accounting entry (the last set wins).
    pub fn set_details(&self, details: Map<String, Value>) {
        if let Ok(mut slot) = self.details.lock() {
            *slot = Some(details);
        }
    }

    pub fn take_details(&self) -> Option<Map<String, Value>> {
        self.details.lock().ok().and_then(|mut slot| slot.take())
    }

    /// A file the result carried (of the last try: a retry starts with none).
    pub fn add_files(&self, files: Vec<ToolFile>) {
        if let Ok(mut slot) = self.files.lock() {
            *slot = files;
        }
    }

    pub fn take_files(&self) -> Vec<ToolFile> {
        self.files
            .lock()
            .map(|mut slot| std::mem::take(&mut *slot))
            .unwrap_or_default()
    }

    /// The web pages the result named (of the last try, like files).
    pub fn set_sources(&self, sources: Vec<SourceLink>) {
        if let Ok(mut slot) = self.sources.lock() {
            *slot = sources;
        }
    }

    pub fn take_sources(&self) -> Vec<SourceLink> {
        self.sources
            .lock()
            .map(|mut slot| std::mem::take(&mut *slot))
            .unwrap_or_default()
    }
}

/// A source of tools (one MCP server, the REST tools, the internal tools, …).
#[async_trait]
pub trait ToolProvider: Send + Sync {
    /// The namespace before `__` in every tool name this provider owns.
    fn namespace(&self) -> &str;
    /// Tool definitions with fully qualified names.
    async fn list_tools(&self) -> Vec<ToolDefinition>;
    /// How results of `name` (without the namespace) are cached and its failed calls retried.
    fn policy(&self, name: &str) -> policy::ToolPolicy {
        let _ = name;
        policy::ToolPolicy::default()
    }
    /// Runs one tool (`name` without the namespace) within `timeout`, for no user. A provider
    /// implements this or [`ToolProvider::call_reporting`] (each defaults to the other).
    async fn call(&self, name: &str, arguments: Value, timeout: Duration) -> ToolOutcome {
        let anonymous = caller::ToolCaller::anonymous();
        self.call_reporting(name, arguments, timeout, Arc::default(), &anonymous)
            .await
    }
    /// Like [`ToolProvider::call`], for `caller` (the run's user, whose secrets
    /// `${caller.secret.NAME}` in a tool's headers reads), telling progress and details through
    /// `report`; providers with nothing to tell and no use for the caller keep this default.
    async fn call_reporting(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        report: Arc<ToolReport>,
        caller: &caller::ToolCaller,
    ) -> ToolOutcome {
        let _ = (report, caller);
        self.call(name, arguments, timeout).await
    }
}

/// All tools a session may use, routed by namespace.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    providers: BTreeMap<String, Arc<dyn ToolProvider>>,
}

impl ToolRegistry {
    pub fn add(&mut self, provider: Arc<dyn ToolProvider>) {
        self.providers
            .insert(provider.namespace().to_string(), provider);
    }

    pub async fn definitions(&self) -> Vec<ToolDefinition> {
        let mut all = Vec::new();
        for provider in self.providers.values() {
            all.extend(provider.list_tools().await);
        }
        all
    }

    /// The policy of `namespace__tool` (the default for unknown names).
    pub fn policy(&self, qualified_name: &str) -> policy::ToolPolicy {
        qualified_name
            .split_once("__")
            .and_then(|(namespace, tool)| {
                self.providers
                    .get(namespace)
                    .map(|provider| provider.policy(tool))
            })
            .unwrap_or_default()
    }

    /// Routes `namespace__tool` to its provider; an unknown name is a failure the model sees.
    pub async fn call(
        &self,
        qualified_name: &str,
        arguments: Value,
        timeout: Duration,
    ) -> ToolOutcome {
        let anonymous = caller::ToolCaller::anonymous();
        self.call_reporting(
            qualified_name,
            arguments,
            timeout,
            Arc::default(),
            &anonymous,
        )
        .await
    }

    /// Like [`ToolRegistry::call`], for `caller`, the provider telling progress and details
    /// through `report`.
    pub async fn call_reporting(
        &self,
        qualified_name: &str,
        arguments: Value,
        timeout: Duration,
        report: Arc<ToolReport>,
        caller: &caller::ToolCaller,
    ) -> ToolOutcome {
        let Some((namespace, tool)) = qualified_name.split_once("__") else {
            return ToolOutcome::Failed(format!(
                "unknown tool {qualified_name:?}: names are namespace__tool"
            ));
        };
        let mut outcome = match self.providers.get(namespace) {
            Some(provider) => {
                provider
                    .call_reporting(tool, arguments, timeout, report, caller)
                    .await
            }
            None => ToolOutcome::Failed(format!("unknown tool {qualified_name:?}")),
        };
        // A NUL from a tool becomes U+FFFD before anything sees it (see `nul_text`).
        match &mut outcome {
            ToolOutcome::Ok(text) | ToolOutcome::Failed(text) | ToolOutcome::Unreachable(text) => {
                crate::nul_text::scrub(text)
            }
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;

    #[async_trait]
    impl ToolProvider for Echo {
        fn namespace(&self) -> &str {
            "echo"
        }
        async fn list_tools(&self) -> Vec<ToolDefinition> {
            vec![ToolDefinition {
                name: "echo__say".into(),
                description: "echoes".into(),
                parameters: serde_json::json!({"type": "object"}),
            }]
        }
        async fn call(&self, name: &str, arguments: Value, _timeout: Duration) -> ToolOutcome {
            ToolOutcome::Ok(format!("{name}:{arguments}"))
        }
    }

    #[tokio::test]
    async fn a_nul_in_a_tools_output_becomes_the_replacement_character() {
        let mut registry = ToolRegistry::default();
        registry.add(Arc::new(Echo));
        let outcome = registry
            .call(
                "echo__say\0it",
                serde_json::json!(1),
                Duration::from_secs(1),
            )
            .await;
        assert_eq!(outcome, ToolOutcome::Ok("say\u{FFFD}it:1".into()));
    }

    #[tokio::test]
    async fn routes_by_namespace_and_rejects_unknown_tools() {
        let mut registry = ToolRegistry::default();
        registry.add(Arc::new(Echo));
        assert_eq!(registry.definitions().await.len(), 1);
        let timeout = Duration::from_secs(1);
        assert_eq!(
            registry
                .call("echo__say", serde_json::json!(1), timeout)
                .await,
            ToolOutcome::Ok("say:1".into())
        );
        assert!(matches!(
            registry.call("nope__say", Value::Null, timeout).await,
            ToolOutcome::Failed(_)
        ));
        assert!(matches!(
            registry.call("plain", Value::Null, timeout).await,
            ToolOutcome::Failed(_)
        ));
    }
}
