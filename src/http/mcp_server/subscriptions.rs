//! MCP 2026-07-28 `subscriptions/listen` with the Tasks extension's `taskIds` filter: the
//! client names tasks (runs) it wants status notifications for and gets, on the request's SSE
//! stream, `notifications/subscriptions/acknowledged` naming the tasks it will hear about (those
//! the key may see; others are left out, as the revision asks), then one `notifications/tasks`
//! per task with its current state (the `DetailedTask` `tasks/get` would answer) and another
//! each time that changes, whichever replica runs it. When every such task has ended the
//! subscription ends with its result. agentd offers no other notification (its tool list
//! changes only with a reload), so a filter asking only for others is acknowledged empty and
//! ends at once. Progress never goes on this stream (the revision forbids it for tasks).

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::modern::{McpError, missing_tasks_extension, task_run, task_view, wants_tasks};
use crate::http::auth::Caller;
use crate::http::shared::drive::Frame;
use crate::http::sse::sse_response;
use crate::runtime::Runtime;
use crate::store::RunRecord;

/// The `_meta` key naming the subscription a message belongs to (the listen request's id).
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The most tasks one subscription may name.
pub const MAX_SUBSCRIBED_TASKS: usize = 100;

/// Opens the subscription `params.notifications` asks for, on an SSE stream.
pub(super) async fn listen(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    params: &Value,
    id: Value,
) -> Result<Response, McpError> {
    let filter = params
        .get("notifications")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            McpError::invalid_params(
                "params.notifications: missing or not an object (the notifications this stream opts in to)",
            )
        })?;
    let task_ids = requested_task_ids(filter)?;
    if task_ids.is_some() && !wants_tasks(params) {
        return Err(missing_tasks_extension(
            "`notifications.taskIds` asks for task status notifications".into(),
        ));
    }
    let mut runs: Vec<RunRecord> = Vec::new();
    for task_id in task_ids.iter().flatten() {
        if runs.iter().any(|run| &run.id == task_id) {
            continue;
        }
        // A task this key may not see, or none at all, is left out of the acknowledgement.
        if let Ok(run) = task_run(runtime, caller, task_id).await {
            runs.push(run);
        }
    }
    let mut honoured = Map::new();
    if task_ids.is_some() {
        let ids: Vec<&str> = runs.iter().map(|run| run.id.as_str()).collect();
        honoured.insert("taskIds".into(), json!(ids));
    }
    let acknowledged = json!({
        "jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {SUBSCRIPTION_ID: id}, "notifications": honoured},
    });
    let frames =
        futures_util::stream::once(std::future::ready(Frame::data(acknowledged.to_string())))
            .chain(task_notifications(runtime, runs, id));
    Ok(sse_response(
        runtime,
        frames.map(|frame| Ok(frame.into_sse())),
    ))
}

/// `notifications.taskIds`, when given: a list of task ids.
fn requested_task_ids(filter: &Map<String, Value>) -> Result<Option<Vec<String>>, McpError> {
    let Some(value) = filter.get("taskIds") else {
        return Ok(None);
    };
    let invalid = || {
        McpError::invalid_params(format!(
            "params.notifications.taskIds: must be a list of at most {MAX_SUBSCRIBED_TASKS} task ids"
        ))
    };
    let ids = value.as_array().ok_or_else(invalid)?;
    if ids.len() > MAX_SUBSCRIBED_TASKS {
        return Err(invalid());
    }
    ids.iter()
        .map(|id| id.as_str().filter(|id| !id.is_empty()).map(str::to_string))
        .collect::<Option<Vec<String>>>()
        .map(Some)
        .ok_or_else(invalid)
}

/// The `notifications/tasks` of `runs` as their states change, then the subscription's result
/// (or an error, when the store could not be read).
fn task_notifications(
    runtime: &Arc<Runtime>,
    runs: Vec<RunRecord>,
    id: Value,
) -> impl futures_util::Stream<Item = Frame> + Send + 'static + use<> {
    let runtime = runtime.clone();
    async_stream::stream! {
        let records = runtime.watch_runs(runs);
        tokio::pin!(records);
        let mut sent: HashMap<String, Value> = HashMap::new();
        while let Some(record) = records.next().await {
            let view = match record {
                Ok(run) => task_view(&runtime, &run).await,
                Err(_) => Err(McpError::internal("the tasks could not be read")),
            };
            let mut view = match view {
                Ok(view) => view,
                Err(_) => {
                    yield Frame::data(json!({
                        "jsonrpc": "2.0", "id": id,
                        "error": {"code": -32603, "message": "the tasks could not be read: listen again"},
                    }).to_string());
                    return;
                }
            };
            let task_id = view["taskId"].as_str().unwrap_or_default().to_string();
            if sent.get(&task_id) == Some(&view) {
                continue;
            }
            sent.insert(task_id, view.clone());
            view["_meta"] = json!({SUBSCRIPTION_ID: id});
            yield Frame::data(json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": view}).to_string());
        }
        yield Frame::data(json!({
            "jsonrpc": "2.0", "id": id,
            "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: id}},
        }).to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn task_ids_are_a_bounded_list_of_non_empty_strings() {
        assert_eq!(requested_task_ids(&filter(json!({}))).ok(), Some(None));
        assert_eq!(
            requested_task_ids(&filter(json!({"taskIds": ["a", "b"]}))).ok(),
            Some(Some(vec!["a".to_string(), "b".to_string()]))
        );
        for bad in [json!("a"), json!([1]), json!([""])] {
            assert!(requested_task_ids(&filter(json!({"taskIds": bad}))).is_err());
        }
        let at_limit: Vec<String> = (0..MAX_SUBSCRIBED_TASKS).map(|i| i.to_string()).collect();
        assert!(requested_task_ids(&filter(json!({"taskIds": at_limit}))).is_ok());
        let past: Vec<String> = (0..=MAX_SUBSCRIBED_TASKS).map(|i| i.to_string()).collect();
        assert!(requested_task_ids(&filter(json!({"taskIds": past}))).is_err());
    }
}
