//! The real OpenAI and Anthropic Python SDKs against the real `agentd` binary: both must parse
//! every response, streamed and not (tests/sdk/clients.py). The SDKs live in `.ci/venv`, which
//! this test fills with pip when they are missing.

use std::path::PathBuf;

use crate::support::mock_llm::{MockLlm, Reply};

const SDKS: [&str; 2] = ["openai==3.52.0", "anthropic==2.11.0"];

/// `.ci/venv/bin/python` with both SDKs, installed once per test run if needed.
fn sdk_python() -> PathBuf {
    crate::support::python_tool::python_with("venv", &["openai", "anthropic"], &SDKS)
}

/// Runs `tests/sdk/SCRIPT` with the SDKs' Python and `args`; returns its output once it
/// succeeded (else fails the test with its output).
pub(crate) async fn run_sdk_script(script: &str, args: &[String]) -> String {
    let python = tokio::task::spawn_blocking(sdk_python).await.expect("venv");
    crate::support::python_tool::run_sdk_script(python, script, args).await
}

#[tokio::test]
async fn the_openai_and_anthropic_sdks_parse_every_response() {
    let llm = MockLlm::start().await;
    for _ in 0..6 {
        llm.push(Reply::text("Hello from the mock upstream!").with_chunks(5));
    }
    let (_dir, server) =
        crate::support::binary::serve_with_admin_key(&llm.base_url(), "sdk-key").await;
    let address = &server.address;
    let args = [format!("http://{address}"), "sdk-key".to_string()];
    let stdout = run_sdk_script("clients.py", &args).await;
    assert_eq!(
        stdout.lines().filter(|l| l.ends_with(" ok")).count(),
        7,
        "{stdout}"
    );
}

#[tokio::test]
async fn the_readme_quick_start_snippet_runs_as_written() {
    let app = crate::support::spawn_app().await;
    app.llm.push(Reply::text("Hi there."));
    app.llm.push(Reply::text_in_pieces(&["Hi ", "again."]));
    let args = [
        "quick-start".to_string(),
        app.address.clone(),
        "unused".to_string(),
    ];
    let stdout = run_sdk_script("readme_snippet.py", &args).await;
    assert_eq!(stdout, "Hi there.\nHi again.", "{stdout}");
}
