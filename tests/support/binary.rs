//! The real `agentd` binary as a child process: a project directory to run it in, the command
//! that runs it there, and `agentd serve` started on a free port with its address read from the
//! log.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use super::CHAT_AGENT;

/// A directory holding `agentd.json` (`config`) and `agents/chat.ai`.
pub fn project(config: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir for the project");
    std::fs::create_dir(dir.path().join("agents")).expect("agents dir");
    std::fs::write(dir.path().join("agents/chat.ai"), CHAT_AGENT).expect("chat agent");
    std::fs::write(dir.path().join("agentd.json"), config.to_string()).expect("config file");
    dir
}

/// `agentd` run in `dir`, with `dir` as its home and the default log level.
pub fn command(dir: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentd"));
    command
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("RUST_LOG")
        .kill_on_drop(true);
    command
}

/// Log lines kept for a test that reads them after start-up; later ones are dropped unread.
const KEPT_LOG_LINES: usize = 4096;

/// A running `agentd serve`; killed when dropped.
pub struct Served {
    pub child: tokio::process::Child,
    /// `127.0.0.1:PORT`, as logged.
    pub address: String,
    /// The log lines after the `agentd listening` line, plain.
    pub log: tokio::sync::mpsc::Receiver<String>,
}

/// Spawns `command` (an `agentd serve …` listening on port 0), hands every log line before the
/// `agentd listening` line to `on_line`, and returns once the address is logged. Stderr keeps
/// being drained, so the child never blocks on a full pipe.
pub async fn serve(mut command: tokio::process::Command, mut on_line: impl FnMut(&str)) -> Served {
    let mut child = command
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("agentd starts");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr piped")).lines();
    let address = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            let plain = strip_ansi(&line);
            if plain.contains("agentd listening") {
                let (_, rest) = plain.split_once("address=")?;
                return rest.split_whitespace().next().map(str::to_string);
            }
            on_line(&plain);
        }
        None
    })
    .await
    .expect("agentd listens within 30 s")
    .expect("agentd logs its address");
    let (kept, log) = tokio::sync::mpsc::channel(KEPT_LOG_LINES);
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = kept.try_send(strip_ansi(&line));
        }
    });
    Served {
        child,
        address,
        log,
    }
}

/// Log lines are coloured; tests read them plain.
fn strip_ansi(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// The real binary serving a project whose one provider is the mock at `llm_base_url`, with an
/// admin `key`, an in-memory store and an OS-chosen port. Keep the directory alive.
pub async fn serve_with_admin_key(llm_base_url: &str, key: &str) -> (tempfile::TempDir, Served) {
    let dir = project(&serde_json::json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm_base_url}},
        "agents": ["agents"],
        "auth": {"keys": [{"key": key, "admin": true}]},
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite::memory:"},
    }));
    let mut agentd = command(dir.path());
    agentd.args(["serve", "--config", "agentd.json"]);
    let server = serve(agentd, |_| {}).await;
    (dir, server)
}
