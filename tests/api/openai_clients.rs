//! Older OpenAI clients against the real `agentd` binary (issue 37 item 3): LangChain's
//! `ChatOpenAI.invoke(…, stop=[…])`, LlamaIndex's `OpenAILike` with its defaults (which call
//! `POST /v1/completions`) and Open WebUI 0.12.4's requests (tests/sdk/openai_clients.py), and
//! the AI SDK's `.completion()` model (tests/node/ai_sdk_completion.mjs). Open WebUI is replayed,
//! not run: its package pulls in torch and the CUDA wheels (several GB), so the script sends the
//! bodies its backend builds, with the HTTP client it uses. The Python clients live in
//! `.ci/venv-clients` (their `openai` differs from the SDK tests' pin), the npm ones in
//! `tests/node`; `scripts/test` installs both, and this test installs the Python ones when
//! missing.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::mock_llm::{MockLlm, Reply};

/// Pinned as `scripts/test` pins them.
const CLIENTS: [&str; 3] = [
    "langchain-openai==1.7.4",
    "llama-index-llms-openai-like==0.8.1",
    "aiohttp==3.14.5",
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `.ci/venv-clients/bin/python` with the clients, installed if needed.
fn clients_python() -> PathBuf {
    crate::support::python_tool::python_with(
        "venv-clients",
        &[
            "langchain_openai",
            "llama_index.llms.openai_like",
            "aiohttp",
        ],
        &CLIENTS,
    )
}

async fn serve_agentd(llm: &MockLlm) -> (tempfile::TempDir, crate::support::binary::Served) {
    crate::support::binary::serve_with_admin_key(&llm.base_url(), "clients-key").await
}

/// The upstream request whose last message contains `text`.
fn request_asking(llm: &MockLlm, text: &str) -> Value {
    llm.requests()
        .into_iter()
        .find(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.last())
                .is_some_and(|m| m["content"].as_str().is_some_and(|c| c.contains(text)))
        })
        .unwrap_or_else(|| panic!("no upstream request asked {text:?}"))
}

#[tokio::test]
async fn langchain_llamaindex_and_open_webuis_requests_get_their_answers() {
    let llm = MockLlm::start().await;
    llm.push(Reply::text("Thought: I should look it up."));
    llm.push(Reply::text_in_pieces(&["Action: ", "search"]));
    llm.push(Reply::text("Paris."));
    llm.push(Reply::text_in_pieces(&["one ", "two ", "three"]));
    llm.push(Reply::text_in_pieces(&["Hello! ", "How can I help?"]).with_usage(20, 6, 0, 0));
    llm.push(Reply::text(r#"{"title": "Greeting"}"#));
    llm.push(Reply::text(r#"{"tags": ["General"]}"#));
    let (_dir, server) = serve_agentd(&llm).await;
    let python = tokio::task::spawn_blocking(clients_python)
        .await
        .expect("venv");
    let args = [format!("http://{}", server.address), "clients-key".into()];
    let stdout =
        crate::support::python_tool::run_sdk_script(python, "openai_clients.py", &args).await;
    assert_eq!(
        stdout.lines().filter(|l| l.ends_with(" ok")).count(),
        8,
        "{stdout}"
    );
    // LangChain's stop sequence reached the model, streamed or not.
    for asked in ["Which tool do you need?", "Go on."] {
        assert_eq!(
            request_asking(&llm, asked)["stop"],
            json!(["Observation:"]),
            "{asked}"
        );
    }
    // LlamaIndex's prompt became the task, with its default temperature.
    let llama = request_asking(&llm, "The capital of France is");
    assert_eq!(llama["temperature"], 0.1, "{llama}");
    // Open WebUI's parameters reached the model.
    let owui = request_asking(&llm, "Hello!");
    assert_eq!(owui["seed"], 7);
    assert_eq!(owui["stop"], json!(["<|im_end|>"]));
    assert_eq!(owui["presence_penalty"], 0.1);
    assert_eq!(owui["max_tokens"], 256);
}

#[tokio::test]
async fn the_ai_sdks_completion_model_generates_and_streams() {
    let node_dir = repo().join("tests/node");
    assert!(
        node_dir.join("node_modules/@ai-sdk/openai").exists(),
        "the AI SDK's OpenAI provider is missing: `npm ci --prefix tests/node` (or scripts/test --setup-only)"
    );
    let llm = MockLlm::start().await;
    llm.push(Reply::text("Paris.").with_usage(9, 2, 0, 0));
    llm.push(Reply::text_in_pieces(&["one, ", "two, ", "three"]));
    let (_dir, server) = serve_agentd(&llm).await;
    let seen = crate::web::run_node_as(
        "ai_sdk_completion.mjs",
        &[format!("http://{}", server.address), "chat".into()],
        "clients-key",
    )
    .await;
    assert_eq!(
        seen["generated"],
        json!({"text": "Paris.", "finishReason": "stop", "inputTokens": 9, "outputTokens": 2})
    );
    assert_eq!(
        seen["streamed"],
        json!({"text": "one, two, three", "finishReason": "stop", "errors": []})
    );
    // The SDK turns the prompt into `user:` text and stops before the next turn.
    let generated = request_asking(&llm, "What is the capital of France?");
    assert_eq!(generated["stop"], json!(["\nuser:"]), "{generated}");
}
