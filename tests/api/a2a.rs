//! The A2A headend (SPEC §9.5) with the `a2a-sdk` Python client (tests/sdk/a2a_client.py): the
//! card, a blocking and a streamed message, GetTask, ListTasks, resubscribing to a running task
//! and cancelling it; plain JSON-RPC for the 0.3 names and the errors.

use serde_json::{Value, json};

use crate::mcp_headend::{app_with_agents, run_python};
use crate::support::TestApp;
use crate::support::mock_llm::Reply;
use crate::support::python_tool::{PythonTool, installed};

/// The A2A SDK the tests use, pinned (installed by `.ci/run`).
const A2A_SDK: &str = "a2a-sdk[http-server]==1.3.0";

async fn rpc(app: &TestApp, agent: &str, method: &str, params: Value) -> Value {
    app.client
        .post(app.url(&format!("/a2a/{agent}")))
        .bearer_auth("admin-key")
        .json(&json!({"jsonrpc": "2.0", "id": "1", "method": method, "params": params}))
        .send()
        .await
        .expect("request sent")
        .json()
        .await
        .expect("JSON-RPC answer")
}

/// The SDK's whole flow over `binding`; the app, to read what reached it.
async fn sdk_flow_over(binding: &str) -> TestApp {
    let (app, agents) = app_with_agents().await;
    app.llm.push(Reply::text("Hello from the mock upstream!"));
    app.llm.push(Reply::text("Hello again!"));
    app.llm.push(Reply::hang());
    let args = [
        app.address.clone(),
        "admin-key".to_string(),
        binding.to_string(),
    ];
    let stdout = run_python("a2a", A2A_SDK, "a2a_client.py", &args).await;
    for check in [
        "card ok",
        "send ok",
        "stream ok",
        "get ok",
        "list ok",
        "resubscribe ok",
        "cancel ok",
        "subscriber saw the cancel ok",
    ] {
        assert!(stdout.lines().any(|l| l == check), "{check}: {stdout}");
    }
    drop(agents);
    app
}

/// The routes the SDK's requests took, from the request counter.
async fn routes_taken(app: &TestApp) -> String {
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    metrics
        .lines()
        .filter(|line| line.starts_with("agentd_http_requests_total{") && line.contains("/a2a/"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_a2a_python_sdk_sends_streams_reads_lists_resubscribes_and_cancels() {
    let app = sdk_flow_over("JSONRPC").await;
    let routes = routes_taken(&app).await;
    assert!(routes.contains(r#"route="/a2a/{agent}""#), "{routes}");
}

/// A2A 1.0's HTTP+JSON binding: the same flow with the SDK's REST transport, which it picks
/// from the card's `supportedInterfaces`; every request took a REST route.
#[tokio::test]
async fn the_a2a_python_sdk_does_it_all_over_the_http_json_binding() {
    let app = sdk_flow_over("HTTP+JSON").await;
    let routes = routes_taken(&app).await;
    for route in [
        "/a2a/{agent}/message:send",
        "/a2a/{agent}/message:stream",
        "/a2a/{agent}/tasks/{task}",
        "/a2a/{agent}/tasks",
    ] {
        assert!(
            routes.contains(&format!(r#"route="{route}""#)),
            "{route}: {routes}"
        );
    }
    assert!(
        !routes.contains(r#"route="/a2a/{agent}",method="POST""#)
            && !routes.contains(r#"method="POST",route="/a2a/{agent}","#),
        "no JSON-RPC: {routes}"
    );
}

/// The binding's errors: `google.rpc.Status` with the A2A reason, at the binding's status.
#[tokio::test]
async fn the_http_json_binding_answers_errors_as_status_with_the_a2a_reason() {
    let (app, _agents) = app_with_agents().await;
    let get = |path: &str| {
        app.client
            .get(app.url(path))
            .bearer_auth("admin-key")
            .send()
    };
    let missing = get("/a2a/chat/tasks/no-such-task").await.expect("sent");
    assert_eq!(missing.status(), 404);
    assert_eq!(
        missing.headers()["content-type"],
        "application/a2a+json",
        "the binding's media type"
    );
    let body: Value = missing.json().await.expect("json");
    assert_eq!(body["error"]["status"], "NOT_FOUND", "{body}");
    assert_eq!(
        body["error"]["details"][0]["reason"], "TASK_NOT_FOUND",
        "{body}"
    );
    let bad = get("/a2a/chat/tasks?pageSize=ten").await.expect("sent");
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.expect("json");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("pageSize"),
        "{body}"
    );
    let too_many = get("/a2a/chat/tasks?pageSize=101").await.expect("sent");
    assert_eq!(too_many.status(), 400);
    let verb = app
        .client
        .post(app.url("/a2a/chat/tasks/t1:pause"))
        .bearer_auth("admin-key")
        .send()
        .await
        .expect("sent");
    assert_eq!(verb.status(), 404);
    let not_json = app
        .client
        .post(app.url("/a2a/chat/message:send"))
        .bearer_auth("admin-key")
        .body("[1]")
        .send()
        .await
        .expect("sent");
    assert_eq!(not_json.status(), 400);
    let card: Value = get("/a2a/chat/extendedAgentCard")
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(card["name"], "chat", "{card}");
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
}

#[tokio::test]
async fn the_0_3_method_names_answer_in_0_3_shapes_and_errors_name_what_is_wrong() {
    let (app, _agents) = app_with_agents().await;
    app.llm.push(Reply::text("Old hello"));
    let message = json!({"message": {"kind": "message", "messageId": "m1", "role": "user",
        "parts": [{"kind": "text", "text": "hi"}]}});
    let answer = rpc(&app, "chat", "message/send", message).await;
    let task = &answer["result"];
    assert_eq!(task["kind"], "task", "{answer}");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Old hello");
    let id = task["id"].as_str().expect("task id").to_string();

    let got = rpc(&app, "chat", "GetTask", json!({"id": id})).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    let other_agent = rpc(&app, "slow", "GetTask", json!({"id": id})).await;
    assert_eq!(
        other_agent["error"]["code"], -32001,
        "another agent's task is not found"
    );

    // ListTasks pages hold at most 100 tasks.
    let listed = rpc(&app, "chat", "ListTasks", json!({"pageSize": 100})).await;
    assert_eq!(
        listed["result"]["tasks"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert_eq!(listed["result"]["nextPageToken"], "");
    let too_many = rpc(&app, "chat", "ListTasks", json!({"pageSize": 101})).await;
    assert_eq!(too_many["error"]["code"], -32602);
    assert!(
        too_many["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("pageSize"),
        "{too_many}"
    );
    let one_page = rpc(&app, "chat", "ListTasks", json!({"pageSize": 1})).await;
    let next = one_page["result"]["nextPageToken"]
        .as_str()
        .unwrap_or_default();
    assert!(next.ends_with(&id), "a full page has a next: {one_page}");
    let after = rpc(
        &app,
        "chat",
        "ListTasks",
        json!({"pageSize": 1, "pageToken": next}),
    )
    .await;
    assert_eq!(after["result"]["tasks"], json!([]), "{after}");
    let bad = rpc(&app, "chat", "ListTasks", json!({"pageToken": "nope"})).await;
    assert_eq!(bad["error"]["code"], -32602);

    let unknown = rpc(&app, "chat", "NoSuchMethod", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601);
    let bad = rpc(
        &app,
        "chat",
        "SendMessage",
        json!({"message": {"parts": "text"}}),
    )
    .await;
    assert_eq!(bad["error"]["code"], -32602);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("message.parts"),
        "{bad}"
    );
    let ended = rpc(&app, "chat", "CancelTask", json!({"id": id})).await;
    assert_eq!(
        ended["error"]["code"], -32002,
        "an ended task is not cancelable"
    );

    let response = app
        .client
        .get(app.url("/a2a/chat/.well-known/agent-card.json"))
        .send()
        .await
        .expect("card");
    assert_eq!(response.status(), 401, "cards need a key like every route");
    let server_card: Value = app
        .client
        .get(app.url("/.well-known/agent-card.json"))
        .bearer_auth("chat-key")
        .send()
        .await
        .expect("card")
        .json()
        .await
        .expect("json");
    let skills: Vec<&str> = server_card["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(skills, ["chat"], "only the agents this key may use");
}

/// An app with agent `guarded`, whose `rest__lookup` waits for approval (config adjusted by
/// `adjust`); keep the directory alive.
async fn guarded_app(adjust: impl FnOnce(&mut Value)) -> (TestApp, tempfile::TempDir) {
    let agents = tempfile::tempdir().expect("agents");
    std::fs::write(
        agents.path().join("guarded.ai"),
        "---\ndescription: Looks things up, with approval\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [rest__lookup]\napprove: [rest__lookup]\n---\nYou look up.\n",
    )
    .expect("agent");
    let path = agents.path().display().to_string();
    let app = crate::support::spawn_app_with(move |config| {
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(path));
        config["restTools"] =
            json!({"lookup": {"url": "http://127.0.0.1:9/lookup", "description": "Looks up"}});
        adjust(config);
    })
    .await;
    (app, agents)
}

#[tokio::test]
async fn a_task_waiting_for_a_tool_approval_is_input_required() {
    let (app, _agents) = guarded_app(|_| {}).await;
    app.llm.push(Reply::tool_calls(vec![
        crate::support::mock_llm::ToolCall::new("call-1", "rest__lookup", "{}"),
    ]));
    let message = json!({"message": {"messageId": "m-guarded", "role": "ROLE_USER",
        "parts": [{"text": "look it up"}]}, "configuration": {"returnImmediately": true}});
    let answer = app
        .client
        .post(app.url("/a2a/guarded"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message}))
        .send()
        .await
        .expect("sent")
        .json::<Value>()
        .await
        .expect("json");
    let id = answer["result"]["task"]["id"]
        .as_str()
        .expect("task id")
        .to_string();
    let mut task = Value::Null;
    for _ in 0..200 {
        task = app
            .client
            .post(app.url("/a2a/guarded"))
            .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id}}))
            .send()
            .await
            .expect("sent")
            .json::<Value>()
            .await
            .expect("json");
        if task["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(
        task["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
}

#[tokio::test]
async fn the_readme_a2a_snippet_runs_as_written() {
    let (app, _agents) = app_with_agents().await;
    app.llm.push(Reply::text("Hello from the README."));
    let args = [
        "a2a".to_string(),
        app.address.clone(),
        "admin-key".to_string(),
    ];
    let stdout = run_python("a2a", A2A_SDK, "readme_snippet.py", &args).await;
    assert_eq!(stdout.trim(), "Hello from the README.", "{stdout}");
}

/// FileParts from the a2a-sdk reach the model as images: raw bytes (mediaType, filename) as
/// their bytes, and a URL, on a provider that says it fetches URLs (`fetchesUrls`), as that URL.
#[tokio::test]
async fn an_a2a_sdk_file_part_reaches_the_upstream_as_an_image() {
    use base64::Engine;
    let app = crate::support::spawn_app_with(|config| {
        config["auth"] = json!({"keys": [{"key": "admin-key", "admin": true}]});
        config["providers"]["llm"]["fetchesUrls"] = json!(true);
    })
    .await;
    app.llm.push(Reply::text("one pixel"));
    app.llm.push(Reply::text("a cat, by URL"));
    let png = crate::attachments::PNG;
    let png_hex: String = png.iter().map(|b| format!("{b:02x}")).collect();
    let image_url = "https://images.example.invalid/cat.png";
    let args = [
        app.address.clone(),
        "admin-key".to_string(),
        png_hex,
        image_url.to_string(),
    ];
    let stdout = run_python("a2a", A2A_SDK, "a2a_file.py", &args).await;
    assert!(stdout.lines().any(|l| l == "file part ok"), "{stdout}");
    assert!(stdout.lines().any(|l| l == "url part ok"), "{stdout}");
    let by_url = crate::attachments::last_user_content(&app.llm.requests()[1]);
    assert_eq!(by_url[1]["image_url"]["url"], image_url, "{by_url}");
    let sent = &app.llm.requests()[0];
    let parts = crate::attachments::last_user_content(sent);
    let png64 = base64::engine::general_purpose::STANDARD.encode(png);
    assert_eq!(
        parts[1]["image_url"]["url"],
        format!("data:image/png;base64,{png64}"),
        "{parts}"
    );
}

/// An app whose push notifications may go to loopback receivers (the tests'), with an admin key
/// and `alice`'s key limited to `chat`.
async fn push_app() -> TestApp {
    crate::support::spawn_app_with(|config| {
        config["auth"] = json!({"keys": [
            {"key": "admin-key", "admin": true},
            {"key": "chat-key", "userId": "alice", "agents": ["chat"]}
        ]});
        config["webhookDelivery"] = json!({"allowPrivateAddresses": true});
    })
    .await
}

/// SPEC §13: the a2a-sdk's push-notification flow (tests/sdk/a2a_push.py): a message's config
/// and a created one each get the task's final state with their token, and the configs are the
/// caller's own.
#[tokio::test]
async fn the_a2a_sdk_push_notification_flow_delivers_final_states_to_the_owners_configs() {
    push_flow_over("JSONRPC").await;
}

/// The same flow over A2A 1.0's HTTP+JSON binding (`…/tasks/{id}/pushNotificationConfigs`).
#[tokio::test]
async fn the_push_notification_flow_works_over_the_http_json_binding() {
    let app = push_flow_over("HTTP+JSON").await;
    let routes = routes_taken(&app).await;
    assert!(
        routes.contains(r#"route="/a2a/{agent}/tasks/{task}/pushNotificationConfigs""#),
        "{routes}"
    );
}

async fn push_flow_over(binding: &str) -> TestApp {
    let app = push_app().await;
    app.llm.push(Reply::text("Pushed hello"));
    app.llm.push(Reply::hang());
    let args = [
        app.address.clone(),
        "chat-key".to_string(),
        "admin-key".to_string(),
        binding.to_string(),
    ];
    let stdout = run_python("a2a", A2A_SDK, "a2a_push.py", &args).await;
    eprintln!("{stdout}");
    for check in [
        "card ok",
        "pushed final state ok",
        "config crud ok",
        "owner scoped ok",
        "pushed cancel ok",
        "deleted ok",
    ] {
        assert!(stdout.lines().any(|l| l == check), "{check}: {stdout}");
    }
    let deliveries: Value = app
        .client
        .get(app.url("/v1/webhooks/deliveries"))
        .bearer_auth("chat-key")
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let pushes: Vec<&Value> = deliveries["data"]
        .as_array()
        .expect("deliveries")
        .iter()
        .filter(|d| d["event"] == "a2a.task")
        .collect();
    assert_eq!(
        pushes.len(),
        2,
        "one message per config and state: {deliveries}"
    );
    assert!(
        pushes.iter().all(|d| d["status"] == "delivered"),
        "{deliveries}"
    );
    app
}

async fn rpc_as(app: &TestApp, key: &str, method: &str, params: Value) -> Value {
    app.client
        .post(app.url("/a2a/chat"))
        .bearer_auth(key)
        .json(&json!({"jsonrpc": "2.0", "id": "1", "method": method, "params": params}))
        .send()
        .await
        .expect("request sent")
        .json()
        .await
        .expect("JSON-RPC answer")
}

fn error_message(answer: &Value) -> &str {
    answer["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn push_configs_are_guarded_limited_per_caller_and_spoken_in_0_3() {
    let app = push_app().await;
    app.llm.push(Reply::text("done"));
    let sent = rpc_as(
        &app,
        "chat-key",
        "SendMessage",
        json!({"message": {"messageId": "m-push", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
    )
    .await;
    let task = sent["result"]["task"]["id"]
        .as_str()
        .expect("task")
        .to_string();

    // The limit: 10 configs per caller and task; the 11th is refused, replacing one is not.
    for n in 0..10 {
        let set = rpc_as(
            &app,
            "chat-key",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "id": format!("c{n}"), "url": "http://127.0.0.1:9/hook"}),
        )
        .await;
        assert_eq!(set["result"]["id"], format!("c{n}"), "{set}");
    }
    let past = rpc_as(
        &app,
        "chat-key",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "c10", "url": "http://127.0.0.1:9/hook"}),
    )
    .await;
    assert_eq!(past["error"]["code"], -32602, "{past}");
    assert!(error_message(&past).contains("at most 10"), "{past}");
    let replaced = rpc_as(
        &app,
        "chat-key",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "c9", "url": "http://127.0.0.1:9/other", "token": "t"}),
    )
    .await;
    assert_eq!(
        replaced["result"]["url"], "http://127.0.0.1:9/other",
        "{replaced}"
    );
    // Another caller's configs are counted apart: the admin may still set one.
    let admins = rpc_as(
        &app,
        "admin-key",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "url": "http://127.0.0.1:9/admin"}),
    )
    .await;
    assert_eq!(
        admins["result"]["id"],
        task.as_str(),
        "defaults to the task's id: {admins}"
    );

    // The 0.3 names and shapes.
    let set = rpc_as(
        &app,
        "chat-key",
        "tasks/pushNotificationConfig/set",
        json!({"taskId": task, "pushNotificationConfig": {"id": "c0", "url": "http://127.0.0.1:9/old",
            "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}}),
    )
    .await;
    assert_eq!(set["result"]["taskId"], task.as_str(), "{set}");
    assert_eq!(
        set["result"]["pushNotificationConfig"]["url"],
        "http://127.0.0.1:9/old"
    );
    assert_eq!(
        set["result"]["pushNotificationConfig"]["authentication"],
        json!({"schemes": ["Bearer"]}),
        "credentials are never echoed: {set}"
    );
    let got = rpc_as(
        &app,
        "chat-key",
        "tasks/pushNotificationConfig/get",
        json!({"id": task, "pushNotificationConfigId": "c0"}),
    )
    .await;
    assert_eq!(got["result"]["pushNotificationConfig"]["id"], "c0", "{got}");
    let listed = rpc_as(
        &app,
        "chat-key",
        "tasks/pushNotificationConfig/list",
        json!({"id": task}),
    )
    .await;
    assert_eq!(
        listed["result"].as_array().map(Vec::len),
        Some(10),
        "{listed}"
    );
    let deleted = rpc_as(
        &app,
        "chat-key",
        "tasks/pushNotificationConfig/delete",
        json!({"id": task, "pushNotificationConfigId": "c0"}),
    )
    .await;
    assert_eq!(deleted["result"], Value::Null, "{deleted}");
    let again = rpc_as(
        &app,
        "chat-key",
        "tasks/pushNotificationConfig/delete",
        json!({"id": task, "pushNotificationConfigId": "c0"}),
    )
    .await;
    assert!(error_message(&again).contains("c0"), "{again}");

    // Unknown tasks, missing fields, a URL that is not http(s).
    let unknown = rpc_as(
        &app,
        "chat-key",
        "GetTaskPushNotificationConfig",
        json!({"taskId": "no-such-task", "id": "c1"}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");
    let missing = rpc_as(
        &app,
        "chat-key",
        "ListTaskPushNotificationConfigs",
        json!({}),
    )
    .await;
    assert!(error_message(&missing).contains("taskId"), "{missing}");
    let scheme = rpc_as(
        &app,
        "chat-key",
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "x", "url": "ftp://127.0.0.1/hook"}),
    )
    .await;
    assert!(error_message(&scheme).contains("params.url"), "{scheme}");
}

/// Without `webhookDelivery.allowPrivateAddresses` the address guard refuses a loopback
/// receiver, in a message's config before any task starts.
#[tokio::test]
async fn the_address_guard_refuses_a_loopback_push_receiver() {
    let (app, _agents) = app_with_agents().await;
    let answer = rpc(
        &app,
        "chat",
        "SendMessage",
        json!({"message": {"messageId": "m-guard", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
               "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}}}),
    )
    .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        error_message(&answer).contains("params.configuration.taskPushNotificationConfig.url"),
        "{answer}"
    );
    let listed = rpc(&app, "chat", "ListTasks", json!({})).await;
    assert_eq!(
        listed["result"]["tasks"],
        json!([]),
        "no task started: {listed}"
    );
}

/// PyPI's `a2a-lint` (the A2A TCK is not on a registry), installed by `scripts/test` into its
/// own venv.
const A2A_LINT: PythonTool = PythonTool {
    binary: "a2a-lint",
    package: "a2a-lint",
    version: "0.1.1",
    env_var: "AGENTD_TEST_A2A_LINT",
};

/// Runs `a2a-lint` on `url` (with `--live`: a real message/send, and message/stream since the
/// card declares streaming) and gives its JSON report.
async fn a2a_lint(url: &str, live: bool) -> Value {
    let lint = tokio::task::spawn_blocking(|| installed(&A2A_LINT))
        .await
        .expect("a2a-lint");
    let mut command = tokio::process::Command::new(lint);
    command.arg(url).arg("--json").arg("--strict");
    if live {
        command.arg("--live");
    }
    let output = command.output().await.expect("a2a-lint runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "a2a-lint printed no JSON report: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(
        output.status.success(),
        "a2a-lint found problems (--strict: warnings too): {report:#}"
    );
    report
}

/// The A2A linter finds no error and no warning on the server's card or an agent's, and the
/// agent answers its live message/send and message/stream. (It cannot send a key: the app is
/// open, as a local agentd without keys is.)
#[tokio::test]
async fn a2a_lint_passes_the_cards_and_a_live_round_trip() {
    let app = crate::support::spawn_app().await;
    app.llm.push(Reply::text("Hello from the mock upstream!"));
    app.llm.push(Reply::text("Hello again, streamed."));
    let agent = a2a_lint(&app.url("/a2a/chat"), true).await;
    assert_eq!(agent["ok"], true, "{agent:#}");
    assert_eq!(agent["summary"]["errors"], 0, "{agent:#}");
    assert_eq!(agent["summary"]["warnings"], 0, "{agent:#}");
    assert!(
        agent["liveRoundTripMs"].is_u64(),
        "the live send ran: {agent:#}"
    );
    assert!(
        agent["streamEvents"].as_u64().is_some_and(|n| n >= 2),
        "the stream delivered events: {agent:#}"
    );
    let server = a2a_lint(&app.address, false).await;
    assert_eq!(server["summary"]["errors"], 0, "{server:#}");
    assert_eq!(server["summary"]["warnings"], 0, "{server:#}");
}

/// The id of the task a `SendMessage` answer started.
fn task_id(sent: &Value) -> String {
    sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {sent}"))
        .to_string()
}

/// Whether `owner`'s outbox holds an A2A push notice of `task`.
async fn push_notice_stored(
    store: &std::sync::Arc<dyn agentd::store::Store>,
    owner: &str,
    task: &str,
) -> bool {
    let deliveries = store
        .list_deliveries(Some(owner), 100)
        .await
        .expect("deliveries");
    deliveries
        .iter()
        .any(|d| d.run_id.as_deref() == Some(task) && d.event == "a2a.task")
}

/// A task's push notice of its wait for an approval is put in the outbox in the transaction
/// that parks it: the moment the task reads `waiting_approval`, its notice is there.
#[tokio::test]
async fn a_tasks_wait_and_its_push_notice_are_stored_together() {
    let (app, _agents) = guarded_app(|config| {
        config["auth"] = json!({"keys": [{"key": "alice-key", "userId": "alice"}]});
        config["webhookDelivery"] = json!({"allowPrivateAddresses": true});
    })
    .await;
    let store = app.runtime.store().clone();
    for round in 0..3 {
        app.llm.push(
            Reply::tool_calls(vec![crate::support::mock_llm::ToolCall::new(
                "call-1",
                "rest__lookup",
                "{}",
            )])
            .with_first_byte_delay(std::time::Duration::from_millis(200)),
        );
        let params = json!({"message": {"messageId": format!("m-wait-{round}"), "role": "ROLE_USER",
                "parts": [{"text": "look it up"}]},
            "configuration": {"returnImmediately": true,
                "taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook", "token": "t"}}});
        let sent: Value = app
            .client
            .post(app.url("/a2a/guarded"))
            .bearer_auth("alice-key")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}))
            .send()
            .await
            .expect("sent")
            .json()
            .await
            .expect("json");
        let task = task_id(&sent);
        loop {
            let run = store.get_run(&task).await.expect("run read");
            if run.is_some_and(|run| run.status == agentd::vocabulary::RunStatus::WaitingApproval) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert!(
            push_notice_stored(&store, "alice", &task).await,
            "round {round}: the task waits but its notice is not in the outbox"
        );
    }
}

/// A task's push notice of its end is put in the outbox in the transaction that stores the end:
/// the moment the task reads as ended, its notice is there (a replica dying right after storing
/// the end loses no notice).
#[tokio::test]
async fn a_tasks_end_and_its_push_notice_are_stored_together() {
    let app = push_app().await;
    let store = app.runtime.store().clone();
    for round in 0..4 {
        app.llm.push(
            Reply::text("Pushed hello")
                .with_first_byte_delay(std::time::Duration::from_millis(300)),
        );
        let sent = rpc_as(
            &app,
            "chat-key",
            "SendMessage",
            json!({"message": {"messageId": format!("m-txn-{round}"), "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                   "configuration": {"returnImmediately": true,
                     "taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook", "token": "t"}}}),
        )
        .await;
        let task = task_id(&sent);
        let ended = loop {
            if let Some(run) = store.get_run(&task).await.expect("run read")
                && run.status.is_terminal()
            {
                break run;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        };
        assert!(
            push_notice_stored(&store, "alice", &task).await,
            "round {round}: the task reads {:?} but its notice is not in the outbox",
            ended.status
        );
    }
}
