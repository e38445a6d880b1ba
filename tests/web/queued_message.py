"""A message sent from the page while an answer is coming (SPEC §13), in headless Chromium on a
keyless loopback server: it shows as queued under the thread, is answered after the first
answer (its own bubble and answer follow), and the stored history alternates. A file attached
before sending goes with the queued message: shown with it while it waits, in its bubble after,
and stored with it. Prints `queue ok`; any failure raises.

Usage: queued_message.py BASE_URL SCREENSHOT_DIR
"""
import os
import sys

from playwright.sync_api import expect, sync_playwright

from pagekit import launch, open_page, send, TIMEOUT

BASE, SHOTS = sys.argv[1:3]
NOTES = "# Notes\nthe queued file arrived"


def main():
    with sync_playwright() as p:
        browser = launch(p)
        page, errors = open_page(browser)
        page.goto(BASE + "/")
        expect(page.locator("#agent option[value=chat]")).to_have_count(1, timeout=TIMEOUT)
        send(page, "first question")
        expect(page.locator("#stop")).to_be_visible(timeout=TIMEOUT)
        expect(page.locator(".message.assistant").last).to_contain_text("slow0", timeout=TIMEOUT)
        page.set_input_files("#attach-input", files=[
            {"name": "notes.md", "mimeType": "text/markdown", "buffer": NOTES.encode()}])
        pending = page.locator("#pending-files .attachment")
        expect(pending).to_have_count(1, timeout=TIMEOUT)
        expect(pending.first).not_to_have_attribute("aria-busy", "true", timeout=TIMEOUT)
        send(page, "second question")
        queued = page.locator("#queued")
        expect(queued).to_be_visible(timeout=TIMEOUT)
        expect(queued).to_contain_text("Queued")
        expect(queued).to_contain_text("second question")
        expect(queued.locator(".message-file")).to_contain_text("notes.md")
        expect(pending).to_have_count(0)
        page.screenshot(path=os.path.join(SHOTS, "queued.png"))
        answers = page.locator(".message.assistant")
        expect(answers).to_have_count(2, timeout=TIMEOUT)
        expect(answers.last).to_contain_text("The second answer", timeout=TIMEOUT)
        expect(queued).to_be_hidden()
        users = page.locator(".message.user")
        expect(users).to_have_count(2)
        expect(users.last).to_contain_text("second question")
        expect(users.last.locator(".message-file")).to_contain_text("notes.md")
        conversation = page.evaluate("sessionStorage.getItem('agentd.conversation')")
        stored = page.request.get(f"{BASE}/api/local/conversations/{conversation}").json()
        roles = [m["role"] for m in stored["messages"]]
        assert roles == ["user", "assistant", "user", "assistant"], stored
        assert stored["messages"][2]["content"] == "second question", stored
        assert stored["messages"][2]["attachments"][0]["name"] == "notes.md", stored
        assert not errors, errors
        browser.close()
    print("queue ok")


if __name__ == "__main__":
    main()
