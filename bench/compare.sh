#!/usr/bin/env bash
# Scenario 1 (and anything else `agentd-bench run` does) for two commits of agentd in one run:
# the AFTER build is "agentd", the BEFORE build climbs the same rate ladder beside it as
# "before" (`--compare`), each on a store of its own (a fresh PostgreSQL database each with
# --postgres). Both commits are built in release from git worktrees outside the repo, so the
# checkout's own edits are never measured.
#
#   bench/compare.sh BEFORE [AFTER] [-- agentd-bench run arguments]
#   bench/compare.sh b196ba0 HEAD -- --only 1 --postgres postgres://postgres@127.0.0.1:5432
#
# Environment: AGENTD_COMPARE_TARGET (the shared target dir, default /tmp/agentd-bench-target),
# AGENTD_COMPARE_WORKTREES (default /tmp: worktrees /tmp/agentd-before and /tmp/agentd-after,
# removed at the end unless AGENTD_COMPARE_KEEP=1). Builds run under `nice`, one at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

before=${1:?usage: bench/compare.sh BEFORE [AFTER] [-- agentd-bench run arguments]}
shift
after=HEAD
if [[ $# -gt 0 && $1 != -- ]]; then
  after=$1
  shift
fi
[[ ${1:-} == -- ]] && shift
before_sha=$(git rev-parse --short "$before^{commit}")
after_sha=$(git rev-parse --short "$after^{commit}")

export CARGO_TARGET_DIR=${AGENTD_COMPARE_TARGET:-/tmp/agentd-bench-target}
trees=${AGENTD_COMPARE_WORKTREES:-/tmp}
mkdir -p "$CARGO_TARGET_DIR/compare"

# A worktree of COMMIT at DIR (reused when it is already there at that commit).
worktree() { # DIR COMMIT
  if [[ -d $1 ]] && [[ $(git -C "$1" rev-parse HEAD 2>/dev/null) == $(git rev-parse "$2^{commit}") ]]; then
    return
  fi
  [[ -d $1 ]] && git worktree remove --force "$1"
  git worktree add --detach "$1" "$2" >/dev/null
}
cleanup() {
  if [[ ${AGENTD_COMPARE_KEEP:-} != 1 ]]; then
    git -C "$root" worktree remove --force "$trees/agentd-before" 2>/dev/null || true
    git -C "$root" worktree remove --force "$trees/agentd-after" 2>/dev/null || true
  fi
}
trap cleanup EXIT

ulimit -n "$(ulimit -Hn)" 2>/dev/null || echo "could not raise the open-file limit (now $(ulimit -n))" >&2

worktree "$trees/agentd-before" "$before"
echo "building agentd $before_sha (before) in $trees/agentd-before" >&2
(cd "$trees/agentd-before" && nice cargo build --release --quiet --bin agentd)
cp "$CARGO_TARGET_DIR/release/agentd" "$CARGO_TARGET_DIR/compare/agentd-$before_sha"

worktree "$trees/agentd-after" "$after"
echo "building agentd $after_sha (after) in $trees/agentd-after" >&2
(cd "$trees/agentd-after" && nice cargo build --release --quiet --bin agentd --example mcp_test_server)
nice cargo build --release --quiet --manifest-path bench/load/Cargo.toml

echo "# agentd benchmark — agentd $after_sha against $before_sha (\"before\"), bench $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- bench/load || echo '+dirty'), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs"
echo
"$CARGO_TARGET_DIR/release/agentd-bench" run --target "$CARGO_TARGET_DIR" \
  --compare "before-$before_sha=$CARGO_TARGET_DIR/compare/agentd-$before_sha" "$@"
