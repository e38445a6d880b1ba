//! The processes under test: starting the mock upstream, the relay and agentd on 127.0.0.1
//! (nginx is started by `nginx.rs` as a `Process` too), waiting until they answer, reading their
//! RSS, CPU time and metrics, and killing exactly the children it started.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::mock::Shape;

/// A child process killed when dropped.
pub struct Process {
    child: Child,
    name: &'static str,
    /// A master with worker processes (nginx): CPU time is summed over its children too, and
    /// it is asked to stop (SIGTERM) before it is killed, so no worker is left behind.
    tree: bool,
}

/// `sysconf(_SC_CLK_TCK)` on Linux.
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

impl Process {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size in KiB, from `/proc/PID/status`.
    pub fn rss_kib(&self) -> u64 {
        rss_kib_of(self.pid())
    }

    /// A process started elsewhere (nginx.rs); `tree` as on the field.
    pub fn adopt(child: Child, name: &'static str, tree: bool) -> Self {
        Self { child, name, tree }
    }

    /// CPU time used so far (user + system, all threads), from `/proc/PID/stat`, in seconds;
    /// for a tree (nginx) the sum over the master and its current children (the workers).
    pub fn cpu_seconds(&self) -> f64 {
        let own = cpu_seconds_of(self.pid());
        if self.tree {
            own + children_of(self.pid())
                .into_iter()
                .map(cpu_seconds_of)
                .sum::<f64>()
        } else {
            own
        }
    }

    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!("{} exited early: {status}", self.name)),
            Err(error) => Err(format!("{}: {error}", self.name)),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.tree {
            // nginx's workers outlive a SIGKILLed master: ask it to stop them (fast shutdown),
            // then kill whatever is left of this tree only.
            let workers = children_of(self.pid());
            let _ = Command::new("kill")
                .args(["-TERM", &self.pid().to_string()])
                .status();
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            for worker in workers {
                if std::path::Path::new(&format!("/proc/{worker}")).exists() {
                    let _ = Command::new("kill")
                        .args(["-KILL", &worker.to_string()])
                        .status();
                }
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fields of `/proc/PID/stat` after the parenthesised command name (state is the first).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// CPU time (user + system) of one process, in seconds; 0 when it is gone.
pub fn cpu_seconds_of(pid: u32) -> f64 {
    // utime and stime are the 12th and 13th fields after the command name.
    let ticks: u64 = stat_fields(pid)
        .map(|fields| {
            fields
                .iter()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    ticks as f64 / CLOCK_TICKS_PER_SECOND
}

/// CPU time of every process whose command name is `name` (e.g. `postgres`: the server and
/// its backends), in seconds; processes that ended meanwhile no longer count.
pub fn cpu_seconds_named(name: &str) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == name)
        })
        .map(cpu_seconds_of)
        .sum()
}

/// The whole machine's busy CPU time (every CPU, all but idle and iowait), in seconds.
pub fn machine_busy_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0.0;
    };
    let Some(line) = stat.lines().next() else {
        return 0.0;
    };
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy: u64 = ticks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, t)| t)
        .sum();
    busy as f64 / CLOCK_TICKS_PER_SECOND
}

/// This process's own CPU time (the load generator's), in seconds.
pub fn own_cpu_seconds() -> f64 {
    cpu_seconds_of(std::process::id())
}

/// Resident set size of `pid` in KiB, from `/proc/PID/status` (0 when it is gone).
pub fn rss_kib_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The pids whose parent is `pid` (a scan of /proc: the `children` file is not everywhere).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| {
            stat_fields(child)
                .and_then(|fields| fields.get(1)?.parse::<u32>().ok())
                .is_some_and(|parent| parent == pid)
        })
        .collect()
}

/// Starts this binary's subcommand `args` as a child named `name`.
fn start_own(args: &[&str], name: &'static str) -> Result<Process, String> {
    let me = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let child = Command::new(me)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the {name}: {e}"))?;
    Ok(Process {
        child,
        name,
        tree: false,
    })
}

pub fn start_mock(listen: &str) -> Result<Process, String> {
    start_own(&["mock", "--listen", listen], "mock upstream")
}

pub fn start_relay(listen: &str, upstream: &str) -> Result<Process, String> {
    start_own(
        &["relay", "--listen", listen, "--upstream", upstream],
        "relay",
    )
}

/// The agents every scenario needs, named after what they do.
pub struct Agents {
    pub single: Shape,
    pub streamed: Shape,
    pub slow: Shape,
    pub turns: Shape,
    /// Scenario 6: a streamed answer followed from two replicas.
    pub follow: Shape,
    /// Scenario 7: a long stream paced at 50 chunks/s (`fb0-c{K}-g20`).
    pub paced: Shape,
    /// Scenario 8: 64 chunks at once (`fb0-c64-g0`), streamed.
    pub burst64: Shape,
}

/// One agentd the bench starts: its binary, its name (config `NAME.json`, log `NAME.log`),
/// where it listens and its store.
pub struct Instance<'a> {
    pub binary: &'a Path,
    pub name: &'a str,
    pub listen: &'a str,
    pub store_url: &'a str,
}

/// A fresh PostgreSQL database, created with `createdb` and dropped (`dropdb --force`) when
/// dropped: every agentd the bench starts on PostgreSQL gets an empty store.
pub struct Database {
    pub url: String,
    admin: String,
    name: String,
}

impl Database {
    /// `base` is `postgres://user@host:port` (a database in it is ignored).
    pub fn create(base: &str, name: &str) -> Result<Self, String> {
        let base = match base.split_once("://") {
            Some((scheme, rest)) => {
                format!("{scheme}://{}", rest.split('/').next().unwrap_or(rest))
            }
            None => {
                return Err(format!(
                    "--postgres {base:?}: expected postgres://user@host:port"
                ));
            }
        };
        let admin = format!("{base}/postgres");
        let _ = Command::new("dropdb")
            .args([
                "--if-exists",
                "--force",
                &format!("--maintenance-db={admin}"),
                name,
            ])
            .stderr(Stdio::null())
            .status();
        let status = Command::new("createdb")
            .arg(format!("--maintenance-db={admin}"))
            .arg(name)
            .status()
            .map_err(|e| format!("createdb: {e}"))?;
        if !status.success() {
            return Err(format!("createdb {name} at {base} failed: {status}"));
        }
        Ok(Self {
            url: format!("{base}/{name}"),
            admin,
            name: name.to_string(),
        })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = Command::new("dropdb")
            .args([
                "--if-exists",
                "--force",
                &format!("--maintenance-db={}", self.admin),
                &self.name,
            ])
            .status();
    }
}

pub fn start_agentd(
    instance: &Instance,
    mcp_server: &Path,
    dir: &Path,
    upstream: &str,
    agents: &Agents,
) -> Result<Process, String> {
    let (agentd, listen) = (instance.binary, instance.listen);
    let agent_dir = dir.join("agents");
    std::fs::create_dir_all(&agent_dir).map_err(|e| format!("{}: {e}", agent_dir.display()))?;
    let write = |name: &str, text: String| {
        let path = agent_dir.join(format!("{name}.ai"));
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    let agent = |provider: &str, shape: &Shape, tools: &str| {
        format!(
            "---\ndescription: bench\nmodels: [{provider}/{}]\nfinalization: text\nmaxTurns: 10\nmaxRetries: 1\n{tools}---\nYou answer.\n",
            shape.model()
        )
    };
    // Non-streaming clients go through a provider that calls the upstream non-streaming, so
    // both sides of the comparison move the same bytes.
    write("single", agent("whole", &agents.single, ""))?;
    write("streamed", agent("llm", &agents.streamed, ""))?;
    write("slow", agent("llm", &agents.slow, ""))?;
    write("turns", agent("whole", &agents.turns, "tools: [mcp]\n"))?;
    write("follow", agent("llm", &agents.follow, ""))?;
    write("paced", agent("llm", &agents.paced, ""))?;
    write("burst64", agent("llm", &agents.burst64, ""))?;
    let config = json!({
        "providers": {
            "llm": {"type": "openai-compatible", "baseUrl": format!("http://{upstream}/v1")},
            "whole": {"type": "openai-compatible", "baseUrl": format!("http://{upstream}/v1"), "stream": false}
        },
        "server": {"listen": listen, "maxConcurrentSessions": 20000, "maxQueuedSessions": 20000},
        "store": {"url": instance.store_url},
        "mcpServers": {"mcp": {"type": "stdio", "command": mcp_server.display().to_string()}},
        "agents": ["agents"]
    });
    let config_path = dir.join(format!("{}.json", instance.name));
    std::fs::write(&config_path, config.to_string())
        .map_err(|e| format!("{}: {e}", config_path.display()))?;
    let log = std::fs::File::create(dir.join(format!("{}.log", instance.name)))
        .map_err(|e| format!("{}.log: {e}", instance.name))?;
    let mut command = Command::new(agentd);
    // agentd's tokio worker threads (tokio reads TOKIO_WORKER_THREADS), for agentd alone: the
    // driver and the mock keep theirs.
    if let Some(workers) = std::env::var_os("AGENTD_BENCH_AGENTD_WORKERS") {
        command.env("TOKIO_WORKER_THREADS", workers);
    }
    // As shipped: agentd's default log level and format (RUST_LOG unset), unless
    // AGENTD_BENCH_LOG names a filter (e.g. `warn`, what round two measured with).
    match std::env::var("AGENTD_BENCH_LOG") {
        Ok(filter) => command.env("RUST_LOG", filter),
        Err(_) => command.env_remove("RUST_LOG"),
    };
    let child = command
        .args(["serve", "--config"])
        .arg(&config_path)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", agentd.display()))?;
    Ok(Process {
        child,
        name: "agentd",
        tree: false,
    })
}

/// Polls `url` until it answers 2xx, or fails after `limit`.
/// [`start_agentd`], then waits (up to 60 s) until its `/health` answers.
pub async fn start_agentd_ready(
    instance: &Instance<'_>,
    (mcp_server, dir, upstream): (&Path, &Path, &str),
    agents: &Agents,
    client: &reqwest::Client,
) -> Result<Process, String> {
    let process = start_agentd(instance, mcp_server, dir, upstream, agents)?;
    wait_ready(
        client,
        &format!("http://{}/health", instance.listen),
        Duration::from_secs(60),
    )
    .await?;
    Ok(process)
}

pub async fn wait_ready(
    client: &reqwest::Client,
    url: &str,
    limit: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(r) = client.get(url).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{url} did not answer within {limit:?}"))
}

/// The sum and count of a Prometheus histogram, over all its label sets.
pub async fn histogram(client: &reqwest::Client, url: &str, name: &str) -> (f64, f64) {
    let Ok(response) = client.get(url).send().await else {
        return (0.0, 0.0);
    };
    let text = response.text().await.unwrap_or_default();
    let total = |suffix: &str| -> f64 {
        let prefix = format!("{name}{suffix}");
        text.lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (total("_sum"), total("_count"))
}

/// The release binaries the bench drives, next to each other in the agentd target dir.
pub fn release_binary(target: &Path, relative: &str) -> Result<PathBuf, String> {
    let path = target.join(relative);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} is missing: run bench/run.sh (it builds it)",
            path.display()
        ))
    }
}
