//! `GET /openapi.json`: an OpenAPI 3.1 description of every route of SPEC §4, built from the
//! route table below (a test checks each documented operation against the router).

use serde_json::{Map, Value, json};

/// One documented operation.
pub struct Operation {
    pub method: &'static str,
    pub path: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    /// JSON request body schema, if the operation takes one.
    pub body: Option<fn() -> Value>,
    /// Whether the operation may answer with `text/event-stream`.
    pub streams: bool,
}

pub const OPERATIONS: &[Operation] = &[
    Operation {
        method: "get",
        path: "/health",
        tag: "operations",
        summary: "Liveness",
        body: None,
        streams: false,
    },
    Operation {
        method: "get",
        path: "/ready",
        tag: "operations",
        summary: "Readiness: the store answers",
        body: None,
        streams: false,
    },
    Operation {
        method: "get",
        path: "/metrics",
        tag: "operations",
        summary: "Prometheus metrics (text format)",
        body: None,
        streams: false,
    },
    Operation {
        method: "get",
        path: "/openapi.json",
        tag: "operations",
        summary: "This document",
        body: None,
        streams: false,
    },
    Operation {
        method: "get",
        path: "/v1/models",
        tag: "openai",
        summary: "Agents as models (Anthropic's shape with `anthropic-version`)",
        body: None,
        streams: false,
    },
    Operation {
        method: "post",
        path: "/v1/chat/completions",
        tag: "openai",
        summary: "OpenAI Chat Completions; `model` names an agent",
        body: Some(chat_completion_body),
        streams: true,
    },
    Operation {
        method: "post",
        path: "/v1/messages",
        tag: "anthropic",
        summary: "Anthropic Messages; `model` names an agent",
        body: Some(messages_body),
        streams: true,
    },
    Operation {
        method: "get",
        path: "/v1/agents",
        tag: "runs",
        summary: "The agents this key may run",
        body: None,
        streams: false,
    },
    Operation {
        method: "get",
        path: "/v1/agents/{agent}",
        tag: "runs",
        summary: "One agent",
        body: None,
        streams: false,
    },
    Operation {
        method: "post",
        path: "/v1/agents/{agent}/runs",
        tag: "runs",
        summary: "Start a run: its AgentResult, or its events as SSE",
        body: Some(run_body),
        streams: true,
    },
    Operation {
        method: "get",
        path: "/v1/runs/{run_id}",
        tag: "runs",
        summary: "A run's status and, once finished, its AgentResult",
        body: None,
        streams: false,
    },
    Operation {
        method: "get",
        path: "/v1/runs/{run_id}/events",
        tag: "runs",
        summary: "A run's events: stored ones after Last-Event-ID, then live ones",
        body: None,
        streams: true,
    },
    Operation {
        method: "post",
        path: "/v1/runs/{run_id}/cancel",
        tag: "runs",
        summary: "Stop (graceful final turn) or abort a run",
        body: Some(cancel_body),
        streams: false,
    },
    Operation {
        method: "post",
        path: "/api/{user_id}/chat",
        tag: "chat",
        summary: "Send a message in one of the user's conversations",
        body: Some(chat_body),
        streams: true,
    },
    Operation {
        method: "get",
        path: "/api/{user_id}/conversations",
        tag: "chat",
        summary: "The user's conversations, newest first",
        body: None,
        streams: false,
    },
    Operation {
        method: "get",
        path: "/api/{user_id}/conversations/{id}",
        tag: "chat",
        summary: "A conversation and its messages",
        body: None,
        streams: false,
    },
    Operation {
        method: "delete",
        path: "/api/{user_id}/conversations/{id}",
        tag: "chat",
        summary: "Delete a conversation",
        body: None,
        streams: false,
    },
];

fn chat_completion_body() -> Value {
    json!({"type": "object", "required": ["model", "messages"], "properties": {
        "model": {"type": "string"}, "messages": {"type": "array", "minItems": 1, "items": {"type": "object"}},
        "stream": {"type": "boolean"}, "stream_options": {"type": "object"}, "temperature": {"type": "number"},
        "top_p": {"type": "number"}, "max_tokens": {"type": "integer"}, "response_format": {"type": "object"}}})
}

fn messages_body() -> Value {
    json!({"type": "object", "required": ["model", "messages"], "properties": {
        "model": {"type": "string"}, "messages": {"type": "array", "minItems": 1, "items": {"type": "object"}},
        "system": {}, "max_tokens": {"type": "integer"}, "stream": {"type": "boolean"},
        "temperature": {"type": "number"}, "top_p": {"type": "number"}}})
}

fn run_body() -> Value {
    json!({"type": "object", "required": ["prompt"], "additionalProperties": false, "properties": {
        "prompt": {"type": "string"}, "format": {"type": "string"}, "schema": {"type": "object"},
        "history": {"type": "array", "items": {"type": "object"}}, "stream": {"type": "boolean"},
        "onDisconnect": {"enum": ["cancel", "continue"]}, "requestId": {"type": "string"}}})
}

fn cancel_body() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {"mode": {"enum": ["stop", "abort"]}}})
}

fn chat_body() -> Value {
    json!({"type": "object", "required": ["message"], "additionalProperties": false, "properties": {
        "message": {"type": "string"}, "conversation_id": {"type": "string"}, "agent": {"type": "string"},
        "stream": {"type": "boolean"}}})
}

fn error_schema() -> Value {
    json!({"type": "object", "required": ["error"], "properties": {"error": {"type": "object",
        "required": ["message", "type", "code"], "properties": {
            "message": {"type": "string"}, "type": {"type": "string"}, "code": {"type": "string"},
            "param": {"type": ["string", "null"]}}}}})
}

fn operation_json(operation: &Operation) -> Value {
    let parameters: Vec<Value> = operation
        .path
        .split('/')
        .filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    let mut success = Map::new();
    success.insert(
        "application/json".into(),
        json!({"schema": {"type": "object"}}),
    );
    if operation.streams {
        success.insert(
            "text/event-stream".into(),
            json!({"schema": {"type": "string"}}),
        );
    }
    let mut body = json!({
        "tags": [operation.tag],
        "summary": operation.summary,
        "parameters": parameters,
        "responses": {
            "200": {"description": "Success", "content": success},
            "default": {"description": "An error (SPEC §4)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        },
    });
    if let Some(schema) = operation.body {
        body["requestBody"] =
            json!({"required": true, "content": {"application/json": {"schema": schema()}}});
    }
    body
}

pub fn document() -> Value {
    let mut paths = Map::new();
    for operation in OPERATIONS {
        let entry = paths.entry(operation.path).or_insert_with(|| json!({}));
        entry[operation.method] = operation_json(operation);
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "agentd", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Runs LLM agents over HTTP: OpenAI and Anthropic compatible, agent runs with resumable SSE events, per-user chat."},
        "paths": paths,
        "components": {
            "schemas": {"Error": error_schema()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}, "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}},
        },
        "security": [{"bearer": []}, {"apiKey": []}],
    })
}

pub async fn openapi() -> axum::Json<Value> {
    axum::Json(document())
}
