//! Finding the MCP servers the tests run: the stdio test server binary built from
//! `examples/mcp_test_server.rs`, and the published `mcp-server-time` from PyPI.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The stdio test server, (re)built once per test process so a stale binary is never used.
pub fn test_server_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "--quiet", "--example", "mcp_test_server"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cargo runs");
            assert!(
                status.success(),
                "building examples/mcp_test_server.rs failed"
            );
            let binary = Path::new(env!("CARGO_BIN_EXE_agentd"))
                .parent()
                .expect("target dir")
                .join("examples/mcp_test_server");
            assert!(
                binary.exists(),
                "{} is missing: run `cargo build --examples`",
                binary.display()
            );
            binary
        })
        .clone()
}

/// `mcpServers.<name>` for the stdio test server, merged with `extra`.
pub fn test_server_config(extra: serde_json::Value) -> serde_json::Value {
    let mut config = serde_json::json!({
        "type": "stdio",
        "command": test_server_binary().display().to_string(),
    });
    if let (Some(base), serde_json::Value::Object(extra)) = (config.as_object_mut(), extra) {
        base.extend(extra);
    }
    config
}

/// The `mcp-server-time` release the tests pin (`.ci/run` installs the same one).
pub const MCP_TIME_VERSION: &str = "2026.10.19";

/// Where the tests find `mcp-server-time` (see [`super::python_tool`]).
pub fn time_server_binary() -> PathBuf {
    super::python_tool::installed(&super::python_tool::PythonTool {
        binary: "mcp-server-time",
        package: "mcp-server-time",
        version: MCP_TIME_VERSION,
        env_var: "AGENTD_TEST_MCP_TIME",
    })
}

/// `mcpServers.time` for `mcp-server-time`, always in UTC.
pub fn time_server_config() -> serde_json::Value {
    serde_json::json!({
        "command": time_server_binary().display().to_string(),
        "args": ["--local-timezone", "UTC"],
    })
}
