//! Oversized tool output as handles (`toolOutput: handles`): the model gets the truncation
//! notice with a handle, the head and the tail, is offered `agent__tool_output` from then on,
//! reads the part it needs (here with grep), and the handle dies with the run.

use axum::routing::get;
use serde_json::{Value, json};

use crate::support::mock_llm::{Reply, ToolCall};
use crate::support::{TestApp, spawn_app_with};

/// An upstream whose `/log` answers 2,000 numbered lines.
async fn log_upstream() -> String {
    let router = axum::Router::new()
        .route(
            "/log",
            get(|| async {
                (1..=2000)
                    .map(|n| format!("line {n}: value {}", n * 7))
                    .collect::<Vec<_>>()
                    .join("\n")
            }),
        )
        .route(
            // n lines of exactly 20 bytes with their newline (the last has none).
            "/lines/{n}",
            get(
                |axum::extract::Path(n): axum::extract::Path<usize>| async move {
                    (1..=n)
                        .map(|i| format!("line {i:05}: abcdefg"))
                        .collect::<Vec<_>>()
                        .join("\n")
                },
            ),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    base
}

async fn app(base: &str) -> (TestApp, tempfile::TempDir) {
    let agents = tempfile::tempdir().expect("agents");
    std::fs::write(
        agents.path().join("reader.ai"),
        "---\ndescription: Reads logs\nmodels: llm/upstream-model\nfinalization: text\ntransport: native\ntools: [rest__log, rest__lines]\ntoolResponseMaxBytes: 500\ntoolOutput: handles\n---\nYou read logs.\n",
    )
    .expect("agent");
    let path = agents.path().display().to_string();
    let url = format!("{base}/log");
    let lines = format!("{base}/lines/${{parameters.n}}");
    let app = spawn_app_with(move |config| {
        config["agents"]
            .as_array_mut()
            .expect("agents")
            .push(json!(path));
        config["restTools"] = json!({
            "log": {"url": url, "description": "The log"},
            "lines": {"url": lines, "description": "Some lines",
                      "parametersSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        });
    })
    .await;
    (app, agents)
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(String::from))
        .collect()
}

fn tool_replies(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(String::from))
        .collect()
}

async fn run(app: &TestApp) -> Value {
    let response = app
        .post_json(
            "/v1/agents/reader/runs",
            &json!({"prompt": "what is on line 1234?"}),
        )
        .await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("result")
}

#[tokio::test]
async fn a_long_output_becomes_a_handle_the_model_reads_with_grep() {
    let base = log_upstream().await;
    let (app, _agents) = app(&base).await;
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c1",
        "rest__log",
        "{}",
    )]));
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c2",
        "agent__tool_output",
        r#"{"handle": "out-1", "mode": "grep", "pattern": "^line 1234:", "context": 1}"#,
    )]));
    app.llm.push(Reply::text("Line 1234 says value 8638."));
    let result = run(&app).await;
    assert_eq!(result["success"], true, "{result}");

    let requests = app.llm.requests();
    assert!(
        !offered(&requests[0]).contains(&"agent__tool_output".to_string()),
        "not offered before anything was kept"
    );
    let kept = &tool_replies(&requests[1])[0];
    assert!(
        kept.starts_with("[TRUNCATED] Original size "),
        "the contract's notice first: {kept}"
    );
    assert!(kept.contains("handle out-1"), "{kept}");
    assert!(kept.contains("--- head ---\nline 1: value 7\n"), "{kept}");
    assert!(kept.ends_with("line 2000: value 14000"), "{kept}");
    assert!(offered(&requests[1]).contains(&"agent__tool_output".to_string()));
    let read = &tool_replies(&requests[2])[1];
    assert_eq!(
        read,
        "1233: line 1233: value 8631\n1234: line 1234: value 8638\n1235: line 1235: value 8645"
    );

    // A new run has no handles: out-1 is gone with the run that kept it.
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c3",
        "agent__tool_output",
        r#"{"handle": "out-1"}"#,
    )]));
    app.llm.push(Reply::text("It is gone."));
    run(&app).await;
    let last = app.llm.requests().last().cloned().expect("request");
    let reply = &tool_replies(&last)[0];
    assert!(reply.contains("unknown tool"), "{reply}");
    app.runtime.close().await;
}

/// Runs `reader` calling `rest__lines` with `n`, then asking about it; the model's later
/// replies are `answers`. Returns what the ask told the model.
async fn ask_about_lines(app: &TestApp, n: usize, answers: &[&str]) -> String {
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c1",
        "rest__lines",
        json!({"n": n}).to_string(),
    )]));
    app.llm.push(Reply::tool_calls(vec![ToolCall::new(
        "c2",
        "agent__tool_output",
        r#"{"handle": "out-1", "mode": "ask", "question": "how many lines are there?"}"#,
    )]));
    for answer in answers {
        app.llm.push(Reply::text(*answer));
    }
    app.llm.push(Reply::text("Done."));
    let before = app.llm.requests().len();
    let result = run(app).await;
    assert_eq!(result["success"], true, "{result}");
    let requests = app.llm.requests();
    let last = requests.last().expect("final request");
    assert_eq!(
        requests.len() - before,
        3 + answers.len(),
        "the agent's three turns, one request per part and the combination"
    );
    tool_replies(last)[1].clone()
}

#[tokio::test]
async fn ask_answers_from_each_part_then_combines_up_to_ten_parts() {
    let base = log_upstream().await;
    let (app, _agents) = app(&base).await;
    // 1,000 lines of 20 bytes are exactly 10 parts of 4 x 500 bytes: ten answers, one combined.
    let mut answers = vec!["100 lines here"; 10];
    answers.push("1000 lines in all");
    let told = ask_about_lines(&app, 1000, &answers).await;
    assert_eq!(told, "1000 lines in all");
    let requests = app.llm.requests();
    let first_part = requests
        .iter()
        .find_map(|r| {
            r["messages"][1]["content"]
                .as_str()
                .filter(|c| c.contains("<document part=\"1 of 10\">"))
                .map(String::from)
        })
        .expect("the first part was asked");
    assert!(first_part.starts_with("<question>\nhow many lines are there?\n</question>"));
    let combined = requests
        .iter()
        .filter_map(|r| r["messages"][1]["content"].as_str())
        .find(|c| c.contains("<partial_answers>"))
        .expect("the answers were combined");
    assert!(combined.contains("<answer part=\"10\">\n100 lines here\n</answer>"));
    app.runtime.close().await;
}

#[tokio::test]
async fn ask_refuses_an_output_of_more_than_ten_parts() {
    let base = log_upstream().await;
    let (app, _agents) = app(&base).await;
    let told = ask_about_lines(&app, 1001, &[]).await;
    assert!(told.contains("11 parts"), "{told}");
    assert!(told.contains("more than the 10"), "{told}");
    app.runtime.close().await;
}
