//! Times the MCP test server's `echo` tool over stdio without agentd, so scenario 4 can take
//! the tool's own latency out of a run's duration. Speaks just enough newline-delimited
//! JSON-RPC: initialize, initialized, then `tools/call` one at a time.

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::load::Summary;

pub async fn echo_latencies(server: &Path, calls: usize) -> Result<Summary, String> {
    let mut child = Command::new(server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", server.display()))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the MCP server's stdio was not piped".into());
    };
    let mut lines = BufReader::new(stdout).lines();
    let mut exchange = async |message: Value, wait: bool| -> Result<(), String> {
        let mut line = message.to_string();
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("writing to the MCP server: {e}"))?;
        if wait {
            let answer = lines
                .next_line()
                .await
                .map_err(|e| format!("reading the MCP server: {e}"))?;
            let answer = answer.ok_or("the MCP server closed its stdout")?;
            if answer.contains("\"error\"") {
                return Err(format!("the MCP server answered an error: {answer}"));
            }
        }
        Ok(())
    };
    exchange(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "agentd-bench", "version": "0"}}}),
        true,
    )
    .await?;
    exchange(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        false,
    )
    .await?;
    let mut latencies = Vec::with_capacity(calls);
    for id in 1..=calls + 20 {
        let start = Instant::now();
        exchange(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "turn"}}}),
            true,
        )
        .await?;
        if id > 20 {
            latencies.push(start.elapsed());
        }
    }
    Ok(crate::scenarios::tool_summary(&latencies))
}
