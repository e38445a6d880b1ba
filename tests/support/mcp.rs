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

/// Where the tests find `mcp-server-time`: `$AGENTD_TEST_MCP_TIME`, else `.ci/venv/bin`, which
/// is created (once per test run) with pip when missing, so `cargo test` works on a fresh clone.
pub fn time_server_binary() -> PathBuf {
    static INSTALLED: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let found = INSTALLED.get_or_init(|| {
        if let Some(path) = std::env::var_os("AGENTD_TEST_MCP_TIME") {
            return Ok(PathBuf::from(path));
        }
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv");
        let binary = venv.join("bin/mcp-server-time");
        if !binary.exists() {
            install_time_server(&venv)?;
        }
        Ok(binary)
    });
    match found {
        Ok(path) if path.exists() => path.clone(),
        other => panic!(
            "the published MCP server mcp-server-time is missing ({other:?}): install it with \
             `python3 -m venv .ci/venv && .ci/venv/bin/pip install mcp-server-time=={MCP_TIME_VERSION}` \
             or point AGENTD_TEST_MCP_TIME at it"
        ),
    }
}

fn install_time_server(venv: &Path) -> Result<(), String> {
    let run = |program: &Path, args: &[&str]| {
        let status = std::process::Command::new(program)
            .args(args)
            .status()
            .map_err(|e| format!("{}: {e}", program.display()))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} {args:?} exited with {status}",
                program.display()
            ))
        }
    };
    let venv_text = venv.display().to_string();
    run(Path::new("python3"), &["-m", "venv", &venv_text])?;
    let package = format!("mcp-server-time=={MCP_TIME_VERSION}");
    run(
        &venv.join("bin/pip"),
        &[
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &package,
        ],
    )
}

/// `mcpServers.time` for `mcp-server-time`, always in UTC.
pub fn time_server_config() -> serde_json::Value {
    serde_json::json!({
        "command": time_server_binary().display().to_string(),
        "args": ["--local-timezone", "UTC"],
    })
}
