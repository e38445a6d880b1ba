//! schemathesis (PyPI) against the real binary's `/openapi.json`: every operation with generated
//! valid and invalid input, a fixed seed and a bounded number of examples, and with an API key
//! so authentication is checked too. It must find no server error and no answer that contradicts
//! the document. One check is left out: `negative_data_rejection` also sends headers the
//! document does not list and expects a refusal, which no HTTP server gives (extra headers are
//! allowed by OpenAPI); invalid bodies, parameters and keys are still sent by the other checks.
//! Strings are generated without NUL, which the document says agentd refuses (a test of its own
//! checks that refusal on both stores).

use std::time::Duration;

use serde_json::json;

use crate::support::binary;
use crate::support::mock_llm::MockLlm;
use crate::support::python_tool::{PythonTool, installed};

const SCHEMATHESIS: PythonTool = PythonTool {
    binary: "schemathesis",
    package: "schemathesis",
    version: "4.32.5",
    env_var: "AGENTD_TEST_SCHEMATHESIS",
};
const KEY: &str = "schemathesis-admin-key";

/// Operations whose bodies carry content a JSON Schema cannot judge, refused with the status
/// each names; schemathesis takes that status as an answer to valid data there and still checks
/// every other property of the answer (documented status, body shape, no server error).
/// - the Responses WebSocket mode is refused with its documented 426 (see `responses/websocket.rs`);
/// - attachment bytes must decode as base64 and be of an allowed type once sniffed (400, 415),
///   and a URL must be fetchable (400);
/// - a webhook URL must pass the address guard (400);
/// - Responses input items are OpenAI's open union of item shapes (400 naming the item);
/// - a schedule's cron expression and time zone must parse, and a new one names its agent (400);
/// - A2A's HTTP+JSON binding takes A2A messages (its protobuf JSON, documented as an object).
const CONTENT_CHECKED_BEYOND_THE_SCHEMA: &str = r#"
[[operations]]
include-path = "/v1/responses"
include-method = "GET"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "426", "429"]

[[operations]]
include-path = "/api/{user_id}/chat"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "415", "429"]

[[operations]]
include-path = "/v1/agents/{agent}/runs"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]

[[operations]]
include-path = "/v1/files"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "409", "415", "429"]

[[operations]]
include-path-regex = "^/v1/(conversations|responses/compact|responses/input_tokens)"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]

[[operations]]
include-path-regex = "^/a2a/\\{agent\\}/(message:send|message:stream|tasks)"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]

[[operations]]
include-path = "/v1/schedules"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_contradiction_of_the_document() {
    let schemathesis = installed(&SCHEMATHESIS);
    let llm = MockLlm::start().await;
    let dir = binary::project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0"},
        "auth": {"keys": [{"key": KEY, "admin": true}]},
        "store": {"url": "sqlite://agentd.db"},
        // The secrets routes answer 503 without a key: give them one so they are exercised.
        "secrets": {"key": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"},
    }));
    std::fs::write(
        dir.path().join("schemathesis.toml"),
        CONTENT_CHECKED_BEYOND_THE_SCHEMA,
    )
    .expect("schemathesis.toml written");
    let mut command = binary::command(dir.path());
    command.args(["serve", "--config", "agentd.json"]);
    let served = binary::serve(command, |_| {}).await;
    let schema = format!("http://{}/openapi.json", served.address);
    let run = tokio::process::Command::new(schemathesis)
        .args([
            "run",
            &schema,
            "--checks",
            "all",
            "--exclude-checks",
            "negative_data_rejection",
            "--max-examples",
            "30",
            "--seed",
            "1",
            "--workers",
            "1",
            "--generation-allow-x00",
            "false",
            "--no-color",
            "-H",
            &format!("Authorization: Bearer {KEY}"),
        ])
        .current_dir(dir.path())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(600), run)
        .await
        .expect("schemathesis finishes within 10 minutes")
        .expect("schemathesis runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(report.contains("passed"), "{report}");
}
