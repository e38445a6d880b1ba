#!/usr/bin/env bash
# Codex CLI's time to first output through agentd (bench/README.md, "Codex transports"): the same
# Codex (pinned in scripts/test, under .ci/codex) against the same agentd and mock upstream,
# configured three ways — the built-in OpenAI provider at agentd's base URL (its default
# transport: a WebSocket on /v1/responses first), a `model_providers` entry with
# `wire_api = "responses"` (plain HTTP, no WebSocket), and that entry with
# `supports_websockets = true`. Prints one markdown table.
#   bench/codex.sh                      # 10 rounds, agentd from target/release (built here)
#   ROUNDS=3 AGENTD=target/debug/agentd bench/codex.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
rounds=${ROUNDS:-10}
codex="$root/.ci/codex/node_modules/.bin/codex"
[[ -x $codex ]] || { echo "Codex is missing: scripts/test --setup-only installs it" >&2; exit 1; }
if [[ -n ${AGENTD:-} ]]; then
  AGENTD=$(realpath "$AGENTD")
else
  cargo build --release --quiet --bin agentd
  AGENTD="$CARGO_TARGET_DIR/release/agentd"
fi
bench=${AGENTD_BENCH:-}
if [[ -z $bench ]]; then
  cargo build --release --quiet --manifest-path bench/load/Cargo.toml
  bench="$CARGO_TARGET_DIR/release/agentd-bench"
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
mock_port=19290
agentd_port=19291

"$bench" mock --listen "127.0.0.1:$mock_port" >"$work/mock.log" 2>&1 &
pids+=($!)
mkdir -p "$work/agents"
# A plain answer after 20 ms in 8 chunks: the model's time is the same for every transport.
cat >"$work/agents/coder.ai" <<'AI'
---
description: bench
models: [llm/fb20-c8-g1]
finalization: text
---
You answer.
AI
cat >"$work/agentd.json" <<JSON
{"providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:$mock_port/v1"}},
 "agents": ["agents"], "auth": {"keys": [{"key": "bench-key", "admin": true}]},
 "server": {"listen": "127.0.0.1:$agentd_port"}, "store": {"url": "sqlite://$work/store.db"}}
JSON
(cd "$work" && RUST_LOG=warn exec "$AGENTD" serve --config agentd.json) >"$work/agentd.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$agentd_port/health" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$agentd_port/health" >/dev/null || { cat "$work/agentd.log" >&2; exit 1; }

base="http://127.0.0.1:$agentd_port/v1"
common='model = "coder"
approval_policy = "never"'
# The built-in provider takes its key from `codex login`.
mkdir -p "$work/default" "$work/http" "$work/socket"
printf '%s\nopenai_base_url = "%s"\n' "$common" "$base" >"$work/default/config.toml"
echo bench-key | CODEX_HOME="$work/default" "$codex" login --with-api-key >/dev/null 2>&1
provider() {
  printf '%s\nmodel_provider = "agentd"\n[model_providers.agentd]\nname = "agentd"\nbase_url = "%s"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n%s' \
    "$common" "$base" "$1"
}
provider '' >"$work/http/config.toml"
provider 'supports_websockets = true
' >"$work/socket/config.toml"

echo "## Codex $("$codex" --version | sed 's/codex-cli //') through agentd — commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs"
echo
python3 bench/codex_first_output.py "$codex" "$rounds" \
  "built-in provider (WebSocket first)=$work/default" \
  "model_providers, wire_api responses (HTTP)=$work/http" \
  "model_providers, supports_websockets = true=$work/socket"
