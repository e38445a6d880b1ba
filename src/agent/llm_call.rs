//! One LLM attempt: pick the provider, stream the response out as events (text deltas only when
//! the text *is* the answer), and record an accounting entry whatever happens.
//!
//! Takes the providers, the sink and the abort signal ([`LlmAccess`]) and the run's facts,
//! transcript and context account; it never decides what the response means (the tool and XML
//! phases do).

use std::time::Instant;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::ProviderSet;
use super::ending::Transcript;
use super::events::EventSink;
use super::events::{AgentEvent, TextDelta};
use super::guard_phase::ContextAccount;
use super::run::RunFacts;
use super::turn_output::{AttemptOutput, OutputPiece, TurnOutput};
use super::xml::stream::FinalTagStream;
use crate::config::Target;
use crate::config::models::{ModelCatalog, ModelPrice};
use crate::llm::{
    ChatMessage, LlmDelta, LlmError, LlmRequest, LlmResponse, Provider, ResponseAssembler,
    ToolDefinition,
};
use crate::telemetry::genai;
use crate::vocabulary::result::{AccountingEntry, EntryStatus, LlmAccounting, TokenCounts};

/// How one attempt ended.
pub(super) enum AttemptOutcome {
    /// The response, and whether final-tag text of it already streamed to the client.
    Answer(Box<LlmResponse>, bool),
    /// No content, no tool calls, no reasoning.
    Empty,
    Failed(LlmError),
    Aborted,
}

/// What an attempt uses from the session: the providers, where text goes, and the abort signal.
pub(super) struct LlmAccess<'a> {
    pub providers: &'a ProviderSet,
    pub events: &'a EventSink,
    pub abort: &'a CancellationToken,
    /// Prices for the accounting entry.
    pub catalog: &'a ModelCatalog,
}

/// One attempt's call: where it goes and what it adds to the conversation.
pub(super) struct LlmAttempt<'a> {
    pub target: &'a Target,
    pub tools: Vec<ToolDefinition>,
    /// The client's `tool_choice`, when it applies to this attempt.
    pub tool_choice: Option<crate::llm::ToolChoice>,
    /// Messages for this attempt only (notices, XML-NEXT).
    pub ephemeral: Vec<ChatMessage>,
    /// The XML transport's nonce, when the answer streams from inside its final tag.
    pub final_tag_nonce: Option<&'a str>,
    /// What earlier attempts of this turn streamed, so this one does not send it again.
    pub turn_output: &'a mut TurnOutput,
}

impl LlmAccess<'_> {
    /// Calls the attempt's target with the conversation plus the attempt's messages, commits the
    /// exchange to the context account and records an accounting entry (unless aborted).
    pub async fn call(
        &self,
        facts: &RunFacts,
        transcript: &mut Transcript,
        context: &mut ContextAccount,
        attempt: LlmAttempt<'_>,
    ) -> AttemptOutcome {
        let target = attempt.target;
        let mut messages = transcript.conversation.clone();
        messages.extend(attempt.ephemeral);
        let input = self.catalog.input(&target.provider, &target.model);
        crate::llm::attachments::fit_to_input(&mut messages, &input);
        let request = LlmRequest {
            model: target.model.clone(),
            messages,
            tools: attempt.tools,
            sampling: facts.sampling.clone(),
            tool_choice: attempt.tool_choice,
            timeout: facts.request.agent.limits.llm_timeout,
            max_response_bytes: usize::try_from(facts.request.agent.limits.llm_response_max_bytes)
                .unwrap_or(usize::MAX),
        };
        let routing = routing_for(facts, attempt.final_tag_nonce);
        let started = Instant::now();
        let span = genai::chat_span(&target.provider, &target.model);
        genai::record_chat_input(&span, &request.messages);
        let outcome = match self.providers.get(&target.provider) {
            None => Err(LlmError::Model(format!(
                "provider {:?} is not configured",
                target.provider
            ))),
            Some(provider) => tokio::select! {
                biased;
                _ = self.abort.cancelled() => return AttemptOutcome::Aborted,
                outcome = self
                    .stream_response(provider.as_ref(), request, routing, attempt.turn_output.attempt())
                    .instrument(span.clone()) => outcome,
            },
        };
        // An upstream's error text is the provider's output too (see `nul_text`).
        let outcome = outcome.map_err(scrub_error);
        record_span(&span, target, started, &outcome);
        if let Ok((response, _)) = &outcome {
            context.commit_response(&transcript.conversation, response);
        }
        let price = self.catalog.facts(&target.provider, &target.model).price;
        let entry = llm_entry(facts, target, started, &outcome, price.as_ref());
        transcript.record(self.events, entry).await;
        match outcome {
            Ok((response, _)) if is_empty(&response) => AttemptOutcome::Empty,
            Ok((response, streamed)) => AttemptOutcome::Answer(Box::new(response), streamed),
            Err(error) => AttemptOutcome::Failed(error),
        }
    }

    async fn stream_response(
        &self,
        provider: &dyn Provider,
        request: LlmRequest,
        mut routing: TextRouting,
        mut output: AttemptOutput<'_>,
    ) -> Result<(LlmResponse, bool), LlmError> {
        let mut assembler = ResponseAssembler::bounded(request.max_response_bytes);
        let mut stream = provider.stream(request).await?;
        while let Some(delta) = stream.next().await {
            let mut delta = delta?;
            // A NUL from the model becomes U+FFFD before anything sees it (see `nul_text`).
            scrub_delta(&mut delta);
            // Output past `llmResponseMaxBytes` ends the attempt before anyone sees it.
            assembler.push(&delta)?;
            match &delta {
                LlmDelta::Text(text) => self.route_text(&mut routing, &mut output, text).await,
                LlmDelta::Reasoning(text) => {
                    self.events
                        .emit(AgentEvent::Thinking(TextDelta::new(text.clone())))
                        .await
                }
                _ => {}
            }
        }
        let streamed = match &mut routing {
            TextRouting::FinalTag(filter) => {
                let tail = filter.finish();
                self.emit_output(&mut output, &tail).await;
                filter.streamed_any()
            }
            TextRouting::Emit | TextRouting::Hold => false,
        };
        let mut response = assembler.finish();
        for call in &mut response.tool_calls {
            crate::nul_text::scrub_json_text(&mut call.arguments);
        }
        Ok((response, streamed))
    }

    async fn route_text(
        &self,
        routing: &mut TextRouting,
        output: &mut AttemptOutput<'_>,
        text: &str,
    ) {
        match routing {
            TextRouting::Emit => self.emit_output(output, text).await,
            TextRouting::FinalTag(filter) => {
                let payload = filter.push(text);
                self.emit_output(output, &payload).await;
            }
            TextRouting::Hold => {}
        }
    }

    /// Sends what clients do not have yet of this turn's answer.
    async fn emit_output(&self, output: &mut AttemptOutput<'_>, text: &str) {
        let delta = match output.admit(text) {
            None => return,
            Some(OutputPiece::Append(text)) => TextDelta::new(text),
            Some(OutputPiece::Replace(text)) => TextDelta {
                text,
                replace: true,
            },
        };
        self.events.emit(AgentEvent::Output(delta)).await;
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

fn routing_for(facts: &RunFacts, final_tag_nonce: Option<&str>) -> TextRouting {
    if facts.streams_text() {
        return TextRouting::Emit;
    }
    match final_tag_nonce {
        Some(nonce) if facts.format != "json" => TextRouting::FinalTag(FinalTagStream::new(nonce)),
        _ => TextRouting::Hold,
    }
}

/// Replaces NUL in every text a model's delta carries.
fn scrub_delta(delta: &mut LlmDelta) {
    use crate::nul_text::scrub;
    match delta {
        LlmDelta::Text(text)
        | LlmDelta::Reasoning(text)
        | LlmDelta::ReasoningSignature(text)
        | LlmDelta::RedactedReasoning(text) => scrub(text),
        LlmDelta::ToolCallFragment {
            id,
            name,
            arguments,
            ..
        } => {
            scrub(arguments);
            id.iter_mut().chain(name.iter_mut()).for_each(scrub);
        }
        LlmDelta::Usage(_) | LlmDelta::Metadata(_) | LlmDelta::Stop(_) => {}
    }
}

/// Replaces NUL in the text of a provider's error.
fn scrub_error(mut error: LlmError) -> LlmError {
    match &mut error {
        LlmError::RateLimit { message, .. } => crate::nul_text::scrub(message),
        LlmError::Auth(text)
        | LlmError::QuotaExceeded(text)
        | LlmError::Model(text)
        | LlmError::Network(text)
        | LlmError::Timeout(text)
        | LlmError::InvalidResponse(text)
        | LlmError::TooLarge(text) => crate::nul_text::scrub(text),
    }
    error
}

/// The call's GenAI span attributes and metrics (`telemetry::genai`).
fn record_span(
    span: &tracing::Span,
    target: &Target,
    started: Instant,
    outcome: &Result<(LlmResponse, bool), LlmError>,
) {
    let response = outcome.as_ref().ok().map(|(response, _)| response);
    genai::record_chat(
        span,
        &genai::ChatOutcome {
            provider: &target.provider,
            request_model: &target.model,
            response_model: response.and_then(|r| r.metadata.actual_model.as_deref()),
            usage: response.and_then(|r| r.usage),
            duration: started.elapsed(),
            error: outcome.as_ref().err().map(LlmError::kind),
        },
    );
    if let Some(response) = response {
        genai::record_chat_output(span, &response.text);
    }
}

fn is_empty(response: &LlmResponse) -> bool {
    response.text.trim().is_empty()
        && response.reasoning.trim().is_empty()
        && response.tool_calls.is_empty()
}

fn llm_entry(
    facts: &RunFacts,
    target: &Target,
    started: Instant,
    outcome: &Result<(LlmResponse, bool), LlmError>,
    price: Option<&ModelPrice>,
) -> AccountingEntry {
    let response = outcome.as_ref().ok().map(|(response, _)| response);
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
        lineage: facts.lineage.clone(),
    })
}
