//! The turn loop: attempts cycle through the agent's targets, deltas stream out as events,
//! accounting is recorded per attempt, and the run always ends with an [`AgentResult`].

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::events::{AgentEvent, EventSink, RunStarted, TextDelta, TurnStarted};
use super::result::{
    AccountingEntry, AgentResult, EntryStatus, ExitReason, FinalReport, LlmAccounting,
    ReportStatus, TokenCounts, UsageTotals,
};
use super::{ProviderSet, SessionRequest};
use crate::config::Target;
use crate::config::agent_file::Finalization;
use crate::llm::{
    ChatMessage, LlmDelta, LlmError, LlmRequest, LlmResponse, ResponseAssembler, Role,
    SamplingParams,
};

/// The contract's ephemeral notice after an empty response (never stored in the conversation).
const EMPTY_RESPONSE_NOTICE: &str = "System notice: plain text responses without tool calls are ignored. Use final_report to provide your answer.";
/// Fallback backoff when a rate limit gives no Retry-After: 1 s doubling to 60 s.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One run of one agent. Cheap to build; all state lives in `run`.
pub struct Session {
    providers: ProviderSet,
    events: EventSink,
    cancel: CancellationToken,
}

/// How one attempt ended.
enum AttemptOutcome {
    Answer(LlmResponse),
    Empty,
    Failed(LlmError),
    Cancelled,
}

/// The state of a run in progress.
struct RunState {
    request: SessionRequest,
    started: Instant,
    conversation: Vec<ChatMessage>,
    accounting: Vec<AccountingEntry>,
    turns: u32,
}

impl Session {
    pub fn new(providers: ProviderSet, events: EventSink, cancel: CancellationToken) -> Self {
        Self {
            providers,
            events,
            cancel,
        }
    }

    /// Runs the session to its end. Never panics on input and always returns a result.
    pub async fn run(&self, request: SessionRequest) -> AgentResult {
        let mut conversation = vec![ChatMessage::system(request.agent.system_prompt.clone())];
        conversation.extend(request.history.iter().cloned());
        conversation.push(ChatMessage::user(request.prompt.clone()));
        self.events
            .emit(AgentEvent::RunStarted(RunStarted {
                run_id: request.run_id.clone(),
                agent: request.agent.name.clone(),
                conversation_id: request.conversation_id.clone(),
                created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            }))
            .await;
        let mut state = RunState {
            request,
            started: Instant::now(),
            conversation,
            accounting: Vec::new(),
            turns: 0,
        };
        let result = self.drive(&mut state).await;
        let result = state.finish(result);
        if let Some(report) = &result.final_report {
            self.events
                .emit(AgentEvent::FinalReport(report.clone()))
                .await;
        }
        self.events
            .emit(AgentEvent::RunFinished(result.summary()))
            .await;
        result
    }

    /// The turn loop; returns how the run ended.
    async fn drive(&self, state: &mut RunState) -> Ending {
        if state.request.prompt.trim().is_empty() {
            return Ending::failure(ExitReason::EmptyInput, "the prompt is empty");
        }
        if state.request.agent.finalization == Finalization::Report {
            return Ending::failure(
                ExitReason::ConfigError,
                "finalization: report needs the final-report tool, which this build does not have yet; use finalization: text",
            );
        }
        let limits = state.request.agent.limits.clone();
        let mut last_failure: Option<LlmError> = None;
        for turn in 1..=limits.max_turns {
            state.turns = turn;
            let mut ephemeral: Option<ChatMessage> = None;
            let mut rate_limited_in_cycle: Vec<Option<Duration>> = Vec::new();
            for attempt in 1..=limits.max_retries {
                let target = state.target_for(attempt);
                self.events
                    .emit(AgentEvent::TurnStarted(TurnStarted {
                        turn,
                        attempt,
                        is_retry: attempt > 1,
                        is_final_turn: turn == limits.max_turns,
                        forced_final_reason: None,
                    }))
                    .await;
                match self.attempt(state, &target, ephemeral.take()).await {
                    AttemptOutcome::Cancelled => {
                        return Ending::failure(ExitReason::Cancelled, "the run was cancelled");
                    }
                    AttemptOutcome::Answer(response) => {
                        if let Some(ending) = state.accept(response) {
                            return ending;
                        }
                        last_failure = None;
                        break;
                    }
                    AttemptOutcome::Empty => {
                        ephemeral = Some(ChatMessage::user(EMPTY_RESPONSE_NOTICE));
                        last_failure = Some(LlmError::InvalidResponse(
                            "the model returned an empty response".into(),
                        ));
                    }
                    AttemptOutcome::Failed(error) if error.is_fatal() => {
                        return Ending::from_fatal(&error);
                    }
                    AttemptOutcome::Failed(error) => {
                        if let LlmError::RateLimit { retry_after, .. } = &error {
                            rate_limited_in_cycle.push(*retry_after);
                        } else {
                            rate_limited_in_cycle.clear();
                        }
                        last_failure = Some(error);
                        let targets = state.request.agent.targets.len().max(1);
                        if rate_limited_in_cycle.len() >= targets && attempt < limits.max_retries {
                            let wait = longest_wait(&rate_limited_in_cycle, attempt);
                            rate_limited_in_cycle.clear();
                            if self.sleep_or_cancel(wait).await {
                                return Ending::failure(
                                    ExitReason::Cancelled,
                                    "the run was cancelled",
                                );
                            }
                        }
                    }
                }
            }
            if let Some(error) = last_failure.take() {
                return Ending::from_exhausted(&error);
            }
        }
        Ending::max_turns(&state.request.agent.output_format)
    }

    /// One LLM call, streamed out as events, recorded in accounting.
    async fn attempt(
        &self,
        state: &mut RunState,
        target: &Target,
        ephemeral: Option<ChatMessage>,
    ) -> AttemptOutcome {
        let mut messages = state.conversation.clone();
        messages.extend(ephemeral);
        let request = LlmRequest {
            model: target.model.clone(),
            messages,
            tools: Vec::new(),
            sampling: state.sampling(),
            timeout: state.request.agent.limits.llm_timeout,
        };
        let started = Instant::now();
        let outcome = match self.providers.get(&target.provider) {
            None => Err(LlmError::Model(format!(
                "provider {:?} is not configured",
                target.provider
            ))),
            Some(provider) => tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return AttemptOutcome::Cancelled,
                outcome = self.stream_response(provider.as_ref(), request) => outcome,
            },
        };
        let entry = match &outcome {
            Ok(response) => state.record_llm(target, started, Some(response), Ok(())),
            Err(error) => state.record_llm(target, started, None, Err(error)),
        };
        self.events.emit(AgentEvent::Accounting(entry)).await;
        match outcome {
            Ok(response) if is_empty(&response) => AttemptOutcome::Empty,
            Ok(response) => AttemptOutcome::Answer(response),
            Err(error) => AttemptOutcome::Failed(error),
        }
    }

    async fn stream_response(
        &self,
        provider: &dyn crate::llm::Provider,
        request: LlmRequest,
    ) -> Result<LlmResponse, LlmError> {
        let mut stream = provider.stream(request).await?;
        let mut assembler = ResponseAssembler::default();
        while let Some(delta) = stream.next().await {
            let delta = delta?;
            match &delta {
                LlmDelta::Text(text) => {
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

    /// Sleeps unless cancelled first; returns true when cancelled.
    async fn sleep_or_cancel(&self, wait: Duration) -> bool {
        tokio::select! {
            _ = self.cancel.cancelled() => true,
            _ = tokio::time::sleep(wait) => false,
        }
    }
}

/// The rate-limit wait after a cycle in which every target was limited: the longest
/// suggestion, else exponential backoff from 1 s, never above 60 s.
fn longest_wait(suggestions: &[Option<Duration>], attempt: u32) -> Duration {
    let fallback = Duration::from_secs(1u64 << attempt.saturating_sub(1).min(6));
    suggestions
        .iter()
        .map(|s| s.unwrap_or(fallback))
        .max()
        .unwrap_or(fallback)
        .clamp(Duration::from_secs(1), MAX_BACKOFF)
}

fn is_empty(response: &LlmResponse) -> bool {
    response.text.trim().is_empty()
        && response.reasoning.trim().is_empty()
        && response.tool_calls.is_empty()
}

/// How a run ended, before the result is assembled.
struct Ending {
    exit_reason: ExitReason,
    success: bool,
    error: Option<String>,
    report: Option<(ReportStatus, String, serde_json::Value)>,
    answer: Option<String>,
}

impl Ending {
    fn failure(exit_reason: ExitReason, error: impl Into<String>) -> Self {
        Self {
            exit_reason,
            success: false,
            error: Some(error.into()),
            report: None,
            answer: None,
        }
    }

    fn answer(text: String) -> Self {
        Self {
            exit_reason: ExitReason::FinalAnswer,
            success: true,
            error: None,
            report: None,
            answer: Some(text),
        }
    }

    fn from_fatal(error: &LlmError) -> Self {
        let reason = match error {
            LlmError::QuotaExceeded(_) => ExitReason::QuotaExceeded,
            _ => ExitReason::AuthFailure,
        };
        Self::failure(reason, error.to_string())
    }

    fn from_exhausted(error: &LlmError) -> Self {
        let reason = match error {
            LlmError::RateLimit { .. } => ExitReason::RateLimited,
            LlmError::InvalidResponse(_) => ExitReason::NoLlmResponse,
            _ => ExitReason::LlmError,
        };
        Self::failure(reason, format!("every attempt failed; last error: {error}"))
    }

    fn max_turns(format: &str) -> Self {
        let mut ending = Self::failure(
            ExitReason::MaxTurns,
            "the maximum number of turns was reached without a final answer",
        );
        ending.report = Some((
            ReportStatus::Failure,
            format.to_string(),
            serde_json::json!({"reason": "max_turns_exhausted"}),
        ));
        ending
    }
}

impl RunState {
    fn target_for(&self, attempt: u32) -> Target {
        let targets = &self.request.agent.targets;
        let index = (attempt as usize - 1) % targets.len().max(1);
        targets.get(index).cloned().unwrap_or(Target {
            provider: String::new(),
            model: String::new(),
        })
    }

    fn sampling(&self) -> SamplingParams {
        let agent = &self.request.agent.sampling;
        let overrides = &self.request.overrides;
        SamplingParams {
            temperature: overrides.temperature.or(agent.temperature),
            top_p: overrides.top_p.or(agent.top_p),
            top_k: agent.top_k,
            repeat_penalty: agent.repeat_penalty,
            max_output_tokens: overrides.max_output_tokens.or(agent.max_output_tokens),
        }
    }

    /// Adds a successful response to the conversation; returns the ending if it is the answer.
    fn accept(&mut self, response: LlmResponse) -> Option<Ending> {
        let reasoning = Some(response.reasoning.clone()).filter(|r| !r.is_empty());
        let mut message = ChatMessage {
            role: Role::Assistant,
            content: Some(response.text.clone()).filter(|t| !t.is_empty()),
            tool_calls: response.tool_calls.clone(),
            tool_call_id: None,
            reasoning,
        };
        if response.tool_calls.is_empty() && !response.text.trim().is_empty() {
            self.conversation.push(message);
            return Some(Ending::answer(response.text));
        }
        // No tools are offered yet: every requested call fails, and the model is told so.
        let failures: Vec<ChatMessage> = response
            .tool_calls
            .iter()
            .map(|call| ChatMessage {
                role: Role::Tool,
                content: Some(format!("(tool failed: unknown tool {:?})", call.name)),
                tool_calls: Vec::new(),
                tool_call_id: Some(call.id.clone()),
                reasoning: None,
            })
            .collect();
        if message.content.is_none() && message.tool_calls.is_empty() && message.reasoning.is_none()
        {
            return None;
        }
        message.tool_calls = response.tool_calls;
        self.conversation.push(message);
        self.conversation.extend(failures);
        None
    }

    fn record_llm(
        &mut self,
        target: &Target,
        started: Instant,
        response: Option<&LlmResponse>,
        outcome: Result<(), &LlmError>,
    ) -> AccountingEntry {
        let usage = response.and_then(|r| r.usage).unwrap_or_default();
        let entry = AccountingEntry::Llm(LlmAccounting {
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
            cost_usd: None,
            stop_reason: response
                .and_then(|r| r.stop_reason.as_ref())
                .map(|s| s.as_str().to_string()),
            error: outcome.err().map(ToString::to_string),
            agent_id: Some(self.request.agent.name.clone()),
            txn_id: Some(self.request.run_id.clone()),
        });
        self.accounting.push(entry.clone());
        entry
    }

    fn finish(self, ending: Ending) -> AgentResult {
        let now = chrono::Utc::now().timestamp_millis();
        let format = self.request.agent.output_format.clone();
        let final_report = match (&ending.answer, &ending.report) {
            (Some(answer), _) => Some(FinalReport {
                status: ReportStatus::Success,
                format,
                content: Some(answer.clone()),
                content_json: None,
                metadata: None,
                ts: now,
            }),
            (None, Some((status, format, metadata))) => Some(FinalReport {
                status: *status,
                format: format.clone(),
                content: ending.error.clone(),
                content_json: None,
                metadata: Some(metadata.clone()),
                ts: now,
            }),
            (None, None) => None,
        };
        AgentResult {
            run_id: self.request.run_id,
            success: ending.success,
            error: ending.error,
            exit_reason: ending.exit_reason,
            final_report,
            usage: UsageTotals::from_accounting(&self.accounting),
            conversation: self.conversation,
            accounting: self.accounting,
            cost_usd: 0.0,
            turns: self.turns,
            duration_ms: self.started.elapsed().as_millis() as u64,
        }
    }
}
