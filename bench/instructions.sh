#!/usr/bin/env bash
# Instructions agentd executes per request (scenario 1's non-streaming single-turn agent), counted
# by valgrind's callgrind: all of agentd's threads (handler, session, recorder, SQLite), none of
# the client's or the mock's. Unlike times on a shared box the count repeats run to run, so two
# builds can be compared exactly:
#   bench/instructions.sh                                  # target/release/agentd
#   bench/instructions.sh /path/to/old/agentd target/release/agentd
#   AGENTD_INSTR_STREAM=1 bench/instructions.sh        # streamed: 64 chunks from upstream and to client
#   bench/instructions.sh relay target/release/agentd  # the do-nothing relay (bench/load/src/relay.rs) beside agentd
#   AGENTD_INSTR_STREAM=1 AGENTD_INSTR_GAP=5 bench/instructions.sh  # chunks 5 ms apart: none queue together
# Needs valgrind and python3; builds the bench driver (for its mock upstream) if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export CARGO_TARGET_DIR="$root/target"
warmup=${AGENTD_INSTR_WARMUP:-300}
requests=${AGENTD_INSTR_REQUESTS:-2000}
stream=${AGENTD_INSTR_STREAM:-0}
# Milliseconds between the upstream's chunks of a streamed answer: 0 sends them at once (they
# queue and agentd merges the deltas waiting together), a few ms paces them as a model does.
gap=${AGENTD_INSTR_GAP:-0}
binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=("$CARGO_TARGET_DIR/release/agentd")
[[ -x "$CARGO_TARGET_DIR/release/agentd-bench" ]] ||
  cargo build --release --quiet --manifest-path bench/load/Cargo.toml

work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; [[ -n "${AGENTD_INSTR_KEEP:-}" ]] && echo "kept $work" >&2 || rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/agents"
# agent NAME MODEL DESCRIPTION: a single-turn text agent on MODEL.
agent() {
  printf -- '---\ndescription: %s\nmodels: [%s]\nfinalization: text\nmaxTurns: 10\nmaxRetries: 1\n---\nYou answer.\n' \
    "$3" "$2" >"$work/agents/$1.ai"
}
agent single whole/fb0-c1-g0 bench
agent streamed "llm/fb0-c64-g$gap" "bench, streamed"
"$CARGO_TARGET_DIR/release/agentd-bench" mock --listen 127.0.0.1:19290 >"$work/mock.log" 2>&1 &
pids+=($!)

# Sequential keep-alive requests from one Python connection: the client's cost is not agentd's.
# drive COUNT MODEL
drive() {
  python3 - "$1" "$stream" "$2" <<'PY'
import http.client, json, sys
conn = http.client.HTTPConnection("127.0.0.1", 19280)
streamed = sys.argv[2] == "1"
body = json.dumps({"model": sys.argv[3], "stream": streamed,
                   "messages": [{"role": "user", "content": "Say something."}]})
for _ in range(int(sys.argv[1])):
    conn.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200 or (streamed and b"[DONE]" not in data):
        sys.exit(f"HTTP {response.status}: {data[:200]!r}")
PY
}

total_of() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }

echo "| agentd binary | instructions per $([[ $stream == 1 ]] && echo "streamed request (64 chunks, ${gap} ms apart)" || echo request) | requests counted |"
echo "|---|---|---|"
for binary in "${binaries[@]}"; do
  rm -f "$work"/store.db* "$work"/callgrind.*
  cat > "$work/agentd.json" <<JSON
{"agents":["$work/agents"],
 "providers":{"whole":{"type":"openai-compatible","baseUrl":"http://127.0.0.1:19290/v1","stream":false},
              "llm":{"type":"openai-compatible","baseUrl":"http://127.0.0.1:19290/v1"}},
 "server":{"listen":"127.0.0.1:19280"},
 "store":{"url":"sqlite://$work/store.db"}}
JSON
  # The relay forwards the mock's own model names; agentd maps its agents' names to them.
  if [[ $binary == relay ]]; then
    command=("$CARGO_TARGET_DIR/release/agentd-bench" relay --listen 127.0.0.1:19280 --upstream 127.0.0.1:19290)
    model=$([[ $stream == 1 ]] && echo "fb0-c64-g$gap" || echo fb0-c1-g0)
  else
    command=("$binary" serve --config "$work/agentd.json")
    model=$([[ $stream == 1 ]] && echo streamed || echo single)
  fi
  valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.%p" "${command[@]}" >"$work/agentd.log" 2>&1 &
  agentd=$!
  for _ in $(seq 1 600); do
    curl -s -o /dev/null http://127.0.0.1:19280/health && break
    sleep 0.2
  done
  drive "$warmup" "$model"
  sleep 1
  callgrind_control --dump=warmup "$agentd" >/dev/null 2>&1
  drive "$requests" "$model"
  sleep 1 # the recorder's last batch
  callgrind_control --dump=measured "$agentd" >/dev/null 2>&1
  kill -TERM "$agentd" # SIGINT is ignored by background jobs of a script; agentd handles both
  wait "$agentd" || true
  measured=$(grep -l '^desc: Trigger: .*measured' "$work"/callgrind.* | head -1)
  echo "| $binary | $(( $(total_of "$measured") / requests )) | $requests |"
done
