//! What happens after the model answers natively: text becomes the answer (or is retried), tool
//! calls are checked (final report, final-turn restriction, `maxToolCallsPerTurn`, argument
//! repair) and the valid ones run concurrently under `toolTimeout`, each in its own task so a
//! panic is contained. The XML phase runs its tag calls through the same [`ToolRunner`].
//!
//! Uses only the services in [`ToolRunner`] and the run's state; it never calls the model.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tracing::{error, warn};

use super::approval::{DecidedCall, Decision, PendingCall, WaitingTurn};
use super::call_routes::{ArgumentedCall, ChildCall, TurnCall, TurnReplies, TurnRoutes};
use super::context_guard::BUDGET_EXCEEDED_STUB;
use super::ending::Ending;
use super::events::{AgentEvent, ApprovalDecided, ApprovalRequested, EventSink};
use super::final_report::FINAL_REPORT_TOOL;
use super::guard_phase::Refusal;
use super::internal_phase::{read_tool_output, run_batch};
use super::output_handles::{OutputHandles, TOOL_OUTPUT_TOOL};
use super::router::Router;
use super::run::{Run, RunFacts};
use super::session::{EMPTY_RESPONSE_NOTICE, RunControl};
use super::sub_agents::{
    ChildRunner, SUB_AGENT_CONCURRENCY, SubAgentReply, SubAgents, call_sub_agent, record_sub_agent,
};
use super::tool_args::{ParsedArguments, parse_tool_arguments};
use super::tool_execution::Executed;
use crate::config::agent_file::{Finalization, ToolOutputMode};
use crate::llm::{ChatMessage, LlmResponse, Role, ToolCall};
use crate::tools::ToolRegistry;
use crate::tools::result_cache::ToolResultCache;
use crate::vocabulary::result::{
    AccountingEntry, EntryStatus, ExitReason, Lineage, ToolAccounting,
};

/// What the turn loop does next.
pub(super) enum Handled {
    Next,
    End(Ending),
    /// Retry this turn, with an ephemeral notice if given; nothing was added to the conversation.
    Retry(Option<&'static str>),
    /// Calls of this turn wait for a person (`run.waiting` holds them): the run stops here.
    Wait,
}

/// Told to the model for a call that needs approval where nobody can be asked.
pub(super) const NO_APPROVER_REPLY: &str =
    "denied: this tool needs a person's approval, which this session cannot ask for";

/// `charactersOut` the contract fixes for an accepted final report.
const FINAL_REPORT_CHARS_OUT: usize = 12;

/// Per-run facts the concurrent tool executions need.
pub(super) struct ToolContext {
    pub timeout: Duration,
    /// `toolResponseMaxBytes`: longer outputs are truncated.
    pub max_bytes: usize,
    pub lineage: Lineage,
    /// `xml` when the call came through a tag.
    pub source: Option<&'static str>,
    /// The caller, when the agent is `userScoped`: part of every tool cache key.
    pub cache_user: Option<String>,
    /// The run's user, whatever the agent: the caller of its tools (`${caller.…}`).
    pub user_id: Option<String>,
    /// Where outputs past `max_bytes` are kept whole (`toolOutput: handles`).
    pub output_handles: Option<std::sync::Arc<OutputHandles>>,
}

impl ToolContext {
    /// The context of `run`'s tool calls; `source` is `xml` for calls written as tags.
    pub fn of(facts: &RunFacts, source: Option<&'static str>) -> Self {
        let request = &facts.request;
        Self {
            timeout: request.agent.limits.tool_timeout,
            max_bytes: usize::try_from(request.agent.limits.tool_response_max_bytes)
                .unwrap_or(usize::MAX),
            lineage: facts.lineage.clone(),
            source,
            cache_user: request
                .user()
                .map(str::to_string)
                .filter(|_| request.agent.user_scoped),
            user_id: request.user().map(str::to_string),
            output_handles: (request.agent.tool_output == ToolOutputMode::Handles)
                .then(|| std::sync::Arc::clone(&facts.output_handles)),
        }
    }
}

/// What the tool phase uses from the session: the tools, the sub-agents, where events go and the
/// run's stop signals.
pub(super) struct ToolRunner<'a> {
    pub registry: &'a ToolRegistry,
    pub events: &'a EventSink,
    pub control: &'a RunControl,
    pub sub_agents: Option<&'a SubAgents>,
    /// Whether calls that need approval may make the run wait (a top-level run under a
    /// runtime that keeps checkpoints); otherwise they are denied at once.
    pub may_wait: bool,
    /// Tool prices (`pricing.tools`).
    pub catalog: &'a crate::config::models::ModelCatalog,
    /// Where results of tools with a `cache` TTL are kept; `None` caches nothing.
    pub tool_cache: Option<&'a ToolResultCache>,
    /// Where `${caller.secret.NAME}` is read; `None` when secrets are not configured.
    pub secrets: Option<&'a std::sync::Arc<dyn crate::tools::caller::SecretSource>>,
    /// `router.destinations`: a `router__handoff-to` call ends the session with the choice.
    pub router: Option<&'a Router>,
    /// Runs child sessions (questions about kept tool outputs).
    pub child_runner: Option<&'a std::sync::Arc<dyn ChildRunner>>,
    /// Keeps the files tools' results carry; `None`: the model gets a note naming them.
    pub file_keeper: Option<&'a dyn super::tool_files::FileKeeper>,
}

impl ToolRunner<'_> {
    /// Handles a response in the native transport.
    pub(super) async fn handle_native_response(
        &self,
        run: &mut Run,
        turn: u32,
        is_final: bool,
        response: LlmResponse,
    ) -> Handled {
        let has_text = !response.text.trim().is_empty();
        if response.tool_calls.is_empty() {
            if !has_text {
                // Reasoning only: kept for the next turn, which proceeds.
                run.transcript
                    .conversation
                    .push(assistant_message(&response));
                return Handled::Next;
            }
            return match run.facts.request.agent.finalization {
                Finalization::Text => {
                    run.transcript
                        .conversation
                        .push(assistant_message(&response));
                    Handled::End(run.text_answer(ExitReason::FinalAnswer, response.text))
                }
                Finalization::Report if is_final => {
                    run.transcript
                        .conversation
                        .push(assistant_message(&response));
                    Handled::End(run.text_answer(ExitReason::TextFallback, response.text))
                }
                Finalization::Report => Handled::Retry(Some(EMPTY_RESPONSE_NOTICE)),
            };
        }
        run.transcript
            .conversation
            .push(assistant_message(&response));
        self.run_native_calls(run, turn, is_final, &response.tool_calls)
            .await
    }

    /// Runs a turn's native tool calls and adds the assistant's calls' replies as `tool` messages.
    pub(super) async fn run_native_calls(
        &self,
        run: &mut Run,
        turn: u32,
        is_final: bool,
        calls: &[ToolCall],
    ) -> Handled {
        // The client's tools are the client's to run: the others run now, and the run then
        // ends with the client's calls unanswered (SPEC §9.2).
        let (client_calls, calls): (Vec<ToolCall>, Vec<ToolCall>) = calls
            .iter()
            .cloned()
            .partition(|call| !is_final && run.facts.request.client_tools.contains(&call.name));
        let replies = match self.execute_calls(run, turn, is_final, &calls, None).await {
            Ok(replies) => replies,
            Err(handled) => return handled,
        };
        if run.waiting.is_some() {
            return Handled::Wait;
        }
        let answered = calls.len();
        push_tool_replies(run, &calls, replies);
        if !client_calls.is_empty() {
            tracing::debug!(
                answered,
                pending = client_calls.len(),
                "the turn calls client tools"
            );
            return Handled::End(Ending::client_tool_calls());
        }
        Handled::Next
    }

    /// Checks a turn's calls (final report, final turn, `maxToolCallsPerTurn`, arguments), runs
    /// the valid ones concurrently and passes their outputs through the context guard. Returns
    /// one reply per call, in order, or how the run ends.
    pub(super) async fn execute_calls(
        &self,
        run: &mut Run,
        turn: u32,
        is_final: bool,
        calls: &[ToolCall],
        source: Option<&'static str>,
    ) -> Result<Vec<String>, Handled> {
        let limit = run.facts.request.agent.limits.max_tool_calls_per_turn as usize;
        let budget_left = tool_calls_left(run);
        let mut routes = TurnRoutes::new(calls.len());
        let mut requested = 0usize;
        for (index, call) in calls.iter().enumerate() {
            let turn_call = TurnCall {
                turn,
                is_final,
                source,
                limit,
                budget_left,
            };
            let route = self.route(run, &turn_call, call, &mut requested).await?;
            routes.add(index, call, route);
        }
        let context = ToolContext::of(&run.facts, source);
        let mut replies = TurnReplies::new(routes.answered);
        // Reads of kept outputs are tool outputs like any other: cut and guarded.
        for (index, call) in routes.extractions {
            let reply = read_tool_output(self, &run.facts, &mut run.transcript, call).await;
            let reply = truncate_output(TOOL_OUTPUT_TOOL, reply, context.max_bytes);
            replies.admit(&mut run.context, index, reply);
        }
        self.run_sub_agents(run, routes.children, &mut replies)
            .await?;
        for (index, call) in routes.batches {
            let remaining = limit
                .min(budget_left.unwrap_or(usize::MAX))
                .saturating_sub(requested);
            let (reply, used) = run_batch(
                self,
                &run.facts,
                &mut run.transcript,
                call,
                &context,
                remaining,
            )
            .await;
            requested += used;
            replies.admit(&mut run.context, index, reply);
        }
        self.run_tools(run, routes.runnable, &context, &mut replies)
            .await?;
        if self.control.abort.is_cancelled() {
            return Err(Handled::End(self.control.aborted()));
        }
        let contents = replies.contents(run, &routes.parked);
        if !routes.parked.is_empty() {
            let pending = self.ask_for_approval(run, &routes.parked).await;
            run.waiting = Some(WaitingTurn {
                turn,
                calls: calls.to_vec(),
                replies: contents,
                pending,
            });
            return Ok(Vec::new());
        }
        Ok(contents
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect())
    }

    /// Sub-agents run at once (a few at a time); their replies are recorded in call order.
    async fn run_sub_agents(
        &self,
        run: &mut Run,
        children: Vec<ChildCall<'_>>,
        replies: &mut TurnReplies,
    ) -> Result<(), Handled> {
        let places = tokio::sync::Semaphore::new(SUB_AGENT_CONCURRENCY);
        let child_calls = children.into_iter().map(|(index, call, child, arguments)| {
            let (places, facts) = (&places, &run.facts);
            async move {
                let _place = places.acquire().await;
                let reply = call_sub_agent(self, facts, call, child, arguments).await;
                (index, call.id.clone(), reply)
            }
        });
        let child_replies: Vec<(usize, String, SubAgentReply)> = tokio::select! {
            biased;
            _ = self.control.abort.cancelled() => return Err(Handled::End(self.control.aborted())),
            replies = futures_util::future::join_all(child_calls) => replies,
        };
        for (index, call_id, child_reply) in child_replies {
            let (reply, files) =
                record_sub_agent(self.events, &mut run.transcript, child_reply).await;
            if files.is_empty() {
                replies.admit(&mut run.context, index, reply);
                continue;
            }
            // The child's files go to the model with its reply, counted like a tool's.
            let reply = admit_reply(run, call_id, reply, files)
                .unwrap_or_else(|_| BUDGET_EXCEEDED_STUB.to_string());
            replies.set_admitted(index, reply);
        }
        Ok(())
    }

    /// The turn's other tools run concurrently; their outputs pass the guard's
    /// `tool_preflight` (a refused one is a short notice) and their entries are recorded in
    /// call order.
    async fn run_tools(
        &self,
        run: &mut Run,
        runnable: Vec<ArgumentedCall<'_>>,
        context: &ToolContext,
        replies: &mut TurnReplies,
    ) -> Result<(), Handled> {
        let executions = runnable
            .into_iter()
            .map(|(index, call, arguments)| self.execute_tool(index, call, arguments, context));
        let mut executed: Vec<Executed> = tokio::select! {
            biased;
            _ = self.control.abort.cancelled() => return Err(Handled::End(self.control.aborted())),
            executed = futures_util::future::join_all(executions) => executed,
        };
        executed.sort_by_key(|e| e.index);
        for executed in executed {
            let index = executed.index;
            let message = self.record_executed(run, executed).await;
            replies.set_admitted(index, message);
        }
        Ok(())
    }

    /// Records an executed call (its failed tries, then its entry) and admits its reply and
    /// files through the guard's `tool_preflight`; gives back what the model is told (the
    /// budget notice when the reply was refused).
    async fn record_executed(&self, run: &mut Run, executed: Executed) -> String {
        let Executed {
            call_id,
            message,
            attachments,
            mut entry,
            failed_tries,
            ..
        } = executed;
        for failed_try in failed_tries {
            run.transcript.record(self.events, failed_try).await;
        }
        let message = match admit_reply(run, call_id, message, attachments) {
            Ok(message) => message,
            Err(refusal) => {
                mark_dropped(&mut entry, &refusal);
                BUDGET_EXCEEDED_STUB.to_string()
            }
        };
        run.transcript.record(self.events, entry).await;
        message
    }

    /// Emits `tool.approval_requested` for each parked call; they wait until `approvalTimeout`.
    async fn ask_for_approval(
        &self,
        run: &Run,
        parked: &[(usize, &ToolCall, Map<String, Value>)],
    ) -> Vec<PendingCall> {
        let timeout = run.facts.request.agent.approvals.timeout;
        let expires_at = chrono::Utc::now()
            + chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::days(365));
        let mut pending = Vec::with_capacity(parked.len());
        for (_, call, arguments) in parked {
            let waiting = PendingCall {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                server: server_of(&call.name),
                arguments: Value::Object(arguments.clone()),
                expires_at: chrono::SubsecRound::trunc_subsecs(expires_at, 6),
            };
            self.events
                .emit(AgentEvent::ApprovalRequested(Box::new(ApprovalRequested {
                    call_id: waiting.call_id.clone(),
                    tool: waiting.tool.clone(),
                    server: waiting.server.clone(),
                    arguments: waiting.arguments.clone(),
                    expires_at: waiting
                        .expires_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                })))
                .await;
            pending.push(waiting);
        }
        pending
    }

    /// Ends a wait: emits `tool.approval_decided` for each decision, runs the approved calls
    /// (with edited arguments when given) and tells the model of the denied ones, then adds the
    /// whole turn's replies to the conversation in the order of the calls.
    pub(super) async fn finish_waiting_turn(
        &self,
        run: &mut Run,
        waiting: WaitingTurn,
        decisions: &[DecidedCall],
    ) {
        let context = ToolContext::of(&run.facts, None);
        let mut replies = waiting.replies;
        for pending in &waiting.pending {
            let decided = decisions.iter().find(|d| d.call_id == pending.call_id);
            let decision = decided.map_or(Decision::Expired, |d| d.decision.clone());
            self.events
                .emit(AgentEvent::ApprovalDecided(Box::new(ApprovalDecided {
                    call_id: pending.call_id.clone(),
                    decision: decision.as_str().into(),
                    by: decided.map_or_else(|| "agentd".into(), |d| d.by.clone()),
                    reason: decision.reason(),
                })))
                .await;
            let Some(index) = waiting.calls.iter().position(|c| c.id == pending.call_id) else {
                continue;
            };
            let reply = match &decision {
                Decision::Approve { arguments, .. } => {
                    let arguments = match arguments {
                        Some(edited) => scope_to_user(&run.facts, edited.clone()),
                        None => match &pending.arguments {
                            Value::Object(given) => given.clone(),
                            _ => Map::new(),
                        },
                    };
                    let executed = self
                        .execute_tool(index, &waiting.calls[index], arguments, &context)
                        .await;
                    self.record_executed(run, executed).await
                }
                denied => {
                    let reply = denied.denial_reply().unwrap_or_default();
                    run.context.add_unchecked_tool_reply(&reply);
                    reply
                }
            };
            if let Some(slot) = replies.get_mut(index) {
                *slot = Some(reply);
            }
        }
        let replies = replies
            .into_iter()
            .map(|reply| reply.unwrap_or_else(|| failed("not executed")))
            .collect();
        push_tool_replies(run, &waiting.calls, replies);
    }

    /// Validates a final-report call; `Err` carries the reason the model will be told.
    pub(super) async fn accept_final_report(
        &self,
        run: &mut Run,
        call: &ToolCall,
    ) -> Result<Ending, String> {
        let outcome = match (parse_tool_arguments(&call.arguments), &run.facts.report) {
            (Ok(parsed), Some(report)) => {
                let arguments = match parsed {
                    ParsedArguments::Clean(a) | ParsedArguments::Repaired { arguments: a, .. } => a,
                };
                report.spec.accept(&arguments).map_err(|e| e.to_string())
            }
            (Err(e), _) => Err(format!("the arguments are not a valid JSON object ({e})")),
            (Ok(_), None) => Err("no final report is expected".into()),
        };
        let entry = ToolAccounting::finished(
            "agent",
            FINAL_REPORT_TOOL,
            0,
            call.arguments.len(),
            if outcome.is_ok() {
                FINAL_REPORT_CHARS_OUT
            } else {
                0
            },
            outcome.as_ref().err().cloned(),
            run.facts.lineage.clone(),
        );
        run.transcript
            .record(self.events, AccountingEntry::Tool(entry))
            .await;
        match outcome {
            Ok(report) => {
                for warning in &report.warnings {
                    warn!(run_id = %run.facts.request.run_id, %warning, "final report normalised");
                }
                let reason = run.plan.answer_reason(ExitReason::FinalAnswer);
                Ok(Ending::answer(
                    reason,
                    &report.format,
                    report.content,
                    report.content_json,
                    report.metadata,
                ))
            }
            Err(reason) => {
                error!(run_id = %run.facts.request.run_id, payload = %call.arguments, %reason, "final report rejected");
                Err(reason)
            }
        }
    }
}

/// The tool's server: the namespace before `__`.
pub(super) fn server_of(tool: &str) -> String {
    tool.split_once("__")
        .map_or("unknown", |(namespace, _)| namespace)
        .to_string()
}

/// Adds one `tool` message per call, in the order of the calls.
/// The tool calls the run's budget still allows: none once the model call that asked for them
/// took the run past any of its limits (its tools are answered "not run" and the budget is
/// checked at the turn's end), else `maxToolCalls` less the calls made so far, so a turn asking
/// for more runs only those.
fn tool_calls_left(run: &Run) -> Option<usize> {
    let budget = run.facts.request.effective_budget();
    let spent =
        crate::vocabulary::budget::Spent::of(&run.transcript.accounting, run.started.elapsed());
    if budget.crossed(&spent).is_some() {
        return Some(0);
    }
    let allowed = budget.max_tool_calls?;
    Some(allowed.saturating_sub(spent.tool_calls) as usize)
}

fn push_tool_replies(run: &mut Run, calls: &[ToolCall], replies: Vec<String>) {
    for (call, content) in calls.iter().zip(replies) {
        run.transcript.conversation.push(ChatMessage {
            role: Role::Tool,
            content: Some(content),
            tool_calls: Vec::new(),
            tool_call_id: Some(call.id.clone()),
            reasoning: None,
            reasoning_signature: None,
            redacted_reasoning: Vec::new(),
            attachments: run.tool_files.remove(&call.id).unwrap_or_default(),
        });
    }
    run.tool_files.clear();
}

/// `toolResponseMaxBytes`: keeps at most `max_bytes` of the output (never splitting a UTF-8
/// character) behind the contract's notice.
pub(super) fn truncate_output(tool: &str, text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    warn!(
        tool,
        bytes = text.len(),
        limit = max_bytes,
        "tool response truncated"
    );
    format!(
        "[TRUNCATED] Original size {} bytes; truncated to {cut} bytes.\n{}",
        text.len(),
        &text[..cut]
    )
}

/// Admits a call's reply and the files that go with it through the guard's `tool_preflight`;
/// the files wait for the call's `tool` message.
fn admit_reply(
    run: &mut Run,
    call_id: String,
    reply: String,
    files: Vec<crate::vocabulary::Attachment>,
) -> Result<String, Refusal> {
    run.context.admit_tool_reply(&reply, &files)?;
    if !files.is_empty() {
        run.tool_files.insert(call_id, files);
    }
    Ok(reply)
}

/// Records a guard drop in the tool's accounting entry (contract §2 and §4).
fn mark_dropped(entry: &mut AccountingEntry, refusal: &Refusal) {
    let AccountingEntry::Tool(tool) = entry else {
        return;
    };
    tool.status = EntryStatus::Failed;
    tool.error = Some("context_budget_exceeded".into());
    tool.characters_out = BUDGET_EXCEEDED_STUB.chars().count();
    let mut details = serde_json::Map::new();
    details.insert(
        "projected_tokens".into(),
        refusal.projection.projected.into(),
    );
    details.insert("limit_tokens".into(), refusal.projection.limit.into());
    if refusal.projection.remaining() > 0 {
        details.insert(
            "remaining_tokens".into(),
            refusal.projection.remaining().into(),
        );
    }
    details.insert("original_tokens".into(), refusal.original_tokens.into());
    details.insert(
        "replacement_tokens".into(),
        refusal.replacement_tokens.into(),
    );
    tool.details = Some(details);
}

/// Parses a call's arguments (repairing them if needed); `Err` is the reply the model gets.
pub(super) fn call_arguments(call: &ToolCall) -> Result<Map<String, Value>, String> {
    match parse_tool_arguments(&call.arguments) {
        Ok(ParsedArguments::Clean(arguments)) => Ok(arguments),
        Ok(ParsedArguments::Repaired {
            arguments,
            repaired,
            steps,
        }) => {
            warn!(tool = %call.name, original = %call.arguments, %repaired, steps = ?steps, "tool arguments repaired");
            Ok(arguments)
        }
        Err(reason) => {
            error!(tool = %call.name, payload = %call.arguments, %reason, "tool arguments unparseable; call dropped");
            Err(failed(&format!(
                "the arguments of {} are not a valid JSON object ({reason}); call it again with valid JSON",
                call.name
            )))
        }
    }
}

/// `userScoped` agents: the caller's `user_id` overrides whatever the model wrote (seeds/001).
pub(super) fn scope_to_user(
    facts: &RunFacts,
    mut arguments: Map<String, Value>,
) -> Map<String, Value> {
    if let (true, Some(user)) = (facts.request.agent.user_scoped, facts.request.user()) {
        arguments.insert("user_id".into(), Value::String(user.to_string()));
    }
    arguments
}

/// The accounting entry of a tool agentd answers itself (`agent__task_status`, a sub-agent):
/// server `agent`, timed from `started`, sized by the call's arguments and the reply.
pub(super) fn agent_tool_entry(
    tool: &str,
    call: &ToolCall,
    started: Instant,
    reply: &str,
    error: Option<String>,
    lineage: Lineage,
) -> AccountingEntry {
    AccountingEntry::Tool(ToolAccounting::finished(
        "agent",
        tool,
        started.elapsed().as_millis() as u64,
        call.arguments.chars().count(),
        reply.chars().count(),
        error,
        lineage,
    ))
}

pub(super) fn failed(reason: &str) -> String {
    format!("(tool failed: {reason})")
}

pub(super) fn assistant_message(response: &LlmResponse) -> ChatMessage {
    ChatMessage {
        role: Role::Assistant,
        content: Some(response.text.clone()).filter(|t| !t.is_empty()),
        tool_calls: response.tool_calls.clone(),
        tool_call_id: None,
        reasoning: Some(response.reasoning.clone()).filter(|r| !r.is_empty()),
        reasoning_signature: response.reasoning_signature.clone(),
        redacted_reasoning: response.redacted_reasoning.clone(),
        attachments: Vec::new(),
    }
}
