//! One LLM attempt: pick the provider, stream the response out as events (text deltas only when
//! the text *is* the answer), and record an accounting entry whatever happens.

use std::time::Instant;

use futures_util::StreamExt;
use tracing::Instrument;

use super::events::{AgentEvent, TextDelta};
use super::result::{AccountingEntry, EntryStatus, LlmAccounting, TokenCounts};
use super::session::{Run, Session};
use super::xml::stream::FinalTagStream;
use crate::config::Target;
use crate::config::models::ModelPrice;
use crate::llm::{
    ChatMessage, LlmDelta, LlmError, LlmRequest, LlmResponse, Provider, ResponseAssembler,
    ToolDefinition,
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
            sampling: run
                .request
                .agent
                .sampling
                .overridden_by(&run.request.overrides),
            timeout: run.request.agent.limits.llm_timeout,
        };
        let routing = routing_for(run);
        let started = Instant::now();
        let outcome = match self.providers.get(&target.provider) {
            None => Err(LlmError::Model(format!(
                "provider {:?} is not configured",
                target.provider
            ))),
            Some(provider) => tokio::select! {
                biased;
                _ = self.control.abort.cancelled() => return AttemptOutcome::Aborted,
                outcome = self
                    .stream_response(provider.as_ref(), request, routing)
                    .instrument(tracing::info_span!("llm", ai.llm.provider = %target.provider, ai.llm.model = %target.model)) => outcome,
            },
        };
        let outcome = outcome.map(|(response, streamed)| {
            run.streamed_this_attempt = streamed;
            response
        });
        if let Ok(response) = &outcome {
            commit_to_guard(run, response);
        }
        let price = self.catalog.facts(&target.provider, &target.model).price;
        let entry = llm_entry(run, target, started, &outcome, price.as_ref());
        self.record_accounting(run, entry).await;
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
        mut routing: TextRouting,
    ) -> Result<(LlmResponse, bool), LlmError> {
        let mut stream = provider.stream(request).await?;
        let mut assembler = ResponseAssembler::default();
        while let Some(delta) = stream.next().await {
            let delta = delta?;
            match &delta {
                LlmDelta::Text(text) => self.route_text(&mut routing, text).await,
                LlmDelta::Reasoning(text) => {
                    self.events
                        .emit(AgentEvent::Thinking(TextDelta { text: text.clone() }))
                        .await
                }
                _ => {}
            }
            assembler.push(&delta);
        }
        let streamed = match &mut routing {
            TextRouting::FinalTag(filter) => {
                let tail = filter.finish();
                self.emit_output(tail).await;
                filter.streamed_any()
            }
            TextRouting::Emit | TextRouting::Hold => false,
        };
        Ok((assembler.finish(), streamed))
    }

    async fn route_text(&self, routing: &mut TextRouting, text: &str) {
        match routing {
            TextRouting::Emit => self.emit_output(text.to_string()).await,
            TextRouting::FinalTag(filter) => {
                let payload = filter.push(text);
                self.emit_output(payload).await;
            }
            TextRouting::Hold => {}
        }
    }

    async fn emit_output(&self, text: String) {
        if !text.is_empty() {
            self.events
                .emit(AgentEvent::Output(TextDelta { text }))
                .await;
        }
    }
}

/// What happens to text deltas while they stream.
enum TextRouting {
    /// The text is the answer (`finalization: text`).
    Emit,
    /// Only the inside of the final tag is the answer (XML transports, text formats).
    FinalTag(FinalTagStream),
    /// Nothing is shown until the answer is validated (native final report, json).
    Hold,
}

fn routing_for(run: &Run) -> TextRouting {
    if run.streams_text() {
        return TextRouting::Emit;
    }
    match &run.xml {
        Some(xml) if run.format != "json" => TextRouting::FinalTag(FinalTagStream::new(&xml.nonce)),
        _ => TextRouting::Hold,
    }
}

fn is_empty(response: &LlmResponse) -> bool {
    response.text.trim().is_empty()
        && response.reasoning.trim().is_empty()
        && response.tool_calls.is_empty()
}

/// The provider's token count of the exchange replaces the guard's estimates; when it reported
/// nothing, the conversation is estimated instead.
fn commit_to_guard(run: &mut Run, response: &LlmResponse) {
    let reported = response
        .usage
        .filter(|u| u.input_tokens > 0)
        .map(|u| u.input_tokens + u.output_tokens);
    let estimated = if reported.is_some() {
        0
    } else {
        let reply = ChatMessage {
            role: crate::llm::Role::Assistant,
            content: Some(response.text.clone()),
            tool_calls: response.tool_calls.clone(),
            tool_call_id: None,
            reasoning: None,
            reasoning_signature: None,
        };
        run.tokenizer.messages(&run.transcript.conversation) + run.tokenizer.message(&reply)
    };
    run.guard.commit_response(reported, estimated);
}

fn llm_entry(
    run: &Run,
    target: &Target,
    started: Instant,
    outcome: &Result<LlmResponse, LlmError>,
    price: Option<&ModelPrice>,
) -> AccountingEntry {
    let response = outcome.as_ref().ok();
    let usage = response.and_then(|r| r.usage).unwrap_or_default();
    let metadata = response.map(|r| r.metadata.clone()).unwrap_or_default();
    // A cost the provider reported (OpenRouter) beats one computed from the price table.
    let cost_usd = metadata.cost_usd.or_else(|| {
        price.map(|p| {
            p.cost(
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_tokens,
                usage.cache_write_tokens,
            )
        })
    });
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
        tokens: TokenCounts::from(usage),
        cost_usd,
        actual_provider: metadata.actual_provider,
        actual_model: metadata.actual_model,
        stop_reason: response
            .and_then(|r| r.stop_reason.as_ref())
            .map(|s| s.as_str().to_string()),
        error: outcome.as_ref().err().map(ToString::to_string),
        lineage: run.lineage(),
    })
}
