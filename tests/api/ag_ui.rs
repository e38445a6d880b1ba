//! AG-UI client tools and interrupts (SPEC §9.2, §9.4): `tools` in `RunAgentInput` are offered
//! beside the agent's own and a call to one ends the run with `TOOL_CALL_START`/`_ARGS`/`_END`
//! and no result; the next run's `role: "tool"` message continues the session. A run waiting
//! for approval ends with an interrupt per call; `resume` decides them and streams the resumed
//! run. Frames are checked field by field and validated by the `ag-ui-protocol` models;
//! `@ag-ui/client`'s `HttpAgent` runs both loops (tests/node/ag_ui_tools.mjs).

use serde_json::{Value, json};

use crate::support::TestApp;
use crate::support::json_frames;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::web::{
    ADA_KEY, ag_ui_input, body_text, data_frames, post, run_node, spawn_web_app, types,
    validate_ag_ui_frames,
};

fn weather_tools() -> Value {
    json!([{"name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
}

/// The model calls the client's `get_weather` for Paris, then answers from its result.
fn push_paris_weather(app: &TestApp) {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call_paris",
        "get_weather",
        r#"{"city": "Paris"}"#,
    )]));
    app.llm.push(Reply::text("Sunny in Paris."));
}

/// The model calls `test__echo` (which waits for approval as `call-1`), then answers.
fn push_echo_hi(app: &TestApp) {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "test__echo",
        r#"{"text": "hi"}"#,
    )]));
    app.llm.push(Reply::text("It said hi."));
}

/// The frames of one AG-UI run.
async fn run_frames(app: &TestApp, agent: &str, input: &Value) -> Vec<Value> {
    let response = post(app, ADA_KEY, &format!("/ag-ui/{agent}"), input).await;
    assert_eq!(response.status(), 200);
    json_frames(&data_frames(&body_text(response).await))
}

/// The error `param` of a refused AG-UI request, with its status.
async fn refused(app: &TestApp, agent: &str, input: &Value) -> (u16, String) {
    let response = post(app, ADA_KEY, &format!("/ag-ui/{agent}"), input).await;
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("json");
    let param = body["error"]["param"].as_str().unwrap_or_default();
    (status, param.to_string())
}

#[tokio::test]
async fn a_client_tool_call_ends_the_run_and_the_tool_message_continues_it() {
    let (app, _dir) = spawn_web_app().await;
    push_paris_weather(&app);
    let mut input = ag_ui_input("weather-thread", "Weather in Paris?");
    input["tools"] = weather_tools();
    let first = run_frames(&app, "chat", &input).await;
    assert_eq!(
        types(&first),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(
        first[2],
        json!({"type": "TOOL_CALL_START", "toolCallId": "call_paris", "toolCallName": "get_weather"})
    );
    assert_eq!(first[3]["toolCallId"], "call_paris");
    let arguments: Value =
        serde_json::from_str(first[3]["delta"].as_str().expect("delta")).expect("json");
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(
        first[4],
        json!({"type": "TOOL_CALL_END", "toolCallId": "call_paris"})
    );
    assert_eq!(
        first[6]["outcome"],
        json!({"type": "success", "pendingToolCallIds": ["call_paris"]}),
        "AG-UI 1.0: a run stopped at a client tool finishes as success naming the call"
    );
    let sent = &app.llm.requests()[0];
    let offered: Vec<&str> = sent["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"get_weather"), "{offered:?}");
    validate_ag_ui_frames(&first).await;

    input["runId"] = json!("client-run-2");
    input["messages"] = json!([
        {"id": "m1", "role": "user", "content": "Weather in Paris?"},
        {"id": "m2", "role": "assistant", "toolCalls": [{"id": "call_paris", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"id": "m3", "role": "tool", "toolCallId": "call_paris", "content": "sunny"},
    ]);
    let second = run_frames(&app, "chat", &input).await;
    let kinds = types(&second);
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"));
    assert_eq!(kinds.last(), Some(&"RUN_FINISHED"), "{kinds:?}");
    assert!(!kinds.contains(&"TOOL_CALL_START"), "{kinds:?}");
    let text: String = second
        .iter()
        .filter(|f| f["type"] == "TEXT_MESSAGE_CONTENT")
        .filter_map(|f| f["delta"].as_str())
        .collect();
    assert_eq!(text, "Sunny in Paris.");
    validate_ag_ui_frames(&second).await;
    // The model saw its call and the client's result.
    let requests = app.llm.requests();
    let messages = requests[1]["messages"].as_array().expect("messages");
    let last = messages.last().expect("message");
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_paris");
    assert_eq!(last["content"], "sunny");
    let call = &messages[messages.len() - 2];
    assert_eq!(call["tool_calls"][0]["function"]["name"], "get_weather");
}

#[tokio::test]
async fn bad_client_tools_tool_messages_and_resumes_are_400s_naming_the_field() {
    let (app, _dir) = spawn_web_app().await;
    let with_tools = |tools: Value| {
        let mut input = ag_ui_input("t", "hi");
        input["tools"] = tools;
        input
    };
    let cases = [
        (
            "chat",
            with_tools(json!([{"description": "no name", "parameters": {}}])),
            "tools[0].name",
        ),
        (
            "chat",
            with_tools(json!([{"name": "bad", "description": "",
                "parameters": {"type": "object", "properties": {"a": {"type": 7}}}}])),
            "tools[0].parameters",
        ),
        (
            "tooly",
            with_tools(json!([weather_tools()[0], {"name": "test__echo", "description": ""}])),
            "tools[1].name",
        ),
    ];
    for (agent, input, param) in cases {
        assert_eq!(refused(&app, agent, &input).await, (400, param.into()));
    }
    let mut unknown_result = with_tools(weather_tools());
    unknown_result["messages"] = json!([
        {"id": "m1", "role": "user", "content": "Weather?"},
        {"id": "m2", "role": "assistant", "toolCalls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"id": "m3", "role": "tool", "toolCallId": "call_9", "content": "sunny"},
    ]);
    assert_eq!(
        refused(&app, "chat", &unknown_result).await,
        (400, "messages[2].toolCallId".into())
    );
    let mut resume = ag_ui_input("t", "hi");
    resume["resume"] = json!([{"interruptId": "approval_0192e4a0000070008000000000000001_c1",
        "status": "resolved", "payload": {"decision": "approve"}}]);
    assert_eq!(
        refused(&app, "approver", &resume).await,
        (400, "resume[0].interruptId".into())
    );
}

#[tokio::test]
async fn a_run_waiting_for_approval_interrupts_and_resume_decides_and_streams_the_rest() {
    let (app, _dir) = spawn_web_app().await;
    push_echo_hi(&app);
    let first = run_frames(&app, "approver", &ag_ui_input("approve-thread", "Echo hi")).await;
    let kinds = types(&first);
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"));
    assert_eq!(kinds.last(), Some(&"RUN_FINISHED"), "{kinds:?}");
    assert!(!kinds.contains(&"TOOL_CALL_RESULT"), "{kinds:?}");
    let finished = first.last().expect("frame");
    assert_eq!(finished["outcome"]["type"], "interrupt");
    let interrupts = finished["outcome"]["interrupts"]
        .as_array()
        .expect("interrupts");
    assert_eq!(interrupts.len(), 1);
    let interrupt = &interrupts[0];
    let interrupt_id = interrupt["id"].as_str().expect("id").to_string();
    assert!(interrupt_id.starts_with("approval_"), "{interrupt}");
    assert!(interrupt_id.ends_with("_call-1"), "{interrupt}");
    assert_eq!(interrupt["reason"], "tool_call", "AG-UI 1.0's core reason");
    assert_eq!(interrupt["toolCallId"], "call-1");
    assert_eq!(
        interrupt["responseSchema"]["required"],
        json!(["approved"]),
        "{interrupt}"
    );
    assert!(
        interrupt["responseSchema"]["properties"]["editedArgs"].is_object(),
        "edits are offered: {interrupt}"
    );
    // The state and the thread's messages come before the interrupting RUN_FINISHED.
    let n = first.len();
    assert_eq!(first[n - 3]["type"], "STATE_SNAPSHOT", "{kinds:?}");
    assert_eq!(first[n - 2]["type"], "MESSAGES_SNAPSHOT", "{kinds:?}");
    let messages = first[n - 2]["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["content"], "Echo hi", "{messages:?}");
    let answer_so_far = messages.last().expect("the run's message");
    assert_eq!(answer_so_far["role"], "assistant");
    assert_eq!(
        answer_so_far["toolCalls"][0]["id"], "call-1",
        "{answer_so_far}"
    );
    validate_ag_ui_frames(&first).await;

    let answer = |payload: Value| {
        let mut input = ag_ui_input("approve-thread", "Echo hi");
        input["runId"] = json!("client-run-2");
        input["resume"] =
            json!([{"interruptId": interrupt_id, "status": "resolved", "payload": payload}]);
        input
    };
    assert_eq!(
        refused(&app, "approver", &answer(json!({"decision": "maybe"}))).await,
        (400, "resume[0].payload.approved".into())
    );
    assert_eq!(
        refused(&app, "approver", &answer(json!({"approved": "yes"}))).await,
        (400, "resume[0].payload.approved".into())
    );
    assert_eq!(
        refused(
            &app,
            "approver",
            &answer(json!({"approved": true, "editedArgs": {"text": 5}}))
        )
        .await,
        (400, "resume[0].payload.editedArgs".into())
    );
    assert_eq!(
        refused(
            &app,
            "approver",
            &answer(json!({"decision": "approve", "arguments": {"text": 5}}))
        )
        .await,
        (400, "resume[0].payload.arguments".into()),
        "agentd's earlier payload is still read"
    );
    let second = run_frames(
        &app,
        "approver",
        &answer(json!({"approved": true, "editedArgs": {"text": "edited"}})),
    )
    .await;
    let kinds = types(&second);
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"), "{kinds:?}");
    assert_eq!(second[0]["runId"], "client-run-2");
    assert_eq!(second[0]["threadId"], "approve-thread");
    assert_eq!(second[1]["type"], "CUSTOM");
    assert_eq!(second[1]["name"], "agentd.approval_decided");
    assert_eq!(second[1]["value"]["decision"], "approve");
    let result = second
        .iter()
        .find(|f| f["type"] == "TOOL_CALL_RESULT")
        .expect("the approved tool ran");
    assert_eq!(result["toolCallId"], "call-1");
    assert_eq!(result["content"], "edited");
    assert!(
        !second
            .iter()
            .any(|f| f["type"] == "TOOL_CALL_START" && f["toolCallId"] == "call-1"),
        "AG-UI 1.0: the resumed run answers the proposed call without proposing it again"
    );
    let text: String = second
        .iter()
        .filter(|f| f["type"] == "TEXT_MESSAGE_CONTENT")
        .filter_map(|f| f["delta"].as_str())
        .collect();
    assert_eq!(text, "It said hi.");
    let finished = second.last().expect("frame");
    assert_eq!(finished["type"], "RUN_FINISHED");
    assert_eq!(
        finished["outcome"],
        json!({"type": "success"}),
        "{finished}"
    );
    validate_ag_ui_frames(&second).await;
    // Decided once: the same interrupt again is a conflict, as on the runs route.
    assert_eq!(
        refused(&app, "approver", &answer(json!({"approved": false}))).await,
        (409, "resume[0].interruptId".into())
    );
}

#[tokio::test]
async fn the_http_agent_runs_a_client_tool_and_resumes_an_approval() {
    let (app, _dir) = spawn_web_app().await;
    push_paris_weather(&app);
    push_echo_hi(&app);
    let seen = run_node(
        "ag_ui_tools.mjs",
        &[app.address.clone(), "chat".into(), "approver".into()],
    )
    .await;
    assert_eq!(seen["call"]["function"]["name"], "get_weather", "{seen}");
    let first: Vec<&str> = seen["firstTypes"]
        .as_array()
        .expect("types")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(first.contains(&"TOOL_CALL_END"), "{first:?}");
    assert!(!first.contains(&"TOOL_CALL_RESULT"), "{first:?}");
    assert_eq!(seen["toolAnswer"], "Sunny in Paris.", "{seen}");
    let last = app.llm.requests()[1]["messages"]
        .as_array()
        .and_then(|m| m.last().cloned())
        .expect("message");
    assert_eq!(
        last["content"], "sunny",
        "the script's tool result reached the model"
    );
    assert_eq!(seen["interrupts"][0]["toolCallId"], "call-1", "{seen}");
    assert_eq!(
        seen["pendingInterrupts"][0], seen["interrupts"][0]["id"],
        "the client tracked the interrupt: {seen}"
    );
    assert_eq!(seen["approvedAnswer"], "It said hi.", "{seen}");
    assert_eq!(seen["pendingAfter"], 0, "{seen}");
}

#[tokio::test]
async fn the_turn_budget_spans_the_runs_of_a_client_tool_loop() {
    let (app, _dir) = spawn_web_app().await;
    // `chat` has the default maxTurns; a thread whose tool loop used them all gets one final
    // turn without tools.
    let mut messages = vec![json!({"id": "u", "role": "user", "content": "loop"})];
    for turn in 0..12 {
        let call_id = format!("c{turn}");
        messages.push(json!({"id": format!("a{turn}"), "role": "assistant", "toolCalls": [
            {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}));
        messages.push(json!({"id": format!("t{turn}"), "role": "tool", "toolCallId": call_id, "content": "again"}));
    }
    app.llm.push(Reply::text("giving up"));
    let mut input = ag_ui_input("loop-thread", "loop");
    input["tools"] = weather_tools();
    input["messages"] = json!(messages);
    let frames = run_frames(&app, "chat", &input).await;
    assert_eq!(types(&frames).last(), Some(&"RUN_FINISHED"));
    let sent = &app.llm.requests()[0];
    assert!(
        sent.get("tools").is_none(),
        "the final turn offers no tools: {}",
        sent["tools"]
    );
}
