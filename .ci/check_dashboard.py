#!/usr/bin/env python3
"""Checks that deploy/grafana/agentd.json parses and that every metric its expressions name is one
agentd exports (a `# TYPE` line of the scrape saved by the metrics_scrape test)."""
import json
import re
import sys

dashboard_path, scrape_path = sys.argv[1], sys.argv[2]
dashboard = json.load(open(dashboard_path))
exported = set(re.findall(r"^# TYPE (\S+) ", open(scrape_path).read(), re.M))
problems = []
expressions = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
if not expressions:
    problems.append("the dashboard has no expressions")
for expr in expressions:
    for name in re.findall(r"\b((?:agentd|ai_agent)_[a-zA-Z0-9_]+)", expr):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in exported and base not in exported:
            problems.append(f"{name} (in `{expr}`) is not exported")
for problem in problems:
    print(f"dashboard: {problem}")
print(f"dashboard: {len(expressions)} expressions checked against {len(exported)} exported metrics")
sys.exit(1 if problems else 0)
