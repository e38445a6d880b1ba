//! Turns a stream of [`LlmDelta`]s into one [`LlmResponse`]: text, reasoning and its signature,
//! tool calls joined from their fragments, usage, routing metadata and the stop reason.
//!
//! Vendor quirks are the decoders' job; the assembler only trusts the `index` they assign.
//! It bounds what one response may carry (`llmResponseMaxBytes`): a delta that would take the
//! response past its bound is refused with [`LlmError::TooLarge`] and nothing of it is kept.

use super::{LlmDelta, LlmError, ResponseMetadata, StopReason, ToolCall, Usage};

/// The assembled result of one streamed response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmResponse {
    pub text: String,
    pub reasoning: String,
    /// See [`super::ChatMessage::reasoning_signature`].
    pub reasoning_signature: Option<String>,
    /// See [`super::ChatMessage::redacted_reasoning`].
    pub redacted_reasoning: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    pub metadata: ResponseMetadata,
    pub stop_reason: Option<StopReason>,
}

/// Accumulates deltas into an [`LlmResponse`], assembling tool-call fragments by index.
#[derive(Debug)]
pub struct ResponseAssembler {
    response: LlmResponse,
    /// Tool calls under construction keyed by stream index, in first-seen order.
    partial_calls: Vec<(usize, ToolCall)>,
    /// Bytes of output taken so far, and the most the response may carry.
    output_bytes: usize,
    max_output_bytes: usize,
}

impl Default for ResponseAssembler {
    fn default() -> Self {
        Self::bounded(usize::MAX)
    }
}

impl ResponseAssembler {
    /// An assembler that refuses output past `max_output_bytes` (text, reasoning, tool-call
    /// names, ids and arguments, signatures and encrypted reasoning, counted together).
    pub fn bounded(max_output_bytes: usize) -> Self {
        Self {
            response: LlmResponse::default(),
            partial_calls: Vec::new(),
            output_bytes: 0,
            max_output_bytes,
        }
    }

    /// Adds `delta`, or refuses it when its output would pass the bound.
    pub fn push(&mut self, delta: &LlmDelta) -> Result<(), LlmError> {
        let total = self.output_bytes.saturating_add(output_bytes(delta));
        if total > self.max_output_bytes {
            return Err(LlmError::TooLarge(format!(
                "the model sent more than llmResponseMaxBytes ({} bytes) of output in one response",
                self.max_output_bytes
            )));
        }
        self.output_bytes = total;
        match delta {
            LlmDelta::Text(t) => self.response.text.push_str(t),
            LlmDelta::Reasoning(t) => self.response.reasoning.push_str(t),
            LlmDelta::ReasoningSignature(s) => self.response.reasoning_signature = Some(s.clone()),
            LlmDelta::RedactedReasoning(data) => {
                self.response.redacted_reasoning.push(data.clone())
            }
            LlmDelta::ToolCallFragment {
                index,
                id,
                name,
                arguments,
            } => self.push_fragment(*index, id.as_deref(), name.as_deref(), arguments),
            LlmDelta::Usage(u) => self.response.usage = Some(*u),
            LlmDelta::Metadata(m) => self.response.metadata.merge(m.clone()),
            LlmDelta::Stop(r) => self.response.stop_reason = Some(r.clone()),
        }
        Ok(())
    }

    fn push_fragment(
        &mut self,
        index: usize,
        id: Option<&str>,
        name: Option<&str>,
        arguments: &str,
    ) {
        // Fragments nearly always continue the latest call: look there first.
        let position = match self.partial_calls.last() {
            Some((last, _)) if *last == index => Some(self.partial_calls.len() - 1),
            _ => self.partial_calls.iter().position(|(i, _)| *i == index),
        };
        let slot = position.unwrap_or_else(|| {
            self.partial_calls.push((
                index,
                ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                },
            ));
            self.partial_calls.len() - 1
        });
        let call = &mut self.partial_calls[slot].1;
        if let Some(id) = id.filter(|s| !s.is_empty()) {
            call.id = id.to_string();
        }
        // Some servers repeat the whole name on every fragment; others stream it in pieces.
        if let Some(name) = name.filter(|s| !s.is_empty() && *s != call.name) {
            call.name.push_str(name);
        }
        call.arguments.push_str(arguments);
    }

    pub fn finish(mut self) -> LlmResponse {
        let batch = uuid::Uuid::new_v4().simple().to_string();
        self.response.tool_calls = self
            .partial_calls
            .into_iter()
            .enumerate()
            .map(|(n, (_, mut call))| {
                // Servers that send no id still need one: tool results are matched by it.
                if call.id.is_empty() {
                    call.id = format!("call_{}_{n}", &batch[..12]);
                }
                call
            })
            .collect();
        self.response
    }
}

/// The bytes of model output `delta` adds to a response.
fn output_bytes(delta: &LlmDelta) -> usize {
    match delta {
        LlmDelta::Text(text)
        | LlmDelta::Reasoning(text)
        | LlmDelta::ReasoningSignature(text)
        | LlmDelta::RedactedReasoning(text) => text.len(),
        LlmDelta::ToolCallFragment {
            id,
            name,
            arguments,
            ..
        } => {
            arguments.len()
                + id.as_ref().map_or(0, String::len)
                + name.as_ref().map_or(0, String::len)
        }
        LlmDelta::Usage(_) | LlmDelta::Metadata(_) | LlmDelta::Stop(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assemble(deltas: Vec<LlmDelta>) -> LlmResponse {
        let mut a = ResponseAssembler::default();
        for delta in &deltas {
            a.push(delta).expect("unbounded");
        }
        a.finish()
    }

    fn fragment(index: usize, id: Option<&str>, name: Option<&str>, arguments: &str) -> LlmDelta {
        LlmDelta::ToolCallFragment {
            index,
            id: id.map(str::to_string),
            name: name.map(str::to_string),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn assembler_joins_text_and_tool_fragments_by_index() {
        let r = assemble(vec![
            LlmDelta::Text("Hel".into()),
            LlmDelta::Text("lo".into()),
            fragment(0, Some("c1"), Some("t__a"), ""),
            fragment(1, Some("c2"), Some("t__b"), "{}"),
            fragment(0, None, None, "{\"x\":"),
            fragment(0, None, None, "1}"),
            LlmDelta::Stop(StopReason::ToolCalls),
        ]);
        assert_eq!(r.text, "Hello");
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(
            r.tool_calls[0],
            ToolCall {
                id: "c1".into(),
                name: "t__a".into(),
                arguments: "{\"x\":1}".into()
            }
        );
        assert_eq!(r.tool_calls[1].arguments, "{}");
        assert_eq!(r.stop_reason, Some(StopReason::ToolCalls));
    }

    #[test]
    fn repeated_names_are_kept_once_and_missing_ids_are_filled() {
        let r = assemble(vec![
            fragment(0, None, Some("t__x"), "{\"a\""),
            fragment(0, None, Some("t__x"), ":1}"),
            LlmDelta::ReasoningSignature("sig".into()),
            LlmDelta::Metadata(ResponseMetadata {
                cost_usd: Some(0.5),
                ..ResponseMetadata::default()
            }),
            LlmDelta::Metadata(ResponseMetadata {
                actual_model: Some("m".into()),
                ..ResponseMetadata::default()
            }),
        ]);
        assert_eq!(r.tool_calls[0].name, "t__x");
        assert_eq!(r.tool_calls[0].arguments, "{\"a\":1}");
        assert!(
            r.tool_calls[0].id.starts_with("call_"),
            "{:?}",
            r.tool_calls[0]
        );
        assert_eq!(r.reasoning_signature.as_deref(), Some("sig"));
        assert_eq!(r.metadata.cost_usd, Some(0.5));
        assert_eq!(r.metadata.actual_model.as_deref(), Some("m"));
    }

    #[test]
    fn output_up_to_the_bound_is_taken_and_past_it_refused() {
        let mut a = ResponseAssembler::bounded(10);
        a.push(&LlmDelta::Text("12345".into())).expect("5 of 10");
        a.push(&LlmDelta::Reasoning("123".into())).expect("8 of 10");
        a.push(&fragment(0, None, None, "12")).expect("exactly 10");
        a.push(&LlmDelta::Usage(Usage::default()))
            .expect("usage is no output");
        let refused = a.push(&LlmDelta::Text("x".into()));
        assert!(
            matches!(&refused, Err(LlmError::TooLarge(m)) if m.contains("llmResponseMaxBytes (10 bytes)")),
            "{refused:?}"
        );
        let r = a.finish();
        assert_eq!(r.text, "12345", "nothing of a refused delta is kept");
    }
}
