"""Files a tool gave the model, on the page (SPEC §11), in headless Chromium on a keyless
loopback server: an agent whose MCP tool answers with an image runs from the page, and the
tool's details show the image as a thumbnail under its result, its bytes read through the Files
API. Prints `tool files ok`; any failure raises.

Usage: tool_files.py BASE_URL SCREENSHOT_DIR AGENT
"""
import os
import sys

from playwright.sync_api import expect, sync_playwright

from pagekit import launch, open_page, send, TIMEOUT

BASE, SHOTS, AGENT = sys.argv[1:4]


def main():
    with sync_playwright() as p:
        browser = launch(p)
        page, errors = open_page(browser)
        page.goto(BASE + "/")
        expect(page.locator(f"#agent option[value={AGENT}]")).to_have_count(1, timeout=TIMEOUT)
        page.select_option("#agent", AGENT)
        send(page, "Look at home")
        answer = page.locator(".message.assistant").last
        expect(answer).to_contain_text("A single pixel.", timeout=TIMEOUT)
        tool = answer.locator("details.tool")
        expect(tool).to_have_count(1)
        tool.locator("summary").click()
        image = tool.locator(".message-files img.thumb[alt='screenshot-1.png']")
        expect(image).to_be_visible(timeout=TIMEOUT)
        page.wait_for_function(
            "() => { const i = document.querySelector(\"details.tool img.thumb\"); return i && i.complete && i.naturalWidth > 0; }",
            timeout=TIMEOUT,
        )
        page.screenshot(path=os.path.join(SHOTS, "tool-files.png"))
        assert not errors, errors
        browser.close()
    print("tool files ok")


if __name__ == "__main__":
    main()
