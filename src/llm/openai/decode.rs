//! Decoding Chat Completions responses, streamed (`chat.completion.chunk` SSE frames) or whole
//! (`chat.completion`), into deltas, tolerating the dialects' quirks: reasoning in
//! `reasoning_content` or `reasoning`, tool-call fragments with a missing `index`, one index
//! reused for every call, or the `id` only on the first fragment.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde_json::Value;

use super::wire::{Body, Choice, Delta};
use crate::llm::failure::{classify_error_body, truncate};
use crate::llm::stream::{Flow, Frame, FrameDecoder};
use crate::llm::{LlmDelta, LlmError, ResponseMetadata, StopReason, Usage};

/// Turns `chat.completion.chunk` JSON into deltas.
#[derive(Default)]
pub struct ChunkDecoder {
    /// A finish_reason was seen: a later close without `[DONE]` is still a complete response.
    finished: bool,
    /// Tool-call slots as (upstream index, call id) in order; our index is the position.
    calls: Vec<(usize, Option<String>)>,
    /// Report OpenRouter's actual provider/model and cost.
    report_routing: bool,
    routing_reported: bool,
}

impl FrameDecoder for ChunkDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut VecDeque<LlmDelta>) -> Result<Flow, LlmError> {
        let data = frame.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        // OpenRouter sends `: OPENROUTER PROCESSING` comments; some servers send empty data.
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let chunk = read_body(data, "stream frame")?;
        self.decode_chunk(&chunk, |choice| choice.delta.as_ref(), out);
        Ok(Flow::Continue)
    }

    fn is_complete(&self) -> bool {
        self.finished
    }
}

/// Parses a chunk or a whole body; an error reported in it (an `error` key) is classified.
fn read_body<'a>(text: &'a str, what: &str) -> Result<Body<'a>, LlmError> {
    let body = Body::parse(text).map_err(|not_json| {
        LlmError::InvalidResponse(format!(
            "{what} is not JSON ({}): {}",
            not_json.0,
            truncate(text, 200)
        ))
    })?;
    if body.has_error {
        let value: Value = serde_json::from_str(text).unwrap_or_default();
        if let Some(error) = classify_error_body(&value) {
            return Err(error);
        }
    }
    Ok(body)
}

impl ChunkDecoder {
    pub fn new(report_routing: bool) -> Self {
        Self {
            report_routing,
            ..Self::default()
        }
    }

    /// One chunk, or a whole body read as one chunk whose delta is its message: `part` picks
    /// the first choice's delta or message.
    fn decode_chunk<'b, 'a>(
        &mut self,
        chunk: &'b Body<'a>,
        part: fn(&'b Choice<'a>) -> Option<&'b Delta<'a>>,
        out: &mut VecDeque<LlmDelta>,
    ) {
        if self.report_routing && !self.routing_reported {
            let routing = routing_of(chunk);
            if routing.actual_provider.is_some() || routing.actual_model.is_some() {
                self.routing_reported = true;
                out.push_back(LlmDelta::Metadata(routing));
            }
        }
        if let Some(choice) = chunk.first_choice() {
            if let Some(delta) = part(choice) {
                self.decode_delta(delta, out);
            }
            if let Some(reason) = &choice.finish_reason {
                self.finished = true;
                out.push_back(LlmDelta::Stop(StopReason::from_openai(reason)));
            }
        }
        if let Some(usage) = chunk.usage.as_ref().filter(|usage| usage.is_object()) {
            out.push_back(LlmDelta::Usage(parse_usage(usage)));
            if let Some(cost) = self.report_routing.then(|| cost_of(usage)).flatten() {
                out.push_back(LlmDelta::Metadata(ResponseMetadata {
                    cost_usd: Some(cost),
                    ..ResponseMetadata::default()
                }));
            }
        }
    }

    fn decode_delta(&mut self, delta: &Delta<'_>, out: &mut VecDeque<LlmDelta>) {
        let reasoning = non_empty(&delta.reasoning_content).or(non_empty(&delta.reasoning));
        if let Some(text) = reasoning {
            out.push_back(LlmDelta::Reasoning(text.to_string()));
        }
        if let Some(text) = non_empty(&delta.content) {
            out.push_back(LlmDelta::Text(text.to_string()));
        }
        let Some(calls) = &delta.tool_calls else {
            return;
        };
        let mut seen_in_chunk: Vec<usize> = Vec::new();
        for (position, call) in calls.iter().enumerate() {
            let upstream_index = call
                .index
                .and_then(|index| usize::try_from(index).ok())
                .unwrap_or(position);
            let id = non_empty(&call.id).map(str::to_string);
            let function = call.function.as_ref();
            let name = function
                .and_then(|f| non_empty(&f.name))
                .map(str::to_string);
            // The same index twice in one chunk can only be two different calls.
            let repeated = seen_in_chunk.contains(&upstream_index) && name.is_some();
            seen_in_chunk.push(upstream_index);
            let index = self.slot_for(upstream_index, id.as_deref(), repeated);
            out.push_back(LlmDelta::ToolCallFragment {
                index,
                id,
                name,
                arguments: function.map_or_else(String::new, |f| f.arguments.to_string()),
            });
        }
    }

    /// Our slot for a fragment. A new id under a known index opens a new slot, since some
    /// servers reuse one index for every call; a fragment without id continues the latest slot
    /// of its index.
    fn slot_for(&mut self, upstream_index: usize, id: Option<&str>, force_new: bool) -> usize {
        let existing = self.calls.iter().rposition(|(i, _)| *i == upstream_index);
        let opens_new = match (existing, id) {
            (None, _) => true,
            _ if force_new => true,
            (Some(slot), Some(id)) => self.calls[slot].1.as_deref().is_some_and(|k| k != id),
            (Some(_), None) => false,
        };
        if opens_new {
            self.calls.push((upstream_index, id.map(str::to_string)));
            return self.calls.len() - 1;
        }
        let slot = existing.unwrap_or_default();
        if self.calls[slot].1.is_none() {
            self.calls[slot].1 = id.map(str::to_string);
        }
        slot
    }
}

/// Decodes a non-streaming `chat.completion` body into the same deltas a stream would give.
pub fn decode_completion(text: &str, report_routing: bool) -> Result<Vec<LlmDelta>, LlmError> {
    let body = read_body(text, "response")?;
    if body.first_choice().is_none() {
        return Err(LlmError::InvalidResponse("response has no choices".into()));
    }
    let mut out = VecDeque::new();
    ChunkDecoder::new(report_routing).decode_chunk(
        &body,
        |choice| choice.message.as_ref(),
        &mut out,
    );
    Ok(out.into())
}

fn parse_usage(usage: &Value) -> Usage {
    let number = |path: &[&str]| {
        path.iter()
            .try_fold(usage, |value, key| value.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let cached = match number(&["prompt_tokens_details", "cached_tokens"]) {
        // DeepSeek reports its cache hits under its own name.
        0 => number(&["prompt_cache_hit_tokens"]),
        n => n,
    };
    Usage {
        input_tokens: number(&["prompt_tokens"]),
        output_tokens: number(&["completion_tokens"]),
        cached_tokens: cached,
        cache_write_tokens: number(&["prompt_tokens_details", "cache_write_tokens"]),
        reasoning_tokens: number(&["completion_tokens_details", "reasoning_tokens"]),
    }
}

fn cost_of(usage: &Value) -> Option<f64> {
    usage.get("cost").and_then(Value::as_f64)
}

fn routing_of(chunk: &Body<'_>) -> ResponseMetadata {
    ResponseMetadata {
        cost_usd: None,
        actual_provider: non_empty(&chunk.provider).map(str::to_string),
        actual_model: non_empty(&chunk.model).map(str::to_string),
    }
}

/// A string field that is there and not empty.
fn non_empty<'s>(text: &'s Option<Cow<'_, str>>) -> Option<&'s str> {
    text.as_deref().filter(|text| !text.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&str]) -> Vec<LlmDelta> {
        let mut decoder = ChunkDecoder::default();
        let mut out = VecDeque::new();
        for chunk in chunks {
            let frame = Frame {
                event: None,
                data: (*chunk).to_string(),
            };
            decoder.decode(&frame, &mut out).expect("chunk decodes");
        }
        out.into()
    }

    fn indices(deltas: &[LlmDelta]) -> Vec<usize> {
        deltas
            .iter()
            .filter_map(|d| match d {
                LlmDelta::ToolCallFragment { index, .. } => Some(*index),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn decodes_content_reasoning_finish_and_usage() {
        let deltas = decode_all(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning":"more"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2,"cache_write_tokens":4}}}"#,
        ]);
        assert_eq!(
            deltas,
            vec![
                LlmDelta::Reasoning("hmm".into()),
                LlmDelta::Reasoning("more".into()),
                LlmDelta::Text("Hi".into()),
                LlmDelta::Stop(StopReason::Stop),
                LlmDelta::Usage(Usage {
                    input_tokens: 7,
                    output_tokens: 3,
                    cached_tokens: 2,
                    cache_write_tokens: 4,
                    reasoning_tokens: 0,
                }),
            ]
        );
    }

    #[test]
    fn reused_index_with_new_id_opens_a_new_call() {
        let deltas = decode_all(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"y","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"k\":1}"}}]}}]}"#,
        ]);
        assert_eq!(indices(&deltas), vec![0, 1, 1]);
    }

    #[test]
    fn missing_index_falls_back_to_position_and_same_index_twice_in_a_chunk_splits() {
        let deltas = decode_all(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}},{"id":"b","function":{"name":"y","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":5,"function":{"name":"p","arguments":{"q":1}}},{"index":5,"function":{"name":"r","arguments":"{}"}}]}}]}"#,
        ]);
        assert_eq!(indices(&deltas), vec![0, 1, 2, 3]);
        assert!(
            matches!(&deltas[2], LlmDelta::ToolCallFragment { arguments, .. } if arguments == "{\"q\":1}")
        );
    }

    #[test]
    fn error_chunk_and_bad_json_are_classified() {
        let mut decoder = ChunkDecoder::default();
        let mut out = VecDeque::new();
        let frame = |data: &str| Frame {
            event: None,
            data: data.into(),
        };
        assert!(
            matches!(decoder.decode(&frame(r#"{"error":{"message":"boom"}}"#), &mut out), Err(LlmError::Model(m)) if m == "boom")
        );
        assert!(matches!(
            decoder.decode(&frame("{not json"), &mut out),
            Err(LlmError::InvalidResponse(_))
        ));
        assert_eq!(
            decoder.decode(&frame("[DONE]"), &mut out).ok(),
            Some(Flow::Done)
        );
    }

    #[test]
    fn routing_metadata_and_cost_are_reported_for_openrouter() {
        let mut decoder = ChunkDecoder::new(true);
        let mut out = VecDeque::new();
        let frame = Frame {
            event: None,
            data: r#"{"provider":"Anthropic","model":"anthropic/claude-x","choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"cost":0.0125}}"#.into(),
        };
        decoder.decode(&frame, &mut out).expect("decodes");
        decoder.decode(&frame, &mut out).expect("decodes");
        let metadata: Vec<&ResponseMetadata> = out
            .iter()
            .filter_map(|d| match d {
                LlmDelta::Metadata(m) => Some(m),
                _ => None,
            })
            .collect();
        assert_eq!(
            metadata.len(),
            3,
            "routing once, cost per usage: {metadata:?}"
        );
        assert_eq!(metadata[0].actual_provider.as_deref(), Some("Anthropic"));
        assert_eq!(
            metadata[0].actual_model.as_deref(),
            Some("anthropic/claude-x")
        );
        assert_eq!(metadata[1].cost_usd, Some(0.0125));
    }

    #[test]
    fn non_streaming_body_becomes_deltas() {
        let deltas = decode_completion(
            r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"ok","tool_calls":[{"id":"c","type":"function","function":{"name":"t","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
            false,
        )
        .expect("decodes");
        assert_eq!(deltas[0], LlmDelta::Text("ok".into()));
        assert!(matches!(&deltas[1], LlmDelta::ToolCallFragment { id: Some(id), .. } if id == "c"));
        assert_eq!(deltas[2], LlmDelta::Stop(StopReason::ToolCalls));
        assert!(matches!(
            decode_completion(r#"{"choices":[]}"#, false),
            Err(LlmError::InvalidResponse(_))
        ));
    }
}
