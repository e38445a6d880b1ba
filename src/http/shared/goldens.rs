//! Golden tests of every headend's translator: the same stored runs — a plain answer,
//! thinking, tool calls, client tools, an approval wait, a failure, a cancel — rendered by
//! each translator into insta snapshots (`src/http/shared/snapshots/`), so a change to any
//! protocol's frames shows in review. Each headend's tests call [`each`] with its translator.

use std::sync::LazyLock;

use serde_json::json;

use super::drive::{Frame, Translator, translate_all};
use crate::vocabulary::RunEvent;
use crate::vocabulary::events::fixtures::event;

/// The run every fixture is of.
pub const RUN_ID: &str = "0192f0c0-0000-7000-8000-000000000001";

/// The stored runs, by name: their events as the store would give them back.
pub fn fixtures() -> Vec<(&'static str, Vec<RunEvent>)> {
    let started = || event("run.started", json!({"run_id": RUN_ID, "agent": "helper"}));
    let turn = |n: u32| event("turn.started", json!({"turn": n}));
    let text = |t: &str| event("output", json!({"text": t}));
    let report = |t: &str| event("final_report", json!({"content": t}));
    let finished = |fields| event("run.finished", fields);
    let usage =
        json!({"input_tokens": 12, "output_tokens": 5, "cached_tokens": 0, "total_tokens": 17});
    let runs = vec![
        (
            "plain",
            vec![
                started(),
                turn(1),
                text("Hello"),
                text(" world"),
                report("Hello world"),
                finished(json!({"usage": usage, "cost_usd": 0.001})),
            ],
        ),
        (
            "thinking",
            vec![
                started(),
                turn(1),
                event("thinking", json!({"text": "Six times seven"})),
                text("42"),
                report("42"),
                finished(json!({"usage": usage})),
            ],
        ),
        (
            "tool_calls",
            vec![
                started(),
                turn(1),
                text("Checking."),
                event(
                    "tool.started",
                    json!({"call_id": "t1", "tool": "now", "server": "clock",
                "arguments": {"zone": "UTC"}}),
                ),
                event(
                    "tool.finished",
                    json!({"call_id": "t1", "tool": "now", "server": "clock",
                "status": "ok", "output": "12:00"}),
                ),
                turn(2),
                text("It is noon."),
                report("It is noon."),
                finished(json!({"turns": 2, "usage": usage})),
            ],
        ),
        (
            "client_tools",
            vec![
                started(),
                turn(1),
                finished(
                    json!({"exit_reason": "client_tool_calls", "client_tool_calls": [
                {"id": "call_w", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
                ),
            ],
        ),
        (
            "approval_wait",
            vec![
                started(),
                turn(1),
                event(
                    "tool.approval_requested",
                    json!({"call_id": "c1", "tool": "delete_file",
                "server": "files", "arguments": {"path": "/tmp/x"}}),
                ),
            ],
        ),
        (
            "failure",
            vec![
                started(),
                turn(1),
                event(
                    "error",
                    json!({"code": "llm_error", "message": "upstream 500"}),
                ),
                event(
                    "final_report",
                    json!({"status": "failure", "content": "The model could not be reached."}),
                ),
                finished(
                    json!({"status": "failed", "success": false, "exit_reason": "llm_error",
                "error": "upstream 500"}),
                ),
            ],
        ),
        (
            "cancel",
            vec![
                started(),
                turn(1),
                text("Partial"),
                finished(
                    json!({"status": "cancelled", "success": false, "exit_reason": "cancelled"}),
                ),
            ],
        ),
    ];
    runs.into_iter()
        .map(|(name, events)| {
            let numbered = (1..)
                .zip(events)
                .map(|(seq, e)| RunEvent::new(seq, e))
                .collect();
            (name, numbered)
        })
        .collect()
}

/// RFC 3339 times a translator stamps with its clock.
static NOW: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
        .unwrap_or_else(|error| panic!("{error}"))
});

/// The frames `events` become, as they go on the wire (clock times masked).
pub fn render<T: Translator>(mut translator: T, events: &[RunEvent]) -> String {
    let wire: String = translate_all(&mut translator, events)
        .iter()
        .map(|frame| format!("{}\n", Frame::to_wire(frame)))
        .collect();
    NOW.replace_all(&wire, "<time>").into_owned()
}

/// Every fixture through a fresh translator of `headend`, each checked against its snapshot.
pub fn each<T: Translator>(headend: &str, translator: impl Fn() -> T) {
    for (name, events) in fixtures() {
        insta::assert_snapshot!(format!("{headend}__{name}"), render(translator(), &events));
    }
}
