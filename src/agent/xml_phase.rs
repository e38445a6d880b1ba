//! How a session speaks the XML transports (contract §11): which tools the provider sees, the
//! XML-NEXT message of every attempt, and what happens to a response's tags — the final report
//! in three layers (transport → format → report), tool slots in `xml` mode with their results
//! returned as an XML-PAST user message, and feedback for every tag that could not be used.
//!
//! Owns the transport's state ([`XmlTransport`]); runs tag calls through the tool phase's
//! [`ToolRunner`] and never calls the model.

use tracing::{error, warn};

use super::ending::Ending;
use super::events::{AgentEvent, Progress};
use super::final_report::{FINAL_REPORT_TOOL, arguments_from_xml_payload};
use super::guard_phase::ContextAccount;
use super::run::{Run, RunFacts, TurnPlan};
use super::tool_phase::{Handled, ToolRunner, assistant_message};
use super::xml::next::{NextNotice, render};
use super::xml::scan::{FinalTag, ScanRules, scan, strip_leading_think};
use super::xml::{XmlMode, XmlState};
use crate::llm::{ChatMessage, LlmResponse, StopReason, ToolCall, ToolDefinition};
use crate::vocabulary::result::{AccountingEntry, ExitReason, ToolAccounting};

/// Where an attempt sits in the run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    pub turn: u32,
    pub attempt: u32,
    pub is_final: bool,
}

/// What the model is told when it answered outside the FINAL tag.
const PLAIN_TEXT_FEEDBACK: &str = "plain text outside the FINAL tag is not shown to the user; write your answer inside the FINAL tag";

/// The XML transport of one run: its nonce and slots, and what the model must be told about
/// its previous response.
pub(super) struct XmlTransport {
    pub state: XmlState,
    /// Problems with the previous response, shown in the next XML-NEXT.
    pub feedback: Vec<String>,
}

impl XmlTransport {
    pub fn new(state: XmlState) -> Self {
        Self {
            state,
            feedback: Vec::new(),
        }
    }

    /// The tools sent to the provider: all but the final report (`xml-final`), none (`xml`:
    /// every call goes through tags).
    pub fn provider_tools(&self, tools: &[ToolDefinition]) -> Vec<ToolDefinition> {
        match self.state.mode {
            XmlMode::FinalOnly => tools
                .iter()
                .filter(|t| t.name != FINAL_REPORT_TOOL)
                .cloned()
                .collect(),
            XmlMode::Full => Vec::new(),
        }
    }

    /// The XML-NEXT message of one attempt: where the run stands, the tools and slots, the
    /// final-report format and the feedback on the previous response.
    pub fn next_message(
        &self,
        facts: &RunFacts,
        plan: &TurnPlan,
        context: &ContextAccount,
        step: Step,
        tools: &[ToolDefinition],
        retry_notice: Option<&'static str>,
    ) -> ChatMessage {
        let xml = &self.state;
        let listed: Vec<ToolDefinition> = tools
            .iter()
            .filter(|t| t.name != FINAL_REPORT_TOOL)
            .cloned()
            .collect();
        let mut feedback = self.feedback.clone();
        feedback.extend(retry_notice.map(str::to_string));
        let text = render(&NextNotice {
            turn: step.turn,
            max_turns: plan.max_turns,
            attempt: step.attempt,
            max_attempts: facts.request.agent.limits.max_retries,
            context_percent: context.context_percent(),
            nonce: &xml.nonce,
            mode: xml.mode,
            tools: if step.is_final { &[] } else { &listed },
            first_slot: xml.next_slot,
            slot_count: facts.slot_count(),
            is_final: step.is_final,
            final_slot: facts.report.is_some(),
            format: &facts.format,
            schema: facts.schema(),
            feedback: &feedback,
        });
        ChatMessage::user(text)
    }
}

/// Handles a response in the XML transports; `streamed` says whether its final-tag text already
/// reached the client.
pub(super) async fn handle_xml_response(
    runner: &ToolRunner<'_>,
    run: &mut Run,
    turn: u32,
    is_final: bool,
    response: LlmResponse,
    streamed: bool,
) -> Handled {
    let Some(xml) = run.xml.as_ref().map(|x| x.state.clone()) else {
        return Handled::Retry(None);
    };
    let first = xml.next_slot;
    let rules = ScanRules {
        nonce: &xml.nonce,
        tool_slots: xml.mode == XmlMode::Full,
        slots: first..=first + run.facts.slot_count() - 1,
    };
    let found = scan(&response.text, &rules);
    for problem in &found.problems {
        warn!(run_id = %run.facts.request.run_id, problem = %problem.0, "unusable XML tag");
        push_feedback(run, problem.0.clone());
    }
    for message in found.progress {
        emit_progress(runner, &run.facts, message).await;
    }
    if let Some(tag) = found.final_tag.filter(|_| run.facts.report.is_some()) {
        return match accept_xml_final(runner, run, &tag, response.stop_reason.as_ref()).await {
            Ok(mut ending) => {
                ending.answer_streamed = streamed;
                run.transcript
                    .conversation
                    .push(assistant_message(&response));
                Handled::End(ending)
            }
            Err(reason) => {
                error!(run_id = %run.facts.request.run_id, payload = %tag.payload, %reason, "XML final report rejected");
                push_feedback(run, reason);
                Handled::Retry(None)
            }
        };
    }
    match xml.mode {
        XmlMode::FinalOnly if !response.tool_calls.is_empty() => {
            run.transcript
                .conversation
                .push(assistant_message(&response));
            runner
                .run_native_calls(run, turn, is_final, &response.tool_calls)
                .await
        }
        XmlMode::Full if !found.tool_tags.is_empty() => {
            let calls: Vec<ToolCall> = found
                .tool_tags
                .iter()
                .map(|tag| ToolCall {
                    id: format!("{}-{:04}", xml.nonce, tag.slot),
                    name: tag.tool.clone(),
                    arguments: tag.payload.clone(),
                })
                .collect();
            let last_slot = found
                .tool_tags
                .iter()
                .map(|t| t.slot)
                .max()
                .unwrap_or(first);
            run_tag_calls(runner, run, turn, is_final, &response, calls, last_slot).await
        }
        _ => without_tags(run, is_final, response, found.problems.is_empty()),
    }
}

/// Feedback for the next XML-NEXT (only XML runs get here).
fn push_feedback(run: &mut Run, feedback: String) {
    if let Some(xml) = run.xml.as_mut() {
        xml.feedback.push(feedback);
    }
}

/// A response with neither a usable final tag nor tool calls.
fn without_tags(
    run: &mut Run,
    is_final: bool,
    response: LlmResponse,
    no_problems: bool,
) -> Handled {
    let text = strip_leading_think(&response.text).trim().to_string();
    if text.is_empty() && no_problems {
        // Reasoning only: kept, and the run proceeds.
        run.transcript
            .conversation
            .push(assistant_message(&response));
        return Handled::Next;
    }
    if is_final && !text.is_empty() && no_problems {
        run.transcript
            .conversation
            .push(assistant_message(&response));
        return Handled::End(run.text_answer(ExitReason::TextFallback, text));
    }
    if no_problems {
        push_feedback(run, PLAIN_TEXT_FEEDBACK.to_string());
    }
    Handled::Retry(None)
}

/// `xml` mode: runs the slot calls and answers them in one permanent XML-PAST user message.
async fn run_tag_calls(
    runner: &ToolRunner<'_>,
    run: &mut Run,
    turn: u32,
    is_final: bool,
    response: &LlmResponse,
    calls: Vec<ToolCall>,
    last_slot: u32,
) -> Handled {
    run.transcript
        .conversation
        .push(ChatMessage::assistant(response.text.clone()));
    let replies = match runner
        .execute_calls(run, turn, is_final, &calls, Some("xml"))
        .await
    {
        Ok(replies) => replies,
        Err(handled) => return handled,
    };
    if let Some(xml) = run.xml.as_mut() {
        xml.state.next_slot = last_slot + 1;
    }
    let past: Vec<String> = calls
            .iter()
            .zip(replies)
            .map(|(call, reply)| {
                format!(
                    "System Notice: tool response for {} ({})\n<request>{}</request>\n<response>\n{}\n</response>",
                    call.id, call.name, call.arguments, reply
                )
            })
            .collect();
    run.transcript
        .conversation
        .push(ChatMessage::user(past.join("\n\n")));
    Handled::Next
}

/// The three layers of an XML final report: transport (tag, closing, format attribute),
/// format (json parsed and validated, text raw, sub-agent passed through), report.
async fn accept_xml_final(
    runner: &ToolRunner<'_>,
    run: &mut Run,
    tag: &FinalTag,
    stop: Option<&StopReason>,
) -> Result<Ending, String> {
    let nonce = run
        .xml
        .as_ref()
        .map(|x| x.state.nonce.clone())
        .unwrap_or_default();
    if !tag.closed {
        match stop {
            Some(StopReason::Stop) => {}
            Some(StopReason::Length) => {
                let reason = format!(
                    "your final report was cut off by the output token limit before </ai-agent-{nonce}-FINAL>; write a shorter answer"
                );
                record_xml_final(runner, run, tag, Err(&reason)).await;
                return Err(reason);
            }
            other => {
                warn!(run_id = %run.facts.request.run_id, stop = ?other, "accepting an unclosed final tag")
            }
        }
    }
    if let Some(format) = tag
        .format
        .as_deref()
        .filter(|f| !f.eq_ignore_ascii_case(&run.facts.format))
    {
        warn!(run_id = %run.facts.request.run_id, format, expected = %run.facts.format, "final tag format normalised");
    }
    let outcome = arguments_from_xml_payload(&run.facts.format, &tag.payload).and_then(
        |arguments| match &run.facts.report {
            Some(report) => report.spec.accept(&arguments).map_err(|e| e.to_string()),
            None => Err("no final report is expected in this session".to_string()),
        },
    );
    record_xml_final(
        runner,
        run,
        tag,
        outcome.as_ref().map(|_| ()).map_err(String::as_str),
    )
    .await;
    let report = outcome?;
    for warning in &report.warnings {
        warn!(run_id = %run.facts.request.run_id, %warning, "final report normalised");
    }
    Ok(Ending::answer(
        run.plan.answer_reason(ExitReason::FinalAnswer),
        &report.format,
        report.content,
        report.content_json,
        report.metadata,
    ))
}

async fn record_xml_final(
    runner: &ToolRunner<'_>,
    run: &mut Run,
    tag: &FinalTag,
    outcome: Result<(), &str>,
) {
    let entry = ToolAccounting {
        source: Some("xml".into()),
        ..ToolAccounting::finished(
            "agent",
            "agent__final_report_xml",
            0,
            tag.payload.chars().count(),
            0,
            outcome.err().map(str::to_string),
            run.facts.lineage.clone(),
        )
    };
    run.transcript
        .record(runner.events, AccountingEntry::Tool(entry))
        .await;
}

async fn emit_progress(runner: &ToolRunner<'_>, facts: &RunFacts, message: String) {
    runner
        .events
        .emit(AgentEvent::Progress(Box::new(Progress {
            kind: crate::vocabulary::events::ProgressKind::AgentUpdate,
            agent: facts.request.agent.name.clone(),
            call_path: facts.call_path.clone(),
            message: Some(message),
            done: None,
            pending: None,
            now: None,
            call_id: None,
            joined_run_id: None,
            attachments: Vec::new(),
        })))
        .await;
}
