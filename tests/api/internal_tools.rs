//! Internal tools and user scoping: `agent__task_status` (progress, completion forces the final
//! turn), `agent__batch` (parallel calls, per-call results, no internal tools inside, the turn's
//! call limit) and `userScoped` agents (the caller's user_id overrides the model's).

use agentd::agent::AgentEvent;
use agentd::llm::Role;
use agentd::vocabulary::result::AccountingEntry;
use serde_json::{Value, json};

use crate::support::scripted::{Harness, agent, calls, final_report};

fn reply(result: &agentd::agent::AgentResult, id: &str) -> String {
    result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some(id))
        .and_then(|m| m.content.clone())
        .expect("reply")
}

#[tokio::test]
async fn a_completed_task_status_reports_progress_and_forces_the_final_turn() {
    let status = json!({"status": "completed", "done": "searched", "pending": "nothing", "now": "writing the report",
        "ready_for_final_report": true, "need_to_run_more_tools": false})
    .to_string();
    let harness = Harness::new(vec![
        calls(&[("s", "agent__task_status", &status)]),
        final_report("markdown", "done"),
    ]);
    let (result, events) = harness
        .run(Harness::request(agent("maxTurns: 10"), "go"))
        .await;
    assert!(result.success);
    assert_eq!(
        reply(&result, "s"),
        r#"{"status":"completed","taskStatusCompleted":true}"#
    );
    let progress = events
        .iter()
        .find_map(|e| {
            if let AgentEvent::Progress(p) = e {
                Some(p.clone())
            } else {
                None
            }
        })
        .expect("progress");
    assert_eq!(
        (
            progress.kind.as_str(),
            progress.now.as_deref(),
            progress.done.as_deref()
        ),
        ("task_status", Some("writing the report"), Some("searched"))
    );
    let second_turn = events
        .iter()
        .filter_map(|e| {
            if let AgentEvent::TurnStarted(t) = e {
                Some((t.is_final_turn, t.forced_final_reason.clone()))
            } else {
                None
            }
        })
        .nth(1);
    assert_eq!(
        second_turn,
        Some((true, Some("task_status_completed".into())))
    );
    let offered: Vec<String> = harness.llm.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        offered.contains(&"agent__task_status".into()) && offered.contains(&"agent__batch".into()),
        "{offered:?}"
    );
}

#[tokio::test]
async fn an_in_progress_task_status_does_not_end_anything() {
    let status = json!({"status": "in-progress", "now": "looking"}).to_string();
    let harness = Harness::new(vec![
        calls(&[("s", "agent__task_status", &status)]),
        final_report("markdown", "done"),
    ]);
    let (_, events) = harness
        .run(Harness::request(agent("maxTurns: 10"), "go"))
        .await;
    let finals: Vec<bool> = events
        .iter()
        .filter_map(|e| {
            if let AgentEvent::TurnStarted(t) = e {
                Some(t.is_final_turn)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(finals, vec![false, false]);
}

#[tokio::test]
async fn a_batch_runs_its_calls_and_answers_each_one() {
    let batch = json!({"calls": [
        {"id": "one", "tool": "test__echo", "parameters": {"n": 1}},
        {"id": 2, "tool": "test__fail", "parameters": {}},
        {"id": "bad", "tool": "agent__final_report", "parameters": {}},
        {"id": "nope", "tool": "test__missing", "parameters": {}},
    ]})
    .to_string();
    let harness = Harness::new(vec![
        calls(&[("b", "agent__batch", &batch)]),
        final_report("markdown", "done"),
    ]);
    let (result, _) = harness.run(Harness::request(agent(""), "go")).await;
    let answer: Value = serde_json::from_str(&reply(&result, "b")).expect("batch reply is JSON");
    let results = answer["results"].as_array().expect("results");
    assert_eq!(
        results[0],
        json!({"id": "one", "tool": "test__echo", "ok": true, "output": "echo: {\"n\":1}"})
    );
    assert_eq!(
        (results[1]["id"].clone(), results[1]["ok"].clone()),
        (json!(2), json!(false))
    );
    assert_eq!(results[1]["error"], "(tool failed: it broke)");
    assert!(
        results[2]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("INTERNAL_NOT_ALLOWED"))
    );
    assert!(
        results[3]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("UNKNOWN_TOOL"))
    );
    assert_eq!(harness.tools.calls().len(), 2);
    let inner: Vec<String> = result
        .accounting
        .iter()
        .filter_map(|e| match e {
            AccountingEntry::Tool(t) => Some(t.command.clone()),
            _ => None,
        })
        .collect();
    assert!(
        inner.contains(&"test__echo".to_string()) && inner.contains(&"test__fail".to_string()),
        "{inner:?}"
    );
}

#[tokio::test]
async fn a_batch_counts_toward_the_turns_call_limit() {
    let batch = json!({"calls": [
        {"id": 1, "tool": "test__echo", "parameters": {}},
        {"id": 2, "tool": "test__echo", "parameters": {}},
        {"id": 3, "tool": "test__echo", "parameters": {}},
    ]})
    .to_string();
    let harness = Harness::new(vec![
        calls(&[("b", "agent__batch", &batch)]),
        final_report("markdown", "done"),
    ]);
    let (result, _) = harness
        .run(Harness::request(agent("maxToolCallsPerTurn: 2"), "go"))
        .await;
    assert_eq!(harness.tools.calls().len(), 2);
    let answer: Value = serde_json::from_str(&reply(&result, "b")).expect("json");
    assert!(
        answer["results"][2]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("LIMIT"))
    );
}

#[tokio::test]
async fn user_scoped_agents_override_the_user_id_the_model_sends() {
    let batch =
        json!({"calls": [{"id": 1, "tool": "test__echo", "parameters": {"user_id": "mallory"}}]})
            .to_string();
    let harness = Harness::new(vec![
        calls(&[
            ("direct", "test__echo", r#"{"user_id": "mallory", "q": 1}"#),
            ("b", "agent__batch", &batch),
        ]),
        final_report("markdown", "done"),
    ]);
    let mut request = Harness::request(agent("userScoped: true"), "show my orders");
    request.user_id = Some("alice".into());
    let (result, _) = harness.run(request).await;
    for (_, arguments) in harness.tools.calls() {
        assert_eq!(arguments["user_id"], "alice", "{arguments}");
    }
    assert_eq!(harness.tools.calls().len(), 2);
    let system = result
        .conversation
        .iter()
        .find(|m| m.role == Role::System)
        .and_then(|m| m.content.clone())
        .expect("system");
    assert!(system.contains("user `alice`"), "{system}");
}

#[tokio::test]
async fn agents_that_are_not_user_scoped_pass_arguments_through() {
    let harness = Harness::new(vec![
        calls(&[("d", "test__echo", r#"{"user_id": "bob"}"#)]),
        final_report("markdown", "done"),
    ]);
    let mut request = Harness::request(agent(""), "go");
    request.user_id = Some("alice".into());
    harness.run(request).await;
    assert_eq!(harness.tools.calls()[0].1["user_id"], "bob");
}
