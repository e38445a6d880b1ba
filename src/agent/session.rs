//! The turn loop (contract §1–§3, §5): turns never exceed `maxTurns`; each turn makes up to
//! `maxRetries` attempts cycling through the agent's targets; rate limits wait, fatal errors end
//! the run; the final turn offers only the final report. Always returns an [`AgentResult`].

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, error, warn};

use super::context_guard::ContextGuard;
use super::ending::{Ending, Transcript, assemble};
use super::events::{AgentEvent, EventSink, RunStarted, TextDelta, TurnStarted};
use super::final_report::{self, FinalReportSpec};
use super::internal_tools::{batch_definition, task_status_definition};
use super::llm_call::AttemptOutcome;
use super::observer::SessionObserver;
use super::result::{AccountingEntry, AgentResult, ExitReason, ReportStatus};
use super::sub_agents::{SubAgents, definition as sub_agent_tool};
use super::tool_phase::Handled;
use super::xml::{XmlMode, XmlState};
use super::xml_phase::{Step, provider_tools};
use super::{ProviderSet, SessionRequest};
use crate::config::Target;
use crate::config::agent_file::{Finalization, Transport};
use crate::config::models::ModelCatalog;
use crate::llm::tokens::Tokenizer;
use crate::llm::{ChatMessage, LlmError, ToolDefinition};
use crate::tools::ToolRegistry;

/// The contract's ephemeral notice after an empty (or, in report mode, plain-text) response.
pub const EMPTY_RESPONSE_NOTICE: &str = "System notice: plain text responses without tool calls are ignored. Use final_report to provide your answer.";
/// The same notice for `finalization: text` agents, which have no final-report tool.
pub const EMPTY_TEXT_RESPONSE_NOTICE: &str =
    "System notice: the previous response was empty. Answer the user's request now.";
/// Appended (never stored) to every request of a final turn.
pub const FINAL_TURN_REPORT_NOTICE: &str = "System notice: this is the final turn. Call agent__final_report now with your answer, \
     using the information you already have; no other tools are available.";
pub const FINAL_TURN_TEXT_NOTICE: &str = "System notice: this is the final turn. Answer the user now in plain text; no tools are available.";
/// Longest wait after a cycle in which every target was rate-limited.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How a headend stops a run: `stop` asks for a graceful final turn, `abort` ends it now.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    pub stop: CancellationToken,
    pub abort: CancellationToken,
}

impl RunControl {
    /// Tokens that also fire when `parent` (e.g. server shutdown) is cancelled.
    pub fn child_of(parent: &CancellationToken) -> Self {
        Self {
            stop: parent.child_token(),
            abort: parent.child_token(),
        }
    }
}

/// Why a turn before the last was made the final one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ForcedFinal {
    UserStop,
    RetryExhaustion,
    /// The context guard tripped.
    Context,
    /// `agent__task_status` said the task is complete.
    TaskCompleted,
}

impl ForcedFinal {
    fn as_str(self) -> &'static str {
        match self {
            Self::UserStop => "user_stop",
            Self::RetryExhaustion => "retry_exhaustion",
            Self::Context => "context",
            Self::TaskCompleted => "task_status_completed",
        }
    }
}

/// One run of one agent. Cheap to build; all state lives in [`Run`].
pub struct Session {
    pub(super) providers: ProviderSet,
    pub(super) tools: ToolRegistry,
    pub(super) events: EventSink,
    pub(super) control: RunControl,
    /// Context windows, tokenizers and prices of the targets.
    pub(super) catalog: Arc<ModelCatalog>,
    pub(super) observer: Option<Arc<dyn SessionObserver>>,
    /// `(server, instructions)` of the MCP servers the agent uses, appended to its prompt.
    pub(super) tool_instructions: Vec<(String, String)>,
    /// The agents this session may call, and the runner for their sessions.
    pub(super) sub_agents: Option<SubAgents>,
}

/// The state of a run in progress.
pub(super) struct Run {
    pub request: SessionRequest,
    pub transcript: Transcript,
    /// Shrinks when a failing final report collapses the remaining turns.
    pub max_turns: u32,
    pub forced_final: Option<ForcedFinal>,
    /// The final-report tool and its validator (`finalization: report` only).
    pub report: Option<(FinalReportSpec, ToolDefinition)>,
    pub format: String,
    /// The XML transport's state (`xml-final` or `xml` with a final report); `None` is native.
    pub xml: Option<XmlState>,
    /// What the model must be told about its previous response (XML transports).
    pub xml_feedback: Vec<String>,
    /// The answer reached the client while it streamed; it is not published again.
    pub answer_streamed: bool,
    /// The current attempt streamed final-tag text to the client.
    pub streamed_this_attempt: bool,
    pub guard: ContextGuard,
    /// Counts tokens for the first target (the guard's estimates).
    pub tokenizer: Tokenizer,
}

impl Run {
    pub fn streams_text(&self) -> bool {
        self.request.agent.finalization == Finalization::Text
    }

    fn target_for(&self, attempt: u32) -> Target {
        let targets = &self.request.agent.targets;
        let index = (attempt as usize - 1) % targets.len().max(1);
        targets.get(index).cloned().unwrap_or(Target {
            provider: String::new(),
            model: String::new(),
        })
    }

    /// Agent names from the root session down to this one.
    pub fn call_path(&self) -> String {
        match &self.request.parent {
            Some(parent) => format!("{}:{}", parent.call_path, self.request.agent.name),
            None => self.request.agent.name.clone(),
        }
    }

    /// The tracing fields every accounting entry of this run carries.
    pub fn lineage(&self) -> super::result::Lineage {
        super::result::Lineage {
            agent_id: Some(self.request.agent.name.clone()),
            txn_id: Some(self.request.run_id.clone()),
            call_path: Some(self.call_path()),
            parent_txn_id: self.request.parent.as_ref().map(|p| p.txn_id.clone()),
            origin_txn_id: Some(
                self.request
                    .parent
                    .as_ref()
                    .map_or_else(|| self.request.run_id.clone(), |p| p.origin_txn_id.clone()),
            ),
        }
    }

    /// The exit reason of an answer: a requested stop wins over the natural reason.
    pub fn answer_reason(&self, natural: ExitReason) -> ExitReason {
        if self.forced_final == Some(ForcedFinal::UserStop) {
            ExitReason::UserStop
        } else {
            natural
        }
    }
}

enum TurnEnd {
    Next,
    End(Ending),
    /// Every attempt failed at the provider.
    ProviderFailure(LlmError),
    /// Every attempt answered, but never usably (empty, or plain text when a report is needed).
    NoUsableResponse,
}

impl Session {
    /// Keeps an accounting entry in the run's transcript and emits it.
    pub(super) async fn record_accounting(&self, run: &mut Run, entry: AccountingEntry) {
        run.transcript.accounting.push(entry.clone());
        self.events
            .emit(AgentEvent::Accounting(Box::new(entry)))
            .await;
    }

    pub fn new(
        providers: ProviderSet,
        tools: ToolRegistry,
        events: EventSink,
        control: RunControl,
    ) -> Self {
        Self {
            providers,
            tools,
            events,
            control,
            catalog: Arc::new(ModelCatalog::default()),
            observer: None,
            tool_instructions: Vec::new(),
            sub_agents: None,
        }
    }

    /// Context windows, tokenizers and prices for the guard and cost accounting.
    pub fn with_catalog(mut self, catalog: Arc<ModelCatalog>) -> Self {
        self.catalog = catalog;
        self
    }

    /// Instructions MCP servers publish for their tools; appended once to the system prompt.
    pub fn with_tool_instructions(mut self, instructions: Vec<(String, String)>) -> Self {
        self.tool_instructions = instructions;
        self
    }

    /// The agents this session may call as `agent__{name}` tools.
    pub fn with_sub_agents(mut self, sub_agents: SubAgents) -> Self {
        self.sub_agents = Some(sub_agents).filter(|s| !s.agents.is_empty());
        self
    }

    /// Receives context-guard trips (for metrics).
    pub fn with_observer(mut self, observer: Arc<dyn SessionObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Runs the session to its end. Never panics, whatever the tools or providers do.
    pub async fn run(&self, request: SessionRequest) -> AgentResult {
        let started = Instant::now();
        self.events
            .emit(AgentEvent::RunStarted(Box::new(RunStarted {
                run_id: request.run_id.clone(),
                agent: request.agent.name.clone(),
                conversation_id: request.conversation_id.clone(),
                created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            })))
            .await;
        let mut run = new_run(request, &self.catalog, &self.tool_instructions);
        let ending = match AssertUnwindSafe(self.drive(&mut run)).catch_unwind().await {
            Ok(ending) => ending,
            Err(_) => {
                error!(run_id = %run.request.run_id, "the session panicked");
                Ending::failure(
                    ExitReason::InternalError,
                    "internal error: the session crashed",
                )
            }
        };
        self.publish_answer(&run, &ending).await;
        let result = assemble(
            &run.request,
            started,
            std::mem::replace(&mut run.transcript, empty_transcript()),
            ending,
        );
        if let Some(report) = &result.final_report {
            self.events
                .emit(AgentEvent::FinalReport(Box::new(report.clone())))
                .await;
        }
        self.events
            .emit(AgentEvent::RunFinished(Box::new(result.summary())))
            .await;
        result
    }

    /// In report mode the answer was not streamed as it was generated: send it as output now.
    async fn publish_answer(&self, run: &Run, ending: &Ending) {
        if run.streams_text() || run.answer_streamed {
            return;
        }
        let Some(report) = ending
            .report
            .as_ref()
            .filter(|r| r.status == ReportStatus::Success)
        else {
            return;
        };
        let text = match (&report.content_json, &report.content) {
            (Some(json), _) => json.to_string(),
            (None, Some(text)) => text.clone(),
            (None, None) => return,
        };
        self.events
            .emit(AgentEvent::Output(TextDelta { text }))
            .await;
    }

    async fn drive(&self, run: &mut Run) -> Ending {
        if run.request.prompt.trim().is_empty() {
            return Ending::failure(ExitReason::EmptyInput, "the prompt is empty");
        }
        if run.request.agent.finalization == Finalization::Report {
            match FinalReportSpec::new(
                &run.format,
                run.request
                    .schema
                    .as_ref()
                    .or(run.request.agent.output_schema.as_ref()),
            ) {
                Ok(spec) => {
                    let schema = run.request.schema.as_ref().or(run
                        .request
                        .agent
                        .output_schema
                        .as_ref());
                    run.report = Some((spec, final_report::definition(&run.format, schema)))
                }
                Err(error) => {
                    return Ending::failure(
                        ExitReason::ConfigError,
                        format!("the output schema is invalid: {error}"),
                    );
                }
            }
        }
        let mut turn = 0;
        while turn < run.max_turns {
            turn += 1;
            run.transcript.turns = turn;
            if self.control.abort.is_cancelled() {
                return cancelled();
            }
            if self.control.stop.is_cancelled() && run.forced_final.is_none() {
                run.forced_final = Some(ForcedFinal::UserStop);
            }
            if run.guard.tool_budget_exceeded() && run.forced_final.is_none() {
                run.forced_final = Some(ForcedFinal::Context);
            }
            if run.forced_final.is_some() {
                run.max_turns = turn;
            }
            let mut is_final = turn == run.max_turns;
            let tools = self.offered_tools(run, is_final).await;
            let tools = self.prepare_turn(run, turn, &mut is_final, tools);
            let span = tracing::info_span!("turn", ai.turn = turn, ai.turn.is_final = is_final);
            match self
                .run_turn(run, turn, is_final, tools)
                .instrument(span)
                .await
            {
                TurnEnd::Next => {}
                TurnEnd::End(ending) => return ending,
                TurnEnd::ProviderFailure(error) => return exhausted(&error),
                TurnEnd::NoUsableResponse if !is_final => {
                    run.forced_final = Some(ForcedFinal::RetryExhaustion)
                }
                TurnEnd::NoUsableResponse => {
                    return Ending::synthetic_failure(
                        ExitReason::NoLlmResponse,
                        &run.format,
                        "no_llm_response",
                        "the model returned no usable response on its final turn",
                    );
                }
            }
        }
        let (reason, metadata_reason, message) = match run.forced_final {
            Some(ForcedFinal::UserStop) => (
                ExitReason::UserStop,
                "max_turns_exhausted",
                "the run was stopped before the agent produced an answer",
            ),
            Some(ForcedFinal::Context) => (
                ExitReason::ContextLimit,
                "context_window_exhausted",
                "the context window filled up before the agent produced an answer",
            ),
            _ => (
                ExitReason::MaxTurns,
                "max_turns_exhausted",
                "the agent used all its turns without producing a final answer",
            ),
        };
        Ending::synthetic_failure(reason, &run.format, metadata_reason, message)
    }

    async fn run_turn(
        &self,
        run: &mut Run,
        turn: u32,
        is_final: bool,
        tools: Vec<ToolDefinition>,
    ) -> TurnEnd {
        let max_retries = run.request.agent.limits.max_retries;
        let mut retry_notice: Option<&'static str> = None;
        let mut rate_limited: Vec<Option<Duration>> = Vec::new();
        let mut provider_error: Option<LlmError> = None;
        for attempt in 1..=max_retries {
            let target = run.target_for(attempt);
            self.events
                .emit(AgentEvent::TurnStarted(TurnStarted {
                    turn,
                    attempt,
                    is_retry: attempt > 1,
                    is_final_turn: is_final,
                    forced_final_reason: run.forced_final.map(|f| f.as_str().to_string()),
                }))
                .await;
            let step = Step {
                turn,
                attempt,
                is_final,
            };
            let ephemeral = self.attempt_messages(run, step, &tools, retry_notice.take());
            // The feedback is in this attempt's XML-NEXT; what the response earns comes next.
            run.xml_feedback.clear();
            match self
                .call_llm(run, &target, provider_tools(run, &tools), ephemeral)
                .await
            {
                AttemptOutcome::Aborted => return TurnEnd::End(cancelled()),
                AttemptOutcome::Failed(error) if error.is_fatal() => {
                    return TurnEnd::End(fatal(&error));
                }
                AttemptOutcome::Failed(error) => {
                    match &error {
                        LlmError::RateLimit { retry_after, .. } => rate_limited.push(*retry_after),
                        _ => rate_limited.clear(),
                    }
                    provider_error = Some(error);
                    let targets = run.request.agent.targets.len().max(1);
                    if rate_limited.len() >= targets && attempt < max_retries {
                        let wait = longest_wait(&rate_limited, attempt);
                        rate_limited.clear();
                        if self.sleep_unless_aborted(wait).await {
                            return TurnEnd::End(cancelled());
                        }
                    }
                }
                AttemptOutcome::Empty => {
                    warn!(run_id = %run.request.run_id, turn, attempt, "empty response; retrying");
                    retry_notice = Some(empty_notice(run));
                    provider_error = None;
                    rate_limited.clear();
                }
                AttemptOutcome::Answer(response) => {
                    match self.handle_response(run, turn, is_final, response).await {
                        Handled::Next => return TurnEnd::Next,
                        Handled::End(ending) => return TurnEnd::End(ending),
                        Handled::Retry(notice) => {
                            retry_notice = notice;
                            provider_error = None;
                            rate_limited.clear();
                        }
                    }
                }
            }
        }
        match provider_error {
            Some(error) => TurnEnd::ProviderFailure(error),
            None => TurnEnd::NoUsableResponse,
        }
    }

    /// The tools offered this turn: only the final report (or nothing, in text mode) at the end.
    async fn offered_tools(&self, run: &Run, is_final: bool) -> Vec<ToolDefinition> {
        if is_final {
            return self.final_turn_tools(run);
        }
        let mut tools = self.tools.definitions().await;
        if let Some(sub_agents) = &self.sub_agents {
            tools.extend(sub_agents.agents.iter().map(|agent| sub_agent_tool(agent)));
        }
        if run.report.is_some() && !tools.is_empty() {
            let batch = batch_definition(&tools);
            tools.push(task_status_definition());
            tools.push(batch);
        }
        tools.extend(self.final_turn_tools(run));
        tools
    }

    /// The final report's definition alone (nothing in text mode).
    pub(super) fn final_turn_tools(&self, run: &Run) -> Vec<ToolDefinition> {
        run.report
            .iter()
            .map(|(_, definition)| definition.clone())
            .collect()
    }

    /// Sleeps unless aborted first; returns true when aborted.
    async fn sleep_unless_aborted(&self, wait: Duration) -> bool {
        tokio::select! {
            _ = self.control.abort.cancelled() => true,
            _ = tokio::time::sleep(wait) => false,
        }
    }
}

fn new_run(
    request: SessionRequest,
    catalog: &ModelCatalog,
    instructions: &[(String, String)],
) -> Run {
    let mut conversation = vec![ChatMessage::system(system_prompt(&request, instructions))];
    conversation.extend(request.history.iter().cloned());
    conversation.push(ChatMessage::user(request.prompt.clone()));
    let tokenizer = request
        .agent
        .targets
        .first()
        .map_or(Tokenizer::Approximate, |target| {
            Tokenizer::resolve(
                catalog
                    .facts(&target.provider, &target.model)
                    .tokenizer
                    .as_deref(),
                &target.model,
            )
        });
    let guard = ContextGuard::new(tokenizer.messages(&conversation));
    let request_transport = request.transport.unwrap_or(request.agent.transport);
    let finalization = request.agent.finalization;
    let format = request
        .format
        .clone()
        .unwrap_or_else(|| request.agent.output_format.clone());
    Run {
        max_turns: request.agent.limits.max_turns.max(1),
        request,
        transcript: Transcript {
            conversation,
            accounting: Vec::new(),
            turns: 0,
        },
        forced_final: None,
        report: None,
        format,
        xml: xml_state(&request_transport, finalization),
        xml_feedback: Vec::new(),
        answer_streamed: false,
        streamed_this_attempt: false,
        guard,
        tokenizer,
    }
}

fn empty_transcript() -> Transcript {
    Transcript {
        conversation: Vec::new(),
        accounting: Vec::new(),
        turns: 0,
    }
}

fn empty_notice(run: &Run) -> &'static str {
    if run.streams_text() {
        EMPTY_TEXT_RESPONSE_NOTICE
    } else {
        EMPTY_RESPONSE_NOTICE
    }
}

/// Messages added to one attempt only, never to the conversation.
pub(super) fn ephemeral_messages(
    run: &Run,
    retry_notice: Option<&'static str>,
    is_final: bool,
) -> Vec<ChatMessage> {
    let mut messages: Vec<ChatMessage> = retry_notice.into_iter().map(ChatMessage::user).collect();
    if is_final {
        let notice = if run.streams_text() {
            FINAL_TURN_TEXT_NOTICE
        } else {
            FINAL_TURN_REPORT_NOTICE
        };
        messages.push(ChatMessage::user(notice));
    }
    messages
}

fn cancelled() -> Ending {
    Ending::failure(ExitReason::Cancelled, "the run was cancelled")
}

fn fatal(error: &LlmError) -> Ending {
    let reason = match error {
        LlmError::QuotaExceeded(_) => ExitReason::QuotaExceeded,
        _ => ExitReason::AuthFailure,
    };
    Ending::failure(reason, error.to_string())
}

fn exhausted(error: &LlmError) -> Ending {
    let reason = match error {
        LlmError::RateLimit { .. } => ExitReason::RateLimited,
        LlmError::InvalidResponse(_) => ExitReason::NoLlmResponse,
        _ => ExitReason::LlmError,
    };
    Ending::failure(reason, format!("every attempt failed; last error: {error}"))
}

/// The wait after a cycle in which every target was rate-limited: the longest suggestion,
/// else exponential backoff from 1 s, clamped to 1 s … 60 s.
pub(super) fn longest_wait(suggestions: &[Option<Duration>], attempt: u32) -> Duration {
    let fallback = Duration::from_secs(1u64 << attempt.saturating_sub(1).min(6));
    suggestions
        .iter()
        .map(|s| s.unwrap_or(fallback))
        .max()
        .unwrap_or(fallback)
        .clamp(Duration::from_secs(1), MAX_BACKOFF)
}

/// The agent's prompt, plus the isolation rule of `userScoped` agents (seeds/001).
fn system_prompt(request: &SessionRequest, instructions: &[(String, String)]) -> String {
    let mut prompt = request.agent.system_prompt.clone();
    if let (Some(user), true) = (&request.user_id, request.agent.user_scoped) {
        prompt.push_str(&format!(
            "\n\nYou act for user `{user}` only. Every tool call runs with `user_id` = `{user}`, set by the system; \
             you cannot read or change another user's data."
        ));
    }
    for (server, text) in instructions
        .iter()
        .filter(|(_, text)| !text.trim().is_empty())
    {
        prompt.push_str(&format!("\n\n#### MCP Server: {server}\n\n{}", text.trim()));
    }
    prompt
}

/// The XML transport applies to sessions that end with a final report.
fn xml_state(transport: &Transport, finalization: Finalization) -> Option<XmlState> {
    match (transport, finalization) {
        (_, Finalization::Text) | (Transport::Native, _) => None,
        (Transport::XmlFinal, Finalization::Report) => Some(XmlState::new(XmlMode::FinalOnly)),
        (Transport::Xml, Finalization::Report) => Some(XmlState::new(XmlMode::Full)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_wait_is_the_longest_suggestion_clamped() {
        let s = Duration::from_secs;
        assert_eq!(longest_wait(&[Some(s(2)), Some(s(5))], 1), s(5));
        assert_eq!(longest_wait(&[None], 1), s(1));
        assert_eq!(longest_wait(&[None], 3), s(4));
        assert_eq!(longest_wait(&[None], 30), s(60));
        assert_eq!(longest_wait(&[Some(s(600))], 1), s(60));
        assert_eq!(longest_wait(&[Some(Duration::from_millis(10))], 1), s(1));
    }
}
