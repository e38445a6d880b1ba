//! Sub-agents through the real runtime: `agents:` become `agent__{name}` tools; a call runs the
//! child with its own prompt and limits, its answer returns to the parent, its accounting is
//! rolled into the parent's with the lineage continued, and nesting stops at the depth limit.

use agentd::agent::AgentEvent;
use agentd::agent::sub_agents::MAX_SUB_AGENT_DEPTH;
use agentd::runtime::RunSubmission;
use agentd::vocabulary::result::AccountingEntry;
use serde_json::json;

use crate::support::TestApp;
use crate::support::mock_llm::{Reply, ToolCall};

fn text_agent(name: &str, children: &str) -> (String, String) {
    let agents = if children.is_empty() {
        String::new()
    } else {
        format!("agents: [{children}]\n")
    };
    (
        format!("{name}.ai"),
        format!(
            "---\ndescription: The {name} agent\nmodels: llm/upstream-model\nfinalization: text\n{agents}---\nYou are {name}.\n"
        ),
    )
}

async fn app_with(agents: &[(String, String)]) -> (TestApp, tempfile::TempDir) {
    crate::support::spawn_app_with_agents(agents).await
}

fn request(app: &TestApp, agent: &str, prompt: &str) -> RunSubmission {
    RunSubmission::new(app.runtime.agents().get(agent).expect("agent"), prompt)
}

fn call(agent: &str, prompt: &str) -> Reply {
    Reply::tool_calls(vec![ToolCall::new(
        "c1",
        format!("agent__{agent}"),
        json!({"prompt": prompt}).to_string(),
    )])
}

#[tokio::test]
async fn a_sub_agent_call_runs_the_child_and_returns_its_answer() {
    let (app, _dir) = app_with(&[text_agent("lead", "helper"), text_agent("helper", "")]).await;
    app.llm.push(call("helper", "find the number"));
    app.llm
        .push(Reply::text("the number is 42").with_usage(7, 3, 0, 0));
    app.llm.push(Reply::text("The helper found 42."));
    let run_request = request(&app, "lead", "what is the number?");
    let mut handle = app
        .runtime
        .start_run(run_request)
        .await
        .expect("run starts");
    let lead_run = handle.run_id.clone();
    let mut events = Vec::new();
    while let Some(event) = handle.events.recv().await {
        events.push(event.event);
    }
    let result = handle.result.await.expect("result");
    assert!(result.success, "{:?}", result.error);
    assert_eq!(result.answer_text(), "The helper found 42.");

    let requests = app.llm.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(offered, vec!["agent__helper"]);
    assert_eq!(requests[1]["messages"][0]["content"], "You are helper.");
    assert_eq!(requests[1]["messages"][1]["content"], "find the number");
    let tool_reply = requests[2]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("tool reply")
        .clone();
    assert_eq!(tool_reply["content"], "the number is 42");

    let child_llm = result
        .accounting
        .iter()
        .find_map(|e| match e {
            AccountingEntry::Llm(l) if l.lineage.agent_id.as_deref() == Some("helper") => {
                Some(l.clone())
            }
            _ => None,
        })
        .expect("the child's LLM entry is rolled into the parent");
    assert_eq!(child_llm.lineage.call_path.as_deref(), Some("lead:helper"));
    assert_eq!(
        child_llm.lineage.parent_txn_id.as_deref(),
        Some(lead_run.as_str())
    );
    assert_eq!(
        child_llm.lineage.origin_txn_id.as_deref(),
        Some(lead_run.as_str())
    );
    assert!(
        result.usage.input_tokens >= 7,
        "child usage counts toward the parent"
    );
    let kinds: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| {
            if let AgentEvent::Progress(p) = e {
                Some((p.kind.as_str().to_string(), p.call_path.clone()))
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("agent_started".into(), "lead:helper".into()),
            ("agent_finished".into(), "lead:helper".into())
        ]
    );
}

#[tokio::test]
async fn nesting_stops_at_the_depth_limit() {
    let names = ["a", "b", "c", "d", "e", "f"];
    let agents: Vec<(String, String)> = names
        .iter()
        .enumerate()
        .map(|(i, name)| text_agent(name, names.get(i + 1).copied().unwrap_or("")))
        .collect();
    let (app, _dir) = app_with(&agents).await;
    for next in &names[1..5] {
        app.llm.push(call(next, "go deeper"));
    }
    app.llm.push(call("f", "go deeper"));
    for name in names[..5].iter().rev() {
        app.llm.push(Reply::text(format!("{name} done")));
    }
    let handle = app
        .runtime
        .start_run(request(&app, "a", "start"))
        .await
        .expect("run starts");
    let result = handle.result.await.expect("result");
    assert!(result.success, "{:?}", result.error);
    assert_eq!(result.answer_text(), "a done");
    assert_eq!(app.llm.request_count(), 10, "f never runs");
    let refused = app.llm.requests()[5]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("reply")
        .clone();
    assert_eq!(
        refused["content"],
        format!("(tool failed: sub-agents may nest at most {MAX_SUB_AGENT_DEPTH} deep)")
    );
}

#[tokio::test]
async fn sub_agent_calls_of_one_turn_run_at_once_and_answer_in_call_order() {
    let (app, _dir) = app_with(&[text_agent("lead", "helper"), text_agent("helper", "")]).await;
    let ask = |id: &str, prompt: &str| {
        ToolCall::new(id, "agent__helper", json!({ "prompt": prompt }).to_string())
    };
    app.llm.push(Reply::tool_calls(vec![
        ask("c1", "first"),
        ask("c2", "second"),
    ]));
    // Each child answers only after a pause: run one after another, the first would finish
    // before the second starts.
    for answer in ["one answer", "another answer"] {
        app.llm
            .push(Reply::text(answer).with_first_byte_delay(std::time::Duration::from_millis(600)));
    }
    app.llm.push(Reply::text("Both answered."));
    let mut handle = app
        .runtime
        .start_run(request(&app, "lead", "ask twice"))
        .await
        .expect("run starts");
    let mut progress = Vec::new();
    while let Some(event) = handle.events.recv().await {
        if let AgentEvent::Progress(p) = event.event {
            progress.push(p.kind.as_str().to_string());
        }
    }
    let result = handle.result.await.expect("result");
    assert!(result.success, "{:?}", result.error);
    let lifecycle: Vec<&str> = progress
        .iter()
        .map(String::as_str)
        .filter(|kind| kind.starts_with("agent_"))
        .collect();
    assert_eq!(
        lifecycle,
        [
            "agent_started",
            "agent_started",
            "agent_finished",
            "agent_finished"
        ],
        "both children started before either finished"
    );
    let last = app.llm.requests().last().cloned().expect("final request");
    let replies: Vec<&str> = last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(replies, ["c1", "c2"], "replies in call order");
    let helper_entries = result
        .accounting
        .iter()
        .filter(|e| matches!(e, AccountingEntry::Llm(l) if l.lineage.agent_id.as_deref() == Some("helper")))
        .count();
    assert_eq!(helper_entries, 2, "both children's accounting rolled in");
    app.runtime.close().await;
}

#[tokio::test]
async fn at_most_four_sub_agents_run_at_once() {
    use agentd::agent::sub_agents::SUB_AGENT_CONCURRENCY;
    assert_eq!(SUB_AGENT_CONCURRENCY, 4);
    let (app, _dir) = app_with(&[text_agent("lead", "helper"), text_agent("helper", "")]).await;
    let calls = (1..=5)
        .map(|n| {
            ToolCall::new(
                format!("c{n}"),
                "agent__helper",
                json!({ "prompt": format!("task {n}") }).to_string(),
            )
        })
        .collect();
    app.llm.push(Reply::tool_calls(calls));
    for _ in 1..=5 {
        app.llm
            .push(Reply::text("done").with_first_byte_delay(std::time::Duration::from_millis(400)));
    }
    app.llm.push(Reply::text("All five answered."));
    let mut handle = app
        .runtime
        .start_run(request(&app, "lead", "five tasks"))
        .await
        .expect("run starts");
    let mut lifecycle = Vec::new();
    while let Some(event) = handle.events.recv().await {
        if let AgentEvent::Progress(p) = event.event
            && p.kind.as_str().starts_with("agent_")
        {
            lifecycle.push(p.kind.as_str().to_string());
        }
    }
    assert!(handle.result.await.expect("result").success);
    assert_eq!(lifecycle.len(), 10, "{lifecycle:?}");
    assert!(
        lifecycle[..4].iter().all(|k| k == "agent_started"),
        "four at once: {lifecycle:?}"
    );
    assert_eq!(
        lifecycle[4], "agent_finished",
        "the fifth waits for a free place: {lifecycle:?}"
    );
    app.runtime.close().await;
}
