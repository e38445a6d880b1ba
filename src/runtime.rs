//! The composition root: turns a loaded [`Config`] into live parts (providers, agents, store,
//! metrics) and runs sessions as tracked tasks. Every headend (HTTP, CLI) starts runs through
//! [`Runtime::start_run`] (the run pipeline in `pipeline`), so runs are admitted, recorded,
//! cached and measured the same way everywhere. The parts stay private: headends read what
//! they need through the accessors below.

mod admission;
pub mod api_keys;
mod approvals;
mod budget_waits;
mod cached;
pub mod continuation;
mod conversation;
mod conversations_api;
mod data_export;
mod data_rights;
mod files_api;
mod follow;
mod live;
mod notifications;
mod orchestration;
mod ownership;
mod pipeline;
pub mod push;
mod records_api;
mod reload;
pub mod retention;
mod run_events;
mod run_metrics;
mod run_watch;
pub mod schedules;
pub mod schedules_api;
mod steering;
pub mod tool_files;
mod turns;
mod waits;
pub mod webhooks;

use std::sync::Arc;

use arc_swap::ArcSwap;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info_span, warn};

use crate::agent::approval::SessionEnd;
use crate::agent::observer::{GuardEvent, SessionObserver};
use crate::agent::sub_agents::{ChildRunner, SubAgents};
use crate::agent::{
    AgentResult, EventSink, ProviderSet, RunControl, Session, SessionRequest, opening_conversation,
    tokenizer_of,
};
use crate::cache::{CacheError, EntryCache};
use crate::config::models::ModelCatalog;
use crate::config::{AgentRegistry, AgentSpec, Config};
use crate::limits::{KeyLimiter, LimiterSetupError};
use crate::llm::ChatMessage;
use crate::llm::catalog;
use crate::secrets::UserSecrets;
use crate::store::{RecorderMetrics, RecorderSettings, RunRecorder, Store, StoreError};
use crate::telemetry::{Metrics, MetricsError};
use crate::tools::hub::{ToolHub, ToolSetupError};
use crate::tools::result_cache::ToolResultCache;
pub use admission::Overloaded;
pub use approvals::{ApprovalError, MAX_WAITING_LISTED};
pub use budget_waits::{BudgetRaiseError, BudgetRaised};
pub use conversation::{
    CLIENT_CONVERSATION_ID_RULE, ConversationTurn, MAX_CLIENT_CONVERSATION_ID_CHARS,
    is_client_conversation_id,
};
pub use data_export::UserExport;
pub use data_rights::EraseError;
pub use follow::{CancelMode, CancelOutcome, FollowError};
pub use ownership::ReplicaIdentity;
pub use pipeline::{RunHandle, RunSubmission, StartError};
pub use reload::{ReloadError, ReloadReport};
pub use turns::ContinueError;
pub use waits::{WaitAnswerError, WaitPoint, WaitingCallRef};

/// The longest a clean stop waits for each store step (writing what is queued, leaving the
/// replica table, closing connections) after the sessions are drained.
const STORE_CLOSE_GRACE: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("providers.{provider}: {detail}")]
    Provider { provider: String, detail: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error(transparent)]
    Tools(#[from] ToolSetupError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Limits(#[from] LimiterSetupError),
    #[error("secrets.key: {0}")]
    Secrets(#[from] crate::secrets::SecretsError),
}

impl RuntimeError {
    /// Whether the configuration is at fault (exit 4) rather than a service failing (exit 3).
    pub fn is_config_error(&self) -> bool {
        match self {
            Self::Provider { .. } => true,
            Self::Tools(error) => error.is_config_error(),
            Self::Cache(error) => error.is_config(),
            Self::Limits(error) => matches!(error, LimiterSetupError::NoRedisUrl),
            Self::Secrets(_) => true,
            Self::Store(_) | Self::Metrics(_) => false,
        }
    }
}

/// Everything a running server (or one CLI run) shares.
pub struct Runtime {
    config: Config,
    /// Swapped whole by a reload; a run holds the `Arc<AgentSpec>` it started with.
    agents: ArcSwap<AgentRegistry>,
    providers: ProviderSet,
    /// The shared MCP connections and REST tools; each run gets its agent's registry.
    tools: ToolHub,
    store: Arc<dyn Store>,
    /// Persists every run and its events in batches, off the sessions' and responses' path.
    recorder: RunRecorder,
    /// Answers repeated requests to agents with a `cache` TTL.
    cache: Arc<dyn EntryCache>,
    metrics: Metrics,
    /// Every session task (with its recording and a conversation's answer), so shutdown can
    /// wait for them before the last flush.
    sessions: TaskTracker,
    /// Cancelled at shutdown; every run's token is a child of it.
    shutdown: CancellationToken,
    /// Cancelled when a graceful shutdown begins: no new runs, running ones get
    /// `server.drainSeconds` before `shutdown` cancels them.
    draining: CancellationToken,
    /// Unix seconds when this runtime started (the `created` of `/v1/models`).
    started_at: i64,
    /// Context windows, tokenizers and prices by provider/model.
    catalog: Arc<ModelCatalog>,
    /// Runs executing here (their controls and events) and followers of runs elsewhere.
    live: Arc<live::LiveRuns>,
    /// This process among the replicas sharing the store.
    replica: ReplicaIdentity,
    /// Stops the heartbeat and the notification listener at [`Runtime::close`].
    background: CancellationToken,
    background_tasks: TaskTracker,
    /// `server.maxConcurrentSessions` running, `server.maxQueuedSessions` waiting.
    admission: admission::Admission,
    /// Per-key limits (`auth.keys[].limits`), counted with every other replica.
    limits: KeyLimiter,
    /// Users' tool secrets; `None` without `secrets.key`.
    secrets: Option<Arc<UserSecrets>>,
    /// How tasks are spelled in A2A push notifications, once the A2A headend registers it.
    task_renderer: std::sync::OnceLock<push::TaskRenderer>,
}

impl Runtime {
    /// Builds providers, opens (and migrates) the store and connects the MCP servers the
    /// agents use; [`Runtime::close`] ends them.
    pub async fn start(config: Config, agents: AgentRegistry) -> Result<Arc<Self>, RuntimeError> {
        crate::tls::install_crypto_provider();
        let providers = build_providers(&config)?;
        let metrics = Metrics::new()?;
        let store = crate::store::open(&config.store.url).await?;
        let catalog = Arc::new(ModelCatalog::from_config(&config));
        let tools = ToolHub::start(&config, &agents, &metrics).await?;
        let cache = crate::cache::open(&config.cache, store.clone()).await?;
        let recorder = RunRecorder::start(
            store.clone(),
            RecorderSettings::for_store(store.as_ref()),
            RecorderMetrics {
                dropped: metrics.run_events_dropped_total.clone(),
                refused: metrics.run_records_refused_total.clone(),
            },
        );
        let admission = admission::Admission::new(
            config.server.max_concurrent_sessions,
            config.server.max_queued_sessions,
        );
        let replica = ReplicaIdentity::of_this_process();
        store
            .register_replica(&replica.as_replica(chrono::Utc::now()))
            .await?;
        let shutdown = CancellationToken::new();
        let limits = KeyLimiter::open(&config, store.clone(), shutdown.clone()).await?;
        let secrets = UserSecrets::from_config(&config.secrets, store.clone())?.map(Arc::new);
        let runtime = Arc::new(Self {
            config,
            agents: ArcSwap::from_pointee(agents),
            providers,
            tools,
            store,
            recorder,
            cache,
            metrics,
            sessions: TaskTracker::new(),
            shutdown,
            draining: CancellationToken::new(),
            started_at: chrono::Utc::now().timestamp(),
            catalog,
            live: Arc::default(),
            replica,
            background: CancellationToken::new(),
            background_tasks: TaskTracker::new(),
            admission,
            limits,
            secrets,
            task_renderer: std::sync::OnceLock::new(),
        });
        // A restarted process ends its previous life's runs before it takes requests.
        runtime.sweep_all().await;
        runtime.prune().await;
        runtime.sync_config_schedules().await;
        runtime.start_background();
        Ok(runtime)
    }

    /// The heartbeat and sweeper, and (on PostgreSQL) the listener for other replicas.
    fn start_background(self: &Arc<Self>) {
        self.background_tasks.spawn(ownership::keep_ownership(
            self.clone(),
            self.background.clone(),
        ));
        self.background_tasks.spawn(retention::sweep_forever(
            self.clone(),
            self.background.clone(),
        ));
        self.background_tasks
            .spawn(retention::sweep_uploads_forever(
                self.clone(),
                self.background.clone(),
            ));
        self.background_tasks.spawn(schedules::fire_forever(
            self.clone(),
            self.background.clone(),
        ));
        self.background_tasks.spawn(webhooks::deliver_forever(
            self.clone(),
            self.background.clone(),
        ));
        if let Some(url) = self.store.notification_url() {
            self.background_tasks.spawn(notifications::listen(
                self.clone(),
                url.to_string(),
                self.background.clone(),
            ));
        }
    }

    /// This process's id among the replicas (the `owner` of the runs it executes).
    pub fn replica_id(&self) -> &str {
        &self.replica.id
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The agents new runs use (a reload may replace them: read them once per request).
    pub fn agents(&self) -> Arc<AgentRegistry> {
        self.agents.load_full()
    }

    /// Makes `agents` the agents of every run started from now on.
    fn replace_agents(&self, agents: AgentRegistry) {
        self.agents.store(Arc::new(agents));
    }

    /// The context window, buffer and tokenizer of every configured model.
    pub fn catalog(&self) -> &ModelCatalog {
        &self.catalog
    }

    /// The shared MCP connections and REST tools.
    pub fn tools(&self) -> &ToolHub {
        &self.tools
    }

    /// The store, for reads (runs, events, conversations); runs are written only by the
    /// pipeline's recorder.
    /// Users' tool secrets; `None` when `secrets.key` is not set.
    pub fn secrets(&self) -> Option<&Arc<UserSecrets>> {
        self.secrets.as_ref()
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Per-key limits, for what is left of them (`GET /v1/me`).
    pub fn key_limits(&self) -> &KeyLimiter {
        &self.limits
    }

    /// Cancelled when this runtime closes: background tasks of the edge stop with it.
    pub fn background_token(&self) -> CancellationToken {
        self.background.clone()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether the run recorder can write to the store (false during an outage).
    pub fn is_storing(&self) -> bool {
        self.recorder.is_storing()
    }

    /// Unix seconds when this runtime started.
    pub fn started_at(&self) -> i64 {
        self.started_at
    }

    /// Whether a graceful shutdown has begun (no new runs are taken).
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// How many input tokens the first model call of a run of `agent` would be sent: its
    /// system prompt with the MCP servers' instructions, `history`, `prompt` with its
    /// attachments and the tools it offers, counted with the tokenizer of its first model
    /// target (images as its vendor bills them).
    pub async fn count_input_tokens(
        &self,
        agent: &Arc<AgentSpec>,
        history: Vec<ChatMessage>,
        prompt: String,
        prompt_attachments: Vec<crate::vocabulary::Attachment>,
    ) -> u64 {
        let mut request = SessionRequest::for_prompt(String::new(), agent.clone(), prompt);
        request.history = history;
        request.attachments = prompt_attachments;
        let conversation = opening_conversation(&request, &self.tools.instructions_for(agent));
        let tokenizer = tokenizer_of(agent, &self.catalog);
        let tools = self.tools.registry_for(agent).definitions().await;
        tokenizer.messages(&conversation) + tokenizer.tools(&tools)
    }

    /// Writes everything queued for the store so far.
    pub async fn flush_recorder(&self) {
        self.recorder.flush().await;
    }

    /// A session for `agent` with its tools, prompt additions, sub-agents and observers.
    fn session_for(
        self: &Arc<Self>,
        agent: &AgentSpec,
        sink: EventSink,
        control: RunControl,
    ) -> Session {
        let sub_agents: Vec<Arc<AgentSpec>> = agent
            .sub_agents
            .iter()
            .filter_map(|name| self.agents.load().get(name))
            .collect();
        Session::new(
            self.providers.clone(),
            self.tools.registry_for(agent),
            sink,
            control,
        )
        .with_catalog(self.catalog.clone())
        .with_tool_cache(ToolResultCache::new(Arc::clone(&self.cache)))
        .with_secrets(
            self.secrets
                .clone()
                .map(|secrets| secrets as Arc<dyn crate::tools::caller::SecretSource>),
        )
        .with_observer(Arc::new(GuardMetrics(self.metrics.clone())))
        .with_file_keeper(Arc::new(tool_files::StoreFileKeeper {
            store: Arc::clone(&self.store),
            limits: self.config().limits.attachments.clone(),
        }))
        .with_tool_instructions(self.tools.instructions_for(agent))
        .with_sub_agents(SubAgents {
            runner: Arc::new(ChildSessions(Arc::clone(self))),
            agents: sub_agents,
        })
    }

    /// The inbox of a run that holds its conversation's turn: `steer` messages join it.
    fn conversation_inbox(
        self: &Arc<Self>,
        seat: turns::ConversationSeat,
        request: &SessionRequest,
    ) -> Arc<dyn crate::agent::inbox::Inbox> {
        Arc::new(steering::ConversationInbox {
            runtime: Arc::clone(self),
            seat,
            run_id: request.run_id.clone(),
            agent: request.agent.clone(),
        })
    }

    /// Runs the session (or answers from the cache), counts it in the metrics and remembers a
    /// cacheable answer.
    async fn run_measured(
        self: &Arc<Self>,
        start: pipeline::SessionStart,
        sink: EventSink,
        control: RunControl,
        meter: Option<Arc<dyn crate::vocabulary::budget::SpendMeter>>,
        seat: Option<turns::ConversationSeat>,
    ) -> SessionEnd {
        let request = start.request();
        let inbox = seat.map(|seat| self.conversation_inbox(seat, request));
        let agent = request.agent.name.clone();
        let agent_spec = request.agent.clone();
        self.metrics.sessions_active.inc();
        let (end, slot) = match start {
            pipeline::SessionStart::New(request) => {
                let slot = self.cache_slot(&request);
                let cached = match &slot {
                    Some(slot) => Box::pin(self.answer_from_cache(slot, &request, &sink)).await,
                    None => None,
                };
                let end = match cached {
                    Some(result) => SessionEnd::Finished(Box::new(result)),
                    // Each way of running is boxed: the task then holds only the one it
                    // takes, sized to it, instead of room for the largest (bench/README.md,
                    // "memory per open stream").
                    None if !agent_spec.orchestration.is_empty() => {
                        Box::pin(self.run_orchestrated(&agent_spec, request, sink, control)).await
                    }
                    None => {
                        let session = self
                            .session_for(&agent_spec, sink, control)
                            .waiting_for_approvals()
                            .with_spend_meter(meter)
                            .with_inbox(inbox);
                        Box::pin(session.run_or_wait(request)).await
                    }
                };
                (end, slot)
            }
            pipeline::SessionStart::Resumed {
                request,
                mut checkpoint,
                decisions,
                ..
            } => {
                // The checkpoint names its files (images, PDFs, a tool's files); their content
                // is read again from the store, wherever the run resumes.
                self.load_attachments(&agent_spec, &mut checkpoint.conversation, &mut [])
                    .await;
                let session = self
                    .session_for(&agent_spec, sink, control)
                    .waiting_for_approvals()
                    .with_spend_meter(meter)
                    .with_inbox(inbox);
                let end = Box::pin(session.resume(request, *checkpoint, decisions)).await;
                (end, None)
            }
        };
        self.metrics.sessions_active.dec();
        if let SessionEnd::Finished(result) = &end {
            crate::telemetry::genai::record_agent_usage(
                &tracing::Span::current(),
                result.usage.input_tokens,
                result.usage.output_tokens,
                result.usage.cached_tokens,
            );
            self.record_metrics(&agent, result);
            self.remember(slot.as_ref(), &agent, result).await;
        }
        end
    }

    /// Starts the graceful end of the runs: no new runs are accepted, and running sessions get
    /// `server.drainSeconds` before they are cancelled (their results are still recorded).
    pub fn begin_drain(self: &Arc<Self>) {
        if self.draining.is_cancelled() {
            return;
        }
        self.draining.cancel();
        let deadline = Duration::from_secs(self.config.server.drain_seconds);
        let runtime = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(deadline).await;
            if !runtime.sessions.is_empty() {
                warn!(
                    running = runtime.sessions.len(),
                    "drain time is over: cancelling the remaining sessions"
                );
            }
            runtime.shutdown.cancel();
        });
    }

    /// Ends every stream that follows a run (from memory or from the store) with a
    /// `shutting_down` error; called once this process's own runs have ended.
    pub fn stop_followers(&self) {
        self.shutdown.cancel();
    }

    /// Waits until every session task has ended (the drain deadline cancels stragglers), plus
    /// a short grace for cancelled sessions to record their results.
    pub async fn drain(self: &Arc<Self>) {
        self.begin_drain();
        let drain = Duration::from_secs(self.config.server.drain_seconds);
        self.sessions.close();
        let _ = tokio::time::timeout(drain + Duration::from_secs(5), self.sessions.wait()).await;
    }

    /// For a clean stop, after the server stopped taking requests (and [`Runtime::drain`]):
    /// waits for sessions still running up to `server.drainSeconds`, writes every queued run
    /// event, closes the store, and ends the MCP connections and their process trees.
    pub async fn close(&self) {
        self.sessions.close();
        let drain = Duration::from_secs(self.config.server.drain_seconds);
        if tokio::time::timeout(drain, self.sessions.wait())
            .await
            .is_err()
        {
            warn!(
                running = self.sessions.len(),
                "sessions still running after the drain timeout; their last events are lost"
            );
        }
        // Bounded: a store that does not answer must not keep the process from exiting.
        if tokio::time::timeout(STORE_CLOSE_GRACE, self.recorder.close())
            .await
            .is_err()
        {
            warn!("the store did not take the queued runs in time; they are lost");
        }
        self.background.cancel();
        self.background_tasks.close();
        // Bounded too: a heartbeat or sweep caught in a store call that hangs must not hold
        // the exit.
        if tokio::time::timeout(STORE_CLOSE_GRACE, self.background_tasks.wait())
            .await
            .is_err()
        {
            warn!("background tasks did not stop in time; leaving them");
        }
        // A clean stop: nobody needs to wait for this replica's heartbeat to age.
        match tokio::time::timeout(
            STORE_CLOSE_GRACE,
            self.store.remove_replica(&self.replica.id),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(error)) => warn!(%error, "could not remove this replica from the store"),
            Err(_) => warn!("could not remove this replica from the store: it did not answer"),
        }
        let _ = tokio::time::timeout(STORE_CLOSE_GRACE, self.store.close()).await;
        self.tools.shutdown().await;
    }
}

/// The `session` span of the reference's attribute names; every log line inside carries them,
/// and `trace_id` (the OpenTelemetry trace when exported, else the run id) ties them together.
fn session_span(request: &SessionRequest) -> tracing::Span {
    let parent = request.parent.as_ref();
    // Without an exporter the trace id is the run id, known now: recording it later would make
    // the log layer format the span's fields a second time for every run.
    let exported = crate::telemetry::traces_exported();
    let span = info_span!(
        "session",
        otel.name = tracing::field::Empty,
        ai.agent.id = request.agent.name.as_str(),
        ai.session.txn_id = request.run_id.as_str(),
        ai.session.parent_txn_id = parent.map(|p| p.txn_id.as_str()),
        ai.session.origin_txn_id =
            parent.map_or(request.run_id.as_str(), |p| p.origin_txn_id.as_str()),
        trace_id = (!exported).then_some(request.run_id.as_str()),
    );
    if exported {
        span.record(
            "otel.name",
            tracing::field::display(format_args!("invoke_agent {}", request.agent.name)),
        );
        let trace_id = span
            .in_scope(crate::telemetry::trace_id_of_current_span)
            .unwrap_or_else(|| request.run_id.clone());
        span.record("trace_id", trace_id.as_str());
        crate::telemetry::genai::describe_agent(
            &span,
            &request.agent.name,
            request.conversation_id.as_deref(),
        );
    }
    span
}

/// Runs sub-agent sessions with the same providers, tools and observers as top-level runs; their
/// events are not streamed (the parent reports their progress) and they are not stored as runs
/// of their own (their accounting is rolled into the parent's).
struct ChildSessions(Arc<Runtime>);

#[async_trait::async_trait]
impl ChildRunner for ChildSessions {
    async fn run_child(&self, request: SessionRequest, control: RunControl) -> AgentResult {
        let agent = request.agent.clone();
        let span = session_span(&request);
        self.0
            .session_for(&agent, EventSink::discard(), control)
            .run(request)
            .instrument(span)
            .await
    }
}

/// Turns the session's context-guard trips into the guard metrics.
struct GuardMetrics(Metrics);

impl SessionObserver for GuardMetrics {
    fn context_guard(&self, event: &GuardEvent) {
        let labels = [
            event.agent.as_str(),
            &event.provider,
            &event.model,
            event.trigger,
            event.outcome,
        ];
        self.0
            .agent
            .context_guard_events_total
            .with_label_values(&labels)
            .inc();
        self.0
            .agent
            .context_guard_remaining_tokens
            .with_label_values(&labels)
            .set(event.remaining_tokens);
    }
}

/// One provider object per configured provider (built by [`crate::llm::catalog`]).
pub fn build_providers(config: &Config) -> Result<ProviderSet, RuntimeError> {
    let built =
        catalog::build_providers(&config.providers).map_err(|e| RuntimeError::Provider {
            provider: e.provider,
            detail: e.detail,
        })?;
    let mut providers = ProviderSet::default();
    for (name, provider) in built {
        providers.insert(name, provider);
    }
    Ok(providers)
}
