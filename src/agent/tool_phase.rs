//! What happens after the model answers: text becomes the answer (or is retried), tool calls are
//! checked (final report, final-turn restriction, `maxToolCallsPerTurn`, argument repair) and the
//! valid ones run concurrently under `toolTimeout`, each in its own task so a panic is contained.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tracing::{error, warn};

use super::ending::Ending;
use super::events::{AgentEvent, ToolFinished, ToolStarted};
use super::final_report::FINAL_REPORT_TOOL;
use super::result::{AccountingEntry, EntryStatus, ExitReason, ToolAccounting};
use super::session::{EMPTY_RESPONSE_NOTICE, Run, Session};
use super::tool_args::{ParsedArguments, parse_tool_arguments};
use crate::config::agent_file::Finalization;
use crate::llm::{ChatMessage, LlmResponse, Role, ToolCall};
use crate::tools::ToolOutcome;

/// What the turn loop does next.
pub(super) enum Handled {
    Next,
    End(Ending),
    /// Retry this turn with the given ephemeral notice; nothing was added to the conversation.
    Retry(&'static str),
}

/// `charactersOut` the contract fixes for an accepted final report.
const FINAL_REPORT_CHARS_OUT: usize = 12;

/// Per-run facts the concurrent tool executions need.
struct ToolContext {
    timeout: Duration,
    agent: String,
    run_id: String,
}

/// The result of one executed tool call.
struct Executed {
    index: usize,
    message: String,
    entry: AccountingEntry,
}

impl Session {
    pub(super) async fn handle_response(
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
            return match run.request.agent.finalization {
                Finalization::Text => {
                    run.transcript
                        .conversation
                        .push(assistant_message(&response));
                    Handled::End(Ending::answer(
                        run.answer_reason(ExitReason::FinalAnswer),
                        &run.format,
                        Some(response.text),
                        None,
                        None,
                    ))
                }
                Finalization::Report if is_final => {
                    run.transcript
                        .conversation
                        .push(assistant_message(&response));
                    Handled::End(Ending::answer(
                        run.answer_reason(ExitReason::TextFallback),
                        &run.format,
                        Some(response.text),
                        None,
                        None,
                    ))
                }
                Finalization::Report => Handled::Retry(EMPTY_RESPONSE_NOTICE),
            };
        }
        run.transcript
            .conversation
            .push(assistant_message(&response));
        self.run_tool_calls(run, turn, is_final, &response.tool_calls)
            .await
    }

    async fn run_tool_calls(
        &self,
        run: &mut Run,
        turn: u32,
        is_final: bool,
        calls: &[ToolCall],
    ) -> Handled {
        let limit = run.request.agent.limits.max_tool_calls_per_turn as usize;
        let mut replies: Vec<Option<String>> = vec![None; calls.len()];
        let mut runnable: Vec<(usize, &ToolCall, Map<String, Value>)> = Vec::new();
        let mut requested = 0usize;
        for (index, call) in calls.iter().enumerate() {
            if call.name == FINAL_REPORT_TOOL && run.report.is_some() {
                match self.accept_final_report(run, call).await {
                    Ok(ending) => return Handled::End(ending),
                    Err(reason) => {
                        // A failing final report collapses the remaining turns: the next is the last.
                        run.max_turns = run.max_turns.min(turn + 1);
                        replies[index] = Some(failed(&reason));
                    }
                }
                continue;
            }
            if is_final {
                replies[index] = Some(failed(&format!(
                    "{} is not available on the final turn; answer with what you already know",
                    call.name
                )));
                continue;
            }
            requested += 1;
            if requested > limit {
                replies[index] = Some(failed(&format!(
                    "dropped: at most {limit} tool calls are allowed per turn; call {} again in the next turn if you still need it",
                    call.name
                )));
                continue;
            }
            match parse_tool_arguments(&call.arguments) {
                Ok(ParsedArguments::Clean(arguments)) => runnable.push((index, call, arguments)),
                Ok(ParsedArguments::Repaired {
                    arguments,
                    repaired,
                    steps,
                }) => {
                    warn!(tool = %call.name, original = %call.arguments, %repaired, steps = ?steps, "tool arguments repaired");
                    runnable.push((index, call, arguments));
                }
                Err(reason) => {
                    error!(tool = %call.name, payload = %call.arguments, %reason, "tool arguments unparseable; call dropped");
                    replies[index] = Some(failed(&format!(
                        "the arguments of {} are not a valid JSON object ({reason}); call it again with valid JSON",
                        call.name
                    )));
                }
            }
        }
        let context = ToolContext {
            timeout: run.request.agent.limits.tool_timeout,
            agent: run.request.agent.name.clone(),
            run_id: run.request.run_id.clone(),
        };
        let executions = runnable
            .into_iter()
            .map(|(index, call, arguments)| self.execute_tool(index, call, arguments, &context));
        let executed = tokio::select! {
            biased;
            _ = self.control.abort.cancelled() => return Handled::End(Ending::failure(ExitReason::Cancelled, "the run was cancelled")),
            executed = futures_util::future::join_all(executions) => executed,
        };
        for Executed {
            index,
            message,
            entry,
        } in executed
        {
            replies[index] = Some(message);
            run.transcript.accounting.push(entry);
        }
        for (call, reply) in calls.iter().zip(replies) {
            run.transcript.conversation.push(ChatMessage {
                role: Role::Tool,
                content: Some(reply.unwrap_or_else(|| failed("not executed"))),
                tool_calls: Vec::new(),
                tool_call_id: Some(call.id.clone()),
                reasoning: None,
                reasoning_signature: None,
            });
        }
        if self.control.abort.is_cancelled() {
            return Handled::End(Ending::failure(
                ExitReason::Cancelled,
                "the run was cancelled",
            ));
        }
        Handled::Next
    }

    /// Validates a final-report call; `Err` carries the reason the model will be told.
    async fn accept_final_report(&self, run: &mut Run, call: &ToolCall) -> Result<Ending, String> {
        let outcome = match (parse_tool_arguments(&call.arguments), &run.report) {
            (Ok(parsed), Some((spec, _))) => {
                let arguments = match parsed {
                    ParsedArguments::Clean(a) | ParsedArguments::Repaired { arguments: a, .. } => a,
                };
                spec.accept(&arguments).map_err(|e| e.to_string())
            }
            (Err(e), _) => Err(format!("the arguments are not a valid JSON object ({e})")),
            (Ok(_), None) => Err("no final report is expected".into()),
        };
        let entry = AccountingEntry::Tool(ToolAccounting {
            timestamp: chrono::Utc::now().timestamp_millis(),
            status: if outcome.is_ok() {
                EntryStatus::Ok
            } else {
                EntryStatus::Failed
            },
            latency: 0,
            mcp_server: "agent".into(),
            command: FINAL_REPORT_TOOL.into(),
            characters_in: call.arguments.len(),
            characters_out: if outcome.is_ok() {
                FINAL_REPORT_CHARS_OUT
            } else {
                0
            },
            error: outcome.as_ref().err().cloned(),
            details: None,
            agent_id: Some(run.request.agent.name.clone()),
            txn_id: Some(run.request.run_id.clone()),
        });
        run.transcript.accounting.push(entry.clone());
        self.events.emit(AgentEvent::Accounting(entry)).await;
        match outcome {
            Ok(report) => {
                for warning in &report.warnings {
                    warn!(run_id = %run.request.run_id, %warning, "final report normalised");
                }
                let reason = run.answer_reason(ExitReason::FinalAnswer);
                Ok(Ending::answer(
                    reason,
                    &report.format,
                    report.content,
                    report.content_json,
                    report.metadata,
                ))
            }
            Err(reason) => {
                error!(run_id = %run.request.run_id, payload = %call.arguments, %reason, "final report rejected");
                Err(reason)
            }
        }
    }

    /// Runs one tool in its own task, bounded by the tool timeout; emits its events.
    async fn execute_tool(
        &self,
        index: usize,
        call: &ToolCall,
        arguments: Map<String, Value>,
        context: &ToolContext,
    ) -> Executed {
        let server = call
            .name
            .split_once("__")
            .map_or("unknown", |(namespace, _)| namespace)
            .to_string();
        let arguments = Value::Object(arguments);
        let chars_in = arguments.to_string().chars().count();
        self.events
            .emit(AgentEvent::ToolStarted(ToolStarted {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                server: server.clone(),
                arguments: arguments.clone(),
            }))
            .await;
        let started = Instant::now();
        let registry = self.tools.clone();
        let name = call.name.clone();
        let timeout = context.timeout;
        let task = tokio::spawn(async move { registry.call(&name, arguments, timeout).await });
        let abort_task = task.abort_handle();
        let outcome = match tokio::time::timeout(timeout, task).await {
            Err(_) => {
                abort_task.abort();
                ToolOutcome::Failed("timeout".into())
            }
            Ok(Err(join)) if join.is_panic() => {
                error!(tool = %call.name, "tool panicked");
                ToolOutcome::Failed("the tool crashed".into())
            }
            Ok(Err(_)) => ToolOutcome::Failed("the tool was cancelled".into()),
            Ok(Ok(outcome)) => outcome,
        };
        let latency_ms = started.elapsed().as_millis() as u64;
        let (message, error) = match outcome {
            ToolOutcome::Ok(text) => (text, None),
            ToolOutcome::Failed(reason) => (failed(&reason), Some(reason)),
        };
        let chars_out = message.chars().count();
        let status = if error.is_some() { "failed" } else { "ok" };
        self.events
            .emit(AgentEvent::ToolFinished(ToolFinished {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                server: server.clone(),
                status: status.into(),
                latency_ms,
                chars_in,
                chars_out,
                error: error.clone(),
            }))
            .await;
        let entry = AccountingEntry::Tool(ToolAccounting {
            timestamp: chrono::Utc::now().timestamp_millis(),
            status: if error.is_some() {
                EntryStatus::Failed
            } else {
                EntryStatus::Ok
            },
            latency: latency_ms,
            mcp_server: server,
            command: call.name.clone(),
            characters_in: chars_in,
            characters_out: chars_out,
            error,
            details: None,
            agent_id: Some(context.agent.clone()),
            txn_id: Some(context.run_id.clone()),
        });
        self.events
            .emit(AgentEvent::Accounting(entry.clone()))
            .await;
        Executed {
            index,
            message,
            entry,
        }
    }
}

fn failed(reason: &str) -> String {
    format!("(tool failed: {reason})")
}

fn assistant_message(response: &LlmResponse) -> ChatMessage {
    ChatMessage {
        role: Role::Assistant,
        content: Some(response.text.clone()).filter(|t| !t.is_empty()),
        tool_calls: response.tool_calls.clone(),
        tool_call_id: None,
        reasoning: Some(response.reasoning.clone()).filter(|r| !r.is_empty()),
        reasoning_signature: response.reasoning_signature.clone(),
    }
}
