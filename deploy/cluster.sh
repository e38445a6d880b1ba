#!/usr/bin/env bash
# A local agentd cluster on one machine: N replicas of `agentd serve` sharing one PostgreSQL
# database, behind nginx as the load balancer (SPEC §7: any replica answers for any run).
#
#   deploy/cluster.sh [start] [-n N] [-p PORT]   start N replicas (default 3) and nginx on PORT (8080)
#   deploy/cluster.sh status                     each replica's pid, /ready and /health; nginx
#   deploy/cluster.sh kill K                     SIGKILL replica K (its runs end `owner_lost`)
#   deploy/cluster.sh restart K                  SIGTERM replica K, wait for its drain, start it again
#   deploy/cluster.sh stop                       SIGTERM every replica, wait for the drains, stop nginx
#
# Environment:
#   AGENTD_BIN            the binary (default target/release/agentd, built with
#                         `cargo build --release` when missing)
#   AGENTD_CONFIG         the config file (default config/agentd.json: its agents come with it)
#   AGENTD_DATABASE_URL   the shared store (default postgres://postgres@127.0.0.1:5432/agentd_cluster,
#                         created when missing); replicas need PostgreSQL, SQLite is one process
#   AGENTD_DRAIN_SECONDS  the config's server.drainSeconds (default 30): how long stop/restart
#                         wait for a replica to drain before they SIGKILL it
#   CLUSTER_PORT          the balancer's port (default 8080; also -p)
#   CLUSTER_BASE_PORT     replica K listens on CLUSTER_BASE_PORT + K - 1 (default 8081)
#   CLUSTER_DIR           pid files, logs and nginx's config (default deploy/.cluster)
#
# Everything runs as the invoking user on 127.0.0.1; nothing touches the system nginx.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

bin=${AGENTD_BIN:-target/release/agentd}
config=${AGENTD_CONFIG:-config/agentd.json}
database=${AGENTD_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/agentd_cluster}
drain=${AGENTD_DRAIN_SECONDS:-30}
lb_port=${CLUSTER_PORT:-8080}
base_port=${CLUSTER_BASE_PORT:-8081}
dir=${CLUSTER_DIR:-deploy/.cluster}
replicas=3

die() { echo "cluster: $*" >&2; exit 1; }
say() { echo "cluster: $*"; }

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-0}"
}

port_of() { echo $((base_port + $1 - 1)); }
pid_file() { echo "$dir/agentd-$1.pid"; }
log_file() { echo "$dir/agentd-$1.log"; }

# The pid of replica K when it is alive, else nothing (and status 1).
alive_pid() {
    local file pid
    file=$(pid_file "$1")
    [[ -f $file ]] || return 1
    pid=$(<"$file")
    process_alive "$pid" || return 1
    echo "$pid"
}

# Alive and not a zombie that its parent has yet to reap.
process_alive() {
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ -n $state && $state != Z* ]]
}

# start records the cluster's shape and what it runs; the other commands read it back, so
# `restart K` runs what `start` ran unless AGENTD_BIN, AGENTD_CONFIG or AGENTD_DATABASE_URL say
# otherwise (a rolling upgrade: AGENTD_BIN=new/agentd deploy/cluster.sh restart K, for each K).
save_shape() {
    printf '%s=%s\n' replicas "$replicas" lb_port "$lb_port" base_port "$base_port" \
        bin "$bin" config "$config" database "$database" >"$dir/cluster"
}
load_shape() {
    [[ -f $dir/cluster ]] || die "no cluster in $dir (run: deploy/cluster.sh start)"
    local key value
    while IFS='=' read -r key value; do
        case $key in
        replicas) replicas=$value ;;
        lb_port) lb_port=$value ;;
        base_port) base_port=$value ;;
        bin) [[ -n ${AGENTD_BIN:-} ]] || bin=$value ;;
        config) [[ -n ${AGENTD_CONFIG:-} ]] || config=$value ;;
        database) [[ -n ${AGENTD_DATABASE_URL:-} ]] || database=$value ;;
        esac
    done <"$dir/cluster"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

http_code() { curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" || true; }

wait_ready() { # K TIMEOUT_SECONDS
    local k=$1 deadline=$((SECONDS + $2)) port
    port=$(port_of "$k")
    while ((SECONDS < deadline)); do
        [[ $(http_code "http://127.0.0.1:$port/ready") == 200 ]] && return 0
        alive_pid "$k" >/dev/null || {
            # This start's lines: from the last marker start_replica wrote.
            awk '/^--- /{n=0} {line[n++]=$0} END{for(i=0;i<n;i++) print line[i]}' "$(log_file "$k")" | tail -n 20 >&2
            die "replica $k exited during start (log: $(log_file "$k"))"
        }
        sleep 0.2
    done
    die "replica $k not ready on :$port after $2 s (log: $(log_file "$k"))"
}

start_replica() { # K
    local k=$1 port
    port=$(port_of "$k")
    port_in_use "$port" && die "port $port is in use (set CLUSTER_BASE_PORT)"
    echo "--- $(date -Is) start on 127.0.0.1:$port" >>"$(log_file "$k")"
    # setsid: its own session, so neither the terminal's ^C nor its hang-up reaches the replica.
    setsid "$bin" serve --config "$config" --listen "127.0.0.1:$port" --database "$database" \
        </dev/null >>"$(log_file "$k")" 2>&1 &
    echo $! >"$(pid_file "$k")"
}

# SIGTERM replica K (when alive) and wait for it to exit: it drains for up to drainSeconds.
stop_replica() { # K
    local k=$1 pid deadline
    pid=$(alive_pid "$k") || { rm -f "$(pid_file "$k")"; return 0; }
    kill -TERM "$pid"
    deadline=$((SECONDS + drain + 10))
    while process_alive "$pid"; do
        if ((SECONDS >= deadline)); then
            say "replica $k (pid $pid) still running $((drain + 10)) s after SIGTERM: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    rm -f "$(pid_file "$k")"
}

ensure_database() {
    # postgres://user@host:port/name?params -> name, and the same URL on the `postgres` database.
    [[ $database == postgres://* || $database == postgresql://* ]] ||
        die "AGENTD_DATABASE_URL must be postgres://… (replicas share one PostgreSQL; SQLite is one process)"
    command -v psql >/dev/null || die "psql is missing: apt-get install -y postgresql-client"
    local base=${database%%\?*} query='' name admin
    [[ $database == *\?* ]] && query="?${database#*\?}"
    name=${base##*/}
    admin="${base%/*}/postgres$query"
    if psql "$database" -qtAc 'SELECT 1' >/dev/null 2>&1; then
        return 0
    fi
    psql "$admin" -qtAc 'SELECT 1' >/dev/null ||
        die "cannot reach PostgreSQL at ${base%/*} (is it running? is the URL right?)"
    say "creating database $name"
    createdb --maintenance-db="$admin" "$name"
}

write_nginx_conf() {
    local k upstreams='' user_line=''
    for ((k = 1; k <= replicas; k++)); do
        upstreams+="        server 127.0.0.1:$(port_of "$k") max_fails=1 fail_timeout=3s;"$'\n'
    done
    # As root, nginx would hand its workers to `nobody`; keep them as the invoking user.
    ((EUID == 0)) && user_line="user $(id -un) $(id -gn);"
    local abs
    abs=$(cd "$dir" && pwd)
    mkdir -p "$abs/nginx-tmp"
    cat >"$dir/nginx.conf" <<EOF
# Written by deploy/cluster.sh start; rewritten at every start.
$user_line
worker_processes 1;
pid $abs/nginx.pid;
error_log $abs/nginx-error.log warn;
events { worker_connections 4096; }

http {
    log_format upstream '\$remote_addr [\$time_local] "\$request" \$status \$body_bytes_sent '
                        'upstream=\$upstream_addr upstream_status=\$upstream_status '
                        'time=\$request_time';
    access_log $abs/nginx-access.log upstream;
    client_body_temp_path $abs/nginx-tmp/body;
    proxy_temp_path $abs/nginx-tmp/proxy;
    fastcgi_temp_path $abs/nginx-tmp/fastcgi;
    uwsgi_temp_path $abs/nginx-tmp/uwsgi;
    scgi_temp_path $abs/nginx-tmp/scgi;

    # agentd answers 413 itself past server.requestBodyLimitBytes (4 MiB by default).
    client_max_body_size 16m;
    # Pass every request header (Authorization, x-api-key, Last-Event-ID, …), underscores too.
    underscores_in_headers on;

    upstream agentd {
        # max_fails/fail_timeout: how nginx routes around a replica that is killed or drains
        # (it never polls /ready: see the comments of deploy/nginx/agentd-proxy.conf).
$upstreams
        keepalive 32;
    }

    server {
        listen 127.0.0.1:$lb_port;

        location / {
            # SSE-safe proxying and retries, the same as the compose balancer's.
            include $repo/deploy/nginx/agentd-proxy.conf;
        }

        # No replica reachable at all: answer like agentd does, so clients back off and retry.
        error_page 502 504 = @unavailable;
        location @unavailable {
            default_type application/json;
            add_header Retry-After 1 always;
            return 503 '{"error":{"message":"No agentd replica is reachable","type":"overloaded","code":"overloaded","param":null}}';
        }
    }
}
EOF
}

nginx_args() {
    local abs
    abs=$(cd "$dir" && pwd)
    echo -p "$abs" -e "$abs/nginx-error.log" -c "$abs/nginx.conf"
}

nginx_pid() {
    [[ -f $dir/nginx.pid ]] || return 1
    local pid
    pid=$(<"$dir/nginx.pid")
    process_alive "$pid" || return 1
    echo "$pid"
}

cmd_start() {
    command -v nginx >/dev/null || {
        echo "cluster: nginx is missing; install it (Debian/Ubuntu): apt-get install -y nginx" >&2
        echo "cluster: (the system service need not run: the cluster starts its own nginx)" >&2
        exit 1
    }
    command -v curl >/dev/null || die "curl is missing: apt-get install -y curl"
    ((replicas >= 1)) || die "-n needs at least 1 replica"
    mkdir -p "$dir"
    if [[ -f $dir/cluster ]]; then
        local k
        for ((k = 1; k <= 64; k++)); do
            alive_pid "$k" >/dev/null && die "a cluster is already running (deploy/cluster.sh status / stop)"
        done
        nginx_pid >/dev/null && die "a cluster's nginx is already running (deploy/cluster.sh stop)"
    fi
    port_in_use "$lb_port" && die "port $lb_port is in use (use -p PORT)"
    if [[ ! -x $bin ]]; then
        [[ $bin == target/release/agentd ]] || die "AGENTD_BIN=$bin is not an executable"
        say "building $bin (cargo build --release)"
        cargo build --release --bin agentd
    fi
    [[ -f $config ]] || die "no config at $config (set AGENTD_CONFIG)"
    ensure_database
    save_shape
    # Whatever fails from here on, stop what was started.
    trap 'echo "cluster: start failed; stopping what started" >&2; cmd_stop >&2' EXIT

    # The first replica applies the store's migrations; the others start once it is ready.
    start_replica 1
    wait_ready 1 60
    local k
    for ((k = 2; k <= replicas; k++)); do start_replica "$k"; done
    for ((k = 2; k <= replicas; k++)); do wait_ready "$k" 60; done

    write_nginx_conf
    # shellcheck disable=SC2046 # nginx_args is two options with absolute paths.
    nginx $(nginx_args) -t -q || die "nginx rejected $dir/nginx.conf"
    # shellcheck disable=SC2046
    nginx $(nginx_args)
    local deadline=$((SECONDS + 10))
    until [[ $(http_code "http://127.0.0.1:$lb_port/health") == 200 ]]; do
        ((SECONDS < deadline)) || die "nginx is not answering on :$lb_port (log: $dir/nginx-error.log)"
        sleep 0.2
    done
    trap - EXIT
    say "$replicas replicas on :$(port_of 1)..:$(port_of "$replicas") (store $database)"
    say "load balancer: http://127.0.0.1:$lb_port   logs: $dir/"
}

cmd_status() {
    local k pid port failed=0
    load_shape
    printf '%-9s %-8s %-6s %-6s %-7s\n' replica pid port ready health
    for ((k = 1; k <= replicas; k++)); do
        port=$(port_of "$k")
        if pid=$(alive_pid "$k"); then
            printf '%-9s %-8s %-6s %-6s %-7s\n' "$k" "$pid" "$port" \
                "$(http_code "http://127.0.0.1:$port/ready")" "$(http_code "http://127.0.0.1:$port/health")"
        else
            printf '%-9s %-8s %-6s %-6s %-7s\n' "$k" down "$port" - -
            failed=1
        fi
    done
    if pid=$(nginx_pid); then
        printf '%-9s %-8s %-6s %-6s %-7s\n' nginx "$pid" "$lb_port" \
            "$(http_code "http://127.0.0.1:$lb_port/ready")" "$(http_code "http://127.0.0.1:$lb_port/health")"
    else
        printf '%-9s %-8s %-6s %-6s %-7s\n' nginx down "$lb_port" - -
        failed=1
    fi
    return "$failed"
}

replica_arg() { # K: a replica of the running cluster
    load_shape
    if ! [[ ${1:-} =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > replicas)); then
        die "name a replica from 1 to $replicas"
    fi
}

cmd_kill() {
    replica_arg "${1:-}"
    local pid
    pid=$(alive_pid "$1") || die "replica $1 is not running"
    kill -KILL "$pid"
    while process_alive "$pid"; do sleep 0.05; done
    say "replica $1 (pid $pid) killed with SIGKILL: no drain. nginx routes around it; its runs end"
    say "owner_lost within one heartbeat (5 s by default): the other replicas on this machine see its"
    say "process is gone (a replica on another machine waits server.ownerTimeoutSeconds + heartbeatSeconds, 35 s)."
    say "Bring it back with: deploy/cluster.sh restart $1"
}

cmd_restart() {
    replica_arg "${1:-}"
    local k=$1 started=$SECONDS
    [[ -x $bin ]] || die "$bin is not an executable (set AGENTD_BIN)"
    if alive_pid "$k" >/dev/null; then
        say "replica $k: SIGTERM, draining (up to ${drain} s)"
        stop_replica "$k"
        say "replica $k stopped after $((SECONDS - started)) s"
    fi
    start_replica "$k"
    wait_ready "$k" 60
    say "replica $k ready again on :$(port_of "$k") (pid $(alive_pid "$k"))"
}

cmd_stop() {
    local k pid pids=()
    load_shape
    # Every replica drains at once; nginx stays up meanwhile so open streams finish through it.
    for ((k = 1; k <= replicas; k++)); do
        if pid=$(alive_pid "$k"); then
            say "replica $k (pid $pid): SIGTERM"
            stop_replica "$k" &
            pids+=($!)
        fi
    done
    ((${#pids[@]} == 0)) || wait "${pids[@]}"
    if pid=$(nginx_pid); then
        # shellcheck disable=SC2046
        nginx $(nginx_args) -s quit
        while process_alive "$pid"; do sleep 0.1; done
        say "nginx stopped"
    fi
    rm -f "$dir/cluster" "$dir"/agentd-*.pid
    say "cluster stopped (logs kept in $dir/)"
}

command=start
if [[ $# -gt 0 && $1 != -* ]]; then
    command=$1
    shift
fi
case $command in
start)
    while getopts 'n:p:h' opt; do
        case $opt in
        n) replicas=$OPTARG ;;
        p) lb_port=$OPTARG ;;
        h) usage 0 ;;
        *) usage 2 >&2 ;;
        esac
    done
    [[ $replicas =~ ^[0-9]+$ ]] || die "-n takes a number"
    cmd_start
    ;;
status) cmd_status ;;
stop) cmd_stop ;;
kill) cmd_kill "${1:-}" ;;
restart) cmd_restart "${1:-}" ;;
help | -h | --help) usage 0 ;;
*) usage 2 >&2 ;;
esac
