//! Anthropic's translator: a run's events as the Messages stream — `message_start`, one
//! `content_block_start/delta/stop` run per thinking or text block (one block open at a time),
//! the client tools the model called as `tool_use` blocks, then `message_delta` with the stop
//! reason and usage and `message_stop`; a failed run ends with Anthropic's `error` event.

use serde_json::json;

use super::AnthropicError;
use super::wire::{
    BlockDelta, ContentBlock, Message, MessageDelta, MessageType, MessageUsage, StopReason,
    StreamEvent,
};
use crate::agent::{AgentEvent, ExitReason, ReportStatus};
use crate::http::error::ApiError;
use crate::http::shared::drive::{Frame, StreamEnd, Translator};
use crate::http::wire::AssistantRole;
use crate::vocabulary::RunEvent;
use crate::vocabulary::result::RunSummary;

/// What names the message: its id and the model the client asked for.
pub struct Reply {
    pub id: String,
    pub model: String,
}

/// The block being streamed: Anthropic allows one open block at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Thinking,
    Text,
}

/// `end_turn` for an answer, `max_tokens` for a synthetic failure report (turns or context
/// exhausted), `tool_use` when client tools were called; `None` for a failed run.
pub fn stop_reason(summary: &RunSummary) -> Option<StopReason> {
    match summary.exit_reason {
        ExitReason::ClientToolCalls => Some(StopReason::ToolUse),
        ExitReason::MaxTurns | ExitReason::ContextLimit => Some(StopReason::MaxTokens),
        _ if summary.success => Some(StopReason::EndTurn),
        _ => None,
    }
}

/// One streamed event, serialised straight from its borrowed fields: a streamed token costs one
/// string for its frame, not a JSON tree built and dropped.
fn frame(event: &StreamEvent<'_>) -> Frame {
    // Borrowed strings and numbers only: serialisation cannot fail.
    Frame::named(
        event.name(),
        serde_json::to_string(event).unwrap_or_default(),
    )
}

/// Anthropic's streamed `error` event.
pub fn error_frame(error: &AnthropicError) -> Frame {
    // Borrowed strings only: serialisation cannot fail.
    Frame::named(
        "error",
        serde_json::to_string(&error.body()).unwrap_or_default(),
    )
}

/// The translator of one message.
pub struct MessagesTranslator {
    reply: Reply,
    open: Option<(Block, usize)>,
    next_index: usize,
    failure_report: Option<String>,
    wrote_text: bool,
    finished: bool,
}

impl MessagesTranslator {
    pub fn new(reply: Reply) -> Self {
        Self {
            reply,
            open: None,
            next_index: 0,
            failure_report: None,
            wrote_text: false,
            finished: false,
        }
    }

    /// Closes the open block if it is of another kind and opens `wanted`.
    fn switch_block(&mut self, wanted: Block, out: &mut Vec<Frame>) -> usize {
        if let Some((block, index)) = self.open
            && block == wanted
        {
            return index;
        }
        if let Some((_, index)) = self.open.take() {
            out.push(frame(&StreamEvent::ContentBlockStop { index }));
        }
        let index = self.next_index;
        self.next_index += 1;
        let content_block = match wanted {
            Block::Thinking => ContentBlock::Thinking { thinking: "" },
            Block::Text => ContentBlock::Text { text: "" },
        };
        out.push(frame(&StreamEvent::ContentBlockStart {
            index,
            content_block,
        }));
        self.open = Some((wanted, index));
        index
    }

    /// A `content_block_delta` event (one per streamed token), in a block of its kind.
    fn delta(&mut self, block: Block, text: &str, out: &mut Vec<Frame>) {
        let index = self.switch_block(block, out);
        self.wrote_text |= block == Block::Text;
        let delta = match block {
            Block::Thinking => BlockDelta::ThinkingDelta { thinking: text },
            Block::Text => BlockDelta::TextDelta { text },
        };
        out.push(frame(&StreamEvent::ContentBlockDelta { index, delta }));
    }

    fn run_finished(&mut self, summary: &RunSummary, out: &mut Vec<Frame>) {
        self.finished = true;
        if let (Some(text), false) = (self.failure_report.take(), self.wrote_text) {
            self.delta(Block::Text, &text, out);
        }
        if let Some((_, index)) = self.open.take() {
            out.push(frame(&StreamEvent::ContentBlockStop { index }));
        }
        for call in &summary.client_tool_calls {
            let index = self.next_index;
            self.next_index += 1;
            out.push(frame(&StreamEvent::ContentBlockStart {
                index,
                content_block: ContentBlock::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: json!({}),
                },
            }));
            out.push(frame(&StreamEvent::ContentBlockDelta {
                index,
                delta: BlockDelta::InputJsonDelta {
                    partial_json: &call.arguments,
                },
            }));
            out.push(frame(&StreamEvent::ContentBlockStop { index }));
        }
        match stop_reason(summary) {
            Some(reason) => {
                out.push(frame(&StreamEvent::MessageDelta {
                    delta: MessageDelta {
                        stop_reason: reason,
                        stop_sequence: None,
                    },
                    usage: (&summary.usage).into(),
                }));
                out.push(frame(&StreamEvent::MessageStop));
            }
            None => out.push(error_frame(&AnthropicError(ApiError::from_run(summary)))),
        }
    }
}

impl Translator for MessagesTranslator {
    fn open(&mut self, out: &mut Vec<Frame>) {
        out.push(frame(&StreamEvent::MessageStart {
            message: Message {
                id: &self.reply.id,
                kind: MessageType::Message,
                role: AssistantRole::Assistant,
                model: &self.reply.model,
                content: Vec::new(),
                stop_reason: None,
                stop_sequence: None,
                usage: MessageUsage::NOT_YET_KNOWN,
            },
        }));
    }

    fn event(&mut self, event: &RunEvent, out: &mut Vec<Frame>) {
        match &event.event {
            AgentEvent::Thinking(delta) => self.delta(Block::Thinking, &delta.text, out),
            AgentEvent::Output(delta) => self.delta(Block::Text, &delta.appended_text(), out),
            AgentEvent::FinalReport(report) if report.status == ReportStatus::Failure => {
                self.failure_report.clone_from(&report.content);
            }
            AgentEvent::RunFinished(summary) => self.run_finished(summary, out),
            _ => {}
        }
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    /// The session ended without a final event.
    fn end(&mut self, _end: StreamEnd, out: &mut Vec<Frame>) {
        self.finished = true;
        out.push(error_frame(&AnthropicError(ApiError::internal())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::shared::goldens;

    #[test]
    fn every_stored_run_streams_as_golden_anthropic_events() {
        goldens::each("anthropic", || {
            MessagesTranslator::new(Reply {
                id: "msg_r".into(),
                model: "helper".into(),
            })
        });
    }
}
