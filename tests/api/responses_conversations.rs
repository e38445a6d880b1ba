//! The newest OpenAI Python SDK (`openai`, pinned in `scripts/test`, in its own
//! `.ci/venv-responses`) against the real `agentd` binary: the Conversations API, `conversation`
//! on a response, `input_tokens.count` and `compact` (SPEC §15, tests/sdk/responses_conversations.py).

use crate::support::mock_llm::{MockLlm, Reply};

/// Pinned as `scripts/test` pins it.
const OPENAI_SDK: &str = "openai==3.57.0";

/// The upstream request whose last message contains `text`.
fn request_asking(llm: &MockLlm, text: &str) -> serde_json::Value {
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

fn contents(request: &serde_json::Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn the_newest_openai_sdk_uses_conversations_token_counts_and_compaction() {
    let llm = MockLlm::start().await;
    llm.push(Reply::text("Ada."));
    llm.push(Reply::text("Blue."));
    llm.push(Reply::text("Rome, two days."));
    let (_dir, server) =
        crate::support::binary::serve_with_admin_key(&llm.base_url(), "conv-key").await;
    let python = tokio::task::spawn_blocking(|| {
        crate::support::python_tool::python_with(
            "venv-responses",
            &["openai.resources.conversations"],
            &[OPENAI_SDK],
        )
    })
    .await
    .expect("venv");
    let args = [format!("http://{}", server.address), "conv-key".into()];
    let stdout =
        crate::support::python_tool::run_sdk_script(python, "responses_conversations.py", &args)
            .await;
    assert!(stdout.starts_with("openai 3.57.0"), "{stdout}");
    assert_eq!(
        stdout.lines().filter(|l| l.ends_with(" ok")).count(),
        9,
        "{stdout}"
    );
    // The conversation's stored messages were the run's history.
    let first = contents(&request_asking(&llm, "What is my name?"));
    assert!(first.iter().any(|c| c == "My name is Ada."), "{first:?}");
    let second = contents(&request_asking(&llm, "And my colour?"));
    for said in ["My name is Ada.", "Ada.", "My colour is blue."] {
        assert!(second.iter().any(|c| c == said), "{said}: {second:?}");
    }
    // The compaction item read back as the answer it kept.
    let after = contents(&request_asking(&llm, "Summarise the plan."));
    for said in [
        "Plan a trip to Rome.",
        "Add a day.",
        "Day one: the Colosseum.",
    ] {
        assert!(after.iter().any(|c| c == said), "{said}: {after:?}");
    }
}
