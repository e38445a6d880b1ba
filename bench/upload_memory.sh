#!/usr/bin/env bash
# What uploads cost agentd (SPEC §11, issue 39): the resident memory of `agentd serve` around
# one 20 MiB `POST /v1/files` (VmRSS / VmHWM from /proc), then ten 20 MiB uploads at once while
# a small request (`GET /v1/models`) is timed every 50 ms. SQLite store in a temporary dir.
# Usage: bench/upload_memory.sh [path/to/agentd]   (default target/debug/agentd)
set -euo pipefail
agentd="$(realpath "${1:-target/debug/agentd}")"
dir="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000))
mkdir "$dir/agents"
printf -- '---\ndescription: chat\nmodels: llm/m\n---\nHi.\n' >"$dir/agents/chat.ai"
cat >"$dir/agentd.json" <<JSON
{"providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}},
 "agents": ["agents"], "server": {"listen": "127.0.0.1:$port"},
 "store": {"url": "sqlite://agentd.db"}}
JSON
(cd "$dir" && HOME="$dir" exec "$agentd" serve --config agentd.json >"$dir/log" 2>&1) &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break; sleep 0.1; done
kib() { awk -v f="$1:" '$1 == f {print $2}' "/proc/$pid/status"; }
head -c $((15 * 1024 * 1024)) /dev/urandom >"$dir/big.bin"
base64 -w0 "$dir/big.bin" >"$dir/big.txt"   # 20 MiB of text: an allowed type whatever the bytes
idle=0
for _ in $(seq 20); do
  t=$(curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/v1/models")
  idle=$((idle + $(awk -v t="$t" 'BEGIN {printf "%d", t * 1000}')))
done
echo "GET /v1/models idle: mean $((idle / 20)) ms"
rssa=$(kib VmRSS); hwma=$(kib VmHWM)
# One upload first (the store's first large write grows SQLite's cache), then the measured one.
curl -sf "http://127.0.0.1:$port/v1/files" -F purpose=user_data -F "file=@$dir/big.txt;type=text/plain" >/dev/null
rss0=$(kib VmRSS); hwm0=$(kib VmHWM)
echo "first 20 MiB upload: VmRSS ${rssa} -> ${rss0} KiB, VmHWM ${hwma} -> ${hwm0} KiB (peak +$(( (hwm0 - hwma) / 1024 )) MiB)"
curl -sf "http://127.0.0.1:$port/v1/files" -F purpose=user_data -F "file=@$dir/big.txt;type=text/plain" >/dev/null
rss1=$(kib VmRSS); hwm1=$(kib VmHWM)
echo "second 20 MiB upload: VmRSS ${rss0} -> ${rss1} KiB, VmHWM ${hwm0} -> ${hwm1} KiB (peak +$(( (hwm1 - hwm0) / 1024 )) MiB)"
# Ten at once, a small request timed meanwhile.
uploads=()
for n in $(seq 10); do
  curl -sf "http://127.0.0.1:$port/v1/files" -F purpose=user_data -F "file=@$dir/big.txt;type=text/plain;filename=f$n.txt" >/dev/null &
  uploads+=($!)
done
running() { for p in "${uploads[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
slowest=0; count=0; sum=0
started=$(date +%s%N)
while running; do
  t=$(curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/v1/models")
  ms=$(awk -v t="$t" 'BEGIN {printf "%d", t * 1000}')
  count=$((count + 1)); sum=$((sum + ms)); [ "$ms" -gt "$slowest" ] && slowest=$ms
  sleep 0.05
done
wait "${uploads[@]}"
took=$(( ($(date +%s%N) - started) / 1000000 ))
rss2=$(kib VmRSS); hwm2=$(kib VmHWM)
echo "ten 20 MiB uploads at once took ${took} ms: VmRSS ${rss1} -> ${rss2} KiB, VmHWM ${hwm1} -> ${hwm2} KiB (peak +$(( (hwm2 - hwm1) / 1024 )) MiB)"
echo "GET /v1/models meanwhile: ${count} requests, mean $((sum / (count > 0 ? count : 1))) ms, slowest ${slowest} ms"
