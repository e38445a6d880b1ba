//! A newcomer's first hour through the real OpenAI and Anthropic Python SDKs
//! (tests/sdk/first_hour.py): an upstream that is down, rate-limits or refuses agentd's key gives
//! an error the user can act on (and the SDK the class and retry it expects); unsupported
//! parameters are refused by name; `models.retrieve`, `count_tokens`, `reasoning_content` on
//! non-streamed answers and per-key model lists work.

use serde_json::json;

use crate::sdk_clients::run_sdk_script;
use crate::support::binary::{command, project, serve};
use crate::support::mock_llm::{MockLlm, Reply};

/// An agent on `provider` that tries once.
fn agent_on(provider: &str) -> String {
    format!(
        "---\ndescription: Uses {provider}\nmodels: {provider}/m\nmaxRetries: 1\nfinalization: text\n---\nYou answer.\n"
    )
}

/// A port nothing listens on.
async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    listener.local_addr().expect("address").port()
}

#[tokio::test]
async fn an_sdk_user_gets_errors_to_act_on_and_the_sdk_corners() {
    let llm = MockLlm::start().await;
    for _ in 0..2 {
        llm.push(Reply::text("The answer.").with_reasoning("Thinking it over."));
    }
    let upstream_error = json!({"error": {"message": "slow down", "type": "rate_limit_error"}});
    let limited = MockLlm::start_with(
        "127.0.0.1:0",
        Reply::status(429, upstream_error).with_header("retry-after", "1"),
        true,
    )
    .await;
    let refusal = json!({"error": {"message": "Incorrect API key provided: sk-upstream-secret-123", "type": "invalid_request_error"}});
    let refused = MockLlm::start_with("127.0.0.1:0", Reply::status(401, refusal), true).await;
    let down = format!("http://127.0.0.1:{}/v1", closed_port().await);
    let provider = |url: String| json!({"type": "openai-compatible", "baseUrl": url});
    let dir = project(&json!({
        "providers": {
            "llm": provider(llm.base_url()),
            "limited": provider(limited.base_url()),
            "refused": provider(refused.base_url()),
            "down": provider(down.clone()),
        },
        "agents": ["agents"],
        "auth": {"keys": [
            {"key": "sdk-key", "admin": true},
            {"key": "chat-only-key", "agents": ["chat"]},
        ]},
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite::memory:"},
    }));
    for name in ["limited", "refused", "down"] {
        std::fs::write(dir.path().join(format!("agents/{name}.ai")), agent_on(name))
            .expect("agent file");
    }
    let mut agentd = command(dir.path());
    agentd.args(["serve", "--config", "agentd.json"]);
    let server = serve(agentd, |_| {}).await;
    let args = [
        format!("http://{}", server.address),
        "sdk-key".into(),
        "chat-only-key".into(),
        format!("{down}/chat/completions"),
    ];
    let stdout = run_sdk_script("first_hour.py", &args).await;
    assert!(stdout.contains("anthropic ok"), "every check ran: {stdout}");
    // One run without SDK retries, two with one: the SDK retried the 429 once, as told.
    assert_eq!(limited.requests().len(), 1 + 2 + 1, "{stdout}");
}
