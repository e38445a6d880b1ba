//! How a turn's tool calls are sorted before any runs (`ToolRunner::execute_calls`): each call
//! gets a [`Route`] (answered at once, a read of a kept output, a sub-agent, a batch, a wait for
//! approval, or a tool to run), and [`TurnReplies`] collects one reply per call, in call order,
//! with whether the context guard has admitted it.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::ending::Ending;
use super::final_report::FINAL_REPORT_TOOL;
use super::guard_phase::ContextAccount;
use super::internal_phase::record_task_status;
use super::internal_tools::{BATCH_TOOL, TASK_STATUS_TOOL};
use super::output_handles::TOOL_OUTPUT_TOOL;
use super::router::ROUTER_TOOL;
use super::run::Run;
use super::tool_phase::{
    Handled, NO_APPROVER_REPLY, ToolRunner, call_arguments, failed, scope_to_user,
};
use crate::agent::context_guard::BUDGET_EXCEEDED_STUB;
use crate::config::AgentSpec;
use crate::llm::ToolCall;
use crate::vocabulary::result::ExitReason;

/// A call with its index in the turn and its parsed arguments.
pub(super) type ArgumentedCall<'c> = (usize, &'c ToolCall, Map<String, Value>);
/// A sub-agent call: index, call, the child agent and its arguments.
pub(super) type ChildCall<'c> = (usize, &'c ToolCall, Arc<AgentSpec>, Map<String, Value>);

/// Where one of a turn's calls goes.
pub(super) enum Route {
    /// Answered while sorting: refused, failed, a task status recorded, a route refused.
    Answered(String),
    /// `agent__batch`: its inner calls run after the others and count against the limit.
    Batch,
    /// `agent__tool_output`: a read of a kept output.
    Extraction,
    /// Waits for a person's approval.
    Parked(Map<String, Value>),
    /// A sub-agent.
    Child(Arc<AgentSpec>, Map<String, Value>),
    /// Any other tool.
    Runnable(Map<String, Value>),
}

/// What sorting one call needs to know about its turn.
pub(super) struct TurnCall {
    pub turn: u32,
    pub is_final: bool,
    /// `Some` for calls made inside a tool (a batch): they may not wait for approval.
    pub source: Option<&'static str>,
    /// `maxToolCallsPerTurn`.
    pub limit: usize,
    /// The tool calls the run's budget (`maxToolCalls`, SPEC §14) still allows; `None`: no
    /// such limit.
    pub budget_left: Option<usize>,
}

/// A turn's calls sorted by route, each with its index in the turn.
pub(super) struct TurnRoutes<'c> {
    pub answered: Vec<Option<String>>,
    pub batches: Vec<(usize, &'c ToolCall)>,
    pub extractions: Vec<(usize, &'c ToolCall)>,
    pub parked: Vec<ArgumentedCall<'c>>,
    pub children: Vec<ChildCall<'c>>,
    pub runnable: Vec<ArgumentedCall<'c>>,
}

impl<'c> TurnRoutes<'c> {
    pub fn new(calls: usize) -> Self {
        Self {
            answered: vec![None; calls],
            batches: Vec::new(),
            extractions: Vec::new(),
            parked: Vec::new(),
            children: Vec::new(),
            runnable: Vec::new(),
        }
    }

    pub fn add(&mut self, index: usize, call: &'c ToolCall, route: Route) {
        match route {
            Route::Answered(reply) => self.answered[index] = Some(reply),
            Route::Batch => self.batches.push((index, call)),
            Route::Extraction => self.extractions.push((index, call)),
            Route::Parked(arguments) => self.parked.push((index, call, arguments)),
            Route::Child(child, arguments) => self.children.push((index, call, child, arguments)),
            Route::Runnable(arguments) => self.runnable.push((index, call, arguments)),
        }
    }
}

/// One reply per call of the turn, and whether the context guard admitted it already.
pub(super) struct TurnReplies {
    replies: Vec<Option<String>>,
    admitted: Vec<bool>,
}

impl TurnReplies {
    /// Starts from the replies given while sorting (not admitted: they are short notices).
    pub fn new(answered: Vec<Option<String>>) -> Self {
        let admitted = vec![false; answered.len()];
        Self {
            replies: answered,
            admitted,
        }
    }

    /// A tool output passed through the guard: kept, or the budget notice in its place.
    pub fn admit(&mut self, context: &mut ContextAccount, index: usize, reply: String) {
        let reply = match context.admit_tool_output(&reply) {
            Ok(()) => reply,
            Err(_) => BUDGET_EXCEEDED_STUB.to_string(),
        };
        self.set_admitted(index, reply);
    }

    /// A reply the guard has already seen.
    pub fn set_admitted(&mut self, index: usize, reply: String) {
        self.replies[index] = Some(reply);
        self.admitted[index] = true;
    }

    /// The replies in call order; `None` for the calls waiting for approval. Replies the guard
    /// has not seen (notices) are added to its count unchecked; a call without a reply is
    /// "not executed".
    pub fn contents(self, run: &mut Run, parked: &[ArgumentedCall<'_>]) -> Vec<Option<String>> {
        let mut contents = Vec::with_capacity(self.replies.len());
        for (index, (reply, admitted)) in self.replies.into_iter().zip(self.admitted).enumerate() {
            if parked.iter().any(|(waiting, _, _)| *waiting == index) {
                contents.push(None);
                continue;
            }
            let content = reply.unwrap_or_else(|| failed("not executed"));
            if !admitted {
                run.context.add_unchecked_tool_reply(&content);
            }
            contents.push(Some(content));
        }
        contents
    }
}

impl ToolRunner<'_> {
    /// The route of one call, in the order the checks apply: the final report (which may end
    /// the run), the final turn, agentd's internal tools, the router (which may end the run),
    /// the per-turn limit, approvals, sub-agents, then any other tool. `requested` counts the
    /// calls against `maxToolCallsPerTurn`.
    pub(super) async fn route(
        &self,
        run: &mut Run,
        turn_call: &TurnCall,
        call: &ToolCall,
        requested: &mut usize,
    ) -> Result<Route, Handled> {
        let reporting = run.facts.report.is_some();
        if call.name == FINAL_REPORT_TOOL && reporting {
            return self.route_final_report(run, turn_call.turn, call).await;
        }
        if turn_call.is_final {
            return Ok(Route::Answered(failed(&format!(
                "{} is not available on the final turn; answer with what you already know",
                call.name
            ))));
        }
        if call.name == TASK_STATUS_TOOL && reporting {
            let reply = record_task_status(
                self.events,
                &run.facts,
                &mut run.plan,
                &mut run.transcript,
                call,
            )
            .await;
            return Ok(Route::Answered(reply));
        }
        if call.name == BATCH_TOOL && reporting {
            return Ok(Route::Batch);
        }
        if let (ROUTER_TOOL, Some(router)) = (call.name.as_str(), self.router) {
            return match call_arguments(call)
                .and_then(|a| router.choose(&a).map_err(|e| failed(&e)))
            {
                Ok(route) => {
                    let note = format!("Handed the conversation to {}.", route.agent);
                    Err(Handled::End(Ending::answer(
                        ExitReason::FinalAnswer,
                        &run.facts.format,
                        Some(note),
                        None,
                        None,
                    )))
                }
                Err(reply) => Ok(Route::Answered(reply)),
            };
        }
        if call.name == TOOL_OUTPUT_TOOL && run.facts.offers_tool_output() {
            return Ok(Route::Extraction);
        }
        *requested += 1;
        if *requested > turn_call.limit {
            return Ok(Route::Answered(failed(&format!(
                "dropped: at most {} tool calls are allowed per turn; call {} again in the next turn if you still need it",
                turn_call.limit, call.name
            ))));
        }
        if let Some(left) = turn_call.budget_left
            && *requested > left
        {
            return Ok(Route::Answered(failed(&format!(
                "not run: the run reached its budget; {} was not called",
                call.name
            ))));
        }
        let arguments = match call_arguments(call) {
            Ok(arguments) => arguments,
            Err(reply) => return Ok(Route::Answered(reply)),
        };
        if run.facts.request.agent.approvals.requires(&call.name) {
            return Ok(if self.may_wait && turn_call.source.is_none() {
                Route::Parked(scope_to_user(&run.facts, arguments))
            } else {
                Route::Answered(NO_APPROVER_REPLY.to_string())
            });
        }
        match self
            .sub_agents
            .and_then(|sub_agents| sub_agents.find(&call.name))
        {
            Some(child) => Ok(Route::Child(child, arguments)),
            None => Ok(Route::Runnable(scope_to_user(&run.facts, arguments))),
        }
    }

    /// The final report: accepted, it ends the run; refused, it makes the next turn the last
    /// and the model is told why.
    async fn route_final_report(
        &self,
        run: &mut Run,
        turn: u32,
        call: &ToolCall,
    ) -> Result<Route, Handled> {
        let outcome = match run.xml.as_ref() {
            None => self.accept_final_report(run, call).await,
            Some(xml) => Err(format!(
                "the final report is not a tool in this session; write it inside the <ai-agent-{}-FINAL> tag",
                xml.state.nonce
            )),
        };
        match outcome {
            Ok(ending) => Err(Handled::End(ending)),
            Err(reason) => {
                run.plan.max_turns = run.plan.max_turns.min(turn + 1);
                Ok(Route::Answered(failed(&reason)))
            }
        }
    }
}
