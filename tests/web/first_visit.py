"""The page's first visit on a loopback server with no keys, in headless Chromium: the agents
are listed and a typed message is answered at once, with no key, no user name and no Connect
press (the page chats as user `local`). Prints `first visit ok`; any failure raises.

Usage: first_visit.py BASE_URL SCREENSHOT_DIR
"""
import os
import sys

from playwright.sync_api import expect, sync_playwright

from pagekit import launch, open_page, TIMEOUT

BASE, SHOTS = sys.argv[1:3]


def main():
    with sync_playwright() as p:
        browser = launch(p)
        page, errors = open_page(browser)
        page.goto(BASE + "/")
        expect(page.locator("#agent option[value=chat]")).to_have_count(1, timeout=TIMEOUT)
        page.fill("#prompt", "hello there")
        page.click("#send")
        answer = page.locator(".message.assistant").last
        expect(answer.locator(".footer")).to_be_visible(timeout=TIMEOUT)
        expect(answer).to_contain_text("Hi from the first visit")
        expect(page.locator("#notice")).to_be_hidden()
        assert page.input_value("#user") == "local", page.input_value("#user")
        page.screenshot(path=os.path.join(SHOTS, "first-visit.png"))
        assert not errors, errors
        browser.close()
    print("first visit ok")


if __name__ == "__main__":
    main()
