//! Decoding Gemini `GenerateContentResponse` objects (one per SSE event with `alt=sse`, or one
//! whole body) into deltas: text and `thought` parts, whole `functionCall` parts, the
//! `thoughtSignature`, `finishReason` and `usageMetadata`.

use std::collections::VecDeque;

use serde_json::Value;

use crate::llm::failure::{classify_error_body, parse_whole_body};
use crate::llm::stream::{Flow, Frame, FrameDecoder, frame_json};
use crate::llm::{LlmDelta, LlmError, StopReason, Usage};

#[derive(Default)]
pub struct ResponseDecoder {
    tool_calls: usize,
    finished: bool,
    /// The signature on a function call is the one a replay needs; once seen, keep it.
    call_signature_seen: bool,
}

impl FrameDecoder for ResponseDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut VecDeque<LlmDelta>) -> Result<Flow, LlmError> {
        if frame.data.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        self.decode_response(&frame_json(&frame.data)?, out)?;
        Ok(Flow::Continue)
    }

    fn is_complete(&self) -> bool {
        self.finished
    }
}

impl ResponseDecoder {
    fn decode_response(
        &mut self,
        response: &Value,
        out: &mut VecDeque<LlmDelta>,
    ) -> Result<(), LlmError> {
        if let Some(error) = classify_error_body(response) {
            return Err(error);
        }
        if let Some(reason) = response
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            return Err(LlmError::Model(format!("the prompt was blocked: {reason}")));
        }
        let candidate = response.get("candidates").and_then(|c| c.get(0));
        let parts = candidate
            .and_then(|c| c.pointer("/content/parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            self.decode_part(part, out);
        }
        if let Some(reason) = candidate
            .and_then(|c| c.get("finishReason"))
            .and_then(Value::as_str)
        {
            self.finished = true;
            out.push_back(LlmDelta::Stop(self.stop_reason(reason)));
        }
        if let Some(usage) = response.get("usageMetadata") {
            out.push_back(LlmDelta::Usage(parse_usage(usage)));
        }
        Ok(())
    }

    fn decode_part(&mut self, part: &Value, out: &mut VecDeque<LlmDelta>) {
        let is_call = part.get("functionCall").is_some();
        if let Some(signature) = part.get("thoughtSignature").and_then(Value::as_str)
            && !self.call_signature_seen
        {
            self.call_signature_seen = is_call;
            out.push_back(LlmDelta::ReasoningSignature(signature.to_string()));
        }
        if let Some(call) = part.get("functionCall") {
            let index = self.tool_calls;
            self.tool_calls += 1;
            let text = |key: &str| {
                call.get(key)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            };
            out.push_back(LlmDelta::ToolCallFragment {
                index,
                id: text("id"),
                name: text("name"),
                arguments: call
                    .get("args")
                    .map_or_else(|| "{}".to_string(), Value::to_string),
            });
            return;
        }
        let Some(text) = part
            .get("text")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        else {
            return;
        };
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            out.push_back(LlmDelta::Reasoning(text.to_string()));
        } else {
            out.push_back(LlmDelta::Text(text.to_string()));
        }
    }

    fn stop_reason(&self, reason: &str) -> StopReason {
        match reason {
            "STOP" if self.tool_calls > 0 => StopReason::ToolCalls,
            "STOP" => StopReason::Stop,
            "MAX_TOKENS" => StopReason::Length,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
            | "IMAGE_SAFETY" => StopReason::ContentFilter,
            other => StopReason::Other(other.to_ascii_lowercase()),
        }
    }
}

/// Gemini counts thoughts apart from the answer; both are output we pay for.
fn parse_usage(usage: &Value) -> Usage {
    let number = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: number("promptTokenCount"),
        output_tokens: number("candidatesTokenCount") + number("thoughtsTokenCount"),
        cached_tokens: number("cachedContentTokenCount"),
        cache_write_tokens: 0,
        reasoning_tokens: number("thoughtsTokenCount"),
    }
}

/// Decodes a whole `generateContent` body into the deltas a stream would give.
pub fn decode_body(text: &str) -> Result<Vec<LlmDelta>, LlmError> {
    let body = parse_whole_body(text)?;

    let mut decoder = ResponseDecoder::default();
    let mut out = VecDeque::new();
    decoder.decode_response(&body, &mut out)?;
    if !decoder.finished {
        return Err(LlmError::InvalidResponse(
            "response has no finished candidate".into(),
        ));
    }
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&str]) -> Result<Vec<LlmDelta>, LlmError> {
        let mut decoder = ResponseDecoder::default();
        let mut out = VecDeque::new();
        for chunk in chunks {
            let frame = Frame {
                event: None,
                data: (*chunk).to_string(),
            };
            decoder.decode(&frame, &mut out)?;
        }
        Ok(out.into())
    }

    #[test]
    fn thoughts_text_calls_signature_and_usage_decode() {
        let deltas = decode(&[
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"plan","thought":true}]}}]}"#,
            r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"a__b","args":{"x":1}},"thoughtSignature":"SIG1"},{"functionCall":{"name":"a__c","args":{}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"thoughtsTokenCount":7,"cachedContentTokenCount":4}}"#,
        ])
        .expect("decodes");
        assert_eq!(deltas[0], LlmDelta::Reasoning("plan".into()));
        assert_eq!(deltas[1], LlmDelta::ReasoningSignature("SIG1".into()));
        assert_eq!(
            deltas[2],
            LlmDelta::ToolCallFragment {
                index: 0,
                id: None,
                name: Some("a__b".into()),
                arguments: "{\"x\":1}".into()
            }
        );
        assert!(matches!(
            &deltas[3],
            LlmDelta::ToolCallFragment { index: 1, .. }
        ));
        assert_eq!(deltas[4], LlmDelta::Stop(StopReason::ToolCalls));
        assert_eq!(
            deltas[5],
            LlmDelta::Usage(Usage {
                input_tokens: 10,
                output_tokens: 12,
                cached_tokens: 4,
                cache_write_tokens: 0,
                reasoning_tokens: 7
            })
        );
    }

    #[test]
    fn errors_and_blocked_prompts_fail() {
        let err =
            decode(&[r#"{"error":{"code":503,"status":"UNAVAILABLE","message":"overloaded"}}"#]);
        assert_eq!(err, Err(LlmError::Model("overloaded".into())));
        let blocked = decode(&[r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#]);
        assert!(matches!(blocked, Err(LlmError::Model(m)) if m.contains("SAFETY")));
        assert!(matches!(
            decode_body(r#"{"candidates":[]}"#),
            Err(LlmError::InvalidResponse(_))
        ));
    }
}
