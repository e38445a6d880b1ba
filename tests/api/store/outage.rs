//! A PostgreSQL that goes away and comes back: a private cluster (its own port and data
//! directory in a temp dir, started with `pg_ctl`), never the shared service on 5432.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::nul_checks::answered_run;
use crate::support::{TestApp, spawn_app_with};

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A throwaway cluster, stopped (immediately) when dropped.
pub(crate) struct PrivateCluster {
    dir: tempfile::TempDir,
    port: u16,
}

impl PrivateCluster {
    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub(crate) fn start() -> Self {
        for tool in ["initdb", "pg_ctl"] {
            assert!(
                Path::new(PG_BIN).join(tool).exists(),
                "{PG_BIN}/{tool} is missing: install PostgreSQL 15's server binaries \
                 (`apt-get install postgresql-15`)"
            );
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        run(Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir.path()));
        let cluster = Self { dir, port };
        cluster.as_postgres(&[
            &format!("{PG_BIN}/initdb"),
            "-D",
            &cluster.data().display().to_string(),
            "-A",
            "trust",
            "-U",
            "postgres",
        ]);
        cluster.ctl("start");
        cluster
    }

    /// Runs `args` as the `postgres` user (initdb refuses root).
    fn as_postgres(&self, args: &[&str]) {
        let as_root = std::env::var("USER").map_or(true, |user| user == "root");
        let mut command = if as_root {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]);
            command.args(args);
            command
        } else {
            let mut command = Command::new(args[0]);
            command.args(&args[1..]);
            command
        };
        run(&mut command);
    }

    /// `pg_ctl start`, or any other action (`stop`) in `immediate` mode.
    pub(crate) fn ctl(&self, action: &str) {
        let data = self.data().display().to_string();
        let log = self.dir.path().join("log").display().to_string();
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let mut args = vec![
            format!("{PG_BIN}/pg_ctl"),
            action.to_string(),
            "-D".into(),
            data,
            "-w".into(),
        ];
        match action {
            "start" => args.extend(["-o".into(), options, "-l".into(), log]),
            _ => args.extend(["-m".into(), "immediate".into()]),
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.as_postgres(&args);
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let data = self.data().display().to_string();
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--", &format!("{PG_BIN}/pg_ctl")])
            .args(["stop", "-D", &data, "-m", "immediate"])
            .output();
    }
}

fn run(command: &mut Command) {
    let output = command.output().expect("command runs");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The answer's status, `code` and `Retry-After`, and how long it took.
async fn answer(app: &TestApp, path: &str) -> (u16, Value, Option<String>, Duration) {
    let started = Instant::now();
    let response = app.get(path).await;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (status, body, retry_after, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_outage_is_503_fast_and_runs_meanwhile_are_stored_when_it_returns() {
    let cluster = PrivateCluster::start();
    let url = cluster.url();
    let app = spawn_app_with(|config| {
        config["store"]["url"] = json!(url);
        config["server"]["drainSeconds"] = json!(2);
    })
    .await;
    let before_id = answered_run(&app, "before").await;
    app.runtime.flush_recorder().await;
    assert_eq!(answer(&app, "/ready").await.0, 200);

    cluster.ctl("stop");
    let (status, body, _, took) = answer(&app, "/ready").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (503, &json!("store_unavailable"))
    );
    assert!(took < Duration::from_secs(1), "/ready took {took:?}");
    let (status, body, retry_after, took) = answer(&app, "/api/ada/conversations").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (503, &json!("store_unavailable"))
    );
    assert!(retry_after.is_some(), "Retry-After is sent");
    assert!(
        took < Duration::from_secs(4),
        "a store request took {took:?}"
    );
    let (status, body, _, _) = answer(&app, &format!("/v1/runs/{before_id}/events")).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (503, &json!("store_unavailable"))
    );

    // Runs go on meanwhile; their records wait in memory.
    let during_id = answered_run(&app, "during").await;

    cluster.ctl("start");
    let deadline = Instant::now() + Duration::from_secs(20);
    while answer(&app, "/ready").await.0 != 200 {
        assert!(Instant::now() < deadline, "/ready did not recover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.runtime.flush_recorder().await;
    let stored = app
        .runtime
        .store()
        .get_run(&during_id)
        .await
        .expect("the store answers again")
        .expect("the run recorded during the outage is stored");
    assert_eq!(stored.status.as_str(), "completed");

    // A stop while the store is gone still ends within drainSeconds and the store grace.
    cluster.ctl("stop");
    let started = Instant::now();
    app.runtime.drain().await;
    app.runtime.close().await;
    assert!(
        started.elapsed() < Duration::from_secs(2 + 10),
        "shutdown took {:?}",
        started.elapsed()
    );
}
