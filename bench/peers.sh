#!/usr/bin/env bash
# Scenario 1 with other gateways measured beside agentd, the do-nothing relay and the mock
# itself, in one run of the same driver on the same box (bench/README.md, "Peers"): LiteLLM's
# proxy (PyPI) and the Portkey AI Gateway (npm).
# The first run installs them into bench/.peers/ (not committed): LiteLLM into venv/, Portkey
# into portkey/node_modules.
#   bench/peers.sh                                  # the default ladder, from 10 req/s
#   PEERS=portkey bench/peers.sh --rates 10,50      # one of them; arguments go to `agentd-bench run`
#   LITELLM_WORKERS=1 bench/peers.sh --rates 10,50
set -euo pipefail
cd "$(dirname "$0")/.."
peers=",${PEERS:-litellm,portkey},"
work=$(mktemp -d)
pids=()
# Each gateway runs in its own process group (setsid): its workers go with it.
cleanup() {
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# wait_up NAME PID URL LOG: until URL answers (at most 150 s), or fail with the log if PID died.
wait_up() {
  for _ in $(seq 1 300); do
    curl -sf "$3" >/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { cat "$4" >&2; echo "$1 exited" >&2; exit 1; }
    sleep 0.5
  done
  cat "$4" >&2; echo "$1 did not answer $3" >&2; exit 1
}
run_args=()

if [[ $peers == *,litellm,* ]]; then
  version=${LITELLM_VERSION:-1.106.2}
  workers=${LITELLM_WORKERS:-$(nproc)}
  port=19060
  venv=bench/.peers/venv
  installed=$("$venv/bin/pip" show litellm 2>/dev/null | sed -n 's/^Version: //p' || true)
  if [[ ! -x $venv/bin/litellm || $installed != "$version" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "litellm[proxy]==$version"
  fi
  # `single` is the mock's one-chunk answer, called non-streaming, as agentd's `single` agent is
  # (bench/load/src/procs.rs); the mock is the one `agentd-bench run` starts on 127.0.0.1:19090.
  cat >"$work/litellm.yaml" <<'YAML'
model_list:
  - model_name: single
    litellm_params:
      model: openai/fb0-c1-g0
      api_base: http://127.0.0.1:19090/v1
      api_key: none
litellm_settings:
  telemetry: false
YAML
  # No master key (nothing leaves 127.0.0.1), the cost map from the package, not the network.
  LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY=true LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=ERROR \
    setsid "$venv/bin/litellm" --config "$work/litellm.yaml" --host 127.0.0.1 --port "$port" \
    --num_workers "$workers" >"$work/litellm.log" 2>&1 &
  pids+=($!)
  wait_up LiteLLM "$!" "http://127.0.0.1:$port/health/liveliness" "$work/litellm.log"
  echo "LiteLLM $version, $workers worker(s), on 127.0.0.1:$port" >&2
  run_args+=(--peer "litellm=127.0.0.1:$port")
fi

if [[ $peers == *,portkey,* ]]; then
  version=${PORTKEY_VERSION:-1.15.2}
  port=19061
  dir=bench/.peers/portkey
  # @hono/node-server 1.19.19 (the newest, which npm would pick for Portkey's ^1.3.3) and 1.14.2
  # hand Portkey the upstream fetch() response's immutable headers: every streamed answer fails
  # with "TypeError: immutable" (Portkey-AI/gateway#1389); 1.13.8 (the last 1.13) works. Its
  # postinstall (patch-package) has no patches in the published package: --ignore-scripts.
  package="{\"private\": true, \"dependencies\": {\"@portkey-ai/gateway\": \"$version\"}, \"overrides\": {\"@hono/node-server\": \"1.13.8\"}}"
  server=$dir/node_modules/@portkey-ai/gateway/build/start-server.js
  if [[ ! -f $server || $(cat "$dir/package.json" 2>/dev/null) != "$package" ]]; then
    mkdir -p "$dir"
    echo "$package" >"$dir/package.json"
    (cd "$dir" && npm install --no-audit --no-fund --omit=dev --ignore-scripts --loglevel=error)
  fi
  # Its server listens on every interface (no host option): node is made to listen on
  # 127.0.0.1 only.
  cat >"$work/loopback.cjs" <<'JS'
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && typeof args[1] !== 'string') {
    args.splice(1, args[1] === undefined ? 1 : 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
JS
  # One node process (Portkey has no workers option); --headless: no web UI, no log stream.
  NODE_ENV=production setsid node --require "$work/loopback.cjs" "$server" --port="$port" --headless \
    >"$work/portkey.log" 2>&1 &
  pids+=($!)
  wait_up Portkey "$!" "http://127.0.0.1:$port/" "$work/portkey.log"
  echo "Portkey AI Gateway $version, one node process, on 127.0.0.1:$port" >&2
  # Portkey routes by headers and passes `model` through: it is sent the mock's own model
  # names, as the relay is, with the provider and upstream on every request.
  run_args+=(--peer-forward "portkey=127.0.0.1:$port"
    --peer-header "portkey:x-portkey-provider=openai"
    --peer-header "portkey:x-portkey-custom-host=http://127.0.0.1:19090/v1"
    --peer-header "portkey:authorization=Bearer none")
fi

[[ ${#run_args[@]} -gt 0 ]] || { echo "PEERS=${PEERS:-}: expected litellm and/or portkey" >&2; exit 1; }
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(--rates 10,25,50,100,200,500,1000,2000,4000,8000,16000,32000)
AGENTD_BENCH_SKIP_STORE=1 bench/run.sh --only 1 "${run_args[@]}" "${args[@]}"
