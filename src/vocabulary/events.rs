//! The events of a run (SPEC §4.2), typed: [`AgentEvent`] is what a session emits, one variant a
//! kind, and [`RunEvent`] is one numbered event as every headend reads it, live or from the
//! store, on this replica or another: the typed event with its stored text, parsed once where
//! it is read. The store keeps each kind's name ([`AgentEvent::kind`]).

use serde::{Deserialize, Serialize};

// The run's results move into this vocabulary (issue 36); until then the events carry the agent's.
use crate::json_text::JsonText;
use crate::vocabulary::result::{AccountingEntry, EntryStatus, FinalReport, RunSummary};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunStarted {
    pub run_id: String,
    pub agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    pub created_at: String,
    /// The prompt's files (SPEC §11): metadata only, never their bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::vocabulary::Attachment>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TurnStarted {
    pub turn: u32,
    pub attempt: u32,
    pub is_retry: bool,
    pub is_final_turn: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forced_final_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TextDelta {
    pub text: String,
    /// This text replaces what the turn streamed before (a retried attempt that said something
    /// else than the one that broke off); absent when it follows it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replace: bool,
}

impl TextDelta {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            replace: false,
        }
    }

    /// Like [`TextDelta::appended_text`], taking the text without copying it.
    pub fn into_appended_text(self) -> String {
        if self.replace {
            format!("\n\n{}", self.text)
        } else {
            self.text
        }
    }

    /// The text for a client that can only append: a replacement starts after a blank line.
    pub fn appended_text(&self) -> std::borrow::Cow<'_, str> {
        if self.replace {
            std::borrow::Cow::Owned(format!("\n\n{}", self.text))
        } else {
            std::borrow::Cow::Borrowed(&self.text)
        }
    }
}

/// What a `progress` event reports; stored and sent by its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressKind {
    /// A child agent (a sub-agent, an advisor, a router's destination, a handoff) started.
    AgentStarted,
    /// A child agent ended; `message` says how (`completed`, or its exit reason).
    AgentFinished,
    /// The model's `agent__task_status` report, or a tool's own progress line.
    TaskStatus,
    /// The XML transport's progress slot.
    AgentUpdate,
    /// A message sent while the answer was running joined it (SPEC §13 `busy: steer`).
    MessageJoined,
    /// The run waits for earlier messages of its conversation (SPEC §13 `busy: enqueue`).
    Queued,
}

impl ProgressKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentStarted => "agent_started",
            Self::AgentFinished => "agent_finished",
            Self::TaskStatus => "task_status",
            Self::AgentUpdate => "agent_update",
            Self::MessageJoined => "message_joined",
            Self::Queued => "queued",
        }
    }

    /// The kind in words (`agent started`), for protocols that show progress as text.
    pub fn in_words(self) -> String {
        self.as_str().replace('_', " ")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Progress {
    pub kind: ProgressKind,
    pub agent: String,
    pub call_path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    /// For a sub-agent's `agent_started` / `agent_finished`: the model's call of its
    /// `agent__{name}` tool, which tells two calls of one agent in one turn apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// For `message_joined` (SPEC §13 `busy: steer`): the run whose message joined this
    /// answer, which follows it as its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined_run_id: Option<String>,
    /// For a sub-agent's `agent_finished`: the files its tools gave it, which reached the
    /// parent's model with its reply (metadata only, like `tool.finished`'s).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<super::Attachment>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolStarted {
    pub call_id: String,
    pub tool: String,
    pub server: String,
    pub arguments: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolFinished {
    pub call_id: String,
    pub tool: String,
    pub server: String,
    /// `ok`, or `failed` (the tool answered an error, timed out or could not be reached).
    pub status: EntryStatus,
    pub latency_ms: u64,
    pub chars_in: usize,
    pub chars_out: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The result the model received, cut at [`TOOL_OUTPUT_EVENT_BYTES`] (whole UTF-8
    /// characters); headends show it (Responses `mcp_call.output`, AG-UI, the web page).
    #[serde(default)]
    pub output: String,
    /// `true` when `output` was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_truncated: bool,
    /// `true` when the output came from the tool result cache (the tool was not called).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// How many tries the call took, when more than one (`retries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// The files the result carried (an MCP `image` or `resource`), as kept: their metadata,
    /// never their bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<super::Attachment>,
    /// The web pages the result named (an MCP `resource_link` or embedded resource with an
    /// http(s) URI): sources of the answer, by URL only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceLink>,
}

/// A web page a tool's result named as a source.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceLink {
    /// An `http` or `https` URL.
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl SourceLink {
    /// A source for `url` when it is an http(s) URL (a `file:` or custom URI names no page).
    pub fn web(url: &str, title: Option<String>) -> Option<Self> {
        let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
        (lower.starts_with("http://") || lower.starts_with("https://")).then(|| Self {
            url: url.to_string(),
            title,
        })
    }
}

/// How much of a tool's result `tool.finished` carries: events are stored and replayed, the
/// full result stays in the conversation.
pub const TOOL_OUTPUT_EVENT_BYTES: usize = 16 * 1024;

impl ToolFinished {
    /// `output` cut to [`TOOL_OUTPUT_EVENT_BYTES`] at a character boundary, and whether it was cut.
    pub fn bounded_output(text: &str) -> (String, bool) {
        if text.len() <= TOOL_OUTPUT_EVENT_BYTES {
            return (text.to_string(), false);
        }
        let mut end = TOOL_OUTPUT_EVENT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        (text[..end].to_string(), true)
    }
}

/// `tool.approval_requested`: a call waits for a person (SPEC §8); nothing was executed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApprovalRequested {
    pub call_id: String,
    pub tool: String,
    pub server: String,
    pub arguments: serde_json::Value,
    /// RFC 3339: when the wait ends as `expired` (denied).
    pub expires_at: String,
}

/// `tool.approval_decided`: how the wait for `call_id` ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApprovalDecided {
    pub call_id: String,
    /// `approve`, `deny` or `expired`.
    pub decision: String,
    /// Who decided: the user id (`admin` for an admin key without one), or `agentd` for expiry.
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ErrorEvent {
    pub code: String,
    pub message: String,
}

/// One event of a run, in the order the session produced it. Payloads larger than a text delta
/// are boxed: every run buffers events in channels that allocate 32 slots at a time, so the
/// enum's size is paid per open stream (336 bytes unboxed, 56 boxed).
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    RunStarted(Box<RunStarted>),
    TurnStarted(TurnStarted),
    Output(TextDelta),
    Thinking(TextDelta),
    Progress(Box<Progress>),
    ToolStarted(Box<ToolStarted>),
    ToolFinished(Box<ToolFinished>),
    Accounting(Box<AccountingEntry>),
    FinalReport(Box<FinalReport>),
    RunFinished(Box<RunSummary>),
    Error(ErrorEvent),
    ApprovalRequested(Box<ApprovalRequested>),
    ApprovalDecided(Box<ApprovalDecided>),
    /// The run reached its budget (SPEC §14).
    BudgetExceeded(Box<crate::vocabulary::budget::BudgetExceeded>),
}

impl AgentEvent {
    /// The SSE `event:` name of SPEC §4.2.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RunStarted(_) => "run.started",
            Self::TurnStarted(_) => "turn.started",
            Self::Output(_) => "output",
            Self::Thinking(_) => "thinking",
            Self::Progress(_) => "progress",
            Self::ToolStarted(_) => "tool.started",
            Self::ToolFinished(_) => "tool.finished",
            Self::Accounting(_) => "accounting",
            Self::FinalReport(_) => "final_report",
            Self::RunFinished(_) => "run.finished",
            Self::Error(_) => "error",
            Self::ApprovalRequested(_) => "tool.approval_requested",
            Self::ApprovalDecided(_) => "tool.approval_decided",
            Self::BudgetExceeded(_) => "run.budget_exceeded",
        }
    }

    /// The event's `data`, serialized once (stored and streamed as this text).
    pub fn data(&self) -> JsonText {
        match self {
            Self::RunStarted(d) => JsonText::of(d),
            Self::TurnStarted(d) => JsonText::of(d),
            Self::Output(d) | Self::Thinking(d) => JsonText::of(d),
            Self::Progress(d) => JsonText::of(d),
            Self::ToolStarted(d) => JsonText::of(d),
            Self::ToolFinished(d) => JsonText::of(d),
            Self::Accounting(d) => JsonText::of(d),
            Self::FinalReport(d) => JsonText::of(d),
            Self::RunFinished(d) => JsonText::of(d),
            Self::Error(d) => JsonText::of(d),
            Self::ApprovalRequested(d) => JsonText::of(d),
            Self::ApprovalDecided(d) => JsonText::of(d),
            Self::BudgetExceeded(d) => JsonText::of(d),
        }
    }

    /// The event as it was stored (`kind`, `data`): how a run that continued elsewhere (after
    /// waiting for an approval) reaches the headend that started it. `None` for an unknown kind
    /// or data that does not fit it.
    pub fn from_stored(kind: &str, data: &str) -> Option<Self> {
        fn parse<T: serde::de::DeserializeOwned>(data: &str) -> Option<T> {
            serde_json::from_str(data).ok()
        }
        Some(match kind {
            "run.started" => Self::RunStarted(parse(data)?),
            "turn.started" => Self::TurnStarted(parse(data)?),
            "output" => Self::Output(parse(data)?),
            "thinking" => Self::Thinking(parse(data)?),
            "progress" => Self::Progress(parse(data)?),
            "tool.started" => Self::ToolStarted(parse(data)?),
            "tool.finished" => Self::ToolFinished(parse(data)?),
            "accounting" => Self::Accounting(parse(data)?),
            "final_report" => Self::FinalReport(parse(data)?),
            "run.finished" => Self::RunFinished(parse(data)?),
            "error" => Self::Error(parse(data)?),
            "tool.approval_requested" => Self::ApprovalRequested(parse(data)?),
            "tool.approval_decided" => Self::ApprovalDecided(parse(data)?),
            "run.budget_exceeded" => Self::BudgetExceeded(parse(data)?),
            _ => return None,
        })
    }
}

/// One numbered event of a run: the typed event, and its `data` as the store keeps it (the SSE
/// `id` of SPEC §4.2 is `seq`). The one form in which a run's events reach a headend, whether
/// they come from the session here, this replica's memory or the store.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvent {
    pub seq: i64,
    pub event: AgentEvent,
    /// The event's data as text: what is stored and what the runs API streams.
    pub data: JsonText,
}

impl RunEvent {
    /// Event `seq` of a run, its data serialized once.
    pub fn new(seq: i64, event: AgentEvent) -> Self {
        let data = event.data();
        Self { seq, event, data }
    }

    /// A stored event (`kind`, `data`), parsed once; `None` for an unknown kind or data that
    /// does not fit it.
    pub fn from_stored(seq: i64, kind: &str, data: JsonText) -> Option<Self> {
        let event = AgentEvent::from_stored(kind, data.as_str())?;
        Some(Self { seq, event, data })
    }

    /// The SSE `event:` name of SPEC §4.2.
    pub fn kind(&self) -> &'static str {
        self.event.kind()
    }

    /// An `output` or `thinking` delta's text as the JSON string (quoted and escaped) its data
    /// holds, when the data is `{"text":…}` alone (not a `replace`, and as serialised here, not
    /// re-spaced by a store): a frame carrying the text copies these bytes instead of escaping
    /// the text a second time.
    pub fn text_json(&self) -> Option<&str> {
        match &self.event {
            AgentEvent::Output(delta) | AgentEvent::Thinking(delta) if !delta.replace => self
                .data
                .as_str()
                .strip_prefix(r#"{"text":"#)?
                .strip_suffix('}'),
            _ => None,
        }
    }

    /// Whether this is the run's last event (`run.finished`).
    pub fn is_run_finished(&self) -> bool {
        matches!(self.event, AgentEvent::RunFinished(_))
    }

    /// Whether a call waits for a person here (`tool.approval_requested`).
    pub fn is_approval_requested(&self) -> bool {
        matches!(self.event, AgentEvent::ApprovalRequested(_))
    }
}

/// Events written as their kind and the fields a test cares about, the rest filled with plain
/// values: the stored rows of unit and golden tests.
#[cfg(test)]
pub mod fixtures {
    use serde_json::{Value, json};

    use super::AgentEvent;

    /// The fields every event of `kind` must have.
    fn base(kind: &str) -> Value {
        match kind {
            "run.started" => {
                json!({"run_id": "r", "agent": "a", "created_at": "2026-01-01T00:00:00Z"})
            }
            "turn.started" => {
                json!({"turn": 1, "attempt": 1, "is_retry": false, "is_final_turn": false})
            }
            "output" | "thinking" => json!({"text": ""}),
            "progress" => json!({"kind": "status", "agent": "a", "call_path": "a"}),
            "tool.started" => json!({"call_id": "", "tool": "", "server": "", "arguments": {}}),
            "tool.finished" => json!({"call_id": "", "tool": "", "server": "", "status": "ok",
                "latency_ms": 0, "chars_in": 0, "chars_out": 0}),
            "tool.approval_requested" => json!({"call_id": "", "tool": "", "server": "",
                "arguments": {}, "expires_at": "2026-01-01T00:05:00Z"}),
            "tool.approval_decided" => json!({"call_id": "", "decision": "approve", "by": "admin"}),
            "final_report" => json!({"status": "success", "format": "text", "ts": 0}),
            "run.finished" => json!({"status": "completed", "success": true,
                "exit_reason": "final_answer", "cost_usd": 0.0, "turns": 1, "duration_ms": 0,
                "usage": {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "total_tokens": 0}}),
            "error" => json!({"code": "", "message": ""}),
            _ => json!({}),
        }
    }

    fn merge(into: &mut Value, from: Value) {
        match (into, from) {
            (Value::Object(into), Value::Object(from)) => {
                for (key, value) in from {
                    match into.get_mut(&key) {
                        Some(slot) if slot.is_object() && value.is_object() => merge(slot, value),
                        _ => drop(into.insert(key, value)),
                    }
                }
            }
            (into, from) => *into = from,
        }
    }

    /// The event of `kind` with `fields` over the plain ones.
    pub fn event(kind: &str, fields: Value) -> AgentEvent {
        let mut data = base(kind);
        merge(&mut data, fields);
        let text = data.to_string();
        AgentEvent::from_stored(kind, &text)
            .unwrap_or_else(|| panic!("no `{kind}` event from {text}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_events_read_back_as_the_events_they_were() {
        let events = [
            AgentEvent::Output(TextDelta::new("hi")),
            AgentEvent::ApprovalDecided(Box::new(ApprovalDecided {
                call_id: "c1".into(),
                decision: "deny".into(),
                by: "alice".into(),
                reason: Some("no".into()),
            })),
        ];
        for event in events {
            let data = event.data();
            assert_eq!(
                AgentEvent::from_stored(event.kind(), data.as_str()),
                Some(event)
            );
        }
        assert_eq!(AgentEvent::from_stored("nope", "{}"), None);
    }

    #[test]
    fn tool_output_is_kept_whole_up_to_the_bound_and_cut_at_a_character_past_it() {
        let at_bound = "a".repeat(TOOL_OUTPUT_EVENT_BYTES);
        assert_eq!(
            ToolFinished::bounded_output(&at_bound),
            (at_bound.clone(), false)
        );
        let past = format!("{}é", "a".repeat(TOOL_OUTPUT_EVENT_BYTES - 1));
        let (cut, truncated) = ToolFinished::bounded_output(&past);
        assert!(truncated);
        assert_eq!(cut.len(), TOOL_OUTPUT_EVENT_BYTES - 1, "é is not split");
    }
}
