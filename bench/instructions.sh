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
#   AGENTD_INSTR_CONFIG=example bench/instructions.sh  # as shipped: config/agentd.json (its `chat` agent, its
#                                     # streaming provider, its SQLite recording), RUST_LOG unset
#   AGENTD_INSTR_PROMPT_TOKENS=10000 bench/instructions.sh   # a ~10k-token user message (1 token ≈ "word ")
#   AGENTD_INSTR_BAD_KEY=1 bench/instructions.sh  # every request sends a wrong key: the cost of a 401
#   AGENTD_INSTR_TOOLS=3 bench/instructions.sh    # a 3-turn run: 2 tool calls (argument deltas) then text
#   AGENTD_INSTR_GOVERNED=1 bench/instructions.sh # a governed run: a key with every limit, a cached agent
#                                     # (each prompt differs: a miss and a cache write), approvals configured
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
config=${AGENTD_INSTR_CONFIG:-bench}
prompt_tokens=${AGENTD_INSTR_PROMPT_TOKENS:-0}
bad_key=${AGENTD_INSTR_BAD_KEY:-0}
tools=${AGENTD_INSTR_TOOLS:-0}
governed=${AGENTD_INSTR_GOVERNED:-0}
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
# A tool loop: the mock calls the agent's first tool (a REST tool on agentd's own /health) until
# the conversation holds TOOLS-1 results, streaming each call's arguments as deltas.
printf -- '---\ndescription: bench, tools\nmodels: [llm/script%s]\nfinalization: text\nmaxTurns: 20\ntools: [rest__agentd_health]\n---\nYou answer.\n' \
  "$tools" >"$work/agents/tools.ai"
# Governed: cached answers, a tool whose calls wait for approval (offered to the model, never
# called by it here), on the same upstream shapes as `single` and `streamed`.
for shape in single:whole/fb0-c1-g0 streamed:llm/fb0-c64-g$gap; do
  printf -- '---\ndescription: bench, governed\nmodels: [%s]\nfinalization: text\nmaxTurns: 10\ncache: 1h\ntools: [rest__agentd_health]\napprove: [rest__agentd_health]\n---\nYou answer.\n' \
    "${shape#*:}" >"$work/agents/governed-${shape%%:*}.ai"
done
"$CARGO_TARGET_DIR/release/agentd-bench" mock --listen 127.0.0.1:19290 >"$work/mock.log" 2>&1 &
pids+=($!)

# Sequential keep-alive requests from one Python connection: the client's cost is not agentd's.
# drive COUNT MODEL
drive() {
  python3 - "$1" "$stream" "$2" "$prompt_tokens" "$bad_key" "$governed" <<'PY'
import http.client, json, sys
conn = http.client.HTTPConnection("127.0.0.1", 19280)
streamed = sys.argv[2] == "1"
tokens = int(sys.argv[4])
bad_key = sys.argv[5] == "1"
governed = sys.argv[6] == "1"
prompt = "word " * tokens if tokens else "Say something."
body = json.dumps({"model": sys.argv[3], "stream": streamed,
                   "messages": [{"role": "user", "content": prompt}]})
for i in range(int(sys.argv[1])):
    headers = {"content-type": "application/json"}
    if bad_key:
        headers["authorization"] = f"Bearer wrong-key-{i}"
    if governed:
        headers["authorization"] = "Bearer bench-governed-key"
        # A new prompt each time: the cache misses and stores the answer.
        body = json.dumps({"model": sys.argv[3], "stream": streamed,
                           "messages": [{"role": "user", "content": f"{prompt} #{sys.argv[1]}-{i}"}]})
    try:
        conn.request("POST", "/v1/chat/completions", body, headers)
        response = conn.getresponse()
        data = response.read()
    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
        if not bad_key:
            raise
        # agentd closes a connection after a wrong key: the flood reconnects, as a client does.
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", 19280)
        conn.request("POST", "/v1/chat/completions", body, headers)
        response = conn.getresponse()
        data = response.read()
    if bad_key and response.getheader("connection", "").lower() == "close":
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", 19280)
    if bad_key:
        if response.status != 401:
            sys.exit(f"a wrong key got HTTP {response.status}: {data[:200]!r}")
        continue
    if response.status != 200 or (streamed and b"[DONE]" not in data):
        sys.exit(f"HTTP {response.status}: {data[:200]!r}")
PY
}

total_of() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }

shape="$([[ $stream == 1 ]] && echo "streamed request (64 chunks, ${gap} ms apart)" || echo request)"
[[ $config == example ]] && shape+=", config/agentd.json"
[[ $prompt_tokens != 0 ]] && shape+=", ~$prompt_tokens-token prompt"
[[ $bad_key == 1 ]] && shape+=", wrong key (401)"
[[ $tools != 0 ]] && shape+=", $tools turns with tool calls"
[[ $governed == 1 ]] && shape+=", governed (key limits, cache, approvals)"
echo "| agentd binary | instructions per $shape | requests counted |"
echo "|---|---|---|"
for binary in "${binaries[@]}"; do
  rm -f "$work"/store.db* "$work"/callgrind.*
  cat > "$work/agentd.json" <<JSON
{"agents":["$work/agents"],
 "providers":{"whole":{"type":"openai-compatible","baseUrl":"http://127.0.0.1:19290/v1","stream":false},
              "llm":{"type":"openai-compatible","baseUrl":"http://127.0.0.1:19290/v1"}},
 "restTools":{"agentd_health":{"description":"GET /health on agentd itself.","url":"http://127.0.0.1:19280/health"}},
 "server":{"listen":"127.0.0.1:19280"},
 "store":{"url":"sqlite://$work/store.db"}}
JSON
  upstream_model=$([[ $stream == 1 ]] && echo "fb0-c64-g$gap" || echo fb0-c1-g0)
  [[ $tools != 0 ]] && upstream_model="script$tools"
  env=(AGENTD_LISTEN=127.0.0.1:19280)
  [[ $bad_key == 1 ]] && env+=(AGENTD_ADMIN_KEY=bench-admin-key)
  # The relay forwards the mock's own model names; agentd maps its agents' names to them.
  if [[ $binary == relay ]]; then
    command=("$CARGO_TARGET_DIR/release/agentd-bench" relay --listen 127.0.0.1:19280 --upstream 127.0.0.1:19290)
    model=$([[ $stream == 1 ]] && echo "fb0-c64-g$gap" || echo fb0-c1-g0)
  else
    command=("$binary" serve --config "$work/agentd.json")
    model=$([[ $stream == 1 ]] && echo streamed || echo single)
    [[ $tools != 0 ]] && model=tools
    [[ $governed == 1 ]] && model=$([[ $stream == 1 ]] && echo governed-streamed || echo governed-single)
  fi
  if [[ $config == example && $binary != relay ]]; then
    # As a user runs it: the example config, its `chat` agent on its streaming provider.
    command=("$binary" serve --config "$root/config/agentd.json")
    env+=(AGENTD_LLM_BASE_URL=http://127.0.0.1:19290/v1 "AGENTD_LLM_MODEL=$upstream_model"
      "AGENTD_DATABASE_URL=sqlite://$work/store.db")
    model=chat
  fi
  [[ $binary == relay ]] && model=$upstream_model
  [[ $binary != relay && $config == bench && $bad_key == 1 ]] &&
    sed -i 's|"server":|"auth":{"keys":[{"key":"bench-admin-key","admin":true}]},\n "server":|' "$work/agentd.json"
  [[ $binary != relay && $governed == 1 ]] &&
    sed -i 's|"server":|"auth":{"keys":[{"key":"bench-governed-key","id":"governed","limits":{"requestsPerMinute":10000000,"concurrentRuns":64,"tokensPerDay":1000000000000,"costUsdPerDay":1000000}}]},\n "server":|' "$work/agentd.json"
  env "${env[@]}" valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.%p" "${command[@]}" >"$work/agentd.log" 2>&1 &
  agentd=$!
  pids+=("$agentd") # stopped by the trap too when a drive fails
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
