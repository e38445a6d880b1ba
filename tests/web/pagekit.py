"""What the page scripts share: the system's Chromium, a page at desktop size whose script
errors are collected, axe-core's accessibility check and sending a message from the keyboard.
The scripts run as `python tests/web/SCRIPT.py`, so this folder is on their import path."""
import json
import shutil
import sys
from pathlib import Path

TIMEOUT = 20_000
DESKTOP = {"width": 1280, "height": 800}
AXE = Path(__file__).resolve().parents[1] / "node" / "node_modules" / "axe-core" / "axe.min.js"


def chromium_path():
    for candidate in ("chromium", "chromium-browser"):
        found = shutil.which(candidate)
        if found:
            return found
    sys.exit("Chromium is missing: run scripts/test --setup-only")


def launch(playwright):
    """Headless Chromium from the system (Debian's package, installed by scripts/test)."""
    return playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])


def open_page(browser, viewport=DESKTOP):
    """A new page and the list its script errors are collected in."""
    page = browser.new_page(viewport=viewport)
    errors = []
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    return page, errors


def send(page, text):
    """Types a message and sends it with Enter, as a keyboard user does."""
    page.fill("#prompt", text)
    page.focus("#prompt")
    page.keyboard.press("Enter")


def axe(page, where):
    """axe-core (npm, injected through DevTools: the page's CSP rightly refuses inline script)
    finds no violation on what the page shows now."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    result = page.evaluate(
        "async () => { const r = await axe.run(document); return r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' ') + ' ' + n.failureSummary).slice(0, 3)})); }"
    )
    assert not result, f"axe violations ({where}): {json.dumps(result, indent=1)}"
    print(f"axe {where} ok")
