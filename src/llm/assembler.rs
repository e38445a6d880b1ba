//! Turns a stream of [`LlmDelta`]s into one [`LlmResponse`]: text, reasoning and its signature,
//! tool calls joined from their fragments, usage, routing metadata and the stop reason.
//!
//! Vendor quirks are the decoders' job; the assembler only trusts the `index` they assign.

use super::{LlmDelta, ResponseMetadata, StopReason, ToolCall, Usage};

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
#[derive(Debug, Default)]
pub struct ResponseAssembler {
    response: LlmResponse,
    /// Tool calls under construction keyed by stream index, in first-seen order.
    partial_calls: Vec<(usize, ToolCall)>,
}

impl ResponseAssembler {
    pub fn push(&mut self, delta: &LlmDelta) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembler_joins_text_and_tool_fragments_by_index() {
        let mut a = ResponseAssembler::default();
        a.push(&LlmDelta::Text("Hel".into()));
        a.push(&LlmDelta::Text("lo".into()));
        a.push(&LlmDelta::ToolCallFragment {
            index: 0,
            id: Some("c1".into()),
            name: Some("t__a".into()),
            arguments: String::new(),
        });
        a.push(&LlmDelta::ToolCallFragment {
            index: 1,
            id: Some("c2".into()),
            name: Some("t__b".into()),
            arguments: "{}".into(),
        });
        a.push(&LlmDelta::ToolCallFragment {
            index: 0,
            id: None,
            name: None,
            arguments: "{\"x\":".into(),
        });
        a.push(&LlmDelta::ToolCallFragment {
            index: 0,
            id: None,
            name: None,
            arguments: "1}".into(),
        });
        a.push(&LlmDelta::Stop(StopReason::ToolCalls));
        let r = a.finish();
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
        let mut a = ResponseAssembler::default();
        for piece in ["{\"a\"", ":1}"] {
            a.push(&LlmDelta::ToolCallFragment {
                index: 0,
                id: None,
                name: Some("t__x".into()),
                arguments: piece.into(),
            });
        }
        a.push(&LlmDelta::ReasoningSignature("sig".into()));
        a.push(&LlmDelta::Metadata(ResponseMetadata {
            cost_usd: Some(0.5),
            ..ResponseMetadata::default()
        }));
        a.push(&LlmDelta::Metadata(ResponseMetadata {
            actual_model: Some("m".into()),
            ..ResponseMetadata::default()
        }));
        let r = a.finish();
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
}
