//! What the scripted model reads in a request, as a model would: the user's last message, the
//! tool results that came after it, the tools it may call, how a tool call travels (a native
//! call, or a slot tag in the `xml` transport) and how the answer must end (plain text, the
//! `agent__final_report` tool, or the XML FINAL tag with its format and schema).
//!
//! It reads the session's own words — tool definitions, the XML-NEXT notice
//! (`crate::agent::xml::next`), the XML-PAST results — and nothing else; the tests build those
//! with the session's own renderers so a change there shows here.

use serde_json::Value;

use crate::agent::final_report::{FINAL_REPORT_TOOL, JSON_FORMAT};
use crate::agent::internal_tools::{BATCH_TOOL, TASK_STATUS_TOOL};
use crate::agent::output_handles::TOOL_OUTPUT_TOOL;
use crate::agent::router::ROUTER_TOOL;
use crate::llm::{ChatMessage, LlmRequest, Role, ToolChoice, ToolDefinition};

/// Tools the session offers for its own bookkeeping: never called unless the user names them.
const BOOKKEEPING_TOOLS: &[&str] = &[
    FINAL_REPORT_TOOL,
    TASK_STATUS_TOOL,
    BATCH_TOOL,
    TOOL_OUTPUT_TOOL,
];

/// The start of the XML-NEXT notice, of the XML-PAST tool results and of the native notices.
const XML_NEXT_START: &str = "# System Notice";
const XML_PAST_START: &str = "System Notice: tool response for ";
const NOTICE_START: &str = "system notice";

/// The expected final report: its format and, for `json`, its schema (`None`: any object).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub format: String,
    pub schema: Option<Value>,
}

impl Report {
    pub fn is_json(&self) -> bool {
        self.format == JSON_FORMAT
    }
}

/// How the answer must be delivered.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// `finalization: text`: the text is the answer.
    Text,
    /// A call of `agent__final_report`.
    ReportTool(Report),
    /// `<ai-agent-NONCE-FINAL format="…">…</ai-agent-NONCE-FINAL>`.
    FinalTag { nonce: String, report: Report },
}

/// How a tool call travels.
#[derive(Debug, Clone, PartialEq)]
pub enum CallStyle {
    Native,
    /// The `xml` transport: `<ai-agent-NONCE-SLOT tool="…">{json}</…>`.
    SlotTag {
        nonce: String,
        slot: u32,
    },
}

/// One tool result the conversation holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub tool: String,
    pub content: String,
}

/// Everything the scripted model acts on.
#[derive(Debug, Clone)]
pub struct Reading {
    /// The user's last message (notices skipped); empty when there is none.
    pub prompt: String,
    /// Tool results after that message.
    pub results: Vec<ToolResult>,
    /// The tools it may call, bookkeeping tools left out.
    pub tools: Vec<ToolDefinition>,
    pub ending: Ending,
    pub call_style: CallStyle,
    pub choice: ToolChoice,
}

impl Reading {
    pub fn of(request: &LlmRequest) -> Self {
        let notice = request
            .messages
            .last()
            .filter(|m| m.role == Role::User)
            .and_then(|m| m.content.as_deref())
            .filter(|text| text.starts_with(XML_NEXT_START));
        let prompt_at = request.messages.iter().rposition(is_user_prompt);
        let prompt = prompt_at
            .and_then(|i| request.messages.get(i))
            .and_then(|m| m.content.clone())
            .unwrap_or_default();
        let after = prompt_at.map_or(0, |i| i + 1);
        let results = tool_results(request.messages.get(after..).unwrap_or_default());
        let (ending, call_style, offered) = match notice.and_then(XmlNotice::parse) {
            Some(xml) => {
                let style = match xml.first_slot {
                    Some(slot) => CallStyle::SlotTag {
                        nonce: xml.nonce.clone(),
                        slot,
                    },
                    None => CallStyle::Native,
                };
                let offered = if xml.tools.is_empty() {
                    request.tools.clone()
                } else {
                    xml.tools
                };
                let ending = Ending::FinalTag {
                    nonce: xml.nonce,
                    report: xml.report,
                };
                (ending, style, offered)
            }
            None => (
                report_tool(&request.tools).map_or(Ending::Text, Ending::ReportTool),
                CallStyle::Native,
                request.tools.clone(),
            ),
        };
        Self {
            prompt,
            results,
            tools: offered
                .into_iter()
                .filter(|t| !BOOKKEEPING_TOOLS.contains(&t.name.as_str()))
                .collect(),
            ending,
            call_style,
            choice: request.tool_choice.clone().unwrap_or_default(),
        }
    }

    /// The tool to call: the one `tool_choice` names, else the one the user named (its full
    /// name or the part after `__`), else the first offered (the router's hand-off only when
    /// named). `None` when no tool is offered.
    pub fn tool_to_call(&self) -> Option<&ToolDefinition> {
        if let ToolChoice::Function(name) = &self.choice
            && let Some(tool) = self.tools.iter().find(|t| &t.name == name)
        {
            return Some(tool);
        }
        self.named_tool()
            .or_else(|| self.tools.iter().find(|t| t.name != ROUTER_TOOL))
    }

    /// The offered tool the prompt mentions first (the longer name on a tie).
    fn named_tool(&self) -> Option<&ToolDefinition> {
        self.tools
            .iter()
            .filter_map(|tool| {
                let short = tool.name.rsplit("__").next().unwrap_or(&tool.name);
                [tool.name.as_str(), short]
                    .into_iter()
                    .filter_map(|name| mention(&self.prompt, name).map(|at| (at, name.len())))
                    .min_by_key(|(at, len)| (*at, usize::MAX - len))
                    .map(|found| (found, tool))
            })
            .min_by_key(|((at, len), _)| (*at, usize::MAX - len))
            .map(|(_, tool)| tool)
    }
}

/// Where `name` first stands in `text` as a whole word (not inside a longer identifier).
fn mention(text: &str, name: &str) -> Option<usize> {
    if name.is_empty() {
        return None;
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(name).map(|(at, _)| at).find(|at| {
        let before = text.get(..*at).and_then(|t| t.chars().next_back());
        let after = text.get(at + name.len()..).and_then(|t| t.chars().next());
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// A user message that is the user's own, not a notice of the session.
fn is_user_prompt(message: &ChatMessage) -> bool {
    message.role == Role::User
        && message.content.as_deref().is_some_and(|text| {
            let start: String = text.trim_start().chars().take(20).collect();
            let start = start.to_lowercase();
            !start.starts_with(NOTICE_START) && !start.starts_with(&XML_NEXT_START.to_lowercase())
        })
}

/// The tool results among `messages`: native tool messages (named by the call they answer)
/// and the blocks of XML-PAST messages.
fn tool_results(messages: &[ChatMessage]) -> Vec<ToolResult> {
    let mut results = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        match (message.role, message.content.as_deref()) {
            (Role::Tool, content) => results.push(ToolResult {
                tool: call_name(messages.get(..index).unwrap_or_default(), message),
                content: content.unwrap_or_default().to_string(),
            }),
            (Role::User, Some(text)) if text.starts_with(XML_PAST_START) => {
                results.extend(text.split(XML_PAST_START).filter_map(xml_past_block));
            }
            _ => {}
        }
    }
    results
}

/// The name of the call a tool message answers, from the assistant message that made it.
fn call_name(earlier: &[ChatMessage], result: &ChatMessage) -> String {
    earlier
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls.iter())
        .find(|call| Some(&call.id) == result.tool_call_id.as_ref())
        .map_or_else(|| "a tool".to_string(), |call| call.name.clone())
}

/// One XML-PAST block after its `System Notice: tool response for ` start:
/// `ID (TOOL)\n<request>…</request>\n<response>\n…\n</response>`.
fn xml_past_block(block: &str) -> Option<ToolResult> {
    let (head, rest) = block.split_once('\n')?;
    let tool = head.split_once(" (")?.1.strip_suffix(')')?.to_string();
    let content = rest
        .split_once("<response>\n")?
        .1
        .rsplit_once("\n</response>")?
        .0
        .to_string();
    Some(ToolResult { tool, content })
}

/// The final report the native transport offers as a tool: its pinned format and, for
/// `json`, the schema of `content_json`.
fn report_tool(tools: &[ToolDefinition]) -> Option<Report> {
    let tool = tools.iter().find(|t| t.name == FINAL_REPORT_TOOL)?;
    let properties = tool.parameters.get("properties")?;
    let format = properties
        .pointer("/report_format/const")
        .and_then(Value::as_str)
        .unwrap_or("text")
        .to_string();
    let schema = (format == JSON_FORMAT)
        .then(|| properties.get("content_json").cloned())
        .flatten();
    Some(Report { format, schema })
}

/// What an XML-NEXT notice says: the nonce, the final slot's format and schema, and in the
/// `xml` transport the first free tool slot and the tools.
struct XmlNotice {
    nonce: String,
    report: Report,
    first_slot: Option<u32>,
    tools: Vec<ToolDefinition>,
}

impl XmlNotice {
    fn parse(text: &str) -> Option<Self> {
        const OPEN: &str = "<ai-agent-";
        const FORMAT: &str = "-FINAL format=\"";
        let at = text.find(FORMAT)?;
        let nonce_start = text.get(..at)?.rfind(OPEN)? + OPEN.len();
        let nonce = text.get(nonce_start..at)?.to_string();
        let format_start = at + FORMAT.len();
        let format_len = text.get(format_start..)?.find('"')?;
        let format = text
            .get(format_start..format_start + format_len)?
            .to_string();
        let schema = text
            .split_once("valid against this schema:\n")
            .and_then(|(_, rest)| serde_json::from_str(rest.lines().next()?).ok());
        let first_slot = text
            .split_once("with a free slot (")
            .and_then(|(_, rest)| rest.get(..4)?.parse().ok());
        let tools = if first_slot.is_some() {
            listed_tools(text)
        } else {
            Vec::new()
        };
        Some(Self {
            nonce,
            report: Report { format, schema },
            first_slot,
            tools,
        })
    }
}

/// The tools an `xml` transport notice lists: "- `NAME`: description" lines, each followed by
/// its "  arguments schema: {…}" line.
fn listed_tools(text: &str) -> Vec<ToolDefinition> {
    let mut tools = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("- `")
            && let Some((name, description)) = rest.split_once("`: ")
        {
            current = Some((name.to_string(), description.to_string()));
        } else if let Some(schema) = line.strip_prefix("  arguments schema: ")
            && let Some((name, description)) = current.take()
        {
            tools.push(ToolDefinition {
                name,
                description,
                parameters: serde_json::from_str(schema).unwrap_or(Value::Null),
            });
        }
    }
    tools
}
