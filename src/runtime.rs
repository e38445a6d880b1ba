//! The composition root: turns a loaded [`Config`] into live parts (providers, agents, store,
//! metrics) and spawns sessions as tasks. Every headend (HTTP, CLI) starts runs through
//! [`Runtime::spawn_run`], so runs are recorded and measured the same way everywhere.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span, warn};

use crate::agent::result::AccountingEntry;
use crate::agent::{
    AgentEvent, AgentResult, EventSink, ProviderSet, RunControl, Session, SessionRequest,
};
use crate::config::{AgentRegistry, Config};
use crate::llm::catalog;
use crate::store::{NewRun, Store, StoreError};
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
}

/// Everything a running server (or one CLI run) shares.
pub struct Runtime {
    pub config: Config,
    pub agents: AgentRegistry,
    pub providers: ProviderSet,
    /// Tools sessions may call (MCP servers, REST tools).
    pub tools: ToolRegistry,
    pub store: Arc<dyn Store>,
    pub metrics: Metrics,
    /// Cancelled at shutdown; every run's token is a child of it.
    pub shutdown: CancellationToken,
    /// Unix seconds when this runtime started (the `created` of `/v1/models`).
    pub started_at: i64,
}

/// A run in progress: its events, a way to cancel it, and its result when it ends.
pub struct RunHandle {
    pub run_id: String,
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
        Ok(Arc::new(Self {
            config,
            agents,
            providers,
            tools: ToolRegistry::default(),
            store,
            metrics: Metrics::new()?,
            shutdown: CancellationToken::new(),
            started_at: chrono::Utc::now().timestamp(),
        }))
    }

    /// Starts a session task. The run is recorded in the store before it starts and after it
    /// ends, even when nobody listens to its events any more.
    pub fn spawn_run(
        self: &Arc<Self>,
        request: SessionRequest,
        user_id: Option<String>,
    ) -> RunHandle {
        let (sink, events) = EventSink::channel(RUN_EVENT_BUFFER);
        let control = RunControl::child_of(&self.shutdown);
        let (result_tx, result) = oneshot::channel();
        let run_id = request.run_id.clone();
        let runtime = Arc::clone(self);
        let session_control = control.clone();
        let span = info_span!("session", ai.agent.id = %request.agent.name, ai.session.txn_id = %request.run_id);
        tokio::spawn(
            async move {
                let result = runtime
                    .run_recorded(request, user_id, sink, session_control)
                    .await;
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
        let result = Session::new(self.providers.clone(), self.tools.clone(), sink, control)
            .run(request)
            .await;
        self.metrics.sessions_active.dec();
        self.record_metrics(&agent, &result);
        if let Err(error) = self
            .store
            .finish_run(&result.run_id, &(&result).into())
            .await
        {
            warn!(%error, run_id = %result.run_id, "could not record the run end");
        }
        result
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
