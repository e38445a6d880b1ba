#!/usr/bin/env bash
# agentd's end-to-end benchmark: builds agentd, the MCP test server and the bench driver in
# release, raises the open-file limit, runs scenarios 1-4, 7, 8 and 9's idle RSS (6 with
# --postgres URL, 9's soak with --only 9; see bench/README.md) through agentd and direct to the
# mock (and the relay and nginx), same run, and scenario 5 (store_events), and prints one
# markdown report. Arguments go to `agentd-bench run` (e.g. --rates 100,1000 --step-seconds 2
# --only 1,2; --no-nginx without nginx).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export CARGO_TARGET_DIR="$root/target"

# Scenario 3 needs two descriptors per open stream in agentd: use the hard limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || echo "could not raise the open-file limit (now $(ulimit -n))" >&2

cargo build --release --quiet --bin agentd --example mcp_test_server
cargo build --release --quiet --manifest-path bench/load/Cargo.toml

echo "# agentd benchmark — commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo '+dirty'), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs"
echo
"$CARGO_TARGET_DIR/release/agentd-bench" run --target "$CARGO_TARGET_DIR" "$@"

if [[ "${AGENTD_BENCH_SKIP_STORE:-}" != 1 ]]; then
  echo "## 5. Store write path (cargo bench --bench store_events -- --events ${AGENTD_BENCH_STORE_EVENTS:-20000})"
  echo
  cargo bench --quiet --bench store_events -- --events "${AGENTD_BENCH_STORE_EVENTS:-20000}" 2>&1 | grep -E '^\|' || echo "store_events failed (is PostgreSQL running at 127.0.0.1:5432?)"
fi
