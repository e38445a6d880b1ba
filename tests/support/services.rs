//! The local PostgreSQL and Redis the store, cache and replica suites use. When the default
//! address does not answer and the Debian package is installed, the test support starts the
//! service itself (once per test run, as `.ci/run` does), so `cargo test` passes on a machine
//! where they are installed but stopped; a test that still cannot reach one fails saying how to
//! get it.

use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a started service may take to accept connections.
const START_WAIT: Duration = Duration::from_secs(30);

/// Services this test run has already tried to start (each is tried once).
static TRIED: Mutex<Vec<SocketAddr>> = Mutex::new(Vec::new());

/// The local PostgreSQL cluster of the Debian package, started if it is down.
pub fn ensure_local_postgres() {
    let Some(version) = first_entry("/etc/postgresql") else {
        return; // Not installed: the caller's error says how to get it.
    };
    ensure_listening(
        "127.0.0.1:5432",
        Command::new("pg_ctlcluster").args([
            "--skip-systemctl-redirect",
            &version,
            "main",
            "start",
        ]),
    );
}

/// A Redis on 127.0.0.1:`port` (no persistence), started if nothing answers there.
pub fn ensure_local_redis(port: u16) {
    let port = port.to_string();
    ensure_listening(
        &format!("127.0.0.1:{port}"),
        Command::new("redis-server").args([
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "--port",
            &port,
            "--save",
            "",
            "--appendonly",
            "no",
        ]),
    );
}

/// Runs `start` once per test run when nothing accepts connections at `address`, then waits
/// until something does (or [`START_WAIT`] passes).
pub fn ensure_listening(address: &str, start: &mut Command) {
    let address: SocketAddr = address.parse().expect("a socket address");
    if answers(address) {
        return;
    }
    let mut tried = TRIED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if tried.contains(&address) || answers(address) {
        return;
    }
    tried.push(address);
    eprintln!("nothing answers at {address}: starting {start:?}");
    match start.status() {
        Ok(status) if status.success() => {}
        Ok(status) => eprintln!("{start:?} exited with {status}"),
        Err(error) => eprintln!("cannot run {start:?}: {error}"),
    }
    let deadline = Instant::now() + START_WAIT;
    while !answers(address) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn answers(address: SocketAddr) -> bool {
    TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok()
}

fn first_entry(dir: &str) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names.pop()
}
