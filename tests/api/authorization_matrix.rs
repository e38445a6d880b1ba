//! The authorization matrix (issue 35): every route `/openapi.json` documents (the router serves
//! only documented routes, so a new route appears here or this test fails naming it) × five
//! callers (none, an admin, a user-bound key, a key bound to no user, a key limited to some
//! agents) against objects another caller owns — a run waiting for approval, a finished run, a
//! stored response, a conversation, a secret and an A2A task — once owned by user `carol` and
//! once by a key bound to no user. It asserts who may read, change and list what, and that
//! nothing of the owner's changed after everyone else tried.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::mcp::test_server_config;
use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

const ADMIN: &str = "matrix-admin";
const CAROL: &str = "matrix-carol";
/// The other owner: a key bound to no user, whose things are `key:owner`'s.
const OWNER_KEY: &str = "matrix-owner-key";
const ALICE: &str = "matrix-alice";
const UNBOUND: &str = "matrix-unbound";
const LIMITED: &str = "matrix-limited";
const SECRETS_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
/// The id of the push-notification config the owner sets on its A2A task.
const OWNERS_PUSH_CONFIG: &str = "owners-config";
/// Its URL (a public address the guard takes; nothing is delivered while the task has ended).
const OWNERS_PUSH_URL: &str = "https://hooks.example.com/the-owner's-hook";
const APPROVER: &str = "---\ndescription: Echoes, with a person approving\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\napprovalTimeout: 10m\n---\nYou echo.\n";

/// Who calls.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    Nobody,
    Admin,
    UserBound,
    Unbound,
    AgentLimited,
}

const EVERYONE: [Who; 5] = [
    Who::Nobody,
    Who::Admin,
    Who::UserBound,
    Who::Unbound,
    Who::AgentLimited,
];

impl Who {
    fn key(self) -> Option<&'static str> {
        match self {
            Who::Nobody => None,
            Who::Admin => Some(ADMIN),
            Who::UserBound => Some(ALICE),
            Who::Unbound => Some(UNBOUND),
            Who::AgentLimited => Some(LIMITED),
        }
    }
}

/// What a route does with carol's objects, and so what each caller gets.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Access {
    /// Anyone, without a key.
    Public,
    /// Reads or changes one of carol's objects: others get 403/404 (an error for JSON-RPC).
    OthersObject,
    /// Carol's object that only she reaches, admins included (a stored Response: admins read
    /// runs through the runs API): everyone else gets 404.
    OwnerOnly,
    /// Lists: others get 403, or a list without carol's ids.
    Listing,
    /// Acts on the caller's own behalf only (starts its own run, reads its own identity):
    /// a key is needed, and nothing of carol's is in the answer.
    OwnBehalf,
    /// Admin keys only (the audit log): everyone else gets 403.
    AdminOnly,
    /// Changes another owner's object (erasing a user): others get 403/404; an admin gets 2xx,
    /// or 409 while the owner has a run in progress (the matrix keeps one waiting).
    AdminMayBeBusy,
}

/// Whose objects the callers try to reach.
#[derive(Debug, Clone, Copy)]
struct Owner {
    key: &'static str,
    /// The `{user_id}` of the per-user routes: the user, or the key's owner id.
    user: &'static str,
    /// Whether it is a user (per-user chat and secrets are a user's).
    is_user: bool,
}

const CAROL_OWNS: Owner = Owner {
    key: CAROL,
    user: "carol",
    is_user: true,
};
const KEY_OWNS: Owner = Owner {
    key: OWNER_KEY,
    user: "key:owner",
    is_user: false,
};

/// The owner's objects.
struct Objects {
    owner: Owner,
    waiting_run: String,
    finished_run: String,
    response: String,
    conversation: String,
    /// A conversation started through OpenAI's Conversations API (an id no other probe reuses).
    openai_conversation: String,
    task: String,
    /// A run-time key of the owner (an admin's key bound to no user for a key owner).
    api_key: String,
    /// A schedule of the owner's (yearly: it does not fire during the test).
    schedule: String,
    /// A file the owner uploaded (`POST /v1/files`).
    file: String,
}

struct Probe {
    method: reqwest::Method,
    path: String,
    body: Option<Value>,
    access: Access,
}

fn rpc(method: &str, params: Value) -> Option<Value> {
    Some(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
}

/// The probe for one documented route; `None` names a route the matrix does not know.
fn probe(method: &str, template: &str, objects: &Objects) -> Option<Vec<Probe>> {
    use Access::*;
    let o = objects;
    let one = |m: reqwest::Method, path: String, body: Option<Value>, access: Access| {
        vec![Probe {
            method: m,
            path,
            body,
            access,
        }]
    };
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;
    let put = reqwest::Method::PUT;
    let delete = reqwest::Method::DELETE;
    let patch = reqwest::Method::PATCH;
    let chat_ask = json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]});
    Some(match (method, template) {
        ("get", "/" | "/health" | "/ready" | "/metrics" | "/openapi.json") => {
            one(get, template.to_string(), None, Public)
        }
        ("get", "/ui/{file}") => one(get, "/ui/app.js".into(), None, Public),
        ("get", "/.well-known/oauth-protected-resource" | "/v1/signin") => {
            one(get, template.to_string(), None, Public)
        }
        ("post", "/v1/keys") => one(
            post,
            template.into(),
            Some(json!({"name": "a key of my own"})),
            OwnBehalf,
        ),
        ("get", "/v1/keys") => one(get, template.into(), None, Listing),
        ("post", "/v1/keys/{key_id}/rotate") => one(
            post,
            format!("/v1/keys/{}/rotate", o.api_key),
            None,
            OthersObject,
        ),
        ("delete", "/v1/keys/{key_id}") => one(
            delete,
            format!("/v1/keys/{}", o.api_key),
            None,
            OthersObject,
        ),
        ("post", "/v1/markdown") => one(
            post,
            template.into(),
            Some(json!({"text": "# hi"})),
            OwnBehalf,
        ),
        ("get", "/v1/me" | "/v1/models" | "/v1/agents" | "/.well-known/agent-card.json") => {
            one(get, template.into(), None, OwnBehalf)
        }
        ("get", "/v1/models/{model}") => one(get, "/v1/models/chat".into(), None, OwnBehalf),
        ("get", "/v1/agents/{agent}") => one(get, "/v1/agents/chat".into(), None, OwnBehalf),
        ("get", "/ag-ui/{agent}/capabilities") => {
            one(get, "/ag-ui/chat/capabilities".into(), None, OwnBehalf)
        }
        ("get", "/a2a/{agent}/.well-known/agent-card.json") => one(
            get,
            "/a2a/chat/.well-known/agent-card.json".into(),
            None,
            OwnBehalf,
        ),
        ("post", "/v1/chat/completions") => one(post, template.into(), Some(chat_ask), OwnBehalf),
        ("post", "/v1/completions") => one(
            post,
            template.into(),
            Some(json!({"model": "chat", "prompt": "hi"})),
            OwnBehalf,
        ),
        ("post", "/v1/messages") => one(
            post,
            template.into(),
            Some(
                json!({"model": "chat", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}),
            ),
            OwnBehalf,
        ),
        ("post", "/v1/messages/count_tokens") => one(
            post,
            template.into(),
            Some(json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]})),
            OwnBehalf,
        ),
        ("post", "/v1/agents/{agent}/runs") => one(
            post,
            "/v1/agents/chat/runs".into(),
            Some(json!({"prompt": "hi"})),
            OwnBehalf,
        ),
        ("post", "/v1/responses") => vec![
            Probe {
                method: post.clone(),
                path: template.into(),
                body: Some(json!({"model": "chat", "input": "hi"})),
                access: OwnBehalf,
            },
            // Continuing carol's response is reaching her object.
            Probe {
                method: post.clone(),
                path: template.into(),
                body: Some(
                    json!({"model": "chat", "input": "more", "previous_response_id": o.response}),
                ),
                access: OwnerOnly,
            },
            // So is adding to her conversation.
            Probe {
                method: post,
                path: template.into(),
                body: Some(
                    json!({"model": "chat", "input": "more", "conversation": o.openai_conversation}),
                ),
                access: OwnerOnly,
            },
        ],
        ("post", "/mcp") => one(
            post,
            template.into(),
            rpc("tools/list", json!({})),
            OwnBehalf,
        ),
        ("post", "/ag-ui/{agent}") => one(
            post,
            "/ag-ui/chat".into(),
            Some(
                json!({"threadId": o.conversation, "runId": "r", "state": {}, "tools": [],
                "context": [], "forwardedProps": {},
                "messages": [{"id": "1", "role": "user", "content": "hi"}]}),
            ),
            OwnBehalf,
        ),
        ("get", "/v1/runs") => vec![
            Probe {
                method: get.clone(),
                path: template.into(),
                body: None,
                access: Listing,
            },
            Probe {
                method: get.clone(),
                path: "/v1/runs?user=carol".into(),
                body: None,
                access: Listing,
            },
            Probe {
                method: get,
                path: "/v1/runs?status=waiting_approval".into(),
                body: None,
                access: Listing,
            },
        ],
        ("get", "/v1/runs/{run_id}") => one(
            get,
            format!("/v1/runs/{}", o.finished_run),
            None,
            OthersObject,
        ),
        ("get", "/v1/runs/{run_id}/events") => one(
            get,
            format!("/v1/runs/{}/events", o.finished_run),
            None,
            OthersObject,
        ),
        ("post", "/v1/runs/{run_id}/cancel") => one(
            post,
            format!("/v1/runs/{}/cancel", o.waiting_run),
            Some(json!({})),
            OthersObject,
        ),
        // The run waits for approvals, not for its budget: an admin reaches it and is told so
        // (409); nobody else reaches it at all.
        ("post", "/v1/runs/{run_id}/budget") => one(
            post,
            format!("/v1/runs/{}/budget", o.waiting_run),
            Some(json!({"raise": {"maxToolCalls": 5}})),
            AdminMayBeBusy,
        ),
        ("get", "/v1/runs/{run_id}/approvals") => one(
            get,
            format!("/v1/runs/{}/approvals", o.waiting_run),
            None,
            OthersObject,
        ),
        ("post", "/v1/runs/{run_id}/approvals/{call_id}") => one(
            post,
            format!("/v1/runs/{}/approvals/call-1", o.waiting_run),
            Some(json!({"decision": "approve", "arguments": {"text": "edited"}})),
            OthersObject,
        ),
        ("post", "/v1/responses/input_tokens" | "/v1/responses/compact") => vec![
            Probe {
                method: post.clone(),
                path: template.into(),
                body: Some(json!({"model": "chat", "input": "hi"})),
                access: OwnBehalf,
            },
            // Counting or compacting carol's response or conversation is reading it.
            Probe {
                method: post.clone(),
                path: template.into(),
                body: Some(
                    json!({"model": "chat", "input": "hi", "previous_response_id": o.response}),
                ),
                access: OwnerOnly,
            },
            Probe {
                method: post,
                path: template.into(),
                body: Some(
                    json!({"model": "chat", "input": "hi", "conversation": o.openai_conversation}),
                ),
                access: OwnerOnly,
            },
        ],
        // The WebSocket mode's refusal (426) is the same for every caller with a key and reaches
        // nothing; tests/api/responses_conversations.rs checks it with Codex.
        ("get", "/v1/responses") => Vec::new(),
        ("post", "/v1/conversations") => one(
            post,
            template.into(),
            Some(json!({"metadata": {"title": "mine"}})),
            OwnBehalf,
        ),
        ("get", "/v1/conversations/{conversation_id}") => one(
            get,
            format!("/v1/conversations/{}", o.openai_conversation),
            None,
            OwnerOnly,
        ),
        ("delete", "/v1/conversations/{conversation_id}") => one(
            delete,
            format!("/v1/conversations/{}", o.openai_conversation),
            None,
            OwnerOnly,
        ),
        ("get", "/v1/conversations/{conversation_id}/items") => one(
            get,
            format!("/v1/conversations/{}/items", o.openai_conversation),
            None,
            OwnerOnly,
        ),
        ("post", "/v1/conversations/{conversation_id}/items") => one(
            post,
            format!("/v1/conversations/{}/items", o.openai_conversation),
            Some(json!({"items": [{"role": "user", "content": "planted"}]})),
            OwnerOnly,
        ),
        ("get", "/v1/conversations/{conversation_id}/items/{item_id}") => one(
            get,
            format!("/v1/conversations/{}/items/item_1", o.openai_conversation),
            None,
            OwnerOnly,
        ),
        ("get", "/v1/responses/{response_id}") => one(
            get,
            format!("/v1/responses/{}", o.response),
            None,
            OwnerOnly,
        ),
        ("delete", "/v1/responses/{response_id}") => one(
            delete,
            format!("/v1/responses/{}", o.response),
            None,
            OwnerOnly,
        ),
        ("post", "/v1/responses/{response_id}/cancel") => one(
            post,
            format!("/v1/responses/{}/cancel", o.response),
            None,
            OwnerOnly,
        ),
        ("get", "/v1/responses/{response_id}/input_items") => one(
            get,
            format!("/v1/responses/{}/input_items", o.response),
            None,
            OwnerOnly,
        ),
        ("post", "/api/{user_id}/chat") => one(
            post,
            format!("/api/{}/chat", o.owner.user),
            Some(json!({"message": "hi", "conversation_id": o.conversation})),
            OthersObject,
        ),
        ("get", "/api/{user_id}/chat/{conversation_id}/stream") => one(
            get,
            format!("/api/{}/chat/{}/stream", o.owner.user, o.conversation),
            None,
            OthersObject,
        ),
        ("get", "/api/{user_id}/conversations") => one(
            get,
            format!("/api/{}/conversations", o.owner.user),
            None,
            OthersObject,
        ),
        ("get", "/api/{user_id}/conversations/{id}") => one(
            get,
            format!("/api/{}/conversations/{}", o.owner.user, o.conversation),
            None,
            OthersObject,
        ),
        ("patch", "/api/{user_id}/conversations/{id}") => one(
            patch,
            format!("/api/{}/conversations/{}", o.owner.user, o.conversation),
            Some(json!({"title": "renamed by someone else"})),
            OthersObject,
        ),
        ("delete", "/api/{user_id}/conversations/{id}") => one(
            delete,
            format!("/api/{}/conversations/{}", o.owner.user, o.conversation),
            None,
            OthersObject,
        ),
        ("delete", "/api/{user_id}/conversations/{id}/queue/{run_id}") => one(
            delete,
            format!(
                "/api/{}/conversations/{}/queue/{}",
                o.owner.user, o.conversation, o.waiting_run
            ),
            None,
            OthersObject,
        ),
        ("get", "/v1/webhooks/deliveries") => {
            one(get, "/v1/webhooks/deliveries".to_string(), None, Listing)
        }
        ("post", "/v1/schedules") => one(
            post,
            "/v1/schedules".to_string(),
            Some(json!({"agent": "chat", "prompt": "mine", "cron": "@yearly"})),
            OwnBehalf,
        ),
        ("get", "/v1/schedules") => one(get, "/v1/schedules".to_string(), None, Listing),
        ("get", "/v1/schedules/{id}") => one(
            get,
            format!("/v1/schedules/{}", o.schedule),
            None,
            OthersObject,
        ),
        ("patch", "/v1/schedules/{id}") => one(
            patch,
            format!("/v1/schedules/{}", o.schedule),
            Some(json!({"prompt": "changed by someone else"})),
            OthersObject,
        ),
        ("delete", "/v1/schedules/{id}") => one(
            delete,
            format!("/v1/schedules/{}", o.schedule),
            None,
            OthersObject,
        ),
        ("post", "/v1/schedules/{id}/run") => one(
            post,
            format!("/v1/schedules/{}/run", o.schedule),
            Some(json!({})),
            OthersObject,
        ),
        ("get", "/v1/schedules/{id}/runs") => one(
            get,
            format!("/v1/schedules/{}/runs", o.schedule),
            None,
            OthersObject,
        ),
        ("get", "/api/{user_id}/approvals") => one(
            get,
            format!("/api/{}/approvals", o.owner.user),
            None,
            OthersObject,
        ),
        ("get", "/api/{user_id}/secrets") => one(
            get,
            format!("/api/{}/secrets", o.owner.user),
            None,
            OthersObject,
        ),
        ("put", "/api/{user_id}/secrets/{name}") => one(
            put,
            format!("/api/{}/secrets/TOKEN", o.owner.user),
            Some(json!({"value": "overwritten"})),
            OthersObject,
        ),
        ("delete", "/api/{user_id}/secrets/{name}") => one(
            delete,
            format!("/api/{}/secrets/TOKEN", o.owner.user),
            None,
            OthersObject,
        ),
        ("get", "/a2a/{agent}/extendedAgentCard") => {
            one(get, "/a2a/chat/extendedAgentCard".into(), None, OwnBehalf)
        }
        ("post", "/a2a/{agent}/message:send" | "/a2a/{agent}/message:stream") => one(
            post,
            template.replace("{agent}", "chat"),
            Some(
                json!({"message": {"messageId": "m-matrix", "role": "ROLE_USER",
                "parts": [{"text": "hi"}]}}),
            ),
            OwnBehalf,
        ),
        ("get", "/a2a/{agent}/tasks") => one(get, "/a2a/chat/tasks".into(), None, Listing),
        ("get", "/a2a/{agent}/tasks/{task}") => vec![
            Probe {
                method: get.clone(),
                path: format!("/a2a/chat/tasks/{}", o.task),
                body: None,
                access: OthersObject,
            },
            Probe {
                method: get,
                path: format!("/a2a/chat/tasks/{}:subscribe", o.task),
                body: None,
                access: OthersObject,
            },
        ],
        // The HTTP+JSON binding's push configs, as their JSON-RPC methods below.
        ("get" | "delete", "/a2a/{agent}/tasks/{task}/pushNotificationConfigs/{config}") => one(
            if method == "get" {
                get.clone()
            } else {
                delete.clone()
            },
            format!(
                "/a2a/chat/tasks/{}/pushNotificationConfigs/{OWNERS_PUSH_CONFIG}",
                o.task
            ),
            None,
            OwnerOnly,
        ),
        ("post", "/a2a/{agent}/tasks/{task}/pushNotificationConfigs") => one(
            post.clone(),
            format!("/a2a/chat/tasks/{}/pushNotificationConfigs", o.task),
            Some(
                json!({"id": OWNERS_PUSH_CONFIG, "url": "https://hooks.example.com/someone-elses"}),
            ),
            OthersObject,
        ),
        ("get", "/a2a/{agent}/tasks/{task}/pushNotificationConfigs") => one(
            get.clone(),
            format!("/a2a/chat/tasks/{}/pushNotificationConfigs", o.task),
            None,
            OthersObject,
        ),
        ("post", "/a2a/{agent}/tasks/{task}") => one(
            post,
            format!("/a2a/chat/tasks/{}:cancel", o.task),
            None,
            OthersObject,
        ),
        ("post", "/a2a/{agent}") => vec![
            Probe {
                method: post.clone(),
                path: "/a2a/chat".into(),
                body: rpc("GetTask", json!({"id": o.task})),
                access: OthersObject,
            },
            Probe {
                method: post.clone(),
                path: "/a2a/chat".into(),
                body: rpc("CancelTask", json!({"id": o.task})),
                access: OthersObject,
            },
            Probe {
                method: post.clone(),
                path: "/a2a/chat".into(),
                body: rpc("ListTasks", json!({})),
                access: Listing,
            },
            // A push-notification config is its setter's alone: admins included, no one
            // else reads or deletes the owner's; an admin may set its own on a task it sees.
            Probe {
                method: post.clone(),
                path: "/a2a/chat".into(),
                body: rpc(
                    "GetTaskPushNotificationConfig",
                    json!({"taskId": o.task, "id": OWNERS_PUSH_CONFIG}),
                ),
                access: OwnerOnly,
            },
            Probe {
                method: post.clone(),
                path: "/a2a/chat".into(),
                body: rpc(
                    "DeleteTaskPushNotificationConfig",
                    json!({"taskId": o.task, "id": OWNERS_PUSH_CONFIG}),
                ),
                access: OwnerOnly,
            },
            Probe {
                method: post.clone(),
                path: "/a2a/chat".into(),
                body: rpc(
                    "CreateTaskPushNotificationConfig",
                    json!({"taskId": o.task, "id": OWNERS_PUSH_CONFIG,
                           "url": "https://hooks.example.com/someone-elses"}),
                ),
                access: OthersObject,
            },
            Probe {
                method: post,
                path: "/a2a/chat".into(),
                body: rpc("ListTaskPushNotificationConfigs", json!({"taskId": o.task})),
                access: OthersObject,
            },
        ],
        ("get", "/api/{user_id}/export") => one(
            get.clone(),
            format!("/api/{}/export", o.owner.user),
            None,
            OthersObject,
        ),
        // Every other caller is refused before anything is erased; the admin's erase runs last
        // in the matrix's own order only if the owner has no run in progress (409 otherwise,
        // which the admin row accepts as a refusal of a busy user, not of the admin).
        ("delete", "/api/{user_id}") => one(
            delete.clone(),
            format!("/api/{}", o.owner.user),
            None,
            AdminMayBeBusy,
        ),
        // A JSON body is no upload (400); the caller's own files are its own either way.
        ("post", "/v1/files") => one(post, template.into(), Some(json!({})), OwnBehalf),
        ("get", "/v1/files") => one(get, template.into(), None, Listing),
        ("get", "/v1/files/{file_id}") => {
            one(get, format!("/v1/files/{}", o.file), None, OthersObject)
        }
        ("get", "/v1/files/{file_id}/content") => one(
            get,
            format!("/v1/files/{}/content", o.file),
            None,
            OthersObject,
        ),
        ("delete", "/v1/files/{file_id}") => {
            one(delete, format!("/v1/files/{}", o.file), None, OthersObject)
        }
        ("get", "/v1/audit") => one(get.clone(), "/v1/audit".into(), None, AdminOnly),
        ("get", "/v1/audit/verify") => one(get.clone(), "/v1/audit/verify".into(), None, AdminOnly),
        ("get", "/v1/usage") => vec![
            Probe {
                method: get.clone(),
                path: "/v1/usage?group_by=user".into(),
                body: None,
                access: Listing,
            },
            Probe {
                method: get,
                path: format!("/v1/usage?group_by=agent&user={}", o.owner.user),
                body: None,
                access: OthersObject,
            },
        ],
        _ => return None,
    })
}

/// Every `(method, path)` `/openapi.json` documents.
async fn documented_routes(app: &TestApp) -> BTreeSet<(String, String)> {
    let document: Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("the OpenAPI document");
    let mut routes = BTreeSet::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in ["get", "post", "put", "delete", "patch"] {
            if item.get(method).is_some() {
                routes.insert((method.to_string(), path.clone()));
            }
        }
    }
    routes
}

async fn send(app: &TestApp, who: Who, probe: &Probe) -> (u16, String) {
    let mut request = app
        .client
        .request(probe.method.clone(), app.url(&probe.path));
    if let Some(key) = who.key() {
        request = request.bearer_auth(key);
    }
    if let Some(body) = &probe.body {
        request = request.json(body);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    // A stream (events, ag-ui) ends with its run; a stream that stays open is read no further.
    let body = tokio::time::timeout(std::time::Duration::from_secs(5), response.text())
        .await
        .map(|text| text.unwrap_or_default())
        .unwrap_or_default();
    (status, body)
}

async fn owner_post(app: &TestApp, owner: Owner, path: &str, body: Value) -> Value {
    let response = app
        .client
        .post(app.url(path))
        .bearer_auth(owner.key)
        .json(&body)
        .send()
        .await
        .expect("sent");
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    let run = response
        .headers()
        .get("x-agentd-run-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body: Value = response.json().await.unwrap_or(Value::Null);
    if let (Some(run), Value::Object(fields)) = (run, &mut body) {
        fields.insert("x-run-id".into(), json!(run));
    }
    body
}

async fn status_of(app: &TestApp, run_id: &str) -> Value {
    app.client
        .get(app.url(&format!("/v1/runs/{run_id}")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent")
        .json::<Value>()
        .await
        .expect("run")["status"]
        .clone()
}

async fn owners_objects(app: &TestApp, owner: Owner) -> Objects {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "call-1",
        "test__echo",
        json!({"text": "hi"}).to_string(),
    )]));
    let accepted = owner_post(
        app,
        owner,
        "/v1/agents/approver/runs",
        json!({"prompt": "echo", "background": true}),
    )
    .await;
    let waiting_run = accepted["run_id"].as_str().expect("run").to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while status_of(app, &waiting_run).await != "waiting_approval" {
        assert!(
            std::time::Instant::now() < deadline,
            "the owner's run never waited"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    app.llm.push(Reply::text("the owner's answer"));
    let finished = owner_post(app, owner, "/v1/agents/chat/runs", json!({"prompt": "hi"})).await;
    let finished_run = finished["x-run-id"].as_str().expect("run").to_string();
    app.llm.push(Reply::text("the owner's response"));
    let response = owner_post(
        app,
        owner,
        "/v1/responses",
        json!({"model": "chat", "input": "hi"}),
    )
    .await;
    app.llm.push(Reply::text("the owner's task"));
    let task = owner_post(
        app,
        owner,
        "/a2a/chat",
        rpc(
            "message/send",
            json!({"message": {"kind": "message", "messageId": "c1", "role": "user",
                "parts": [{"kind": "text", "text": "hi"}]}}),
        )
        .expect("body"),
    )
    .await;
    let config = owner_post(
        app,
        owner,
        "/a2a/chat",
        rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task["result"]["id"], "id": OWNERS_PUSH_CONFIG, "url": OWNERS_PUSH_URL}),
        )
        .expect("body"),
    )
    .await;
    assert_eq!(config["result"]["url"], OWNERS_PUSH_URL, "{config}");
    let schedule = owner_post(
        app,
        owner,
        "/v1/schedules",
        json!({"agent": "chat", "prompt": "the owner's schedule", "cron": "@yearly"}),
    )
    .await["id"]
        .as_str()
        .expect("schedule")
        .to_string();
    // A user's conversation and secret; a key's conversation is its A2A context.
    let conversation = if owner.is_user {
        app.llm.push(Reply::text("the owner's chat"));
        let chat = owner_post(
            app,
            owner,
            &format!("/api/{}/chat", owner.user),
            json!({"message": "the owner's plan"}),
        )
        .await;
        let put = app
            .client
            .put(app.url(&format!("/api/{}/secrets/TOKEN", owner.user)))
            .bearer_auth(owner.key)
            .json(&json!({"value": "the owner's token"}))
            .send()
            .await
            .expect("sent");
        assert!(put.status().is_success());
        chat["conversation_id"]
            .as_str()
            .expect("conversation")
            .to_string()
    } else {
        task["result"]["contextId"]
            .as_str()
            .expect("context")
            .to_string()
    };
    let key_maker = if owner.is_user { owner.key } else { ADMIN };
    let api_key = app
        .client
        .post(app.url("/v1/keys"))
        .bearer_auth(key_maker)
        .json(&json!({"name": "the owner's key"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(api_key.status(), 201, "the owner's key");
    let api_key: Value = api_key.json().await.expect("key");
    let openai_conversation = owner_post(
        app,
        owner,
        "/v1/conversations",
        json!({"items": [{"role": "user", "content": "the owner's item"}]}),
    )
    .await["id"]
        .as_str()
        .expect("conversation")
        .to_string();
    let form = reqwest::multipart::Form::new()
        .text("purpose", "user_data")
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"the owner's notes".to_vec())
                .file_name("notes.txt")
                .mime_str("text/plain")
                .expect("mime"),
        );
    let file = app
        .client
        .post(app.url("/v1/files"))
        .bearer_auth(owner.key)
        .multipart(form)
        .send()
        .await
        .expect("sent");
    assert_eq!(file.status(), 200, "the owner's file");
    let file: Value = file.json().await.expect("file");
    Objects {
        schedule,
        file: file["id"].as_str().expect("file id").to_string(),
        api_key: api_key["id"].as_str().expect("key id").to_string(),
        owner,
        waiting_run,
        finished_run,
        response: response["id"].as_str().expect("response").to_string(),
        conversation,
        openai_conversation,
        task: task["result"]["id"].as_str().expect("task").to_string(),
    }
}

/// Whether `body` mentions any of the owner's objects.
fn mentions_owner(body: &str, objects: &Objects) -> bool {
    [
        &objects.waiting_run,
        &objects.finished_run,
        &objects.openai_conversation,
        &objects.response,
        &objects.task,
        &objects.api_key,
        &objects.file,
    ]
    .iter()
    .any(|id| body.contains(id.as_str()))
        || body.contains("the owner's")
        || body.contains(&format!("\"{}\"", objects.owner.user))
}

fn check(
    who: Who,
    probe: &Probe,
    status: u16,
    body: &str,
    objects: &Objects,
) -> Result<(), String> {
    let what = format!(
        "{who:?} {} {} → {status} {}",
        probe.method,
        probe.path,
        truncate(body)
    );
    let json_rpc_error = probe
        .body
        .as_ref()
        .is_some_and(|b| b.get("jsonrpc").is_some())
        && serde_json::from_str::<Value>(body).is_ok_and(|v| v.get("error").is_some());
    match (who, probe.access) {
        (_, Access::Public) if status == 401 => Err(format!("public route refused: {what}")),
        (_, Access::Public) => Ok(()),
        (Who::Nobody, _) if status != 401 => Err(format!("no key, not 401: {what}")),
        (Who::Nobody, _) => Ok(()),
        (_, Access::OwnerOnly) if status == 404 || status == 403 || json_rpc_error => Ok(()),
        (_, Access::OwnerOnly) => Err(format!("reached an object only its owner may: {what}")),
        (Who::Admin, Access::AdminMayBeBusy) if status == 409 => Ok(()),
        (Who::Admin, _) if !(200..300).contains(&status) || json_rpc_error => {
            Err(format!("an admin was refused: {what}"))
        }
        (Who::Admin, _) => Ok(()),
        (_, Access::AdminOnly) if status == 403 => Ok(()),
        (_, Access::AdminOnly) => Err(format!("not an admin, not 403: {what}")),
        (_, Access::OthersObject | Access::AdminMayBeBusy) => {
            if [403, 404].contains(&status) || json_rpc_error {
                Ok(())
            } else {
                Err(format!("reached another owner's object: {what}"))
            }
        }
        (_, Access::Listing | Access::OwnBehalf) => {
            if status == 401 {
                Err(format!("a key was refused: {what}"))
            } else if mentions_owner(body, objects) {
                Err(format!("another owner's data in the answer: {what}"))
            } else {
                Ok(())
            }
        }
    }
}

fn truncate(body: &str) -> String {
    body.chars().take(300).collect()
}

#[tokio::test]
async fn every_route_x_every_caller_reaches_only_what_a_user_allows() {
    authorization_matrix(CAROL_OWNS).await;
}

#[tokio::test]
async fn every_route_x_every_caller_reaches_only_what_a_key_bound_to_no_user_allows() {
    authorization_matrix(KEY_OWNS).await;
}

async fn authorization_matrix(owner: Owner) {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("approver.ai"), APPROVER).expect("agent");
    let agents = dir.path().display().to_string();
    let app = spawn_app_with(|config| {
        config["auth"] = json!({"keys": [
            {"key": ADMIN, "admin": true, "id": "ops"},
            {"key": CAROL, "userId": "carol", "id": "carol"},
            {"key": OWNER_KEY, "id": "owner"},
            {"key": ALICE, "userId": "alice", "id": "alice"},
            {"key": UNBOUND, "id": "unbound"},
            {"key": LIMITED, "userId": "dave", "agents": ["chat"], "id": "limited"}
        ]});
        config["secrets"] = json!({"key": SECRETS_KEY});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents));
        config["mcpServers"] = json!({"test": test_server_config(json!({}))});
    })
    .await;
    let objects = owners_objects(&app, owner).await;

    let routes = documented_routes(&app).await;
    let unknown: Vec<_> = routes
        .iter()
        .filter(|(method, path)| probe(method, path, &objects).is_none())
        .collect();
    assert!(
        unknown.is_empty(),
        "routes with no row in the authorization matrix (add one to probe()): {unknown:?}"
    );

    let mut failures = Vec::new();
    // Everyone but the admin first: the admin's changes (a cancel, a delete) come last.
    for who in EVERYONE.iter().filter(|w| **w != Who::Admin) {
        for (method, path) in &routes {
            for probe in probe(method, path, &objects).unwrap_or_default() {
                app.llm.push(Reply::text("an answer"));
                let (status, body) = send(&app, *who, &probe).await;
                if let Err(failure) = check(*who, &probe, status, &body, &objects) {
                    failures.push(failure);
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // Nothing of the owner's changed after everyone else tried.
    assert_eq!(
        status_of(&app, &objects.waiting_run).await,
        "waiting_approval"
    );
    let kept = app
        .client
        .get(app.url(&format!("/v1/responses/{}", objects.response)))
        .bearer_auth(owner.key)
        .send()
        .await
        .expect("sent");
    assert_eq!(kept.status(), 200, "the response is still the owner's");
    let push_config = |key: &'static str, method: &'static str, params: Value| {
        let request = app
            .client
            .post(app.url("/a2a/chat"))
            .bearer_auth(key)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        async move {
            let answer: Value = request
                .send()
                .await
                .expect("sent")
                .json()
                .await
                .expect("json");
            answer
        }
    };
    let kept = push_config(
        owner.key,
        "GetTaskPushNotificationConfig",
        json!({"taskId": objects.task, "id": OWNERS_PUSH_CONFIG}),
    )
    .await;
    assert_eq!(
        kept["result"]["url"], OWNERS_PUSH_URL,
        "the push config is still the owner's: {kept}"
    );
    let admins = push_config(
        ADMIN,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": objects.task}),
    )
    .await;
    assert!(
        !admins.to_string().contains("the-owner's-hook"),
        "an admin lists its own configs only: {admins}"
    );
    let reader = if owner.is_user { owner.key } else { ADMIN };
    let kept = app
        .client
        .get(app.url(&format!(
            "/api/{}/conversations/{}",
            owner.user, objects.conversation
        )))
        .bearer_auth(reader)
        .send()
        .await
        .expect("sent");
    assert_eq!(kept.status(), 200, "the conversation is still the owner's");
    let kept: Value = kept.json().await.expect("conversation");
    assert_ne!(kept["title"], "renamed by someone else", "{kept}");
    let kept = app
        .client
        .get(app.url(&format!("/v1/files/{}/content", objects.file)))
        .bearer_auth(owner.key)
        .send()
        .await
        .expect("sent");
    assert_eq!(kept.status(), 200, "the file is still the owner's");
    assert_eq!(kept.text().await.expect("content"), "the owner's notes");
    if owner.is_user {
        let secrets: Value = app
            .client
            .get(app.url(&format!("/api/{}/secrets", owner.user)))
            .bearer_auth(owner.key)
            .send()
            .await
            .expect("sent")
            .json()
            .await
            .expect("secrets");
        assert_eq!(secrets["data"][0]["name"], "TOKEN", "{secrets}");
    }

    // The admin reaches across (the matrix's other side).
    for (method, path) in &routes {
        for probe in probe(method, path, &objects).unwrap_or_default() {
            let cancels_task = probe
                .body
                .as_ref()
                .is_some_and(|b| b["method"] == "CancelTask");
            if !matches!(probe.access, Access::OthersObject | Access::OwnerOnly)
                || probe.method == reqwest::Method::DELETE
                || probe.path.ends_with("/cancel")
                || probe.path.ends_with(":cancel")
                // carol's task has ended: there is nothing to follow, for anyone
                || probe.path.ends_with(":subscribe")
                || probe.path.contains("/approvals/")
                || cancels_task
            {
                continue; // what changes carol's objects is tried below
            }
            app.llm.push(Reply::text("an answer"));
            let (status, body) = send(&app, Who::Admin, &probe).await;
            if let Err(failure) = check(Who::Admin, &probe, status, &body, &objects) {
                failures.push(failure);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    app.llm.push(Reply::text("echoed"));
    let decided = app
        .client
        .post(app.url(&format!(
            "/v1/runs/{}/approvals/call-1",
            objects.waiting_run
        )))
        .bearer_auth(ADMIN)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(
        decided.status(),
        200,
        "an admin decides the owner's approval"
    );
}
