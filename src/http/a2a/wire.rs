//! A2A wire shapes (ProtoJSON of A2A v1.0, camelCase, enum names like `TASK_STATE_COMPLETED`)
//! and their 0.3 spellings (`kind` fields, lowercase states and roles) for clients that call the
//! 0.3 method names. Only what agentd sends or reads is modelled.

use crate::http::shared::attachments::ChatAttachment;
use crate::vocabulary::RunStatus;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Which protocol revision a request used; answers are spelled the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    V1,
    V03,
}

/// A task's state in agentd's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Canceled,
}

impl TaskState {
    /// From a run's stored status (SPEC §4.2).
    pub fn from_run_status(status: RunStatus) -> Self {
        match status {
            RunStatus::Queued => Self::Submitted,
            RunStatus::Running => Self::Working,
            // Waiting for a person either way: a decision, or a raise of the run's budget.
            RunStatus::WaitingApproval | RunStatus::WaitingBudget => Self::InputRequired,
            RunStatus::Completed => Self::Completed,
            RunStatus::Failed => Self::Failed,
            RunStatus::Cancelled => Self::Canceled,
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Canceled)
    }

    pub fn name(self, dialect: Dialect) -> &'static str {
        match (self, dialect) {
            (Self::Submitted, Dialect::V1) => "TASK_STATE_SUBMITTED",
            (Self::Working, Dialect::V1) => "TASK_STATE_WORKING",
            (Self::InputRequired, Dialect::V1) => "TASK_STATE_INPUT_REQUIRED",
            (Self::Completed, Dialect::V1) => "TASK_STATE_COMPLETED",
            (Self::Failed, Dialect::V1) => "TASK_STATE_FAILED",
            (Self::Canceled, Dialect::V1) => "TASK_STATE_CANCELED",
            (Self::Submitted, Dialect::V03) => "submitted",
            (Self::Working, Dialect::V03) => "working",
            (Self::InputRequired, Dialect::V03) => "input-required",
            (Self::Completed, Dialect::V03) => "completed",
            (Self::Failed, Dialect::V03) => "failed",
            (Self::Canceled, Dialect::V03) => "canceled",
        }
    }

    /// A state filter as a client writes it (either spelling).
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "TASK_STATE_SUBMITTED" | "submitted" => Self::Submitted,
            "TASK_STATE_WORKING" | "working" => Self::Working,
            "TASK_STATE_INPUT_REQUIRED" | "input-required" => Self::InputRequired,
            "TASK_STATE_COMPLETED" | "completed" => Self::Completed,
            "TASK_STATE_FAILED" | "failed" => Self::Failed,
            "TASK_STATE_CANCELED" | "canceled" => Self::Canceled,
            _ => return None,
        })
    }

    /// The run status this state is stored as.
    pub fn run_status(self) -> &'static str {
        match self {
            Self::Submitted => "queued",
            Self::Working => "running",
            Self::InputRequired => "waiting_approval",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Canceled => "cancelled",
        }
    }
}

/// A message part as a client sends it: text, structured data, or a file (either revision:
/// v1.0 `raw` or `url` with `mediaType` and `filename`; 0.3 `file: {bytes | uri, mimeType,
/// name}`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IncomingPart {
    pub text: Option<String>,
    pub data: Option<Value>,
    #[serde(default)]
    pub raw: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub filename: Option<String>,
    #[serde(default)]
    pub file: Option<Value>,
}

impl IncomingPart {
    /// The part's file in the per-user chat's shape, when it is a file part.
    fn attachment(&self) -> Option<ChatAttachment> {
        if let Some(file) = &self.file {
            let text = |key: &str| file.get(key).and_then(Value::as_str).map(str::to_string);
            return Some(ChatAttachment {
                name: text("name"),
                media_type: text("mimeType"),
                data: text("bytes"),
                url: text("uri"),
                file_id: None,
            });
        }
        (self.raw.is_some() || self.url.is_some()).then(|| ChatAttachment {
            name: self.filename.clone(),
            media_type: self.media_type.clone(),
            data: self.raw.clone(),
            url: self.url.clone(),
            file_id: None,
        })
    }
}

/// A client's message.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IncomingMessage {
    #[serde(default)]
    pub message_id: Option<String>,
    #[serde(default)]
    pub context_id: Option<String>,
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub parts: Vec<IncomingPart>,
}

impl IncomingMessage {
    /// The message's file parts, each with its path (`message.parts[i]`).
    pub fn files(&self) -> Vec<(String, ChatAttachment)> {
        self.parts
            .iter()
            .enumerate()
            .filter_map(|(index, part)| {
                part.attachment()
                    .map(|file| (format!("message.parts[{index}]"), file))
            })
            .collect()
    }

    /// The prompt: the text parts in order, data parts as JSON text.
    pub fn prompt(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match (&part.text, &part.data) {
                (Some(text), _) => Some(text.clone()),
                (None, Some(data)) => {
                    // 0.3 wraps data as {"data": {...}}; v1.0 has the value itself.
                    Some(data.to_string())
                }
                (None, None) => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `SendMessage` / `message/send` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendParams {
    pub message: IncomingMessage,
    #[serde(default)]
    pub configuration: Option<SendConfiguration>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendConfiguration {
    /// v1.0: answer at once with the submitted task.
    #[serde(default)]
    pub return_immediately: Option<bool>,
    /// 0.3: `blocking: false` means the same.
    #[serde(default)]
    pub blocking: Option<bool>,
    #[serde(default)]
    pub history_length: Option<u32>,
    /// v1.0: a push-notification config for the task this message starts.
    #[serde(default)]
    pub task_push_notification_config: Option<super::push::IncomingConfig>,
    /// 0.3: the same.
    #[serde(default)]
    pub push_notification_config: Option<super::push::IncomingConfig>,
}

/// `GetTask`, `CancelTask`, `SubscribeToTask` parameters (0.3: `tasks/get`, …).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskParams {
    pub id: String,
    #[serde(default)]
    pub history_length: Option<u32>,
}

/// `ListTasks` parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    #[serde(default)]
    pub context_id: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub page_size: Option<u32>,
    #[serde(default)]
    pub page_token: Option<String>,
    #[serde(default)]
    pub history_length: Option<u32>,
}

/// A text part.
pub fn text_part(text: &str, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V1 => json!({"text": text}),
        Dialect::V03 => json!({"kind": "text", "text": text}),
    }
}

/// A structured-data part.
pub fn data_part(data: &Value, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V1 => json!({"data": data, "mediaType": "application/json"}),
        Dialect::V03 => json!({"kind": "data", "data": data}),
    }
}

/// A message from the agent (`agent == true`) or the user.
pub fn message(
    id: &str,
    task_id: &str,
    context_id: &str,
    agent: bool,
    parts: Vec<Value>,
    dialect: Dialect,
) -> Value {
    let role = match (agent, dialect) {
        (true, Dialect::V1) => "ROLE_AGENT",
        (false, Dialect::V1) => "ROLE_USER",
        (true, Dialect::V03) => "agent",
        (false, Dialect::V03) => "user",
    };
    let mut message = json!({
        "messageId": id, "taskId": task_id, "contextId": context_id, "role": role, "parts": parts,
    });
    if dialect == Dialect::V03 {
        message["kind"] = json!("message");
    }
    message
}

/// A task status; `note` becomes its agent message.
pub fn status(state: TaskState, note: Option<Value>, timestamp: &str, dialect: Dialect) -> Value {
    let mut status = json!({"state": state.name(dialect), "timestamp": timestamp});
    if let Some(note) = note {
        status["message"] = note;
    }
    status
}

/// A whole task.
pub struct TaskView {
    pub id: String,
    pub context_id: String,
    pub status: Value,
    pub artifacts: Vec<Value>,
    pub history: Vec<Value>,
    pub metadata: Map<String, Value>,
}

impl TaskView {
    pub fn to_json(&self, dialect: Dialect) -> Value {
        let mut task = json!({
            "id": self.id, "contextId": self.context_id, "status": self.status,
        });
        if !self.artifacts.is_empty() {
            task["artifacts"] = json!(self.artifacts);
        }
        if !self.history.is_empty() {
            task["history"] = json!(self.history);
        }
        if !self.metadata.is_empty() {
            task["metadata"] = Value::Object(self.metadata.clone());
        }
        if dialect == Dialect::V03 {
            task["kind"] = json!("task");
        }
        task
    }
}

/// The artifact holding a run's final report.
pub fn report_artifact(
    content: Option<&str>,
    content_json: Option<&Value>,
    dialect: Dialect,
) -> Value {
    let mut parts = Vec::new();
    if let Some(json) = content_json {
        parts.push(data_part(json, dialect));
    }
    if let Some(text) = content.filter(|t| !t.is_empty()) {
        parts.push(text_part(text, dialect));
    }
    json!({"artifactId": "final_report", "name": "final_report", "parts": parts})
}

/// One frame of a stream: a task, a status update or an artifact update.
pub enum StreamFrame {
    Task(Value),
    Status {
        task_id: String,
        context_id: String,
        status: Value,
        terminal: bool,
        /// The run's usage and cost on the final status.
        metadata: Option<Value>,
    },
    Artifact {
        task_id: String,
        context_id: String,
        artifact: Value,
    },
}

impl StreamFrame {
    /// The `result` of the JSON-RPC response carrying this frame.
    pub fn to_json(&self, dialect: Dialect) -> Value {
        match (self, dialect) {
            (Self::Task(task), Dialect::V1) => json!({"task": task}),
            (Self::Task(task), Dialect::V03) => task.clone(),
            (
                Self::Status {
                    task_id,
                    context_id,
                    status,
                    terminal,
                    metadata,
                },
                dialect,
            ) => {
                let mut update =
                    json!({"taskId": task_id, "contextId": context_id, "status": status});
                if let Some(metadata) = metadata {
                    update["metadata"] = metadata.clone();
                }
                match dialect {
                    Dialect::V1 => json!({"statusUpdate": update}),
                    Dialect::V03 => {
                        update["kind"] = json!("status-update");
                        update["final"] = json!(terminal);
                        update
                    }
                }
            }
            (
                Self::Artifact {
                    task_id,
                    context_id,
                    artifact,
                },
                Dialect::V1,
            ) => json!({"artifactUpdate": {"taskId": task_id, "contextId": context_id,
                        "artifact": artifact, "lastChunk": true}}),
            (
                Self::Artifact {
                    task_id,
                    context_id,
                    artifact,
                },
                Dialect::V03,
            ) => json!({"kind": "artifact-update", "taskId": task_id, "contextId": context_id,
                        "artifact": artifact, "lastChunk": true}),
        }
    }
}
