//! The turn loop (contract §1–§3, §5): turns never exceed `maxTurns`; each turn makes up to
//! `maxRetries` attempts cycling through the agent's targets; rate limits wait, fatal errors end
//! the run; the final turn offers only the final report. Always returns an [`AgentResult`].
//!
//! Reads top to bottom: [`Session::run`] sets up the [`Run`] and assembles the result, `drive`
//! loops over turns, `prepare_turn` offers the tools (`guard_phase`), and `turn` makes the
//! attempts: the attempt's messages (`xml_phase` or the native notices), the model call
//! (`llm_call`), then what the response means (`tool_phase` natively, `xml_phase` in the XML
//! transports). The phases get only the services and pieces of [`Run`] they use; the session
//! keeps the decisions between them (retries, backoff, forced final turns).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, error, warn};

use super::approval::{Checkpoint, DecidedCall, SessionEnd, WaitingTurn};
use super::ending::{Ending, Transcript, assemble};
use super::events::{AgentEvent, EventSink, RunStarted, TextDelta, TurnStarted};
use super::final_report::{self, FinalReportSpec};
use super::guard_phase::{self, ContextAccount, PreparedTurn};
use super::inbox::{Inbox, JoinedMessage, joined_event};
use super::internal_tools::{batch_definition, task_status_definition};
use super::llm_call::{AttemptOutcome, LlmAccess, LlmAttempt};
use super::observer::SessionObserver;
use super::router::Router;
use super::run::{ForcedFinal, ReportExpectation, Run, RunFacts, TurnPlan};
use super::sub_agents::{ChildRunner, SubAgents, definition as sub_agent_tool};
use super::tool_phase::{Handled, ToolRunner};
use super::turn_output::TurnOutput;
use super::xml_phase::{Step, XmlTransport, handle_xml_response};
use super::{ProviderSet, SessionRequest};
use crate::config::agent_file::Finalization;
use crate::config::models::ModelCatalog;
use crate::llm::{ChatMessage, LlmError, Role, ToolDefinition};
use crate::tools::ToolRegistry;
use crate::tools::result_cache::ToolResultCache;
use crate::vocabulary::budget;
use crate::vocabulary::result::{AgentResult, ExitReason, ReportStatus};

/// The contract's ephemeral notice after an empty (or, in report mode, plain-text) response.
pub const EMPTY_RESPONSE_NOTICE: &str = "System notice: plain text responses without tool calls are ignored. Use final_report to provide your answer.";
/// The same notice for `finalization: text` agents, which have no final-report tool.
pub const EMPTY_TEXT_RESPONSE_NOTICE: &str =
    "System notice: the previous response was empty. Answer the user's request now.";
/// Appended (never stored) to every request of a final turn.
pub const FINAL_TURN_REPORT_NOTICE: &str = "System notice: this is the final turn. Call agent__final_report now with your answer, \
     using the information you already have; no other tools are available.";
pub const FINAL_TURN_TEXT_NOTICE: &str = "System notice: this is the final turn. Answer the user now in plain text; no tools are available.";
/// The reply to a final report that a message joined since supersedes.
const SUPERSEDED_REPORT_NOTICE: &str = "Not delivered: the user sent another message meanwhile. \
     Answer all of their messages in one report.";
/// Longest wait after a cycle in which every target was rate-limited.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How a headend stops a run: `stop` asks for a graceful final turn, `abort` ends it now.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    pub stop: CancellationToken,
    pub abort: CancellationToken,
    /// The server's shutdown token: when it fired, an abort is the server stopping, not a user.
    pub shutdown: CancellationToken,
}

impl RunControl {
    /// Tokens that also fire when `shutdown` (the server's) is cancelled.
    pub fn child_of(shutdown: &CancellationToken) -> Self {
        Self {
            stop: shutdown.child_token(),
            abort: shutdown.child_token(),
            shutdown: shutdown.clone(),
        }
    }

    /// Tokens for a child run (a sub-agent): they fire with this run's.
    pub fn for_child(&self) -> Self {
        Self {
            stop: self.stop.child_token(),
            abort: self.abort.child_token(),
            shutdown: self.shutdown.clone(),
        }
    }

    /// How an aborted run ends: `shutting_down` when the server stopped it, else `cancelled`.
    pub(super) fn aborted(&self) -> Ending {
        if self.shutdown.is_cancelled() {
            Ending::failure(
                ExitReason::ShuttingDown,
                "the server shut down before the run ended",
            )
        } else {
            Ending::failure(ExitReason::Cancelled, "the run was cancelled")
        }
    }
}

/// One run of one agent. Cheap to build; all state of a run lives in `Run`, so the session
/// itself only holds the services its phases are lent.
pub struct Session {
    providers: ProviderSet,
    tools: ToolRegistry,
    events: EventSink,
    control: RunControl,
    /// Context windows, tokenizers and prices of the targets.
    catalog: Arc<ModelCatalog>,
    observer: Option<Arc<dyn SessionObserver>>,
    /// `(server, instructions)` of the MCP servers the agent uses, appended to its prompt.
    tool_instructions: Vec<(String, String)>,
    /// The agents this session may call, and the runner for their sessions.
    sub_agents: Option<SubAgents>,
    /// Calls that need approval make the run wait ([`Session::run_or_wait`]); otherwise
    /// they are denied at once.
    may_wait: bool,
    /// Where results of tools with a `cache` TTL are kept.
    tool_cache: Option<ToolResultCache>,
    /// Users' secrets for `${caller.secret.NAME}` in tool headers; `None`: not configured.
    secrets: Option<Arc<dyn crate::tools::caller::SecretSource>>,
    /// `router.destinations`: offered as `router__handoff-to`.
    router: Option<Router>,
    /// Runs child sessions (sub-agents, questions about kept tool outputs).
    child_runner: Option<Arc<dyn ChildRunner>>,
    /// A budget shared with other runs (the key's daily budget), charged call by call.
    spend_meter: Option<Arc<dyn budget::SpendMeter>>,
    /// Keeps the files tools' results carry (none: the model gets a note naming them).
    file_keeper: Option<Arc<dyn super::tool_files::FileKeeper>>,
    /// Messages sent while the session runs (`busy: steer`), joined at turn boundaries.
    inbox: Option<Arc<dyn Inbox>>,
}

/// What the turn loop came to.
enum Stop {
    Ended(Ending),
    /// Calls of the last turn wait for a person (`Run::waiting`).
    Waiting,
}

/// How a turn ended, for the loop.
enum TurnEnd {
    Next,
    End(Ending),
    /// Every attempt failed at the provider.
    ProviderFailure(LlmError),
    /// Every attempt answered, but never usably (empty, or plain text when a report is needed).
    NoUsableResponse,
    /// Calls of the turn wait for a person.
    Wait,
}

impl Session {
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
            may_wait: false,
            tool_cache: None,
            secrets: None,
            router: None,
            child_runner: None,
            spend_meter: None,
            file_keeper: None,
            inbox: None,
        }
    }

    /// Joins the messages `inbox` holds to the conversation before each turn and when the
    /// model answers with turns left, so one answer covers them (SPEC §13 `busy: steer`).
    pub fn with_inbox(mut self, inbox: Option<Arc<dyn Inbox>>) -> Self {
        self.inbox = inbox;
        self
    }

    /// Charges `meter` with each model call's spending and ends the run once the budget it
    /// shares with other runs is used up.
    pub fn with_spend_meter(mut self, meter: Option<Arc<dyn budget::SpendMeter>>) -> Self {
        self.spend_meter = meter;
        self
    }

    /// Calls that need approval make the run wait with a checkpoint instead of being denied
    /// (for [`Session::run_or_wait`] and [`Session::resume`]).
    pub fn waiting_for_approvals(mut self) -> Self {
        self.may_wait = true;
        self
    }

    /// Context windows, tokenizers and prices for the guard and cost accounting.
    pub fn with_catalog(mut self, catalog: Arc<ModelCatalog>) -> Self {
        self.catalog = catalog;
        self
    }

    /// Offers `router__handoff-to` with these destinations (none: not offered).
    pub fn with_router(mut self, router: Router) -> Self {
        self.router = Some(router);
        self
    }

    /// Keeps results of tools with a `cache` TTL in `cache` (none are cached without one).
    pub fn with_tool_cache(mut self, cache: ToolResultCache) -> Self {
        self.tool_cache = Some(cache);
        self
    }

    /// Reads users' secrets for their tool calls (`${caller.secret.NAME}`).
    pub fn with_secrets(
        mut self,
        secrets: Option<Arc<dyn crate::tools::caller::SecretSource>>,
    ) -> Self {
        self.secrets = secrets;
        self
    }

    /// Instructions MCP servers publish for their tools; appended once to the system prompt.
    pub fn with_tool_instructions(mut self, instructions: Vec<(String, String)>) -> Self {
        self.tool_instructions = instructions;
        self
    }

    /// The agents this session may call as `agent__{name}` tools.
    pub fn with_sub_agents(mut self, sub_agents: SubAgents) -> Self {
        self.child_runner = Some(Arc::clone(&sub_agents.runner));
        self.sub_agents = Some(sub_agents).filter(|s| !s.agents.is_empty());
        self
    }

    /// Keeps the files tools' results carry, so they reach the model as attachments.
    pub fn with_file_keeper(mut self, keeper: Arc<dyn super::tool_files::FileKeeper>) -> Self {
        self.file_keeper = Some(keeper);
        self
    }

    /// Receives context-guard trips (for metrics).
    pub fn with_observer(mut self, observer: Arc<dyn SessionObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Runs the session to its end. Never panics, whatever the tools or providers do. Calls
    /// that need approval are denied (nobody can be asked): see [`Session::run_or_wait`].
    pub async fn run(&self, request: SessionRequest) -> AgentResult {
        let started = Instant::now();
        self.emit_started(&request).await;
        let mut run = self.open(request);
        let ending = match self
            .contained(run.facts.request.run_id.clone(), self.drive(&mut run))
            .await
        {
            Stop::Ended(ending) => ending,
            Stop::Waiting => Ending::failure(
                ExitReason::InternalError,
                "internal error: a call waits for approval in a session that cannot wait",
            ),
        };
        self.finish(run, started, ending).await
    }

    /// Runs the session until it ends or calls of a turn wait for a person (then its
    /// [`Checkpoint`] is returned and no `run.finished` is emitted; [`Session::resume`]
    /// continues it, in this process or another).
    pub async fn run_or_wait(&self, request: SessionRequest) -> SessionEnd {
        let started = Instant::now();
        self.emit_started(&request).await;
        let mut run = self.open(request);
        let run_id = run.facts.request.run_id.clone();
        // Boxed, as the turn below: an async fn holds room for every future it awaits, and
        // `contained` held the loop twice (its argument and the future it polls).
        let stop = self.contained(run_id, Box::pin(self.drive(&mut run))).await;
        Box::pin(self.settle(run, started, stop)).await
    }

    /// Continues a run from its checkpoint once its waiting calls are decided: emits
    /// `tool.approval_decided` per call, runs the approved ones, tells the model of the denied
    /// (a call without a decision counts as expired) and goes on with the next turn, as if it
    /// had never stopped. An aborted `control` ends it `cancelled` before anything runs.
    pub async fn resume(
        &self,
        request: SessionRequest,
        checkpoint: Checkpoint,
        decisions: Vec<DecidedCall>,
    ) -> SessionEnd {
        let elapsed = Duration::from_millis(checkpoint.elapsed_ms);
        let started = Instant::now()
            .checked_sub(elapsed)
            .unwrap_or_else(Instant::now);
        let mut run = Run::restore(request, &checkpoint, &self.catalog, self.observer.clone());
        let waiting = checkpoint.waiting;
        let run_id = run.facts.request.run_id.clone();
        let stop = self
            .contained(
                run_id,
                Box::pin(self.continue_after_wait(&mut run, waiting, &decisions)),
            )
            .await;
        Box::pin(self.settle(run, started, stop)).await
    }

    async fn emit_started(&self, request: &SessionRequest) {
        self.events
            .emit(AgentEvent::RunStarted(Box::new(RunStarted {
                run_id: request.run_id.clone(),
                agent: request.agent.name.clone(),
                conversation_id: request.conversation_id.clone(),
                created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                attachments: request.attachments.clone(),
            })))
            .await;
    }

    fn open(&self, request: SessionRequest) -> Run {
        Run::new(
            request,
            &self.catalog,
            &self.tool_instructions,
            self.observer.clone(),
        )
    }

    /// `loop_future`'s stop, or an internal error if it panicked.
    async fn contained(
        &self,
        run_id: String,
        loop_future: impl std::future::Future<Output = Stop>,
    ) -> Stop {
        match AssertUnwindSafe(loop_future).catch_unwind().await {
            Ok(stop) => stop,
            Err(_) => {
                error!(%run_id, "the session panicked");
                Stop::Ended(Ending::failure(
                    ExitReason::InternalError,
                    "internal error: the session crashed",
                ))
            }
        }
    }

    /// The run's end, or its checkpoint when calls wait.
    async fn settle(&self, mut run: Run, started: Instant, stop: Stop) -> SessionEnd {
        // What the last turn spent counts against the shared budget, whether the run ends or
        // waits (a resumed run charges only what it spends itself).
        self.charge_meter(&mut run).await;
        let ending = match stop {
            Stop::Ended(ending) => ending,
            Stop::Waiting => {
                let elapsed_ms = started.elapsed().as_millis() as u64;
                match run.checkpoint(elapsed_ms) {
                    Some(checkpoint) => return SessionEnd::Waiting(Box::new(checkpoint)),
                    None => Ending::failure(
                        ExitReason::InternalError,
                        "internal error: the run stopped to wait with nothing waiting",
                    ),
                }
            }
        };
        SessionEnd::Finished(Box::new(self.finish(run, started, ending).await))
    }

    /// Publishes the answer, assembles the result and emits `final_report` and `run.finished`.
    async fn finish(&self, mut run: Run, started: Instant, ending: Ending) -> AgentResult {
        self.publish_answer(&run.facts, &ending).await;
        let result = assemble(
            &run.facts.request,
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

    async fn continue_after_wait(
        &self,
        run: &mut Run,
        waiting: WaitingTurn,
        decisions: &[DecidedCall],
    ) -> Stop {
        if let Err(ending) = self.set_up(run) {
            return Stop::Ended(*ending);
        }
        if self.control.abort.is_cancelled() {
            return Stop::Ended(self.control.aborted());
        }
        let turn = waiting.turn;
        self.tool_runner()
            .finish_waiting_turn(run, waiting, decisions)
            .await;
        self.turns(run, turn).await
    }

    /// The turn loop: checks the input and the report's schema, then runs turns until one ends
    /// the run or none are left (a synthetic failure report then says why).
    async fn drive(&self, run: &mut Run) -> Stop {
        if let Err(ending) = self.set_up(run) {
            return Stop::Ended(*ending);
        }
        self.turns(run, 0).await
    }

    /// Checks the input and compiles the final report's schema.
    fn set_up(&self, run: &mut Run) -> Result<(), Box<Ending>> {
        if !run.facts.request.has_input() {
            return Err(Box::new(Ending::failure(
                ExitReason::EmptyInput,
                "the prompt is empty",
            )));
        }
        if run.facts.request.agent.finalization == Finalization::Report {
            match FinalReportSpec::new(&run.facts.format, run.facts.schema()) {
                Ok(spec) => {
                    let definition =
                        final_report::definition(&run.facts.format, run.facts.schema());
                    run.facts.report = Some(ReportExpectation { spec, definition });
                }
                Err(error) => {
                    return Err(Box::new(Ending::failure(
                        ExitReason::ConfigError,
                        format!("the output schema is invalid: {error}"),
                    )));
                }
            }
        }
        Ok(())
    }

    /// The turns after `turn` until one ends the run or waits, or none are left (a synthetic
    /// failure report then says why).
    async fn turns(&self, run: &mut Run, mut turn: u32) -> Stop {
        while turn < run.plan.max_turns {
            // After the last turn's model call and tool calls: has the run reached its budget,
            // or has the budget it shares with its key's other runs been used up?
            if let Some(ending) = self.past_shared_budget(run).await {
                return Stop::Ended(ending);
            }
            if let Some(stop) = self.past_budget(run, turn).await {
                return stop;
            }
            turn += 1;
            run.transcript.turns = turn;
            if self.control.abort.is_cancelled() {
                return Stop::Ended(self.control.aborted());
            }
            if self.control.stop.is_cancelled() {
                run.plan.force_final(ForcedFinal::UserStop);
            }
            if run.context.guard.tool_budget_exceeded() {
                run.plan.force_final(ForcedFinal::Context);
            }
            if run.plan.forced_final.is_some() {
                run.plan.max_turns = turn;
            }
            self.join_waiting_messages(run).await;
            let prepared = self
                .prepare_turn(run, turn, turn == run.plan.max_turns)
                .await;
            let is_final = prepared.is_final;
            let span = crate::telemetry::genai::turn_span(turn, is_final);
            match Box::pin(self.turn(run, turn, is_final, prepared.tools))
                .instrument(span)
                .await
            {
                TurnEnd::Next => {}
                TurnEnd::Wait => return Stop::Waiting,
                TurnEnd::End(ending) => {
                    if !self.answer_again_for_joined(run, turn, &ending).await {
                        return Stop::Ended(ending);
                    }
                }
                TurnEnd::ProviderFailure(error) => return Stop::Ended(exhausted(&error)),
                TurnEnd::NoUsableResponse if !is_final => {
                    run.plan.forced_final = Some(ForcedFinal::RetryExhaustion)
                }
                TurnEnd::NoUsableResponse => {
                    return Stop::Ended(Ending::synthetic_failure(
                        ExitReason::NoLlmResponse,
                        &run.facts.format,
                        "no_llm_response",
                        "the model returned no usable response on its final turn",
                    ));
                }
            }
        }
        let (reason, metadata_reason, message) = match run.plan.forced_final {
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
        Stop::Ended(Ending::synthetic_failure(
            reason,
            &run.facts.format,
            metadata_reason,
            message,
        ))
    }

    /// Adds the messages waiting in the inbox to the conversation.
    async fn join_waiting_messages(&self, run: &mut Run) {
        if let Some(inbox) = &self.inbox {
            let joined = inbox.take().await;
            self.add_joined(run, joined).await;
        }
    }

    /// When the model answered with turns left and messages joined meanwhile: the answer
    /// becomes a draft the model sees, and the next turn answers all the messages. False: the
    /// run ends with `ending`.
    async fn answer_again_for_joined(&self, run: &mut Run, turn: u32, ending: &Ending) -> bool {
        let answered = ending.success
            && ending.exit_reason == ExitReason::FinalAnswer
            && ending.report.is_some()
            && !ending.answer_streamed;
        let turns_left = turn < run.plan.max_turns && run.plan.forced_final.is_none();
        let Some(inbox) = self.inbox.as_ref().filter(|_| answered && turns_left) else {
            return false;
        };
        if self.control.abort.is_cancelled() {
            return false;
        }
        let joined = inbox.take().await;
        if joined.is_empty() {
            return false;
        }
        let superseded = superseded_report_replies(&run.transcript.conversation);
        run.transcript.conversation.extend(superseded);
        self.add_joined(run, joined).await;
        true
    }

    /// Tells the followers of each joined message and adds it to the conversation.
    async fn add_joined(&self, run: &mut Run, joined: Vec<JoinedMessage>) {
        let agent = &run.facts.request.agent.name;
        for message in &joined {
            self.events.emit(joined_event(agent, message)).await;
        }
        run.transcript
            .conversation
            .extend(joined.into_iter().map(|joined| joined.message));
    }

    /// The tools of the turn about to start, after the context guard's `turn_preflight` (which
    /// may make it the final turn).
    async fn prepare_turn(&self, run: &mut Run, turn: u32, is_final: bool) -> PreparedTurn {
        let offer = PreparedTurn {
            tools: self.offered_tools(&run.facts, is_final).await,
            is_final,
        };
        let Run {
            facts,
            plan,
            context,
            xml,
            ..
        } = run;
        guard_phase::prepare_turn(
            context,
            plan,
            turn,
            offer,
            final_turn_tools(facts),
            |context, plan, tools, is_final| {
                let step = Step {
                    turn,
                    attempt: 1,
                    is_final,
                };
                attempt_messages(facts, plan, context, xml.as_ref(), step, tools, None)
            },
        )
    }

    /// One turn: up to `maxRetries` attempts, cycling through the targets, until a response is
    /// handled (the tool phase or the XML phase decides what it means).
    async fn turn(
        &self,
        run: &mut Run,
        turn: u32,
        is_final: bool,
        tools: Vec<ToolDefinition>,
    ) -> TurnEnd {
        let max_retries = run.facts.request.agent.limits.max_retries;
        let mut retry_notice: Option<&'static str> = None;
        let mut rate_limited: Vec<Option<Duration>> = Vec::new();
        let mut provider_error: Option<LlmError> = None;
        let mut turn_output = TurnOutput::default();
        for attempt in 1..=max_retries {
            let target = run.facts.target_for(attempt);
            self.events
                .emit(AgentEvent::TurnStarted(TurnStarted {
                    turn,
                    attempt,
                    is_retry: attempt > 1,
                    is_final_turn: is_final,
                    forced_final_reason: run.plan.forced_final.map(|f| f.as_str().to_string()),
                }))
                .await;
            let step = Step {
                turn,
                attempt,
                is_final,
            };
            let ephemeral = attempt_messages(
                &run.facts,
                &run.plan,
                &run.context,
                run.xml.as_ref(),
                step,
                &tools,
                retry_notice.take(),
            );
            let provider_tools = match &mut run.xml {
                None => tools.clone(),
                Some(xml) => {
                    // The feedback is in this attempt's XML-NEXT; what the response earns comes next.
                    xml.feedback.clear();
                    xml.provider_tools(&tools)
                }
            };
            let nonce = run.xml.as_ref().map(|xml| xml.state.nonce.clone());
            let tool_choice = run
                .facts
                .request
                .client_tools
                .provider_choice(turn, &provider_tools);
            let attempt_call = LlmAttempt {
                target: &target,
                tool_choice,
                tools: provider_tools,
                ephemeral,
                final_tag_nonce: nonce.as_deref(),
                turn_output: &mut turn_output,
            };
            let outcome = self
                .llm_access()
                .call(
                    &run.facts,
                    &mut run.transcript,
                    &mut run.context,
                    attempt_call,
                )
                .await;
            match outcome {
                AttemptOutcome::Aborted => return TurnEnd::End(self.control.aborted()),
                AttemptOutcome::Failed(error) if error.is_fatal() => {
                    return TurnEnd::End(fatal(&error));
                }
                AttemptOutcome::Failed(error) => {
                    match &error {
                        LlmError::RateLimit { retry_after, .. } => rate_limited.push(*retry_after),
                        _ => rate_limited.clear(),
                    }
                    provider_error = Some(error);
                    let targets = run.facts.request.agent.targets.len().max(1);
                    if rate_limited.len() >= targets && attempt < max_retries {
                        let wait = longest_wait(&rate_limited, attempt);
                        rate_limited.clear();
                        if self.sleep_unless_aborted(wait).await {
                            return TurnEnd::End(self.control.aborted());
                        }
                    }
                }
                AttemptOutcome::Empty => {
                    warn!(run_id = %run.facts.request.run_id, turn, attempt, "empty response; retrying");
                    retry_notice = Some(empty_notice(&run.facts));
                    provider_error = None;
                    rate_limited.clear();
                }
                AttemptOutcome::Answer(response, streamed) => {
                    let response = *response;
                    let runner = self.tool_runner();
                    let handled = if run.xml.is_some() {
                        handle_xml_response(&runner, run, turn, is_final, response, streamed).await
                    } else {
                        runner
                            .handle_native_response(run, turn, is_final, response)
                            .await
                    };
                    match handled {
                        Handled::Next => return TurnEnd::Next,
                        Handled::Wait => return TurnEnd::Wait,
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

    /// In report mode the answer was not streamed as it was generated: send it as output now.
    async fn publish_answer(&self, facts: &RunFacts, ending: &Ending) {
        if facts.streams_text() || ending.answer_streamed {
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
            .emit(AgentEvent::Output(TextDelta::new(text)))
            .await;
    }

    /// The tools offered this turn: only the final report (or nothing, in text mode) at the end.
    async fn offered_tools(&self, facts: &RunFacts, is_final: bool) -> Vec<ToolDefinition> {
        if is_final {
            return final_turn_tools(facts);
        }
        let mut tools = self.tools.definitions().await;
        if let Some(sub_agents) = &self.sub_agents {
            tools.extend(sub_agents.agents.iter().map(|agent| sub_agent_tool(agent)));
        }
        if facts.report.is_some() && !tools.is_empty() {
            let batch = batch_definition(&tools);
            tools.push(task_status_definition());
            tools.push(batch);
        }
        if let Some(router) = &self.router {
            tools.push(router.definition());
        }
        if facts.offers_tool_output() {
            tools.push(super::output_handles::definition());
        }
        tools.extend(facts.request.client_tools.offered().iter().cloned());
        tools.extend(final_turn_tools(facts));
        tools
    }

    fn llm_access(&self) -> LlmAccess<'_> {
        LlmAccess {
            providers: &self.providers,
            events: &self.events,
            abort: &self.control.abort,
            catalog: &self.catalog,
        }
    }

    fn tool_runner(&self) -> ToolRunner<'_> {
        ToolRunner {
            registry: &self.tools,
            events: &self.events,
            control: &self.control,
            sub_agents: self.sub_agents.as_ref(),
            may_wait: self.may_wait,
            catalog: &self.catalog,
            tool_cache: self.tool_cache.as_ref(),
            secrets: self.secrets.as_ref(),
            router: self.router.as_ref(),
            child_runner: self.child_runner.as_ref(),
            file_keeper: self.file_keeper.as_deref(),
        }
    }

    /// Sleeps unless aborted first; returns true when aborted.
    async fn sleep_unless_aborted(&self, wait: Duration) -> bool {
        tokio::select! {
            _ = self.control.abort.cancelled() => true,
            _ = tokio::time::sleep(wait) => false,
        }
    }
}

/// The final report's definition alone (nothing in text mode).
/// Replies to the final-report calls of the conversation's last message, which a message
/// that joined since supersedes: a model call must find each of its calls answered.
fn superseded_report_replies(conversation: &[ChatMessage]) -> Vec<ChatMessage> {
    let Some(last) = conversation.last() else {
        return Vec::new();
    };
    last.tool_calls
        .iter()
        .map(|call| {
            let mut reply = ChatMessage::new(Role::Tool, SUPERSEDED_REPORT_NOTICE);
            reply.tool_call_id = Some(call.id.clone());
            reply
        })
        .collect()
}

fn final_turn_tools(facts: &RunFacts) -> Vec<ToolDefinition> {
    facts
        .report
        .iter()
        .map(|report| report.definition.clone())
        .collect()
}

/// The messages added to one attempt only: XML-NEXT in the XML transports, else the retry and
/// final-turn notices.
fn attempt_messages(
    facts: &RunFacts,
    plan: &TurnPlan,
    context: &ContextAccount,
    xml: Option<&XmlTransport>,
    step: Step,
    tools: &[ToolDefinition],
    retry_notice: Option<&'static str>,
) -> Vec<ChatMessage> {
    match xml {
        Some(xml) => vec![xml.next_message(facts, plan, context, step, tools, retry_notice)],
        None => native_notices(facts, retry_notice, step.is_final),
    }
}

fn empty_transcript() -> Transcript {
    Transcript {
        conversation: Vec::new(),
        accounting: Vec::new(),
        turns: 0,
    }
}

fn empty_notice(facts: &RunFacts) -> &'static str {
    if facts.streams_text() {
        EMPTY_TEXT_RESPONSE_NOTICE
    } else {
        EMPTY_RESPONSE_NOTICE
    }
}

/// The native transport's messages for one attempt, never stored: the retry notice, and the
/// final-turn notice on the last turn.
fn native_notices(
    facts: &RunFacts,
    retry_notice: Option<&'static str>,
    is_final: bool,
) -> Vec<ChatMessage> {
    let mut messages: Vec<ChatMessage> = retry_notice.into_iter().map(ChatMessage::user).collect();
    if is_final {
        let notice = if facts.streams_text() {
            FINAL_TURN_TEXT_NOTICE
        } else {
            FINAL_TURN_REPORT_NOTICE
        };
        messages.push(ChatMessage::user(notice));
    }
    messages
}

fn fatal(error: &LlmError) -> Ending {
    let reason = match error {
        LlmError::QuotaExceeded(_) => ExitReason::QuotaExceeded,
        LlmError::TooLarge(_) => ExitReason::OutputTooLarge,
        _ => ExitReason::AuthFailure,
    };
    Ending::failure(reason, error.to_string())
}

impl Session {
    /// Charges the spend meter with the model calls made since it was last charged.
    async fn charge_meter(&self, run: &mut Run) {
        let Some(meter) = &self.spend_meter else {
            return;
        };
        let accounting = &run.transcript.accounting;
        let fresh = accounting.get(run.charged..).unwrap_or_default();
        run.charged = accounting.len();
        if !fresh.is_empty() {
            meter.charge(budget::Spent::of(fresh, Duration::ZERO)).await;
        }
    }

    /// The run's end when the budget it shares with other runs (its key's day) is used up:
    /// `run.budget_exceeded` naming that budget, then the synthetic failure report. Raising
    /// the run's own budget cannot help, so such a run never waits.
    async fn past_shared_budget(&self, run: &mut Run) -> Option<Ending> {
        self.charge_meter(run).await;
        let crossed = self.spend_meter.as_ref()?.exhausted().await?;
        let message = format!(
            "the key's daily budget is used up ({:?} {}; used {})",
            crossed.limit, crossed.allowed, crossed.used
        );
        self.events
            .emit(AgentEvent::BudgetExceeded(Box::new(crossed)))
            .await;
        Some(Ending::synthetic_failure(
            ExitReason::BudgetExceeded,
            &run.facts.format,
            "budget_exceeded",
            &message,
        ))
    }

    /// Where the run goes when it has reached its budget (the lowest of the agent's, the key's
    /// and the request's, with any raise in place): `run.budget_exceeded` is emitted, then the
    /// run parks `waiting_budget` after `turn` (`onBudget: wait`, in a session that may wait) or
    /// ends with the contract's synthetic failure report, `exit_reason: budget_exceeded`.
    async fn past_budget(&self, run: &mut Run, turn: u32) -> Option<Stop> {
        let request = &run.facts.request;
        let budget = request.effective_budget();
        if budget.is_unlimited() {
            return None;
        }
        let spent = budget::Spent::of(&run.transcript.accounting, run.started.elapsed());
        let crossed = budget.crossed(&spent)?;
        let message = format!(
            "the run reached its budget ({:?} {}; used {})",
            crossed.limit, crossed.allowed, crossed.used
        );
        let waits = self.may_wait && request.agent.on_budget == budget::OnBudget::Wait;
        self.events
            .emit(AgentEvent::BudgetExceeded(Box::new(crossed.clone())))
            .await;
        if waits {
            run.waiting = Some(WaitingTurn {
                turn,
                calls: Vec::new(),
                replies: Vec::new(),
                pending: Vec::new(),
            });
            run.budget_wait = Some(crossed);
            return Some(Stop::Waiting);
        }
        Some(Stop::Ended(Ending::synthetic_failure(
            ExitReason::BudgetExceeded,
            &run.facts.format,
            "budget_exceeded",
            &message,
        )))
    }
}

fn exhausted(error: &LlmError) -> Ending {
    let reason = match error {
        LlmError::RateLimit { .. } => ExitReason::RateLimited,
        LlmError::InvalidResponse(_) => ExitReason::NoLlmResponse,
        _ => ExitReason::LlmError,
    };
    let mut ending = Ending::failure(reason, format!("every attempt failed; last error: {error}"));
    if let LlmError::RateLimit { retry_after, .. } = error {
        // Rounded up: a client that waits the whole seconds it is told never comes too early.
        ending.retry_after_secs = Some(
            retry_after
                .map_or(1, |wait| wait.as_millis().div_ceil(1000) as u64)
                .max(1),
        );
    }
    ending
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
