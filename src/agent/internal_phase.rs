//! The session side of the internal tools: `agent__task_status` becomes a `progress` event (and,
//! when the task is complete, makes the next turn final); `agent__batch` runs its calls in
//! parallel through the normal tool path and answers with one result per call;
//! `agent__tool_output` reads part of an output the run kept as a handle.
//!
//! Each takes the run's pieces it changes explicitly; neither calls the model nor touches the
//! conversation (the tool phase adds their replies).

use std::collections::HashSet;
use std::time::Instant;

use serde_json::{Value, json};

use super::ending::Transcript;
use super::events::EventSink;
use super::events::{AgentEvent, Progress};
use super::internal_tools::{RejectedCall, TASK_STATUS_TOOL, TaskStatus, parse_batch};
use super::output_handles::TOOL_OUTPUT_TOOL;
use super::output_questions::ask_about;
use super::run::{ForcedFinal, RunFacts, TurnPlan};
use super::tool_execution::Executed;
use super::tool_phase::{
    ToolContext, ToolRunner, agent_tool_entry, call_arguments, failed, scope_to_user,
};
use crate::llm::ToolCall;
use crate::vocabulary::result::{AccountingEntry, EntryStatus};

/// `agent__tool_output`: reads part of an output the run kept as a handle.
pub(super) async fn read_tool_output(
    runner: &ToolRunner<'_>,
    facts: &RunFacts,
    transcript: &mut Transcript,
    call: &ToolCall,
) -> String {
    let started = Instant::now();
    let read = match call_arguments(call) {
        Ok(arguments) if arguments.get("mode").and_then(Value::as_str) == Some("ask") => {
            ask_tool_output(runner, facts, transcript, &arguments)
                .await
                .map_err(|e| failed(&e))
        }
        Ok(arguments) => facts
            .output_handles
            .extract(&arguments)
            .map_err(|e| failed(&e)),
        Err(reply) => Err(reply),
    };
    let (reply, error) = match read {
        Ok(text) => (text, None),
        Err(reply) => (reply.clone(), Some(reply)),
    };
    let entry = agent_tool_entry(
        TOOL_OUTPUT_TOOL,
        call,
        started,
        &reply,
        error,
        facts.lineage.clone(),
    );
    transcript.record(runner.events, entry).await;
    reply
}

/// `ask` mode: child sessions answer the question about the kept output (their accounting is
/// rolled into the run's).
async fn ask_tool_output(
    runner: &ToolRunner<'_>,
    facts: &RunFacts,
    transcript: &mut Transcript,
    arguments: &serde_json::Map<String, Value>,
) -> Result<String, String> {
    let question = arguments
        .get("question")
        .and_then(Value::as_str)
        .filter(|q| !q.trim().is_empty())
        .ok_or("mode ask needs a `question`")?;
    let text = facts.output_handles.text(arguments)?;
    let child_runner = runner
        .child_runner
        .ok_or("mode ask is not available in this session")?;
    let answered = ask_about(child_runner, runner.control, facts, &text, question).await;
    transcript.accounting.extend(answered.accounting);
    answered.reply
}

/// `agent__task_status`: reports progress; `completed` forces the final turn.
pub(super) async fn record_task_status(
    events: &EventSink,
    facts: &RunFacts,
    plan: &mut TurnPlan,
    transcript: &mut Transcript,
    call: &ToolCall,
) -> String {
    let started = Instant::now();
    let parsed = call_arguments(call)
        .and_then(|arguments| TaskStatus::parse(&arguments).map_err(|e| failed(&e)));
    let (reply, error) = match parsed {
        Ok(status) => {
            events
                .emit(AgentEvent::Progress(Box::new(Progress {
                    kind: crate::vocabulary::events::ProgressKind::TaskStatus,
                    agent: facts.request.agent.name.clone(),
                    call_path: facts.call_path.clone(),
                    message: status.now.clone(),
                    done: status.done.clone(),
                    pending: status.pending.clone(),
                    now: status.now.clone(),
                    call_id: None,
                    joined_run_id: None,
                    attachments: Vec::new(),
                })))
                .await;
            if status.completes_the_task() {
                plan.force_final(ForcedFinal::TaskCompleted);
            }
            (status.reply(), None)
        }
        Err(reply) => (reply.clone(), Some(reply)),
    };
    let entry = agent_tool_entry(
        TASK_STATUS_TOOL,
        call,
        started,
        &reply,
        error,
        facts.lineage.clone(),
    );
    transcript.record(events, entry).await;
    reply
}

/// `agent__batch`: runs up to `remaining` calls in parallel; returns the reply and how many
/// calls counted toward `maxToolCallsPerTurn`.
pub(super) async fn run_batch(
    runner: &ToolRunner<'_>,
    facts: &RunFacts,
    transcript: &mut Transcript,
    call: &ToolCall,
    context: &ToolContext,
    remaining: usize,
) -> (String, usize) {
    let parsed = match call_arguments(call)
        .and_then(|arguments| parse_batch(&arguments).map_err(|e| failed(&e)))
    {
        Ok(parsed) => parsed,
        Err(reply) => return (reply, 0),
    };
    let known: HashSet<String> = runner
        .registry
        .definitions()
        .await
        .into_iter()
        .map(|t| t.name)
        .collect();
    let mut results: Vec<Value> = Vec::with_capacity(parsed.len());
    let mut runnable = Vec::new();
    for (index, item) in parsed.into_iter().enumerate() {
        let item = item.and_then(|c| {
            let error = if !known.contains(&c.tool) {
                format!("UNKNOWN_TOOL: no tool named {}", c.tool)
            } else if facts.request.agent.approvals.requires(&c.tool) {
                // A batch cannot wait for a person: the call must be made on its own.
                format!(
                    "NEEDS_APPROVAL: {} waits for a person's approval; call it directly, not inside a batch",
                    c.tool
                )
            } else if runnable.len() >= remaining {
                "LIMIT: more calls than this turn allows; repeat it next turn".to_string()
            } else {
                return Ok(c);
            };
            Err(RejectedCall {
                id: c.id,
                tool: c.tool,
                error,
            })
        });
        match item {
            Ok(c) => {
                let inner = ToolCall {
                    id: format!("{}#{}", call.id, id_text(&c.id)),
                    name: c.tool.clone(),
                    arguments: String::new(),
                };
                results.push(json!({"id": c.id, "tool": c.tool}));
                runnable.push((index, inner, scope_to_user(facts, c.parameters)));
            }
            Err(RejectedCall { id, tool, error }) => {
                results.push(json!({"id": id, "tool": tool, "ok": false, "error": error}))
            }
        }
    }
    let used = runnable.len();
    let executions = runnable.iter().map(|(index, inner, arguments)| {
        runner.execute_tool(*index, inner, arguments.clone(), context)
    });
    let executed: Vec<Executed> = futures_util::future::join_all(executions).await;
    for Executed {
        index,
        message,
        entry,
        failed_tries,
        ..
    } in executed
    {
        for failed_try in failed_tries {
            transcript.record(runner.events, failed_try).await;
        }
        let ok = matches!(&entry, AccountingEntry::Tool(t) if t.status == EntryStatus::Ok);
        if let Some(Value::Object(result)) = results.get_mut(index) {
            result.insert("ok".into(), json!(ok));
            result.insert(
                if ok { "output".into() } else { "error".into() },
                json!(message),
            );
        }
        transcript.record(runner.events, entry).await;
    }
    (json!({ "results": results }).to_string(), used)
}

fn id_text(id: &Value) -> String {
    id.as_str().map_or_else(|| id.to_string(), str::to_string)
}
