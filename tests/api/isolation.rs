//! Every caller owns what it starts (issue 35, items 1–5): keys bound to no user are owners of
//! their own (`key:ID`) and neither each other nor the admins; approvals name who decided; a
//! cached answer only ever goes back to its owner, on the store and Redis caches alike; ids
//! clients choose for conversations are per owner; A2A tasks of a key without a user are its
//! own; and a key limited to some agents sees neither its user's runs of other agents nor any
//! agent's system prompt.

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app_with};

const ADMIN: &str = "admin-secret";
/// Bound to no user, limited to `chat`.
const CHAT_ONLY: &str = "chat-only-secret";
/// Bound to no user, every agent.
const UNBOUND: &str = "unbound-secret";
const ALICE: &str = "alice-secret";
/// Alice's second key, limited to `chat`.
const ALICE_CHAT: &str = "alice-chat-secret";
const BOB: &str = "bob-secret";

fn keys() -> Value {
    json!({"keys": [
        {"key": ADMIN, "admin": true, "id": "ops"},
        {"key": CHAT_ONLY, "agents": ["chat"], "id": "chat-only"},
        {"key": UNBOUND, "id": "unbound"},
        {"key": ALICE, "userId": "alice", "id": "alice"},
        {"key": ALICE_CHAT, "userId": "alice", "agents": ["chat"], "id": "alice-chat"},
        {"key": BOB, "userId": "bob", "id": "bob"}
    ]})
}

async fn keyed_app() -> TestApp {
    spawn_app_with(|config| config["auth"] = keys()).await
}

async fn call(
    app: &TestApp,
    method: reqwest::Method,
    key: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = app.client.request(method, app.url(path)).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    call(app, reqwest::Method::GET, key, path, None).await
}

async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> (u16, Value) {
    call(app, reqwest::Method::POST, key, path, Some(body)).await
}

/// A finished run of `agent` started by `key`; returns its id.
async fn finished_run(app: &TestApp, key: &str, agent: &str) -> String {
    app.llm.push(Reply::text("done"));
    let response = app
        .client
        .post(app.url(&format!("/v1/agents/{agent}/runs")))
        .bearer_auth(key)
        .json(&json!({"prompt": "hi"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    crate::support::run_id(&response)
}

fn listed_ids(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .map(|runs| {
            runs.iter()
                .filter_map(|r| r["run_id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn keys_bound_to_no_user_own_their_runs_and_reach_no_one_elses() {
    let app = keyed_app().await;
    let admins = finished_run(&app, ADMIN, "chat").await;
    let unbounds = finished_run(&app, UNBOUND, "chat").await;
    let chat_onlys = finished_run(&app, CHAT_ONLY, "chat").await;

    for (key, own, others) in [
        (CHAT_ONLY, &chat_onlys, [&admins, &unbounds]),
        (UNBOUND, &unbounds, [&admins, &chat_onlys]),
    ] {
        let (status, run) = get(&app, key, &format!("/v1/runs/{own}")).await;
        assert_eq!(status, 200, "a key reads its own run: {run}");
        let (_, list) = get(&app, key, "/v1/runs").await;
        assert_eq!(
            listed_ids(&list),
            [own.as_str()],
            "a key lists its own runs only"
        );
        for other in others {
            let (status, _) = get(&app, key, &format!("/v1/runs/{other}")).await;
            assert_eq!(status, 403, "another owner's run");
            let (status, _) = get(&app, key, &format!("/v1/runs/{other}/events")).await;
            assert_eq!(status, 403, "another owner's events");
            let (status, _) = post(&app, key, &format!("/v1/runs/{other}/cancel"), json!({})).await;
            assert_eq!(status, 403, "another owner's cancel");
        }
        let (status, _) = get(&app, key, "/v1/runs?user=key:ops").await;
        assert_eq!(status, 403, "listing another owner's runs");
    }
    // The runs are recorded as their keys' own, and admins reach across.
    let (_, list) = get(&app, ADMIN, "/v1/runs?user=key:unbound").await;
    assert_eq!(listed_ids(&list), [unbounds.as_str()]);
    assert_eq!(list["data"][0]["user_id"], "key:unbound", "{list}");
    let (_, list) = get(&app, ADMIN, "/v1/runs").await;
    assert_eq!(listed_ids(&list).len(), 3);
    let (_, list) = get(&app, ADMIN, "/v1/runs?user=key:chat-only").await;
    assert_eq!(listed_ids(&list), [chat_onlys]);
}

#[tokio::test]
async fn a_key_bound_to_no_user_cannot_read_or_delete_another_keys_responses() {
    let app = keyed_app().await;
    app.llm.push(Reply::text("secret answer"));
    let (status, response) = post(
        &app,
        UNBOUND,
        "/v1/responses",
        json!({"model": "chat", "input": "hi"}),
    )
    .await;
    assert_eq!(status, 200, "{response}");
    let id = response["id"].as_str().expect("response id");
    for (method, path) in [
        (reqwest::Method::GET, format!("/v1/responses/{id}")),
        (
            reqwest::Method::GET,
            format!("/v1/responses/{id}/input_items"),
        ),
        (reqwest::Method::DELETE, format!("/v1/responses/{id}")),
    ] {
        let (status, _) = call(&app, method.clone(), CHAT_ONLY, &path, None).await;
        assert_eq!(status, 404, "{method} {path} by another key");
    }
    // Continuing it is as unknown to another key.
    let (status, _) = post(
        &app,
        CHAT_ONLY,
        "/v1/responses",
        json!({"model": "chat", "input": "more", "previous_response_id": id}),
    )
    .await;
    assert_eq!(status, 404);
    let (status, kept) = get(&app, UNBOUND, &format!("/v1/responses/{id}")).await;
    assert_eq!(status, 200, "the owner still has it: {kept}");
}

/// An agent whose only tool is an MCP tool that needs approval.
const APPROVER: &str = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\napprovalTimeout: 10m\n---\nYou echo.\n";

#[tokio::test]
async fn approvals_are_decided_by_their_owner_or_an_admin_and_name_who_decided() {
    use crate::support::mcp::test_server_config;
    use crate::support::mock_llm::ToolCall;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("approver.ai"), APPROVER).expect("agent");
    let agents = dir.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["auth"] = keys();
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents));
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
    })
    .await;
    let mut waiting = Vec::new();
    for key in [UNBOUND, UNBOUND] {
        app.llm.push(Reply::tool_calls(vec![ToolCall::new(
            "call-1",
            "test__echo",
            json!({"text": "hi"}).to_string(),
        )]));
        let (status, accepted) = post(
            &app,
            key,
            "/v1/agents/approver/runs",
            json!({"prompt": "echo hi", "background": true}),
        )
        .await;
        assert_eq!(status, 202, "{accepted}");
        let run = accepted["run_id"].as_str().expect("run id").to_string();
        wait_for_status(&app, &run, "waiting_approval").await;
        waiting.push(run);
    }
    app.llm.push(Reply::text("echoed"));
    app.llm.push(Reply::text("echoed"));
    // Another key bound to no user may neither decide nor list the wait.
    let approve = json!({"decision": "approve", "arguments": {"text": "edited"}});
    let (status, _) = post(
        &app,
        CHAT_ONLY,
        &format!("/v1/runs/{}/approvals/call-1", waiting[0]),
        approve.clone(),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = get(
        &app,
        CHAT_ONLY,
        &format!("/v1/runs/{}/approvals", waiting[0]),
    )
    .await;
    assert_eq!(status, 403);
    let (_, listed) = get(&app, CHAT_ONLY, "/v1/runs?status=waiting_approval").await;
    assert!(listed_ids(&listed).is_empty(), "{listed}");

    // The owner decides one, an admin the other: each decision names its decider.
    let (status, decided) = post(
        &app,
        UNBOUND,
        &format!("/v1/runs/{}/approvals/call-1", waiting[0]),
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    let (status, decided) = post(
        &app,
        ADMIN,
        &format!("/v1/runs/{}/approvals/call-1", waiting[1]),
        json!({"decision": "deny"}),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    for (run, by) in waiting.iter().zip(["key:unbound", "key:ops"]) {
        wait_for_status(&app, run, "completed").await;
        let events = app
            .client
            .get(app.url(&format!("/v1/runs/{run}/events")))
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("sent")
            .text()
            .await
            .expect("events");
        let decided = crate::support::numbered_frames(&events)
            .into_iter()
            .find(|(_, kind, _)| kind == "tool.approval_decided")
            .expect("a decision event");
        assert_eq!(decided.2["by"], by, "{events}");
    }
}

async fn wait_for_status(app: &TestApp, run_id: &str, status: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, run) = get(app, ADMIN, &format!("/v1/runs/{run_id}")).await;
        if run["status"] == status {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {run_id} is not {status}: {run}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// A cached agent: whatever its tools do (they may act as the caller), an answer is its owner's.
const CACHED: &str = "---\ndescription: Cached\nmodels: llm/upstream-model\nfinalization: text\ncache: 1h\n---\nYou answer.\n";

async fn cached_answers_stay_with_their_owner(cache: Value) {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("cached.ai"), CACHED).expect("agent");
    let agents = dir.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["auth"] = keys();
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents));
        config["cache"] = cache;
    })
    .await;
    let ask = json!({"model": "cached", "messages": [{"role": "user", "content": "my token?"}]});
    app.llm.push(Reply::text("alice's token is t-alice"));
    let (status, first) = post(&app, ALICE, "/v1/chat/completions", ask.clone()).await;
    assert_eq!(status, 200, "{first}");
    let (_, again) = post(&app, ALICE, "/v1/chat/completions", ask.clone()).await;
    assert_eq!(
        again["choices"][0]["message"]["content"], "alice's token is t-alice",
        "the owner gets her cached answer"
    );
    assert_eq!(
        app.llm.request_count(),
        1,
        "alice's second ask is a cache hit"
    );
    for key in [BOB, UNBOUND, CHAT_ONLY] {
        app.llm.push(Reply::text("your own answer"));
        let (status, answer) = post(&app, key, "/v1/chat/completions", ask.clone()).await;
        if key == CHAT_ONLY {
            assert_eq!(status, 403, "{answer}");
            continue;
        }
        assert_eq!(
            answer["choices"][0]["message"]["content"], "your own answer",
            "another owner never gets alice's answer"
        );
    }
    assert_eq!(app.llm.request_count(), 3);
}

#[tokio::test]
async fn a_cached_answer_goes_back_only_to_its_owner_on_the_store_cache() {
    cached_answers_stay_with_their_owner(json!({"backend": "store"})).await;
}

#[tokio::test]
async fn a_cached_answer_goes_back_only_to_its_owner_on_the_redis_cache() {
    crate::support::services::ensure_local_redis(6379);
    let prefix = format!("agentd:isolation:{}:", uuid::Uuid::new_v4());
    cached_answers_stay_with_their_owner(json!({
        "backend": "redis",
        "redis": {"url": "redis://127.0.0.1:6379", "keyPrefix": prefix}
    }))
    .await;
}

fn ag_ui_input(thread: &str, text: &str) -> Value {
    json!({"threadId": thread, "runId": format!("r-{text}"), "state": {}, "tools": [], "context": [],
        "forwardedProps": {}, "messages": [{"id": text, "role": "user", "content": text}]})
}

#[tokio::test]
async fn conversation_ids_clients_choose_are_per_owner() {
    let app = keyed_app().await;
    for (key, text) in [(ALICE, "alice here"), (BOB, "bob here")] {
        app.llm.push(Reply::text(format!("hello, {text}")));
        let response = app
            .client
            .post(app.url("/ag-ui/chat"))
            .bearer_auth(key)
            .json(&ag_ui_input("t1", text))
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200, "the second owner's t1 is his own");
        let body = response.text().await.expect("body");
        assert!(body.contains("RUN_FINISHED"), "{body}");
    }
    // Each owner's t1 holds only their own messages.
    for (user, key, text) in [("alice", ALICE, "alice here"), ("bob", BOB, "bob here")] {
        let (status, conversation) = get(&app, key, &format!("/api/{user}/conversations/t1")).await;
        assert_eq!(status, 200, "{conversation}");
        let text_of_all = conversation.to_string();
        assert!(text_of_all.contains(text), "{conversation}");
        assert!(
            !text_of_all.contains(if user == "alice" {
                "bob here"
            } else {
                "alice here"
            }),
            "{conversation}"
        );
    }
    // The AI SDK's chat ids too.
    for (user, key) in [("alice", ALICE), ("bob", BOB)] {
        app.llm.push(Reply::text("hi"));
        let response = app
            .client
            .post(app.url(&format!("/api/{user}/chat")))
            .bearer_auth(key)
            .json(&json!({"id": "same-chat", "messages": [
                {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
            ]}))
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200, "{user}");
        let _ = response.text().await;
    }
}

async fn a2a(app: &TestApp, key: &str, method: &str, params: Value) -> Value {
    let (_, answer) = post(
        app,
        key,
        "/a2a/chat",
        json!({"jsonrpc": "2.0", "id": "1", "method": method, "params": params}),
    )
    .await;
    answer
}

#[tokio::test]
async fn a2a_tasks_of_a_key_bound_to_no_user_are_its_own() {
    let app = keyed_app().await;
    app.llm.push(Reply::text("task answer"));
    let message = json!({"message": {"kind": "message", "messageId": "m1", "role": "user",
        "parts": [{"kind": "text", "text": "hi"}]}});
    let sent = a2a(&app, UNBOUND, "message/send", message).await;
    let task = &sent["result"];
    assert_eq!(task["status"]["state"], "completed", "{sent}");
    let id = task["id"].as_str().expect("task id").to_string();
    let context = task["contextId"].as_str().expect("context").to_string();

    let got = a2a(&app, UNBOUND, "GetTask", json!({"id": id})).await;
    assert_eq!(
        got["result"]["id"],
        id.as_str(),
        "the key reads its task: {got}"
    );
    let listed = a2a(&app, UNBOUND, "ListTasks", json!({})).await;
    let tasks: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(tasks, [id.as_str()], "{listed}");

    // Another key neither reads, lists nor writes into it.
    let got = a2a(&app, CHAT_ONLY, "GetTask", json!({"id": id})).await;
    assert_eq!(got["error"]["code"], -32001, "{got}");
    let listed = a2a(&app, CHAT_ONLY, "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");
    let intrude = json!({"message": {"kind": "message", "messageId": "m2", "role": "user",
        "contextId": context, "parts": [{"kind": "text", "text": "me too"}]}});
    let intruded = a2a(&app, CHAT_ONLY, "message/send", intrude).await;
    assert!(intruded.get("error").is_some(), "{intruded}");
    let (_, conversation) = get(
        &app,
        ADMIN,
        &format!("/v1/runs?user=key:unbound&conversation_id={context}"),
    )
    .await;
    assert_eq!(listed_ids(&conversation).len(), 1, "{conversation}");
}

#[tokio::test]
async fn a_key_limited_to_some_agents_sees_neither_other_agents_runs_nor_system_prompts() {
    let app = keyed_app().await;
    let reports = finished_run(&app, ALICE, "tight").await;
    let chats = finished_run(&app, ALICE, "chat").await;

    let (status, _) = get(&app, ALICE_CHAT, &format!("/v1/runs/{reports}")).await;
    assert_eq!(status, 403, "alice's run of another agent");
    let (_, list) = get(&app, ALICE_CHAT, "/v1/runs").await;
    assert_eq!(listed_ids(&list), [chats.as_str()], "{list}");
    let (_, list) = get(&app, ALICE_CHAT, "/v1/runs?agent=tight").await;
    assert!(listed_ids(&list).is_empty(), "{list}");

    // No result handed to a non-admin holds the agent's system prompt.
    let (_, run) = get(&app, ALICE_CHAT, &format!("/v1/runs/{chats}")).await;
    let roles: Vec<&str> = run["result"]["conversation"]
        .as_array()
        .expect("conversation")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert!(!roles.is_empty() && !roles.contains(&"system"), "{run}");
    assert!(
        !run.to_string().contains("You are a helpful assistant"),
        "{run}"
    );
    app.llm.push(Reply::text("fresh"));
    let (_, fresh) = post(&app, ALICE, "/v1/agents/chat/runs", json!({"prompt": "hi"})).await;
    assert!(
        !fresh.to_string().contains("You are a helpful assistant"),
        "{fresh}"
    );
    // Admins may read agent definitions, system prompts included.
    let (_, run) = get(&app, ADMIN, &format!("/v1/runs/{chats}")).await;
    assert!(
        run.to_string().contains("You are a helpful assistant"),
        "{run}"
    );
}

/// `call` with `x-agentd-user: user`; returns the status, the body and the warning header.
async fn acting(
    app: &TestApp,
    key: &str,
    user: Option<&str>,
    path: &str,
    body: Option<Value>,
) -> (u16, Value, Option<String>) {
    let method = if body.is_some() {
        reqwest::Method::POST
    } else {
        reqwest::Method::GET
    };
    let mut request = app.client.request(method, app.url(path)).bearer_auth(key);
    if let Some(user) = user {
        request = request.header("x-agentd-user", user);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    let warning = response
        .headers()
        .get("x-agentd-warning")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let run_id = response
        .headers()
        .get("x-agentd-run-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = response.json().await.unwrap_or(Value::Null);
    if let Some(run_id) = run_id {
        body["x-agentd-run-id"] = json!(run_id);
    }
    (status, body, warning)
}

#[tokio::test]
async fn an_admin_acts_for_a_user_whose_run_it_is_and_nobody_else_may() {
    let app = keyed_app().await;
    let bobs = finished_run(&app, BOB, "chat").await;
    // Through the header, on the runs API.
    app.llm.push(Reply::text("done"));
    let (status, body, _) = acting(
        &app,
        ADMIN,
        Some("alice"),
        "/v1/agents/chat/runs",
        Some(json!({"prompt": "hi"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let by_header = body["x-agentd-run-id"]
        .as_str()
        .expect("run id")
        .to_string();
    // Through OpenAI's `user` field, on chat completions.
    app.llm.push(Reply::text("done"));
    let (status, body, warning) = acting(
        &app,
        ADMIN,
        None,
        "/v1/chat/completions",
        Some(json!({"model": "chat", "user": "alice", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!((status, warning), (200, None), "{body}");
    let by_field = body["x-agentd-run-id"]
        .as_str()
        .expect("run id")
        .to_string();
    // And on the Responses API.
    app.llm.push(Reply::text("done"));
    let (status, body, _) = acting(
        &app,
        ADMIN,
        None,
        "/v1/responses",
        Some(json!({"model": "chat", "user": "alice", "input": "hi"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let by_response = body["id"]
        .as_str()
        .and_then(|id| id.strip_prefix("resp_"))
        .expect("a response id")
        .to_string();

    // And on Anthropic Messages, through the header.
    app.llm.push(Reply::text("done"));
    let (status, body, _) = acting(
        &app,
        ADMIN,
        Some("alice"),
        "/v1/messages",
        Some(json!({"model": "chat", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let by_messages = body["x-agentd-run-id"]
        .as_str()
        .expect("run id")
        .to_string();

    let (status, list) = get(&app, ALICE, "/v1/runs").await;
    assert_eq!(status, 200);
    let mut listed = listed_ids(&list);
    listed.sort();
    let mut expected = vec![
        by_header.clone(),
        by_field.clone(),
        by_response,
        by_messages,
    ];
    expected.sort();
    assert_eq!(listed, expected, "both runs are alice's: {list}");
    for run in list["data"].as_array().expect("runs") {
        assert_eq!(run["user_id"], "alice", "{run}");
        assert_eq!(
            run["acted_by"], "key:ops",
            "recorded as an admin's act: {run}"
        );
    }
    let (status, run) = get(&app, ALICE, &format!("/v1/runs/{by_header}")).await;
    assert_eq!(
        (status, &run["acted_by"]),
        (200, &json!("key:ops")),
        "{run}"
    );
    let (status, own) = get(&app, BOB, &format!("/v1/runs/{bobs}")).await;
    assert_eq!(status, 200);
    assert!(
        own.get("acted_by").is_none(),
        "a run its owner started: {own}"
    );
    for run in [&by_header, &by_field] {
        let (status, _) = get(&app, BOB, &format!("/v1/runs/{run}")).await;
        assert_eq!(status, 403, "bob does not see alice's run");
    }
    // Acting for alice, the admin sees what alice sees.
    let (status, list, _) = acting(&app, ADMIN, Some("alice"), "/v1/runs", None).await;
    assert_eq!(status, 200);
    assert!(!listed_ids(&list).contains(&bobs), "{list}");
    let (status, _, _) = acting(
        &app,
        ADMIN,
        Some("alice"),
        &format!("/v1/runs/{bobs}"),
        None,
    )
    .await;
    assert_eq!(status, 403);

    // Nobody but an admin acts for another user.
    for key in [BOB, UNBOUND, CHAT_ONLY] {
        let (status, body, _) = acting(
            &app,
            key,
            Some("alice"),
            "/v1/agents/chat/runs",
            Some(json!({"prompt": "hi"})),
        )
        .await;
        assert_eq!(status, 403, "{key}: {body}");
        assert_eq!(body["error"]["param"], "x-agentd-user", "{body}");
    }
    let (status, body, _) = acting(&app, ADMIN, Some("key:unbound"), "/v1/runs", None).await;
    assert_eq!(
        (status, &body["error"]["param"]),
        (400, &json!("x-agentd-user"))
    );
    // A key naming its own user is itself; another user in `user` is only OpenAI's tag.
    let (status, _, _) = acting(&app, ALICE, Some("alice"), "/v1/runs", None).await;
    assert_eq!(status, 200);
    app.llm.push(Reply::text("done"));
    let (status, body, warning) = acting(
        &app,
        BOB,
        None,
        "/v1/chat/completions",
        Some(json!({"model": "chat", "user": "alice", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(warning.as_deref(), Some("ignored parameters: user"));
    let run = body["x-agentd-run-id"].as_str().expect("run id");
    let (status, _) = get(&app, BOB, &format!("/v1/runs/{run}")).await;
    assert_eq!(status, 200, "the run stays bob's");
    let (status, body, _) = acting(
        &app,
        ADMIN,
        Some("alice"),
        "/v1/chat/completions",
        Some(json!({"model": "chat", "user": "bob", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["param"]),
        (400, &json!("user")),
        "{body}"
    );
}
