"""The web page in headless Chromium (Debian's `chromium`, driven by Playwright), as a person
uses it. Prints one `STEP ok` line per step; any failure raises. Screenshots go to the folder
given last. The Rust test (tests/api/web.rs) queued the mock model's replies in this order.

Usage: page.py BASE_URL ADMIN_KEY RELOAD_ANSWER SCREENSHOT_DIR
"""
import os
import shutil
import sys

from playwright.sync_api import expect, sync_playwright

BASE, KEY, RELOAD_ANSWER, SHOTS = sys.argv[1:5]
TIMEOUT = 20_000


def chromium_path():
    for candidate in ("chromium", "chromium-browser"):
        found = shutil.which(candidate)
        if found:
            return found
    sys.exit("Chromium is missing: `apt-get install chromium` (or run .ci/run)")


def last_answer(page):
    return page.locator(".message.assistant").last


def wait_finished(page):
    expect(last_answer(page).locator(".footer")).to_be_visible(timeout=TIMEOUT)


def send(page, text):
    page.fill("#prompt", text)
    page.click("#send")


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(BASE + "/")

        # A wrong key: the page says so in words.
        page.fill("#key", "wrong-key")
        page.click("#connect")
        expect(page.locator("#notice")).to_contain_text("401", timeout=TIMEOUT)
        expect(page.locator("#notice")).to_contain_text("API key")
        print("401 ok")

        # The admin key has no user: the page asks for one.
        page.fill("#key", KEY)
        page.click("#connect")
        expect(page.locator("#user-field")).to_be_visible(timeout=TIMEOUT)
        page.fill("#user", "ada")
        page.click("#connect")
        expect(page.locator("#agent option[value=chat]")).to_have_count(1, timeout=TIMEOUT)

        # A streamed answer, rendered as Markdown once finished.
        send(page, "Say hello")
        wait_finished(page)
        expect(last_answer(page).locator(".text strong")).to_have_text("world", timeout=TIMEOUT)
        expect(last_answer(page).locator(".footer")).to_contain_text("tokens")
        page.screenshot(path=os.path.join(SHOTS, "chat.png"), full_page=True)
        print("stream ok")

        # A tool call (a new chat with the agent that has tools): open it and read its
        # arguments and result.
        page.click("#new-chat")
        page.select_option("#agent", "tooly")
        send(page, "Echo ping")
        wait_finished(page)
        tool = last_answer(page).locator("details.tool")
        expect(tool.locator("summary")).to_contain_text("test__echo")
        expect(tool.locator("summary")).to_contain_text("ms")
        tool.locator("summary").click()
        expect(tool.locator("pre.arguments")).to_contain_text('"text": "ping"')
        expect(tool.locator("pre.output")).to_have_text("ping")
        page.screenshot(path=os.path.join(SHOTS, "tool.png"), full_page=True)
        print("tool ok")

        # Markup a model writes shows as text and runs nothing.
        send(page, "Say something nasty")
        wait_finished(page)
        answer = last_answer(page).locator(".text")
        expect(answer).to_contain_text("<script>window.__xss=2</script>", timeout=TIMEOUT)
        expect(answer).to_contain_text("<img src=x")
        assert page.evaluate("window.__xss") is None, "script from a model answer ran"
        assert last_answer(page).locator("img, script").count() == 0
        print("xss ok")

        # Reload mid-answer: the answer finishes, each word once.
        send(page, "Count slowly")
        expect(last_answer(page).locator(".text")).to_contain_text("word2 ", timeout=TIMEOUT)
        page.reload()
        wait_finished(page)
        text = last_answer(page).locator(".text").inner_text()
        assert text.strip() == RELOAD_ANSWER.strip(), f"after reload: {text!r}"
        print("reload ok")

        # Stop: the run is cancelled and the page says so.
        send(page, "Count very slowly")
        expect(last_answer(page).locator(".text")).to_contain_text("slow1 ", timeout=TIMEOUT)
        page.click("#stop")
        expect(last_answer(page)).to_contain_text("Stopped.", timeout=TIMEOUT)
        expect(page.locator("#stop")).to_be_hidden()
        print("stop ok")

        # The runs console lists the runs; a run's timeline opens.
        page.click("#tab-runs")
        rows = page.locator("#run-table tbody tr")
        expect(rows.first).to_contain_text("cancelled", timeout=TIMEOUT)
        assert rows.count() >= 5, f"{rows.count()} runs listed"
        expect(page.locator("#run-table tbody")).to_contain_text("completed")
        expect(page.locator("#run-table tbody")).to_contain_text("chat")
        rows.first.click()
        expect(page.locator("#timeline-events")).to_contain_text("run.finished", timeout=TIMEOUT)
        page.screenshot(path=os.path.join(SHOTS, "runs.png"), full_page=True)
        print("runs ok")

        # A phone: no horizontal scroll.
        phone = browser.new_page(viewport={"width": 390, "height": 844})
        phone.goto(BASE + "/")
        phone.fill("#key", KEY)
        phone.fill("#user", "ada")
        phone.click("#connect")
        expect(phone.locator(".conversations li").first).to_be_visible(timeout=TIMEOUT)
        phone.locator(".conversations button").first.click()
        expect(phone.locator(".message").first).to_be_visible(timeout=TIMEOUT)
        phone.screenshot(path=os.path.join(SHOTS, "phone.png"), full_page=True)
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page is {width} px wide at 390 px"
        print("phone ok")

        assert not errors, f"page errors: {errors}"
        browser.close()


main()
