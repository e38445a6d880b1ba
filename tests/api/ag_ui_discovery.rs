//! AG-UI 1.0 capability discovery and sub-agent events (SPEC §15), through `@ag-ui/client`'s
//! `HttpAgent` and `@ag-ui/core`'s schemas (tests/node/ag_ui_subagents.mjs): the capabilities
//! at the run URL plus `/capabilities` parse as `AgentCapabilities` and name the agent's tools
//! and sub-agents; `SUBAGENT_STARTED` / `SUBAGENT_FINISHED` reach a client that asks with
//! `forwardedProps.subagentEvents` (its verifier checks their rules) and no other.

use serde_json::{Value, json};

use crate::support::TestApp;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::web::{ADA_KEY, ag_ui_input, post, run_node, spawn_web_app_with};

const LEAD_AGENT: &str = "---\ndescription: Asks its helper twice\nmodels: llm/upstream-model\nfinalization: text\nagents: [helper]\n---\nYou delegate.\n";
const HELPER_AGENT: &str = "---\ndescription: Finds numbers\nmodels: llm/upstream-model\nfinalization: text\n---\nYou find numbers.\n";

async fn app() -> (TestApp, tempfile::TempDir) {
    spawn_web_app_with(&[("lead.ai", LEAD_AGENT), ("helper.ai", HELPER_AGENT)]).await
}

/// The lead calls its helper twice in one turn, then answers.
fn push_two_helper_calls(app: &TestApp) {
    app.llm.push(Reply::tool_calls(vec![
        ToolCall::new("c1", "agent__helper", r#"{"prompt": "find one number"}"#),
        ToolCall::new("c2", "agent__helper", r#"{"prompt": "find another"}"#),
    ]));
    app.llm.push(Reply::text("42"));
    app.llm.push(Reply::text("43"));
    app.llm.push(Reply::text("The helper found 42 and 43."));
}

async fn run_lead(app: &TestApp, asked: bool) -> Value {
    run_node(
        "ag_ui_subagents.mjs",
        &[
            app.address.clone(),
            "lead".into(),
            "Find two numbers".into(),
            asked.to_string(),
        ],
    )
    .await
}

fn subagent_events<'a>(seen: &'a Value, kind: &str) -> Vec<&'a Value> {
    seen["subagentEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

#[tokio::test]
async fn capabilities_parse_and_a_client_that_asks_sees_each_sub_agent_start_and_finish() {
    let (app, _dir) = app().await;
    push_two_helper_calls(&app);
    let seen = run_lead(&app, true).await;
    assert_eq!(seen["capabilitiesStatus"], 200, "{seen}");
    assert_eq!(seen["capabilitiesValid"], true, "{seen}");
    let capabilities = &seen["capabilities"];
    assert_eq!(capabilities["identity"]["name"], "lead");
    assert_eq!(capabilities["identity"]["type"], "agentd");
    assert_eq!(capabilities["transport"]["streaming"], true);
    assert_eq!(
        capabilities["multiAgent"]["subAgents"],
        json!([{"name": "helper", "description": "Finds numbers"}])
    );
    let tools: Vec<&str> = capabilities["tools"]["items"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["agent__helper"], "{capabilities}");
    assert_eq!(capabilities["tools"]["clientProvided"], true);
    assert_eq!(capabilities["humanInTheLoop"]["approvals"], false);

    assert!(
        seen.get("thrown").is_none(),
        "the client's verifier took the stream: {seen}"
    );
    assert_eq!(seen["result"], "The helper found 42 and 43.", "{seen}");
    let started = subagent_events(&seen, "SUBAGENT_STARTED");
    let finished = subagent_events(&seen, "SUBAGENT_FINISHED");
    assert_eq!(started.len(), 2, "{seen}");
    assert_eq!(finished.len(), 2, "{seen}");
    assert!(started.iter().all(|e| e["name"] == "helper"), "{seen}");
    assert_ne!(started[0]["subagentRunId"], started[1]["subagentRunId"]);
    let calls: Vec<&Value> = started
        .iter()
        .map(|e| &e["metadata"]["agentdToolCallId"])
        .collect();
    assert!(
        calls.contains(&&json!("c1")) && calls.contains(&&json!("c2")),
        "{seen}"
    );
    for end in &finished {
        assert_eq!(end["outcome"]["type"], "success", "{seen}");
        assert!(
            started
                .iter()
                .any(|s| s["subagentRunId"] == end["subagentRunId"]),
            "{seen}"
        );
    }
    let types: Vec<&str> = seen["types"]
        .as_array()
        .expect("types")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let last_finish = types.iter().rposition(|t| *t == "SUBAGENT_FINISHED");
    let run_finished = types.iter().position(|t| *t == "RUN_FINISHED");
    assert!(last_finish < run_finished, "{types:?}");
}

#[tokio::test]
async fn a_client_that_does_not_ask_gets_no_sub_agent_events_and_a_bad_flag_is_a_400() {
    let (app, _dir) = app().await;
    push_two_helper_calls(&app);
    let seen = run_lead(&app, false).await;
    assert!(seen.get("thrown").is_none(), "{seen}");
    assert_eq!(seen["subagentEvents"], json!([]), "{seen}");
    assert_eq!(seen["result"], "The helper found 42 and 43.", "{seen}");

    let mut input = ag_ui_input("bad-flag", "hi");
    input["forwardedProps"] = json!({"subagentEvents": "yes"});
    let refused = post(&app, ADA_KEY, "/ag-ui/lead", &input).await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.expect("error body");
    assert_eq!(
        body["error"]["param"], "forwardedProps.subagentEvents",
        "{body}"
    );
}

#[tokio::test]
async fn capabilities_declare_approvals_and_name_no_agent_that_is_not_there() {
    let (app, _dir) = app().await;
    let get = |path: &'static str| app.client.get(app.url(path)).bearer_auth(ADA_KEY).send();
    let approver: Value = get("/ag-ui/approver/capabilities")
        .await
        .expect("request")
        .json()
        .await
        .expect("capabilities");
    let hitl = &approver["humanInTheLoop"];
    assert_eq!(hitl["approvals"], true, "{approver}");
    assert_eq!(hitl["interrupts"], true, "{approver}");
    assert_eq!(hitl["approveWithEdits"], true, "{approver}");
    assert!(approver.get("multiAgent").is_none(), "{approver}");
    let tools = approver["tools"]["items"].as_array().expect("tools");
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "test__echo" && t["parameters"].is_object()),
        "{approver}"
    );
    let missing = get("/ag-ui/nobody/capabilities").await.expect("request");
    assert_eq!(missing.status(), 404);
}
