#!/usr/bin/env bash
# Instructions an idle agentd executes per second (example config, nothing requested), counted by
# valgrind's callgrind over all its threads: the cost of its background loops (webhook outbox,
# schedules, retention, replica heartbeat). Counts repeat run to run, unlike times on a shared box:
#   bench/idle_instructions.sh                      # target/release/agentd
#   bench/idle_instructions.sh /tmp/old/agentd target/release/agentd
#   IDLE_SECONDS=60 bench/idle_instructions.sh      # a longer window (default 30 s)
#   IDLE_KEEP=1 bench/idle_instructions.sh          # keep the callgrind file to read further
# It dumps the counters 5 s after /health answers (start-up done) and again IDLE_SECONDS later,
# and prints the difference per second, with the functions that took most of it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${IDLE_SECONDS:-30}
binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=("target/release/agentd")
port=${IDLE_PORT:-18931}
config=$(realpath config/agentd.json)
for binary in "${binaries[@]}"; do
  program=$(realpath "$binary")
  work=$(mktemp -d)
  (cd "$work" && exec env AGENTD_LISTEN=127.0.0.1:$port valgrind --tool=callgrind --trace-children=no \
    --callgrind-out-file="$work/callgrind.out" "$program" serve --config "$config" \
    >"$work/agentd.log" 2>&1) &
  pid=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/agentd.log" >&2; exit 1; }
    sleep 0.5
  done
  sleep 5
  callgrind_control --dump=start "$pid" >/dev/null
  sleep "$seconds"
  callgrind_control --dump=end "$pid" >/dev/null
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  last=$(ls -t "$work"/callgrind.out.* | head -1)
  total=$(callgrind_annotate "$last" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
  echo "$binary: $((total / seconds)) instructions per idle second ($total over ${seconds} s)"
  callgrind_annotate --inclusive=yes "$last" 2>/dev/null | grep -E "^ *[0-9,]+ \(" | sed -n 2,12p
  if [[ -n "${IDLE_KEEP:-}" ]]; then echo "kept $last" >&2; else rm -rf "$work"; fi
done
