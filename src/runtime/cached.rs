//! The response cache around a run: look it up before the first LLM turn, replay a hit as the
//! events a run would emit, and store a cacheable result after. Cache failures are logged and
//! the run goes on as if there were no cache.

use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::Runtime;
use crate::agent::{AgentResult, EventSink, SessionRequest};
use crate::cache::{CacheKey, ResponseCache, cached_run_events, cached_run_result, is_cacheable};

/// Where a cacheable run's answer is looked up and stored.
pub(super) struct CacheSlot {
    key: CacheKey,
    ttl: Duration,
}

impl Runtime {
    /// The slot of this request when its agent has a `cache` TTL.
    pub(super) fn cache_slot(&self, request: &SessionRequest) -> Option<CacheSlot> {
        let ttl = request.agent.cache_ttl?;
        // The cache key knows nothing of a client's tools: such runs are never cached.
        if !request.client_tools.definitions.is_empty() || request.continues_tool_calls() {
            return None;
        }
        Some(CacheSlot {
            key: CacheKey::for_request(request),
            ttl,
        })
    }

    /// On a hit, emits the run's events and returns its result; no LLM is called.
    pub(super) async fn answer_from_cache(
        &self,
        slot: &CacheSlot,
        request: &SessionRequest,
        sink: &EventSink,
    ) -> Option<AgentResult> {
        let started = Instant::now();
        let now = chrono::Utc::now();
        let hit = match self.cache.get(&slot.key, now).await {
            Ok(hit) => hit?,
            Err(error) => {
                if !error.is_skipped() {
                    warn!(%error, "response cache lookup failed; running the agent");
                }
                return None;
            }
        };
        info!(
            cache_key = slot.key.as_str(),
            cache_age_ms = (now - hit.stored_at).num_milliseconds(),
            agent = %request.agent.name,
            "answered from the response cache"
        );
        self.metrics
            .cache_hits_total
            .with_label_values(&[request.agent.name.as_str()])
            .inc();
        let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let result = cached_run_result(hit, request, elapsed);
        for event in cached_run_events(&result, request) {
            sink.emit(event).await;
        }
        Some(result)
    }

    /// Stores a cacheable result under its slot; anything else is left out.
    pub(super) async fn remember(
        &self,
        slot: Option<&CacheSlot>,
        agent: &str,
        result: &AgentResult,
    ) {
        let Some(slot) = slot.filter(|_| is_cacheable(result)) else {
            return;
        };
        let now = chrono::Utc::now();
        if let Err(error) = self
            .cache
            .put(&slot.key, agent, result, slot.ttl, now)
            .await
            && !error.is_skipped()
        {
            warn!(%error, "could not store the result in the response cache");
        }
    }
}
