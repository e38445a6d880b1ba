//! The internal tools a report-mode session offers beside its real ones (namespace `agent`):
//! `agent__task_status` (progress reports; `completed` forces the final turn) and `agent__batch`
//! (several tool calls in one, run in parallel, answered with per-call results).

use serde_json::{Map, Value, json};

use crate::llm::ToolDefinition;

pub const TASK_STATUS_TOOL: &str = "agent__task_status";
pub const BATCH_TOOL: &str = "agent__batch";

pub fn task_status_definition() -> ToolDefinition {
    ToolDefinition {
        name: TASK_STATUS_TOOL.into(),
        description: "Report your progress to the user. Set status `completed` (with ready_for_final_report true and \
                      need_to_run_more_tools false) when you have everything for the final report."
            .into(),
        parameters: json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["status", "now"],
            "properties": {
                "status": {"type": "string", "enum": ["starting", "in-progress", "completed"]},
                "done": {"type": "string", "description": "What is finished."},
                "pending": {"type": "string", "description": "What remains."},
                "now": {"type": "string", "description": "What you are doing now."},
                "ready_for_final_report": {"type": "boolean"},
                "need_to_run_more_tools": {"type": "boolean"}
            }
        }),
    }
}

/// The batch tool, with `tool` restricted to the callable tools' names.
pub fn batch_definition(tools: &[ToolDefinition]) -> ToolDefinition {
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    ToolDefinition {
        name: BATCH_TOOL.into(),
        description:
            "Run several tool calls at once, in parallel. Each result comes back under its id."
                .into(),
        parameters: json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["calls"],
            "properties": {
                "calls": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["id", "tool", "parameters"],
                        "properties": {
                            "id": {"type": ["string", "integer"]},
                            "tool": {"type": "string", "enum": names},
                            "parameters": {"type": "object"}
                        }
                    }
                }
            }
        }),
    }
}

/// A parsed `agent__task_status` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStatus {
    pub status: String,
    pub done: Option<String>,
    pub pending: Option<String>,
    pub now: Option<String>,
    pub ready_for_final_report: bool,
    pub need_to_run_more_tools: bool,
}

impl TaskStatus {
    pub fn parse(arguments: &Map<String, Value>) -> Result<Self, String> {
        let text = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let status =
            text("status").ok_or("`status` is required: starting, in-progress or completed")?;
        if !["starting", "in-progress", "completed"].contains(&status.as_str()) {
            return Err(format!(
                "`status` {status:?} is not one of starting, in-progress, completed"
            ));
        }
        let flag = |key: &str| arguments.get(key).and_then(Value::as_bool).unwrap_or(false);
        Ok(Self {
            status,
            done: text("done"),
            pending: text("pending"),
            now: text("now"),
            ready_for_final_report: flag("ready_for_final_report"),
            // Unless the model says it is done with tools, assume it is not.
            need_to_run_more_tools: arguments
                .get("need_to_run_more_tools")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        })
    }

    /// Completed, ready, and no more tools needed: the next turn is the final one.
    pub fn completes_the_task(&self) -> bool {
        self.status == "completed" && self.ready_for_final_report && !self.need_to_run_more_tools
    }

    /// What the model gets back.
    pub fn reply(&self) -> String {
        json!({"status": self.status, "taskStatusCompleted": self.completes_the_task()}).to_string()
    }
}

/// One call inside a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchCall {
    pub id: Value,
    pub tool: String,
    pub parameters: Map<String, Value>,
}

/// A call inside a batch that will not run, with the error its result carries.
#[derive(Debug, Clone, PartialEq)]
pub struct RejectedCall {
    pub id: Value,
    pub tool: String,
    pub error: String,
}

pub type BatchItem = Result<BatchCall, RejectedCall>;

/// Parses `agent__batch` arguments; per-call problems are returned as error results.
pub fn parse_batch(arguments: &Map<String, Value>) -> Result<Vec<BatchItem>, String> {
    let calls = arguments
        .get("calls")
        .and_then(Value::as_array)
        .filter(|calls| !calls.is_empty())
        .ok_or("`calls` must be a non-empty array")?;
    Ok(calls
        .iter()
        .enumerate()
        .map(|(index, call)| parse_batch_call(index, call))
        .collect())
}

fn parse_batch_call(index: usize, call: &Value) -> BatchItem {
    let id = call.get("id").cloned().unwrap_or_else(|| json!(index + 1));
    let tool = call
        .get("tool")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let reject = |id: Value, tool: String, error: String| Err(RejectedCall { id, tool, error });
    if tool.is_empty() {
        return reject(id, tool, "each call needs a `tool`".into());
    }
    if tool == BATCH_TOOL
        || tool == TASK_STATUS_TOOL
        || tool == super::final_report::FINAL_REPORT_TOOL
        || tool == super::output_handles::TOOL_OUTPUT_TOOL
    {
        let error = format!("INTERNAL_NOT_ALLOWED: {tool} cannot run inside a batch");
        return reject(id, tool, error);
    }
    let parameters = match call.get("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return reject(id, tool, "`parameters` must be an object".into()),
    };
    Ok(BatchCall {
        id,
        tool,
        parameters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("object")
    }

    #[test]
    fn task_status_completion_needs_all_three_signals() {
        let done = TaskStatus::parse(&object(json!({"status": "completed", "now": "x", "ready_for_final_report": true, "need_to_run_more_tools": false}))).expect("valid");
        assert!(done.completes_the_task());
        assert_eq!(
            done.reply(),
            r#"{"status":"completed","taskStatusCompleted":true}"#
        );
        let not_ready =
            TaskStatus::parse(&object(json!({"status": "completed", "now": "x"}))).expect("valid");
        assert!(!not_ready.completes_the_task());
        assert!(
            TaskStatus::parse(&object(json!({"status": "finished"})))
                .unwrap_err()
                .contains("finished")
        );
        assert!(TaskStatus::parse(&object(json!({}))).is_err());
    }

    #[test]
    fn batches_reject_internal_tools_and_bad_calls_per_call() {
        let parsed = parse_batch(&object(json!({"calls": [
            {"id": "a", "tool": "t__x", "parameters": {"k": 1}},
            {"id": 2, "tool": "agent__batch", "parameters": {}},
            {"id": "c", "tool": "agent__final_report", "parameters": {}},
            {"id": "d", "parameters": {}},
            {"id": "e", "tool": "t__y", "parameters": 5}
        ]})))
        .expect("batch");
        assert_eq!(
            parsed[0],
            Ok(BatchCall {
                id: json!("a"),
                tool: "t__x".into(),
                parameters: object(json!({"k": 1}))
            })
        );
        assert!(
            matches!(&parsed[1], Err(r) if r.id == json!(2) && r.error.starts_with("INTERNAL_NOT_ALLOWED"))
        );
        assert!(matches!(&parsed[2], Err(r) if r.error.starts_with("INTERNAL_NOT_ALLOWED")));
        assert!(parsed[3].is_err() && parsed[4].is_err());
        assert!(parse_batch(&object(json!({"calls": []}))).is_err());
    }
}
