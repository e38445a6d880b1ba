"""Runs a Python snippet of the README as a reader would paste it, against a test server.

Usage: readme_snippet.py NAME BASE_URL KEY

The snippet is the fenced ```python block right after the line `<!-- snippet: NAME -->` in
README.md. Its `http://127.0.0.1:8080` becomes BASE_URL and its `"Bearer KEY"` / `api_key="unused"`
the given key; nothing else is changed. Whatever it prints is printed.
"""

import pathlib
import sys

name, base_url, key = sys.argv[1:4]
readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
marker = f"<!-- snippet: {name} -->\n```python\n"
start = readme.index(marker) + len(marker)
code = readme[start : readme.index("\n```", start)]
code = code.replace("http://127.0.0.1:8080", base_url)
code = code.replace('"Bearer KEY"', f'"Bearer {key}"').replace('api_key="unused"', f'api_key="{key}"')
exec(compile(code, f"README.md snippet {name}", "exec"), {"__name__": "__main__"})
