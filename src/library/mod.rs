//! agentd as a library (SPEC §16): an embedder builds an [`Agent`] from a Markdown agent file
//! ([`Agent::from_markdown`], [`Agent::from_file`]) or with an [`AgentBuilder`], then calls
//! [`Agent::run`] for an [`AgentResult`] or [`Agent::stream`] for its [`AgentEvent`]s, with an
//! [`Observer`] for callbacks.
//!
//! The library does no I/O of its own: no stdout, no files (beyond the agent file it is asked
//! to read), no global logger, no store. It calls only the providers and tools it is given. The
//! server runs the same [`Session`] this facade drives, adding the store, the headends and the
//! replicas around it.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use agentd::library::Agent;
//!
//! let agent = Agent::builder("greeter")
//!     .system_prompt("You greet people.")
//!     .scripted_model("echo")
//!     .build()
//!     .await?;
//! let result = agent.run("Hello there").await;
//! assert!(result.success);
//! assert!(result.answer_text().contains("Hello there"));
//! # Ok::<(), agentd::library::LibraryError>(())
//! # }).unwrap();
//! ```

#![deny(missing_docs)]

mod builder;
mod stream;

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use crate::agent::events::{
    ApprovalDecided, ApprovalRequested, ErrorEvent, Progress, ProgressKind, RunStarted, TextDelta,
    ToolFinished, ToolStarted, TurnStarted,
};
pub use crate::agent::inbox::{Inbox, JoinedMessage};
pub use crate::agent::{AgentEvent, AgentResult};
use crate::agent::{EventSink, ProviderSet, RunControl, Session, SessionRequest};
use crate::config::agent_file::{AgentFileError, parse_agent_file};
use crate::config::models::ModelCatalog;
use crate::config::registry::resolve_agent;
use crate::config::{AgentRegistry, AgentSpec, Config, ConfigError, RegistryError};
pub use crate::llm::{
    ChatMessage, DeltaStream, LlmDelta, LlmError, LlmRequest, Provider, ToolCall, ToolDefinition,
};
use crate::tools::ToolRegistry;
use crate::tools::hub::{ToolHub, ToolSetupError};
pub use crate::tools::{ToolOutcome, ToolProvider};
pub use crate::vocabulary::result::{
    AccountingEntry, EntryStatus, FinalReport, LlmAccounting, ReportStatus, RunSummary,
    TokenCounts, ToolAccounting, UsageTotals,
};
pub use crate::vocabulary::{ExitReason, RunStatus};
pub use builder::AgentBuilder;
pub use stream::AgentStream;

/// How many events may wait for a slow consumer before the session waits for it.
const EVENT_BUFFER: usize = 256;

/// Why an agent could not be built. Running an agent never fails this way: a run that goes
/// wrong still returns an [`AgentResult`] saying why (seeds/004).
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    /// The configuration JSON is not valid (SPEC §2).
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    /// The agent file's frontmatter is not valid (SPEC §3).
    #[error(transparent)]
    AgentFile(#[from] AgentFileError),
    /// The agent does not resolve against the configuration (unknown provider, no models, …).
    #[error(transparent)]
    Agent(#[from] RegistryError),
    /// A tool could not be set up (an MCP server that does not start, a bad REST tool, …).
    #[error("tools: {0}")]
    Tools(#[from] ToolSetupError),
    /// A configured provider could not be built.
    #[error("provider {provider}: {detail}")]
    Provider {
        /// The provider's configured name.
        provider: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The agent file could not be read.
    #[error("reading {path}: {detail}")]
    Read {
        /// The file asked for.
        path: String,
        /// Why it could not be read.
        detail: String,
    },
    /// The agent uses what only the server's runtime runs (sub-agents, orchestration).
    #[error(
        "{agent}: {feature} needs the server (sub-agents, advisors, router and handoff run through agentd's runtime); run this agent with `agentd serve` or remove it"
    )]
    NeedsServer {
        /// The agent's name.
        agent: String,
        /// The frontmatter keys that need the server.
        feature: &'static str,
    },
    /// The metrics the tools report into could not be set up.
    #[error("metrics registry: {0}")]
    Metrics(String),
    /// [`AgentBuilder::build`] without a model.
    #[error("the builder has no model: call `model(\"provider/model\")` or `scripted_model(…)`")]
    NoModel,
}

/// What an embedder built itself and hands to the agent beside the configuration's.
#[derive(Default)]
struct Embedded {
    providers: Vec<(String, Arc<dyn Provider>)>,
    tools: Vec<Arc<dyn ToolProvider>>,
}

/// Receives every event of a run as it happens (seeds/004's `onEvent`). Called on the task
/// that runs the agent; keep it quick.
pub trait Observer: Send + Sync {
    /// One event of the run, in the order the run emitted them.
    fn on_event(&self, event: &AgentEvent);
}

impl<F> Observer for F
where
    F: Fn(&AgentEvent) + Send + Sync,
{
    fn on_event(&self, event: &AgentEvent) {
        self(event);
    }
}

/// An agent ready to run, as many times as wanted (each run its own session).
pub struct Agent {
    spec: Arc<AgentSpec>,
    providers: ProviderSet,
    tools: ToolRegistry,
    tool_instructions: Vec<(String, String)>,
    catalog: Arc<ModelCatalog>,
    observer: Option<Arc<dyn Observer>>,
    /// Where messages for its running sessions wait (`None`: no message joins a run).
    inbox: Option<Arc<dyn Inbox>>,
    /// The MCP servers the agent's tools came from, kept connected while the agent lives.
    hub: Option<Arc<ToolHub>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.spec.name)
            .field("providers", &self.providers)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// A builder for an agent defined in code.
    pub fn builder(name: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(name)
    }

    /// An agent from the text of an agent file (YAML frontmatter, then the system prompt),
    /// against `config`: the server's configuration JSON (`providers`, `mcpServers`,
    /// `restTools`, `defaults`, `pricing`, …, SPEC §2). `name` is the agent's name unless its
    /// frontmatter sets `toolName`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use agentd::library::Agent;
    /// use serde_json::json;
    ///
    /// let text = "---\nmodels: bundled/json\noutput:\n  format: json\n  schema:\n    type: object\n    required: [answer]\n    properties:\n      answer: {type: string}\n---\nAnswer in JSON.\n";
    /// let config = json!({"providers": {"bundled": {"type": "scripted"}}});
    /// let agent = Agent::from_markdown("answerer", text, config).await?;
    /// let result = agent.run("What is 2 + 2?").await;
    /// let report = result.final_report.expect("a final report");
    /// assert!(report.content_json.expect("JSON content")["answer"].is_string());
    /// # Ok::<(), agentd::library::LibraryError>(())
    /// # }).unwrap();
    /// ```
    pub async fn from_markdown(
        name: &str,
        text: &str,
        config: Value,
    ) -> Result<Self, LibraryError> {
        let config = crate::config::parse_config(config, "<library config>")?;
        let file = parse_agent_file(text).map_err(|message| AgentFileError {
            path: name.to_string(),
            message,
        })?;
        let path = Path::new(name).with_extension("ai");
        let spec = resolve_agent(&path, file, &config)?;
        Self::assemble(spec, &config, Embedded::default()).await
    }

    /// An agent from a file on disk (read once, here), against `config` as for
    /// [`Agent::from_markdown`]; its name is the file stem unless the frontmatter sets one.
    pub async fn from_file(path: impl AsRef<Path>, config: Value) -> Result<Self, LibraryError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| LibraryError::Read {
            path: path.display().to_string(),
            detail: error.to_string(),
        })?;
        let name = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        let config = crate::config::parse_config(config, "<library config>")?;
        let file = parse_agent_file(&text).map_err(|message| AgentFileError {
            path: path.display().to_string(),
            message,
        })?;
        let spec = resolve_agent(&path.with_file_name(&name), file, &config)?;
        Self::assemble(spec, &config, Embedded::default()).await
    }

    /// Connects what `spec` uses from `config` (its providers, its MCP servers, REST and
    /// OpenAPI tools), over `extra` providers the embedder built itself.
    async fn assemble(
        spec: AgentSpec,
        config: &Config,
        extra: Embedded,
    ) -> Result<Self, LibraryError> {
        refuse_server_features(&spec)?;
        let mut providers = ProviderSet::default();
        let built = crate::llm::catalog::build_providers(&config.providers).map_err(|error| {
            LibraryError::Provider {
                provider: error.provider,
                detail: error.detail,
            }
        })?;
        for (name, provider) in built.into_iter().chain(extra.providers) {
            providers.insert(name, provider);
        }
        let spec = Arc::new(spec);
        let (mut tools, tool_instructions, hub) = if spec.tools.is_empty() {
            (ToolRegistry::default(), Vec::new(), None)
        } else {
            let mut agents = AgentRegistry::default();
            agents.insert(AgentSpec::clone(&spec))?;
            let metrics = crate::telemetry::Metrics::new()
                .map_err(|error| LibraryError::Metrics(error.to_string()))?;
            let hub = Arc::new(ToolHub::start(config, &agents, &metrics).await?);
            (
                hub.registry_for(&spec),
                hub.instructions_for(&spec),
                Some(hub),
            )
        };
        for provider in extra.tools {
            tools.add(provider);
        }
        Ok(Self {
            spec,
            providers,
            tools,
            tool_instructions,
            catalog: Arc::new(ModelCatalog::from_config(config)),
            observer: None,
            inbox: None,
            hub,
        })
    }

    /// Calls `observer` with every event of every run of this agent.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::{Arc, Mutex};
    /// use agentd::library::{Agent, AgentEvent};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let kinds = Arc::clone(&seen);
    /// let agent = Agent::builder("watched")
    ///     .scripted_model("echo")
    ///     .build()
    ///     .await?
    ///     .with_observer(move |event: &AgentEvent| kinds.lock().unwrap().push(event.kind()));
    /// agent.run("hi").await;
    /// let seen = seen.lock().unwrap();
    /// assert_eq!(seen.first(), Some(&"run.started"));
    /// assert_eq!(seen.last(), Some(&"run.finished"));
    /// # Ok::<(), agentd::library::LibraryError>(())
    /// # }).unwrap();
    /// ```
    pub fn with_observer(mut self, observer: impl Observer + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Gives every run of this agent `inbox`: before each turn (and when the model answers with
    /// turns left) the session takes the messages it holds and they join the conversation, so
    /// one answer covers them. A channel makes a run steerable while it goes.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Mutex;
    /// use agentd::library::{Agent, ChatMessage, Inbox, JoinedMessage};
    ///
    /// struct OneMore(Mutex<Option<String>>);
    ///
    /// #[async_trait::async_trait]
    /// impl Inbox for OneMore {
    ///     async fn take(&self) -> Vec<JoinedMessage> {
    ///         let text = self.0.lock().unwrap().take();
    ///         text.map(|text| JoinedMessage { sender: "me".into(), message: ChatMessage::user(text) })
    ///             .into_iter()
    ///             .collect()
    ///     }
    /// }
    ///
    /// let agent = Agent::builder("steered")
    ///     .scripted_model("echo")
    ///     .build()
    ///     .await?
    ///     .with_inbox(OneMore(Mutex::new(Some("and in French".into()))));
    /// let result = agent.run("say hello").await;
    /// assert!(result.answer_text().contains("and in French"));
    /// # Ok::<(), agentd::library::LibraryError>(())
    /// # }).unwrap();
    /// ```
    pub fn with_inbox(mut self, inbox: impl Inbox + 'static) -> Self {
        self.inbox = Some(Arc::new(inbox));
        self
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Runs the agent on `input` to its end. Never fails: what went wrong is in the result
    /// (`success`, `error`, `exit_reason`).
    pub async fn run(&self, input: impl Into<String>) -> AgentResult {
        let mut stream = self.stream(input);
        while stream.next_event().await.is_some() {}
        stream.result().await
    }

    /// Runs the agent on `input`, yielding its events as they happen; [`AgentStream::result`]
    /// then gives the [`AgentResult`]. Dropping the stream stops the run.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use agentd::library::{Agent, AgentEvent};
    ///
    /// let agent = Agent::builder("streamer").scripted_model("echo").build().await?;
    /// let mut stream = agent.stream("one two three");
    /// let mut text = String::new();
    /// while let Some(event) = stream.next_event().await {
    ///     if let AgentEvent::Output(delta) = &event {
    ///         text.push_str(&delta.text);
    ///     }
    /// }
    /// assert!(text.contains("one two three"));
    /// assert!(stream.result().await.success);
    /// # Ok::<(), agentd::library::LibraryError>(())
    /// # }).unwrap();
    /// ```
    pub fn stream(&self, input: impl Into<String>) -> AgentStream {
        let (sink, events) = EventSink::channel(EVENT_BUFFER);
        let session = self.session(sink);
        let request = SessionRequest::for_prompt(
            uuid::Uuid::now_v7().to_string(),
            Arc::clone(&self.spec),
            input.into(),
        );
        AgentStream::new(
            Box::pin(async move { session.run(request).await }),
            events,
            self.observer.clone(),
        )
    }

    fn session(&self, sink: EventSink) -> Session {
        let _connected = &self.hub;
        Session::new(
            self.providers.clone(),
            self.tools.clone(),
            sink,
            RunControl::child_of(&CancellationToken::new()),
        )
        .with_catalog(Arc::clone(&self.catalog))
        .with_tool_instructions(self.tool_instructions.clone())
        .with_inbox(self.inbox.clone())
    }
}

/// Sub-agents and orchestration run through the server's runtime, which a library agent has
/// not: refused when the agent is built rather than failing every run.
fn refuse_server_features(spec: &AgentSpec) -> Result<(), LibraryError> {
    let feature = if !spec.agent_refs.is_empty() {
        Some("agents")
    } else if !spec.orchestration_refs.is_empty() {
        Some("advisors, router or handoff")
    } else {
        None
    };
    match feature {
        Some(feature) => Err(LibraryError::NeedsServer {
            agent: spec.name.clone(),
            feature,
        }),
        None => Ok(()),
    }
}
