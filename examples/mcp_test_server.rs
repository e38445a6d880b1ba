//! The MCP test server over stdio, for agentd's integration tests (`tests/support/mcp_server.rs`
//! holds the server itself). Run by the tests as a child process; it logs one line to stderr
//! when it is ready and exits when stdin closes. With `MCP_TEST_GRANDCHILD` set it first starts
//! `sleep 300` and logs `grandchild pid N`, so tests can check the whole process tree ends.

#[path = "../tests/support/mcp_server.rs"]
#[allow(
    dead_code,
    reason = "the tests use parts of this file that the stand-alone server does not"
)]
mod mcp_server;

use std::sync::Arc;

use rmcp::ServiceExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("MCP_TEST_GRANDCHILD").is_some() {
        let grandchild = std::process::Command::new("sleep").arg("300").spawn()?;
        eprintln!("grandchild pid {}", grandchild.id());
    }
    let server = mcp_server::TestServer::new(Arc::new(mcp_server::Stats::default()), true);
    let running = server.serve(rmcp::transport::stdio()).await?;
    eprintln!("mcp test server ready (pid {})", std::process::id());
    running.waiting().await?;
    Ok(())
}
