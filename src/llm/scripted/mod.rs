//! The scripted provider (`"type": "scripted"`): a model built into agentd that needs no
//! network and no key, for trying agentd out and for tests. Its model name picks what it does:
//!
//! - `echo`: answers by repeating the user's last message after a short preamble.
//! - `think`: the same, after streaming a few reasoning deltas.
//! - `tools`: calls a tool when the request offers one and no tool result came back yet — the
//!   tool the user names ("use get_time"), else the first offered — with arguments built from
//!   its JSON schema; once results are there it answers by summing them up. Without tools it
//!   answers like `echo`. Approvals, client tools and sub-agents are tools, so they work too.
//! - `json`: answers with a JSON document (`{"answer": …}`, or one valid against the schema).
//!
//! Whatever the model, the answer ends the way the session asks: plain text (`finalization:
//! text`, one call per answer), the `agent__final_report` tool, or the XML FINAL tag; and when
//! the expected report is `json` the answer is a document valid against its schema (see
//! `schema_fill`). Every response streams in several pieces and reports estimated usage
//! (`tokens::Tokenizer::APPROXIMATE`), so accounting and metrics work as with a real model.

mod reading;
mod schema_fill;

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tracing::debug;

use super::tokens::Tokenizer;
use super::{DeltaStream, LlmDelta, LlmError, LlmRequest, Provider, StopReason, Usage};
use reading::{CallStyle, Ending, Reading, Report, ToolResult};
use schema_fill::{Filler, Properties};

pub use schema_fill::{MAX_ITEMS, MAX_STRING_CHARS};

/// The most characters of the user's message an echo repeats.
pub const ECHO_MAX_CHARS: usize = 2000;
/// The most characters of one tool result an answer quotes.
pub const RESULT_MAX_CHARS: usize = 500;
/// How many pieces a text, reasoning or tool-call arguments stream in (fewer when short).
const PIECES: usize = 4;
/// The pause between two deltas, so a streaming client sees the pieces arrive one by one.
const PIECE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(15);

/// What the scripted model does, chosen by the model name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptedModel {
    Echo,
    Think,
    Tools,
    Json,
}

impl ScriptedModel {
    pub const ALL: [Self; 4] = [Self::Echo, Self::Think, Self::Tools, Self::Json];

    pub fn name(self) -> &'static str {
        match self {
            Self::Echo => "echo",
            Self::Think => "think",
            Self::Tools => "tools",
            Self::Json => "json",
        }
    }

    /// The model a name stands for; an unknown name is an error listing the known ones.
    pub fn parse(name: &str) -> Result<Self, UnknownModel> {
        Self::ALL
            .into_iter()
            .find(|model| model.name() == name)
            .ok_or_else(|| UnknownModel(name.to_string()))
    }
}

/// A model name the scripted provider does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the scripted provider has no model `{0}`; its models are echo, think, tools and json \
     (to reach a real model, point agents at another provider)"
)]
pub struct UnknownModel(pub String);

/// The scripted provider; stateless, so one serves every session.
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    name: String,
}

impl ScriptedProvider {
    /// `name` is the provider's configured name (for logs).
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
        }
    }
}

#[async_trait]
impl Provider for ScriptedProvider {
    async fn stream(&self, request: LlmRequest) -> Result<DeltaStream, LlmError> {
        let model =
            ScriptedModel::parse(&request.model).map_err(|e| LlmError::Model(e.to_string()))?;
        let reading = Reading::of(&request);
        let plan = plan(model, &reading);
        debug!(provider = %self.name, model = model.name(), action = plan.act.label(), "scripted response");
        let deltas = deltas(&request, &reading, plan);
        let paced = futures_util::stream::iter(deltas.into_iter().enumerate()).then(
            |(index, delta)| async move {
                if index > 0 {
                    tokio::time::sleep(PIECE_INTERVAL).await;
                }
                Ok(delta)
            },
        );
        Ok(Box::pin(paced))
    }
}

/// What one response does.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    reasoning: Option<String>,
    act: Act,
}

#[derive(Debug, Clone, PartialEq)]
enum Act {
    Call { tool: String, arguments: Value },
    Answer(Content),
}

impl Act {
    fn label(&self) -> &'static str {
        match self {
            Self::Call { .. } => "tool_call",
            Self::Answer(Content::Text(_)) => "text_answer",
            Self::Answer(Content::Json(_)) => "json_answer",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Content {
    Text(String),
    Json(Value),
}

fn plan(model: ScriptedModel, reading: &Reading) -> Plan {
    let reasoning = (model == ScriptedModel::Think).then(|| thoughts(&reading.prompt));
    let call = (model == ScriptedModel::Tools && reading.results.is_empty())
        .then(|| tool_call(reading))
        .flatten();
    Plan {
        reasoning,
        act: call.unwrap_or_else(|| Act::Answer(answer_content(model, reading))),
    }
}

/// A call of the tool to call, its arguments filled from its schema; `None` when none is offered.
fn tool_call(reading: &Reading) -> Option<Act> {
    let tool = reading.tool_to_call()?;
    let arguments =
        match Filler::new(&tool.parameters, Properties::Required, &reading.prompt).fill() {
            object @ Value::Object(_) => object,
            _ => json!({}),
        };
    Some(Act::Call {
        tool: tool.name.clone(),
        arguments,
    })
}

/// The answer: the echo, or the tool results summed up; JSON when the report or the model
/// asks for it.
fn answer_content(model: ScriptedModel, reading: &Reading) -> Content {
    // A JSON document's text fields hold what was said (or found), without the preamble.
    let (text, plain) = match reading.results.as_slice() {
        [] => (
            echo(&reading.prompt),
            cut(reading.prompt.trim(), ECHO_MAX_CHARS),
        ),
        results => {
            let summary = summary(results);
            (summary.clone(), summary)
        }
    };
    match report_of(&reading.ending) {
        Some(report) if report.is_json() => Content::Json(json_answer(report, &plain)),
        _ if model == ScriptedModel::Json => Content::Json(json!({ "answer": text })),
        _ => Content::Text(text),
    }
}

fn report_of(ending: &Ending) -> Option<&Report> {
    match ending {
        Ending::Text => None,
        Ending::ReportTool(report) | Ending::FinalTag { report, .. } => Some(report),
    }
}

/// A document valid against the report's schema (any object when it has none), its text-like
/// fields holding `text`.
fn json_answer(report: &Report, text: &str) -> Value {
    match &report.schema {
        Some(schema) => Filler::new(schema, Properties::All, text).fill(),
        None => json!({ "answer": text }),
    }
}

fn echo(prompt: &str) -> String {
    if prompt.trim().is_empty() {
        return "Hi! I'm agentd's scripted model. Send me a message and I will repeat it.".into();
    }
    format!(
        "Hi! I'm agentd's scripted model, so I repeat what you send: {}",
        cut(prompt.trim(), ECHO_MAX_CHARS)
    )
}

fn summary(results: &[ToolResult]) -> String {
    let quote = |result: &ToolResult| cut(result.content.trim(), RESULT_MAX_CHARS);
    match results {
        [one] => format!("I called `{}` and it answered: {}", one.tool, quote(one)),
        many => {
            let lines: Vec<String> = many
                .iter()
                .map(|r| format!("- `{}`: {}", r.tool, quote(r)))
                .collect();
            format!(
                "I called {} tools; they answered:\n{}",
                many.len(),
                lines.join("\n")
            )
        }
    }
}

fn thoughts(prompt: &str) -> String {
    let words = prompt.split_whitespace().count();
    format!(
        "The user's message has {words} word{}. I am a scripted model without an LLM behind me, \
         so the honest answer is to repeat it.",
        if words == 1 { "" } else { "s" }
    )
}

/// `text` up to `max` characters, with `…` when something was left out.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// The response as deltas: reasoning, then the tool call or the answer in the form the
/// session expects, usage and the stop reason.
fn deltas(request: &LlmRequest, reading: &Reading, plan: Plan) -> Vec<LlmDelta> {
    let mut out = Vec::new();
    if let Some(reasoning) = &plan.reasoning {
        out.extend(pieces(reasoning).map(LlmDelta::Reasoning));
    }
    let stop = match plan.act {
        Act::Call { tool, arguments } => match &reading.call_style {
            CallStyle::Native => {
                out.extend(native_call(&tool, &arguments.to_string()));
                StopReason::ToolCalls
            }
            CallStyle::SlotTag { nonce, slot } => {
                let tag = format!(
                    "<ai-agent-{nonce}-{slot:04} tool=\"{tool}\">{arguments}</ai-agent-{nonce}-{slot:04}>"
                );
                out.extend(pieces(&tag).map(LlmDelta::Text));
                StopReason::Stop
            }
        },
        Act::Answer(content) => answer(&reading.ending, content, &mut out),
    };
    out.push(LlmDelta::Usage(usage(request, &out)));
    out.push(LlmDelta::Stop(stop));
    out
}

/// The answer delivered the way `ending` asks; returns the stop reason.
fn answer(ending: &Ending, content: Content, out: &mut Vec<LlmDelta>) -> StopReason {
    let as_text = |content: &Content| match content {
        Content::Text(text) => text.clone(),
        Content::Json(value) => value.to_string(),
    };
    match ending {
        Ending::Text => {
            out.extend(pieces(&as_text(&content)).map(LlmDelta::Text));
            StopReason::Stop
        }
        Ending::FinalTag { nonce, report } => {
            let tag = format!(
                "<ai-agent-{nonce}-FINAL format=\"{}\">\n{}\n</ai-agent-{nonce}-FINAL>",
                report.format,
                as_text(&content)
            );
            out.extend(pieces(&tag).map(LlmDelta::Text));
            StopReason::Stop
        }
        Ending::ReportTool(report) => {
            let arguments = match content {
                Content::Json(value) if report.is_json() => {
                    json!({"report_format": report.format, "content_json": value})
                }
                other => {
                    json!({"report_format": report.format, "report_content": as_text(&other)})
                }
            };
            out.extend(native_call(
                crate::agent::final_report::FINAL_REPORT_TOOL,
                &arguments.to_string(),
            ));
            StopReason::ToolCalls
        }
    }
}

/// One native tool call: the first fragment names it, the arguments follow in pieces.
fn native_call(tool: &str, arguments: &str) -> Vec<LlmDelta> {
    let id = format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..24]);
    let mut fragments = vec![LlmDelta::ToolCallFragment {
        index: 0,
        id: Some(id),
        name: Some(tool.to_string()),
        arguments: String::new(),
    }];
    fragments.extend(
        pieces(arguments).map(|arguments| LlmDelta::ToolCallFragment {
            index: 0,
            id: None,
            name: None,
            arguments,
        }),
    );
    fragments
}

/// `text` in up to [`PIECES`] pieces of about the same number of characters.
fn pieces(text: &str) -> impl Iterator<Item = String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(PIECES).max(1);
    let pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    pieces.into_iter()
}

/// Estimated usage: the request's messages and tools in, everything streamed out.
fn usage(request: &LlmRequest, out: &[LlmDelta]) -> Usage {
    let tokenizer = Tokenizer::APPROXIMATE;
    let output: u64 = out
        .iter()
        .map(|delta| match delta {
            LlmDelta::Text(text) | LlmDelta::Reasoning(text) => tokenizer.count(text),
            LlmDelta::ToolCallFragment {
                name, arguments, ..
            } => tokenizer.count(arguments) + name.as_deref().map_or(0, |n| tokenizer.count(n)),
            _ => 0,
        })
        .sum();
    Usage {
        input_tokens: tokenizer.messages(&request.messages) + tokenizer.tools(&request.tools),
        output_tokens: output,
        cached_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
    }
}

#[cfg(test)]
mod tests;
