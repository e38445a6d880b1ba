#!/usr/bin/env bash
# Scenario 1 with LiteLLM's proxy measured beside agentd, the do-nothing relay and the mock
# itself, in one run of the same driver on the same box (bench/README.md, "Peers").
# The first run installs LiteLLM from PyPI into bench/.peers/venv (not committed):
#   bench/peers.sh                                  # the default ladder, from 10 req/s
#   LITELLM_WORKERS=1 bench/peers.sh --rates 10,50  # arguments go to `agentd-bench run`
set -euo pipefail
cd "$(dirname "$0")/.."
version=${LITELLM_VERSION:-1.106.2}
workers=${LITELLM_WORKERS:-$(nproc)}
port=19060
venv=bench/.peers/venv
installed=$("$venv/bin/pip" show litellm 2>/dev/null | sed -n 's/^Version: //p' || true)
if [[ ! -x $venv/bin/litellm || $installed != "$version" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "litellm[proxy]==$version"
fi

work=$(mktemp -d)
litellm_pid=
# LiteLLM runs in its own process group (setsid): its workers go with it.
cleanup() { [[ -n $litellm_pid ]] && kill -- "-$litellm_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
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
litellm_pid=$!
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$port/health/liveliness" >/dev/null && break
  kill -0 "$litellm_pid" 2>/dev/null || { cat "$work/litellm.log" >&2; exit 1; }
  sleep 0.5
done
echo "LiteLLM $version, $workers worker(s), on 127.0.0.1:$port" >&2

args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(--rates 10,25,50,100,200,500,1000,2000,4000,8000,16000,32000)
AGENTD_BENCH_SKIP_STORE=1 bench/run.sh --only 1 --peer "litellm=127.0.0.1:$port" "${args[@]}"
