//! How a session speaks the XML transports (contract §11): which tools the provider sees, the
//! XML-NEXT message of every attempt, and what happens to a response's tags — the final report
//! in three layers (transport → format → report), tool slots in `xml` mode with their results
//! returned as an XML-PAST user message, and feedback for every tag that could not be used.

use tracing::{error, warn};

use super::ending::Ending;
use super::events::{AgentEvent, Progress};
use super::final_report::{FINAL_REPORT_TOOL, arguments_from_xml_payload};
use super::result::{AccountingEntry, ExitReason, ToolAccounting};
use super::session::{Run, Session, ephemeral_messages};
use super::tool_phase::{Handled, assistant_message};
use super::xml::XmlMode;
use super::xml::next::{NextNotice, render};
use super::xml::scan::{FinalTag, ScanRules, scan, strip_leading_think};
use crate::llm::{ChatMessage, LlmResponse, StopReason, ToolCall, ToolDefinition};

/// Where an attempt sits in the run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    pub turn: u32,
    pub attempt: u32,
    pub is_final: bool,
}

/// What the model is told when it answered outside the FINAL tag.
const PLAIN_TEXT_FEEDBACK: &str = "plain text outside the FINAL tag is not shown to the user; write your answer inside the FINAL tag";

/// The tools sent to the provider: all of them (native), all but the final report
/// (`xml-final`), none (`xml`: every call goes through tags).
pub(super) fn provider_tools(run: &Run, tools: &[ToolDefinition]) -> Vec<ToolDefinition> {
    match run.xml.as_ref().map(|x| x.mode) {
        None => tools.to_vec(),
        Some(XmlMode::FinalOnly) => tools
            .iter()
            .filter(|t| t.name != FINAL_REPORT_TOOL)
            .cloned()
            .collect(),
        Some(XmlMode::Full) => Vec::new(),
    }
}

impl Session {
    /// The messages added to one attempt only: XML-NEXT in the XML transports, else the
    /// retry and final-turn notices.
    pub(super) fn attempt_messages(
        &self,
        run: &Run,
        step: Step,
        tools: &[ToolDefinition],
        retry_notice: Option<&'static str>,
    ) -> Vec<ChatMessage> {
        let Some(xml) = run.xml.as_ref() else {
            return ephemeral_messages(run, retry_notice, step.is_final);
        };
        let listed: Vec<ToolDefinition> = tools
            .iter()
            .filter(|t| t.name != FINAL_REPORT_TOOL)
            .cloned()
            .collect();
        let mut feedback = run.xml_feedback.clone();
        feedback.extend(retry_notice.map(str::to_string));
        let text = render(&NextNotice {
            turn: step.turn,
            max_turns: run.max_turns,
            attempt: step.attempt,
            max_attempts: run.request.agent.limits.max_retries,
            context_percent: self.context_percent(run),
            nonce: &xml.nonce,
            mode: xml.mode,
            tools: if step.is_final { &[] } else { &listed },
            first_slot: xml.next_slot,
            slot_count: slot_count(run),
            is_final: step.is_final,
            final_slot: run.report.is_some(),
            format: &run.format,
            schema: run
                .request
                .schema
                .as_ref()
                .or(run.request.agent.output_schema.as_ref()),
            feedback: &feedback,
        });
        vec![ChatMessage::user(text)]
    }

    fn context_percent(&self, run: &Run) -> u64 {
        let window = run.request.agent.targets.first().map_or(1, |target| {
            self.budget_for(run, target).context_window.max(1)
        });
        (run.guard.current() + run.guard.pending() + run.guard.schema()) * 100 / window
    }

    /// Handles a response in the XML transports.
    pub(super) async fn handle_xml_response(
        &self,
        run: &mut Run,
        turn: u32,
        is_final: bool,
        response: LlmResponse,
    ) -> Handled {
        let Some(xml) = run.xml.clone() else {
            return Handled::Retry(None);
        };
        let first = xml.next_slot;
        let rules = ScanRules {
            nonce: &xml.nonce,
            tool_slots: xml.mode == XmlMode::Full,
            slots: first..=first + slot_count(run) - 1,
        };
        let found = scan(&response.text, &rules);
        for problem in &found.problems {
            warn!(run_id = %run.request.run_id, problem = %problem.0, "unusable XML tag");
            run.xml_feedback.push(problem.0.clone());
        }
        for message in found.progress {
            self.emit_progress(run, message).await;
        }
        if let Some(tag) = found.final_tag.filter(|_| run.report.is_some()) {
            return match self
                .accept_xml_final(run, &tag, response.stop_reason.as_ref())
                .await
            {
                Ok(ending) => {
                    run.transcript
                        .conversation
                        .push(assistant_message(&response));
                    Handled::End(ending)
                }
                Err(reason) => {
                    error!(run_id = %run.request.run_id, payload = %tag.payload, %reason, "XML final report rejected");
                    run.xml_feedback.push(reason);
                    Handled::Retry(None)
                }
            };
        }
        match xml.mode {
            XmlMode::FinalOnly if !response.tool_calls.is_empty() => {
                run.transcript
                    .conversation
                    .push(assistant_message(&response));
                self.run_native_calls(run, turn, is_final, &response.tool_calls)
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
                self.run_tag_calls(run, turn, is_final, &response, calls, last_slot)
                    .await
            }
            _ => self.without_tags(run, is_final, response, found.problems.is_empty()),
        }
    }

    /// A response with neither a usable final tag nor tool calls.
    fn without_tags(
        &self,
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
            return Handled::End(Ending::answer(
                run.answer_reason(ExitReason::TextFallback),
                &run.format,
                Some(text),
                None,
                None,
            ));
        }
        if no_problems {
            run.xml_feedback.push(PLAIN_TEXT_FEEDBACK.to_string());
        }
        Handled::Retry(None)
    }

    /// `xml` mode: runs the slot calls and answers them in one permanent XML-PAST user message.
    async fn run_tag_calls(
        &self,
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
        let replies = match self
            .execute_calls(run, turn, is_final, &calls, Some("xml"))
            .await
        {
            Ok(replies) => replies,
            Err(handled) => return handled,
        };
        if let Some(xml) = run.xml.as_mut() {
            xml.next_slot = last_slot + 1;
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
        &self,
        run: &mut Run,
        tag: &FinalTag,
        stop: Option<&StopReason>,
    ) -> Result<Ending, String> {
        let nonce = run
            .xml
            .as_ref()
            .map(|x| x.nonce.clone())
            .unwrap_or_default();
        if !tag.closed {
            match stop {
                Some(StopReason::Stop) => {}
                Some(StopReason::Length) => {
                    let reason = format!(
                        "your final report was cut off by the output token limit before </ai-agent-{nonce}-FINAL>; write a shorter answer"
                    );
                    self.record_xml_final(run, tag, Err(&reason)).await;
                    return Err(reason);
                }
                other => {
                    warn!(run_id = %run.request.run_id, stop = ?other, "accepting an unclosed final tag")
                }
            }
        }
        if let Some(format) = tag
            .format
            .as_deref()
            .filter(|f| !f.eq_ignore_ascii_case(&run.format))
        {
            warn!(run_id = %run.request.run_id, format, expected = %run.format, "final tag format normalised");
        }
        let outcome =
            arguments_from_xml_payload(&run.format, &tag.payload).and_then(|arguments| match &run
                .report
            {
                Some((spec, _)) => spec.accept(&arguments).map_err(|e| e.to_string()),
                None => Err("no final report is expected in this session".to_string()),
            });
        self.record_xml_final(
            run,
            tag,
            outcome.as_ref().map(|_| ()).map_err(String::as_str),
        )
        .await;
        let report = outcome?;
        for warning in &report.warnings {
            warn!(run_id = %run.request.run_id, %warning, "final report normalised");
        }
        run.answer_streamed = run.streamed_this_attempt;
        Ok(Ending::answer(
            run.answer_reason(ExitReason::FinalAnswer),
            &report.format,
            report.content,
            report.content_json,
            report.metadata,
        ))
    }

    async fn record_xml_final(&self, run: &mut Run, tag: &FinalTag, outcome: Result<(), &str>) {
        let entry = ToolAccounting {
            source: Some("xml".into()),
            ..ToolAccounting::finished(
                "agent",
                "agent__final_report_xml",
                0,
                tag.payload.chars().count(),
                0,
                outcome.err().map(str::to_string),
                run.lineage(),
            )
        };
        self.record_accounting(run, AccountingEntry::Tool(entry))
            .await;
    }

    async fn emit_progress(&self, run: &Run, message: String) {
        self.events
            .emit(AgentEvent::Progress(Box::new(Progress {
                kind: "agent_update".into(),
                agent: run.request.agent.name.clone(),
                call_path: run.call_path(),
                message: Some(message),
                done: None,
                pending: None,
                now: None,
            })))
            .await;
    }
}

/// Slots advertised per turn: one per allowed tool call.
fn slot_count(run: &Run) -> u32 {
    run.request.agent.limits.max_tool_calls_per_turn.max(1)
}
