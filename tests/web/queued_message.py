"""A message sent from the page while an answer is coming (SPEC §13), in headless Chromium on a
keyless loopback server: it shows as queued under the thread, is answered after the first
answer (its own bubble and answer follow), and the stored history alternates. Prints
`queue ok`; any failure raises.

Usage: queued_message.py BASE_URL SCREENSHOT_DIR
"""
import os
import shutil
import sys

from playwright.sync_api import expect, sync_playwright

BASE, SHOTS = sys.argv[1:3]
TIMEOUT = 20_000


def chromium_path():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        sys.exit("Chromium is missing: run scripts/test --setup-only")
    return found


def send(page, text):
    page.fill("#prompt", text)
    page.focus("#prompt")
    page.keyboard.press("Enter")


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(BASE + "/")
        expect(page.locator("#agent option[value=chat]")).to_have_count(1, timeout=TIMEOUT)
        send(page, "first question")
        expect(page.locator("#stop")).to_be_visible(timeout=TIMEOUT)
        expect(page.locator(".message.assistant").last).to_contain_text("slow0", timeout=TIMEOUT)
        send(page, "second question")
        queued = page.locator("#queued")
        expect(queued).to_be_visible(timeout=TIMEOUT)
        expect(queued).to_contain_text("Queued")
        expect(queued).to_contain_text("second question")
        page.screenshot(path=os.path.join(SHOTS, "queued.png"))
        answers = page.locator(".message.assistant")
        expect(answers).to_have_count(2, timeout=TIMEOUT)
        expect(answers.last).to_contain_text("The second answer", timeout=TIMEOUT)
        expect(queued).to_be_hidden()
        users = page.locator(".message.user")
        expect(users).to_have_count(2)
        expect(users.last).to_contain_text("second question")
        conversation = page.evaluate("sessionStorage.getItem('agentd.conversation')")
        stored = page.request.get(f"{BASE}/api/local/conversations/{conversation}").json()
        roles = [m["role"] for m in stored["messages"]]
        assert roles == ["user", "assistant", "user", "assistant"], stored
        assert stored["messages"][2]["content"] == "second question", stored
        assert not errors, errors
        browser.close()
    print("queue ok")


if __name__ == "__main__":
    main()
