//! Decoding Messages API responses into deltas: the streamed events (`message_start`,
//! `content_block_start/delta/stop` with `text_delta`, `thinking_delta`, `signature_delta` and
//! `input_json_delta`, `redacted_thinking` blocks, `message_delta`, `message_stop`, `ping`, `error`) and the whole-body form.
//!
//! Usage is normalised: Anthropic's `input_tokens` excludes cache reads and writes, ours counts
//! the whole prompt (see [`Usage`]).

use std::collections::VecDeque;

use serde_json::Value;

use crate::llm::failure::{classify_error_body, parse_whole_body, truncate};
use crate::llm::stream::{Flow, Frame, FrameDecoder, frame_json};
use crate::llm::{LlmDelta, LlmError, StopReason, Usage};

/// What a content block is, as far as decoding cares.
#[derive(Debug)]
enum Block {
    Text,
    Thinking {
        signature: String,
    },
    ToolUse {
        ordinal: usize,
        got_input: bool,
        initial_input: String,
    },
    Other,
}

#[derive(Default)]
pub struct EventDecoder {
    /// Content blocks by their stream index.
    blocks: Vec<(u64, Block)>,
    tool_calls: usize,
    usage: Usage,
    stop_seen: bool,
}

impl FrameDecoder for EventDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut VecDeque<LlmDelta>) -> Result<Flow, LlmError> {
        let event: Value = frame_json(&frame.data)?;
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .or(frame.event.as_deref())
            .unwrap_or_default();
        match kind {
            "message_start" => {
                if let Some(usage) = event.pointer("/message/usage") {
                    self.merge_usage(usage);
                }
            }
            "content_block_start" => self.start_block(&event, out),
            "content_block_delta" => self.block_delta(&event, out)?,
            "content_block_stop" => self.stop_block(&event, out),
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_seen = true;
                    out.push_back(LlmDelta::Stop(StopReason::from_openai(reason)));
                }
                if let Some(usage) = event.get("usage") {
                    self.merge_usage(usage);
                }
                out.push_back(LlmDelta::Usage(self.usage));
            }
            "message_stop" => return Ok(Flow::Done),
            "error" => {
                return Err(classify_error_body(&event).unwrap_or_else(|| {
                    LlmError::Model(format!("error event: {}", truncate(&frame.data, 300)))
                }));
            }
            // `ping` and event types added after this was written.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn is_complete(&self) -> bool {
        self.stop_seen
    }
}

impl EventDecoder {
    fn block_mut(&mut self, index: u64) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
    }

    fn start_block(&mut self, event: &Value, out: &mut VecDeque<LlmDelta>) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let block = event.get("content_block").unwrap_or(&Value::Null);
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        let decoded = match text("type") {
            "text" => {
                push_text(out, LlmDelta::Text, text("text"));
                Block::Text
            }
            "thinking" => {
                push_text(out, LlmDelta::Reasoning, text("thinking"));
                Block::Thinking {
                    signature: text("signature").to_string(),
                }
            }
            "redacted_thinking" => {
                let data = text("data");
                if !data.is_empty() {
                    out.push_back(LlmDelta::RedactedReasoning(data.to_string()));
                }
                Block::Other
            }
            "tool_use" => {
                let ordinal = self.tool_calls;
                self.tool_calls += 1;
                out.push_back(LlmDelta::ToolCallFragment {
                    index: ordinal,
                    id: Some(text("id").to_string()).filter(|s| !s.is_empty()),
                    name: Some(text("name").to_string()).filter(|s| !s.is_empty()),
                    arguments: String::new(),
                });
                let initial_input = match block.get("input") {
                    Some(Value::Object(map)) if !map.is_empty() => {
                        Value::Object(map.clone()).to_string()
                    }
                    _ => "{}".to_string(),
                };
                Block::ToolUse {
                    ordinal,
                    got_input: false,
                    initial_input,
                }
            }
            _ => Block::Other,
        };
        self.blocks.push((index, decoded));
    }

    fn block_delta(&mut self, event: &Value, out: &mut VecDeque<LlmDelta>) -> Result<(), LlmError> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let delta = event.get("delta").unwrap_or(&Value::Null);
        let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        let kind = text("type");
        let Some(block) = self.block_mut(index) else {
            return Err(LlmError::InvalidResponse(format!(
                "{kind} for content block {index}, which never started"
            )));
        };
        match (kind, block) {
            ("text_delta", _) => push_text(out, LlmDelta::Text, text("text")),
            ("thinking_delta", _) => push_text(out, LlmDelta::Reasoning, text("thinking")),
            ("signature_delta", Block::Thinking { signature }) => {
                signature.push_str(text("signature"))
            }
            (
                "input_json_delta",
                Block::ToolUse {
                    ordinal, got_input, ..
                },
            ) => {
                *got_input = true;
                out.push_back(LlmDelta::ToolCallFragment {
                    index: *ordinal,
                    id: None,
                    name: None,
                    arguments: text("partial_json").to_string(),
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn stop_block(&mut self, event: &Value, out: &mut VecDeque<LlmDelta>) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match self.block_mut(index) {
            Some(Block::Thinking { signature }) if !signature.is_empty() => {
                out.push_back(LlmDelta::ReasoningSignature(std::mem::take(signature)));
            }
            // A tool with no input deltas: its input was whole in the start event (or empty).
            Some(Block::ToolUse {
                ordinal,
                got_input: false,
                initial_input,
            }) => out.push_back(LlmDelta::ToolCallFragment {
                index: *ordinal,
                id: None,
                name: None,
                arguments: std::mem::take(initial_input),
            }),
            _ => {}
        }
    }

    /// Later reports (message_delta) carry cumulative counts and win over earlier ones.
    fn merge_usage(&mut self, usage: &Value) {
        let number = |key: &str| usage.get(key).and_then(Value::as_u64);
        let (plain, read, write) = (
            number("input_tokens"),
            number("cache_read_input_tokens"),
            number("cache_creation_input_tokens"),
        );
        if let Some(read) = read {
            self.usage.cached_tokens = read;
        }
        if let Some(write) = write {
            self.usage.cache_write_tokens = write;
        }
        if let Some(plain) = plain {
            self.usage.input_tokens =
                plain + self.usage.cached_tokens + self.usage.cache_write_tokens;
        }
        if let Some(output) = number("output_tokens") {
            self.usage.output_tokens = output;
        }
    }
}

fn push_text(out: &mut VecDeque<LlmDelta>, make: fn(String) -> LlmDelta, text: &str) {
    if !text.is_empty() {
        out.push_back(make(text.to_string()));
    }
}

/// Decodes a whole (non-streamed) `message` body into the deltas a stream would give.
pub fn decode_message(text: &str) -> Result<Vec<LlmDelta>, LlmError> {
    let body = parse_whole_body(text)?;

    if let Some(error) = classify_error_body(&body) {
        return Err(error);
    }
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::InvalidResponse("response has no content".into()))?;
    let mut decoder = EventDecoder::default();
    let mut out = VecDeque::new();
    if let Some(usage) = body.get("usage") {
        decoder.merge_usage(usage);
    }
    for (index, block) in content.iter().enumerate() {
        let mut start = serde_json::json!({"index": index, "content_block": block});
        if block.get("type").and_then(Value::as_str) == Some("thinking") {
            // The whole block's signature arrives with it.
            start["content_block"]["signature"] =
                block.get("signature").cloned().unwrap_or_default();
        }
        decoder.start_block(&start, &mut out);
        decoder.stop_block(&serde_json::json!({"index": index}), &mut out);
    }
    if let Some(reason) = body.get("stop_reason").and_then(Value::as_str) {
        out.push_back(LlmDelta::Stop(StopReason::from_openai(reason)));
    }
    out.push_back(LlmDelta::Usage(decoder.usage));
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[(&str, &str)]) -> Result<Vec<LlmDelta>, LlmError> {
        let mut decoder = EventDecoder::default();
        let mut out = VecDeque::new();
        for (event, data) in events {
            let frame = Frame {
                event: Some((*event).to_string()),
                data: (*data).to_string(),
            };
            if decoder.decode(&frame, &mut out)? == Flow::Done {
                break;
            }
        }
        Ok(out.into())
    }

    #[test]
    fn redacted_thinking_blocks_are_kept_whole() {
        let deltas = run(&[
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"ENCRYPTED"}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"hi"}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ])
        .expect("decodes");
        assert_eq!(deltas[0], LlmDelta::RedactedReasoning("ENCRYPTED".into()));
        assert_eq!(deltas[1], LlmDelta::Text("hi".into()));
    }

    #[test]
    fn thinking_text_tools_and_usage_decode() {
        let deltas = run(&[
            ("message_start", r#"{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":1}}}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG"}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"tu1","name":"a__b","input":{}}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\":"}}"#),
            ("ping", r#"{"type":"ping"}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tu2","name":"a__c","input":{}}}"#),
            ("content_block_stop", r#"{"type":"content_block_stop","index":2}"#),
            ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}"#),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ])
        .expect("decodes");
        assert_eq!(deltas[0], LlmDelta::Reasoning("hm".into()));
        assert_eq!(deltas[1], LlmDelta::ReasoningSignature("SIG".into()));
        assert_eq!(
            deltas[2],
            LlmDelta::ToolCallFragment {
                index: 0,
                id: Some("tu1".into()),
                name: Some("a__b".into()),
                arguments: String::new()
            }
        );
        assert!(
            matches!(&deltas[6], LlmDelta::ToolCallFragment { index: 1, arguments, .. } if arguments == "{}")
        );
        assert_eq!(deltas[7], LlmDelta::Stop(StopReason::ToolCalls));
        assert_eq!(
            deltas[8],
            LlmDelta::Usage(Usage {
                input_tokens: 125,
                output_tokens: 42,
                cached_tokens: 100,
                cache_write_tokens: 20,
                reasoning_tokens: 0
            })
        );
    }

    #[test]
    fn error_events_and_orphan_deltas_fail() {
        let overloaded = run(&[(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )]);
        assert_eq!(overloaded, Err(LlmError::Model("Overloaded".into())));
        let orphan = run(&[(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
        )]);
        assert!(matches!(orphan, Err(LlmError::InvalidResponse(m)) if m.contains("block 3")));
    }

    #[test]
    fn whole_message_decodes_like_a_stream() {
        let deltas = decode_message(
            r#"{"content":[{"type":"thinking","thinking":"t","signature":"S"},{"type":"text","text":"hi"},{"type":"tool_use","id":"u","name":"n","input":{"a":1}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4}}"#,
        )
        .expect("decodes");
        assert_eq!(
            deltas,
            vec![
                LlmDelta::Reasoning("t".into()),
                LlmDelta::ReasoningSignature("S".into()),
                LlmDelta::Text("hi".into()),
                LlmDelta::ToolCallFragment {
                    index: 0,
                    id: Some("u".into()),
                    name: Some("n".into()),
                    arguments: String::new()
                },
                LlmDelta::ToolCallFragment {
                    index: 0,
                    id: None,
                    name: None,
                    arguments: "{\"a\":1}".into()
                },
                LlmDelta::Stop(StopReason::ToolCalls),
                LlmDelta::Usage(Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                    ..Usage::default()
                }),
            ]
        );
    }
}
