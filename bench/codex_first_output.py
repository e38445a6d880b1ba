#!/usr/bin/env python3
"""Codex CLI's time to first output through agentd, one transport per Codex home (bench/codex.sh).

Runs `codex exec --json` ROUNDS times for each home given as NAME=CODEX_HOME (alternating, so
the box's drift hits every transport alike) and prints, per transport, the median and the
spread of the time from the process start to its first agent message line and to its exit,
plus the failed WebSocket connections Codex logged. Usage:
    codex_first_output.py CODEX ROUNDS NAME=HOME [NAME=HOME ...]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def one_run(codex, home, workdir):
    """Returns (seconds to the first agent message, seconds to exit, WebSocket failures logged)."""
    env = dict(os.environ, CODEX_HOME=home, OPENAI_API_KEY="bench-key")
    started = time.monotonic()
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            [codex, "exec", "--json", "--skip-git-repo-check", "Say hello"],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        first = None
        for line in proc.stdout:
            if first is None and is_agent_message(line):
                first = time.monotonic() - started
        code = proc.wait()
        total = time.monotonic() - started
        stderr.seek(0)
        log = stderr.read().decode(errors="replace")
    if code != 0 or first is None:
        sys.exit(f"codex exec failed ({code}) with CODEX_HOME={home}:\n{log}")
    return first, total, log.count("failed to connect to Responses WebSocket")


def is_agent_message(line):
    try:
        event = json.loads(line)
    except ValueError:
        return False
    item = event.get("item") or {}
    return event.get("type") == "item.completed" and item.get("type") == "agent_message"


def summary(values):
    ordered = sorted(values)
    return f"{statistics.median(ordered) * 1000:7.0f} ms (min {ordered[0] * 1000:.0f}, max {ordered[-1] * 1000:.0f})"


def main():
    codex, rounds, homes = sys.argv[1], int(sys.argv[2]), [a.rsplit("=", 1) for a in sys.argv[3:]]
    results = {name: [] for name, _ in homes}
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(rounds):
            for name, home in homes:
                results[name].append(one_run(codex, home, workdir))
    print(f"| transport | first agent message, median of {rounds} | process exit, median | WebSocket failures logged per run |")
    print("|---|---|---|---|")
    for name, runs in results.items():
        firsts, totals, sockets = zip(*runs)
        print(f"| {name} | {summary(firsts)} | {summary(totals)} | {max(sockets)} |")


if __name__ == "__main__":
    main()
