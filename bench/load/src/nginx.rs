//! nginx as a second do-nothing peer: finding (or installing) Debian's `nginx`, writing its
//! config into the bench's temp dir and starting it in the foreground (`nginx -p DIR -c
//! DIR/nginx.conf -g 'daemon off;'`, never the system service). It forwards every request
//! unchanged to the mock over kept-alive upstream connections and streams the answer back
//! frame by frame (`proxy_buffering off`), so like the relay it is the ceiling of a proxy on this
//! box, written in C with one worker process per CPU.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::procs::Process;

/// The `nginx` binary: on the PATH, else installed with `apt-get install -y nginx` (the bench
/// runs as root on a Debian box); an error naming the package when neither works.
pub fn ensure() -> Result<PathBuf, String> {
    if let Some(path) = which("nginx") {
        return Ok(path);
    }
    eprintln!("nginx is not installed: apt-get install -y nginx");
    let installed = Command::new("apt-get")
        .args(["install", "-y", "-q", "nginx"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    match which("nginx") {
        Some(path) if installed => Ok(path),
        _ => Err(
            "nginx is not installed and `apt-get install -y nginx` failed: install it with `apt-get install nginx` (as root), or pass --no-nginx"
                .into(),
        ),
    }
}

/// `command -v NAME` without a shell; nginx lives in /usr/sbin, which a root PATH holds but
/// not every other one.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"])
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| candidate.is_file())
}

/// Where nginx listens, where it forwards to, and how many descriptors it may use.
pub struct Setup<'a> {
    pub binary: &'a Path,
    /// Its own directory (config, error log, pid file, temp dirs).
    pub dir: &'a Path,
    pub listen: &'a str,
    pub upstream: &'a str,
    /// The open-file limit: each worker may use that many connections (a proxied stream costs
    /// it two, client and upstream).
    pub files: usize,
}

/// The config: one worker per CPU, each with its own listening socket (`reuseport`: the kernel
/// spreads connections evenly over the workers), no access log, HTTP/1.1 kept-alive upstream
/// connections, unbuffered answers and TCP_NODELAY, so streams flow chunk by chunk.
pub fn config(setup: &Setup, workers: usize) -> String {
    let dir = setup.dir.display();
    let files = setup.files.max(1024);
    format!(
        r#"# Written by agentd-bench (bench/load/src/nginx.rs); started with -p {dir}.
worker_processes {workers};
worker_rlimit_nofile {files};
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;

events {{
    worker_connections {files};
}}

http {{
    access_log off;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;

    upstream mock {{
        server {upstream};
        keepalive 512;
        keepalive_requests 1000000;
        keepalive_timeout 75s;
    }}

    server {{
        listen {listen} reuseport backlog=4096;
        location / {{
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
        }}
    }}
}}
"#,
        upstream = setup.upstream,
        listen = setup.listen,
    )
}

/// Writes the config and starts nginx in the foreground; returns once it accepts connections.
pub async fn start(setup: &Setup<'_>) -> Result<Process, String> {
    std::fs::create_dir_all(setup.dir).map_err(|e| format!("{}: {e}", setup.dir.display()))?;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let conf = setup.dir.join("nginx.conf");
    std::fs::write(&conf, config(setup, workers))
        .map_err(|e| format!("{}: {e}", conf.display()))?;
    let check = Command::new(setup.binary)
        .arg("-t")
        .arg("-q")
        .arg("-p")
        .arg(setup.dir)
        .arg("-e")
        .arg(setup.dir.join("error.log"))
        .arg("-c")
        .arg(&conf)
        .output()
        .map_err(|e| format!("{}: {e}", setup.binary.display()))?;
    if !check.status.success() {
        return Err(format!(
            "nginx -t refused {}: {}",
            conf.display(),
            String::from_utf8_lossy(&check.stderr).trim()
        ));
    }
    let child = Command::new(setup.binary)
        .arg("-p")
        .arg(setup.dir)
        .arg("-e")
        .arg(setup.dir.join("error.log"))
        .arg("-c")
        .arg(&conf)
        .args(["-g", "daemon off;"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting nginx: {e}"))?;
    let mut process = Process::adopt(child, "nginx", true);
    let start = Instant::now();
    loop {
        process.check_alive()?;
        if tokio::net::TcpStream::connect(setup.listen).await.is_ok() {
            return Ok(process);
        }
        if start.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "nginx did not accept on {} within 10 s (see {}/error.log)",
                setup.listen,
                setup.dir.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
