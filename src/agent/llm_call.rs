//! One LLM attempt: pick the provider, stream the response out as events (text deltas only when
//! the text *is* the answer), and record an accounting entry whatever happens.

use std::time::Instant;

use futures_util::StreamExt;

use super::events::{AgentEvent, TextDelta};
use super::result::{AccountingEntry, EntryStatus, LlmAccounting, TokenCounts};
use super::session::{Run, Session};
use crate::config::Target;
use crate::llm::{
    ChatMessage, LlmDelta, LlmError, LlmRequest, LlmResponse, Provider, ResponseAssembler,
    SamplingParams, ToolDefinition,
};

/// How one attempt ended.
pub(super) enum AttemptOutcome {
    Answer(LlmResponse),
    /// No content, no tool calls, no reasoning.
    Empty,
    Failed(LlmError),
    Aborted,
}

impl Session {
    /// Calls `target` with the conversation plus this attempt's ephemeral messages.
    pub(super) async fn call_llm(
        &self,
        run: &mut Run,
        target: &Target,
        tools: Vec<ToolDefinition>,
        ephemeral: Vec<ChatMessage>,
    ) -> AttemptOutcome {
        let mut messages = run.transcript.conversation.clone();
        messages.extend(ephemeral);
        let request = LlmRequest {
            model: target.model.clone(),
            messages,
            tools,
            sampling: sampling(run),
            timeout: run.request.agent.limits.llm_timeout,
        };
        let stream_text = run.streams_text();
        let started = Instant::now();
        let outcome = match self.providers.get(&target.provider) {
            None => Err(LlmError::Model(format!(
                "provider {:?} is not configured",
                target.provider
            ))),
            Some(provider) => tokio::select! {
                biased;
                _ = self.control.abort.cancelled() => return AttemptOutcome::Aborted,
                outcome = self.stream_response(provider.as_ref(), request, stream_text) => outcome,
            },
        };
        let entry = llm_entry(run, target, started, &outcome);
        run.transcript.accounting.push(entry.clone());
        self.events.emit(AgentEvent::Accounting(entry)).await;
        match outcome {
            Ok(response) if is_empty(&response) => AttemptOutcome::Empty,
            Ok(response) => AttemptOutcome::Answer(response),
            Err(error) => AttemptOutcome::Failed(error),
        }
    }

    async fn stream_response(
        &self,
        provider: &dyn Provider,
        request: LlmRequest,
        stream_text: bool,
    ) -> Result<LlmResponse, LlmError> {
        let mut stream = provider.stream(request).await?;
        let mut assembler = ResponseAssembler::default();
        while let Some(delta) = stream.next().await {
            let delta = delta?;
            match &delta {
                LlmDelta::Text(text) if stream_text => {
                    self.events
                        .emit(AgentEvent::Output(TextDelta { text: text.clone() }))
                        .await
                }
                LlmDelta::Reasoning(text) => {
                    self.events
                        .emit(AgentEvent::Thinking(TextDelta { text: text.clone() }))
                        .await
                }
                _ => {}
            }
            assembler.push(&delta);
        }
        Ok(assembler.finish())
    }
}

fn sampling(run: &Run) -> SamplingParams {
    let agent = &run.request.agent.sampling;
    let overrides = &run.request.overrides;
    SamplingParams {
        temperature: overrides.temperature.or(agent.temperature),
        top_p: overrides.top_p.or(agent.top_p),
        top_k: agent.top_k,
        repeat_penalty: agent.repeat_penalty,
        max_output_tokens: overrides.max_output_tokens.or(agent.max_output_tokens),
        reasoning: agent.reasoning,
        reasoning_tokens: agent.reasoning_tokens,
    }
}

fn is_empty(response: &LlmResponse) -> bool {
    response.text.trim().is_empty()
        && response.reasoning.trim().is_empty()
        && response.tool_calls.is_empty()
}

fn llm_entry(
    run: &Run,
    target: &Target,
    started: Instant,
    outcome: &Result<LlmResponse, LlmError>,
) -> AccountingEntry {
    let response = outcome.as_ref().ok();
    AccountingEntry::Llm(LlmAccounting {
        timestamp: chrono::Utc::now().timestamp_millis(),
        status: if outcome.is_ok() {
            EntryStatus::Ok
        } else {
            EntryStatus::Failed
        },
        latency: started.elapsed().as_millis() as u64,
        provider: target.provider.clone(),
        model: target.model.clone(),
        tokens: TokenCounts::from(response.and_then(|r| r.usage).unwrap_or_default()),
        cost_usd: None,
        stop_reason: response
            .and_then(|r| r.stop_reason.as_ref())
            .map(|s| s.as_str().to_string()),
        error: outcome.as_ref().err().map(ToString::to_string),
        agent_id: Some(run.request.agent.name.clone()),
        txn_id: Some(run.request.run_id.clone()),
    })
}
