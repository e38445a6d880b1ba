//! The composition root: turns a loaded [`Config`] into live parts (providers, agents, store,
//! metrics) and spawns sessions as tasks. Every headend (HTTP, CLI) starts runs through
//! [`Runtime::spawn_run`], so runs are recorded, cached and measured the same way everywhere.

mod admission;
mod cached;
mod live;
mod run_events;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info_span, warn};

use crate::agent::ReportStatus;
use crate::agent::observer::{GuardEvent, SessionObserver};
use crate::agent::result::{AccountingEntry, EntryStatus, LlmAccounting};
use crate::agent::sub_agents::{ChildRunner, SubAgents};
use crate::agent::{
    AgentEvent, AgentResult, EventSink, ProviderSet, RunControl, Session, SessionRequest,
};
use crate::cache::{CacheError, ResponseCache};
use crate::config::models::ModelCatalog;
use crate::config::{AgentRegistry, AgentSpec, Config};
use crate::llm::catalog;
use crate::store::{NewRun, RecorderSettings, RunRecorder, Store, StoreError};
use crate::telemetry::{Metrics, MetricsError};
use crate::tools::hub::{ToolHub, ToolSetupError};
pub use admission::{Overloaded, SessionSlot};

/// Events buffered per run before the session waits for a slow consumer.
const RUN_EVENT_BUFFER: usize = 256;

/// The most a spawned session task may hold inline. A task is moved (copied) several times on
/// its way into the scheduler; the session itself is boxed inside it.
const MAX_SESSION_TASK_BYTES: usize = 2048;

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
}

impl RuntimeError {
    /// Whether the configuration is at fault (exit 4) rather than a service failing (exit 3).
    pub fn is_config_error(&self) -> bool {
        match self {
            Self::Provider { .. } => true,
            Self::Tools(error) => error.is_config_error(),
            Self::Cache(error) => error.is_config(),
            Self::Store(_) | Self::Metrics(_) => false,
        }
    }
}

/// Everything a running server (or one CLI run) shares.
pub struct Runtime {
    pub config: Config,
    pub agents: AgentRegistry,
    pub providers: ProviderSet,
    /// The shared MCP connections and REST tools; each run gets its agent's registry.
    pub tools: ToolHub,
    pub store: Arc<dyn Store>,
    /// Persists every run and its events in batches, off the sessions' and responses' path.
    pub recorder: RunRecorder,
    /// Answers repeated requests to agents with a `cache` TTL.
    pub cache: Arc<dyn ResponseCache>,
    pub metrics: Metrics,
    /// Every spawned session, so [`Runtime::close`] can wait for them before the last flush.
    sessions: TaskTracker,
    /// Cancelled at shutdown; every run's token is a child of it.
    pub shutdown: CancellationToken,
    /// Cancelled when a graceful shutdown begins: no new runs, running ones get
    /// `server.drainSeconds` before `shutdown` cancels them.
    pub draining: CancellationToken,
    /// Unix seconds when this runtime started (the `created` of `/v1/models`).
    pub started_at: i64,
    /// Context windows, tokenizers and prices by provider/model.
    pub catalog: Arc<ModelCatalog>,
    /// Runs in progress (for cancellation) and request ids (for idempotency).
    pub live: live::LiveRuns,
    /// `server.maxConcurrentSessions` running, `server.maxQueuedSessions` waiting.
    pub admission: admission::Admission,
}

/// A run in progress: its events, a way to cancel it, and its result when it ends.
pub struct RunHandle {
    pub run_id: String,
    /// The run's events in order; the n-th event received is the one stored with seq n (the SSE
    /// `id` of SPEC §4.2), so a stream resumed from the store continues where this one stopped.
    pub events: mpsc::Receiver<AgentEvent>,
    /// `stop` asks for a graceful final turn, `abort` ends the run now.
    pub control: RunControl,
    /// Cancelled when the server shuts down: a run that then ends cancelled was cut off by it.
    pub draining: CancellationToken,
    pub result: oneshot::Receiver<AgentResult>,
}

impl Runtime {
    /// Builds providers, opens (and migrates) the store and connects the MCP servers the
    /// agents use; [`Runtime::close`] ends them.
    pub async fn start(config: Config, agents: AgentRegistry) -> Result<Arc<Self>, RuntimeError> {
        let providers = build_providers(&config)?;
        let metrics = Metrics::new()?;
        let store = crate::store::open(&config.store.url).await?;
        let catalog = Arc::new(ModelCatalog::from_config(&config));
        let tools = ToolHub::start(&config, &agents, &metrics).await?;
        let cache = crate::cache::open(&config.cache, store.clone()).await?;
        let recorder = RunRecorder::start(
            store.clone(),
            RecorderSettings::for_store(store.as_ref()),
            metrics.run_events_dropped_total.clone(),
        );
        let server_limits = (
            config.server.max_concurrent_sessions,
            config.server.max_queued_sessions,
        );
        Ok(Arc::new(Self {
            config,
            agents,
            providers,
            tools,
            store,
            recorder,
            cache,
            metrics,
            sessions: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            draining: CancellationToken::new(),
            started_at: chrono::Utc::now().timestamp(),
            catalog,
            live: live::LiveRuns::default(),
            admission: admission::Admission::new(server_limits.0, server_limits.1),
        }))
    }

    /// Starts a session task. The run's start, every event (even when nobody listens any more)
    /// and its end are queued for the store in that order; the end is queued before the result
    /// is handed over, so a read that flushes the recorder first sees the finished run.
    /// Like [`Runtime::spawn_run`], for a run that was admitted: it holds `slot` until it ends.
    pub fn spawn_admitted(
        self: &Arc<Self>,
        slot: SessionSlot,
        request: SessionRequest,
        user_id: Option<String>,
    ) -> RunHandle {
        self.spawn_with_slot(Some(slot), request, user_id)
    }

    pub fn spawn_run(
        self: &Arc<Self>,
        request: SessionRequest,
        user_id: Option<String>,
    ) -> RunHandle {
        self.spawn_with_slot(None, request, user_id)
    }

    fn spawn_with_slot(
        self: &Arc<Self>,
        slot: Option<SessionSlot>,
        request: SessionRequest,
        user_id: Option<String>,
    ) -> RunHandle {
        let (sink, session_events) = EventSink::channel(RUN_EVENT_BUFFER);
        let (listener, events) = mpsc::channel(RUN_EVENT_BUFFER);
        let control = RunControl::child_of(&self.shutdown);
        let (result_tx, result) = oneshot::channel();
        let run_id = request.run_id.clone();
        let runtime = Arc::clone(self);
        let session_control = control.clone();
        self.live.started(&run_id, control.clone());
        let span = session_span(&request);
        let new_run = NewRun {
            id: request.run_id.clone(),
            agent: request.agent.name.clone(),
            user_id,
            conversation_id: request.conversation_id.clone(),
            created_at: chrono::Utc::now(),
        };
        let task = async move {
            runtime.recorder.run_started(new_run.clone()).await;
            let tee = run_events::tee(
                session_events,
                listener,
                &runtime.recorder,
                request.run_id.clone(),
            );
            let user_id = new_run.user_id.as_deref();
            // Boxed: the session's state machine is ~25 KB, and unboxed it made the task
            // itself that large, copied three times on every spawn (callgrind: ~15 % of
            // agentd's instructions per request went to those copies).
            let run = Box::pin(runtime.run_measured(request, user_id, sink, session_control));
            let (result, ()) = tokio::join!(run, tee);
            runtime
                .recorder
                .run_finished(new_run, (&result).into())
                .await;
            drop(slot);
            runtime.live.ended(&result.run_id);
            let _ = result_tx.send(result);
        }
        .instrument(span);
        debug_assert!(
            std::mem::size_of_val(&task) <= MAX_SESSION_TASK_BYTES,
            "the session task is {} bytes: box what made it grow",
            std::mem::size_of_val(&task)
        );
        self.sessions.spawn(task);
        RunHandle {
            run_id,
            events,
            control,
            draining: self.draining.clone(),
            result,
        }
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
            .filter_map(|name| self.agents.get(name))
            .collect();
        Session::new(
            self.providers.clone(),
            self.tools.registry_for(agent),
            sink,
            control,
        )
        .with_catalog(self.catalog.clone())
        .with_observer(Arc::new(GuardMetrics(self.metrics.clone())))
        .with_tool_instructions(self.tools.instructions_for(agent))
        .with_sub_agents(SubAgents {
            runner: Arc::new(ChildSessions(Arc::clone(self))),
            agents: sub_agents,
        })
    }

    /// Runs the session (or answers from the cache), counts it in the metrics and remembers a
    /// cacheable answer.
    async fn run_measured(
        self: &Arc<Self>,
        request: SessionRequest,
        user_id: Option<&str>,
        sink: EventSink,
        control: RunControl,
    ) -> AgentResult {
        let agent = request.agent.name.clone();
        self.metrics.sessions_active.inc();
        let slot = self.cache_slot(&request, user_id);
        let cached = match &slot {
            Some(slot) => self.answer_from_cache(slot, &request, &sink).await,
            None => None,
        };
        let result = match cached {
            Some(result) => result,
            None => {
                let agent_spec = request.agent.clone();
                self.session_for(&agent_spec, sink, control)
                    .run(request)
                    .await
            }
        };
        self.metrics.sessions_active.dec();
        self.record_metrics(&agent, &result);
        self.remember(slot.as_ref(), &agent, &result).await;
        result
    }

    /// Starts the graceful end of the runs: no new runs are accepted, and running sessions get
    /// `server.drainSeconds` before they are cancelled (their results are still recorded).
    pub fn begin_drain(&self) {
        if self.draining.is_cancelled() {
            return;
        }
        self.draining.cancel();
        let deadline = Duration::from_secs(self.config.server.drain_seconds);
        let shutdown = self.shutdown.clone();
        let sessions = self.metrics.sessions_active.clone();
        tokio::spawn(async move {
            tokio::time::sleep(deadline).await;
            if sessions.get() > 0 {
                warn!(
                    running = sessions.get(),
                    "drain time is over: cancelling the remaining sessions"
                );
            }
            shutdown.cancel();
        });
    }

    /// Waits until every session has ended (the drain deadline cancels stragglers), plus a
    /// short grace for cancelled sessions to record their results.
    pub async fn drain(&self) {
        self.begin_drain();
        let drain = Duration::from_secs(self.config.server.drain_seconds);
        self.wait_for_sessions(tokio::time::Instant::now() + drain + Duration::from_secs(5))
            .await;
    }

    async fn wait_for_sessions(&self, deadline: tokio::time::Instant) {
        while self.metrics.sessions_active.get() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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
        self.recorder.close().await;
        self.store.close().await;
        self.tools.shutdown().await;
    }

    fn record_metrics(&self, agent: &str, result: &AgentResult) {
        let m = &self.metrics;
        m.sessions_total
            .with_label_values(&[agent, result.exit_reason.as_str()])
            .inc();
        if let Some(report) = &result.final_report {
            let status = match report.status {
                ReportStatus::Success => "success",
                ReportStatus::Failure => "failure",
            };
            m.agent
                .final_report_total
                .with_label_values(&[agent, status])
                .inc();
        }
        let mut attempts = 0u64;
        let mut upstream_ms = 0u64;
        // Sub-agents' entries are rolled in, but their time is inside the parent's tool call.
        let own = |lineage: &crate::agent::result::Lineage| {
            lineage.txn_id.as_deref().is_none_or(|t| t == result.run_id)
        };
        for entry in &result.accounting {
            match entry {
                AccountingEntry::Llm(llm) => {
                    attempts += 1;
                    if own(&llm.lineage) {
                        upstream_ms += llm.latency;
                    }
                    self.record_llm_entry(agent, llm);
                }
                AccountingEntry::Tool(tool) => {
                    // A name the model made up must not become a label value.
                    if own(&tool.lineage) {
                        upstream_ms += tool.latency;
                    }
                    let made_up = tool
                        .error
                        .as_deref()
                        .is_some_and(|e| e.starts_with("unknown tool"));
                    let (server, name) = if made_up {
                        ("unknown", "unknown")
                    } else {
                        (tool.mcp_server.as_str(), tool.command.as_str())
                    };
                    let labels = [agent, server, name];
                    m.agent
                        .tool_invocations_total
                        .with_label_values(&labels)
                        .inc();
                    m.agent
                        .tool_latency_ms
                        .with_label_values(&labels)
                        .observe(tool.latency as f64);
                    if tool.status == EntryStatus::Failed {
                        m.agent.tool_errors_total.with_label_values(&labels).inc();
                    }
                }
            }
        }
        let overhead_ms = result.duration_ms.saturating_sub(upstream_ms);
        m.agent
            .overhead_seconds
            .with_label_values(&[agent])
            .observe(overhead_ms as f64 / 1000.0);
        // Every turn makes one first attempt; the others were retries.
        let retries = attempts.saturating_sub(u64::from(result.turns));
        if let (Some(target), true) = (
            self.agents
                .get(agent)
                .and_then(|a| a.targets.first().cloned()),
            retries > 0,
        ) {
            m.llm_retries_total
                .with_label_values(&[agent, &target.provider, &target.model])
                .inc_by(retries);
        }
    }

    fn record_llm_entry(&self, agent: &str, llm: &LlmAccounting) {
        let m = &self.metrics;
        let labels = [agent, llm.provider.as_str(), llm.model.as_str()];
        let status = if llm.error.is_some() { "failed" } else { "ok" };
        m.llm_requests_total
            .with_label_values(&[agent, &llm.provider, &llm.model, status])
            .inc();
        m.llm_latency_ms
            .with_label_values(&labels)
            .observe(llm.latency as f64);
        m.llm_prompt_tokens_total
            .with_label_values(&labels)
            .inc_by(llm.tokens.input_tokens);
        m.llm_completion_tokens_total
            .with_label_values(&labels)
            .inc_by(llm.tokens.output_tokens);
        if let Some(cost) = llm.cost_usd.filter(|c| *c > 0.0) {
            m.agent
                .llm_cost_usd_total
                .with_label_values(&labels)
                .inc_by(cost);
        }
        if llm.error.is_some() {
            m.llm_errors_total.with_label_values(&labels).inc();
        }
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
        ai.agent.id = %request.agent.name,
        ai.session.txn_id = %request.run_id,
        ai.session.parent_txn_id = parent.map(|p| p.txn_id.as_str()),
        ai.session.origin_txn_id = %parent.map_or(request.run_id.as_str(), |p| p.origin_txn_id.as_str()),
        trace_id = (!exported).then_some(request.run_id.as_str()),
    );
    if exported {
        let trace_id = span
            .in_scope(crate::telemetry::trace_id_of_current_span)
            .unwrap_or_else(|| request.run_id.clone());
        span.record("trace_id", trace_id.as_str());
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
    let built = catalog::build_providers(config).map_err(|e| RuntimeError::Provider {
        provider: e.provider,
        detail: e.detail,
    })?;
    let mut providers = ProviderSet::default();
    for (name, provider) in built {
        providers.insert(name, provider);
    }
    Ok(providers)
}
