//! Advisors, router and handoff through the real runtime: advisors answer first and reach the
//! agent as advisories; a router hands the conversation to a destination that answers in its
//! place; a handoff agent continues from the agent's answer and its answer is the run's. The
//! children's accounting is rolled into the run with its lineage, and the stream carries only
//! the answering agent's output, one final report and one `run.finished`.

use agentd::agent::AgentEvent;
use agentd::runtime::RunSubmission;
use agentd::vocabulary::result::AccountingEntry;
use serde_json::{Value, json};

use crate::support::TestApp;
use crate::support::mock_llm::{Reply, ToolCall};

fn agent(name: &str, extra: &str) -> (String, String) {
    (
        format!("{name}.ai"),
        format!(
            "---\ndescription: The {name} agent\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\n{extra}---\nYou are {name}.\n"
        ),
    )
}

async fn app_with(agents: &[(String, String)]) -> (TestApp, tempfile::TempDir) {
    crate::support::spawn_app_with_agents(agents).await
}

/// Runs `agent` with `prompt`; its events and result.
async fn run(
    app: &TestApp,
    agent: &str,
    prompt: &str,
) -> (Vec<AgentEvent>, agentd::agent::AgentResult) {
    let submission = RunSubmission::new(app.runtime.agents().get(agent).expect("agent"), prompt);
    let mut handle = app.runtime.start_run(submission).await.expect("run starts");
    let mut events = Vec::new();
    while let Some(event) = handle.events.recv().await {
        events.push(event.event);
    }
    (events, handle.result.await.expect("result"))
}

fn streamed_text(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Output(delta) => Some(delta.text.clone()),
            _ => None,
        })
        .collect()
}

fn count(events: &[AgentEvent], kind: fn(&AgentEvent) -> bool) -> usize {
    events.iter().filter(|e| kind(e)).count()
}

/// The user message of the request the mock got from the agent whose system prompt is
/// "You are {agent}.".
fn prompt_seen_by(app: &TestApp, agent: &str) -> String {
    app.llm
        .requests()
        .iter()
        .find(|r| r["messages"][0]["content"] == format!("You are {agent}."))
        .and_then(|r| r["messages"][1]["content"].as_str().map(String::from))
        .unwrap_or_else(|| panic!("{agent} was never asked"))
}

fn call_paths(result: &agentd::agent::AgentResult) -> Vec<String> {
    result
        .accounting
        .iter()
        .filter_map(|e| match e {
            AccountingEntry::Llm(l) => l.lineage.call_path.clone(),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn advisors_answer_first_and_reach_the_agent_as_advisories() {
    let (app, _dir) = app_with(&[
        agent("lead", "advisors: [legal, finance]\n"),
        agent("legal", ""),
        agent("finance", ""),
    ])
    .await;
    app.llm.push(Reply::text("mind the contract"));
    app.llm.push(Reply::text("mind the budget"));
    app.llm.push(Reply::text("Go ahead, carefully."));
    let (events, result) = run(&app, "lead", "should we buy it?").await;
    assert!(result.success, "{:?}", result.error);
    assert_eq!(result.answer_text(), "Go ahead, carefully.");
    let seen = prompt_seen_by(&app, "lead");
    assert!(
        seen.starts_with("<original_user_request>\nshould we buy it?\n</original_user_request>\n"),
        "{seen}"
    );
    for advisor in ["legal", "finance"] {
        assert!(
            seen.contains(&format!("<advisory agent=\"{advisor}\">\nmind the ")),
            "{seen}"
        );
        assert_eq!(prompt_seen_by(&app, advisor), "should we buy it?");
    }
    let mut paths = call_paths(&result);
    paths.sort();
    assert_eq!(paths, ["lead", "lead:finance", "lead:legal"]);
    assert_eq!(streamed_text(&events), "Go ahead, carefully.");
    assert_eq!(
        count(&events, |e| matches!(e, AgentEvent::RunFinished(_))),
        1
    );
    let started = count(
        &events,
        |e| matches!(e, AgentEvent::Progress(p) if p.kind.as_str() == "agent_started"),
    );
    assert_eq!(started, 2);
    app.runtime.close().await;
}

#[tokio::test]
async fn a_router_hands_the_conversation_to_a_destination_that_answers() {
    let (app, _dir) = app_with(&[
        agent("front", "router:\n  destinations: [billing, support]\n"),
        agent("billing", ""),
        agent("support", ""),
    ])
    .await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "r1",
        "router__handoff-to",
        json!({"agent": "billing", "message": "about invoice 7"}).to_string(),
    )]));
    app.llm.push(Reply::text("Invoice 7 is paid."));
    let (events, result) = run(&app, "front", "is my invoice paid?").await;
    assert!(result.success, "{:?}", result.error);
    assert_eq!(result.answer_text(), "Invoice 7 is paid.");
    let offered: Vec<Value> = app.llm.requests()[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter(|t| t["function"]["name"] == "router__handoff-to")
        .cloned()
        .collect();
    assert_eq!(
        offered[0]["function"]["parameters"]["properties"]["agent"]["enum"],
        json!(["billing", "support"])
    );
    let seen = prompt_seen_by(&app, "billing");
    assert!(seen.contains("is my invoice paid?"), "{seen}");
    assert!(
        seen.contains("<advisory agent=\"front\">\nabout invoice 7\n"),
        "{seen}"
    );
    assert_eq!(
        streamed_text(&events),
        "Invoice 7 is paid.",
        "only the destination speaks"
    );
    assert_eq!(
        count(&events, |e| matches!(e, AgentEvent::FinalReport(_))),
        1
    );
    assert_eq!(
        count(&events, |e| matches!(e, AgentEvent::RunStarted(_))),
        1
    );
    assert_eq!(call_paths(&result), ["front", "front:billing"]);
    app.runtime.close().await;
}

#[tokio::test]
async fn a_router_naming_an_unknown_destination_is_told_and_may_answer_itself() {
    let (app, _dir) = app_with(&[
        agent("front", "router:\n  destinations: [billing]\n"),
        agent("billing", ""),
    ])
    .await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "r1",
        "router__handoff-to",
        json!({"agent": "sales"}).to_string(),
    )]));
    app.llm.push(Reply::text("I can answer that myself."));
    let (events, result) = run(&app, "front", "hello").await;
    assert!(result.success);
    assert_eq!(result.answer_text(), "I can answer that myself.");
    let reply = app.llm.requests()[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str().map(String::from))
        .expect("tool reply");
    assert!(
        reply.contains("unknown agent \"sales\": choose one of billing"),
        "{reply}"
    );
    assert_eq!(streamed_text(&events), "I can answer that myself.");
    assert_eq!(
        count(&events, |e| matches!(e, AgentEvent::RunFinished(_))),
        1
    );
    app.runtime.close().await;
}

#[tokio::test]
async fn a_handoff_agent_continues_and_its_answer_is_the_runs() {
    let (app, _dir) = app_with(&[agent("writer", "handoff: editor\n"), agent("editor", "")]).await;
    app.llm.push(Reply::text("a rough draft"));
    app.llm.push(Reply::text("A polished text."));
    let (events, result) = run(&app, "writer", "write about rust").await;
    assert!(result.success, "{:?}", result.error);
    assert_eq!(result.answer_text(), "A polished text.");
    let seen = prompt_seen_by(&app, "editor");
    assert_eq!(
        seen,
        "<original_user_request>\nwrite about rust\n</original_user_request>\n<response agent=\"writer\">\na rough draft\n</response>\n"
    );
    assert_eq!(
        streamed_text(&events),
        "A polished text.",
        "the draft is not streamed"
    );
    assert_eq!(
        count(&events, |e| matches!(e, AgentEvent::RunFinished(_))),
        1
    );
    assert_eq!(call_paths(&result), ["writer", "writer:editor"]);
    let last = result.conversation.last().expect("conversation");
    assert_eq!(
        last.content.as_deref(),
        Some("A polished text."),
        "the conversation ends with the answer"
    );

    // The editor's session is a run of its own, linked to the writer's.
    app.runtime.flush_recorder().await;
    let listed: Value = app
        .get("/v1/runs?agent=editor")
        .await
        .json()
        .await
        .expect("json");
    let child = &listed["data"][0];
    assert_eq!(child["agent"], "editor", "{listed}");
    assert_eq!(child["status"], "completed", "{listed}");
    let child_id = child["run_id"].as_str().expect("run id");
    let stored: Value = app
        .get(&format!("/v1/runs/{child_id}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        stored["result"]["accounting"][0]["parentTxnId"], result.run_id,
        "{stored}"
    );
    app.runtime.close().await;
}
