//! The composition root: turns a loaded [`Config`] into live parts (providers, agents, store,
//! metrics) and spawns sessions as tasks. Every headend (HTTP, CLI) starts runs through
//! [`Runtime::spawn_run`], so runs are recorded, cached and measured the same way everywhere.

mod cached;
mod run_events;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info_span, warn};

use crate::agent::result::AccountingEntry;
use crate::agent::{
    AgentEvent, AgentResult, EventSink, ProviderSet, RunControl, Session, SessionRequest,
};
use crate::cache::{CacheError, ResponseCache};
use crate::config::{AgentRegistry, Config, ProviderConfig, ProviderKind};
use crate::llm::openai::{OpenAiProvider, OpenAiSettings};
use crate::store::{NewRun, RecorderSettings, RunEventRecorder, Store, StoreError};
use crate::telemetry::{Metrics, MetricsError};
use crate::tools::ToolRegistry;

/// Events buffered per run before the session waits for a slow consumer.
const RUN_EVENT_BUFFER: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("providers.{provider}: {detail}")]
    Provider { provider: String, detail: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error(transparent)]
    Cache(#[from] CacheError),
}

impl RuntimeError {
    /// True when the configuration is at fault (exit 4) rather than a service (exit 3).
    pub fn is_config(&self) -> bool {
        match self {
            Self::Provider { .. } => true,
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
    /// Tools sessions may call (MCP servers, REST tools).
    pub tools: ToolRegistry,
    pub store: Arc<dyn Store>,
    /// Persists every run's events in batches, off the sessions' path.
    pub run_events: RunEventRecorder,
    /// Answers repeated requests to agents with a `cache` TTL.
    pub cache: Arc<dyn ResponseCache>,
    pub metrics: Metrics,
    /// Every spawned session, so [`Runtime::close`] can wait for them before the last flush.
    sessions: TaskTracker,
    /// Cancelled at shutdown; every run's token is a child of it.
    pub shutdown: CancellationToken,
    /// Unix seconds when this runtime started (the `created` of `/v1/models`).
    pub started_at: i64,
}

/// A run in progress: its events, a way to cancel it, and its result when it ends.
pub struct RunHandle {
    pub run_id: String,
    /// The run's events in order; the n-th event received is the one stored with seq n (the SSE
    /// `id` of SPEC §4.2), so a stream resumed from the store continues where this one stopped.
    pub events: mpsc::Receiver<AgentEvent>,
    /// `stop` asks for a graceful final turn, `abort` ends the run now.
    pub control: RunControl,
    pub result: oneshot::Receiver<AgentResult>,
}

impl Runtime {
    /// Builds providers and opens (and migrates) the store.
    pub async fn start(config: Config, agents: AgentRegistry) -> Result<Arc<Self>, RuntimeError> {
        let providers = build_providers(&config)?;
        let store = crate::store::open(&config.store.url).await?;
        let metrics = Metrics::new()?;
        let cache = crate::cache::open(&config.cache, store.clone()).await?;
        let run_events = RunEventRecorder::start(
            store.clone(),
            RecorderSettings::default(),
            metrics.run_events_dropped_total.clone(),
        );
        Ok(Arc::new(Self {
            config,
            agents,
            providers,
            tools: ToolRegistry::default(),
            store,
            run_events,
            cache,
            metrics,
            sessions: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            started_at: chrono::Utc::now().timestamp(),
        }))
    }

    /// Starts a session task. The run is recorded in the store before it starts and after it
    /// ends, and every event is queued for the store, even when nobody listens any more.
    pub fn spawn_run(
        self: &Arc<Self>,
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
        let span = info_span!("session", ai.agent.id = %request.agent.name, ai.session.txn_id = %request.run_id);
        self.sessions.spawn(
            async move {
                let tee = run_events::tee(
                    session_events,
                    listener,
                    &runtime.run_events,
                    request.run_id.clone(),
                );
                let run = runtime.run_recorded(request, user_id, sink, session_control);
                let (result, ()) = tokio::join!(run, tee);
                let _ = result_tx.send(result);
            }
            .instrument(span),
        );
        RunHandle {
            run_id,
            events,
            control,
            result,
        }
    }

    async fn run_recorded(
        &self,
        request: SessionRequest,
        user_id: Option<String>,
        sink: EventSink,
        control: RunControl,
    ) -> AgentResult {
        let agent = request.agent.name.clone();
        let new_run = NewRun {
            id: request.run_id.clone(),
            agent: agent.clone(),
            user_id,
            conversation_id: request.conversation_id.clone(),
            created_at: chrono::Utc::now(),
        };
        if let Err(error) = self.store.insert_run(&new_run).await {
            warn!(%error, run_id = %new_run.id, "could not record the run start");
        }
        self.metrics.sessions_active.inc();
        let slot = self.cache_slot(&request, new_run.user_id.as_deref());
        let cached = match &slot {
            Some(slot) => self.answer_from_cache(slot, &request, &sink).await,
            None => None,
        };
        let result = match cached {
            Some(result) => result,
            None => {
                Session::new(self.providers.clone(), self.tools.clone(), sink, control)
                    .run(request)
                    .await
            }
        };
        self.metrics.sessions_active.dec();
        self.record_metrics(&agent, &result);
        let finish = async {
            if let Err(error) = self
                .store
                .finish_run(&result.run_id, &(&result).into())
                .await
            {
                warn!(%error, run_id = %result.run_id, "could not record the run end");
            }
        };
        tokio::join!(finish, self.remember(slot.as_ref(), &agent, &result));
        result
    }

    /// For a clean stop, after the server stopped taking requests: waits for running sessions
    /// (they were cancelled with `shutdown`) up to `server.drainSeconds`, writes every queued run
    /// event, and closes the store.
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
        self.run_events.close().await;
        self.store.close().await;
    }

    fn record_metrics(&self, agent: &str, result: &AgentResult) {
        let m = &self.metrics;
        m.sessions_total
            .with_label_values(&[agent, result.exit_reason.as_str()])
            .inc();
        for entry in &result.accounting {
            let AccountingEntry::Llm(llm) = entry else {
                continue;
            };
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
            if llm.error.is_some() {
                m.llm_errors_total.with_label_values(&labels).inc();
            }
        }
    }
}

/// One provider object per configured provider; fails on a type this build cannot speak.
pub fn build_providers(config: &Config) -> Result<ProviderSet, RuntimeError> {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .build()
        .map_err(|e| RuntimeError::Provider {
            provider: "*".into(),
            detail: format!("HTTP client: {e}"),
        })?;
    let mut providers = ProviderSet::default();
    for (name, provider) in &config.providers {
        let settings = openai_settings(name, provider)?;
        let built =
            OpenAiProvider::new(client.clone(), settings).map_err(|e| RuntimeError::Provider {
                provider: name.clone(),
                detail: e.to_string(),
            })?;
        providers.insert(name.clone(), Arc::new(built));
    }
    Ok(providers)
}

fn openai_settings(name: &str, provider: &ProviderConfig) -> Result<OpenAiSettings, RuntimeError> {
    let default_base = match provider.kind {
        ProviderKind::Openai => "https://api.openai.com/v1",
        ProviderKind::Openrouter => "https://openrouter.ai/api/v1",
        ProviderKind::Ollama => "http://127.0.0.1:11434/v1",
        ProviderKind::OpenaiCompatible => "",
        ProviderKind::Anthropic | ProviderKind::Google => {
            return Err(RuntimeError::Provider {
                provider: name.to_string(),
                detail: "type anthropic/google is not available in this build yet; use openai-compatible".into(),
            });
        }
    };
    let base_url = provider
        .base_url
        .clone()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| default_base.to_string());
    if base_url.is_empty() {
        return Err(RuntimeError::Provider {
            provider: name.to_string(),
            detail: "baseUrl is required for openai-compatible".into(),
        });
    }
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(RuntimeError::Provider {
            provider: name.to_string(),
            detail: format!("baseUrl {base_url:?} must start with http:// or https://"),
        });
    }
    Ok(OpenAiSettings {
        base_url,
        api_key: provider.api_key.clone(),
        extra_headers: provider
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        include_usage: provider.include_usage.unwrap_or(true),
        stream: provider.stream.unwrap_or(true),
    })
}
