//! Tool approvals on the Responses API (SPEC §8, §9.1): a run that waits for a person ends its
//! response `completed` with an `mcp_approval_request` item per waiting call (streamed as
//! `output_item.added` + `.done` before `response.completed`); a request with
//! `previous_response_id` and `mcp_approval_response` items decides them through the runtime
//! and its response follows the same run to its end; a `store: false` client replaying the
//! request item with its answer does the same. Every refusal names its field; the OpenAI Python
//! SDK drives the approve and deny loops (tests/sdk/responses_approvals.py).

use serde_json::{Value, json};

use crate::responses::{events, names};
use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with_agents_and};

const APPROVER: &str = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\napprovalTimeout: 10m\n---\nYou echo.\n";
const ALICE: &str = "alice-secret";
const BOB: &str = "bob-secret";

/// An app with the approving agent and two users; the temp dir holds the agent file.
async fn approving_app() -> (TestApp, tempfile::TempDir) {
    spawn_app_with_agents_and(&[("approver.ai", APPROVER)], |config| {
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
        config["auth"] = json!({"keys": [
            {"key": ALICE, "userId": "alice"},
            {"key": BOB, "userId": "bob"}
        ]});
    })
    .await
}

async fn post(app: &TestApp, key: &str, body: &Value) -> reqwest::Response {
    app.client
        .post(app.url("/v1/responses"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .expect("sent")
}

async fn post_json(app: &TestApp, key: &str, body: &Value) -> (u16, Value) {
    let response = post(app, key, body).await;
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

fn echo_call(id: &str, text: &str) -> Reply {
    Reply::tool_calls(vec![ToolCall::new(
        id,
        "test__echo",
        json!({"text": text}).to_string(),
    )])
}

/// `GET path` as `key` sees it.
async fn get_json(app: &TestApp, key: &str, path: &str) -> Value {
    app.client
        .get(app.url(path))
        .bearer_auth(key)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json")
}

/// The run's status as `GET /v1/runs/{id}` shows it to `key`.
async fn run_status(app: &TestApp, key: &str, run_id: &str) -> String {
    let run = get_json(app, key, &format!("/v1/runs/{run_id}")).await;
    run["status"].as_str().unwrap_or_default().to_string()
}

fn tool_reply(app: &TestApp, call_id: &str) -> String {
    crate::approvals::tool_reply(&app.llm, call_id)
}

#[tokio::test]
async fn a_waiting_call_ends_the_stream_with_an_approval_request_and_the_answer_streams_the_rest() {
    let (app, _agents) = approving_app().await;
    app.llm.push(echo_call("call-1", "hi"));
    app.llm.push(Reply::text("It said hi."));
    let response = post(
        &app,
        ALICE,
        &json!({"model": "approver", "input": "echo hi", "stream": true}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let run_id = crate::support::run_id(&response);
    let first = events(response).await;
    assert_eq!(
        names(&first),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed"
        ]
    );
    for (index, (name, data)) in first.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], index, "numbered from 0: {data}");
    }
    let request_id = format!("mcpr_{}_call-1", run_id.replace('-', ""));
    let expected_item = json!({
        "type": "mcp_approval_request", "id": request_id, "server_label": "test",
        "name": "test__echo", "arguments": "{\"text\":\"hi\"}",
    });
    let (_, added) = &first[2];
    assert_eq!(added["output_index"], 0);
    assert_eq!(added["item"], expected_item);
    let (_, done) = &first[3];
    assert_eq!(done["output_index"], 0);
    assert_eq!(done["item"], expected_item);
    let (_, completed) = &first[4];
    let response_id = format!("resp_{run_id}");
    assert_eq!(completed["response"]["id"], response_id.as_str());
    assert_eq!(completed["response"]["status"], "completed");
    assert_eq!(completed["response"]["error"], Value::Null);
    assert_eq!(completed["response"]["output"], json!([expected_item]));
    assert_eq!(run_status(&app, ALICE, &run_id).await, "waiting_approval");
    // The stored response reads the same once the run has gone on.
    let answer = post(
        &app,
        ALICE,
        &json!({"model": "approver", "stream": true, "previous_response_id": response_id,
            "input": [{"type": "mcp_approval_response", "approval_request_id": request_id, "approve": true}]}),
    )
    .await;
    assert_eq!(answer.status(), 200);
    let second = events(answer).await;
    let mut kinds = names(&second);
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.mcp_call.in_progress",
            "response.mcp_call.completed",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ],
        "{second:#?}"
    );
    for (index, (name, data)) in second.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], index, "numbered from 0: {data}");
    }
    let (_, created) = &second[0];
    let second_id = created["response"]["id"].as_str().expect("id").to_string();
    assert!(
        second_id.starts_with(&format!("{response_id}_")),
        "{second_id}"
    );
    assert_eq!(
        created["response"]["previous_response_id"],
        response_id.as_str()
    );
    let (_, call) = &second[5];
    assert_eq!(call["output_index"], 0);
    assert_eq!(call["item"]["type"], "mcp_call");
    assert_eq!(call["item"]["name"], "test__echo");
    assert_eq!(call["item"]["status"], "completed");
    assert!(
        call["item"]["output"]
            .as_str()
            .is_some_and(|o| o.contains("hi")),
        "{call}"
    );
    let first_item_id = first[2].1["item"]["id"].as_str().unwrap_or_default();
    assert_ne!(call["item"]["id"], first_item_id);
    let (_, message) = &second[second.len() - 2];
    assert_eq!(message["output_index"], 1);
    assert_eq!(message["item"]["content"][0]["text"], "It said hi.");
    let (_, completed) = second.last().expect("events");
    assert_eq!(completed["response"]["status"], "completed");
    assert!(completed["response"]["usage"]["total_tokens"].as_u64() > Some(0));
    assert_eq!(run_status(&app, ALICE, &run_id).await, "completed");
    assert!(tool_reply(&app, "call-1").contains("hi"));
    // Both stored responses replay their own stretch of the run.
    for (id, last_type) in [
        (&response_id, "mcp_approval_request"),
        (&second_id, "message"),
    ] {
        let stored = get_json(&app, ALICE, &format!("/v1/responses/{id}")).await;
        assert_eq!(stored["status"], "completed", "{stored}");
        let output = stored["output"].as_array().expect("output");
        assert_eq!(output.last().expect("item")["type"], last_type, "{stored}");
    }
}

#[tokio::test]
async fn a_denial_reaches_the_model_and_a_stateless_client_replays_the_request() {
    let (app, _agents) = approving_app().await;
    app.llm.push(echo_call("call-1", "rm -rf"));
    app.llm.push(Reply::text("I was not allowed."));
    let (status, first) = post_json(
        &app,
        ALICE,
        &json!({"model": "approver", "input": "echo rm -rf", "store": false}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["status"], "completed");
    let request = first["output"][0].clone();
    assert_eq!(request["type"], "mcp_approval_request", "{first}");
    let (status, second) = post_json(
        &app,
        ALICE,
        &json!({"model": "approver", "store": false, "input": [
            {"role": "user", "content": "echo rm -rf"},
            request,
            {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": false, "reason": "too risky"}
        ]}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["status"], "completed");
    assert_eq!(
        second["output"].as_array().map(Vec::len),
        Some(1),
        "{second}"
    );
    assert_eq!(
        second["output"][0]["content"][0]["text"],
        "I was not allowed."
    );
    assert_eq!(tool_reply(&app, "call-1"), "denied: too risky");
}

#[tokio::test]
async fn approval_answers_that_do_not_fit_are_refused_naming_the_field() {
    let (app, _agents) = approving_app().await;
    app.llm.push(echo_call("call-1", "hi"));
    app.llm.push(Reply::text("done"));
    let (_, first) = post_json(
        &app,
        ALICE,
        &json!({"model": "approver", "input": "echo hi"}),
    )
    .await;
    let response_id = first["id"].as_str().expect("id").to_string();
    let request_id = first["output"][0]["id"].as_str().expect("id").to_string();
    let answer = |id: &str, approve: bool| {
        json!({"model": "approver", "previous_response_id": response_id,
            "input": [{"type": "mcp_approval_response", "approval_request_id": id, "approve": approve}]})
    };
    let error = |body: &Value| {
        (
            body["error"]["param"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            body["error"]["type"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    // An id that names no waiting call of this response.
    let (status, body) = post_json(&app, ALICE, &answer("mcpr_nothing", true)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(error(&body).0, "input[0].approval_request_id");
    let other_call = request_id.replace("call-1", "call-9");
    let (status, body) = post_json(&app, ALICE, &answer(&other_call, true)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(error(&body).0, "input[0].approval_request_id");
    // Another user's response is unknown to them, as for any previous_response_id.
    let (status, body) = post_json(&app, BOB, &answer(&request_id, true)).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(error(&body).0, "previous_response_id");
    // Nor may they reach the run by replaying the request without it.
    let replayed = json!({"model": "approver", "store": false, "input": [
        {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": true}]});
    let (status, body) = post_json(&app, BOB, &replayed).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(error(&body).0, "input[0].approval_request_id");
    // The wrong agent as `model`.
    let mut wrong_model = answer(&request_id, true);
    wrong_model["model"] = json!("chat");
    let (status, body) = post_json(&app, ALICE, &wrong_model).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(error(&body).0, "model");
    // A user message after the answers.
    let mut with_message = answer(&request_id, true);
    with_message["input"]
        .as_array_mut()
        .expect("input")
        .push(json!({"role": "user", "content": "and?"}));
    let (status, body) = post_json(&app, ALICE, &with_message).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(error(&body).0, "input[1]");
    // Decided once; the same decision again is a conflict, as on the runs endpoint.
    let (status, body) = post_json(&app, ALICE, &answer(&request_id, true)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][1]["content"][0]["text"], "done", "{body}");
    let (status, body) = post_json(&app, ALICE, &answer(&request_id, false)).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(error(&body).0, "input[0].approval_request_id");
}

#[tokio::test]
async fn every_call_of_a_wait_is_answered_in_one_request() {
    let (app, _agents) = approving_app().await;
    app.llm.push(Reply::tool_calls(vec![
        ToolCall::new("call-a", "test__echo", r#"{"text": "a"}"#),
        ToolCall::new("call-b", "test__echo", r#"{"text": "b"}"#),
    ]));
    app.llm.push(Reply::text("a and b"));
    let (_, first) = post_json(&app, ALICE, &json!({"model": "approver", "input": "echo"})).await;
    let output = first["output"].as_array().expect("output");
    assert_eq!(output.len(), 2, "{first}");
    let ids: Vec<&str> = output.iter().filter_map(|i| i["id"].as_str()).collect();
    let answer = |items: Vec<Value>| json!({"model": "approver", "previous_response_id": first["id"], "input": items});
    let approve = |id: &str| json!({"type": "mcp_approval_response", "approval_request_id": id, "approve": true});
    let (status, body) = post_json(&app, ALICE, &answer(vec![approve(ids[0])])).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "input");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(ids[1]),
        "{body}"
    );
    let (status, body) =
        post_json(&app, ALICE, &answer(vec![approve(ids[0]), approve(ids[0])])).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "input[1].approval_request_id");
    let (status, body) =
        post_json(&app, ALICE, &answer(vec![approve(ids[0]), approve(ids[1])])).await;
    assert_eq!(status, 200, "{body}");
    let types: Vec<&str> = body["output"]
        .as_array()
        .expect("output")
        .iter()
        .filter_map(|i| i["type"].as_str())
        .collect();
    assert_eq!(types, ["mcp_call", "mcp_call", "message"], "{body}");
}

#[tokio::test]
async fn the_openai_python_sdk_approves_and_denies_through_responses() {
    let (app, _agents) = approving_app().await;
    app.llm.push(echo_call("call-yes", "hi"));
    app.llm.push(Reply::text("It said hi."));
    app.llm.push(echo_call("call-no", "rm"));
    app.llm.push(Reply::text("Not allowed."));
    let args = [app.address.clone(), ALICE.to_string()];
    let stdout = crate::sdk_clients::run_sdk_script("responses_approvals.py", &args).await;
    assert_eq!(
        stdout.lines().filter(|l| l.ends_with(" ok")).count(),
        3,
        "{stdout}"
    );
    assert_eq!(tool_reply(&app, "call-no"), "denied: by the user");
}
