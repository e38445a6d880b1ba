//! OpenAPI tools: a YAML document's operations become `openapi__<spec>__<operationId>` tools
//! with path, query, header and body arguments; a document behind a URL with a relative server;
//! include/exclude; a model calling one through a session; documents that do not read are
//! config errors naming the file and the JSON pointer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd::config::parse_config;
use agentd::telemetry::Metrics;
use agentd::tools::openapi::{OpenApiTools, load_documents};
use agentd::tools::queue::ToolQueues;
use agentd::tools::{ToolOutcome, ToolProvider};
use axum::extract::{RawQuery, Request};
use axum::routing::get;
use serde_json::{Value, json};

use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::spawn_app_with;

const TIMEOUT: Duration = Duration::from_secs(30);

const PETSTORE: &str = r##"
openapi: 3.0.3
info: {title: Pets, version: "1"}
servers:
  - url: /v1
paths:
  /pets:
    get:
      operationId: listPets
      summary: List the pets
      parameters:
        - {name: limit, in: query, schema: {type: integer, maximum: 100}}
        - {name: tag, in: query, schema: {type: array, items: {type: string}}}
        - {name: X-Trace, in: header, schema: {type: string}}
    post:
      operationId: createPet
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Pet"}
  /pets/{petId}:
    parameters:
      - {name: petId, in: path, required: true, schema: {type: string}}
    get: {operationId: showPetById}
    delete: {operationId: deletePet}
components:
  schemas:
    Pet:
      type: object
      required: [name]
      properties:
        name: {type: string}
"##;

/// What the upstream saw of the last request: method, path and query, headers, body.
type Seen = Arc<Mutex<Vec<(String, String, String, String)>>>;

/// Serves the document at `/openapi.yaml` and answers every `/v1/*` request with what it saw.
async fn upstream() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let recorded = Arc::clone(&seen);
    let router = axum::Router::new()
        .route("/openapi.yaml", get(|| async { PETSTORE }))
        .route(
            "/v1/{*rest}",
            axum::routing::any(move |RawQuery(query): RawQuery, request: Request| {
                let recorded = Arc::clone(&recorded);
                async move {
                    let method = request.method().to_string();
                    let path = request.uri().path().trim_start_matches("/v1").to_string();
                    let trace = request
                        .headers()
                        .get("x-trace")
                        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                        .unwrap_or_default();
                    let body = axum::body::to_bytes(request.into_body(), usize::MAX)
                        .await
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default();
                    let target = match query {
                        Some(q) => format!("{path}?{q}"),
                        None => path,
                    };
                    if let Ok(mut seen) = recorded.lock() {
                        seen.push((method, target.clone(), trace, body));
                    }
                    format!("ok {target}")
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (address, seen)
}

async fn tools(specs: Value) -> Result<OpenApiTools, String> {
    let config = parse_config(json!({"openapiSpecs": specs}), "test config").expect("config");
    let metrics = Metrics::new().expect("metrics");
    let queues = ToolQueues::new(&config.queues, &metrics);
    let documents = load_documents(&config.openapi_specs)
        .await
        .map_err(|e| e.to_string())?;
    OpenApiTools::build(&config.openapi_specs, &documents, &queues).map_err(|e| e.to_string())
}

fn last(seen: &Seen) -> (String, String, String, String) {
    seen.lock()
        .expect("lock")
        .last()
        .cloned()
        .expect("a request")
}

#[tokio::test]
async fn operations_are_tools_with_path_query_header_and_body_arguments() {
    let (address, seen) = upstream().await;
    let pets = tools(json!({"pets": {"spec": format!("{address}/openapi.yaml")}}))
        .await
        .expect("tools");
    let names: Vec<String> = pets
        .list_tools()
        .await
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        [
            "openapi__pets__createPet",
            "openapi__pets__deletePet",
            "openapi__pets__listPets",
            "openapi__pets__showPetById"
        ]
    );

    let outcome = pets
        .call(
            "pets__listPets",
            json!({"limit": 2, "tag": ["a b", "c"], "X-Trace": "t-1"}),
            TIMEOUT,
        )
        .await;
    assert!(matches!(outcome, ToolOutcome::Ok(_)), "{outcome:?}");
    let (method, target, trace, _) = last(&seen);
    assert_eq!(method, "GET");
    assert_eq!(
        target, "/pets?limit=2&tag=a+b&tag=c",
        "relative server joined to the URL"
    );
    assert_eq!(trace, "t-1");

    pets.call("pets__createPet", json!({"body": {"name": "Rex"}}), TIMEOUT)
        .await;
    let (method, _, _, body) = last(&seen);
    assert_eq!(method, "POST");
    assert_eq!(
        serde_json::from_str::<Value>(&body).expect("json"),
        json!({"name": "Rex"})
    );

    pets.call("pets__showPetById", json!({"petId": "a/b c"}), TIMEOUT)
        .await;
    assert_eq!(last(&seen).1, "/pets/a%2Fb%20c", "path values are encoded");

    for (tool, arguments) in [
        ("pets__createPet", json!({})),
        ("pets__listPets", json!({"limit": 101})),
        ("pets__showPetById", json!({})),
    ] {
        let outcome = pets.call(tool, arguments.clone(), TIMEOUT).await;
        assert!(
            matches!(&outcome, ToolOutcome::Failed(r) if r.starts_with("invalid arguments")),
            "{tool} {arguments}: {outcome:?}"
        );
    }
}

#[tokio::test]
async fn include_and_exclude_choose_the_operations() {
    let (address, _) = upstream().await;
    let pets = tools(json!({"pets": {"spec": format!("{address}/openapi.yaml"),
        "include": ["*Pet", "show*"], "exclude": ["delete*"]}}))
    .await
    .expect("tools");
    let names: Vec<String> = pets
        .list_tools()
        .await
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        ["openapi__pets__createPet", "openapi__pets__showPetById"]
    );
}

#[tokio::test]
async fn documents_that_do_not_read_are_named_with_the_file_and_the_pointer() {
    let dir = tempfile::tempdir().expect("dir");
    let broken = PETSTORE.replace("#/components/schemas/Pet", "#/components/schemas/Dog");
    let file = dir.path().join("pets.yaml");
    std::fs::write(&file, broken).expect("write");
    let error = tools(json!({"pets": {"spec": file.display().to_string(), "baseUrl": "http://x"}}))
        .await
        .err()
        .expect("a broken $ref is an error");
    assert!(
        error.contains("openapiSpecs.pets")
            && error.contains("pets.yaml")
            && error.contains("/paths/~1pets/post/requestBody")
            && error.contains("#/components/schemas/Dog"),
        "{error}"
    );

    std::fs::write(&file, "openapi: [unclosed").expect("write");
    let error = tools(json!({"pets": {"spec": file.display().to_string()}}))
        .await
        .err()
        .expect("not YAML");
    assert!(
        error.contains("neither JSON nor YAML") && error.contains("pets.yaml"),
        "{error}"
    );

    std::fs::write(&file, PETSTORE).expect("write");
    let error = tools(json!({"pets": {"spec": file.display().to_string()}}))
        .await
        .err()
        .expect("a relative server needs baseUrl");
    assert!(error.contains("openapiSpecs.pets.baseUrl"), "{error}");

    let error = parse_config(json!({"openapiSpecs": {"pets": {}}}), "test config")
        .and_then(|config| {
            agentd::config::tools::validate_tools(&config, "test config").map(|()| config)
        })
        .expect_err("spec is required")
        .to_string();
    assert!(error.contains("openapiSpecs.pets.spec"), "{error}");
}

#[tokio::test]
async fn a_model_calls_an_openapi_tool_through_a_session() {
    let (address, seen) = upstream().await;
    let agents = tempfile::tempdir().expect("dir");
    std::fs::write(
        agents.path().join("keeper.ai"),
        "---\ndescription: Keeps pets\nmodels: llm/m\nfinalization: text\ntransport: native\ntools: [openapi__pets]\n---\nYou keep pets.\n",
    )
    .expect("agent");
    let spec = format!("{address}/openapi.yaml");
    let app = spawn_app_with(|config| {
        config["openapiSpecs"] = json!({"pets": {"spec": spec}});
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(agents.path().display().to_string()));
    })
    .await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c1",
        "openapi__pets__listPets",
        r#"{"limit": 1}"#,
    )]));
    app.llm.push(Reply::text("one pet"));
    let answer: Value = app
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "keeper", "messages": [{"role": "user", "content": "pets?"}]}),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        answer["choices"][0]["message"]["content"], "one pet",
        "{answer}"
    );
    assert_eq!(last(&seen).1, "/pets?limit=1");
    let offered = app.llm.requests()[0]["tools"].to_string();
    assert!(offered.contains("openapi__pets__showPetById"), "{offered}");
    let told = app.llm.requests()[1]["messages"].to_string();
    assert!(told.contains("ok /pets?limit=1"), "{told}");
}
